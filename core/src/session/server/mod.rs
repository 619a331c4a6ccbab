//! The server side: a bounded table of sessions and connections.

mod frame;
mod handshake;
mod journal;
mod process;
mod replies;
mod table;
mod types;

pub use journal::{
    JournalError, JournalRecord, JOURNAL_FIXED, JOURNAL_MAGIC, JOURNAL_MAX_RECORD,
    JOURNAL_MAX_WORDS, JOURNAL_VERSION,
};
use replies::{Queued, Reply, ReplyQueue, Strays};
pub use replies::{CONN_REPLIES, STRAY_REPLIES};

pub use types::{
    Delivery, ReadRequest, ServerConfig, ServerEvent, ServerHandler, ServerStats, ServerTransmit,
    SessionInfo, Unkept,
};

use core::ops::Range;

use table::Table;

use super::client::RequestOp;
use crate::conn::ConnId;
use crate::rng::mix64;
use crate::seq::{Arrival, RecvTracker};
use crate::time::Instant;
use crate::wire::{self, Body, IoMsg, RejectReason, WireError, MAX_DATA_LEN, SN_MAX};

/// The longest request body a `Read` may carry: the server keeps it with
/// the pending reply until its application answers.
pub const MAX_READ_REQUEST: usize = 32;

/// The smallest window a server agrees to offer: a client may send this
/// many frames after its `Hello` before the `Welcome` says more.
pub const MIN_WINDOW: u32 = 64;

/// The `WORDS` of a [`ServerCore`] whose tracker holds a window of at
/// least `sns` sequence numbers per session: the window is a bitmap of
/// 64-sn words plus one, so `ServerCore<S, C, { window_words(4096) }>`
/// tracks 4,096 sns past a session's cumulative point.
#[must_use]
pub const fn window_words(sns: usize) -> usize {
    sns.div_ceil(64) + 1
}

#[derive(Clone, Debug)]
struct Session<const WORDS: usize> {
    epoch: u32,
    /// The owner's token: a `Hello` with another one is refused.
    token: u64,
    /// Names this record; a tombstone keeps it (see [`Tomb`]).
    incarnation: u64,
    /// The window agreed with the client at the last `Hello`.
    window: u64,
    conn: Option<ConnId>,
    tracker: RecvTracker<WORDS>,
    stream_unacked: u32,
    ack_due: Option<Instant>,
    last_active: Instant,
    delivered: u64,
    /// The `seq` of the connection of its latest `Hello`.
    conn_seq: u64,
    /// The largest `next_sn` a `Hello` of this record carried: a client
    /// never sends fewer sns than it said before.
    hello_next: u64,
    /// The lowest sn given up (not delivered) that the client may not know
    /// about yet: its Welcome may have been lost. Until the client's
    /// `base_sn` passes it, `resume_from` never exceeds it, so a later
    /// Welcome cannot pass a given-up sn off as delivered.
    given_up_from: Option<u64>,
    /// Where this record's knowledge begins when it is known to be
    /// younger than what its client saw acknowledged (its journal lost
    /// commits, or lost the session): every `Welcome` of this incarnation
    /// carries it as its ack, so that the client names `[lost_from,
    /// base_sn)` the first time it meets the incarnation, even when the
    /// first such `Welcome` was lost.
    lost_from: Option<u64>,
    /// Changed since its last journal record (only with the journal on).
    dirty: bool,
}

/// What a closed or evicted session leaves behind, so that this instance
/// never delivers one of its sns again: a delayed `Hello` of an old epoch
/// is refused, and the owner's next `Hello` resumes it where it stopped.
/// Only sessions without open holes are evicted, so `cum` says it all:
/// every sn below it is done, none at or past it was delivered.
#[derive(Clone, Copy, Debug)]
struct Tomb {
    epoch: u32,
    token: u64,
    incarnation: u64,
    cum: u64,
    given_up_from: Option<u64>,
    /// The `seq` of the connection of the session's latest `Hello`.
    conn_seq: u64,
    /// The session's `hello_next`.
    hello_next: u64,
    /// The session's `lost_from`.
    lost_from: Option<u64>,
    at: Instant,
}

