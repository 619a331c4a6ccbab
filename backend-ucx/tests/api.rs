//! The application API (`Client`, `Server`, and the async ones of the
//! `tokio` feature) over real UCX on the loopback device: every message
//! checked against what each server instance's handler recorded, never
//! against the protocol's own counters.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iomsg_core::workload;
use iomsg_ucx::{Client, ClientEvent, ClientOptions, Delivery, Error, Server, ServerOptions};

/// Loopback device and tcp only, set once before any UCX context exists;
/// the tests then run one at a time.
fn loopback_only() -> std::sync::MutexGuard<'static, ()> {
    static ENV: std::sync::Once = std::sync::Once::new();
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    ENV.call_once(|| {
        std::env::set_var("UCX_NET_DEVICES", "lo");
        std::env::set_var("UCX_TLS", "tcp");
        std::env::set_var(iomsg_ucx::REUSE_ADDRESS.0, iomsg_ucx::REUSE_ADDRESS.1);
    });
    guard
}

/// What one server instance's application took: (session, sn) -> hash.
type Taken = BTreeMap<(u64, u64), u64>;

/// A server on a thread of its own until `stop`; returns its record.
fn serve(addr: SocketAddr, stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<Taken>) {
    let mut server = Server::bind(addr, ServerOptions::default(), Record(Taken::new())).unwrap();
    let addr = server.local_addr();
    // Built here, run there: the server is Send.
    let thread = std::thread::spawn(move || {
        server.run_until(|_| stop.load(Ordering::Relaxed)).unwrap();
        server.into_handler().0
    });
    (addr, thread)
}

/// A server instance's application: records each message's hash, and
/// fails on a message taken twice by one instance.
struct Record(Taken);

impl iomsg_ucx::ServerHandler for Record {
    fn deliver(&mut self, d: Delivery<'_>) {
        let first = self.0.insert((d.session, d.sn), workload::hash(d.data));
        assert!(first.is_none(), "sn {} taken twice by one instance", d.sn);
    }
    fn respond(&mut self, read: iomsg_ucx::ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
}

#[test]
fn a_client_sends_and_every_acknowledged_message_is_in_the_servers_record_once() {
    let _one = loopback_only();
    let stop = Arc::new(AtomicBool::new(false));
    let mut server = Server::bind(
        "127.0.0.1:0",
        ServerOptions::default(),
        Record(Taken::new()),
    )
    .unwrap();
    let addr = server.local_addr();
    let server = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            server.run_until(|_| stop.load(Ordering::Relaxed)).unwrap();
            server.into_handler().0
        })
    };
    let mut client = Client::connect(addr, ClientOptions::default()).unwrap();
    let mut sent = Taken::new();
    let mut buf = vec![0u8; 9000];
    for i in 0..5000u64 {
        let len = [1, 64, 4096, 9000][(i % 4) as usize];
        let sn = client.next_sn();
        workload::fill(client.session_id(), sn, &mut buf[..len]);
        assert_eq!(client.send(&buf[..len]).unwrap(), sn);
        sent.insert((client.session_id(), sn), workload::hash(&buf[..len]));
    }
    client.flush(Duration::from_secs(20)).unwrap();
    assert_eq!(client.acked_below(), 5000);
    client.close(Duration::from_secs(5)).unwrap();
    stop.store(true, Ordering::Relaxed);
    let taken = server.join().unwrap();
    assert_eq!(taken, sent, "the server's record is exactly what was sent");
}

#[test]
fn connecting_where_nothing_listens_fails_in_time_and_names_the_address() {
    let _one = loopback_only();
    // A port that was free a moment ago.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let started = Instant::now();
    let options = ClientOptions::default().connect_timeout(Duration::from_millis(500));
    let e = Client::connect(addr, options)
        .err()
        .expect("nothing listens");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(e, Error::ConnectTimeout { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains(&addr.to_string()), "{text}");
}

#[test]
fn with_replay_off_every_message_is_acknowledged_and_recorded_or_reported_lost() {
    let _one = loopback_only();
    let mut instances: Vec<Taken> = Vec::new();
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, mut thread) = serve("127.0.0.1:0".parse().unwrap(), Arc::clone(&stop));
    let options = ClientOptions::default().replay(false);
    let mut client = Client::connect(addr, options).unwrap();
    let mut sent = BTreeMap::new();
    let mut buf = [0u8; 512];
    for _ in 0..3 {
        for _ in 0..2000 {
            let sn = client.next_sn();
            workload::fill(client.session_id(), sn, &mut buf);
            client.send(&buf).unwrap();
            sent.insert(sn, workload::hash(&buf));
        }
        // The server goes away with messages in flight, and a new one
        // takes its port.
        stop.store(true, Ordering::Relaxed);
        instances.push(thread.join().unwrap());
        stop.store(false, Ordering::Relaxed);
        (_, thread) = serve(addr, Arc::clone(&stop));
    }
    let _ = client.flush(Duration::from_secs(20));
    stop.store(true, Ordering::Relaxed);
    instances.push(thread.join().unwrap());
    let mut acked = 0;
    let mut lost = 0;
    for (&sn, &hash) in &sent {
        let held: Vec<u64> = instances
            .iter()
            .filter_map(|t| t.get(&(client.session_id(), sn)).copied())
            .collect();
        match client.wait_acked(sn, Duration::ZERO) {
            Ok(()) => {
                acked += 1;
                assert!(
                    held.contains(&hash),
                    "sn {sn} acknowledged, but no server instance took it"
                );
            }
            Err(Error::Lost { range, .. }) => {
                lost += 1;
                assert!(range.contains(&sn));
            }
            Err(e) => panic!("sn {sn}: {e}"),
        }
    }
    assert_eq!(acked + lost, sent.len());
    assert!(acked >= 4000, "only {acked} of {} acknowledged", sent.len());
}

