//! One data frame of a bound connection: the per-session decisions
//! (the tracker, delivery, acks, reads, probes) and the rejections.

use super::*;

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    /// One data frame of a connection bound to session `bound`: checked
    /// against the session and its window, taken by the tracker (and
    /// handed to the handler once), then answered.
    pub(super) fn process(
        &mut self,
        now: Instant,
        conn: ConnId,
        bound: Option<u64>,
        d: Data<'_>,
        sink: &mut impl ServerHandler,
    ) {
        if bound != Some(d.session) {
            let expected = bound.unwrap_or(0);
            let mismatch = RejectReason::SessionMismatch;
            return self.reject(conn, d.session, d.epoch, mismatch, expected, sink);
        }
        // A frame of an older epoch, of a connection the session has left,
        // or of a session evicted while its connection stayed open: stale.
        let current = self
            .sessions
            .get_mut(&d.session)
            .filter(|s| d.epoch >= s.epoch && s.conn == Some(conn));
        let Some(s) = current else {
            self.stats.stale += 1;
            let (session, epoch, sn) = (d.session, d.epoch, d.sn);
            return sink.event(ServerEvent::Stale { session, epoch, sn });
        };
        if d.epoch > s.epoch {
            // Newer than the Hello that bound this connection: a client bug.
            let newer = u64::from(d.epoch);
            let reason = RejectReason::Unexpected;
            return self.reject(conn, d.session, d.epoch, reason, newer, sink);
        }
        s.last_active = now;
        // The agreed window counts from the cumulative ack, so a hole can
        // never slide out of the tracker while the client keeps to it.
        let limit = s.tracker.cumulative().saturating_add(s.window);
        let op = match d.kind {
            Kind::Probe => return self.probe(conn, &d, limit, sink),
            Kind::Request(op) => op,
        };
        let verdict = s.classify(d.sn, limit);
        if matches!(verdict, Arrival::TooFar { .. } | Arrival::OutOfRange { .. }) {
            return self.reject(conn, d.session, d.epoch, RejectReason::TooFar, d.sn, sink);
        }
        let dirty = self.config.journal.then_some(&mut self.dirty);
        take(s, &mut self.stats, dirty, conn, &d, verdict, sink);
        let plan = s.plan_reply(op, self.config.ack_every, || now + self.config.ack_delay);
        self.answer(conn, &d, op, plan, sink);
    }

    /// A probe: every sn below the probe's was sent on this connection
    /// (or resumed below it) and frames arrive in order, so the ones that
    /// did not come were lost on a live connection. Told, and answered
    /// with an `Ack` at once.
    fn probe(&mut self, conn: ConnId, d: &Data<'_>, limit: u64, sink: &mut impl ServerHandler) {
        let (session, epoch, sn) = (d.session, d.epoch, d.sn);
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        if sn > limit {
            return self.reject(conn, session, epoch, RejectReason::TooFar, sn, sink);
        }
        self.stats.probes += 1;
        let Ok(missing) = s.tracker.open_holes_to(sn) else {
            return self.reject(conn, session, epoch, RejectReason::TooFar, sn, sink);
        };
        if !missing.is_empty() {
            self.stats.live_gap_sns += missing.end - missing.start;
            sink.event(ServerEvent::LiveLoss {
                session,
                epoch,
                missing,
            });
        }
        let ack = s.tracker.cumulative();
        s.stream_unacked = 0;
        s.ack_due = None;
        let msg = control(session, s.epoch, 0, ack, Body::Ack);
        self.mark_dirty(session);
        if self.push_reply(conn, Reply::Frame { msg }, sink) == Queued::Yes {
            self.stats.acks += 1;
        }
    }

    /// Sends what `plan` says `d` gets: a completion per request, an `Ack`
    /// when a stream's cadence says so, or a timer for the next one.
    #[inline(always)]
    fn answer(
        &mut self,
        conn: ConnId,
        d: &Data<'_>,
        op: RequestOp,
        plan: Answer,
        sink: &mut impl ServerHandler,
    ) {
        match plan {
            Answer::Later(due) => {
                self.next_ack_due = Some(self.next_ack_due.map_or(due, |t| t.min(due)));
            }
            Answer::Nothing => {}
            Answer::Ack { epoch, ack } => {
                let msg = control(d.session, epoch, 0, ack, Body::Ack);
                if self.push_reply(conn, Reply::Frame { msg }, sink) == Queued::Yes {
                    self.stats.acks += 1;
                }
            }
            Answer::Completion { epoch, ack } => {
                let msg = IoMsg {
                    session: d.session,
                    epoch,
                    sn: d.sn,
                    ack,
                    // A read's data is checked end to end when the
                    // request was: the header CRC does not cover it.
                    validate: self.config.validate || (op == RequestOp::Read && d.validate),
                    stream: false,
                    body: Body::WriteComp,
                };
                let reply = if op == RequestOp::Read {
                    let mut request = [0; MAX_READ_REQUEST];
                    // At most MAX_READ_REQUEST bytes: checked on arrival.
                    let n = d.bytes.len().min(MAX_READ_REQUEST);
                    request[..n].copy_from_slice(&d.bytes[..n]);
                    Reply::ReadComp {
                        msg: IoMsg {
                            body: Body::ReadComp { data: &[] },
                            ..msg
                        },
                        len: d.read_len,
                        request,
                        request_len: n as u8,
                    }
                } else {
                    Reply::Frame { msg }
                };
                if self.push_reply(conn, reply, sink) == Queued::Yes {
                    self.stats.completions += 1;
                }
            }
        }
    }

    pub(super) fn reject(
        &mut self,
        conn: ConnId,
        session: u64,
        epoch: u32,
        reason: RejectReason,
        detail: u64,
        sink: &mut impl ServerHandler,
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
        match self.conns.get_mut(&conn) {
            Some(c) => {
                if c.out.replies.is_full() {
                    // The connection closes anyway: what it still held
                    // makes way for the reason why.
                    let n = c.out.replies.len();
                    c.out.replies.clear();
                    self.queued -= n;
                    self.stats.replies_discarded += n as u64;
                }
                let _ = self.push_reply(conn, Reply::Frame { msg }, sink);
                self.retire_conn(conn);
            }
            None => self.push_stray(conn, msg, sink),
        }
        sink.event(ServerEvent::Rejected {
            conn,
            reason,
            detail,
        });
    }
}

