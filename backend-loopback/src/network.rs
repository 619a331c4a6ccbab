//! The in-process network: endpoints, connections, virtual latency.

use core::cell::RefCell;
use core::cmp::{Ordering, Reverse};
use core::time::Duration;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::rc::Rc;

use iomsg_core::transport::{ConnId, DisconnectReason, Event, SendError};
use iomsg_core::Instant;

use inbox::{Inbox, KeyMap, Kind, Pending};

/// A server address on the loopback network.
pub type Addr = u16;

type EpId = usize;

/// A network-wide endpoint identity. Endpoint slots are reused after a
/// crash or a drop (so a million restarts do not grow the network), their
/// identities never are: an event meant for a dead endpoint is discarded
/// even when its slot now belongs to another.
pub type EndpointId = u64;

/// What happened to a frame sent towards a server endpoint, as a
/// [tap](Network::set_tap) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TapKind {
    /// Handed to the server endpoint's `poll`: really received.
    Received,
    /// Lost by a `SilentDrop` fault while its connection stayed open (the
    /// fault injector's report: the network never saw it).
    SilentlyDropped,
}

/// One frame the network carried (or silently lost) towards a server
/// endpoint. The network does not look inside it: the frame is passed as
/// raw bytes, exactly as received (after any fault a wrapper injected).
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
    /// Broken: nothing more arrives.
    Reset,
}

/// What the network itself threw away (faults are counted by
/// [`Faults`](crate::Faults)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetworkCounts {
    /// Frames handed to an endpoint's `poll`.
    pub received: u64,
    /// Frames lost because their connection broke, or its receiving end
    /// had closed it, before they arrived.
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
}

impl Default for NetworkConfig {
    /// 5 µs latency, 50 µs failure detection.
    fn default() -> Self {
        NetworkConfig {
            latency: Duration::from_micros(5),
            detect_delay: Duration::from_micros(50),
        }
    }
}

#[derive(Debug, Default)]
struct Endpoint {
    /// Ordered by delivery time; one connection's events keep their order
    /// because their times never decrease (see `Conn::last_at`).
    inbox: Inbox,
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
    /// Latest delivery time queued per direction: a later event of the same
    /// connection never arrives before it (a delayed frame delays the rest).
    last_at: [Instant; 2],
}

