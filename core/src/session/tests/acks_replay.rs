//! Acks, replay and loss classification.

use super::*;

// ---- acks ------------------------------------------------------------------

#[test]
fn cumulative_ack_releases_the_send_window_and_unblocks_a_full_window() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 8);
    assert_eq!(
        c.submit(Message::Write(&payload(8, 16))),
        Err(SubmitError::WindowFull { outstanding: 8 }),
        "backpressure"
    );
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..5], t(1));
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 5);
    assert_eq!(c.submit(Message::Write(&payload(8, 16))), Ok(8));
}

#[test]
fn streamed_writes_are_acked_every_k_frames() {
    let mut cfg = ServerConfig::new(INSTANCE_A);
    cfg.ack_every = 3;
    let (mut c, mut s, mut out) = (client(config()), Server::new(cfg), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    for sn in 0..7 {
        c.submit(Message::StreamWrite(&payload(sn, 8))).unwrap();
    }
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let acks: Vec<u64> = out
        .frames
        .iter()
        .map(|(_, f)| wire::parse(f).unwrap())
        .filter(|m| m.body == Body::Ack)
        .map(|m| m.ack)
        .collect();
    assert_eq!(acks, vec![3, 6], "one Ack per K=3 streamed frames");
    assert_eq!(
        s.poll_timeout(),
        Some(t(1) + s.config().ack_delay),
        "the 7th waits for T"
    );
}

#[test]
fn streamed_writes_below_k_are_acked_after_t() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    c.submit(Message::StreamWrite(&payload(0, 8))).unwrap();
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert!(out.frames.is_empty(), "no completion for a streamed write");
    let due = s.poll_timeout().unwrap();
    assert_eq!(due, t(1) + Duration::from_micros(200));
    s.handle_timeout(due, &mut out);
    drain(&mut s, &mut out);
    let ack = wire::parse(&out.frames[0].1).unwrap();
    assert_eq!((ack.body, ack.ack), (Body::Ack, 1));
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn ack_beyond_anything_sent_is_a_protocol_error() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let _ = client_frames(&mut c, t(1));
    let ack = msg(1, 0, 5, Body::Ack);
    let buf = frame(&ack);
    c.handle_frame(t(2), &buf);
    assert_eq!(c.base_sn(), 0, "nothing released");
    let e = DisconnectCause::Protocol(ProtocolError::AckBeyondSent { ack: 5, sent: 1 });
    assert!(events(&mut c).contains(&ClientEvent::Disconnected { epoch: 1, cause: e }));
}

// ---- replay and loss classification ----------------------------------------

#[test]
fn replay_resends_every_unacked_sn_in_ascending_order() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 6);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..2], t(1));
    to_client(&mut c, &mut out, 1, t(1));
    c.handle_disconnected(t(2), DisconnectReason::PeerClosed);
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(60));
    let replay = client_frames(&mut c, t(60));
    assert_eq!(sns(&replay), vec![2, 3, 4, 5]);
    let bodies = |fs: &[Vec<u8>]| -> Vec<Vec<u8>> {
        fs.iter()
            .map(|f| match wire::parse(f).unwrap().body {
                Body::Write { data } => data.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(bodies(&replay), bodies(&frames[2..]), "the same bytes");
}

#[test]
fn replay_off_gives_up_in_flight_sns_and_both_sides_classify_them() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..2], t(1)); // 2, 3, 4 die in flight
    out.take();
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(60));
    assert!(events(&mut c).contains(&ClientEvent::NotReplayed { range: 2..5 }));
    assert!(out.events.contains(&ServerEvent::LostInFlight {
        session: SESSION,
        range: 2..5
    }));
    assert_eq!(s.stats().lost_in_flight, 3);
    assert_eq!(s.stats().lost_live, 0);
    assert_eq!(c.stats().not_replayed, 3);
    assert!(
        client_frames(&mut c, t(60)).is_empty(),
        "nothing is replayed"
    );
    assert!(c.can_submit());
    assert_eq!(c.submit(Message::Write(&payload(5, 16))), Ok(5));
    let next = client_frames(&mut c, t(61));
    to_server(&mut s, &mut out, 2, &next, t(61));
    assert_eq!(out.delivered(), vec![0, 1, 5]);
    assert_eq!(
        s.stats().live_gap_sns,
        0,
        "no live gap: the handshake gave them up"
    );
}

