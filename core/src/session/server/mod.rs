//! The server side: a bounded table of sessions and connections.

mod types;

pub use types::{ServerConfig, ServerEvent, ServerSink, ServerStats, SessionInfo};

use core::ops::Range;

use heapless::{Deque, FnvIndexMap};

use super::backoff::mix64;
use super::client::RequestOp;
use super::pattern;
use crate::seq::{RecvTracker, Verdict};
use crate::time::Instant;
use crate::transport::ConnId;
use crate::wire::{self, Body, IoMsg, Op, RejectReason, WireError, SN_MAX};

/// Largest read a server answers (its reply buffer).
pub const MAX_READ_LEN: usize = 16 * 1024;

/// The smallest window a server agrees to offer: a client may send this
/// many frames after its `Hello` before the `Welcome` says more.
pub const MIN_WINDOW: u32 = 64;

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
    /// The lowest sn given up (not delivered) that the client may not know
    /// about yet: its Welcome may have been lost. Until the client's
    /// `base_sn` passes it, `resume_from` never exceeds it, so a later
    /// Welcome cannot pass a given-up sn off as delivered.
    given_up_from: Option<u64>,
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
    at: Instant,
}

/// What a data frame asks of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Request(RequestOp),
    /// A tail-loss probe: `sn` is the client's next sn on this connection.
    Probe,
}

/// A data frame reduced to what the server needs after its payload was
/// verified; this is what a connection's backlog holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Data {
    session: u64,
    epoch: u32,
    sn: u64,
    kind: Kind,
    len: u32,
    /// The request carried a payload CRC: so does its answer.
    validate: bool,
}

#[derive(Clone, Debug, Default)]
struct Conn<const BACKLOG: usize> {
    session: Option<u64>,
    /// The epoch of the `Hello` that bound it.
    epoch: u32,
    backlog: Deque<Data, BACKLOG>,
}

/// The server's sessions and connections: at most `SESSIONS` sessions and
/// `CONNS` connections (both powers of two), `BACKLOG` early frames per
/// connection, a receive window of `(WORDS - 1) * 64` sns per session, and
/// `TOMBS` (a power of two) tombstones of closed or evicted sessions.
pub struct ServerCore<
    const SESSIONS: usize = 64,
    const CONNS: usize = 64,
    const BACKLOG: usize = 32,
    const WORDS: usize = 33,
    const TOMBS: usize = 256,
> {
    config: ServerConfig,
    sessions: FnvIndexMap<u64, Session<WORDS>, SESSIONS>,
    tombs: FnvIndexMap<u64, Tomb, TOMBS>,
    conns: FnvIndexMap<ConnId, Conn<BACKLOG>, CONNS>,
    /// Records created so far: makes each incarnation distinct.
    created: u64,
    next_ack_due: Option<Instant>,
    read_buf: [u8; MAX_READ_LEN],
    stats: ServerStats,
}

