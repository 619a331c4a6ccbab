//! Fuzz body for the session state machines: `session`.
//!
//! The fuzz bytes are a script of events driven into one or two
//! [`ClientSession`]s and one [`ServerCore`], with virtual time that never
//! goes backwards: client calls (`start`, `submit`, `close`,
//! `handle_connected`, `handle_disconnected`, `handle_timeout`,
//! `handle_frame`, the `poll_*` drains), server calls (`handle_frame`,
//! `handle_accepted`, `handle_disconnected`, `handle_timeout`), frames
//! passed between them in or out of order, with one byte flipped, dropped,
//! or replaced by raw bytes or by a forged but well-formed frame, and server
//! crashes (a new `ServerCore` with another instance id). When the bytes run
//! out, the script ends.
//!
//! Properties, checked after every step:
//! 1. nothing panics;
//! 2. client invariants: `base_sn <= sent_sn <= next_sn`, `outstanding ==
//!    next_sn - base_sn <= 8`, `submitted == next_sn`, `sent == sent_sn`,
//!    `acked + not_replayed == base_sn` (every sn below the window was either
//!    acknowledged or given up, exactly once), `epoch == connects`,
//!    `established, disconnects <= connects`, `rejects + protocol_errors <=
//!    disconnects`, `server_restarts <= established`, `read_mismatches <=
//!    completions`;
//! 3. server bounds: `session_count <= 4`, `conn_count <= 4`, and
//!    `stats.delivered` equals the `Delivered` events of this instance;
//! 4. a server instance delivers each `(session, sn)` at most once (a session
//!    it evicted or that said `Bye` starts over);
//! 5. every sn delivered for a client's session was submitted by that client
//!    (`sn < next_sn`), unless a forged frame of that session reached the
//!    server;
//! 6. a client frame with one byte flipped in its header (CRC-covered) or in
//!    a `Write` payload (CRC- or pattern-checked) is never delivered; a
//!    server frame with one byte flipped in its header never moves the
//!    client's window;
//! 7. a client acknowledges only delivered sns: `acked` is at most the
//!    number of its sns below `base_sn` that some server instance delivered
//!    (unless a raw, forged or flipped frame reached it or the server).

use std::collections::{HashSet, VecDeque};
use std::vec;
use std::vec::Vec;

use core::time::Duration;

use crate::session::{
    Action, ClientConfig, ClientSession, ClientState, ClientStats, RequestOp, ServerConfig,
    ServerCore, ServerEvent, ServerSink,
};
use crate::time::Instant;
use crate::transport::{ConnId, DisconnectReason};
use crate::wire::{self, Body, IoMsg, Op, RejectReason, HEADER_LEN};

type Server = ServerCore<4, 4, 4, 3>;
type Client = ClientSession<8>;

/// Capacity of the client send window.
const WINDOW: usize = 8;
/// The session ids of the (up to) two clients.
const SESSIONS: [u64; 2] = [0x5E55_0000_0000_0A01, 0x5E55_0000_0000_0B02];
/// A client's token is its session id xor this.
const TOKEN_SALT: u64 = 0x70CE_0000_0000_0000;
/// Connection ids are drawn from `1..=CONN_IDS`.
const CONN_IDS: u8 = 6;
/// Largest payload or read the script submits.
const MAX_LEN: u16 = 256;

/// Runs the script in `data` and checks every property after every step.
///
/// # Panics
///
/// When a property does not hold: that is the bug the fuzzer is looking for.
pub fn session(data: &[u8]) {
    let _ = run(data);
}

/// What a run reached, so that tests can tell that the script does more than
/// idle.
#[derive(Clone, Copy, Debug, Default)]
struct Summary {
    delivered: u64,
    established: u64,
    crashes: u64,
    acked: u64,
}

fn run(data: &[u8]) -> Summary {
    let mut c = Cursor(data);
    let mut world = World::new(&mut c);
    while let Some(op) = c.next() {
        world.step(op, &mut c);
        world.check();
    }
    let mut summary = world.summary;
    for p in &world.peers {
        summary.established += p.client.stats().established;
        summary.acked += p.client.stats().acked;
    }
    summary
}

