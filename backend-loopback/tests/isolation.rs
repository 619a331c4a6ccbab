//! One peer that takes none of its replies (its transport answers
//! `WouldBlock` for every frame to it: a peer that stopped reading, or is
//! frozen) never delays another client. The loopback network has no
//! liveness check, so nothing ever times the stalled peer out: only the
//! server's per-connection isolation keeps the good client going.

mod common;

use core::time::Duration;

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, Message, ReadRequest, ServerConfig,
    ServerEvent, ServerHandler,
};
use iomsg_core::transport::{
    Capabilities, Client, ConnId, Event, Listener, Readiness, SendError, Server, Transport,
};
use iomsg_core::Instant;
use iomsg_loopback::{EndpointId, Network, ServerPort};

/// The server's port, refusing every frame to one client's connections.
struct Stalling {
    inner: ServerPort,
    net: Network,
    stalled: EndpointId,
    /// `WouldBlock`s answered.
    refused: u64,
}

impl Transport for Stalling {
    type TxToken<'a> = <ServerPort as Transport>::TxToken<'a>;
    type RxToken<'a> = <ServerPort as Transport>::RxToken<'a>;

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    fn transmit(
        &mut self,
        now: Instant,
        conn: ConnId,
        len: usize,
    ) -> Result<Self::TxToken<'_>, SendError> {
        if self
            .net
            .conn_endpoints(conn)
            .is_some_and(|(client, _)| client == self.stalled)
        {
            self.refused += 1;
            return Err(SendError::WouldBlock);
        }
        self.inner.transmit(now, conn, len)
    }
    fn poll(&mut self, now: Instant) -> Option<Event<Self::RxToken<'_>>> {
        self.inner.poll(now)
    }
    fn close(&mut self, now: Instant, conn: ConnId) {
        self.inner.close(now, conn);
    }
    fn arm(&mut self) -> Readiness {
        self.inner.arm()
    }
}

impl Listener for Stalling {}

#[derive(Default)]
struct App {
    /// How often each sn of each session was delivered.
    delivered: std::collections::BTreeMap<(u64, u64), u32>,
    events: Vec<ServerEvent>,
}

impl ServerHandler for App {
    fn deliver(&mut self, d: Delivery<'_>) {
        *self.delivered.entry((d.session, d.sn)).or_insert(0) += 1;
    }
    fn respond(&mut self, _: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(7);
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
}

const GOOD: u64 = 0x600d;
const STALLED: u64 = 0x57a1;

/// Runs a good client writing `total` messages next to a stalled client
/// that keeps `stalled_reads` reads in flight; returns the longest time
/// the good client waited for its next ack, and the server's app.
fn run(total: u64, stalled_reads: u32) -> (Duration, App, u64) {
    let net = common::quiet_network();
    let port = net.listen(1, Instant::ZERO).expect("a free address");
    let stalled_port = net.client(1);
    let transport = Stalling {
        inner: port,
        net: net.clone(),
        stalled: stalled_port.endpoint(),
        refused: 0,
    };
    let mut server = Server::new(transport, ServerConfig::new(9)).expect("a server");
    let mut app = App::default();

    // The stalled peer: never hears a reply, and never gives up on its
    // connection (no reply timeout to speak of), as a frozen process.
    let mut cfg = ClientConfig::new(STALLED, 1);
    cfg.reply_timeout = Duration::from_secs(3600);
    let s = ClientSession::<64, _>::new(cfg, Instant::ZERO, vec![0u8; 64 * 64]);
    let mut stalled = Client::new(stalled_port, s).expect("a client");
    stalled.start(Instant::ZERO);
    for _ in 0..stalled_reads {
        stalled
            .submit(Message::Read {
                len: 16,
                request: b"k",
            })
            .expect("room for the stalled reads");
    }

    let cfg = ClientConfig::new(GOOD, 2);
    let s = ClientSession::<32, _>::new(cfg, Instant::ZERO, vec![0u8; 32 * 64]);
    let mut good = Client::new(net.client(1), s).expect("a client");
    let mut now = Instant::ZERO;
    // The stalled peer connects first: its replies are ahead of the good
    // client's in any single queue.
    for _ in 0..50 {
        stalled.poll(now, &mut |_| {});
        server.poll(now, &mut app);
        now = now + Duration::from_micros(10);
    }
    good.start(now);
    let (mut next, mut acked) = (0u64, 0u64);
    let mut last_ack = now;
    let mut longest = Duration::ZERO;
    let deadline = now + Duration::from_secs(10);
    while acked < total && now < deadline {
        while next < total && good.submit(Message::Write(&next.to_le_bytes())).is_ok() {
            next += 1;
        }
        good.poll(now, &mut |e| {
            if let ClientEvent::Acked { upto } = e {
                acked = upto;
                last_ack = now;
            }
        });
        stalled.poll(now, &mut |_| {});
        server.poll(now, &mut app);
        if acked < next {
            longest = longest.max(now.saturating_since(last_ack));
        }
        let timers = [good.poll_timeout(), server.poll_timeout()];
        now = common::next_step(&net, timers, now);
    }
    assert_eq!(acked, total, "the good client finished within 10 s");
    let refused = server.transport().refused;
    (longest, app, refused)
}

#[test]
fn a_peer_that_takes_no_replies_never_delays_another_client() {
    let (longest, app, refused) = run(2_000, 4);
    assert!(refused > 0, "the stalled peer's replies were refused");
    assert!(
        longest < Duration::from_millis(5),
        "the good client waited {longest:?} for an ack"
    );
    let good: Vec<u32> = app
        .delivered
        .iter()
        .filter(|((s, _), _)| *s == GOOD)
        .map(|(_, &n)| n)
        .collect();
    assert_eq!(good.len(), 2_000);
    assert!(good.iter().all(|&n| n == 1), "each of its sns once");
    assert!(
        !app.events
            .iter()
            .any(|e| matches!(e, ServerEvent::SlowConsumer { .. })),
        "a stalled peer within its queue is not closed: {:?}",
        app.events
    );
}

#[test]
fn a_stalled_peer_whose_replies_overflow_is_closed_alone_and_said_so() {
    let (longest, app, _) = run(2_000, 40);
    assert!(
        longest < Duration::from_millis(5),
        "the good client waited {longest:?} for an ack"
    );
    let slow: Vec<Option<u64>> = app
        .events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::SlowConsumer { session, .. } => Some(*session),
            _ => None,
        })
        .collect();
    assert!(!slow.is_empty(), "the overflow was reported");
    assert!(
        slow.iter().all(|&s| s == Some(STALLED)),
        "only the stalled peer was closed: {slow:?}"
    );
}
