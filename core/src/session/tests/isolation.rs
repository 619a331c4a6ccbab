//! Per-connection replies: a connection the transport refuses waits
//! alone, connections take turns, a full queue folds acks, an overflow
//! closes only its own connection and says so, and a connection that
//! never says `Hello` is closed at its deadline.

use super::*;

const OTHER: u64 = 0x07E4_5E55;

/// A frame of session `session` (control bodies checksummed).
fn frame_of(session: u64, epoch: u32, sn: u64, body: Body<'_>) -> Vec<u8> {
    frame(&IoMsg {
        session,
        ..msg(epoch, sn, 0, body)
    })
}

fn hello_of(session: u64) -> Vec<u8> {
    let body = Body::Hello {
        base_sn: 0,
        next_sn: 0,
        token: TOKEN,
        window: 128,
        replay: true,
    };
    frame_of(session, 1, 0, body)
}

fn write_of(session: u64, sn: u64) -> Vec<u8> {
    frame_of(session, 1, sn, Body::Write { data: b"data" })
}

fn read_of(session: u64, sn: u64) -> Vec<u8> {
    let body = Body::Read {
        len: 8,
        request: b"k",
    };
    frame(&IoMsg {
        session,
        validate: true,
        ..msg(1, sn, 0, body)
    })
}

/// Writes the frame offered; returns its op, sn and ack.
fn send(s: &mut Server, out: &mut Out, tx: ServerTransmit) -> (Op, u64, u64) {
    let mut buf = vec![0u8; tx.len()];
    assert_eq!(s.write_transmit(tx, &mut buf, out), tx.len());
    let m = wire::parse(&buf).unwrap();
    (m.body.op(), m.sn, m.ack)
}

/// Two bound connections: `SESSION` on 1, `OTHER` on 2, their Welcomes
/// sent.
fn two_sessions() -> (Server, Out) {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    serve(&mut s, &mut out, cid(1), &hello_of(SESSION), t(0));
    serve(&mut s, &mut out, cid(2), &hello_of(OTHER), t(0));
    out.take();
    (s, out)
}

#[test]
fn a_connection_the_transport_refuses_waits_while_the_others_go_on() {
    let (mut s, mut out) = two_sessions();
    s.handle_frame(t(1), cid(1), &write_of(SESSION, 0), &mut out);
    s.handle_frame(t(1), cid(2), &write_of(OTHER, 0), &mut out);
    assert_eq!(s.pending_replies(), 2);
    let first = s.poll_transmit().unwrap();
    assert_eq!(first.conn, cid(1), "queued first, offered first");
    s.transmit_blocked(first);
    let second = s.poll_transmit().expect("the other connection goes on");
    assert_eq!(second.conn, cid(2));
    assert_eq!(send(&mut s, &mut out, second).0, Op::WriteComp);
    assert_eq!(
        s.poll_transmit(),
        None,
        "the refused one waits: the round ends"
    );
    assert_eq!(s.pending_replies(), 1, "delayed, not dropped");
    let again = s.poll_transmit().expect("offered again in the next round");
    assert_eq!(again.conn, cid(1));
    assert_eq!(send(&mut s, &mut out, again).1, 0);
    assert_eq!(s.pending_replies(), 0);
}

