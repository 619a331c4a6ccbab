//! Fuzz body for the session state machines: `session`.
//!
//! The fuzz bytes are a script of events driven into one or two
//! [`ClientSession`]s and one [`ServerCore`], with virtual time that never
//! goes backwards: client calls (`start`, `submit`, `close`,
//! `handle_connected`, `handle_disconnected`, `handle_timeout`,
//! `handle_frame`, the `poll_*` drains), server calls (`handle_frame`,
//! `handle_accepted`, `handle_disconnected`, `handle_timeout`), frames
//! passed between them in or out of order, with one byte flipped, dropped,
//! sent on another connection, or replaced by raw bytes or by a forged but
//! well-formed frame (a `Hello` of a stray peer or with a client's token, a
//! `Probe`, epochs up to `u32::MAX`), and server crashes (a new `ServerCore`
//! with another instance id), and connections whose transport refuses
//! every frame (`WouldBlock`) for a while: their replies wait, or overflow
//! and close that connection alone. When the bytes run out, the script
//! ends.
//!
//! The setup bytes choose one or two clients, whether the two share one
//! session id (each with its own token), each client's flags, retries, run
//! limit and window (1 to 8 or the default), and the server's ack cadence,
//! payload CRCs, window (64 or more; its tracker holds 128) and
//! `max_sessions` (1 to 4). Client `i` uses its own connection ids.
//!
//! Properties, checked after every step:
//! 1. nothing panics;
//! 2. client invariants: `base_sn <= sent_sn <= next_sn`, `outstanding ==
//!    next_sn - base_sn <= 8`, `sent_sn - base_sn` and the agreed window at
//!    most the client's own window, `submitted == next_sn`, `sent ==
//!    sent_sn`, `acked + not_replayed == base_sn` (every sn below the window
//!    was either acknowledged or given up, exactly once), `epoch ==
//!    connects`, `established, disconnects <= connects`, `rejects +
//!    protocol_errors <= disconnects`, `server_restarts <= established`,
//!    `reads_answered + stray_read_data <= completions`; `submit` refuses a
//!    message only as `WindowFull` or `Closed` when `can_submit()` says so
//!    (its storage holds a full window of the largest message, so never
//!    `BufferFull`); `poll_transmit` only peeks and `write_transmit` writes
//!    exactly the length offered; `Closed` and `Failed` are final; no
//!    event is dropped (the drained `Connecting`, `Established`,
//!    `Disconnected`, `ServerRestarted`, `NotReplayed` and `Failed` events
//!    match the counters and the state);
//! 3. server bounds: `session_count <= max_sessions`, `conn_count <= 4`,
//!    `tomb_count <= 256`, `window()` within `[64, 128]` and every record's
//!    window within `[1, window()]`, `cumulative <= top`; `stats.delivered`
//!    and `stats.tombs_forgotten` equal the deliveries and `Forgotten`
//!    events of this instance; its replies, drained after every call, are
//!    written at exactly the length offered and parse; a refused
//!    connection is offered once per round, and only refused ones keep
//!    replies, at most a queue's worth each;
//! 4. a server instance delivers each `(session, sn)` at most once, ever: a
//!    session closed with `Bye` or evicted leaves a tombstone, and only a
//!    `Forgotten` one (the tombstone table overflowed) may start over;
//! 5. every sn delivered for a client was submitted by that client (`sn <
//!    next_sn`), unless a forged or misrouted frame of its session reached
//!    the server (when the two clients share a session id, a delivery
//!    belongs to the client whose connection carried it);
//! 6. a client frame with one byte flipped in its header (CRC-covered) or in
//!    a checksummed payload (`validate`, and every `Read`) is never
//!    delivered (a flip in an unchecked `Write` payload is delivered as it
//!    arrived: property 14); a server frame with one byte flipped in its
//!    header never moves the client's window;
//! 7. a client acknowledges only its own delivered sns: `acked` is at most
//!    the number of its sns below `base_sn` that some server instance
//!    delivered from its own frames (unless a raw, forged or flipped frame
//!    reached it, or a forged or misrouted one of its session the server);
//! 8. one owner per session and server instance: every `SessionOpened` of a
//!    session answers a `Hello` with the same token, and every client that
//!    an instance establishes for a session id has that token (until the
//!    instance reports the session `Forgotten`; a crash starts over:
//!    whoever connects first owns it);
//! 9. a well-formed `Hello` with another token than the owner's (live or
//!    tombstoned session), on a connection that said no `Hello` yet,
//!    changes nothing (`session(id)`, `session_count`, `tomb_count`) and is
//!    answered by a `Reject(SessionOwned)` stamped with its session and
//!    epoch (or `SessionTableFull` when the connection table is full);
//!    `SessionOwned` answers only such a `Hello`;
//! 10. a client that receives `SessionOwned` on its connection ends in
//!     `Failed(SessionOwned)`;
//! 11. the handshake stays within the `Hello`: `base_sn <= resume_from <=
//!     next_sn`, and a record new to the instance resumes from `base_sn`;
//! 12. the agreed window holds: the server never refuses a client's own
//!     frame as `TooFar`, and every `LiveLoss` (found by a gap or by a
//!     `Probe`) names only sns the client sent (unless a forged or
//!     misrouted frame of its session reached the server, or, for
//!     `TooFar`, the client took a frame no server sent as it is: a forged
//!     ack moves its window past the server's); a `Probe` that the server
//!     answers leaves every sn below its own arrived or an open hole
//!     (`top >= sn`);
//! 13. a read's data reaches the client at most once, as long as asked, and
//!     only for a read it submitted; for a client that took no frame the
//!     servers did not send as it is, it is exactly what the server's
//!     application answered to the client's own request;
//! 14. the server's application is handed exactly the bytes of the frame
//!     that carried a message (a write's payload, a read's request and
//!     length), and a client's own unaltered frame carries exactly the
//!     bytes it submitted for that sn, on its first transmission and on
//!     every replay.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::vec;
use std::vec::Vec;

