//! The in-process network: endpoints, connections, virtual latency.

use core::cell::RefCell;
use core::cmp::{Ordering, Reverse};
use core::time::Duration;
use std::collections::{BinaryHeap, HashMap};
use std::rc::Rc;

use iomsg_core::transport::{ConnId, DisconnectReason, SendError, Transport, TransportEvent};
use iomsg_core::wire::Op;
use iomsg_core::Instant;

use crate::fault::{FaultConfig, FaultCounts, FaultInjector, FrameFault};

/// A server address on the loopback network.
pub type Addr = u16;

type EpId = usize;

/// A network-wide endpoint identity. Endpoint slots are reused after a
/// crash or a drop (so a million restarts do not grow the network), their
/// identities never are: an event meant for a dead endpoint is discarded
/// even when its slot now belongs to another.
pub type EndpointId = u64;

/// What the network did with a frame sent towards a server endpoint, as
/// reported to the [tap](Network::set_tap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapKind {
    /// Handed to the server endpoint's `poll`: really received.
    Received,
    /// Lost by a `SilentDrop` fault while its connection stayed open.
    SilentlyDropped,
}

/// One frame the network carried (or silently lost) towards a server
/// endpoint. The network does not look inside it: the frame is passed as
/// raw bytes, exactly as received (after faults such as corruption).
#[derive(Clone, Copy, Debug)]
pub struct Tap<'a> {
    /// What happened to it.
    pub kind: TapKind,
    /// Its connection.
    pub conn: ConnId,
    /// The client endpoint that owns the connection.
    pub client: EndpointId,
    /// The server endpoint it was (or would have been) handed to.
    pub server: EndpointId,
    /// The raw frame.
    pub frame: &'a [u8],
}

/// A recorder of every [`Tap`]; see [`Network::set_tap`].
pub type TapFn = Box<dyn FnMut(&Tap<'_>)>;

/// Where a connection stands, as the network sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnStatus {
    /// Both ends may send.
    Open,
    /// Closed by one end: what was sent before still arrives.
    Closing,
    /// Broken by the network after the frames already sent (a `Disconnect`
    /// fault): they still arrive, then both ends hear `PeerFailed`.
    Breaking,
    /// Broken: nothing more arrives.
    Reset,
}

/// What the network itself threw away (faults are in [`FaultCounts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetworkCounts {
    /// Frames handed to an endpoint's `poll`.
    pub received: u64,
    /// Frames lost because their connection broke, or its receiving end
    /// had closed it, before they arrived (faults are counted apart).
    pub discarded: u64,
    /// Events (frames, notices) waiting for or addressed to an endpoint
    /// that no longer exists (a crashed server, a client's rebuilt-away
    /// transport).
    pub to_dead_endpoint: u64,
}

/// Network parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkConfig {
    /// One-way latency of every frame and event.
    pub latency: Duration,
    /// How long an endpoint takes to notice that its peer crashed or that
    /// the connection reset (UCX's error callback delay, TCP's RST).
    pub detect_delay: Duration,
    /// Seed of the fault injector.
    pub seed: u64,
    /// What to inject.
    pub faults: FaultConfig,
}

impl Default for NetworkConfig {
    /// 5 µs latency, 50 µs failure detection, no faults.
    fn default() -> Self {
        NetworkConfig {
            latency: Duration::from_micros(5),
            detect_delay: Duration::from_micros(50),
            seed: 0,
            faults: FaultConfig::default(),
        }
    }
}

#[derive(Debug)]
enum Kind {
    Connected,
    Accepted,
    Frame(Vec<u8>),
    Disconnected(DisconnectReason),
}

#[derive(Debug)]
struct Pending {
    at: Instant,
    /// Tie-breaker: equal times keep their sending order.
    seq: u64,
    sent_at: Instant,
    conn: ConnId,
    /// Addressed to the connection's server end.
    to_server: bool,
    kind: Kind,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Debug, Default)]