struct Inner {
    config: NetworkConfig,
    now: Instant,
    endpoints: Vec<Endpoint>,
    free_endpoints: Vec<EpId>,
    listeners: KeyMap<Addr, EpId>,
    conns: KeyMap<ConnId, Conn>,
    next_conn: u64,
    pool: Vec<Vec<u8>>,
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

impl std::error::Error for AddrInUse {}

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
        Network {
            inner: Rc::new(RefCell::new(Inner {
                config,
                now: Instant::ZERO,
                endpoints: Vec::new(),
                free_endpoints: Vec::new(),
                listeners: KeyMap::default(),
                conns: KeyMap::default(),
                next_conn: 0,
                pool: Vec::new(),
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
            .filter_map(|e| e.inbox.peek().map(|p| p.at))
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
            inner.reset(
                id,
                DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN),
            );
        }
        ids.len()
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
            ConnState::Closing { .. } => ConnStatus::Closing,
            ConnState::Reset => ConnStatus::Reset,
        })
    }

    /// The client and server endpoints of `conn`, while the network
    /// tracks it.
    pub fn conn_endpoints(&self, conn: ConnId) -> Option<(EndpointId, EndpointId)> {
        let inner = self.inner.borrow();
        inner.conns.get(&conn).map(|c| (c.client_uid, c.server_uid))
    }

    /// Frames of `conn` on their way to its server.
    pub fn frames_to_server(&self, conn: ConnId) -> usize {
        let inner = self.inner.borrow();
        let Some(c) = inner.conns.get(&conn) else {
            return 0;
        };
        let queued = inner.endpoints.get(c.server).map_or(0, |ep| {
            ep.inbox
                .iter()
                .filter(|p| p.conn == conn && matches!(p.kind, Kind::Frame(_)))
                .count()
        });
        queued
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
            Some(e) => e.inbox.push(Pending {
                at,
                seq,
                sent_at,
                conn,
                to_server,
                kind,
            }),
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
        let tell_client = !c.client_done;
        if tell_client {
            self.push_with(id, false, at, Kind::Disconnected(reason), false);
        }
        self.tell_server(id, at, reason, false);
        self.maybe_forget(id);
    }

    fn maybe_forget(&mut self, id: ConnId) {
        let done = self
            .conns
            .get(&id)
            .is_some_and(|c| c.client_done && (c.server_done || !c.server_announced));
        if done {
            self.conns.remove(&id);
        }
    }

    fn connect(&mut self, client: EpId, client_uid: EndpointId, addr: Addr) -> ConnId {
        self.next_conn += 1;
        // Never reused: the generation is the counter's high half.
        let id = ConnId::new(self.next_conn as u32, (self.next_conn >> 32) as u32);
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
            last_at: [Instant::ZERO; 2],
        };
        self.conns.insert(id, conn);
        match server {
            Some(_) => {
                self.push(id, true, self.now + latency, Kind::Accepted);
                self.push(id, false, self.now + latency + latency, Kind::Connected);
            }
            None => {
                let reason = DisconnectReason::ConnectFailed(iomsg_core::transport::Cause::UNKNOWN);
                self.push(id, false, self.now + latency, Kind::Disconnected(reason));
            }
        }
        id
    }

    /// Whether `uid` may send on `id` now, and if so whether towards the
    /// server.
    fn may_send(&self, uid: EndpointId, id: ConnId) -> Result<bool, SendError> {
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
        Ok(to_server)
    }

    /// Puts the lent buffer `frame` on the connection (no copy: the
    /// buffer itself travels and goes back to the pool when received).
    /// The checks of `may_send`, the state check and the queueing of
    /// `push` with one lookup of the connection.
    fn send(&mut self, uid: EndpointId, id: ConnId, frame: Vec<u8>) -> Result<(), SendError> {
        enum Route {
            Refused,
            Broken,
            To {
                ep: EpId,
                ep_uid: EndpointId,
                to_server: bool,
                at: Instant,
            },
        }
        let latency_at = self.now + self.config.latency;
        let route = match self.conns.get_mut(&id) {
            None => Route::Refused,
            Some(c) => {
                let to_server = c.client_uid == uid;
                let done = if to_server {
                    c.client_done
                } else {
                    c.server_done
                };
                if !to_server && c.server_uid != uid || done {
                    Route::Refused
                } else if c.state != ConnState::Open {
                    Route::Broken
                } else {
                    // Keep the connection's order in this direction (as
                    // `push` does).
                    let dir = usize::from(!to_server);
                    let at = latency_at.max(c.last_at[dir]);
                    c.last_at[dir] = at;
                    let (ep, ep_uid) = if to_server {
                        (c.server, c.server_uid)
                    } else {
                        (c.client, c.client_uid)
                    };
                    Route::To {
                        ep,
                        ep_uid,
                        to_server,
                        at,
                    }
                }
            }
        };
        match route {
            Route::Refused => {
                self.recycle(Kind::Frame(frame));
                Err(SendError::NotConnected)
            }
            Route::Broken => {
                // Broken, and this side has not heard yet: the send
                // "completes" locally and the frame is lost. Local
                // completion is not delivery.
                self.counts.discarded += 1;
                self.recycle(Kind::Frame(frame));
                Ok(())
            }
            Route::To {
                ep,
                ep_uid,
                to_server,
                at,
            } => {
                self.seq += 1;
                let pending = Pending {
                    at,
                    seq: self.seq,
                    sent_at: self.now,
                    conn: id,
                    to_server,
                    kind: Kind::Frame(frame),
                };
                match self
                    .endpoints
                    .get_mut(ep)
                    .filter(|e| e.alive && e.uid == ep_uid)
                {
                    Some(e) => e.inbox.push(pending),
                    None => {
                        self.counts.to_dead_endpoint += 1;
                        self.recycle(pending.kind);
                    }
                }
                Ok(())
            }
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
            let tell_client = !by_client && !c.client_done;
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
            self.reset(
                id,
                DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN),
            );
        }
        self.listeners.retain(|_, &mut e| e != ep);
        let inbox = core::mem::take(&mut self.endpoints[ep].inbox);
        self.counts.to_dead_endpoint += inbox.len() as u64;
        for p in inbox.into_all() {
            self.recycle(p.kind);
        }
        self.endpoints[ep].alive = false;
        self.free_endpoints.push(ep);
    }

    /// The next event of endpoint `ep`; a frame is handed to `lend`.
    #[inline]
    fn poll<R>(
        &mut self,
        ep: EpId,
        now: Instant,
        lend: impl FnOnce(Vec<u8>) -> R,
    ) -> Option<Event<R>> {
        self.advance(now);
        loop {
            let front = self.endpoints.get(ep)?.inbox.peek()?;
            if front.at > now {
                return None;
            }
            let p = self.endpoints[ep].inbox.pop()?;
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
                    return Some(Event::Received {
                        conn,
                        frame: lend(b),
                    });
                }
                Kind::Connected => return Some(Event::Connected { conn }),
                Kind::Accepted => {
                    c.server_announced = true;
                    if let Some(reason) = c.server_notice.take() {
                        // It ended before this end knew of it.
                        self.push(conn, true, now, Kind::Disconnected(reason));
                    }
                    return Some(Event::Accepted { conn });
                }
                Kind::Disconnected(reason) => {
                    if p.to_server {
                        c.server_done = true;
                    } else {
                        c.client_done = true;
                    }
                    self.maybe_forget(conn);
                    return Some(Event::Disconnected { conn, reason });
                }
            }
        }
    }
}

mod inbox;
mod ports;
pub use ports::{ClientPort, ServerPort};

#[cfg(test)]
mod tests;