#[test]
fn connections_take_turns_one_frame_each() {
    let (mut s, mut out) = two_sessions();
    // Read answers do not fold: each is a frame of its own.
    for sn in 0..3 {
        s.handle_frame(t(1), cid(1), &read_of(SESSION, sn), &mut out);
    }
    for sn in 0..3 {
        s.handle_frame(t(1), cid(2), &read_of(OTHER, sn), &mut out);
    }
    let mut order = Vec::new();
    while let Some(tx) = s.poll_transmit() {
        order.push((tx.conn.slot(), send(&mut s, &mut out, tx).1));
    }
    assert_eq!(order, vec![(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (2, 2)]);
}

#[test]
fn write_completions_fold_and_lose_no_acknowledgement() {
    let (mut s, mut out) = two_sessions();
    let n = 3 * CONN_REPLIES as u64;
    for sn in 0..n {
        s.handle_frame(t(1), cid(1), &write_of(SESSION, sn), &mut out);
        assert_eq!(s.pending_replies(), 1, "sn {sn}: one completion says all");
    }
    assert_eq!(s.stats().slow_consumers, 0, "completions fold: not slow");
    assert!(!s.needs_transmit(), "no queue is near full");
    // A read's answer takes a place of its own; a write after it folds
    // into nothing before it.
    s.handle_frame(t(1), cid(1), &read_of(SESSION, n), &mut out);
    s.handle_frame(t(1), cid(1), &write_of(SESSION, n + 1), &mut out);
    let mut sent = Vec::new();
    while let Some(tx) = s.poll_transmit() {
        sent.push(send(&mut s, &mut out, tx));
    }
    assert_eq!(
        sent,
        vec![
            (Op::WriteComp, n - 1, n),
            (Op::ReadComp, n, n + 1),
            (Op::WriteComp, n + 1, n + 2)
        ],
        "each acknowledges every sn before it"
    );
    assert_eq!(out.delivered().len() as u64, n + 2);
}

#[test]
fn read_completions_that_overflow_close_only_their_connection_and_say_so() {
    let (mut s, mut out) = two_sessions();
    // Nothing is transmitted: the transport took none of them.
    let mut sn = 0;
    while s.stats().slow_consumers == 0 {
        assert!(sn <= CONN_REPLIES as u64, "the queue overflowed unnoticed");
        s.handle_frame(t(1), cid(1), &read_of(SESSION, sn), &mut out);
        sn += 1;
    }
    assert_eq!(
        sn,
        CONN_REPLIES as u64 + 1,
        "the first frame that finds no room"
    );
    let slow: Vec<&ServerEvent> = out
        .events
        .iter()
        .filter(|e| matches!(e, ServerEvent::SlowConsumer { .. }))
        .collect();
    assert_eq!(
        slow,
        vec![&ServerEvent::SlowConsumer {
            conn: cid(1),
            session: Some(SESSION),
            dropped: CONN_REPLIES,
        }]
    );
    assert_eq!(s.stats().replies_discarded, CONN_REPLIES as u64);
    assert_eq!(
        out.delivered().len(),
        CONN_REPLIES,
        "the frame that found no room was not taken"
    );
    assert!(s.close_pending());
    assert_eq!(s.poll_close(), Some(cid(1)), "closed");
    assert_eq!(s.session(SESSION).unwrap().conn, None);
    // The other connection is untouched.
    s.handle_frame(t(2), cid(2), &write_of(OTHER, 0), &mut out);
    let tx = s.poll_transmit().unwrap();
    assert_eq!(tx.conn, cid(2));
    assert_eq!(send(&mut s, &mut out, tx).0, Op::WriteComp);
    assert!(out.responses.is_empty(), "no read was answered half");
}

#[test]
fn a_connection_without_hello_is_closed_at_its_handshake_deadline() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let limit = s.config().handshake_timeout;
    assert_eq!(limit, Duration::from_secs(5), "the documented default");
    assert!(s.handle_accepted(t(0), cid(1), &mut out));
    assert!(s.handle_accepted(t(1000), cid(2), &mut out));
    assert_eq!(s.poll_timeout(), Some(t(5000)), "the earliest deadline");
    // Connection 2 says Hello in time: it is no longer on the clock.
    serve(&mut s, &mut out, cid(2), &hello_of(SESSION), t(2000));
    s.handle_timeout(t(4999), &mut out);
    assert_eq!(s.poll_close(), None, "not yet");
    s.handle_timeout(t(5000), &mut out);
    assert_eq!(s.poll_close(), Some(cid(1)));
    assert_eq!(s.stats().handshake_timeouts, 1);
    assert!(out.events.iter().any(|e| *e
        == ServerEvent::HandshakeTimeout {
            conn: cid(1),
            timeout: limit
        }));
    assert_eq!(s.conn_count(), 1, "the bound connection stays");
    assert_eq!(s.poll_timeout(), None, "no deadline left");
    s.handle_timeout(t(60_000), &mut out);
    assert_eq!(s.poll_close(), None);
    assert_eq!(s.session(SESSION).unwrap().conn, Some(cid(2)));
}
