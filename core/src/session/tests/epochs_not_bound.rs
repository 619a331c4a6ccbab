//! Epochs, and data frames that come before their connection's `Hello`.

use super::*;

// ---- epochs ----------------------------------------------------------------

#[test]
fn frames_of_an_older_epoch_are_discarded_as_stale_and_never_delivered_twice() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let old = client_frames(&mut c, t(1)); // sns 0, 1 in epoch 1, still in flight
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    // The server has not noticed: connection 1 is still bound when the
    // owner's Hello of epoch 2 arrives, and is closed for it.
    connect(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(
        out.closed,
        vec![cid(1)],
        "the superseded connection is closed"
    );
    assert_eq!(s.stats().superseded, 1);
    let replay = client_frames(&mut c, t(50));
    to_server(&mut s, &mut out, 2, &replay, t(50));
    // Epoch-1 frames that reach the session on the new connection are
    // stale (a transport does not report frames of a closed connection).
    to_server(&mut s, &mut out, 2, &old, t(51));
    assert_eq!(out.delivered(), vec![0, 1]);
    assert_eq!(s.stats().stale, 2);
    assert_eq!(
        s.stats().duplicates,
        0,
        "stale frames never reach the tracker"
    );
}

#[test]
fn hello_with_an_epoch_not_newer_than_the_sessions_is_rejected() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let buf = hello_frame(1, 0, 0);
    serve(&mut s, &mut out, cid(2), &buf, t(1));
    assert_eq!(out.rejected(), vec![RejectReason::StaleEpoch]);
    assert_eq!(
        s.session(SESSION).unwrap().conn,
        Some(cid(1)),
        "the live binding is untouched"
    );
}

#[test]
fn client_ignores_server_frames_of_an_older_epoch() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let late_comp = out.take();
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(50));
    let acked = c.stats().acked;
    for (_, f) in late_comp {
        assert_eq!(c.handle_frame(t(51), &f), None);
    }
    assert_eq!(c.stats().stale_frames, 1);
    assert_eq!(c.stats().acked, acked);
}

// ---- data before the Hello ---------------------------------------------------

/// The client's side of a connection whose server refused its first frame
/// as `NotBound`: a reconnect, and the handshake on connection `conn`.
fn refused_then_reconnect(c: &mut Client, s: &mut Server, out: &mut Out, conn: u32, now: Instant) {
    assert!(
        matches!(c.state(), ClientState::Backoff { .. }),
        "{:?}",
        c.state()
    );
    assert_eq!(c.poll_action(), Some(Action::Close));
    connect(c, s, out, conn, now);
}

#[test]
fn data_before_the_hello_is_refused_not_bound_and_delivered_once_after_the_handshake() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    // Same frames on a fresh server connection, before any Hello there.
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    s.handle_disconnected(cid(1));
    c.handle_disconnected(
        t(1),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let _ = c.poll_action();
    to_server(&mut s2, &mut out2, 7, &frames, t(1));
    assert!(
        out2.delivered().is_empty(),
        "nothing delivered before the handshake"
    );
    let rejected = out2.rejected();
    assert!(
        !rejected.is_empty() && rejected.iter().all(|&r| r == RejectReason::NotBound),
        "{rejected:?}"
    );
    assert_eq!(
        out2.last_reject(),
        Some((RejectReason::NotBound, Op::Write as u64))
    );
    assert_eq!(
        out2.closed.first(),
        Some(&cid(7)),
        "the first one closes it"
    );
    assert_eq!(s2.conn_count(), 0);
    assert_eq!(s2.session_count(), 0, "no session from a data frame");
    // The client resends them after its handshake with B: each once.
    connect(&mut c, &mut s2, &mut out2, 8, t(50));
    exchange(&mut c, &mut s2, &mut out2, 8, t(50));
    assert_eq!(out2.delivered(), vec![0, 1, 2], "in order, exactly once");
    out2.assert_payloads(16);
    assert_eq!(c.base_sn(), 3);
}

#[test]
fn a_not_bound_reject_makes_the_client_reconnect_and_replay() {
    let (mut c, mut s, mut out) = setup();
    submit_writes(&mut c, 2);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let _hello_lost = client_frames(&mut c, t(0));
    // Eager sends are off: nothing follows the Hello. The server sees a
    // data frame of this connection first (its Hello was lost), e.g. a
    // probe: refused.
    let probe = frame(&msg(1, 0, 0, Body::Probe));
    to_server(&mut s, &mut out, 1, &[probe], t(0));
    assert_eq!(out.rejected(), vec![RejectReason::NotBound]);
    to_client(&mut c, &mut out, 1, t(0));
    assert!(events(&mut c).contains(&ClientEvent::Disconnected {
        epoch: 1,
        cause: DisconnectCause::Rejected {
            reason: RejectReason::NotBound,
            detail: Op::Probe as u64
        }
    }));
    refused_then_reconnect(&mut c, &mut s, &mut out, 2, t(50));
    exchange(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(out.delivered(), vec![0, 1]);
    out.assert_payloads(16);
}

#[test]
fn eager_frames_follow_the_hello_only_when_nothing_is_unacknowledged() {
    let (mut c, mut s, mut out, first) = eager_start();
    assert_eq!(first.len(), 3, "Hello, then sns 0 and 1 before the Welcome");
    to_server(&mut s, &mut out, 1, &first, t(1));
    assert_eq!(out.delivered(), vec![0, 1]);
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 2);
    // Unacknowledged frames at a reconnect: no early sends, replay first.
    submit_writes(&mut c, 1);
    let lost = client_frames(&mut c, t(2));
    assert_eq!(sns(&lost), vec![2]);
    c.handle_disconnected(
        t(3),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    submit_writes(&mut c, 1);
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due);
    }
    let _ = c.poll_action();
    c.handle_connected(t(50));
    assert_eq!(client_frames(&mut c, t(50)).len(), 1, "only the Hello");
}

#[test]
fn eager_frames_that_overtake_their_hello_are_refused_and_delivered_once_after_it() {
    let (mut c, mut s, mut out, first) = eager_start();
    assert_eq!(first.len(), 3, "Hello, then sns 0 and 1");
    // A transport that broke its in-order promise: the data comes first.
    to_server(&mut s, &mut out, 1, &first[1..2], t(1));
    assert!(out.delivered().is_empty(), "never delivered out of turn");
    assert_eq!(out.rejected(), vec![RejectReason::NotBound]);
    assert_eq!(out.closed, vec![cid(1)]);
    to_client(&mut c, &mut out, 1, t(1));
    refused_then_reconnect(&mut c, &mut s, &mut out, 2, t(50));
    exchange(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(out.delivered(), vec![0, 1], "each exactly once");
    out.assert_payloads(16);
    assert_eq!(c.base_sn(), 2);
}

/// An eager client with sns 0 and 1 submitted, just connected: its first
/// frames (the `Hello` and what may follow it before the `Welcome`).
fn eager_start() -> (Client, Server, Out, Vec<Vec<u8>>) {
    let mut cfg = config();
    cfg.eager = true;
    let (mut c, s, out) = (client(cfg), server(INSTANCE_A), Out::default());
    submit_writes(&mut c, 2);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let first = client_frames(&mut c, t(0));
    (c, s, out, first)
}
