//! The application's bytes: kept in the client's storage until
//! acknowledged, backpressure when the window or the storage is full, the
//! limits on one message, and the server's queue of replies.

use super::*;
use crate::seq::RingFull;

/// A client of window `N` over `storage` bytes, connected to `s`.
fn small<const N: usize>(
    storage: usize,
    s: &mut Server,
    out: &mut Out,
) -> ClientSession<N, Vec<u8>> {
    let mut c = ClientSession::<N, Vec<u8>>::new(config(), t(0), vec![0; storage]);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    for f in client_frames(&mut c, t(0)) {
        serve(s, out, cid(1), &f, t(0));
    }
    for (_, f) in out.take() {
        assert_eq!(c.handle_frame(t(0), &f), None);
    }
    assert!(matches!(c.state(), ClientState::Established { .. }));
    c
}

/// The client's frames to `s` on connection 1, and the answers back.
fn round_trip<const N: usize>(c: &mut ClientSession<N, Vec<u8>>, s: &mut Server, out: &mut Out) {
    for f in client_frames(c, t(1)) {
        serve(s, out, cid(1), &f, t(1));
    }
    for (_, f) in out.take() {
        assert_eq!(c.handle_frame(t(1), &f), None);
    }
}

#[test]
fn window_full_with_n_outstanding_clears_after_acks() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let mut c = small::<4>(4096, &mut s, &mut out);
    for sn in 0..4 {
        assert_eq!(c.submit(Message::Write(&payload(sn, 10))), Ok(sn));
    }
    assert_eq!(
        c.submit(Message::Write(&payload(4, 10))),
        Err(SubmitError::WindowFull { outstanding: 4 })
    );
    assert!(!c.can_submit());
    assert_eq!(
        (c.next_sn(), c.stats().submitted),
        (4, 4),
        "nothing changed"
    );
    round_trip(&mut c, &mut s, &mut out);
    assert_eq!(c.base_sn(), 4, "acknowledged");
    assert_eq!(c.submit(Message::Write(&payload(4, 10))), Ok(4));
    round_trip(&mut c, &mut s, &mut out);
    assert_eq!(out.delivered(), vec![0, 1, 2, 3, 4]);
    out.assert_payloads(10);
}

#[test]
fn buffer_full_when_the_storage_is_taken_clears_after_acks() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let mut c = small::<16>(256, &mut s, &mut out);
    assert_eq!(c.submit(Message::Write(&payload(0, 100))), Ok(0));
    assert_eq!(c.submit(Message::Write(&payload(1, 100))), Ok(1));
    let full = RingFull {
        need: 100,
        used: 200,
        capacity: 256,
    };
    assert_eq!(
        c.submit(Message::Write(&payload(2, 100))),
        Err(SubmitError::BufferFull(full))
    );
    assert_eq!(c.next_sn(), 2, "nothing changed");
    assert!(c.can_submit(), "the window has room: it is the storage");
    // A smaller message still fits in the 56 bytes left.
    assert_eq!(c.submit(Message::Write(&payload(2, 56))), Ok(2));
    round_trip(&mut c, &mut s, &mut out);
    assert_eq!(c.base_sn(), 3, "acknowledged, storage free");
    // The freed bytes take a message that wraps to the start.
    assert_eq!(c.submit(Message::Write(&payload(3, 200))), Ok(3));
    round_trip(&mut c, &mut s, &mut out);
    let lens: Vec<(u64, usize)> = out.deliveries.iter().map(|d| (d.sn, d.len)).collect();
    assert_eq!(lens, vec![(0, 100), (1, 100), (2, 56), (3, 200)]);
    for d in &out.deliveries {
        assert_eq!(d.hash, workload::hash(&payload(d.sn, d.len)), "sn {}", d.sn);
    }
}

#[test]
fn too_long_names_every_limit_and_changes_nothing() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let mut c = small::<4>(300, &mut s, &mut out);
    let limits = MessageLimits {
        configured: wire::MAX_DATA_LEN as usize,
        transport: wire::MAX_DATA_LEN as usize,
        storage: 300,
    };
    assert_eq!(c.limits(), limits);
    assert_eq!(
        c.submit(Message::Write(&[0; 301])),
        Err(SubmitError::TooLong { len: 301, limits })
    );
    c.set_transport_limit(100);
    let limits = MessageLimits {
        transport: 100,
        ..limits
    };
    assert_eq!(
        c.submit(Message::StreamWrite(&[0; 101])),
        Err(SubmitError::TooLong { len: 101, limits })
    );
    let read = Message::Read {
        len: 101,
        request: &[],
    };
    assert_eq!(
        c.submit(read),
        Err(SubmitError::TooLong { len: 101, limits }),
        "a read's length counts, not its request"
    );
    assert_eq!(c.submit(Message::Write(&[0; 100])), Ok(0), "at the limit");
    assert_eq!(c.stats().submitted, 1);
}