/// What a request gets back (see [`Session::plan_reply`]).
enum Answer {
    /// Its completion, carrying the cumulative ack.
    Completion {
        /// The session's epoch.
        epoch: u32,
        /// The cumulative ack.
        ack: u64,
    },
    /// A stream write that completes the cadence: an `Ack`.
    Ack {
        /// The session's epoch.
        epoch: u32,
        /// The cumulative ack.
        ack: u64,
    },
    /// A stream write whose `Ack` is now due at this instant.
    Later(Instant),
    /// A stream write whose `Ack` was already scheduled.
    Nothing,
}

/// Takes request `d` whose sn the tracker judged `verdict` (not too far):
/// a duplicate is counted and told; a new sn is committed (sns given up
/// to make room are told lost), its gap or filled gap told, and it is
/// handed to the handler — synchronously: returning is taking it, and
/// only then can an ack cover it.
#[inline(always)]
fn take<const WORDS: usize, const N: usize>(
    s: &mut Session<WORDS>,
    stats: &mut ServerStats,
    dirty: Option<&mut journal::Dirty<N>>,
    conn: ConnId,
    d: &Data<'_>,
    verdict: Arrival,
    sink: &mut impl ServerHandler,
) {
    let session = d.session;
    let Kind::Request(op) = d.kind else {
        return;
    };
    if verdict == Arrival::Duplicate {
        stats.duplicates += 1;
        return sink.event(ServerEvent::Duplicate { session, sn: d.sn });
    }
    s.tracker.commit(d.sn, |r: Range<u64>| {
        stats.lost_live += r.end - r.start;
        sink.event(ServerEvent::LostLive { session, range: r });
    });
    match verdict {
        Arrival::Gap { missing } => {
            stats.live_gap_sns += missing.end - missing.start;
            let epoch = d.epoch;
            sink.event(ServerEvent::LiveLoss {
                session,
                epoch,
                missing,
            });
        }
        Arrival::FillsGap => {
            stats.recovered += 1;
            sink.event(ServerEvent::Recovered { session, sn: d.sn });
        }
        _ => {}
    }
    stats.delivered += 1;
    s.delivered += 1;
    if let Some(dirty) = dirty {
        dirty.mark(session, &mut s.dirty);
    }
    sink.deliver(Delivery {
        session,
        epoch: d.epoch,
        conn,
        sn: d.sn,
        op,
        data: d.bytes,
        read_len: d.read_len,
    });
}

impl<const WORDS: usize> Session<WORDS> {
    /// What the tracker says of `sn` under the window's `limit`.
    #[inline(always)]
    fn classify(&self, sn: u64, limit: u64) -> Arrival {
        if sn >= limit && sn <= SN_MAX {
            Arrival::TooFar {
                sn,
                top: self.tracker.top(),
            }
        } else {
            self.tracker.check(sn)
        }
    }

    /// What a request of `op` gets back now: a completion per write or
    /// read; for stream writes an `Ack` every `ack_every`, else one due at
    /// `due()` unless one is already.
    #[inline(always)]
    fn plan_reply(
        &mut self,
        op: RequestOp,
        ack_every: u32,
        due: impl FnOnce() -> Instant,
    ) -> Answer {
        let (epoch, ack) = (self.epoch, self.tracker.cumulative());
        match op {
            RequestOp::StreamWrite => {
                self.stream_unacked += 1;
                if self.stream_unacked >= ack_every {
                    self.stream_unacked = 0;
                    self.ack_due = None;
                    Answer::Ack { epoch, ack }
                } else if self.ack_due.is_none() {
                    let due = due();
                    self.ack_due = Some(due);
                    Answer::Later(due)
                } else {
                    Answer::Nothing
                }
            }
            RequestOp::Write | RequestOp::Read => {
                self.stream_unacked = 0;
                self.ack_due = None;
                Answer::Completion { epoch, ack }
            }
        }
    }
}
