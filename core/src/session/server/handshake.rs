//! The handshake side of the server: `Hello`, `Bye`, room in the session
//! table, and the tombstones that closed and evicted sessions leave.

use core::ops::Range;

use super::{
    control, mix64, Hello, Queued, RecvTracker, Reply, ServerCore, ServerEvent, ServerHandler,
    Session, Tomb,
};
use crate::conn::ConnId;
use crate::time::Instant;
use crate::wire::{Body, Op, RejectReason, SN_MAX};

/// What a `Hello` being taken gives each session it opens or resumes.
struct Fresh {
    now: Instant,
    /// The connection's seq.
    conn_seq: u64,
    /// The window both ends agreed on.
    agreed: u64,
    /// The session's record came from the journal and no `Hello` resumed
    /// it yet (only such a record can be older than what its client saw
    /// acknowledged).
    from_journal: bool,
}

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    pub(super) fn handle_hello(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: Hello,
        sink: &mut impl ServerHandler,
    ) {
        match self.take_hello(now, conn, id, epoch, hello, sink) {
            Ok(opened) => self.welcome(conn, id, epoch, &hello, opened, sink),
            Err((reason, detail)) => self.reject(conn, id, epoch, reason, detail, sink),
        }
    }

    /// Judges a `Hello` and opens or resumes its session on `conn`:
    /// whether the session was known, and where its client resumes; or
    /// the rejection and its detail.
    fn take_hello(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: Hello,
        sink: &mut impl ServerHandler,
    ) -> Result<(bool, u64), (RejectReason, u64)> {
        self.check_hello(now, conn, id, epoch, &hello, sink)?;
        let conn_seq = self.conn_seq(conn);
        let agreed = u64::from(hello.window).min(self.window());
        // A record taken from the journal that no Hello resumed yet (its
        // connection seq is 0): only such a record can be older than what
        // the client saw acknowledged. A record this instance serves
        // acknowledged nothing past its point.
        let from_journal = match (self.sessions.get(&id), self.tombs.get(&id)) {
            (Some(s), _) => s.conn_seq == 0,
            (None, Some(t)) => t.conn_seq == 0,
            (None, None) => false,
        };
        let fresh = Fresh {
            now,
            conn_seq,
            agreed,
            from_journal,
        };
        if !self.sessions.contains_key(&id) {
            if let Some(tomb) = self.tombs.get(&id).copied() {
                self.revive(id, tomb, &hello, &fresh, sink)?;
            }
        }
        if self.sessions.contains_key(&id) {
            let resume_from = self.resume(conn, id, epoch, &hello, &fresh, sink)?;
            Ok((true, resume_from))
        } else {
            self.open(conn, id, epoch, &hello, &fresh, sink)?;
            // Nothing at or past base_sn was delivered by this record yet.
            Ok((false, hello.base_sn))
        }
    }

    /// What makes a `Hello` refused before any session is touched: bad
    /// numbers, a second `Hello` on one connection, a journal record that
    /// cannot be recalled, another client's session, an old epoch, fewer
    /// sns than sent before, or a connection older than what the server
    /// forgot.
    fn check_hello(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: &Hello,
        sink: &mut impl ServerHandler,
    ) -> Result<(), (RejectReason, u64)> {
        let Hello {
            base_sn,
            next_sn,
            token,
            window,
            ..
        } = *hello;
        if base_sn > next_sn || next_sn > SN_MAX || window == 0 {
            return Err((RejectReason::BadHandshake, next_sn));
        }
        if self.conns.get(&conn).is_some_and(|c| c.session.is_some()) {
            return Err((RejectReason::Unexpected, u64::from(Op::Hello as u8)));
        }
        // A session this instance forgot (or had no room to restore) may
        // be in the journal: take it back before judging the Hello.
        self.recall(now, id, sink)?;
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
                return Err((RejectReason::SessionOwned, id));
            }
            if epoch <= current {
                return Err((RejectReason::StaleEpoch, u64::from(current)));
            }
            let seen = self.seen_upto(id);
            if next_sn < seen {
                // The owner's token, but fewer sns than it sent before.
                return Err((RejectReason::Rewound, seen));
            }
        } else if self.conn_seq(conn) <= self.forgotten_upto {
            // Perhaps a delayed Hello of a session whose tombstone is gone:
            // opening it anew could deliver its sns a second time.
            return Err((RejectReason::StaleConnection, self.forgotten_upto));
        }
        Ok(())
    }

    /// The same instance resumes what it closed or evicted: the session
    /// back from its tombstone into the table (a journal's record behind
    /// the client's base is taken up by [`resume`](Self::resume)).
    fn revive(
        &mut self,
        id: u64,
        tomb: Tomb,
        hello: &Hello,
        fresh: &Fresh,
        sink: &mut impl ServerHandler,
    ) -> Result<(), (RejectReason, u64)> {
        if tomb.cum > hello.next_sn || (tomb.cum < hello.base_sn && !fresh.from_journal) {
            return Err((RejectReason::BadHandshake, tomb.cum));
        }
        let Ok(tracker) = RecvTracker::try_new(tomb.cum) else {
            return Err((RejectReason::BadHandshake, tomb.cum));
        };
        let session = Session {
            epoch: tomb.epoch,
            token: hello.token,
            incarnation: tomb.incarnation,
            window: fresh.agreed,
            conn: None,
            tracker,
            stream_unacked: 0,
            ack_due: None,
            last_active: fresh.now,
            delivered: 0,
            conn_seq: fresh.conn_seq,
            hello_next: hello.next_sn,
            given_up_from: tomb.given_up_from,
            lost_from: tomb.lost_from,
            dirty: false,
        };
        // Out of the tomb table first, so that making room (which may
        // bury another session) cannot forget this one.
        self.tombs.remove(&id);
        if !self.make_room(sink) || self.sessions.insert(id, session).is_err() {
            // Nothing was buried, so its slot is still free.
            let _ = self.tombs.insert(id, tomb);
            return Err((RejectReason::SessionTableFull, self.max_sessions() as u64));
        }
        self.stats.revived += 1;
        Ok(())
    }

    /// Resumes session `id`, which the table holds, on `conn`: what an
    /// earlier instance acknowledged and this record does not know is
    /// named lost state, what the client will not send again (replay off)
    /// is given up, an older connection is superseded. Returns where the
    /// client resumes: everything below it was delivered (or, past an
    /// older record's point, acknowledged by an earlier instance).
    fn resume(
        &mut self,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: &Hello,
        fresh: &Fresh,
        sink: &mut impl ServerHandler,
    ) -> Result<u64, (RejectReason, u64)> {
        let (base_sn, next_sn) = (hello.base_sn, hello.next_sn);
        self.take_up_lost_state(id, base_sn, next_sn, fresh.from_journal, sink)?;
        let Some(s) = self.sessions.get_mut(&id) else {
            return Err((RejectReason::BadHandshake, next_sn));
        };
        if s.given_up_from.is_some_and(|g| g < base_sn) {
            // The client moved past it, so it learnt of it.
            s.given_up_from = None;
        }
        let cum = s.tracker.cumulative();
        let resume_from = s.given_up_from.map_or(cum, |g| g.min(cum));
        if !hello.replay {
            self.give_up_unsent(id, next_sn, sink)?;
        }
        let Some(s) = self.sessions.get_mut(&id) else {
            return Err((RejectReason::BadHandshake, next_sn));
        };
        let old = s.conn.replace(conn);
        s.conn_seq = fresh.conn_seq;
        s.hello_next = s.hello_next.max(next_sn);
        s.epoch = epoch;
        s.window = fresh.agreed;
        s.last_active = fresh.now;
        s.stream_unacked = 0;
        s.ack_due = None;
        self.stats.resumed += 1;
        if let Some(old) = old.filter(|&old| old != conn) {
            // The owner reconnected: its old connection is done.
            self.stats.superseded += 1;
            let detail = u64::from(epoch);
            self.reject(old, id, 0, RejectReason::Superseded, detail, sink);
        }
        Ok(resume_from)
    }

    /// A record behind the client's base: an earlier instance acknowledged
    /// `[cum, base_sn)` and this record does not know it (its journal lost
    /// commits: a power cut, an older copy restored). The client released
    /// those sns; the record goes on from its base under a new
    /// incarnation, so the client names them and announces what it sends
    /// again. A record ahead of the client, or behind it when not from the
    /// journal, is refused.
    fn take_up_lost_state(
        &mut self,
        id: u64,
        base_sn: u64,
        next_sn: u64,
        from_journal: bool,
        sink: &mut impl ServerHandler,
    ) -> Result<(), (RejectReason, u64)> {
        let Some(s) = self.sessions.get_mut(&id) else {
            return Ok(());
        };
        let cum = s.tracker.cumulative();
        if cum > next_sn || (cum < base_sn && !from_journal) {
            return Err((RejectReason::BadHandshake, cum));
        }
        if cum >= base_sn {
            return Ok(());
        }
        let stats = &mut self.stats;
        let lost = s.tracker.give_up_to(base_sn, |range: Range<u64>| {
            stats.state_lost += range.end - range.start;
            sink.event(ServerEvent::StateLost { session: id, range });
        });
        if lost.is_err() {
            return Err((RejectReason::BadHandshake, cum));
        }
        self.created += 1;
        s.incarnation = mix64(self.config.instance ^ mix64(self.created));
        s.lost_from = Some(s.lost_from.map_or(cum, |l| l.min(cum)));
        Ok(())
    }

    /// Replay off: `[cum, next_sn)` will never be sent again. Holes below
    /// the old top were jumped over live (already reported); the rest was
    /// in flight when the last connection broke. Each is given up and
    /// told as lost.
    fn give_up_unsent(
        &mut self,
        id: u64,
        next_sn: u64,
        sink: &mut impl ServerHandler,
    ) -> Result<(), (RejectReason, u64)> {
        let Some(s) = self.sessions.get_mut(&id) else {
            return Ok(());
        };
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
        result.map_err(|_| (RejectReason::BadHandshake, next_sn))
    }

    /// Opens a session this instance does not know, on `conn`. With a
    /// journal, a session it does not hold whose client released sns
    /// (acknowledged by some record) was lost with the journal's state:
    /// nothing here can vouch for `[0, base_sn)`.
    fn open(
        &mut self,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: &Hello,
        fresh: &Fresh,
        sink: &mut impl ServerHandler,
    ) -> Result<(), (RejectReason, u64)> {
        let (base_sn, next_sn, replay) = (hello.base_sn, hello.next_sn, hello.replay);
        let start = if replay { base_sn } else { next_sn };
        let Ok(tracker) = RecvTracker::try_new(start) else {
            return Err((RejectReason::BadHandshake, start));
        };
        self.created += 1;
        let lost_from = (self.config.journal && base_sn > 0).then_some(0);
        if lost_from.is_some() {
            self.stats.state_lost += base_sn;
            sink.event(ServerEvent::StateLost {
                session: id,
                range: 0..base_sn,
            });
        }
        let session = Session {
            epoch,
            token: hello.token,
            incarnation: mix64(self.config.instance ^ mix64(self.created)),
            window: fresh.agreed,
            conn: Some(conn),
            tracker,
            stream_unacked: 0,
            ack_due: None,
            last_active: fresh.now,
            delivered: 0,
            conn_seq: fresh.conn_seq,
            hello_next: next_sn,
            // Without replay, [base_sn, next_sn) is skipped unseen.
            given_up_from: (!replay && base_sn < next_sn).then_some(base_sn),
            lost_from,
            dirty: false,
        };
        if !self.make_room(sink) || self.sessions.insert(id, session).is_err() {
            return Err((RejectReason::SessionTableFull, self.max_sessions() as u64));
        }
        self.stats.opened += 1;
        Ok(())
    }

    /// Binds session `id` to `conn`, keeps it for the journal, and sends
    /// the `Welcome` for `hello`: whether the session was `known` and
    /// where the client resumes (`opened`), the agreed window, and the
    /// cumulative ack (a record younger than what its client saw
    /// acknowledged acks where its knowledge begins, below the base: the
    /// client names what lies between as lost state, once per
    /// incarnation).
    fn welcome(
        &mut self,
        conn: ConnId,
        id: u64,
        epoch: u32,
        hello: &Hello,
        (known, resume_from): (bool, u64),
        sink: &mut impl ServerHandler,
    ) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = Some(id);
            c.epoch = epoch;
        }
        // Kept before the Welcome leaves: a restarted instance knows the
        // token, the epoch and the incarnation this client now trusts.
        self.mark_dirty(id);
        self.recompute_handshake_due();
        let (cum, incarnation, lost_from) =
            self.sessions.get(&id).map_or((resume_from, 0, None), |s| {
                (s.tracker.cumulative(), s.incarnation, s.lost_from)
            });
        let cum = lost_from.filter(|&l| l < hello.base_sn).unwrap_or(cum);
        let agreed = u64::from(hello.window).min(self.window());
        let welcome = Body::Welcome {
            instance: self.config.instance,
            resume_from,
            incarnation,
            window: agreed as u32,
            known,
        };
        let msg = control(id, epoch, 0, cum, welcome);
        if self.push_reply(conn, Reply::Frame { msg }, sink) != Queued::Yes {
            return;
        }
        sink.event(ServerEvent::SessionOpened {
            session: id,
            epoch,
            conn,
            known,
            resume_from,
        });
    }

    /// The `seq` of connection `conn` (0 if it is not in the table).
    fn conn_seq(&self, conn: ConnId) -> u64 {
        self.conns.get(&conn).map_or(0, |c| c.seq)
    }

    /// One past the highest sn this instance knows session `id` sent: the
    /// most its tracker received or a `Hello` announced, or a tombstone's
    /// cumulative point.
    fn seen_upto(&self, id: u64) -> u64 {
        match (self.sessions.get(&id), self.tombs.get(&id)) {
            (Some(s), _) => s.tracker.top().max(s.hello_next),
            (None, Some(t)) => t.cum.max(t.hello_next),
            (None, None) => 0,
        }
    }

    /// Makes room for one more session: evicts an idle one if the table is
    /// at its limit. Returns `false` when none can go.
    fn make_room(&mut self, sink: &mut impl ServerHandler) -> bool {
        self.sessions.len() < self.max_sessions() || self.evict_one(sink)
    }

    pub(super) fn handle_bye(
        &mut self,
        now: Instant,
        conn: ConnId,
        id: u64,
        sink: &mut impl ServerHandler,
    ) {
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
            self.mark_dirty(id);
        }
        self.retire_conn(conn);
        sink.event(ServerEvent::Closed { session: id });
    }

    /// Keeps what a closed or evicted session leaves behind; the oldest
    /// tombstone goes when the table is full.
    fn bury(&mut self, id: u64, s: &Session<WORDS>, now: Instant, sink: &mut impl ServerHandler) {
        let tomb = Tomb {
            epoch: s.epoch,
            token: s.token,
            incarnation: s.incarnation,
            // Only sessions without holes are buried: every sn below the
            // cumulative point is done and none past it arrived.
            cum: s.tracker.cumulative(),
            given_up_from: s.given_up_from,
            conn_seq: s.conn_seq,
            hello_next: s.hello_next,
            lost_from: s.lost_from,
            at: now,
        };
        self.entomb(id, tomb, sink);
    }

    /// Puts `tomb` in the tombstone table; when it is full, the oldest
    /// tombstone goes to the journal and is forgotten here.
    pub(super) fn entomb(&mut self, id: u64, tomb: Tomb, sink: &mut impl ServerHandler) {
        if self.tombs.len() == TOMBS && !self.tombs.contains_key(&id) {
            let oldest = self
                .tombs
                .iter()
                .min_by_key(|(_, t)| t.at)
                .map(|(&id, _)| id);
            if let Some(oldest) = oldest {
                // Its latest state goes to the journal before it is
                // forgotten here: a later instance still knows it.
                self.journal_tomb(oldest, sink);
                if let Some(t) = self.tombs.remove(&oldest) {
                    self.forgotten_upto = self.forgotten_upto.max(t.conn_seq);
                }
                self.stats.tombs_forgotten += 1;
                sink.event(ServerEvent::Forgotten { session: oldest });
            }
        }
        // A free slot exists now, so this cannot fail.
        let _ = self.tombs.insert(id, tomb);
    }

    /// Evicts the idle session (no connection, no open holes) that was
    /// active longest ago, leaving a tombstone. A session with holes waits
    /// for its client's replay instead: evicting it would lose them.
    pub(super) fn evict_one(&mut self, sink: &mut impl ServerHandler) -> bool {
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
}
