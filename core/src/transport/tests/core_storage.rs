//! Where the server's core lives, and the readiness hook.

use std::boxed::Box;
use std::sync::Mutex;

use super::*;
use crate::session::ServerCore;

/// Built at compile time: no stack ever holds it.
static CORE: Mutex<ServerCore<4, 8, 8>> = Mutex::new(ServerCore::new(ServerConfig::new(1)));

#[test]
fn a_server_core_in_a_static_runs_under_the_driver_by_reference() {
    let net = Rc::new(RefCell::new(Net::default()));
    let mut end = End::new(&net, Side::Client);
    end.knobs = Knobs::default();
    let session = ClientSession::new(ClientConfig::new(SESSION, 1), Instant::ZERO, vec![0; 4096]);
    let mut client: TestClient = Client::new(end, session).unwrap();
    let mut guard = CORE.lock().unwrap();
    let core: &mut ServerCore<4, 8, 8> = &mut guard;
    let mut server: Server<End, 4, 8, 8, _> =
        Server::with_core(End::new(&net, Side::Server), core).unwrap();
    let (mut log, mut app) = (Log::default(), App::new(1));
    client.start(ms(0));
    for sn in 0..5 {
        client.submit(Message::Write(&payload(sn, 100))).unwrap();
    }
    for t in 0..50 {
        client.poll(ms(t), &mut log);
        server.poll(ms(t), &mut app);
    }
    assert_eq!(client.session().base_sn(), 5, "all acknowledged");
    assert_eq!(server.core().stats().delivered, 5);
    let expected: BTreeMap<u64, u64> = (0..5)
        .map(|sn| (sn, workload::hash(&payload(sn, 100))))
        .collect();
    assert_eq!(app.hashes(), expected);
    // The static holds the sessions the driver made.
    drop(server);
    assert_eq!(guard.session_count(), 1);
    guard.reset(ServerConfig::new(2));
    assert_eq!(guard.session_count(), 0);
}

#[test]
fn a_reset_core_is_a_new_instance_and_the_client_replays_to_it() {
    let mut p = Pair::new();
    p.connect();
    for sn in 0..3 {
        p.client.submit(Message::Write(&payload(sn, 10))).unwrap();
    }
    p.acked(3);
    // The core, boxed, outlives its driver; reset, it serves a new instance.
    let net = p.net.clone();
    let end = End::new(&net, Side::Server);
    let mut boxed = Box::new(ServerCore::<4, 8, 8>::new(ServerConfig::new(9)));
    boxed.reset(ServerConfig::new(10));
    assert_eq!(boxed.config().instance, 10);
    let conn = p.last_conn();
    net.borrow_mut().to_server.clear();
    p.to_client(Event::Disconnected {
        conn,
        reason: DisconnectReason::PeerFailed(crate::transport::Cause::UNKNOWN),
    });
    let mut server: Server<End, 4, 8, 8, Box<ServerCore<4, 8, 8>>> =
        Server::with_core(end, boxed).unwrap();
    let mut app = App::new(10);
    p.client.submit(Message::Write(&payload(3, 10))).unwrap();
    for _ in 0..200 {
        p.client.poll(ms(p.now), &mut p.log);
        server.poll(ms(p.now), &mut app);
        p.now += 1;
    }
    assert_eq!(p.client.session().base_sn(), 4);
    assert_eq!(app.hashes().get(&3), Some(&workload::hash(&payload(3, 10))));
    let (_, core) = server.into_parts();
    assert_eq!(core.session(SESSION).map(|s| s.cumulative), Some(4));
}

#[test]
fn the_readiness_hook_says_pending_while_work_waits_and_asks_the_backend_otherwise() {
    let mut p = Pair::new();
    p.connect();
    p.poll();
    // Idle: nothing to send, no timer due; the test backend cannot signal.
    assert_eq!(p.client.arm(ms(p.now)), Readiness::Unsupported);
    assert_eq!(p.server.arm(ms(p.now)), Readiness::Unsupported);
    p.client.submit(Message::Write(&payload(0, 8))).unwrap();
    assert_eq!(
        p.client.arm(ms(p.now)),
        Readiness::Pending,
        "a frame to send"
    );
    p.client.poll(ms(p.now), &mut p.log);
    // The server takes the frame and queues its completion, which its
    // transport refuses for now: the reply waits.
    let comp_len = wire::HEADER_LEN;
    p.server.transport_mut().knobs.block = Some((comp_len, u32::MAX));
    p.server.poll(ms(p.now), &mut p.app);
    assert_eq!(p.server.core().pending_replies(), 1);
    // It waits on the transport, which is asked to wake the application
    // when it has room: answering `Pending` would have it spin.
    assert_eq!(
        p.server.arm(ms(p.now)),
        Readiness::Unsupported,
        "a refused reply is the transport's to wake for"
    );
    p.server.transport_mut().knobs.block = None;
    p.acked(1);
    assert_eq!(p.server.arm(ms(p.now)), Readiness::Unsupported);
}

#[test]
fn a_core_with_a_tombstone_table_of_its_own_size_runs_under_the_driver() {
    let mut p = Pair::new();
    p.connect();
    p.poll();
    let net = p.net.clone();
    let end = End::new(&net, Side::Server);
    let conn = p.last_conn();
    net.borrow_mut().to_server.clear();
    p.to_client(Event::Disconnected {
        conn,
        reason: DisconnectReason::PeerFailed(crate::transport::Cause::UNKNOWN),
    });
    let core = Box::new(ServerCore::<4, 8, 8, 16>::new(ServerConfig::new(11)));
    let mut server: Server<End, 4, 8, 8, Box<ServerCore<4, 8, 8, 16>>, 16> =
        Server::with_core(end, core).unwrap();
    let mut app = App::new(11);
    for sn in 0..3 {
        p.client.submit(Message::Write(&payload(sn, 10))).unwrap();
    }
    for _ in 0..200 {
        p.client.poll(ms(p.now), &mut p.log);
        server.poll(ms(p.now), &mut app);
        p.now += 1;
    }
    assert_eq!(p.client.session().base_sn(), 3);
    assert_eq!(app.hashes().get(&2), Some(&workload::hash(&payload(2, 10))));
    assert_eq!(
        server.core().session(SESSION).map(|s| s.cumulative),
        Some(3)
    );
}

#[test]
fn window_words_gives_a_tracker_window_of_at_least_the_sns_asked_for() {
    use crate::session::window_words;
    assert_eq!(window_words(2048), 33, "the default core's 33 words");
    for sns in [1usize, 63, 64, 65, 1000, 4096] {
        assert!((window_words(sns) - 1) * 64 >= sns, "{sns}");
        assert!(
            (window_words(sns) - 2) * 64 < sns,
            "{sns}: not more than needed"
        );
    }
    let core = Box::new(ServerCore::<4, 8, { window_words(1000) }>::new(
        ServerConfig::new(1),
    ));
    assert!(core.window() >= 1000, "{}", core.window());
}
