//! The loss guarantees that an independent harness broke, one regression
//! test per defect: each reproduces the reported sequence frame by frame.

use super::lost_welcome::handshake_welcome_lost;
use super::*;

/// How often each sn was delivered by one server's sink.
fn delivered_twice(out: &Out) -> Vec<u64> {
    let mut seen = std::collections::BTreeSet::new();
    out.delivered()
        .into_iter()
        .filter(|&sn| !seen.insert(sn))
        .collect()
}

// ---- 1. duplicates are always announced -------------------------------------

#[test]
fn duplicate_after_a_restart_whose_welcomes_were_lost_is_announced() {
    // Eager sends: sn 0 follows the Hello before any Welcome.
    let mut cfg = config();
    cfg.eager = true;
    let (mut c, mut a, mut out_a) = (client(cfg), server(INSTANCE_A), Out::default());
    submit_writes(&mut c, 1);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let frames = client_frames(&mut c, t(0));
    assert_eq!(sns(&frames[1..]), vec![0], "sn 0 goes out eagerly");
    to_server(&mut a, &mut out_a, 1, &frames, t(0));
    assert_eq!(out_a.delivered(), vec![0], "instance A delivered sn 0");
    out_a.take(); // its Welcome and completion are lost; then A is killed
    c.handle_disconnected(
        t(1),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let (mut b, mut out_b) = (server(INSTANCE_B), Out::default());
    handshake_welcome_lost(&mut c, &mut b, &mut out_b, 1, t(50));
    // B knows the session from the lost handshake and says so.
    connect(&mut c, &mut b, &mut out_b, 2, t(100));
    let ev = events(&mut c);
    assert_eq!(unconfirmed(&ev), vec![0..1], "{ev:?}");
    to_server(
        &mut b,
        &mut out_b,
        2,
        &client_frames(&mut c, t(100)),
        t(100),
    );
    assert_eq!(out_b.delivered(), vec![0], "delivered again, and announced");
    assert_eq!(c.stats().possible_duplicates, 1);
}

#[test]
fn an_evicted_session_whose_welcome_was_lost_is_never_delivered_twice() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    to_server(&mut s, &mut out, 1, &client_frames(&mut c, t(1)), t(1));
    out.take(); // delivered, the completions lost
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    // Four other sessions push ours out of the table.
    for id in 10..14u64 {
        let mut other = client(ClientConfig::new(id, id));
        connect(&mut other, &mut s, &mut out, id as u32, t(id));
    }
    assert!(out
        .events
        .contains(&ServerEvent::Evicted { session: SESSION }));
    out.take();
    for id in 10..14u64 {
        s.handle_disconnected(cid(id as u32));
    }
    handshake_welcome_lost(&mut c, &mut s, &mut out, 20, t(50));
    connect(&mut c, &mut s, &mut out, 21, t(100));
    exchange(&mut c, &mut s, &mut out, 21, t(100));
    assert_eq!(
        delivered_twice(&out),
        Vec::<u64>::new(),
        "one instance, once"
    );
    assert_eq!(out.delivered(), vec![0, 1, 2]);
    assert_eq!((c.base_sn(), c.stats().acked), (3, 3));
    assert_eq!(s.stats().revived, 1, "resumed from its tombstone");
}

// ---- 2. zombie sessions -----------------------------------------------------

#[test]
fn a_delayed_hello_after_bye_never_reopens_the_session() {
    let (mut c, mut s, mut out) = setup();
    submit_writes(&mut c, 2);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let delayed = client_frames(&mut c, t(0)); // the epoch-1 Hello, held up
    let due = c.poll_timeout().unwrap();
    c.handle_timeout(due); // no Welcome: the client gives up on it
    connect(&mut c, &mut s, &mut out, 2, t(50));
    exchange(&mut c, &mut s, &mut out, 2, t(50));
    c.close(t(51));
    to_server(&mut s, &mut out, 2, &client_frames(&mut c, t(51)), t(51));
    assert_eq!(c.state(), ClientState::Closed);
    assert_eq!(s.session_count(), 0, "Bye closed the session");
    // The epoch-1 Hello finally arrives, with the frames it carried.
    let data = payload(0, 16);
    let mut late = delayed;
    late.push(frame(&msg(1, 0, 0, Body::Write { data: &data })));
    to_server(&mut s, &mut out, 1, &late, t(60));
    // The Hello is refused; the data behind it, on a connection that the
    // refusal left unbound, too.
    assert_eq!(
        out.rejected(),
        vec![RejectReason::StaleEpoch, RejectReason::NotBound]
    );
    assert_eq!(s.session_count(), 0, "no zombie session");
    assert_eq!(out.delivered(), vec![0, 1]);
}

