//! A server's refusal reaches the client before the close that follows
//! it: the server writes a `Reject` and closes the connection at once,
//! and the client must learn the refusal (a permanent failure, named),
//! never a bare "connection reset" (which it would retry). The same for
//! a client on the other UCX API, refused in the key exchange.
//!
//! Over real UCX on the loopback device, repeated: the frame and the
//! close travel on different sockets (the data lane and UCX's connection
//! manager), so one attempt alone says little about the race.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{ClientConfig, ClientSession, DisconnectCause, FailReason};
use iomsg_core::transport::{self, ClientHandler};
use iomsg_core::wire::RejectReason;
use iomsg_core::Instant;
use iomsg_ucx::{
    Api, Client, ClientEvent, ClientOptions, Delivery, Error, ReadRequest, ResumePoint, Server,
    ServerOptions, UcxConfig, UcxOptions, UcxTransport, WaitMode,
};

/// Refused `Hello`s the test makes; each one is a new connection (and a
/// new UCX context) refused with `Rewound` and closed by the server.
const ATTEMPTS: usize = 50;

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

/// A server application that takes everything.
struct Take;

impl iomsg_ucx::ServerHandler for Take {
    fn deliver(&mut self, _: Delivery<'_>) {}
    fn respond(&mut self, _: ReadRequest<'_>, _: &mut [u8]) {}
}

/// A client application that keeps every event, in order.
#[derive(Default)]
struct Events(Vec<ClientEvent>);

impl ClientHandler for Events {
    fn event(&mut self, event: ClientEvent) {
        self.0.push(event);
    }
}

impl Events {
    fn failed(&self) -> Option<FailReason> {
        self.0.iter().find_map(|e| match e {
            ClientEvent::Failed(reason) => Some(*reason),
            _ => None,
        })
    }

    /// How the first connection ended, if it did.
    fn first_disconnect(&self) -> Option<DisconnectCause> {
        self.0.iter().find_map(|e| match e {
            ClientEvent::Disconnected { cause, .. } => Some(*cause),
            _ => None,
        })
    }
}

/// How one refused attempt ended.
#[derive(Debug)]
enum Outcome {
    /// The refusal was named: the first disconnect was the `Reject`, and
    /// the session failed with `Rewound`.
    Refused,
    /// The client saw its connection end otherwise first.
    Lost(DisconnectCause),
    /// Nothing within the time allowed: the events seen.
    Stuck(Vec<ClientEvent>),
}

/// Resumes session `identity` at sn 0 with an epoch above any used, so
/// that the server refuses it as `Rewound`; drives the client until its
/// first connection ends. No retry is left to hide a lost `Reject`: the
/// first disconnect decides.
fn refused_attempt(addr: SocketAddr, api: Api, identity: (u64, u64), epoch: u32) -> Outcome {
    let config = UcxConfig::default().api(api).mode(WaitMode::BusyPoll);
    let transport = UcxTransport::client(addr, config).unwrap();
    let clock = Wall::now();
    let session = ClientSession::resume(
        ClientConfig::new(identity.0, identity.1),
        Instant::since(clock),
        vec![0u8; 1 << 16].into_boxed_slice(),
        ResumePoint::new(0, epoch),
    );
    let mut driver = transport::Client::<_, 64, _>::new(transport, session).unwrap();
    driver.start(Instant::since(clock));
    let mut events = Events::default();
    while clock.elapsed() < Duration::from_secs(5) {
        driver.poll(Instant::since(clock), &mut events);
        if let Some(cause) = events.first_disconnect() {
            let rewound = matches!(
                cause,
                DisconnectCause::Rejected {
                    reason: RejectReason::Rewound,
                    ..
                }
            );
            return match events.failed() {
                Some(FailReason::Rewound { .. }) if rewound => Outcome::Refused,
                _ => Outcome::Lost(cause),
            };
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Outcome::Stuck(events.0)
}

/// A server that refuses every attempt after the session's first run, and
/// `ATTEMPTS` refused clients: each must end on the `Reject`.
fn every_refusal_is_named(api: Api) {
    let _one = loopback_only();
    let stop = Arc::new(AtomicBool::new(false));
    let options = ServerOptions::default().api(api);
    let mut server = Server::bind("127.0.0.1:0", options, Take).unwrap();
    let addr = server.local_addr();
    let serving = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || server.run_until(|_| stop.load(Ordering::Relaxed)).unwrap())
    };
    // The session's first run: three messages the server took.
    let mut first = Client::connect(addr, ClientOptions::default().api(api)).unwrap();
    let identity = first.identity();
    for _ in 0..3 {
        first.send(b"taken").unwrap();
    }
    first.flush(Duration::from_secs(5)).unwrap();
    first.close(Duration::from_secs(5)).unwrap();

    let started = Wall::now();
    let mut lost = Vec::new();
    for i in 0..ATTEMPTS {
        match refused_attempt(addr, api, identity, 1_000 + i as u32) {
            Outcome::Refused => {}
            Outcome::Lost(cause) => lost.push(cause),
            Outcome::Stuck(events) => panic!("attempt {i}: no disconnect in 5 s: {events:?}"),
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    serving.join().unwrap();
    eprintln!(
        "{api:?}: {} of {ATTEMPTS} refused attempts lost the Reject, in {took:?}",
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "{} of {ATTEMPTS} refused attempts saw their connection end before the Reject \
         arrived; the first: {:?}",
        lost.len(),
        lost[0]
    );
}

#[test]
fn a_refused_hello_is_named_every_time_never_a_reset_over_tag_matching() {
    every_refusal_is_named(Api::Tag);
}

#[test]
fn a_refused_hello_is_named_every_time_never_a_reset_over_active_messages() {
    every_refusal_is_named(Api::Am);
}

/// Clients on the other API the test starts, one after the other.
const OTHER_API_CLIENTS: usize = 10;

/// The longest a refused `connect` may take. The refusal takes tens of
/// milliseconds; the slack is for a host whose two cores are busy (a
/// connection request the kernel dropped is sent again after a second).
/// A client that retried would fail only after its connect timeout, and
/// with `ConnectTimeout`.
const AT_ONCE: Duration = Duration::from_secs(2);

/// A server on `server_api` served on a thread of its own, and clients on
/// the other API: each `connect` fails at once (not after the connect
/// timeout, nor after retries), naming the API mismatch. Both ends
/// busy-poll, as `iomsg server` and `iomsg client` do by default: the
/// server then reads the client's key before its own is out, and must
/// not close before it is.
fn the_other_api_fails_at_once_saying_so(server_api: Api) {
    let _one = loopback_only();
    let client_api = match server_api {
        Api::Tag => Api::Am,
        Api::Am => Api::Tag,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let options = ServerOptions::default().api(server_api).busy_poll(true);
    let mut server = Server::bind("127.0.0.1:0", options, Take).unwrap();
    let addr = server.local_addr();
    let serving = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || server.run_until(|_| stop.load(Ordering::Relaxed)).unwrap())
    };
    let mut slowest = Duration::ZERO;
    for i in 0..OTHER_API_CLIENTS {
        let options = ClientOptions::default()
            .api(client_api)
            .busy_poll(true)
            .connect_timeout(Duration::from_secs(3));
        let started = Wall::now();
        let failed = Client::connect(addr, options);
        let took = started.elapsed();
        slowest = slowest.max(took);
        let Err(e) = failed else {
            panic!("client {i} on {client_api:?} connected to a server on {server_api:?}");
        };
        assert!(
            matches!(&e, Error::Failed(FailReason::Refused { cause }) if cause.name == "API mismatch"),
            "client {i} on {client_api:?} to a server on {server_api:?}, after {took:?}: {e}"
        );
        assert!(e.to_string().contains("API mismatch"), "{e}");
        assert!(took < AT_ONCE, "client {i} failed only after {took:?}: {e}");
    }
    stop.store(true, Ordering::Relaxed);
    serving.join().unwrap();
    eprintln!(
        "{client_api:?} clients to a {server_api:?} server: {OTHER_API_CLIENTS} refused, \
         the slowest in {slowest:?}"
    );
}

#[test]
fn an_active_message_client_of_a_tag_server_fails_at_once_naming_the_api_mismatch() {
    the_other_api_fails_at_once_saying_so(Api::Tag);
}

#[test]
fn a_tag_client_of_an_active_message_server_fails_at_once_naming_the_api_mismatch() {
    the_other_api_fails_at_once_saying_so(Api::Am);
}