/// Reads the script; past its end every byte is 0.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn byte(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.byte();
        }
        u64::from_le_bytes(b)
    }

    fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Up to `max` of the remaining bytes, as the length byte says.
    fn bytes(&mut self, max: usize) -> &'a [u8] {
        let want = usize::from(self.byte()) % (max + 1);
        let n = want.min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }
}

/// Everything the server emitted during one call.
#[derive(Default)]
struct Out {
    frames: Vec<(ConnId, Vec<u8>)>,
    events: Vec<ServerEvent>,
}

impl ServerSink for Out {
    fn transmit(&mut self, conn: ConnId, msg: &IoMsg<'_>) {
        let mut buf = vec![0u8; msg.buffer_len()];
        let len = msg.emit(&mut buf);
        assert_eq!(len, Ok(buf.len()), "the server emitted {msg:?}");
        self.frames.push((conn, buf));
    }
    fn close(&mut self, _conn: ConnId) {
        // The client learns of it from the `Reject`/`Bye` before it, or from
        // a scripted `handle_disconnected`.
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
}

/// One client and its side of the (simulated) transport.
struct Peer {
    client: Client,
    /// The connection the client currently uses, as the script chose it.
    conn: Option<ConnId>,
    /// Frames the client transmitted and the server has not received.
    outbox: VecDeque<Vec<u8>>,
    /// Frames the server sent on `conn` and the client has not received.
    inbox: VecDeque<Vec<u8>>,
    /// A forged frame of this session reached the server: property 5 no
    /// longer applies to it.
    forged: bool,
    /// A frame that no server sent as it is (raw, forged or with a flipped
    /// byte) reached the client: property 7 no longer applies to it.
    tainted: bool,
}

struct World {
    now: Instant,
    peers: Vec<Peer>,
    server: Server,
    server_config: ServerConfig,
    /// `(session, sn)` delivered by the current server instance.
    delivered: HashSet<(u64, u64)>,
    /// `Delivered` events of the current server instance.
    delivered_events: u64,
    /// `(session, sn)` delivered by any server instance.
    ever_delivered: HashSet<(u64, u64)>,
    summary: Summary,
}

/// How a frame in transit is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flip {
    None,
    /// XOR `mask` (non-zero) into byte `pos`.
    Byte {
        pos: usize,
        mask: u8,
    },
}

impl Flip {
    fn read(c: &mut Cursor<'_>, len: usize) -> Flip {
        let mask = c.byte();
        if mask == 0 || len == 0 {
            return Flip::None;
        }
        let pos = usize::from(c.u16()) % len;
        Flip::Byte { pos, mask }
    }

    fn apply(self, frame: &mut [u8]) {
        if let Flip::Byte { pos, mask } = self {
            if let Some(b) = frame.get_mut(pos) {
                *b ^= mask;
            }
        }
    }
}

impl World {
    fn new(c: &mut Cursor<'_>) -> World {
        let setup = c.byte();
        let clients = 1 + usize::from(setup & 1);
        let now = Instant::ZERO;
        let peers = SESSIONS[..clients]
            .iter()
            .map(|&session| {
                let mut cfg = ClientConfig::new(session, session ^ TOKEN_SALT);
                let flags = c.byte();
                cfg.replay = flags & 1 == 0;
                cfg.eager = flags & 2 == 0;
                cfg.validate = flags & 4 != 0;
                cfg.connect_timeout = Duration::from_millis(20);
                cfg.reply_timeout = Duration::from_millis(50);
                cfg.backoff.initial = Duration::from_millis(1);
                cfg.backoff.max = Duration::from_millis(10);
                cfg.backoff.jitter_per_mille = u16::from(flags >> 4) * 50;
                cfg.max_retries = 2 + u32::from(c.byte() % 30);
                if flags & 8 != 0 {
                    cfg.run_limit = Some(Duration::from_millis(50 * u64::from(c.byte())));
                }
                cfg.max_payload = u32::from(MAX_LEN);
                Peer {
                    client: Client::new(cfg, now),
                    conn: None,
                    outbox: VecDeque::new(),
                    inbox: VecDeque::new(),
                    forged: false,
                    tainted: false,
                }
            })
            .collect();
        let mut server_config = ServerConfig::new(1);
        server_config.ack_every = 1 + u32::from(setup >> 1 & 7);
        server_config.validate = setup & 0x10 != 0;
        World {
            now,
            peers,
            server: Server::new(server_config.clone()),
            server_config,
            delivered: HashSet::new(),
            delivered_events: 0,
            ever_delivered: HashSet::new(),
            summary: Summary::default(),
        }
    }