#[test]
fn an_sn_reported_lost_is_never_delivered_after_the_session_was_evicted() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let in_flight = client_frames(&mut c, t(1)); // lost with the connection
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(s.stats().lost_in_flight, 2, "0 and 1 given up");
    c.handle_disconnected(
        t(51),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(2));
    for id in 10..14u64 {
        let mut other = client(ClientConfig::new(id, id));
        connect(&mut other, &mut s, &mut out, id as u32, t(60 + id));
    }
    assert!(out
        .events
        .contains(&ServerEvent::Evicted { session: SESSION }));
    for id in 10..14u64 {
        s.handle_disconnected(cid(id as u32));
    }
    // The lost frames' epoch-1 connection comes back to life.
    let mut late = vec![hello_frame(1, 0, 0)];
    late.extend(in_flight);
    to_server(&mut s, &mut out, 30, &late, t(90));
    assert_eq!(out.rejected().first(), Some(&RejectReason::StaleEpoch));
    assert_eq!(out.delivered(), Vec::<u64>::new(), "lost stays lost");
}

// ---- 3. windows are agreed ----------------------------------------------------

#[test]
fn a_client_window_larger_than_the_servers_is_clamped_and_loses_nothing() {
    type Big = ClientSession<256, Vec<u8>>; // the server tracks 128
    let storage = vec![0u8; 256 * 16];
    let (mut c, mut s, mut out) = (
        Big::new(config(), t(0), storage),
        server(INSTANCE_A),
        Out::default(),
    );
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let hello = client_frames(&mut c, t(0));
    to_server(&mut s, &mut out, 1, &hello, t(0));
    for (_, f) in out.take() {
        assert_eq!(c.handle_frame(t(0), &f), None);
    }
    assert_eq!(c.agreed_window(), 128, "the server's window wins");
    for sn in 0..200 {
        c.submit(Message::Write(&payload(sn, 16))).unwrap();
    }
    let frames = client_frames(&mut c, t(1));
    assert_eq!(frames.len(), 128, "no more outstanding than agreed");
    // Sn 5 is silently dropped on the live connection.
    let (before, after) = frames.split_at(5);
    to_server(&mut s, &mut out, 1, before, t(1));
    to_server(&mut s, &mut out, 1, &after[1..], t(1));
    for (_, f) in out.take() {
        assert_eq!(c.handle_frame(t(1), &f), None);
    }
    assert_eq!(c.base_sn(), 5, "nothing past the hole is released");
    assert_eq!(
        client_frames(&mut c, t(1)).len(),
        5,
        "room for 5 more, no further"
    );
    assert_eq!(s.stats().lost_live, 0, "no hole slid out of the tracker");
    assert!(out.delivered().iter().all(|&sn| sn != 5));
}

#[test]
fn a_server_clamps_a_hello_offering_more_than_it_tracks() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let hello = msg(
        1,
        0,
        0,
        Body::Hello {
            base_sn: 0,
            next_sn: 0,
            token: TOKEN,
            window: 4096,
            replay: true,
        },
    );
    serve(&mut s, &mut out, cid(1), &frame(&hello), t(0));
    let welcome = wire::parse(&out.frames[0].1).unwrap();
    assert!(matches!(welcome.body, Body::Welcome { window: 128, .. }));
    // A frame past the agreed window is refused, never tracked.
    let data = payload(128, 16);
    let far = msg(1, 128, 0, Body::Write { data: &data });
    serve(&mut s, &mut out, cid(1), &frame(&far), t(1));
    assert_eq!(out.last_reject(), Some((RejectReason::TooFar, 128)));
}

// ---- 5. trailing drops --------------------------------------------------------