struct Endpoint {
    /// Ordered by delivery time; one connection's events keep their order
    /// because their times never decrease (see `Conn::last_at`).
    inbox: BinaryHeap<Reverse<Pending>>,
    alive: bool,
    /// The identity of the endpoint that holds the slot now.
    uid: EndpointId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    Open,
    /// Closed gracefully by one side: frames sent before still arrive.
    Closing {
        at: Instant,
    },
    /// Broken: nothing more arrives.
    Reset,
}

#[derive(Debug)]
struct Conn {
    client: EpId,
    client_uid: EndpointId,
    server: EpId,
    /// 0 when the connection never reached a server.
    server_uid: EndpointId,
    state: ConnState,
    /// Each side is done with it (closed it or was told it is gone).
    client_done: bool,
    server_done: bool,
    /// The server saw `Accepted`, so it must also see `Disconnected`.
    server_announced: bool,
    /// The connection ended before the server saw `Accepted`: the server
    /// hears of it right after the `Accepted`.
    server_notice: Option<DisconnectReason>,
    /// The network broke it (a `Disconnect` fault), not one of its ends.
    broken: bool,
    /// A reordered frame waiting for `left` later frames, per direction
    /// (`[to_server, to_client]`).
    held: [Option<(Vec<u8>, u8)>; 2],
    /// Latest delivery time queued per direction: a later event of the same
    /// connection never arrives before it (a delayed frame delays the rest).
    last_at: [Instant; 2],
}

struct Inner {
    config: NetworkConfig,
    now: Instant,
    endpoints: Vec<Endpoint>,
    free_endpoints: Vec<EpId>,
    listeners: HashMap<Addr, EpId>,
    conns: HashMap<ConnId, Conn>,
    next_conn: ConnId,
    pool: Vec<Vec<u8>>,
    faults: FaultInjector,
    seq: u64,
    next_uid: EndpointId,
    tap: Option<TapFn>,
    counts: NetworkCounts,
}

/// The shared network. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Network {
    inner: Rc<RefCell<Inner>>,
}

/// Why `listen` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrInUse(pub Addr);

impl core::fmt::Display for AddrInUse {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "loopback address {} is in use: crash or drop its server first",
            self.0
        )
    }
}

impl Network {
    /// A network with no endpoints.
    pub fn new(config: NetworkConfig) -> Network {
        let faults = FaultInjector::new(config.faults.clone(), config.seed);
        Network {
            inner: Rc::new(RefCell::new(Inner {
                config,
                now: Instant::ZERO,
                endpoints: Vec::new(),
                free_endpoints: Vec::new(),
                listeners: HashMap::new(),
                conns: HashMap::new(),
                next_conn: 0,
                pool: Vec::new(),
                faults,
                seq: 0,
                next_uid: 0,
                tap: None,
                counts: NetworkCounts::default(),
            })),
        }
    }

    /// A client endpoint whose connections go to `server`.
    pub fn client(&self, server: Addr) -> ClientPort {
        let (ep, uid) = self.inner.borrow_mut().new_endpoint();
        ClientPort {
            net: self.clone(),
            ep,
            uid,
            server,
        }
    }

    /// A server endpoint listening on `addr` from `now` on.
    pub fn listen(&self, addr: Addr, now: Instant) -> Result<ServerPort, AddrInUse> {
        let ep = self.at(now, |n| {
            if n.listeners.contains_key(&addr) {
                return Err(AddrInUse(addr));
            }
            let (ep, uid) = n.new_endpoint();
            n.listeners.insert(addr, ep);
            Ok((ep, uid))
        })?;
        Ok(ServerPort {
            net: self.clone(),
            ep: ep.0,
            uid: ep.1,
            addr,
        })
    }

    /// The earliest instant at which some endpoint has something to poll.
    pub fn next_event(&self) -> Option<Instant> {
        let inner = self.inner.borrow();
        inner
            .endpoints
            .iter()
            .filter(|e| e.alive)
            .filter_map(|e| e.inbox.peek().map(|p| p.0.at))
            .min()
    }