    fn peer(&mut self, c: &mut Cursor<'_>) -> usize {
        usize::from(c.byte()) % self.peers.len()
    }

    fn conn(c: &mut Cursor<'_>) -> ConnId {
        ConnId::from(c.byte() % CONN_IDS + 1)
    }

    fn advance(&mut self, c: &mut Cursor<'_>, deadline: Option<Instant>) {
        let b = c.byte();
        let micros = u64::from(b & 0x3f);
        self.now = match b >> 6 {
            0 => self.now + Duration::from_micros(micros),
            1 => self.now + Duration::from_millis(micros),
            2 => self.now + Duration::from_millis(micros * 20),
            // The next timer (never backwards).
            _ => deadline.map_or(self.now, |d| d.max(self.now)),
        };
    }

    fn step(&mut self, op: u8, c: &mut Cursor<'_>) {
        match op % 20 {
            0 => {
                let i = self.peer(c);
                self.peers[i].client.start(self.now);
            }
            1 | 2 => {
                let i = self.peer(c);
                let op = match c.byte() % 3 {
                    0 => RequestOp::Write,
                    1 => RequestOp::StreamWrite,
                    _ => RequestOp::Read,
                };
                let len = u32::from(c.u16() % (MAX_LEN + 1));
                let client = &mut self.peers[i].client;
                let next = client.next_sn();
                match client.submit(op, len) {
                    Ok(sn) => assert_eq!(sn, next, "submit assigns next_sn"),
                    Err(e) => assert!(
                        !client.can_submit()
                            || matches!(e, crate::session::SubmitError::TooLong { .. }),
                        "submit refused ({e}) though can_submit()"
                    ),
                }
            }
            3 => {
                let i = self.peer(c);
                self.peers[i].client.close(self.now);
            }
            4 => {
                let i = self.peer(c);
                let conn = Self::conn(c);
                let flags = c.byte();
                let p = &mut self.peers[i];
                if matches!(p.client.state(), ClientState::Connecting { .. }) {
                    p.conn = Some(conn);
                    if flags & 1 == 0 {
                        // What a real transport does: nothing of an older
                        // connection arrives on the new one.
                        p.outbox.clear();
                        p.inbox.clear();
                    }
                    if flags & 2 == 0 {
                        let mut out = Out::default();
                        self.server.handle_accepted(conn, &mut out);
                        self.absorb(out, None);
                    }
                }
                self.peers[i].client.handle_connected(self.now);
            }
            5 => {
                let i = self.peer(c);
                let b = c.byte();
                let reason = match b % 5 {
                    0 => DisconnectReason::PeerClosed,
                    1 => DisconnectReason::PeerFailed,
                    2 => DisconnectReason::ConnectFailed,
                    3 => DisconnectReason::LocalClose,
                    _ => DisconnectReason::Other(i32::from(b)),
                };
                self.peers[i].client.handle_disconnected(self.now, reason);
                if b & 0x80 != 0 {
                    if let Some(conn) = self.peers[i].conn.take() {
                        self.server.handle_disconnected(conn);
                    }
                }
            }
            6 => {
                let i = self.peer(c);
                let due = self.peers[i].client.poll_timeout();
                self.advance(c, due);
                self.peers[i].client.handle_timeout(self.now);
            }
            7 | 8 => {
                let i = self.peer(c);
                self.forward_to_client(i, c);
            }
            9 => {
                let i = self.peer(c);
                let raw = c.bytes(120);
                let before = *self.peers[i].client.stats();
                self.peers[i].tainted = true;
                self.peers[i].client.handle_frame(self.now, raw);
                if wire::parse(raw).is_err() {
                    self.assert_window_unmoved(i, &before, "a malformed frame");
                }
            }
            10 => {
                let i = self.peer(c);
                let msg = forge_to_client(c, self.peers[i].client.epoch(), SESSIONS[i]);
                let frame = emit(&msg);
                self.peers[i].tainted = true;
                self.peers[i].client.handle_frame(self.now, &frame);
            }
            11 => {
                let i = self.peer(c);
                self.pump(i);
            }
            12 | 13 => {
                let i = self.peer(c);
                self.forward_to_server(i, c);
            }
            14 => {
                let conn = Self::conn(c);
                let raw = c.bytes(120);
                self.mark_forged(raw);
                let mut out = Out::default();
                self.server.handle_frame(self.now, conn, raw, &mut out);
                self.absorb(out, None);
            }
            15 => {
                let conn = Self::conn(c);
                let i = self.peer(c);
                let p = &self.peers[i];
                let msg = forge_to_server(c, SESSIONS[i], p.client.epoch(), p.client.next_sn());
                let frame = emit(&msg);
                self.mark_forged(&frame);
                let mut out = Out::default();
                self.server.handle_frame(self.now, conn, &frame, &mut out);
                self.absorb(out, None);
            }
            16 => {
                let conn = Self::conn(c);
                let mut out = Out::default();
                if c.bool() {
                    self.server.handle_accepted(conn, &mut out);
                } else {
                    self.server.handle_disconnected(conn);
                }
                self.absorb(out, None);
            }
            17 => {
                let due = self.server.poll_timeout();
                self.advance(c, due);
                let mut out = Out::default();
                self.server.handle_timeout(self.now, &mut out);
                self.absorb(out, None);
            }
            18 => {
                // Lose one frame in transit.
                let i = self.peer(c);
                let b = c.byte();
                let p = &mut self.peers[i];
                let q = if b & 1 == 0 {
                    &mut p.outbox
                } else {
                    &mut p.inbox
                };
                if !q.is_empty() {
                    let k = usize::from(b >> 1) % q.len();
                    q.remove(k);
                }
            }
            _ => {
                let b = c.byte();
                if b % 16 == 0 {
                    self.crash();
                } else {
                    self.progress(usize::from(b >> 4) % self.peers.len(), c);
                }
            }
        }
    }

