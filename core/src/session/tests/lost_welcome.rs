//! Lost Welcomes (found by the session and loopback_e2e fuzz targets).

use super::*;

// ---- lost Welcomes (found by the session and loopback_e2e fuzz targets) ----

/// The client's side of a handshake whose Welcome never arrives.
pub(super) fn handshake_welcome_lost(
    c: &mut Client,
    s: &mut Server,
    out: &mut Out,
    conn: u32,
    now: Instant,
) {
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due.max(now));
    }
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(now);
    let hello = client_frames(c, now);
    to_server(s, out, conn, &hello, now);
    out.take(); // the Welcome is lost with the connection
    c.handle_disconnected(
        now,
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(conn));
}

#[test]
fn a_lost_welcome_after_a_give_up_does_not_turn_given_up_sns_into_acks() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..1], t(1));
    out.take(); // sn 0 delivered, its completion lost
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    // The server gives up 1 and 2 here, but this Welcome is lost.
    handshake_welcome_lost(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(s.stats().lost_in_flight, 2);
    connect(&mut c, &mut s, &mut out, 3, t(100));
    assert!(events(&mut c).contains(&ClientEvent::NotReplayed { range: 1..3 }));
    assert_eq!(c.stats().acked, 1, "only sn 0 was delivered");
    assert_eq!(c.stats().not_replayed, 2);
}

#[test]
fn a_lost_first_welcome_of_a_restarted_server_is_still_seen_as_a_restart() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    out.take(); // delivered, unacknowledged, and then the server dies
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    handshake_welcome_lost(&mut c, &mut s2, &mut out2, 1, t(50));
    // Instance B knows the session now (from the lost handshake).
    connect(&mut c, &mut s2, &mut out2, 2, t(100));
    assert!(events(&mut c).contains(&ClientEvent::ServerRestarted {
        previous: Some(INSTANCE_A),
        instance: INSTANCE_B,
        unconfirmed: 0..4
    }));
    assert_eq!(c.stats().possible_duplicates, 4);
    assert_eq!(sns(&client_frames(&mut c, t(100))), vec![0, 1, 2, 3]);
}

#[test]
fn a_lost_welcome_of_a_restarted_server_without_replay_names_the_skipped_sns() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let _lost = client_frames(&mut c, t(1)); // never arrive
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    // B starts the session at next_sn = 2, skipping 0 and 1; Welcome lost.
    handshake_welcome_lost(&mut c, &mut s2, &mut out2, 1, t(50));
    connect(&mut c, &mut s2, &mut out2, 2, t(100));
    let ev = events(&mut c);
    assert!(
        ev.contains(&ClientEvent::NotReplayed { range: 0..2 }),
        "{ev:?}"
    );
    assert_eq!(c.stats().acked, 0, "nothing was delivered");
}

#[test]
fn a_welcome_before_this_connections_hello_is_a_protocol_error() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    c.handle_disconnected(
        t(1),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due);
    }
    let _ = c.poll_action();
    c.handle_connected(t(50)); // the Hello is not sent yet
    let welcome = msg(
        c.epoch(),
        0,
        0,
        Body::Welcome {
            instance: INSTANCE_A,
            resume_from: 0,
            incarnation: 0,
            window: 128,
            known: true,
        },
    );
    let buf = frame(&welcome);
    c.handle_frame(t(50), &buf);
    assert_eq!(c.stats().protocol_errors, 1);
    assert!(!matches!(c.state(), ClientState::Established { .. }));
}

#[test]
fn a_new_instance_that_got_eager_frames_before_its_welcome_was_lost_is_believed() {
    let mut cfg = config();
    cfg.eager = true;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 2, "all acknowledged by A");
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    ); // A dies
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    submit_writes(&mut c, 3);
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due);
    }
    let _ = c.poll_action();
    c.handle_connected(t(50));
    let first = client_frames(&mut c, t(50));
    assert_eq!(first.len(), 4, "Hello, then sns 2, 3, 4 early");
    to_server(&mut s2, &mut out2, 1, &first[..3], t(50)); // sn 4 and the Welcome are lost
    out2.take();
    c.handle_disconnected(
        t(51),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s2.handle_disconnected(cid(1));
    connect(&mut c, &mut s2, &mut out2, 2, t(100));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::ServerRestarted {
        previous: Some(INSTANCE_A),
        instance: INSTANCE_B,
        unconfirmed: 4..5
    }));
    assert_eq!(c.base_sn(), 4, "2 and 3 were delivered by B");
    assert_eq!(sns(&client_frames(&mut c, t(100))), vec![4]);
}