use core::time::Duration;

use super::session_checks::{drain, Drained, Out};
use super::session_script::{emit, forge_to_client, forge_to_server, Claim, Cursor, Flip};
use iomsg_core::session::{
    Action, ClientConfig, ClientEvent, ClientSession, ClientState, FailReason, Message, RequestOp,
    ServerConfig, ServerCore, SubmitError, MAX_READ_REQUEST, MIN_WINDOW,
};
use iomsg_core::time::Instant;
use iomsg_core::transport::{Cause, ConnId, DisconnectReason};
use iomsg_core::wire::{self, HEADER_LEN};
use iomsg_core::workload;

/// 4 sessions, 4 connections, a window of 128 sns and 256 tombstones.
pub(super) type Server = ServerCore<SESSION_TABLE, CONNS, 3>;
pub(super) type Client = ClientSession<WINDOW, [u8; STORAGE]>;

/// A client's payload storage: a full window of the largest message, and
/// one more for the bytes skipped where a message would wrap.
pub(super) const STORAGE: usize = (WINDOW + 1) * MAX_LEN as usize;

/// Capacity of the client send window.
pub(super) const WINDOW: usize = 8;
/// The server's session table.
pub(super) const SESSION_TABLE: usize = 4;
/// The server's connection table.
pub(super) const CONNS: usize = 4;
/// The server's tombstone table.
pub(super) const TOMBS: usize = 256;
/// The session ids of the (up to) two clients (both use the first when
/// they share one).
const SESSIONS: [u64; 2] = [0x5E55_0000_0000_0A01, 0x5E55_0000_0000_0B02];
/// Client `i`'s token is `SESSIONS[i]` xor this.
const TOKEN_SALT: u64 = 0x70CE_0000_0000_0000;
/// Client `i` connects with slots `1 + i * CONN_IDS ..= (i + 1) * CONN_IDS`.
const CONN_IDS: u8 = 6;
/// Forged frames and misrouted ones use slots `1..=ANY_CONN_IDS`; the last
/// ones belong to no client.
const ANY_CONN_IDS: u8 = 16;
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
#[cfg_attr(not(test), allow(dead_code))]
pub(super) struct Summary {
    pub(super) delivered: u64,
    pub(super) established: u64,
    pub(super) crashes: u64,
    pub(super) acked: u64,
    /// Runs whose two clients share a session id.
    pub(super) shared: u64,
    /// Clients' own `Hello`s refused with `SessionOwned`.
    pub(super) owned_refusals: u64,
    /// Clients that ended in `Failed(SessionOwned)`.
    pub(super) owned_failures: u64,
    /// Other `Hello`s with a token not the owner's, refused (property 9).
    pub(super) stray_refusals: u64,
    /// Tail-loss probes the server answered.
    pub(super) probes: u64,
    /// `LiveLoss` events.
    pub(super) live_losses: u64,
    /// Deliveries of a client's own intact frames compared with the bytes
    /// it submitted (property 14).
    pub(super) bytes_checked: u64,
    /// Read data returned to a client (property 13).
    pub(super) reads: u64,
    /// Replies the transport refused (`WouldBlock`) on a stalled
    /// connection.
    pub(super) refused: u64,
}