    /// The happy path in one step: start or connect if needed, then a round
    /// trip of everything queued, in order.
    fn progress(&mut self, i: usize, c: &mut Cursor<'_>) {
        let conn = Self::conn(c);
        if self.peers[i].client.state() == ClientState::Idle {
            self.peers[i].client.start(self.now);
        }
        self.pump(i);
        if matches!(self.peers[i].client.state(), ClientState::Connecting { .. }) {
            let p = &mut self.peers[i];
            p.conn = Some(conn);
            p.outbox.clear();
            p.inbox.clear();
            p.client.handle_connected(self.now);
            let mut out = Out::default();
            self.server.handle_accepted(conn, &mut out);
            self.absorb(out, None);
        }
        self.pump(i);
        while let Some(frame) = self.peers[i].outbox.pop_front() {
            self.send_to_server(i, None, frame, Flip::None);
        }
        while let Some(frame) = self.peers[i].inbox.pop_front() {
            self.peers[i].client.handle_frame(self.now, &frame);
        }
        self.pump(i);
    }

    /// Drains the client's transmits, actions and events.
    fn pump(&mut self, i: usize) {
        let mut scratch = [0u8; MAX_LEN as usize];
        let mut out = [0u8; HEADER_LEN + MAX_LEN as usize];
        let p = &mut self.peers[i];
        let mut n = 0;
        while let Some(len) = p.client.poll_transmit(self.now, &mut scratch, &mut out) {
            p.outbox.push_back(out[..len].to_vec());
            n += 1;
            assert!(n <= WINDOW + 2, "poll_transmit never ends");
        }
        while let Some(action) = p.client.poll_action() {
            if action == Action::Close {
                if let Some(conn) = p.conn.take() {
                    self.server.handle_disconnected(conn);
                }
            }
        }
        while p.client.poll_event().is_some() {}
    }

