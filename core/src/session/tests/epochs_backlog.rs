//! Epochs, and the backlog of frames that come before the handshake.

use super::*;

// ---- epochs ----------------------------------------------------------------

#[test]
fn frames_of_an_older_epoch_are_discarded_as_stale_and_never_delivered_twice() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let old = client_frames(&mut c, t(1)); // sns 0, 1 in epoch 1, still in flight
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    // The server has not noticed: connection 1 is still bound when the
    // owner's Hello of epoch 2 arrives, and is closed for it.
    connect(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(out.closed, vec![1], "the superseded connection is closed");
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
    let hello = msg(
        1,
        0,
        0,
        Body::Hello {
            base_sn: 0,
            next_sn: 0,
            token: TOKEN,
            window: 128,
            replay: true,
        },
    );
    let buf = frame(&hello);
    s.handle_frame(t(1), 2, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::StaleEpoch]);
    assert_eq!(
        s.session(SESSION).unwrap().conn,
        Some(1),
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
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    connect(&mut c, &mut s, &mut out, 2, t(50));
    let acked = c.stats().acked;
    for (_, f) in late_comp {
        c.handle_frame(t(51), &f);
    }
    assert_eq!(c.stats().stale_frames, 1);
    assert_eq!(c.stats().acked, acked);
}

// ---- backlog ---------------------------------------------------------------

#[test]
fn frames_before_the_handshake_wait_in_the_backlog_and_are_processed_after_it() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    // Same frames on a fresh server connection, before any Hello there.
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    to_server(&mut s2, &mut out2, 7, &frames, t(1));
    assert!(
        out2.delivered().is_empty(),
        "nothing delivered before the handshake"
    );
    assert_eq!(s2.stats().backlogged, 3);
    let hello = msg(
        1,
        0,
        0,
        Body::Hello {
            base_sn: 0,
            next_sn: 3,
            token: TOKEN,
            window: 128,
            replay: true,
        },
    );
    let buf = frame(&hello);
    s2.handle_frame(t(2), 7, &buf, &mut out2);
    assert_eq!(
        out2.delivered(),
        vec![0, 1, 2],
        "processed after the handshake, in order"
    );
    assert!(out2.rejected().is_empty());
}

#[test]
fn eager_frames_follow_the_hello_only_when_nothing_is_unacknowledged() {
    let mut cfg = config();
    cfg.eager = true;
    let (mut c, mut s, mut out) = (Client::new(cfg, t(0)), server(INSTANCE_A), Out::default());
    submit_writes(&mut c, 2);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let first = client_frames(&mut c, t(0));
    assert_eq!(first.len(), 3, "Hello, then sns 0 and 1 before the Welcome");
    // The data overtakes the Hello on the way (reordering): backlog, then in order.
    to_server(&mut s, &mut out, 1, &first[1..], t(1));
    assert!(out.delivered().is_empty());
    to_server(&mut s, &mut out, 1, &first[..1], t(1));
    assert_eq!(out.delivered(), vec![0, 1]);
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 2);
    // Unacknowledged frames at a reconnect: no early sends, replay first.
    submit_writes(&mut c, 1);
    let lost = client_frames(&mut c, t(2));
    assert_eq!(sns(&lost), vec![2]);
    c.handle_disconnected(t(3), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
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
fn backlog_overflow_rejects_the_connection_with_a_clear_reason() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    to_server(&mut s2, &mut out2, 7, &frames, t(1)); // backlog holds 4
    assert_eq!(out2.rejected(), vec![RejectReason::BacklogOverflow]);
    assert_eq!(out2.closed, vec![7]);
    assert_eq!(s2.stats().rejects(RejectReason::BacklogOverflow), 1);
    assert_eq!(
        s2.stats().backlog_discarded,
        4,
        "unacknowledged: the client replays them"
    );
    assert_eq!(s2.conn_count(), 0);
}