#[cfg_attr(not(test), allow(dead_code))]
impl Summary {
    fn add(&mut self, s: &Summary) {
        self.delivered += s.delivered;
        self.established += s.established;
        self.crashes += s.crashes;
        self.acked += s.acked;
        self.shared += s.shared;
        self.owned_refusals += s.owned_refusals;
        self.owned_failures += s.owned_failures;
        self.stray_refusals += s.stray_refusals;
        self.probes += s.probes;
        self.live_losses += s.live_losses;
        self.bytes_checked += s.bytes_checked;
        self.reads += s.reads;
        self.refused += s.refused;
    }
}

fn run(data: &[u8]) -> Summary {
    let mut c = Cursor(data);
    let mut world = World::new(&mut c);
    while let Some(op) = c.next() {
        world.step(op, &mut c);
        world.check();
    }
    let mut summary = world.summary;
    summary.probes += world.server.stats().probes;
    for p in &world.peers {
        summary.established += p.client.stats().established;
        summary.acked += p.client.stats().acked;
        if matches!(
            p.client.state(),
            ClientState::Failed(FailReason::SessionOwned { .. })
        ) {
            summary.owned_failures += 1;
        }
    }
    summary
}

/// One client and its side of the (simulated) transport.
pub(super) struct Peer {
    pub(super) client: Client,
    /// The connection the client currently uses, as the script chose it.
    pub(super) conn: Option<ConnId>,
    /// Frames the client transmitted and the server has not received.
    pub(super) outbox: VecDeque<Vec<u8>>,
    /// Frames the server sent on `conn` and the client has not received.
    pub(super) inbox: VecDeque<Vec<u8>>,
    /// A forged frame of this session, or (when the clients share it) a
    /// frame sent on a connection of no or another client, reached the
    /// server: properties 5, 8 and 12 no longer apply to it.
    pub(super) forged: bool,
    /// That, or a frame that no server sent as it is (raw, forged or with a
    /// flipped byte) reached the client: properties 7, 8 and 12's `TooFar`
    /// no longer apply to it.
    pub(super) tainted: bool,
    /// Its sns that some server instance delivered from its frames.
    pub(super) delivered: BTreeSet<u64>,
    /// Its events drained so far.
    pub(super) drained: Drained,
    /// Its state once it was `Closed` or `Failed`.
    pub(super) terminal: Option<ClientState>,
    /// What it submitted, by sn.
    pub(super) submitted: Vec<Submitted>,
    /// Its reads whose data `handle_frame` returned.
    pub(super) reads: BTreeSet<u64>,
}

/// One submitted message: what the server must be handed for it.
pub(super) struct Submitted {
    pub(super) op: RequestOp,
    /// A hash of its bytes (a write's payload, a read's request).
    pub(super) hash: u64,
    /// A read's length (0 for writes).
    pub(super) read_len: u32,
    /// A read's request.
    pub(super) request: Vec<u8>,
}