#[test]
fn a_dropped_last_frame_is_found_by_the_probe_as_a_live_loss() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let _dropped = client_frames(&mut c, t(10)); // nothing behind it
    let due = c.poll_timeout().unwrap();
    assert!(
        due < t(10) + c.config().reply_timeout,
        "a probe comes first"
    );
    c.handle_timeout(due);
    let probe = client_frames(&mut c, due);
    to_server(&mut s, &mut out, 1, &probe, due);
    assert!(out.events.contains(&ServerEvent::LiveLoss {
        session: SESSION,
        epoch: 1,
        missing: 0..1
    }));
    assert_eq!(s.stats().live_gap_sns, 1);
    // The replay after the timeout fills it.
    to_client(&mut c, &mut out, 1, due);
    c.handle_timeout(t(10) + c.config().reply_timeout);
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(3000));
    to_server(
        &mut s,
        &mut out,
        2,
        &client_frames(&mut c, t(3000)),
        t(3000),
    );
    assert!(out.events.contains(&ServerEvent::Recovered {
        session: SESSION,
        sn: 0
    }));
}

// ---- 6. no event is dropped ---------------------------------------------------

#[test]
fn a_flood_of_acks_and_reconnects_drops_no_event() {
    let mut cfg = config();
    cfg.max_retries = u32::MAX;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    let mut conn = 0;
    let mut now = 0;
    // 200 connection cycles of 8 acked writes each; events never drained.
    for _ in 0..200 {
        conn += 1;
        now += 100;
        if c.state() == ClientState::Idle {
            c.start(t(now));
        } else {
            // Without room in the queue, no new attempt starts.
            for _ in 0..4 {
                if matches!(c.state(), ClientState::Connecting { .. }) {
                    break;
                }
                if let Some(due) = c.poll_timeout() {
                    c.handle_timeout(due.max(t(now)));
                }
            }
            if !matches!(c.state(), ClientState::Connecting { .. }) {
                break;
            }
        }
        assert_eq!(c.poll_action(), Some(Action::Connect));
        c.handle_connected(t(now));
        exchange(&mut c, &mut s, &mut out, conn, t(now));
        for _ in 0..8 {
            submit_writes(&mut c, 1);
            exchange(&mut c, &mut s, &mut out, conn, t(now));
        }
        c.handle_disconnected(
            t(now + 1),
            DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
        );
        s.handle_disconnected(cid(conn));
    }
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
    let stalled = c.stats().connects;
    assert!(
        (2..200).contains(&stalled),
        "cycles ran, until the full queue held back new attempts: {stalled}"
    );
    assert_eq!(c.stats().established, stalled, "{:?}", c.stats());
    let ev = events(&mut c);
    let count = |f: fn(&ClientEvent) -> bool| ev.iter().filter(|e| f(e)).count() as u64;
    let s_ = c.stats();
    assert_eq!(
        count(|e| matches!(e, ClientEvent::Connecting { .. })),
        s_.connects
    );
    assert_eq!(
        count(|e| matches!(e, ClientEvent::Established { .. })),
        s_.established
    );
    assert_eq!(
        count(|e| matches!(e, ClientEvent::Disconnected { .. })),
        s_.disconnects
    );
    let last_ack = ev.iter().rev().find_map(|e| match e {
        ClientEvent::Acked { upto } => Some(*upto),
        _ => None,
    });
    assert_eq!(last_ack, Some(c.base_sn()), "the newest ack is there");
    // Drained, the client goes on.
    let due = c.poll_timeout().unwrap();
    c.handle_timeout(due.max(t(now + 100)));
    assert!(matches!(c.state(), ClientState::Connecting { .. }));
    assert_eq!(c.stats().connects, stalled + 1);
}

// ---- 7. a session belongs to its client -------------------------------------

#[test]
fn a_second_client_with_the_same_session_id_is_refused_and_fails_clearly() {
    let (mut owner, mut s, mut out) = setup();
    connect(&mut owner, &mut s, &mut out, 1, t(0));
    submit_writes(&mut owner, 2);
    to_server(&mut s, &mut out, 1, &client_frames(&mut owner, t(1)), t(1));
    to_client(&mut owner, &mut out, 1, t(1));
    let before = s.session(SESSION).unwrap();
    let mut cfg = config();
    cfg.token = TOKEN ^ 1; // same id, another client
    let mut twin = client(cfg);
    twin.start(t(2));
    assert_eq!(twin.poll_action(), Some(Action::Connect));
    twin.handle_connected(t(2));
    to_server(&mut s, &mut out, 2, &client_frames(&mut twin, t(2)), t(2));
    assert_eq!(
        out.last_reject(),
        Some((RejectReason::SessionOwned, SESSION))
    );
    to_client(&mut twin, &mut out, 2, t(2));
    let reason = FailReason::SessionOwned { session: SESSION };
    assert_eq!(twin.state(), ClientState::Failed(reason));
    assert!(std::format!("{reason}").contains("another client"));
    assert_eq!(s.session(SESSION), Some(before), "nothing changed");
    // The owner carries on undisturbed.
    submit_writes(&mut owner, 1);
    to_server(&mut s, &mut out, 1, &client_frames(&mut owner, t(3)), t(3));
    to_client(&mut owner, &mut out, 1, t(3));
    assert_eq!(owner.base_sn(), 3);
}