/// A server that serves until its application took `freeze_at`
/// messages, then stops polling for `frozen` (what the client sends
/// meanwhile goes unacknowledged) and goes away: a restart mid-stream
/// with sns in flight. Returns its record.
fn serve_then_vanish(
    server: Server<Record>,
    freeze_at: usize,
    frozen: Duration,
) -> std::thread::JoinHandle<Taken> {
    let mut server = server;
    std::thread::spawn(move || {
        let started = Instant::now();
        server
            .run_until(|r| r.0.len() >= freeze_at || started.elapsed() > Duration::from_secs(60))
            .unwrap();
        assert!(server.handler().0.len() >= freeze_at, "the client stalled");
        std::thread::sleep(frozen);
        server.into_handler().0
    })
}

/// 20,000 messages across a server restart, with no event read until
/// the end: the restart's warning (which sns may arrive twice) is still
/// there, naming exactly the sns the new instance took from the start,
/// and the acks that came in thousands are folded into a few events.
#[test]
fn a_restart_warning_outlives_twenty_thousand_unread_acks() {
    const MESSAGES: u64 = 20_000;
    // Every this many messages the client waits for their ack: more than
    // 2,000 acks, well past the 1,024 events a queue once kept.
    const PACE: u64 = 8;
    let _one = loopback_only();
    let server = Server::bind(
        "127.0.0.1:0",
        ServerOptions::default(),
        Record(Taken::new()),
    )
    .unwrap();
    let addr = server.local_addr();
    let a = serve_then_vanish(server, 2_000, Duration::from_millis(300));
    let stop = Arc::new(AtomicBool::new(false));
    let restart = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let a = a.join().unwrap();
            let (_, b) = serve(addr, stop);
            (a, b)
        })
    };
    let options = ClientOptions::default().retry_for(Duration::from_secs(20));
    let mut client = Client::connect(addr, options).unwrap();
    let session = client.session_id();
    let mut buf = [0u8; 100];
    for sn in 0..MESSAGES {
        workload::fill(session, sn, &mut buf);
        assert_eq!(client.send(&buf).unwrap(), sn);
        if sn % PACE == PACE - 1 {
            // Thousands of acks, each its own event before folding.
            client.wait_acked(sn, Duration::from_secs(20)).unwrap();
        }
    }
    client.flush(Duration::from_secs(20)).unwrap();
    let (a, b) = restart.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let b = b.join().unwrap();

    let events: Vec<ClientEvent> = std::iter::from_fn(|| client.next_event()).collect();
    let restarts: Vec<&Range<u64>> = events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::ServerRestarted { unconfirmed, .. } => Some(unconfirmed),
            _ => None,
        })
        .collect();
    assert_eq!(restarts.len(), 1, "one restart, told once: {events:?}");
    let unconfirmed = restarts[0].clone();
    check_restart_told(session, MESSAGES, &unconfirmed, &a, &b);
    let acks = events
        .iter()
        .filter(|e| matches!(e, ClientEvent::Acked { .. }))
        .count();
    assert!(acks <= 3, "{acks} Acked events: {events:?}");
    assert!(events.len() < 100, "{} events: {events:?}", events.len());
    let last_ack = events.iter().rev().find_map(|e| match e {
        ClientEvent::Acked { upto } => Some(*upto),
        _ => None,
    });
    assert_eq!(last_ack, Some(MESSAGES), "the last Acked covers every sn");
    assert!(client.events_folded() > 0);
}

