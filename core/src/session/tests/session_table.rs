//! The bounded session table.

use super::*;

// ---- session table ---------------------------------------------------------

#[test]
fn full_session_table_evicts_the_oldest_idle_session() {
    let mut s = server(INSTANCE_A);
    let mut out = Out::default();
    for (i, id) in (1..=4u64).enumerate() {
        let mut c = client(ClientConfig::new(id, TOKEN));
        connect(&mut c, &mut s, &mut out, i as u32, t(i as u64));
        s.handle_disconnected(cid(i as u32));
    }
    let mut c5 = client(ClientConfig::new(5, TOKEN));
    connect(&mut c5, &mut s, &mut out, 10, t(10));
    assert!(out.events.contains(&ServerEvent::Evicted { session: 1 }));
    assert_eq!(s.session_count(), 4);
    assert!(s.session(1).is_none());
}

#[test]
fn full_session_table_with_every_session_connected_rejects_the_newcomer() {
    let mut s: ServerCore<4, 8, 3> = ServerCore::new(ServerConfig::new(INSTANCE_A));
    let mut out = Out::default();
    let hello_of = |id: u64| {
        let mut c = client(ClientConfig::new(id, TOKEN));
        c.start(t(0));
        assert_eq!(c.poll_action(), Some(Action::Connect));
        c.handle_connected(t(0));
        client_frames(&mut c, t(0)).remove(0)
    };
    for id in 1..=4u64 {
        serve(&mut s, &mut out, cid(id as u32), &hello_of(id), t(id));
    }
    assert!(out.rejected().is_empty());
    serve(&mut s, &mut out, cid(5), &hello_of(5), t(5));
    assert_eq!(out.rejected(), vec![RejectReason::SessionTableFull]);
    assert!(s.session(5).is_none());
    assert_eq!(s.session_count(), 4, "no connected session was evicted");
}

#[test]
fn closed_sessions_leave_tombstones_and_the_oldest_is_forgotten_with_an_event() {
    // Room for two tombstones.
    let mut s: ServerCore<4, 8, 3, 2> = ServerCore::new(ServerConfig::new(INSTANCE_A));
    let mut out = Out::default();
    for id in 1..=3u64 {
        let mut c = client(ClientConfig::new(id, TOKEN));
        let conn = cid(id as u32);
        c.start(t(id));
        assert_eq!(c.poll_action(), Some(Action::Connect));
        c.handle_connected(t(id));
        let hello = client_frames(&mut c, t(id));
        for f in &hello {
            serve(&mut s, &mut out, conn, f, t(id));
        }
        for (to, f) in out.take() {
            if to == conn {
                assert_eq!(c.handle_frame(t(id), &f), None);
            }
        }
        c.close(t(id));
        for f in client_frames(&mut c, t(id)) {
            serve(&mut s, &mut out, conn, &f, t(id));
        }
        assert_eq!(c.state(), ClientState::Closed);
    }
    assert_eq!((s.session_count(), s.tomb_count()), (0, 2));
    assert_eq!(s.stats().tombs_forgotten, 1);
    assert!(out.events.contains(&ServerEvent::Forgotten { session: 1 }));
    assert!(!out.events.contains(&ServerEvent::Forgotten { session: 2 }));
}

// ---- tombstones and what an instance can still judge ----------------------

/// Room for two tombstones.
type FewTombs = ServerCore<4, 8, 3, 2>;

/// Opens session `id` on `conn`, sends `writes` writes and says `Bye`:
/// the session leaves a tombstone.
fn open_and_close(s: &mut FewTombs, out: &mut Out, id: u64, conn: u32, writes: usize, now: u64) {
    let mut c = client(ClientConfig::new(id, TOKEN));
    c.start(t(now));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(now));
    for f in client_frames(&mut c, t(now)) {
        serve(s, out, cid(conn), &f, t(now));
    }
    for (to, f) in out.take() {
        if to == cid(conn) {
            assert_eq!(c.handle_frame(t(now), &f), None);
        }
    }
    for _ in 0..writes {
        let sn = c.next_sn();
        assert_eq!(c.submit(Message::Write(&payload(sn, 16))), Ok(sn));
    }
    c.close(t(now));
    for _ in 0..3 {
        for f in client_frames(&mut c, t(now)) {
            serve(s, out, cid(conn), &f, t(now));
        }
        for (to, f) in out.take() {
            if to == cid(conn) {
                let _ = c.handle_frame(t(now), &f);
            }
        }
    }
    assert_eq!(c.state(), ClientState::Closed);
}

#[test]
fn a_delayed_hello_of_a_forgotten_session_opens_nothing_and_delivers_nothing() {
    let mut s = FewTombs::new(ServerConfig::new(INSTANCE_A));
    let mut out = Out::default();
    // The client's first connection: its Hello and an early write are
    // held up in the network. The client gives it up, and on its next
    // connection sends sns 0..3 and says Bye.
    assert!(s.handle_accepted(t(0), cid(1), &mut out));
    open_and_close(&mut s, &mut out, SESSION, 2, 3, 1);
    assert_eq!(out.delivered(), vec![0, 1, 2]);
    // Two more sessions close: the first one's tombstone is forgotten.
    open_and_close(&mut s, &mut out, 7, 3, 0, 2);
    open_and_close(&mut s, &mut out, 8, 4, 0, 3);
    assert!(out
        .events
        .contains(&ServerEvent::Forgotten { session: SESSION }));
    // Now the held Hello and write arrive.
    let early = payload(0, 16);
    for f in [
        hello_frame(1, 0, 0),
        frame(&msg(1, 0, 0, Body::Write { data: &early })),
    ] {
        serve(&mut s, &mut out, cid(1), &f, t(4));
    }
    assert_eq!(
        out.delivered(),
        vec![0, 1, 2],
        "sn 0 is not delivered twice"
    );
    assert_eq!(out.rejected().first(), Some(&RejectReason::StaleConnection));
    assert!(s.session(SESSION).is_none());
    // A connection accepted after the forgetting is judged: its Hello
    // opens the session anew.
    let refused = out.rejected().len();
    assert!(s.handle_accepted(t(0), cid(5), &mut out));
    serve(&mut s, &mut out, cid(5), &hello_frame(2, 3, 3), t(5));
    assert_eq!(out.rejected().len(), refused, "accepted");
    assert!(s.session(SESSION).is_some());
}

#[test]
fn a_hello_whose_sns_move_backwards_under_the_same_token_is_refused() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    exchange(&mut c, &mut s, &mut out, 1, t(1));
    s.handle_disconnected(cid(1));
    // The same id and token, restarted: its sns start at 0 again, and
    // after enough refused attempts its epoch is past the session's.
    let mut restarted = client(config());
    restarted.start(t(2));
    assert_eq!(restarted.poll_action(), Some(Action::Connect));
    restarted.handle_connected(t(2));
    let _ = client_frames(&mut restarted, t(2));
    let epoch = restarted.epoch();
    to_server(&mut s, &mut out, 2, &[hello_frame(epoch + 5, 0, 1)], t(2));
    assert_eq!(out.last_reject(), Some((RejectReason::Rewound, 5)));
    for (_, f) in out.take() {
        let m = wire::parse(&f).unwrap();
        let reject = IoMsg { epoch, ..m };
        assert_eq!(restarted.handle_frame(t(2), &frame(&reject)), None);
    }
    assert_eq!(
        restarted.state(),
        ClientState::Failed(FailReason::Rewound {
            session: SESSION,
            seen: 5
        })
    );
    assert_eq!(
        out.delivered(),
        vec![0, 1, 2, 3, 4],
        "nothing new taken for the old"
    );
}
