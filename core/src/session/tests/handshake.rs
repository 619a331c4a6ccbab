//! The resume handshake.

use super::*;

// ---- handshake -------------------------------------------------------------

#[test]
fn handshake_new_session_starts_at_base_sn_and_delivers_in_order() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert_eq!(out.delivered(), vec![0, 1, 2]);
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 3, "every WriteComp's cumulative ack releases");
    assert_eq!(c.stats().acked, 3);
    assert_eq!(c.stats().completions, 3);
}

#[test]
fn handshake_known_session_resumes_at_servers_next_expected_sn() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    // 0..3 reach the server; their completions are lost with the connection.
    to_server(&mut s, &mut out, 1, &frames[..3], t(1));
    out.take();
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(100));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::Established {
        epoch: 2,
        instance: INSTANCE_A,
        known: true,
        resume_from: 3
    }));
    assert_eq!(
        c.base_sn(),
        3,
        "[base_sn, resume_from) released as acknowledged"
    );
    let replay = client_frames(&mut c, t(100));
    assert_eq!(
        sns(&replay),
        vec![3, 4],
        "replay starts at resume_from, in order"
    );
    to_server(&mut s, &mut out, 2, &replay, t(100));
    assert_eq!(
        out.delivered(),
        vec![0, 1, 2, 3, 4],
        "each sn delivered exactly once"
    );
    out.assert_payloads(16);
    assert_eq!(s.stats().duplicates, 0);
}

#[test]
fn handshake_unknown_session_after_restart_replays_from_base_sn_as_possible_duplicates() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    out.take(); // the server dies before its completions leave
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );

    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    connect(&mut c, &mut s2, &mut out2, 1, t(50));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::ServerRestarted {
        previous: Some(INSTANCE_A),
        instance: INSTANCE_B,
        unconfirmed: 0..4
    }));
    assert!(ev.contains(&ClientEvent::Established {
        epoch: 2,
        instance: INSTANCE_B,
        known: false,
        resume_from: 0
    }));
    let replay = client_frames(&mut c, t(50));
    assert_eq!(sns(&replay), vec![0, 1, 2, 3]);
    assert_eq!(c.stats().possible_duplicates, 4);
    assert_eq!(c.stats().replayed, 4);
    to_server(&mut s2, &mut out2, 1, &replay, t(50));
    assert_eq!(out2.delivered(), vec![0, 1, 2, 3]);
    out2.assert_payloads(16);
}

#[test]
fn client_treats_resume_from_outside_base_and_next_as_protocol_error() {
    let mut c = client(config());
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let hello = client_frames(&mut c, t(0));
    assert_eq!(hello.len(), 1);
    // next_sn is 0, so resume_from 7 is beyond it.
    let welcome = msg(
        1,
        0,
        0,
        Body::Welcome {
            instance: INSTANCE_A,
            resume_from: 7,
            incarnation: 0,
            window: 128,
            known: true,
        },
    );
    let buf = frame(&welcome);
    c.handle_frame(t(1), &buf);
    assert_eq!(c.stats().protocol_errors, 1);
    let expected = DisconnectCause::Protocol(ProtocolError::BadResume {
        base_sn: 0,
        resume_from: 7,
        next_sn: 0,
    });
    assert!(events(&mut c).contains(&ClientEvent::Disconnected {
        epoch: 1,
        cause: expected
    }));
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
    assert_eq!(c.poll_action(), Some(Action::Close));
}

#[test]
fn server_rejects_hello_whose_sns_fall_short_of_what_it_received() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    s.handle_disconnected(cid(1));
    // A Hello claiming only sn 0 was ever sent, though the server has 0 and 1.
    let buf = hello_frame(2, 0, 1);
    serve(&mut s, &mut out, cid(2), &buf, t(2));
    assert_eq!(out.rejected(), vec![RejectReason::Rewound]);
    assert_eq!(out.closed, vec![cid(2)]);
    assert_eq!(
        out.last_reject(),
        Some((RejectReason::Rewound, 2)),
        "the detail names one past the highest sn the server has"
    );
}

#[test]
fn server_rejects_hello_with_next_sn_beyond_sn_max() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let buf = hello_frame(1, SN_MAX, SN_MAX + 1);
    serve(&mut s, &mut out, cid(1), &buf, t(0));
    assert_eq!(out.rejected(), vec![RejectReason::BadHandshake]);
    assert_eq!(s.session_count(), 0, "no session was created");
}