pub(super) struct World {
    pub(super) now: Instant,
    pub(super) peers: Vec<Peer>,
    /// The two clients share one session id.
    pub(super) shared: bool,
    pub(super) server: Server,
    pub(super) server_config: ServerConfig,
    /// `(session, sn)` delivered by the current server instance.
    pub(super) delivered: HashSet<(u64, u64)>,
    /// `Delivered` events of the current server instance.
    pub(super) delivered_events: u64,
    /// `Forgotten` events of the current server instance.
    pub(super) forgotten_events: u64,
    /// The owner's token of every session the current instance opened
    /// (live or tombstoned).
    pub(super) owners: HashMap<u64, u64>,
    /// Connections of the current instance bound by a `Hello`.
    pub(super) bound: HashMap<ConnId, u64>,
    /// The token of the clients established for `(instance, session)`.
    pub(super) established: HashMap<(u64, u64), u64>,
    /// Connection slots whose transport refuses every frame (`WouldBlock`)
    /// while their bit is set: a peer that stopped reading.
    pub(super) stalled: u64,
    pub(super) summary: Summary,
}

impl World {
    fn new(c: &mut Cursor<'_>) -> World {
        let setup = c.byte();
        let clients = 1 + usize::from(setup & 1);
        let shared = clients == 2 && setup & 0x20 != 0;
        let knobs = if setup & 0x40 != 0 { c.byte() } else { 0 };
        let mut server_config = ServerConfig::new(1);
        server_config.ack_every = 1 + u32::from(setup >> 1 & 7);
        server_config.validate = setup & 0x10 != 0;
        if setup & 0x40 != 0 {
            server_config.max_sessions = 1 + usize::from(knobs & 3);
            server_config.window = match knobs >> 2 & 3 {
                0 => u32::MAX,
                1 => MIN_WINDOW,
                2 => 128,
                _ => MIN_WINDOW + u32::from(c.byte()),
            };
        }
        let now = Instant::ZERO;
        let peers = (0..clients)
            .map(|i| {
                let session = SESSIONS[if shared { 0 } else { i }];
                let mut cfg = ClientConfig::new(session, SESSIONS[i] ^ TOKEN_SALT);
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
                if knobs & 0x10 != 0 {
                    cfg.window = match c.byte() % 9 {
                        0 => u32::MAX,
                        w => u32::from(w),
                    };
                }
                cfg.max_payload = u32::from(MAX_LEN);
                Peer {
                    client: Client::new(cfg, now, [0; STORAGE]),
                    conn: None,
                    outbox: VecDeque::new(),
                    inbox: VecDeque::new(),
                    forged: false,
                    tainted: false,
                    delivered: BTreeSet::new(),
                    drained: Drained::default(),
                    terminal: None,
                    submitted: Vec::new(),
                    reads: BTreeSet::new(),
                }
            })
            .collect();
        World {
            now,
            peers,
            shared,
            server: Server::new(server_config.clone()),
            server_config,
            delivered: HashSet::new(),
            delivered_events: 0,
            forgotten_events: 0,
            owners: HashMap::new(),
            bound: HashMap::new(),
            established: HashMap::new(),
            stalled: 0,
            summary: Summary {
                shared: u64::from(shared),
                ..Summary::default()
            },
        }
    }

    fn peer(&mut self, c: &mut Cursor<'_>) -> usize {
        usize::from(c.byte()) % self.peers.len()
    }

    /// One of client `i`'s connections, as byte `b` chooses.
    fn own_conn(i: usize, b: u8) -> ConnId {
        let slot = u32::from(b % CONN_IDS + 1) + i as u32 * u32::from(CONN_IDS);
        ConnId::new(slot, 0)
    }

    /// Any connection: of a client or of nobody.
    fn any_conn(c: &mut Cursor<'_>) -> ConnId {
        ConnId::new(u32::from(c.byte() % ANY_CONN_IDS + 1), 0)
    }

    /// The client whose connection slots include `conn`'s.
    pub(super) fn conn_owner(&self, conn: ConnId) -> Option<usize> {
        let i = usize::try_from(conn.slot().checked_sub(1)? / u32::from(CONN_IDS)).ok()?;
        (i < self.peers.len()).then_some(i)
    }