#[test]
fn a_stray_hello_cannot_take_a_session_over_or_lock_its_owner_out() {
    let (mut owner, mut s, mut out) = setup();
    connect(&mut owner, &mut s, &mut out, 1, t(0));
    let before = s.session(SESSION).unwrap();
    for epoch in [2, u32::MAX] {
        let stray = msg(
            epoch,
            0,
            0,
            Body::Hello {
                base_sn: 0,
                next_sn: SN_MAX,
                token: 0xBAD,
                window: 128,
                replay: true,
            },
        );
        serve(&mut s, &mut out, cid(9), &frame(&stray), t(1));
        assert_eq!(
            out.last_reject(),
            Some((RejectReason::SessionOwned, SESSION))
        );
        assert_eq!(s.session(SESSION), Some(before), "epoch {epoch}: no change");
    }
    // The owner's own reconnect still works.
    owner.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    connect(&mut owner, &mut s, &mut out, 2, t(50));
    assert_eq!(s.session(SESSION).unwrap().epoch, 2);
    assert_eq!(
        out.closed.last(),
        Some(&cid(1)),
        "the old connection was closed"
    );
}

#[test]
fn frames_sent_after_the_last_probe_get_a_final_probe_before_the_timeout() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let _unanswered = client_frames(&mut c, t(10));
    let reply_timeout = c.config().reply_timeout;
    let quarter = reply_timeout / 4;
    for k in 1..4u32 {
        c.handle_timeout(t(10) + quarter * k);
        assert_eq!(sns(&client_frames(&mut c, t(10) + quarter * k)), vec![1]);
    }
    // A frame after the third probe, dropped with nothing behind it.
    submit_writes(&mut c, 1);
    let late = t(10) + quarter * 3 + Duration::from_millis(1);
    assert_eq!(sns(&client_frames(&mut c, late)), vec![1]);
    let deadline = t(10) + reply_timeout;
    assert_eq!(c.poll_timeout(), Some(deadline));
    c.handle_timeout(deadline);
    assert!(matches!(c.state(), ClientState::Established { .. }));
    submit_writes(&mut c, 1);
    let probe = client_frames(&mut c, deadline);
    assert_eq!(
        probe.len(),
        1,
        "only the probe: no new frame past the deadline"
    );
    let probe = wire::parse(&probe[0]).unwrap();
    assert_eq!((probe.body, probe.sn), (Body::Probe, 2), "covers sn 1");
    // Its answer gets a probe interval; then the connection is given up.
    assert_eq!(c.poll_timeout(), Some(deadline + quarter));
    c.handle_timeout(deadline + quarter);
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
}

#[test]
fn a_frame_after_a_drop_reveals_it_whatever_its_payload_holds() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(1));
    // Sn 0 is dropped; sn 1 arrives with a payload byte that no CRC
    // covers corrupted. Its header is sound, so it proves the drop before
    // it; the protocol does not judge its bytes and hands them over as
    // they came.
    let mut corrupt = frames[1].clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    to_server(&mut s, &mut out, 1, &[corrupt], t(1));
    assert!(out.events.contains(&ServerEvent::LiveLoss {
        session: SESSION,
        epoch: 1,
        missing: 0..1
    }));
    assert_eq!(out.delivered(), vec![1]);
    assert_ne!(out.deliveries[0].hash, workload::hash(&payload(1, 16)));
}

#[test]
fn a_frame_refused_for_its_payload_crc_is_never_delivered_and_replayed_intact() {
    let mut cfg = config();
    cfg.validate = true;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(1));
    let mut corrupt = frames[1].clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    to_server(&mut s, &mut out, 1, &[frames[0].clone(), corrupt], t(1));
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
    assert_eq!(out.delivered(), vec![0]);
    to_client(&mut c, &mut out, 1, t(1));
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(50));
    exchange(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(out.delivered(), vec![0, 1]);
    out.assert_payloads(16);
}