    /// Delivers one of the client's queued frames to the server.
    fn forward_to_server(&mut self, i: usize, c: &mut Cursor<'_>) {
        let b = c.byte();
        let conn = (b & 0x80 != 0).then(|| Self::conn(c));
        let q = &mut self.peers[i].outbox;
        if q.is_empty() {
            return;
        }
        // Mostly the oldest (in order), sometimes another (reordering).
        let k = if b & 0x40 == 0 {
            0
        } else {
            usize::from(b & 0x3f) % q.len()
        };
        let Some(frame) = q.remove(k) else { return };
        let flip = Flip::read(c, frame.len());
        self.send_to_server(i, conn, frame, flip);
    }

    fn send_to_server(&mut self, i: usize, conn: Option<ConnId>, mut frame: Vec<u8>, flip: Flip) {
        let Some(conn) = conn.or(self.peers[i].conn) else {
            return; // Not connected: the frame is lost.
        };
        let original = wire::parse(&frame).map(|m| m.body.op()).ok();
        assert!(original.is_some(), "the client emitted a malformed frame");
        flip.apply(&mut frame);
        let must_not_deliver = match flip {
            Flip::None => None,
            Flip::Byte { pos, .. } if pos < HEADER_LEN => Some("a header with a flipped byte"),
            Flip::Byte { .. } if original == Some(Op::Write) => {
                Some("a Write with a flipped payload byte")
            }
            Flip::Byte { .. } => None,
        };
        let mut out = Out::default();
        self.server.handle_frame(self.now, conn, &frame, &mut out);
        self.absorb(out, must_not_deliver);
    }

    /// Delivers one of the server's queued frames to the client.
    fn forward_to_client(&mut self, i: usize, c: &mut Cursor<'_>) {
        let b = c.byte();
        let q = &mut self.peers[i].inbox;
        if q.is_empty() {
            return;
        }
        let k = if b & 0x40 == 0 {
            0
        } else {
            usize::from(b & 0x3f) % q.len()
        };
        let Some(mut frame) = q.remove(k) else { return };
        let flip = Flip::read(c, frame.len());
        flip.apply(&mut frame);
        self.peers[i].tainted |= flip != Flip::None;
        let before = *self.peers[i].client.stats();
        self.peers[i].client.handle_frame(self.now, &frame);
        if matches!(flip, Flip::Byte { pos, .. } if pos < HEADER_LEN) {
            self.assert_window_unmoved(i, &before, "a server frame with a flipped header byte");
        }
    }

    fn assert_window_unmoved(&self, i: usize, before: &ClientStats, what: &str) {
        let after = self.peers[i].client.stats();
        assert_eq!(after.acked, before.acked, "{what} acknowledged sns");
        assert_eq!(
            after.not_replayed, before.not_replayed,
            "{what} gave sns up"
        );
        assert_eq!(after.established, before.established, "{what} established");
    }

    /// A frame that parses and claims a client's session did not come from
    /// that client.
    fn mark_forged(&mut self, frame: &[u8]) {
        if let Ok(m) = wire::parse(frame) {
            for (p, &s) in self.peers.iter_mut().zip(SESSIONS.iter()) {
                if m.session == s {
                    p.forged = true;
                    p.tainted = true;
                }
            }
        }
    }

    fn crash(&mut self) {
        self.server_config.instance += 1;
        self.server = Server::new(self.server_config.clone());
        self.delivered.clear();
        self.delivered_events = 0;
        self.summary.crashes += 1;
    }