/// What a data frame asks of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Request(RequestOp),
    /// A tail-loss probe: `sn` is the client's next sn on this connection.
    Probe,
}

/// A data frame of a bound connection, its bytes borrowed from the
/// transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Data<'f> {
    session: u64,
    epoch: u32,
    sn: u64,
    kind: Kind,
    /// A write's payload, a read's request.
    bytes: &'f [u8],
    /// A read's requested length.
    read_len: u32,
    /// The request carried a payload CRC: so does its answer.
    validate: bool,
}

#[derive(Clone, Debug)]
struct Conn {
    session: Option<u64>,
    /// The epoch of the `Hello` that bound it.
    epoch: u32,
    /// Rejected or closed by the server: its close is due once its
    /// replies are out. Nothing it carries from now on is processed.
    closing: bool,
    /// Its place in the order of accepted connections (from 1).
    seq: u64,
    /// When it was accepted: without a `Hello` by
    /// `config.handshake_timeout` later, it is closed.
    accepted_at: Instant,
    /// Its replies waiting for the transport.
    out: ReplyQueue,
}

impl Conn {
    /// What a frame on this connection needs to know first: whether it is
    /// closing, whether its reply would find no room (the queue is full and
    /// its last entry takes no ack), and the session it is bound to.
    fn state(&self) -> (bool, bool, Option<u64>) {
        let room_gone =
            self.out.replies.is_full() && !self.out.replies.back().is_some_and(Reply::acks_only);
        (self.closing, room_gone, self.session)
    }

    fn new(seq: u64, now: Instant) -> Conn {
        Conn {
            session: None,
            epoch: 0,
            closing: false,
            seq,
            accepted_at: now,
            out: ReplyQueue::new(),
        }
    }
}

/// The server's sessions and connections: at most `SESSIONS` sessions and
/// `CONNS` connections (both powers of two), a receive window of
/// `(WORDS - 1) * 64` sns per session, and `TOMBS` (a power of two)
/// tombstones of closed or evicted sessions.
///
/// Frames come in through [`handle_frame`](Self::handle_frame), which
/// hands each new message's bytes to the application; replies go out
/// through [`poll_transmit`](Self::poll_transmit) /
/// [`write_transmit`](Self::write_transmit). Each connection keeps its own
/// replies, in order, at most [`CONN_REPLIES`]; connections take turns,
/// and one whose transport answers `WouldBlock`
/// ([`transmit_blocked`](Self::transmit_blocked)) is skipped while the
/// others go on. A transport without a free buffer for a connection delays
/// its replies; a connection whose replies no longer fit is closed as a
/// slow consumer ([`ServerEvent::SlowConsumer`]), never silently and never
/// at another connection's expense. Memory is fixed by the capacities: no
/// allocation.
///
/// # Usage contract
///
/// No networking code and no clock, as for the client: the
/// [`transport::Server`](crate::transport::Server) driver does the
/// following over a [`Listener`](crate::transport::Listener).
///
/// - **`handle_*`** from the transport:
///   [`handle_accepted`](Self::handle_accepted) for each new connection,
///   [`handle_frame`](Self::handle_frame) for every frame (in the order
///   it arrived on its connection; new messages go to the application's
///   [`ServerHandler::deliver`] from inside the call),
///   [`handle_disconnected`](Self::handle_disconnected) when a connection
///   ends, and [`handle_timeout`](Self::handle_timeout) once `now`
///   reaches [`poll_timeout`](Self::poll_timeout).
/// - **Before any reply leaves**, call the application's
///   [`ServerHandler::flush`]: an acknowledgement may then cover what
///   `deliver` took.
/// - **`poll_*`** after any of the above, until each returns `None`:
///   [`poll_close`](Self::poll_close) (connections to close),
///   [`poll_transmit`](Self::poll_transmit) then
///   [`write_transmit`](Self::write_transmit) into a buffer of the length
///   it asked for — or [`transmit_blocked`](Self::transmit_blocked) when
///   the transport has no buffer for that connection now (the reply stays
///   queued), or [`discard_transmit`](Self::discard_transmit) when the
///   connection is gone.
/// - **Time never goes back**; [`reset`](Self::reset) starts a new
///   instance (a restart) in the same memory.
pub struct ServerCore<
    const SESSIONS: usize = 64,
    const CONNS: usize = 64,
    const WORDS: usize = 33,
    const TOMBS: usize = 256,