    /// Breaks every open connection (both ends are told after the detection
    /// delay; frames in flight are lost). Returns how many broke.
    pub fn disconnect_all(&self, now: Instant) -> usize {
        let mut inner = self.inner.borrow_mut();
        inner.advance(now);
        let mut ids: Vec<ConnId> = inner
            .conns
            .iter()
            .filter(|(_, c)| c.state == ConnState::Open)
            .map(|(&id, _)| id)
            .collect();
        // The map's order is random per process; the run must not be.
        ids.sort_unstable();
        for &id in &ids {
            inner.reset(id, DisconnectReason::PeerFailed);
        }
        ids.len()
    }

    /// Replaces the fault configuration (counts and schedule position carry
    /// on); `FaultConfig::default()` turns injection off.
    pub fn set_faults(&self, faults: FaultConfig) {
        let mut inner = self.inner.borrow_mut();
        inner.config.faults = faults.clone();
        inner.faults.set_config(faults);
    }

    /// What the fault injector did.
    pub fn fault_counts(&self) -> FaultCounts {
        self.inner.borrow().faults.counts()
    }

    /// Connections the network still tracks (open, or not yet released by
    /// both ends).
    pub fn connections(&self) -> usize {
        self.inner.borrow().conns.len()
    }

    /// Installs (or with `None` removes) the tap: it sees every frame the
    /// network hands to a server endpoint's `poll`, and every frame it
    /// silently drops on its way to one, with the connection and both
    /// endpoints. It runs inside the network and must not call back into it.
    pub fn set_tap(&self, tap: Option<TapFn>) {
        self.inner.borrow_mut().tap = tap;
    }

    /// Where a connection stands; `None` once both ends released it.
    pub fn conn_status(&self, conn: ConnId) -> Option<ConnStatus> {
        self.inner.borrow().conns.get(&conn).map(|c| match c.state {
            ConnState::Open => ConnStatus::Open,
            ConnState::Closing { .. } if c.broken => ConnStatus::Breaking,
            ConnState::Closing { .. } => ConnStatus::Closing,
            ConnState::Reset => ConnStatus::Reset,
        })
    }

    /// Frames of `conn` on their way to its server: queued for delivery or
    /// held back by a reorder fault.
    pub fn frames_to_server(&self, conn: ConnId) -> usize {
        let inner = self.inner.borrow();
        let Some(c) = inner.conns.get(&conn) else {
            return 0;
        };
        let queued = inner.endpoints.get(c.server).map_or(0, |ep| {
            ep.inbox
                .iter()
                .filter(|Reverse(p)| p.conn == conn && matches!(p.kind, Kind::Frame(_)))
                .count()
        });
        queued + usize::from(c.held[0].is_some())
    }

    /// What the network threw away.
    pub fn counts(&self) -> NetworkCounts {
        self.inner.borrow().counts
    }
}