    /// Routes the server's output and checks its events.
    fn absorb(&mut self, out: Out, must_not_deliver: Option<&str>) {
        for e in &out.events {
            match *e {
                ServerEvent::Delivered { session, sn, .. } => {
                    if let Some(what) = must_not_deliver {
                        panic!("{what} was delivered: session {session:#x} sn {sn}");
                    }
                    assert!(
                        self.delivered.insert((session, sn)),
                        "session {session:#x} sn {sn} delivered twice by instance {}",
                        self.server_config.instance
                    );
                    self.delivered_events += 1;
                    self.ever_delivered.insert((session, sn));
                    self.summary.delivered += 1;
                    for (p, &s) in self.peers.iter().zip(SESSIONS.iter()) {
                        if s == session && !p.forged {
                            assert!(
                                sn < p.client.next_sn(),
                                "session {session:#x} sn {sn} delivered, only {} submitted",
                                p.client.next_sn()
                            );
                        }
                    }
                }
                ServerEvent::Evicted { session } | ServerEvent::Closed { session } => {
                    self.delivered.retain(|&(s, _)| s != session);
                }
                _ => {}
            }
        }
        for (conn, frame) in out.frames {
            if let Some(p) = self.peers.iter_mut().find(|p| p.conn == Some(conn)) {
                p.inbox.push_back(frame);
            }
        }
    }

    fn check(&self) {
        for (p, &session) in self.peers.iter().zip(SESSIONS.iter()) {
            check_client(&p.client);
            if !p.tainted {
                let base = p.client.base_sn();
                let delivered = self
                    .ever_delivered
                    .iter()
                    .filter(|&&(s, sn)| s == session && sn < base)
                    .count() as u64;
                let acked = p.client.stats().acked;
                assert!(
                    acked <= delivered,
                    "session {session:#x}: {acked} sns acknowledged, only {delivered} below base_sn {base} delivered"
                );
            }
        }
        let s = &self.server;
        assert!(s.session_count() <= 4, "{} sessions", s.session_count());
        assert!(s.conn_count() <= 4, "{} connections", s.conn_count());
        assert_eq!(
            s.stats().delivered,
            self.delivered_events,
            "server delivered count vs its Delivered events"
        );
    }
}

fn check_client(c: &Client) {
    let (base, sent, next) = (c.base_sn(), c.sent_sn(), c.next_sn());
    let s = c.stats();
    assert!(
        base <= sent && sent <= next,
        "base_sn {base}, sent_sn {sent}, next_sn {next}"
    );
    assert_eq!(c.outstanding() as u64, next - base, "outstanding");
    assert!(c.outstanding() <= WINDOW, "outstanding {}", c.outstanding());
    assert_eq!(s.submitted, next, "submitted vs next_sn");
    assert_eq!(s.sent, sent, "first transmissions vs sent_sn");
    assert_eq!(
        s.acked + s.not_replayed,
        base,
        "every sn below base_sn was acknowledged or given up, once: {s:?}"
    );
    assert_eq!(u64::from(c.epoch()), s.connects, "epoch vs connects");
    assert!(s.established <= s.connects, "{s:?}");
    assert!(s.disconnects <= s.connects, "{s:?}");
    assert!(s.rejects + s.protocol_errors <= s.disconnects, "{s:?}");
    assert!(s.server_restarts <= s.established, "{s:?}");
    assert!(s.read_mismatches <= s.completions, "{s:?}");
    if !c.config().replay {
        assert_eq!(s.replayed, 0, "replay is off: {s:?}");
        assert_eq!(s.possible_duplicates, 0, "replay is off: {s:?}");
    } else {
        assert_eq!(s.not_replayed, 0, "replay is on: {s:?}");
    }
}

fn emit(msg: &IoMsg<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    let len = msg.emit(&mut buf);
    assert_eq!(len, Ok(buf.len()), "emit of {msg:?}");
    buf
}

/// An sn near `base`: mostly close to it, sometimes anywhere.
fn sn_near(c: &mut Cursor<'_>, base: u64) -> u64 {
    let b = c.byte();
    match b >> 6 {
        0 => base.saturating_sub(u64::from(b & 0x3f)),
        1 | 2 => base + u64::from(b & 0x7f),
        _ => c.u64(),
    }
}