impl<
        const SESSIONS: usize,
        const CONNS: usize,
        const BACKLOG: usize,
        const WORDS: usize,
        const TOMBS: usize,
    > ServerCore<SESSIONS, CONNS, BACKLOG, WORDS, TOMBS>
{
    /// The largest window any session of this server can have.
    pub const WINDOW: u64 = RecvTracker::<WORDS>::WINDOW;

    /// An empty server.
    pub fn new(config: ServerConfig) -> Self {
        ServerCore {
            config,
            sessions: FnvIndexMap::new(),
            tombs: FnvIndexMap::new(),
            conns: FnvIndexMap::new(),
            created: 0,
            next_ack_due: None,
            read_buf: [0; MAX_READ_LEN],
            stats: ServerStats::default(),
        }
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

    /// A connection was accepted. Returns `false` (and closes it) when the
    /// connection table is full.
    pub fn handle_accepted(&mut self, conn: ConnId, sink: &mut impl ServerSink) -> bool {
        if self.conns.contains_key(&conn) {
            return true;
        }
        if self.conns.insert(conn, Conn::default()).is_err() {
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
        true
    }

    /// A connection ended. Frames still in its backlog were never
    /// acknowledged, so the client will send them again.
    pub fn handle_disconnected(&mut self, conn: ConnId) {
        self.drop_conn(conn);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_ack_due
    }

    /// Sends the `Ack`s that are due.
    pub fn handle_timeout(&mut self, now: Instant, sink: &mut impl ServerSink) {
        if self.next_ack_due.is_none_or(|t| t > now) {
            return;
        }
        let mut next: Option<Instant> = None;
        for (&id, s) in self.sessions.iter_mut() {
            match s.ack_due {
                Some(due) if due <= now => {
                    s.ack_due = None;
                    s.stream_unacked = 0;
                    if let Some(conn) = s.conn {
                        let msg = control(id, s.epoch, 0, s.tracker.cumulative(), Body::Ack);
                        sink.transmit(conn, &msg);
                        self.stats.acks += 1;
                    }
                }
                Some(due) => next = Some(next.map_or(due, |n| n.min(due))),
                None => {}
            }
        }
        self.next_ack_due = next;
    }

    /// A frame arrived on `conn`.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        conn: ConnId,
        frame: &[u8],
        sink: &mut impl ServerSink,
    ) {
        self.stats.frames += 1;
        if !self.conns.contains_key(&conn) && !self.handle_accepted(conn, sink) {
            return;
        }
        let msg = match wire::parse(frame) {
            Ok(msg) => msg,
            Err(e) => {
                self.stats.last_wire_error = Some(e);
                let code = wire_error_code(&e);
                return self.reject(conn, 0, 0, RejectReason::Malformed, code, sink);
            }
        };
        if msg.body.carries_state() && !msg.validate {
            // A flipped bit there would pass every header check.
            let (s, e) = (msg.session, msg.epoch);
            return self.reject(conn, s, e, RejectReason::Malformed, UNCHECKED_BODY, sink);
        }
        let (session, epoch, sn, validate) = (msg.session, msg.epoch, msg.sn, msg.validate);
        let data = |kind: Kind, len: u32| Data {
            session,
            epoch,
            sn,
            kind,
            len,
            validate,
        };
        let data = match msg.body {
            Body::Hello {
                base_sn,
                next_sn,
                token,
                window,
                replay,
            } => {
                let hello = Hello {
                    base_sn,
                    next_sn,
                    token,
                    window,
                    replay,
                };
                return self.handle_hello(now, conn, session, epoch, hello, sink);
            }
            Body::Bye => return self.handle_bye(now, conn, session, sink),
            Body::Write { data: bytes } => {
                if !pattern::matches(session, sn, bytes) {
                    // Corrupted beyond what the CRCs covered: never deliver
                    // it. Its header passed its CRC, though, so it still
                    // says that every sn below it was sent before it.
                    if self.conns.get(&conn).and_then(|c| c.session) == Some(session) {
                        self.process(now, conn, data(Kind::Probe, 0), sink);
                    }
                    return self.reject(conn, session, epoch, RejectReason::Malformed, sn, sink);
                }
                let op = if msg.stream {
                    RequestOp::StreamWrite
                } else {
                    RequestOp::Write
                };
                data(Kind::Request(op), bytes.len() as u32)
            }
            Body::Read { len } => {
                if len as usize > MAX_READ_LEN {
                    let detail = u64::from(len);
                    return self.reject(
                        conn,
                        session,
                        epoch,
                        RejectReason::ReadTooLong,
                        detail,
                        sink,
                    );
                }
                data(Kind::Request(RequestOp::Read), len)
            }
            Body::Probe => data(Kind::Probe, 0),
            other => {
                let op = u64::from(other.op() as u8);
                return self.reject(conn, session, epoch, RejectReason::Unexpected, op, sink);
            }
        };
        let bound = self.conns.get(&conn).and_then(|c| c.session);
        if bound.is_none() {
            // Before the handshake: hold it, never drop it silently.
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.backlog.push_back(data).is_err() {
                let (s, e) = (data.session, data.epoch);
                return self.reject(
                    conn,
                    s,
                    e,
                    RejectReason::BacklogOverflow,
                    BACKLOG as u64,
                    sink,
                );
            }
            self.stats.backlogged += 1;
            return;
        }
        self.process(now, conn, data, sink);
    }

    fn handle_hello(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: Hello,
        sink: &mut impl ServerSink,
    ) {
        let Hello {
            base_sn,
            next_sn,
            token,
            window,
            replay,
        } = hello;
        if base_sn > next_sn || next_sn > SN_MAX || window == 0 {
            return self.reject(conn, id, epoch, RejectReason::BadHandshake, next_sn, sink);
        }
        if self.conns.get(&conn).is_some_and(|c| c.session.is_some()) {
            let op = u64::from(Op::Hello as u8);
            return self.reject(conn, id, epoch, RejectReason::Unexpected, op, sink);
        }
        // Who owns the session, and up to which epoch, whether it is live
        // or closed: a Hello of another client or of an old epoch changes
        // nothing.
        let owner = match (self.sessions.get(&id), self.tombs.get(&id)) {
            (Some(s), _) => Some((s.token, s.epoch)),
            (None, Some(t)) => Some((t.token, t.epoch)),
            (None, None) => None,
        };
        if let Some((owner_token, current)) = owner {
            if owner_token != token {
                // Two clients with one session id, or a stray peer.
                return self.reject(conn, id, epoch, RejectReason::SessionOwned, id, sink);
            }
            if epoch <= current {
                let current = u64::from(current);
                return self.reject(conn, id, epoch, RejectReason::StaleEpoch, current, sink);
            }
        }
        let agreed = u64::from(window).min(self.window());
        if !self.sessions.contains_key(&id) {
            if let Some(tomb) = self.tombs.get(&id).copied() {
                // The same instance resumes what it closed or evicted.
                if tomb.cum < base_sn || tomb.cum > next_sn {
                    let cum = tomb.cum;
                    return self.reject(conn, id, epoch, RejectReason::BadHandshake, cum, sink);
                }
                let Ok(tracker) = RecvTracker::try_new(tomb.cum) else {
                    let cum = tomb.cum;
                    return self.reject(conn, id, epoch, RejectReason::BadHandshake, cum, sink);
                };
                let session = Session {
                    epoch: tomb.epoch,
                    token,
                    incarnation: tomb.incarnation,
                    window: agreed,
                    conn: None,
                    tracker,
                    stream_unacked: 0,
                    ack_due: None,
                    last_active: now,
                    delivered: 0,
                    given_up_from: tomb.given_up_from,
                };
                // Out of the tomb table first, so that making room (which
                // may bury another session) cannot forget this one.
                self.tombs.remove(&id);
                if !self.make_room(sink) || self.sessions.insert(id, session).is_err() {
                    // Nothing was buried, so its slot is still free.
                    let _ = self.tombs.insert(id, tomb);
                    let n = self.max_sessions() as u64;
                    return self.reject(conn, id, epoch, RejectReason::SessionTableFull, n, sink);
                }
                self.stats.revived += 1;
            }
        }
        let (known, resume_from) = if let Some(s) = self.sessions.get_mut(&id) {
            let cum = s.tracker.cumulative();
            if cum < base_sn || cum > next_sn {
                return self.reject(conn, id, epoch, RejectReason::BadHandshake, cum, sink);
            }
            if s.given_up_from.is_some_and(|g| g < base_sn) {
                // The client moved past it, so it learnt of it.
                s.given_up_from = None;
            }
            // Everything below `resume_from` was delivered.
            let resume_from = s.given_up_from.map_or(cum, |g| g.min(cum));
            if !replay {
                // [cum, next_sn) will never be sent again. Holes below the
                // old top were jumped over live (already reported); the
                // rest was in flight when the last connection broke.
                let top = s.tracker.top();
                let stats = &mut self.stats;
                let given_up_from = &mut s.given_up_from;
                let result = s.tracker.give_up_to(next_sn, |r: Range<u64>| {
                    if given_up_from.is_none() {
                        *given_up_from = Some(r.start);
                    }
                    let live = r.start..r.end.min(top);
                    let in_flight = r.start.max(top)..r.end;
                    if !live.is_empty() {
                        stats.lost_live += live.end - live.start;
                        sink.event(ServerEvent::LostLive {
                            session: id,
                            range: live,
                        });
                    }
                    if !in_flight.is_empty() {
                        stats.lost_in_flight += in_flight.end - in_flight.start;
                        sink.event(ServerEvent::LostInFlight {
                            session: id,
                            range: in_flight,
                        });
                    }
                });
                if result.is_err() {
                    return self.reject(conn, id, epoch, RejectReason::BadHandshake, next_sn, sink);
                }
            }
            let old = s.conn.replace(conn);
            s.epoch = epoch;
            s.window = agreed;
            s.last_active = now;
            s.stream_unacked = 0;
            s.ack_due = None;
            self.stats.resumed += 1;
            if let Some(old) = old.filter(|&old| old != conn) {
                // The owner reconnected: its old connection is done.
                self.stats.superseded += 1;
                let detail = u64::from(epoch);
                self.reject(old, id, 0, RejectReason::Superseded, detail, sink);
            }
            (true, resume_from)
        } else {
            let start = if replay { base_sn } else { next_sn };
            let Ok(tracker) = RecvTracker::try_new(start) else {
                return self.reject(conn, id, epoch, RejectReason::BadHandshake, start, sink);
            };
            self.created += 1;
            let session = Session {
                epoch,
                token,
                incarnation: mix64(self.config.instance ^ mix64(self.created)),
                window: agreed,
                conn: Some(conn),
                tracker,
                stream_unacked: 0,
                ack_due: None,
                last_active: now,
                delivered: 0,
                // Without replay, [base_sn, next_sn) is skipped unseen.
                given_up_from: (!replay && base_sn < next_sn).then_some(base_sn),
            };
            if !self.make_room(sink) || self.sessions.insert(id, session).is_err() {
                let n = self.max_sessions() as u64;
                return self.reject(conn, id, epoch, RejectReason::SessionTableFull, n, sink);
            }
            self.stats.opened += 1;
            // Nothing at or past base_sn was delivered by this record yet.
            (false, base_sn)
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(id);
            c.epoch = epoch;
        }
        let (cum, incarnation) = self.sessions.get(&id).map_or((resume_from, 0), |s| {
            (s.tracker.cumulative(), s.incarnation)
        });
        let welcome = Body::Welcome {
            instance: self.config.instance,
            resume_from,
            incarnation,
            window: agreed as u32,
            known,
        };
        sink.transmit(conn, &control(id, epoch, 0, cum, welcome));
        sink.event(ServerEvent::SessionOpened {
            session: id,
            epoch,
            conn,
            known,
            resume_from,
        });
        // Frames that came before the handshake, in arrival order.
        while let Some(data) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.backlog.pop_front())
        {
            self.process(now, conn, data, sink);
        }
    }

    /// Makes room for one more session: evicts an idle one if the table is
    /// at its limit. Returns `false` when none can go.
    fn make_room(&mut self, sink: &mut impl ServerSink) -> bool {
        self.sessions.len() < self.max_sessions() || self.evict_one(sink)
    }

    fn handle_bye(&mut self, now: Instant, conn: ConnId, id: u64, sink: &mut impl ServerSink) {
        let bound = self.conns.get(&conn).and_then(|c| c.session);
        if bound != Some(id) {
            let op = u64::from(Op::Bye as u8);
            return self.reject(conn, id, 0, RejectReason::Unexpected, op, sink);
        }
        if let Some(mut s) = self.sessions.remove(&id) {
            // A client says Bye once everything is acknowledged; holes left
            // now will never be filled.
            let top = s.tracker.top();
            let stats = &mut self.stats;
            let _ = s.tracker.give_up_to(top, |range| {
                stats.lost_live += range.end - range.start;
                sink.event(ServerEvent::LostLive { session: id, range });
            });
            self.bury(id, &s, now, sink);
        }
        self.drop_conn(conn);
        sink.close(conn);
        sink.event(ServerEvent::Closed { session: id });
    }

    /// Keeps what a closed or evicted session leaves behind; the oldest
    /// tombstone goes when the table is full.
    fn bury(&mut self, id: u64, s: &Session<WORDS>, now: Instant, sink: &mut impl ServerSink) {
        let tomb = Tomb {
            epoch: s.epoch,
            token: s.token,
            incarnation: s.incarnation,
            // Only sessions without holes are buried: every sn below the
            // cumulative point is done and none past it arrived.
            cum: s.tracker.cumulative(),
            given_up_from: s.given_up_from,
            at: now,
        };
        if self.tombs.len() == TOMBS && !self.tombs.contains_key(&id) {
            let oldest = self
                .tombs
                .iter()
                .min_by_key(|(_, t)| t.at)
                .map(|(&id, _)| id);
            if let Some(oldest) = oldest {
                self.tombs.remove(&oldest);
                self.stats.tombs_forgotten += 1;
                sink.event(ServerEvent::Forgotten { session: oldest });
            }
        }
        // A free slot exists now, so this cannot fail.
        let _ = self.tombs.insert(id, tomb);
    }

    /// One data frame of a bound connection (fresh or from the backlog).
    fn process(&mut self, now: Instant, conn: ConnId, d: Data, sink: &mut impl ServerSink) {
        let bound = self.conns.get(&conn).and_then(|c| c.session);
        if bound != Some(d.session) {
            let expected = bound.unwrap_or(0);
            return self.reject(
                conn,
                d.session,
                d.epoch,
                RejectReason::SessionMismatch,
                expected,
                sink,
            );
        }
        // A frame of an older epoch, of a connection the session has left,
        // or of a session evicted while its connection stayed open: stale.
        let current = self
            .sessions
            .get_mut(&d.session)
            .filter(|s| d.epoch >= s.epoch && s.conn == Some(conn));
        let Some(s) = current else {
            self.stats.stale += 1;
            sink.event(ServerEvent::Stale {
                session: d.session,
                epoch: d.epoch,
                sn: d.sn,
            });
            return;
        };
        if d.epoch > s.epoch {
            // Newer than the Hello that bound this connection: a client bug.
            let epoch = u64::from(d.epoch);
            return self.reject(
                conn,
                d.session,
                d.epoch,
                RejectReason::Unexpected,
                epoch,
                sink,
            );
        }
        s.last_active = now;
        let cum = s.tracker.cumulative();
        // The agreed window counts from the cumulative ack, so a hole can
        // never slide out of the tracker while the client keeps to it.
        let limit = cum.saturating_add(s.window);
        let op = match d.kind {
            Kind::Probe => {
                if d.sn > limit {
                    let sn = d.sn;
                    return self.reject(conn, d.session, d.epoch, RejectReason::TooFar, sn, sink);
                }
                // Every sn below the probe's was sent on this connection
                // (or resumed below it) and frames arrive in order: the
                // ones that did not come were lost on a live connection.
                self.stats.probes += 1;
                let Ok(missing) = s.tracker.open_holes_to(d.sn) else {
                    let sn = d.sn;
                    return self.reject(conn, d.session, d.epoch, RejectReason::TooFar, sn, sink);
                };
                if !missing.is_empty() {
                    self.stats.live_gap_sns += missing.end - missing.start;
                    sink.event(ServerEvent::LiveLoss {
                        session: d.session,
                        epoch: d.epoch,
                        missing,
                    });
                }
                let ack = s.tracker.cumulative();
                s.stream_unacked = 0;
                s.ack_due = None;
                sink.transmit(conn, &control(d.session, s.epoch, 0, ack, Body::Ack));
                self.stats.acks += 1;
                return;
            }
            Kind::Request(op) => op,
        };
        let verdict = if d.sn >= limit && d.sn <= SN_MAX {
            Verdict::TooFar {
                sn: d.sn,
                top: s.tracker.top(),
            }
        } else {
            s.tracker.check(d.sn)
        };
        match verdict {
            Verdict::TooFar { .. } | Verdict::OutOfRange { .. } => {
                return self.reject(conn, d.session, d.epoch, RejectReason::TooFar, d.sn, sink);
            }
            Verdict::Duplicate => {
                self.stats.duplicates += 1;
                sink.event(ServerEvent::Duplicate {
                    session: d.session,
                    sn: d.sn,
                });
            }
            Verdict::InOrder | Verdict::FillsGap | Verdict::Gap { .. } => {
                let stats = &mut self.stats;
                let session = d.session;
                s.tracker.commit(d.sn, |r: Range<u64>| {
                    stats.lost_live += r.end - r.start;
                    sink.event(ServerEvent::LostLive { session, range: r });
                });
                match verdict {
                    Verdict::Gap { missing } => {
                        stats.live_gap_sns += missing.end - missing.start;
                        sink.event(ServerEvent::LiveLoss {
                            session,
                            epoch: d.epoch,
                            missing,
                        });
                    }
                    Verdict::FillsGap => {
                        stats.recovered += 1;
                        sink.event(ServerEvent::Recovered { session, sn: d.sn });
                    }
                    _ => {}
                }
                stats.delivered += 1;
                s.delivered += 1;
                let wire_op = if op == RequestOp::Read {
                    Op::Read
                } else {
                    Op::Write
                };
                sink.event(ServerEvent::Delivered {
                    session,
                    epoch: d.epoch,
                    conn,
                    sn: d.sn,
                    op: wire_op,
                    len: d.len,
                });
            }
        }
        // Reply: a completion per request, cadence acks for streams.
        let ack = s.tracker.cumulative();
        let epoch = s.epoch;
        match op {
            RequestOp::StreamWrite => {
                s.stream_unacked += 1;
                if s.stream_unacked >= self.config.ack_every {
                    s.stream_unacked = 0;
                    s.ack_due = None;
                    sink.transmit(conn, &control(d.session, epoch, 0, ack, Body::Ack));
                    self.stats.acks += 1;
                } else if s.ack_due.is_none() {
                    let due = now + self.config.ack_delay;
                    s.ack_due = Some(due);
                    self.next_ack_due = Some(self.next_ack_due.map_or(due, |t| t.min(due)));
                }
            }
            RequestOp::Write | RequestOp::Read => {
                s.stream_unacked = 0;
                s.ack_due = None;
                let body = if op == RequestOp::Read {
                    let data = &mut self.read_buf[..d.len as usize];
                    pattern::fill(d.session, d.sn, data);
                    Body::ReadComp { data }
                } else {
                    Body::WriteComp
                };
                let msg = IoMsg {
                    session: d.session,
                    epoch,
                    sn: d.sn,
                    ack,
                    // A read's data is checked end to end when the
                    // request was: the header CRC does not cover it.
                    validate: self.config.validate || (op == RequestOp::Read && d.validate),
                    stream: false,
                    body,
                };
                sink.transmit(conn, &msg);
                self.stats.completions += 1;
            }
        }
    }

    /// Evicts the idle session (no connection, no open holes) that was
    /// active longest ago, leaving a tombstone. A session with holes waits
    /// for its client's replay instead: evicting it would lose them.
    fn evict_one(&mut self, sink: &mut impl ServerSink) -> bool {
        let victim = self
            .sessions
            .iter()
            .filter(|(_, s)| s.conn.is_none() && s.tracker.missing() == 0)
            .min_by_key(|(_, s)| s.last_active)
            .map(|(&id, s)| (id, s.last_active));
        let Some((id, at)) = victim else {
            return false;
        };
        if let Some(s) = self.sessions.remove(&id) {
            self.bury(id, &s, at, sink);
        }
        self.stats.evicted += 1;
        sink.event(ServerEvent::Evicted { session: id });
        true
    }

    fn reject(
        &mut self,
        conn: ConnId,
        session: u64,
        epoch: u32,
        reason: RejectReason,
        detail: u64,
        sink: &mut impl ServerSink,
    ) {
        if let Some(n) = self.stats.rejects.get_mut(usize::from(reason.as_u16())) {
            *n += 1;
        }
        // Stamp the connection's own session and epoch when it has them, so
        // the client takes the rejection as meant for its current connection.
        let (session, epoch) = match self.conns.get(&conn) {
            Some(Conn {
                session: Some(id),
                epoch,
                ..
            }) => (*id, *epoch),
            _ => (session, epoch),
        };
        let msg = control(session, epoch, 0, 0, Body::Reject { reason, detail });
        sink.transmit(conn, &msg);
        sink.close(conn);
        sink.event(ServerEvent::Rejected {
            conn,
            reason,
            detail,
        });
        self.drop_conn(conn);
    }

    fn drop_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.stats.backlog_discarded += c.backlog.len() as u64;
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
