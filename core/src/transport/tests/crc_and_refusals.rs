//! The drivers' CRCs with the configured provider, and what a transport
//! that refuses a reply or a frame (for now, or for good) leads to.

use super::*;

/// A CRC32C provider that is not CRC32C: the portable value with bits
/// flipped. Ends that share it understand each other; nothing else does.
fn flipped_bytes(bytes: &[u8]) -> u32 {
    wire::Crc32c::PORTABLE.checksum(bytes) ^ 0x5A5A_5A5A
}

fn flipped_header(covered: &[u8; wire::HEADER_COVERED]) -> u32 {
    flipped_bytes(covered)
}

#[test]
fn both_drivers_compute_every_frames_crcs_with_the_configured_provider() {
    let flipped = wire::Crc32c::new("flipped", flipped_bytes, flipped_header);
    assert!(!flipped.check());
    for validate in [false, true] {
        let mut p = Pair::with_crc(Knobs::default(), 3 << 20, flipped, validate);
        p.connect();
        let submitted = submit_all(&mut p.client);
        p.acked(7);
        assert_eq!(p.app.hashes(), submitted, "validate {validate}");
        assert_eq!(p.log.reads().len(), 1, "the read was answered");
        let ends = [
            ("client", &p.client.transport().sent),
            ("server", &p.server.transport().sent),
        ];
        let mut payload_crcs = 0;
        for (side, sent) in ends {
            // The server's write completions fold: a Welcome, a read's
            // answer and at least one completion.
            let least = if side == "client" { 7 } else { 3 };
            assert!(sent.len() >= least, "{side} sent {}", sent.len());
            for frame in sent.iter() {
                assert_eq!(
                    wire::parse(frame).map(|_| ()),
                    Err(wire::WireError::HeaderChecksum {
                        expected: flipped_bytes(&frame[..44]),
                        actual: wire::Crc32c::PORTABLE.checksum(&frame[..44]),
                    }),
                    "{side}: a frame sealed with the builtin CRC"
                );
                let m = wire::parse_with(frame, &flipped).expect("sealed with the provider");
                payload_crcs += u32::from(m.validate && m.body.payload_len() > 0);
            }
        }
        // The control frames always carry one; with validate, the writes too.
        assert!(
            payload_crcs >= if validate { 8 } else { 2 },
            "{payload_crcs}"
        );
    }
}

// ---- regressions -----------------------------------------------------------------

#[test]
fn a_reply_the_server_transport_cannot_take_yet_is_delayed_not_dropped() {
    let mut p = Pair::new();
    p.connect();
    // The read's completion is refused five times; a write follows it.
    let read_comp_len = wire::HEADER_LEN + 333;
    p.server.transport_mut().knobs.block = Some((read_comp_len, 5));
    let read = Message::Read {
        len: 333,
        request: b"k",
    };
    assert_eq!(p.client.submit(read), Ok(0));
    assert_eq!(p.client.submit(Message::Write(&payload(1, 16))), Ok(1));
    p.poll();
    assert_eq!(p.app.delivered.len(), 2, "both delivered");
    let pending = p.server.core().pending_replies();
    assert_eq!(pending, 2, "both completions wait, in order");
    p.poll();
    assert!(p.log.reads().is_empty(), "no data yet");
    assert_eq!(p.base_sn(), 0, "and no ack");
    p.acked(2);
    assert_eq!(p.server.transport().blocked, 5, "refused again and again");
    let mut expected = vec![0u8; 333];
    answer(1, 0, b"k", &mut expected);
    assert_eq!(p.log.reads(), vec![(0, workload::hash(&expected))]);
    // Acknowledged only together with its data: no Acked past sn 0
    // before the read's data reached the handler.
    let log = &p.log.0;
    let first_ack = log
        .iter()
        .position(|s| matches!(s, Seen::Event(ClientEvent::Acked { upto }) if *upto > 0));
    let data = log.iter().position(|s| matches!(s, Seen::Read { .. }));
    assert!(data.is_some() && first_ack > data, "{log:?}");
    assert_eq!(p.server.send_errors(), 0);
    assert_eq!(p.server.core().stats().replies_discarded, 0);
    let connects = p.client.session().stats().connects;
    assert_eq!(connects, 1, "not recovered by a replay");
}

#[test]
fn a_reply_the_server_transport_can_never_send_closes_its_connection() {
    let mut p = Pair::new();
    p.connect();
    // The read's completion is larger than the server's transport sends.
    p.server.transport_mut().knobs.refuse_above = Some(1000);
    let read = Message::Read {
        len: 2000,
        request: &[],
    };
    p.client.submit(read).unwrap();
    assert!(p.until(100, |p| p.server.send_errors() == 1));
    assert_eq!(p.server.core().stats().replies_discarded, 1);
    assert_eq!(p.server.core().conn_count(), 0, "its connection was closed");
    assert!(p.log.reads().is_empty(), "the data was never sent");
    assert_eq!(p.base_sn(), 0, "so the read is unacknowledged");
}

#[test]
fn a_frame_the_transport_refuses_as_too_large_fails_the_client_without_a_gap() {
    let mut knobs = Knobs::default();
    knobs.caps.max_frame = 4096;
    knobs.refuse_above = Some(200);
    let mut p = Pair::with(knobs, 1 << 16);
    for (sn, len) in [(0, 100), (1, 1000), (2, 100)] {
        assert_eq!(p.client.submit(Message::Write(&payload(sn, len))), Ok(sn));
    }
    p.client.start(ms(0));
    assert!(p.until(100, |p| p.client.session().is_terminal()));
    let refused = FailReason::TransportRefused {
        len: wire::HEADER_LEN + 1000,
        max_frame: 4096,
    };
    assert_eq!(p.client.session().state(), ClientState::Failed(refused));
    assert!(p.log.events().any(|e| *e == ClientEvent::Failed(refused)));
    // Polled on, it stays failed: no reconnect loop.
    p.until(5000, |_| false);
    let stats = p.client.session().stats();
    assert_eq!(
        (stats.connects, p.client.send_errors()),
        (1, 1),
        "{stats:?}"
    );
    // Nothing was skipped: sn 2 never went out, the server saw no gap.
    assert_eq!(p.client.transport().data_sns(), vec![0]);
    assert_eq!(p.app.hashes().into_keys().collect::<Vec<u64>>(), vec![0]);
    assert_eq!(p.server.core().stats().live_gap_sns, 0);
    let live = |e: &ServerEvent| matches!(e, ServerEvent::LiveLoss { .. });
    assert!(!p.app.events.iter().any(live));
}

// ---- connection handles --------------------------------------------------------