#[test]
fn submit_with_writes_the_bytes_in_place_and_refuses_mismatched_lengths() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let sn = c.submit_with(RequestOp::Write, 16, None, |buf| {
        assert_eq!(buf.len(), 16);
        workload::fill(SESSION, 0, buf);
    });
    assert_eq!(sn, Ok(0));
    let mut called = false;
    let bad = c.submit_with(RequestOp::Read, 4, None, |_| called = true);
    assert_eq!(bad, Err(SubmitError::BadRequest), "a read needs a length");
    let bad = c.submit_with(RequestOp::Write, 4, Some(4), |_| called = true);
    assert_eq!(bad, Err(SubmitError::BadRequest), "a write has none");
    assert!(!called, "fill is not called for a refused message");
    let read = c.submit_with(RequestOp::Read, 3, Some(64), |buf| {
        buf.copy_from_slice(b"abc");
    });
    assert_eq!(read, Ok(1));
    exchange(&mut c, &mut s, &mut out, 1, t(1));
    assert_eq!(out.delivered(), vec![0, 1]);
    assert_eq!(out.deliveries[0].hash, workload::hash(&payload(0, 16)));
    assert_eq!(
        (out.deliveries[1].hash, out.deliveries[1].read_len),
        (workload::hash(b"abc"), 64)
    );
    assert_eq!(out.reads, vec![(1, answer_bytes(1, b"abc", 64))]);
}

#[test]
fn replies_wait_in_order_until_written_and_die_with_their_connection() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let read = Message::Read {
        len: 32,
        request: b"k",
    };
    c.submit(read).unwrap();
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(1));
    for f in &frames {
        s.handle_frame(t(1), cid(1), f, &mut out);
    }
    assert_eq!(s.pending_replies(), 2, "ReadComp, WriteComp queued");
    assert!(out.responses.is_empty(), "answered only when it goes out");
    let first = s.poll_transmit().unwrap();
    assert_eq!(
        (first.conn, first.len()),
        (cid(1), wire::HEADER_LEN + 32),
        "the read's completion first"
    );
    assert_eq!(
        s.poll_transmit(),
        Some(first),
        "nothing leaves until written"
    );
    // The connection ends before they are written: both are dropped, the
    // client resends the sns after its reconnect.
    s.handle_disconnected(cid(1));
    assert_eq!(s.poll_transmit(), None);
    assert_eq!(s.stats().replies_discarded, 2);
    assert_eq!(s.stats().frames_sent, 1, "only the Welcome went out");
    assert!(out.responses.is_empty());
    assert_eq!(out.delivered(), vec![0, 1]);
}

#[test]
fn discarded_transmit_ends_its_connection() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    for f in client_frames(&mut c, t(1)) {
        s.handle_frame(t(1), cid(1), &f, &mut out);
    }
    let tx = s.poll_transmit().unwrap();
    s.discard_transmit(tx);
    assert_eq!(s.conn_count(), 0, "the connection is treated as ended");
    assert_eq!(s.session(SESSION).unwrap().conn, None);
    assert_eq!(s.poll_transmit(), None, "nothing else waits");
    assert_eq!(
        s.stats().replies_discarded,
        1,
        "the two completions, folded into one, died with it"
    );
}

#[test]
fn a_message_past_half_the_storage_is_taken_once_nothing_is_outstanding() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let mut c = small::<16>(1000, &mut s, &mut out);
    assert_eq!(c.submit(Message::Write(&payload(0, 300))), Ok(0));
    round_trip(&mut c, &mut s, &mut out);
    assert_eq!(c.outstanding(), 0, "acknowledged");
    // 700 bytes are left before the end of the storage, 1000 in all.
    assert_eq!(c.submit(Message::Write(&payload(1, 800))), Ok(1));
    round_trip(&mut c, &mut s, &mut out);
    assert_eq!(c.submit(Message::Write(&payload(2, 900))), Ok(2));
    round_trip(&mut c, &mut s, &mut out);
    let lens: Vec<(u64, usize)> = out.deliveries.iter().map(|d| (d.sn, d.len)).collect();
    assert_eq!(lens, vec![(0, 300), (1, 800), (2, 900)]);
    for d in &out.deliveries {
        assert_eq!(d.hash, workload::hash(&payload(d.sn, d.len)), "sn {}", d.sn);
    }
}