/// What a `ServerRestarted` must say of instances `a` (gone) and `b`
/// (new): `b` took every sn from the first unconfirmed one on and no
/// other, `a` took every sn before it, and any sn both took is named.
fn check_restart_told(session: u64, total: u64, unconfirmed: &Range<u64>, a: &Taken, b: &Taken) {
    assert!(
        !unconfirmed.is_empty(),
        "sns were in flight: {unconfirmed:?}"
    );
    assert!(unconfirmed.end <= total, "{unconfirmed:?}");
    let sns = |t: &Taken| -> Vec<u64> {
        t.keys()
            .map(|&(s, sn)| {
                assert_eq!(s, session);
                sn
            })
            .collect()
    };
    let (a, b) = (sns(a), sns(b));
    assert_eq!(
        b,
        (unconfirmed.start..total).collect::<Vec<_>>(),
        "instance B's sns"
    );
    assert!(
        (0..unconfirmed.start).all(|sn| a.binary_search(&sn).is_ok()),
        "instance A took every sn acknowledged before the restart"
    );
    let twice: Vec<u64> = a
        .iter()
        .copied()
        .filter(|sn| b.binary_search(sn).is_ok())
        .collect();
    assert!(
        twice.iter().all(|sn| unconfirmed.contains(sn)),
        "taken by both and not announced: {twice:?} (announced {unconfirmed:?})"
    );
}

#[test]
fn the_endpoints_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<Client>();
    send::<Server<Record>>();
    send::<iomsg_ucx::UcxTransport<iomsg_ucx::Dial>>();
}

#[cfg(feature = "tokio")]
mod tokio_api {
    use super::*;
    use iomsg_ucx::tokio::{Client, Server};

    fn share<T: Send + Sync>() {}

    /// A multi-threaded runtime: the handles move between its threads.
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn async_handles_are_send_and_sync() {
        share::<Client>();
        share::<Server>();
    }

    #[test]
    fn receipts_resolve_once_the_stream_has_each_message_once() {
        let _one = loopback_only();
        runtime().block_on(receipts_resolve());
    }

    async fn receipts_resolve() {
        let mut server = Server::bind("127.0.0.1:0", ServerOptions::default())
            .await
            .unwrap();
        let client = Arc::new(
            Client::connect(server.local_addr(), ClientOptions::default())
                .await
                .unwrap(),
        );
        let session = client.session_id();
        let sender = {
            let client = Arc::clone(&client);
            tokio::spawn(async move {
                let mut sent = Taken::new();
                let mut receipts = Vec::new();
                let mut buf = [0u8; 1000];
                for sn in 0..20_000u64 {
                    let len = 1 + (sn as usize * 37) % 1000;
                    workload::fill(session, sn, &mut buf[..len]);
                    let receipt = client.submit(&buf[..len]).await.unwrap();
                    assert_eq!(receipt.sn(), sn);
                    sent.insert((session, sn), workload::hash(&buf[..len]));
                    receipts.push(receipt);
                }
                for r in receipts {
                    r.await.unwrap();
                }
                sent
            })
        };
        let mut taken = Taken::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while taken.len() < 20_000 {
            let d = tokio::time::timeout_at(deadline, server.next())
                .await
                .expect("the stream stalled")
                .unwrap();
            let first = taken.insert((d.session, d.sn), workload::hash(&d.data));
            assert!(first.is_none(), "sn {} delivered twice", d.sn);
        }
        let sent = sender.await.unwrap();
        assert_eq!(taken, sent);
        assert_eq!(client.acked_below(), 20_000);
        assert_eq!(client.send(b"last").await.unwrap(), 20_000);
        assert_eq!(server.next().await.unwrap().data, b"last");
        // Read only now: the acks wait folded into one event, after the
        // connection's own.
        let events: Vec<ClientEvent> = std::iter::from_fn(|| client.next_event()).collect();
        assert!(
            matches!(
                &events[..],
                [
                    ClientEvent::Connecting { .. },
                    ClientEvent::Established { .. },
                    ClientEvent::Acked { upto: 20_001 }
                ]
            ),
            "{events:?}"
        );
    }

    #[test]
    fn an_idle_pair_sleeps_instead_of_polling() {
        let _one = loopback_only();
        runtime().block_on(idle_pair());
    }

    async fn idle_pair() {
        let mut server = Server::bind("127.0.0.1:0", ServerOptions::default())
            .await
            .unwrap();
        let client = Client::connect(server.local_addr(), ClientOptions::default())
            .await
            .unwrap();
        client.send(b"wake").await.unwrap();
        server.next().await.unwrap();
        let cpu = || {
            let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
            // SAFETY: u is valid for writing one rusage.
            let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) };
            assert_eq!(status, 0);
            // SAFETY: getrusage filled it.
            let u = unsafe { u.assume_init() };
            let us = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            us(u.ru_utime) + us(u.ru_stime)
        };
        let before = cpu();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let spent = cpu() - before;
        // Heartbeats every 250 ms and UCX's own progress thread: a few ms.
        // A busy-polling pair would spend about 2 s per endpoint.
        assert!(spent < 0.3, "{spent:.3} s of CPU in 2 s of idling");
        assert_eq!(client.send(b"again").await.unwrap(), 1);
        assert_eq!(server.next().await.unwrap().data, b"again");
    }
}