> {
    config: ServerConfig,
    sessions: Table<u64, Session<WORDS>, SESSIONS>,
    tombs: Table<u64, Tomb, TOMBS>,
    conns: Table<ConnId, Conn, CONNS>,
    /// Rejections to connections outside the table.
    strays: Strays,
    /// Replies queued over all connections.
    queued: usize,
    /// Connections whose close is due once their replies are out.
    closes_due: usize,
    /// Connections the transport refused in this transmit round.
    blocked: usize,
    /// A queue is down to its last free slot: transmit before receiving.
    urgent: bool,
    /// The table index whose turn it is to transmit.
    turn: usize,
    /// The table index of the frame last offered.
    offered: usize,
    /// No unbound connection's handshake deadline is earlier.
    next_handshake_due: Option<Instant>,
    /// Records created so far: makes each incarnation distinct.
    created: u64,
    /// Connections accepted so far: the last one's `seq`.
    accepted: u64,
    /// The largest connection `seq` of a session whose tombstone was
    /// forgotten: a connection accepted at or before it may carry a delayed
    /// `Hello` of that session, so it opens no new record.
    forgotten_upto: u64,
    next_ack_due: Option<Instant>,
    /// The largest payload the transport carries in one frame.
    transport_limit: usize,
    /// Sessions changed since the journal last took them (journal on).
    dirty: journal::Dirty<SESSIONS>,
    /// The application could not keep a batch: nothing more is delivered
    /// or acknowledged (see [`halt`](Self::halt)).
    halted: bool,
    stats: ServerStats,
}

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    /// The largest window any session of this server can have.
    pub const WINDOW: u64 = RecvTracker::<WORDS>::WINDOW;

    /// An empty server.
    ///
    /// `const`: with the default capacities a `ServerCore` is about 165 KB
    /// (each connection keeps [`CONN_REPLIES`] replies of about 100 bytes),
    /// so rather than build it on a small stack, put it in a `static`
    /// (evaluated at compile time) or reuse one with
    /// [`reset`](Self::reset), and hand the driver a reference to it
    /// ([`Server::with_core`](crate::transport::Server::with_core)).
    pub const fn new(config: ServerConfig) -> Self {
        ServerCore {
            config,
            sessions: Table::new(),
            tombs: Table::new(),
            conns: Table::new(),
            strays: Strays::new(),
            queued: 0,
            closes_due: 0,
            blocked: 0,
            urgent: false,
            turn: 0,
            offered: 0,
            next_handshake_due: None,
            created: 0,
            accepted: 0,
            forgotten_upto: 0,
            next_ack_due: None,
            transport_limit: MAX_DATA_LEN as usize,
            dirty: journal::Dirty::new(),
            halted: false,
            stats: ServerStats::ZERO,
        }
    }

    /// Empties the core in place for a new server instance with `config`
    /// (a new `instance` id): every session, tombstone, connection and
    /// counter is gone, as after a restart; what the transport carries
    /// stays. Nothing is built on the stack.
    pub fn reset(&mut self, config: ServerConfig) {
        self.config = config;
        self.sessions.clear();
        self.tombs.clear();
        self.conns.clear();
        self.clear_replies();
        self.next_handshake_due = None;
        self.created = 0;
        self.accepted = 0;
        self.forgotten_upto = 0;
        self.next_ack_due = None;
        self.dirty.clear();
        self.halted = false;
        // The transport's limit stays: the driver set it for its backend.
        self.stats = ServerStats::ZERO;
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
    /// The counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }
    /// Sessions in the table.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }
    /// Connections in the table.
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }
    /// Closed or evicted sessions this instance still remembers.
    pub fn tomb_count(&self) -> usize {
        self.tombs.len()
    }
    /// The window this server offers: `config.window` within
    /// `[MIN_WINDOW, WINDOW]`.
    pub fn window(&self) -> u64 {
        u64::from(self.config.window.max(MIN_WINDOW)).min(Self::WINDOW)
    }
    /// The longest read this server answers: `config.max_read` within what
    /// the transport carries.
    pub fn max_read(&self) -> usize {
        (self.config.max_read.min(MAX_DATA_LEN) as usize).min(self.transport_limit)
    }
    /// Tells the core the largest payload its transport carries in one
    /// frame; the driver calls it when it is built.
    pub fn set_transport_limit(&mut self, max_payload: usize) {
        self.transport_limit = max_payload;
    }
    /// How many sessions the table holds at most.
    pub fn max_sessions(&self) -> usize {
        self.config.max_sessions.clamp(1, SESSIONS)
    }
    /// One session's state.
    pub fn session(&self, id: u64) -> Option<SessionInfo> {
        self.sessions.get(&id).map(|s| SessionInfo {
            epoch: s.epoch,
            incarnation: s.incarnation,
            window: s.window,
            conn: s.conn,
            cumulative: s.tracker.cumulative(),
            top: s.tracker.top(),
            missing: s.tracker.missing(),
            delivered: s.delivered,
        })
    }
    /// Open holes of a session (sns jumped over and not yet arrived).
    pub fn holes(&self, id: u64) -> impl Iterator<Item = Range<u64>> + '_ {
        self.sessions
            .get(&id)
            .into_iter()
            .flat_map(|s| s.tracker.holes())
    }

    /// A connection was accepted at `now`. Returns `false` when the
    /// connection table is full: a `Reject` (`SessionTableFull`) and the
    /// close are queued for it.
    ///
    /// A connection that sends no `Hello` within
    /// [`ServerConfig::handshake_timeout`] is closed
    /// ([`ServerEvent::HandshakeTimeout`]), so silent peers cannot hold the
    /// table.
    ///
    /// Connections must be handed in in the order their clients opened
    /// them (both backends do): a `Hello` on a connection accepted before
    /// this instance forgot a session's tombstone opens no new session
    /// ([`RejectReason::StaleConnection`]).
    pub fn handle_accepted(
        &mut self,
        now: Instant,
        conn: ConnId,
        sink: &mut impl ServerHandler,
    ) -> bool {
        if self.conns.contains_key(&conn) {
            return true;
        }
        if self.is_stray(conn) {
            // Refused already: its rejection and close are on their way.
            self.stats.after_close += 1;
            return false;
        }
        if self.halted {
            let reason = RejectReason::ShuttingDown;
            self.reject(conn, 0, 0, reason, HALTED_UNKEPT, sink);
            return false;
        }
        self.accepted += 1;
        if self
            .conns
            .insert(conn, Conn::new(self.accepted, now))
            .is_err()
        {
            self.reject(
                conn,
                0,
                0,
                RejectReason::SessionTableFull,
                CONNS as u64,
                sink,
            );
            return false;
        }
        let due = now + self.config.handshake_timeout;
        self.next_handshake_due = Some(self.next_handshake_due.map_or(due, |d| d.min(due)));
        true
    }

    /// A connection ended. Replies still queued for it are dropped: the
    /// client sends again whatever they would have acknowledged.
    pub fn handle_disconnected(&mut self, conn: ConnId) {
        self.drop_conn(conn);
    }

    /// The application could not keep a batch of what it took
    /// ([`ServerHandler::flush`] failed): stops acknowledging for good.
    /// Every reply queued is dropped (the acknowledgements of the batch
    /// among them, so nothing that was not kept is acknowledged), every
    /// connection is refused (`ShuttingDown`, detail [`HALTED_UNKEPT`])
    /// and closed, and from now on no frame is processed and every new
    /// connection is refused the same way. What was acknowledged before
    /// stays true; the clients replay the rest to the next instance. The
    /// [`Server`](crate::transport::Server) driver calls it when `flush`
    /// fails; only [`reset`](Self::reset) undoes it.
    pub fn halt(&mut self, sink: &mut impl ServerHandler) {
        if self.halted {
            return;
        }
        self.halted = true;
        self.dirty.clear();
        for s in self.sessions.values_mut() {
            s.dirty = false;
        }
        let conns: heapless::Vec<ConnId, CONNS> = self.conns.keys().copied().collect();
        for conn in conns {
            if let Some(c) = self.conns.get_mut(&conn) {
                let n = c.out.replies.len();
                c.out.replies.clear();
                self.queued -= n;
                self.stats.replies_discarded += n as u64;
            }
            self.reject(conn, 0, 0, RejectReason::ShuttingDown, HALTED_UNKEPT, sink);
        }
    }

    /// Whether the server [halted](Self::halt).
    #[must_use]
    pub fn is_halted(&self) -> bool {
        self.halted
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next: the
    /// earliest delayed ack or handshake deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.next_ack_due, self.next_handshake_due) {
            (Some(a), Some(h)) => Some(a.min(h)),
            (a, h) => a.or(h),
        }
    }

    /// Sends the `Ack`s that are due and closes the connections whose
    /// handshake deadline passed.
    pub fn handle_timeout(&mut self, now: Instant, sink: &mut impl ServerHandler) {
        if self.next_handshake_due.is_some_and(|t| t <= now) {
            self.expire_handshakes(now, sink);
        }
        if self.next_ack_due.is_none_or(|t| t > now) {
            return;
        }
        let mut next: Option<Instant> = None;
        let mut due_acks: heapless::Vec<(ConnId, u64), SESSIONS> = heapless::Vec::new();
        for (&id, s) in self.sessions.iter_mut() {
            match s.ack_due {
                Some(due) if due <= now => {
                    s.ack_due = None;
                    s.stream_unacked = 0;
                    if let Some(conn) = s.conn {
                        // One per session: the table's own capacity.
                        let _ = due_acks.push((conn, id));
                    }
                }
                Some(due) => next = Some(next.map_or(due, |n| n.min(due))),
                None => {}
            }
        }
        self.next_ack_due = next;
        for (conn, id) in due_acks {
            let Some(s) = self.sessions.get(&id) else {
                continue;
            };
            let msg = control(id, s.epoch, 0, s.tracker.cumulative(), Body::Ack);
            if self.push_reply(conn, Reply::Frame { msg }, sink) == Queued::Yes {
                self.stats.acks += 1;
            }
        }
    }

    /// The earliest handshake deadline of a connection still without a
    /// `Hello`.
    fn recompute_handshake_due(&mut self) {
        let limit = self.config.handshake_timeout;
        self.next_handshake_due = self
            .conns
            .values()
            .filter(|c| c.session.is_none() && !c.closing)
            .map(|c| c.accepted_at + limit)
            .min();
    }

    /// Closes every connection still without a `Hello` past its deadline.
    fn expire_handshakes(&mut self, now: Instant, sink: &mut impl ServerHandler) {
        let limit = self.config.handshake_timeout;
        let mut next: Option<Instant> = None;
        let mut expired: heapless::Vec<ConnId, CONNS> = heapless::Vec::new();
        for (&conn, c) in self.conns.iter() {
            if c.session.is_some() || c.closing {
                continue;
            }
            let due = c.accepted_at + limit;
            if due <= now {
                // At most one per connection: the table's own capacity.
                let _ = expired.push(conn);
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
        self.next_handshake_due = next;
        for conn in expired {
            self.stats.handshake_timeouts += 1;
            self.retire_conn(conn);
            sink.event(ServerEvent::HandshakeTimeout {
                conn,
                timeout: limit,
            });
        }
    }

    /// A frame arrived on `conn`. A new message's bytes go to the
    /// application (`sink.deliver`), borrowed from `frame`.
    ///
    /// A frame of a connection whose replies no longer fit (its transport
    /// took none of them) is not processed: the connection is closed as a
    /// slow consumer ([`ServerEvent::SlowConsumer`]). Transmit whenever
    /// [`needs_transmit`](Self::needs_transmit) says so, and that happens
    /// only to a connection the transport keeps refusing.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        conn: ConnId,
        frame: &[u8],
        sink: &mut impl ServerHandler,
    ) {
        self.stats.frames += 1;
        let Some(bound) = self.admit_frame(now, conn, sink) else {
            return;
        };
        let msg = match wire::parse_with(frame, &self.config.crc) {
            Ok(msg) => msg,
            Err(e) => {
                self.stats.last_wire_error = Some(e);
                let detail = malformed_detail(&e);
                return self.reject(conn, 0, 0, RejectReason::Malformed, detail, sink);
            }
        };
        if msg.body.carries_state() && !msg.validate {
            // A flipped bit there would pass every header check.
            let (s, e) = (msg.session, msg.epoch);
            return self.reject(conn, s, e, RejectReason::Malformed, UNCHECKED_BODY, sink);
        }
        let Some(data) = self.request_of(now, conn, &msg, sink) else {
            return;
        };
        if bound.is_none() {
            // Frames of a connection arrive in order and its Hello comes
            // first: this peer skipped it. Nothing is delivered; the
            // client sends these sns again after its handshake.
            let (s, e) = (data.session, data.epoch);
            let op = u64::from(msg.body.op() as u8);
            return self.reject(conn, s, e, RejectReason::NotBound, op, sink);
        }
        self.process(now, conn, bound, data, sink);
    }

    /// Unbinds `conn` and marks its close due (after the replies queued
    /// before); it carries nothing more to the core.
    fn retire_conn(&mut self, conn: ConnId) {
        let closing = self.conns.get(&conn).map(|c| c.closing);
        if closing == Some(true) {
            return;
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.closing = true;
            let session = c.session.take();
            if let Some(s) = session.and_then(|id| self.sessions.get_mut(&id)) {
                if s.conn == Some(conn) {
                    s.conn = None;
                    s.ack_due = None;
                }
            }
        }
        self.close_after_replies(conn);
        self.recompute_handshake_due();
    }

    fn drop_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.forget_outbox(&c);
            if c.session.is_none() && !c.closing {
                self.recompute_handshake_due();
            }
            if let Some(s) = c.session.and_then(|id| self.sessions.get_mut(&id)) {
                if s.conn == Some(conn) {
                    s.conn = None;
                    s.ack_due = None;
                }
            }
        }
    }
}

