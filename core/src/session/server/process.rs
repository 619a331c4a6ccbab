//! One data frame of a bound connection: the per-session decisions
//! (the tracker, delivery, acks, reads, probes) and the rejections.

use super::*;

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    /// One data frame of a connection bound to session `bound`.
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
                let msg = control(d.session, s.epoch, 0, ack, Body::Ack);
                self.mark_dirty(d.session);
                if self.push_reply(conn, Reply::Frame { msg }, sink) == Queued::Yes {
                    self.stats.acks += 1;
                }
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
                if self.config.journal {
                    self.dirty.mark(session, &mut s.dirty);
                }
                // Synchronous: returning is taking it, and only then can
                // the ack below cover it.
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
                    let msg = control(d.session, epoch, 0, ack, Body::Ack);
                    if self.push_reply(conn, Reply::Frame { msg }, sink) == Queued::Yes {
                        self.stats.acks += 1;
                    }
                } else if s.ack_due.is_none() {
                    let due = now + self.config.ack_delay;
                    s.ack_due = Some(due);
                    self.next_ack_due = Some(self.next_ack_due.map_or(due, |t| t.min(due)));
                }
            }
            RequestOp::Write | RequestOp::Read => {
                s.stream_unacked = 0;
                s.ack_due = None;
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
