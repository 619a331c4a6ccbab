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