/// The fields of a `Hello` body.
#[derive(Clone, Copy, Debug)]
struct Hello {
    base_sn: u64,
    next_sn: u64,
    token: u64,
    window: u32,
    replay: bool,
}

fn control(session: u64, epoch: u32, sn: u64, ack: u64, body: Body<'static>) -> IoMsg<'static> {
    IoMsg {
        session,
        epoch,
        sn,
        ack,
        // A control body is protocol state: always checksummed.
        validate: true,
        stream: false,
        body,
    }
}

/// A `Malformed` rejection's detail for a `Hello` or `Read` whose body
/// carries no payload CRC (see [`Body::carries_state`]).
pub const UNCHECKED_BODY: u64 = 16;

/// A `ShuttingDown` rejection's detail from a server that
/// [halted](ServerCore::halt): its application could not keep what it
/// took, so it stopped before acknowledging it.
pub const HALTED_UNKEPT: u64 = 1;

/// A `Malformed` rejection's detail for a frame that did not parse: its
/// [`wire_error_code`] (bits 0 to 7); for a frame of another wire version
/// also the version byte received (bits 8 to 15) and the version this
/// server speaks (bits 16 to 23), so that its client can tell a version
/// the server does not speak, which is final, from a byte damaged on the
/// way.
pub fn malformed_detail(e: &WireError) -> u64 {
    match *e {
        WireError::UnsupportedVersion(received) => {
            wire_error_code(e) | u64::from(received) << 8 | u64::from(wire::VERSION) << 16
        }
        _ => wire_error_code(e),
    }
}

/// A stable number for each parse error, sent as a `Reject`'s detail
/// (1 to 15; [`UNCHECKED_BODY`] is 16).
pub fn wire_error_code(e: &WireError) -> u64 {
    match e {
        WireError::Truncated { .. } => 1,
        WireError::BadMagic(_) => 2,
        WireError::UnsupportedVersion(_) => 3,
        WireError::HeaderChecksum { .. } => 4,
        WireError::UnknownOp(_) => 5,
        WireError::BadFlags { .. } => 6,
        WireError::TooLong { .. } => 7,
        WireError::LengthMismatch { .. } => 8,
        WireError::BodyLength { .. } => 9,
        WireError::PayloadChecksum { .. } => 10,
        WireError::UnexpectedPayloadChecksum(_) => 11,
        WireError::NonZeroPadding { .. } => 12,
        WireError::BadBool { .. } => 13,
        WireError::UnknownRejectReason(_) => 14,
        WireError::BufferTooSmall { .. } => 15,
    }
}