#[test]
fn a_jump_on_a_live_connection_is_reported_at_once_as_live_loss() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    to_server(
        &mut s,
        &mut out,
        1,
        &[frames[0].clone(), frames[3].clone()],
        t(1),
    );
    assert!(out.events.contains(&ServerEvent::LiveLoss {
        session: SESSION,
        epoch: 1,
        missing: 1..3
    }));
    assert_eq!(s.stats().live_gap_sns, 2);
    assert_eq!(s.holes(SESSION).collect::<Vec<Range<u64>>>(), vec![1..3]);
    // The cumulative ack stays at the hole, so the client keeps 1 and 2.
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 1);
}

#[test]
fn replay_after_reconnect_fills_live_holes_and_counts_them_recovered() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    let frames = client_frames(&mut c, t(1));
    to_server(
        &mut s,
        &mut out,
        1,
        &[frames[0].clone(), frames[2].clone()],
        t(1),
    );
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(60));
    let replay = client_frames(&mut c, t(60));
    assert_eq!(sns(&replay), vec![1, 2, 3]);
    to_server(&mut s, &mut out, 2, &replay, t(60));
    assert_eq!(out.delivered(), vec![0, 2, 1, 3]);
    out.assert_payloads(16);
    assert_eq!(s.stats().recovered, 1);
    assert_eq!(
        s.stats().duplicates,
        1,
        "sn 2 arrived twice, delivered once"
    );
    assert_eq!(s.session(SESSION).unwrap().missing, 0);
}

#[test]
fn sequence_numbers_near_sn_max_are_refused_not_wrapped() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let buf = hello_frame(1, SN_MAX - 1, SN_MAX - 1);
    serve(&mut s, &mut out, cid(1), &buf, t(0));
    for sn in [SN_MAX - 1, SN_MAX + 1] {
        let data = [0u8; 0];
        let write = IoMsg {
            session: SESSION,
            epoch: 1,
            sn,
            ack: 0,
            validate: false,
            stream: false,
            body: Body::Write { data: &data },
        };
        let buf = frame(&write);
        serve(&mut s, &mut out, cid(1), &buf, t(1));
    }
    assert_eq!(out.delivered(), vec![SN_MAX - 1]);
    assert_eq!(
        out.rejected(),
        vec![RejectReason::TooFar],
        "SN_MAX + 1 is refused"
    );
}

#[test]
fn with_replay_off_each_sn_given_up_at_a_server_restart_is_named_once_and_never_acked() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut a, mut out_a) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 6);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut a, &mut out_a, 1, &frames[..3], t(1)); // 0..2 delivered
    out_a.take(); // their acks are lost; then the server dies
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let (mut b, mut out_b) = (server(INSTANCE_B), Out::default());
    connect(&mut c, &mut b, &mut out_b, 2, t(60));
    submit_writes(&mut c, 2);
    to_server(&mut b, &mut out_b, 2, &client_frames(&mut c, t(61)), t(61));
    // Writes are answered at once (a completion each).
    to_client(&mut c, &mut out_b, 2, t(62));
    let ev = events(&mut c);
    // Every sn 0..6 was in flight at the restart: named once, by one
    // NotReplayed; the restart itself names no range.
    let mut named = vec![0u32; 8];
    for e in &ev {
        match e {
            ClientEvent::NotReplayed { range } => {
                assert!(!range.is_empty(), "{ev:?}");
                range.clone().for_each(|sn| named[sn as usize] += 1);
            }
            ClientEvent::ServerRestarted { unconfirmed, .. } => {
                assert!(unconfirmed.is_empty(), "{ev:?}");
            }
            _ => {}
        }
    }
    assert_eq!(named, vec![1, 1, 1, 1, 1, 1, 0, 0], "{ev:?}");
    assert!(ev.iter().any(|e| matches!(
        e,
        ClientEvent::ServerRestarted {
            previous: Some(INSTANCE_A),
            ..
        }
    )));
    // B took 6 and 7 and acknowledged them: Acked passes the given-up
    // sns, and the acknowledged count holds only the delivered ones.
    assert_eq!(out_b.delivered(), vec![6, 7], "{ev:?}");
    assert!(ev.contains(&ClientEvent::Acked { upto: 8 }), "{ev:?}");
    assert_eq!(c.stats().acked, 2);
    assert_eq!(c.stats().not_replayed, 6);
}

#[test]
fn sns_a_welcome_confirms_are_announced_as_acked() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    to_server(&mut s, &mut out, 1, &client_frames(&mut c, t(1)), t(1));
    out.take(); // delivered; the completions are lost with the connection
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    events(&mut c);
    connect(&mut c, &mut s, &mut out, 2, t(60));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::Acked { upto: 3 }), "{ev:?}");
    assert_eq!(c.stats().acked, 3);
    assert_eq!(c.outstanding(), 0);
}