impl Inner {
    fn advance(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    fn new_endpoint(&mut self) -> (EpId, EndpointId) {
        let ep = match self.free_endpoints.pop() {
            Some(ep) => ep,
            None => {
                self.endpoints.push(Endpoint::default());
                self.endpoints.len() - 1
            }
        };
        self.next_uid += 1;
        let uid = self.next_uid;
        let e = &mut self.endpoints[ep];
        e.alive = true;
        e.uid = uid;
        (ep, uid)
    }

    fn buffer(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(bytes);
        b
    }

    fn recycle(&mut self, kind: Kind) {
        if let Kind::Frame(b) = kind {
            if self.pool.len() < 4096 {
                self.pool.push(b);
            }
        }
    }

    fn discard(&mut self, kind: Kind) {
        if matches!(kind, Kind::Frame(_)) {
            self.counts.discarded += 1;
        }
        self.recycle(kind);
    }

    /// Queues an event for one end of a connection, behind everything
    /// queued on it in that direction (frames, a graceful close).
    fn push(&mut self, conn: ConnId, to_server: bool, at: Instant, kind: Kind) {
        self.push_with(conn, to_server, at, kind, true);
    }

    /// `ordered`: behind everything queued on the connection in this
    /// direction; a reset's notice is not.
    fn push_with(&mut self, conn: ConnId, to_server: bool, at: Instant, kind: Kind, ordered: bool) {
        let sent_at = self.now;
        let Some(c) = self.conns.get_mut(&conn) else {
            return self.discard(kind);
        };
        let (ep, uid) = if to_server {
            (c.server, c.server_uid)
        } else {
            (c.client, c.client_uid)
        };
        // Keep the connection's order in this direction.
        let at = if ordered {
            let dir = usize::from(!to_server);
            let at = at.max(c.last_at[dir]);
            c.last_at[dir] = at;
            at
        } else {
            at
        };
        self.seq += 1;
        let seq = self.seq;
        match self
            .endpoints
            .get_mut(ep)
            .filter(|e| e.alive && e.uid == uid)
        {
            Some(e) => e.inbox.push(Reverse(Pending {
                at,
                seq,
                sent_at,
                conn,
                to_server,
                kind,
            })),
            None => {
                self.counts.to_dead_endpoint += 1;
                self.recycle(kind);
            }
        }
    }

    /// Tells the server end that the connection is gone, now or (before it
    /// saw `Accepted`) right after the `Accepted`.
    fn tell_server(&mut self, id: ConnId, at: Instant, reason: DisconnectReason, ordered: bool) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.server_done {
            return;
        }
        if c.server_announced {
            self.push_with(id, true, at, Kind::Disconnected(reason), ordered);
        } else {
            c.server_notice.get_or_insert(reason);
        }
    }

    /// Breaks a connection: both ends hear of it after the detection delay.
    fn reset(&mut self, id: ConnId, reason: DisconnectReason) {
        let at = self.now + self.config.detect_delay;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.state = ConnState::Reset;
        let held: [Option<(Vec<u8>, u8)>; 2] = [c.held[0].take(), c.held[1].take()];
        let tell_client = !c.client_done;
        for (b, _) in held.into_iter().flatten() {
            self.discard(Kind::Frame(b));
        }
        if tell_client {
            self.push_with(id, false, at, Kind::Disconnected(reason), false);
        }
        self.tell_server(id, at, reason, false);
        self.maybe_forget(id);
    }

    /// Breaks a connection after the frames already sent on it (a
    /// `Disconnect` fault): they still arrive, then both ends hear
    /// `PeerFailed`. Frames sent afterwards are lost.
    fn break_after_sent(&mut self, id: ConnId) {
        let at = self.now + self.config.detect_delay;
        let now = self.now;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.state != ConnState::Open {
            return;
        }
        c.state = ConnState::Closing { at: now };
        c.broken = true;
        let held: [Option<(Vec<u8>, u8)>; 2] = [c.held[0].take(), c.held[1].take()];
        let tell_client = !c.client_done;
        // A reordered frame still held was sent before the break: it
        // arrives, late, before the notice.
        let frame_at = now + self.config.latency;
        for (dir, h) in held.into_iter().enumerate() {
            if let Some((b, _)) = h {
                self.push(id, dir == 0, frame_at, Kind::Frame(b));
            }
        }
        let reason = DisconnectReason::PeerFailed;
        if tell_client {
            self.push(id, false, at, Kind::Disconnected(reason));
        }
        self.tell_server(id, at, reason, true);
    }

    fn maybe_forget(&mut self, id: ConnId) {
        let done = self
            .conns
            .get(&id)
            .is_some_and(|c| c.client_done && (c.server_done || !c.server_announced));
        if done {
            if let Some(c) = self.conns.remove(&id) {
                for (b, _) in c.held.into_iter().flatten() {
                    self.discard(Kind::Frame(b));
                }
            }
        }
    }