    /// Client `i` submits a message of kind `kind` (a write's payload or a
    /// read's length: `len`), through `submit` or `submit_with` as `kind`
    /// says, and records it.
    pub(super) fn submit(&mut self, i: usize, kind: u8, len: u16) -> Result<u64, SubmitError> {
        let op = match kind % 3 {
            0 => RequestOp::Write,
            1 => RequestOp::StreamWrite,
            _ => RequestOp::Read,
        };
        let p = &mut self.peers[i];
        let sn = p.client.next_sn();
        let (bytes, read_len) = if op == RequestOp::Read {
            (
                usize::from(len) % (MAX_READ_REQUEST + 1),
                Some(u32::from(len)),
            )
        } else {
            (usize::from(len), None)
        };
        // Each client's own bytes: two clients sharing a session id
        // submit different ones.
        let mut data = vec![0u8; bytes];
        workload::fill(p.client.config().token, sn, &mut data);
        let result = if kind / 3 % 2 == 0 {
            let msg = match (op, read_len) {
                (RequestOp::Write, _) => Message::Write(&data),
                (RequestOp::StreamWrite, _) => Message::StreamWrite(&data),
                (_, len) => Message::Read {
                    len: len.unwrap_or(0),
                    request: &data,
                },
            };
            p.client.submit(msg)
        } else {
            p.client
                .submit_with(op, bytes, read_len, |buf| buf.copy_from_slice(&data))
        };
        match result {
            Ok(got) => {
                assert_eq!(got, sn, "submit assigns next_sn");
                assert_eq!(p.submitted.len() as u64, sn, "one record per sn");
                p.submitted.push(Submitted {
                    op,
                    hash: workload::hash(&data),
                    read_len: read_len.unwrap_or(0),
                    request: if op == RequestOp::Read {
                        data
                    } else {
                        Vec::new()
                    },
                });
            }
            Err(e) => assert!(
                !p.client.can_submit()
                    && matches!(e, SubmitError::WindowFull { .. } | SubmitError::Closed),
                "submit refused ({e}) though can_submit() is {}",
                p.client.can_submit()
            ),
        }
        result
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
                let kind = c.byte();
                let len = c.u16() % (MAX_LEN + 1);
                let _ = self.submit(i, kind, len);
            }
            3 => {
                let i = self.peer(c);
                self.peers[i].client.close(self.now);
            }
            4 => {
                let i = self.peer(c);
                let conn = Self::own_conn(i, c.byte());
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
                        self.accept(conn);
                    }
                }
                self.peers[i].client.handle_connected(self.now);
            }
            5 => {
                let i = self.peer(c);
                let b = c.byte();
                let reason = match b % 5 {
                    0 => DisconnectReason::PeerClosed,
                    1 => DisconnectReason::PeerFailed(Cause::UNKNOWN),
                    2 => DisconnectReason::ConnectFailed(Cause::UNKNOWN),
                    3 => DisconnectReason::LocalClose,
                    _ => DisconnectReason::Other(Cause {
                        code: i32::from(b),
                        ..Cause::UNKNOWN
                    }),
                };
                self.peers[i].client.handle_disconnected(self.now, reason);
                if b & 0x80 != 0 {
                    if let Some(conn) = self.peers[i].conn.take() {
                        self.disconnect(conn);
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
                self.client_frame(i, raw);
                if wire::parse(raw).is_err() {
                    self.assert_window_unmoved(i, &before, "a malformed frame");
                }
            }
            10 => {
                let i = self.peer(c);
                let p = &self.peers[i].client;
                let msg = forge_to_client(c, p.epoch(), p.session());
                self.peers[i].tainted = true;
                self.client_frame(i, &emit(&msg));
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
                let conn = Self::any_conn(c);
                let raw = c.bytes(120);
                self.mark_forged(raw);
                self.server_frame(conn, raw, None, false, None);
            }
            15 => {
                let conn = Self::any_conn(c);
                let i = self.peer(c);
                let p = &self.peers[i].client;
                let claim = Claim {
                    session: p.session(),
                    epoch: p.epoch(),
                    next: p.next_sn(),
                    tokens: [SESSIONS[0] ^ TOKEN_SALT, SESSIONS[1] ^ TOKEN_SALT],
                };
                let frame = emit(&forge_to_server(c, &claim));
                self.mark_forged(&frame);
                self.server_frame(conn, &frame, None, false, None);
            }
            16 => {
                let conn = Self::any_conn(c);
                match c.byte() % 4 {
                    0 | 1 => self.accept(conn),
                    2 => self.disconnect(conn),
                    // Its transport stops (or starts again) taking frames.
                    _ => self.stalled ^= 1 << (conn.slot() % 64),
                }
            }
            17 => {
                let due = self.server.poll_timeout();
                self.advance(c, due);
                let mut out = Out::default();
                self.server.handle_timeout(self.now, &mut out);
                self.summary.refused += drain(&mut self.server, &mut out, self.stalled);
                self.absorb(out, None, None);
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
        let conn = Self::own_conn(i, c.byte());
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
            self.accept(conn);
        }
        self.pump(i);
        while let Some(frame) = self.peers[i].outbox.pop_front() {
            self.send_to_server(i, None, frame, Flip::None);
        }
        while let Some(frame) = self.peers[i].inbox.pop_front() {
            self.client_frame(i, &frame);
        }
        self.pump(i);
    }

    fn accept(&mut self, conn: ConnId) {
        let mut out = Out::default();
        self.server.handle_accepted(self.now, conn, &mut out);
        self.summary.refused += drain(&mut self.server, &mut out, self.stalled);
        self.absorb(out, None, None);
    }

    fn disconnect(&mut self, conn: ConnId) {
        self.server.handle_disconnected(conn);
        self.bound.remove(&conn);
    }

    /// Drains the client's transmits, actions and events.
    fn pump(&mut self, i: usize) {
        let p = &mut self.peers[i];
        let mut n = 0;
        while let Some(tx) = p.client.poll_transmit(self.now) {
            assert_eq!(
                p.client.poll_transmit(self.now),
                Some(tx),
                "poll_transmit only peeks"
            );
            assert!(tx.len() <= HEADER_LEN + MAX_LEN as usize, "{tx:?}");
            let mut frame = vec![0u8; tx.len()];
            let len = p.client.write_transmit(self.now, tx, &mut frame);
            assert_eq!(
                len,
                tx.len(),
                "write_transmit wrote another length than offered"
            );
            p.outbox.push_back(frame);
            n += 1;
            assert!(n <= WINDOW + 2, "poll_transmit never ends");
        }
        let d = &mut p.drained;
        while let Some(e) = p.client.poll_event() {
            match e {
                ClientEvent::Connecting { .. } => d.connecting += 1,
                ClientEvent::Established { .. } => d.established += 1,
                ClientEvent::Disconnected { .. } => d.disconnected += 1,
                ClientEvent::ServerRestarted { .. } => d.restarts += 1,
                ClientEvent::NotReplayed { range } => d.not_replayed += range.end - range.start,
                ClientEvent::Failed(_) => d.failed += 1,
                _ => {}
            }
        }
        let s = p.client.stats();
        let counted = Drained {
            connecting: s.connects,
            established: s.established,
            disconnected: s.disconnects,
            restarts: s.server_restarts,
            not_replayed: s.not_replayed,
            failed: u64::from(matches!(p.client.state(), ClientState::Failed(_))),
        };
        assert_eq!(
            p.drained, counted,
            "client events vs its counters and state"
        );
        while let Some(action) = p.client.poll_action() {
            if action == Action::Close {
                if let Some(conn) = p.conn.take() {
                    self.server.handle_disconnected(conn);
                    self.bound.remove(&conn);
                }
            }
        }
    }

    fn crash(&mut self) {
        self.summary.probes += self.server.stats().probes;
        self.server_config.instance += 1;
        self.server = Server::new(self.server_config.clone());
        self.delivered.clear();
        self.delivered_events = 0;
        self.forgotten_events = 0;
        self.owners.clear();
        self.bound.clear();
        self.summary.crashes += 1;
    }
}

mod transit;

#[cfg(test)]
mod tests;