/// A well-formed server frame that no server sent: for this session (mostly)
/// and the client's current epoch (mostly).
fn forge_to_client(c: &mut Cursor<'_>, epoch: u32, session: u64) -> IoMsg<'static> {
    static PATTERN: [u8; 64] = [0x5A; 64];
    let b = c.byte();
    let epoch = match b >> 6 {
        0 => epoch.wrapping_sub(1),
        3 => u32::from(c.byte()),
        _ => epoch,
    };
    let session = if b & 0x20 == 0 { session } else { c.u64() };
    let ack = sn_near(c, 0);
    let sn = sn_near(c, 0);
    let body = match b % 7 {
        0 | 1 => Body::Welcome {
            instance: u64::from(c.byte() % 3),
            resume_from: sn_near(c, 0),
            incarnation: u64::from(c.byte() % 3),
            window: u32::from(c.byte()),
            known: c.bool(),
        },
        2 => Body::WriteComp,
        3 => Body::ReadComp {
            data: &PATTERN[..usize::from(c.byte()) % PATTERN.len()],
        },
        4 => Body::Ack,
        5 => Body::Bye,
        _ => Body::Reject {
            reason: RejectReason::ALL[usize::from(c.byte()) % RejectReason::ALL.len()],
            detail: u64::from(c.byte()),
        },
    };
    IoMsg {
        session,
        epoch,
        sn,
        ack,
        validate: false,
        stream: false,
        body,
    }
}

/// A well-formed client frame that no client sent (its payload does match
/// the pattern, so the server may deliver it).
fn forge_to_server(c: &mut Cursor<'_>, session: u64, epoch: u32, next: u64) -> IoMsg<'static> {
    let b = c.byte();
    let epoch = match b >> 6 {
        0 => epoch.wrapping_sub(1),
        1 => epoch.wrapping_add(1),
        _ => epoch,
    };
    let session = if b & 0x20 == 0 { session } else { c.u64() };
    let sn = sn_near(c, next);
    let body = match b % 5 {
        0 | 1 => Body::Hello {
            base_sn: sn_near(c, 0),
            next_sn: sn_near(c, next),
            token: u64::from(c.byte() % 3),
            window: u32::from(c.byte()),
            replay: c.bool(),
        },
        2 => Body::Read {
            len: u32::from(c.u16()) % 1024,
        },
        3 => Body::Bye,
        _ => Body::Ack,
    };
    IoMsg {
        session,
        epoch,
        sn,
        ack: 0,
        validate: false,
        stream: false,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SplitMix64;

    #[test]
    fn session_properties_hold_on_seeded_random_scripts() {
        let mut rng = SplitMix64::new(0x5E55_10F0_u64);
        let mut total = Summary::default();
        for _ in 0..400 {
            let len = 64 + (rng.next_u64() % 2048) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let s = run(&bytes);
            total.delivered += s.delivered;
            total.established += s.established;
            total.crashes += s.crashes;
            total.acked += s.acked;
        }
        // The scripts reach the states the properties are about.
        assert!(total.established > 200, "{total:?}");
        assert!(total.delivered > 150, "{total:?}");
        assert!(total.acked > 100, "{total:?}");
        assert!(total.crashes > 50, "{total:?}");
    }

    #[test]
    fn committed_seeds_establish_and_deliver() {
        let seeds = crate::fuzzing::seed_files("session");
        assert!(seeds.len() >= 3, "{} seeds", seeds.len());
        let mut crashes = 0;
        for (path, bytes) in seeds {
            let s = run(&bytes);
            // Regression inputs only have to hold; the others also cover.
            let regression = path.to_string_lossy().contains("seed-regress-");
            assert!(
                regression || s.established > 0 && s.delivered > 0 && s.acked > 0,
                "{}: {s:?}",
                path.display()
            );
            crashes += s.crashes;
        }
        assert!(crashes > 0, "no seed crashes the server");
    }
}