    fn connect(&mut self, client: EpId, client_uid: EndpointId, addr: Addr) -> ConnId {
        self.next_conn = self.next_conn.wrapping_add(1);
        let id = self.next_conn;
        let latency = self.config.latency;
        let server = self.listeners.get(&addr).copied();
        let conn = Conn {
            client,
            client_uid,
            server: server.unwrap_or(client),
            server_uid: server.map_or(0, |s| self.endpoints[s].uid),
            state: if server.is_some() {
                ConnState::Open
            } else {
                ConnState::Reset
            },
            client_done: false,
            server_done: server.is_none(),
            server_announced: false,
            server_notice: None,
            broken: false,
            held: [None, None],
            last_at: [Instant::ZERO; 2],
        };
        self.conns.insert(id, conn);
        match server {
            Some(_) => {
                self.push(id, true, self.now + latency, Kind::Accepted);
                self.push(id, false, self.now + latency + latency, Kind::Connected);
            }
            None => {
                let reason = DisconnectReason::ConnectFailed;
                self.push(id, false, self.now + latency, Kind::Disconnected(reason));
            }
        }
        id
    }

    fn send(&mut self, uid: EndpointId, id: ConnId, frame: &[u8]) -> Result<(), SendError> {
        let Some(c) = self.conns.get(&id) else {
            return Err(SendError::NotConnected);
        };
        let to_server = c.client_uid == uid;
        if !to_server && c.server_uid != uid {
            return Err(SendError::NotConnected);
        }
        let done = if to_server {
            c.client_done
        } else {
            c.server_done
        };
        if done {
            return Err(SendError::NotConnected);
        }
        if c.state != ConnState::Open {
            // Broken, and this side has not heard yet: the send "completes"
            // locally and the frame is lost. Local completion is not delivery.
            self.counts.discarded += 1;
            return Ok(());
        }
        let (client_uid, server_uid) = (c.client_uid, c.server_uid);
        let data = matches!(frame.get(5).copied(), Some(op) if op == Op::Write as u8 || op == Op::Read as u8);
        let fault = self.faults.next(to_server, data);
        let at = self.now + self.config.latency;
        match fault {
            None => self.enqueue(id, to_server, at, frame),
            Some(FrameFault::Drop) => self.reset(id, DisconnectReason::PeerFailed),
            Some(FrameFault::SilentDrop) => {
                if let (true, Some(tap)) = (to_server, self.tap.as_mut()) {
                    tap(&Tap {
                        kind: TapKind::SilentlyDropped,
                        conn: id,
                        client: client_uid,
                        server: server_uid,
                        frame,
                    });
                }
            }
            Some(FrameFault::Duplicate) => {
                self.enqueue(id, to_server, at, frame);
                self.enqueue(id, to_server, at, frame);
            }
            Some(FrameFault::Reorder) => {
                let depth = self.config.faults.reorder_depth.max(1);
                let b = self.buffer(frame);
                let dir = usize::from(!to_server);
                let slot = self.conns.get_mut(&id).map(|c| &mut c.held[dir]);
                match slot {
                    Some(slot @ None) => *slot = Some((b, depth)),
                    _ => self.push(id, to_server, at, Kind::Frame(b)),
                }
            }
            Some(FrameFault::Corrupt) => {
                let mut b = self.buffer(frame);
                let bit = self.faults.below(b.len() as u64 * 8);
                if let Some(byte) = b.get_mut((bit / 8) as usize) {
                    *byte ^= 1 << (bit % 8);
                }
                self.push(id, to_server, at, Kind::Frame(b));
            }
            Some(FrameFault::Delay) => {
                let at = at + self.config.faults.delay;
                self.enqueue(id, to_server, at, frame);
            }
            Some(FrameFault::Disconnect) => {
                self.enqueue(id, to_server, at, frame);
                self.break_after_sent(id);
            }
        }
        Ok(())
    }

    /// Queues a frame, then a held (reordered) frame whose wait is over.
    fn enqueue(&mut self, id: ConnId, to_server: bool, at: Instant, frame: &[u8]) {
        let b = self.buffer(frame);
        self.push(id, to_server, at, Kind::Frame(b));
        let dir = usize::from(!to_server);
        let released = match self.conns.get_mut(&id).map(|c| &mut c.held[dir]) {
            Some(slot @ Some(_)) => {
                let left = slot.as_ref().map_or(0, |(_, l)| *l);
                if left <= 1 {
                    slot.take().map(|(b, _)| b)
                } else {
                    if let Some((_, l)) = slot.as_mut() {
                        *l -= 1;
                    }
                    None
                }
            }
            _ => None,
        };
        if let Some(b) = released {
            self.push(id, to_server, at, Kind::Frame(b));
        }
    }

    fn close(&mut self, uid: EndpointId, id: ConnId) {
        let at = self.now + self.config.latency;
        let now = self.now;
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let by_client = c.client_uid == uid;
        if !by_client && c.server_uid != uid {
            return;
        }
        if by_client {
            c.client_done = true;
        } else {
            c.server_done = true;
        }
        if c.state == ConnState::Open {
            c.state = ConnState::Closing { at: now };
            // A reordered frame still held was sent before the close: it
            // arrives, late, before the close.
            let held: [Option<(Vec<u8>, u8)>; 2] = [c.held[0].take(), c.held[1].take()];
            let tell_client = !by_client && !c.client_done;
            for (dir, h) in held.into_iter().enumerate() {
                if let Some((b, _)) = h {
                    self.push(id, dir == 0, at, Kind::Frame(b));
                }
            }
            let reason = DisconnectReason::PeerClosed;
            if by_client {
                self.tell_server(id, at, reason, true);
            } else if tell_client {
                self.push(id, false, at, Kind::Disconnected(reason));
            }
        }
        self.maybe_forget(id);
    }

    /// The endpoint's process is gone: its connections reset, its listener
    /// closes, its inbox is dropped.
    fn crash(&mut self, ep: EpId, uid: EndpointId) {
        let mut ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.client_uid == uid || c.server_uid == uid)
            .map(|(&id, _)| id)
            .collect();
        // The map's order is random per process; the run must not be.
        ids.sort_unstable();
        for id in ids {
            if let Some(c) = self.conns.get_mut(&id) {
                if c.client_uid == uid {
                    c.client_done = true;
                } else {
                    c.server_done = true;
                }
            }
            self.reset(id, DisconnectReason::PeerFailed);
        }
        self.listeners.retain(|_, &mut e| e != ep);
        let inbox = core::mem::take(&mut self.endpoints[ep].inbox);
        self.counts.to_dead_endpoint += inbox.len() as u64;
        for p in inbox {
            self.recycle(p.0.kind);
        }
        self.endpoints[ep].alive = false;
        self.free_endpoints.push(ep);
    }

    fn poll(&mut self, ep: EpId, now: Instant, buf: &mut [u8]) -> Option<TransportEvent> {
        self.advance(now);
        loop {
            let front = self.endpoints.get(ep)?.inbox.peek()?;
            if front.0.at > now {
                return None;
            }
            let p = self.endpoints[ep].inbox.pop()?.0;
            let Some(c) = self.conns.get_mut(&p.conn) else {
                self.discard(p.kind);
                continue;
            };
            let done = if p.to_server {
                c.server_done
            } else {
                c.client_done
            };
            if done {
                self.discard(p.kind);
                continue;
            }
            let conn = p.conn;
            match p.kind {
                Kind::Frame(b) => {
                    let deliver = match c.state {
                        ConnState::Open => true,
                        ConnState::Closing { at } => p.sent_at <= at,
                        ConnState::Reset => false,
                    };
                    if !deliver {
                        self.discard(Kind::Frame(b));
                        continue;
                    }
                    let (client, server) = (c.client_uid, c.server_uid);
                    self.counts.received += 1;
                    if let (true, Some(tap)) = (p.to_server, self.tap.as_mut()) {
                        tap(&Tap {
                            kind: TapKind::Received,
                            conn,
                            client,
                            server,
                            frame: &b,
                        });
                    }
                    let n = b.len().min(buf.len());
                    buf[..n].copy_from_slice(&b[..n]);
                    let len = b.len();
                    self.recycle(Kind::Frame(b));
                    return Some(TransportEvent::Received { conn, len });
                }
                Kind::Connected => return Some(TransportEvent::Connected { conn }),
                Kind::Accepted => {
                    c.server_announced = true;
                    if let Some(reason) = c.server_notice.take() {
                        // It ended before this end knew of it.
                        self.push(conn, true, now, Kind::Disconnected(reason));
                    }
                    return Some(TransportEvent::Accepted { conn });
                }
                Kind::Disconnected(reason) => {
                    if p.to_server {
                        c.server_done = true;
                    } else {
                        c.client_done = true;
                    }
                    self.maybe_forget(conn);
                    return Some(TransportEvent::Disconnected { conn, reason });
                }
            }
        }
    }
}

/// A client endpoint: connects to one server address.
pub struct ClientPort {
    net: Network,
    ep: EpId,
    uid: EndpointId,
    server: Addr,
}

/// A server endpoint: accepts connections on its address until it crashes
/// or is dropped.
pub struct ServerPort {
    net: Network,
    ep: EpId,
    uid: EndpointId,
    addr: Addr,
}

impl ServerPort {
    /// The address it listens on.
    pub fn addr(&self) -> Addr {
        self.addr
    }
    /// Its network-wide identity (as a [`Tap`] names it).
    pub fn endpoint(&self) -> EndpointId {
        self.uid
    }
}

impl ClientPort {
    /// The server address it connects to.
    pub fn server(&self) -> Addr {
        self.server
    }
    /// Its network-wide identity (as a [`Tap`] names it).
    pub fn endpoint(&self) -> EndpointId {
        self.uid
    }
}

impl Drop for ClientPort {
    /// The client process (or its transport) is gone: its connections reset,
    /// and whatever still arrives for it goes to a dead endpoint.
    fn drop(&mut self) {
        self.net.inner.borrow_mut().crash(self.ep, self.uid);
    }
}

impl Drop for ServerPort {
    /// The server process is gone: its connections reset, the address is free.
    fn drop(&mut self) {
        self.net.inner.borrow_mut().crash(self.ep, self.uid);
    }
}

impl Network {
    /// Runs `f` on the network with its clock moved on to `now`.
    fn at<R>(&self, now: Instant, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.inner.borrow_mut();
        inner.advance(now);
        f(&mut inner)
    }
}

impl Transport for ClientPort {
    fn connect(&mut self, now: Instant) -> Result<ConnId, DisconnectReason> {
        Ok(self
            .net
            .at(now, |n| n.connect(self.ep, self.uid, self.server)))
    }
    fn send(&mut self, now: Instant, conn: ConnId, frame: &[u8]) -> Result<(), SendError> {
        self.net.at(now, |n| n.send(self.uid, conn, frame))
    }
    fn close(&mut self, now: Instant, conn: ConnId) {
        self.net.at(now, |n| n.close(self.uid, conn));
    }
    fn poll(&mut self, now: Instant, buf: &mut [u8]) -> Option<TransportEvent> {
        self.net.at(now, |n| n.poll(self.ep, now, buf))
    }
}

impl Transport for ServerPort {
    /// A server port does not open connections.
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        Err(DisconnectReason::ConnectFailed)
    }
    fn send(&mut self, now: Instant, conn: ConnId, frame: &[u8]) -> Result<(), SendError> {
        self.net.at(now, |n| n.send(self.uid, conn, frame))
    }
    fn close(&mut self, now: Instant, conn: ConnId) {
        self.net.at(now, |n| n.close(self.uid, conn));
    }
    fn poll(&mut self, now: Instant, buf: &mut [u8]) -> Option<TransportEvent> {
        self.net.at(now, |n| n.poll(self.ep, now, buf))
    }
}

#[cfg(test)]
mod tests;
