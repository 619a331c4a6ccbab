//! The verdict: every client's records compared, sn by sn.

use super::super::check::Invariant;
use std::collections::BTreeMap;

use crate::sim::loss::SessionLoss;

use super::super::report::{LossClass, LostRange};
use super::reads;
use super::*;

impl Truth {
    /// Compares the records and returns the verdict, with the counts the
    /// report shows.
    pub fn verdict(&self) -> Verdict {
        let mut v = Verdict {
            findings: self.findings.clone(),
            carried_frames: self.carried_frames,
            unparsable: self.unparsable,
            deliveries_by_stray: self.deliveries_by_stray,
            ..Verdict::default()
        };
        for (i, c) in self.clients.iter().enumerate() {
            self.judge_client(i, c, &mut v);
        }
        v
    }

    fn judge_client(&self, i: usize, c: &ClientTruth, v: &mut Verdict) {
        Self::tally_client(c, v);
        self.check_client_events(i, c, v);
        let session = c.spec.session;
        let mut run: Option<LostRange> = None;
        for sn in 0..c.submitted {
            let Some((class, reported)) = Self::judge_sn(i, c, sn, v) else {
                if let Some(r) = run.take() {
                    v.push_lost(r);
                }
                continue;
            };
            match &mut run {
                Some(r) if r.class == class && r.reported == reported && r.range.end == sn => {
                    r.range.end += 1;
                }
                _ => {
                    if let Some(r) = run.take() {
                        v.push_lost(r);
                    }
                    run = Some(LostRange {
                        client: i,
                        session,
                        range: sn..sn + 1,
                        class,
                        reported,
                    });
                }
            }
        }
        if let Some(r) = run.take() {
            v.push_lost(r);
        }
    }

    /// A client's counts, as they are.
    fn tally_client(c: &ClientTruth, v: &mut Verdict) {
        v.submitted += c.submitted;
        v.handshakes += c.handshakes;
        v.reconnects += c.handshakes.saturating_sub(1);
        v.given_up += c.given_up;
        v.corrupt += c.corrupt;
        let dropped: u64 = c
            .counted
            .iter()
            .zip(c.seen)
            .map(|(&counted, seen)| counted.saturating_sub(seen))
            .sum();
        v.events_dropped += dropped;
        v.failed_clients += u64::from(c.failed);
    }

    /// The client's events against what it counted and released, and
    /// whether a rollback locked it out.
    fn check_client_events(&self, i: usize, c: &ClientTruth, v: &mut Verdict) {
        let session = c.spec.session;
        if c.final_base.is_some() && c.seen != c.counted {
            v.findings
                .add(Invariant::ClientEventsLost, Some(i), session, None, || {
                    format!(
                        "Connecting/Established/Disconnected events seen {:?}, \
                         the client counted {:?}",
                        c.seen, c.counted
                    )
                });
        }
        v.state_lost += c.state_lost;
        if let Some((reason, detail, n)) = c.refused.filter(|_| self.rollback && !c.closed) {
            v.findings
                .add(Invariant::LockedOut, Some(i), session, None, || {
                    format!(
                        "its last {n} connection attempts were refused ({}, detail {detail}) \
                         and it never got back in",
                        reason.name()
                    )
                });
        }
        if let Some(base) = c.final_base {
            // Everything below the final base_sn was released: by an ack
            // or given up, as some event said.
            for sn in c.acked_upto..base {
                if c.flags(sn) & GIVEN_UP == 0 {
                    v.findings.add(
                        Invariant::ClientEventsLost,
                        Some(i),
                        session,
                        Some(sn),
                        || "released by the client, but no event acknowledged or gave it up".into(),
                    );
                }
            }
        }
    }

    /// Sn `sn` of client `i`: its counts and findings; the loss class it
    /// was lost in (by the truth) and the one reported, if it was lost
    /// (`None`: delivered, pending, or named state lost).
    fn judge_sn(
        i: usize,
        c: &ClientTruth,
        sn: u64,
        v: &mut Verdict,
    ) -> Option<(LossClass, Option<LossClass>)> {
        let session = c.spec.session;
        let flags = c.flags(sn);
        let n = c.delivered(sn);
        reads::judge_read(i, c, sn, flags, v);
        if flags & CARRIED != 0 {
            v.carried_sns += 1;
        }
        if flags & LIVE_CLAIM != 0 {
            v.live_gap_sns += 1;
            if flags & RECOVERED != 0 {
                v.recovered += 1;
            }
        }
        let claimed_live = flags & (LIVE_CLAIM | LOST_LIVE_CLAIM | OPEN_HOLE) != 0;
        if flags & GIVEN_UP != 0 {
            if claimed_live {
                v.reported_live += 1;
            } else {
                v.reported_in_flight += 1;
            }
        }
        if sn < c.acked_upto && flags & GIVEN_UP == 0 {
            v.acknowledged += 1;
        }
        let truth_live = flags & (TRUTH_LIVE | TRUTH_TRAILING) != 0;
        if truth_live && flags & (LIVE_CLAIM | LOST_LIVE_CLAIM | OPEN_HOLE) == 0 {
            v.findings.add(Invariant::LiveLossUndetected, Some(i), session, Some(sn), || {
                if flags & TRUTH_LIVE != 0 {
                    "a later frame of its live connection reached the server, yet no server reported it as a live loss".into()
                } else {
                    "silently dropped with nothing behind it; the client timed the live connection out, and no server reported a live loss".into()
                }
            });
        }
        if n > 0 {
            v.delivered_unique += 1;
            v.deliveries += u64::from(n);
            v.duplicates += u64::from(n - 1);
            return None;
        }
        Self::judge_undelivered(i, c, sn, flags, v)
    }

    /// Sn `sn` of client `i`, never delivered from its frames: named
    /// state lost, pending, or lost; see [`judge_sn`](Self::judge_sn).
    fn judge_undelivered(
        i: usize,
        c: &ClientTruth,
        sn: u64,
        flags: u16,
        v: &mut Verdict,
    ) -> Option<(LossClass, Option<LossClass>)> {
        let session = c.spec.session;
        let truth_live = flags & (TRUTH_LIVE | TRUTH_TRAILING) != 0;
        let claimed_live = flags & (LIVE_CLAIM | LOST_LIVE_CLAIM | OPEN_HOLE) != 0;
        let acked = sn < c.acked_upto && flags & GIVEN_UP == 0;
        let given_up = flags & GIVEN_UP != 0;
        if acked && flags & (STATE_LOST | TAIL_LOST) != 0 {
            // Acknowledged, and delivered only in commits a journal
            // lost: the client must have named it, if it came back.
            if flags & STATE_LOST == 0 && flags & TAIL_DUE == 0 {
                v.state_lost_unreachable += 1;
            } else if flags & STATE_LOST == 0 {
                v.findings.add(
                    Invariant::StateLostUnnamed,
                    Some(i),
                    session,
                    Some(sn),
                    || "acknowledged, delivered only in commits its server's journal lost, never delivered again; the client was established again after the loss and never named it (StateLost)".into(),
                );
            }
            return None;
        }
        if !acked && !given_up && !c.failed {
            v.pending += 1;
            v.findings
                .add(Invariant::Pending, Some(i), session, Some(sn), || {
                    if flags & CARRIED != 0 {
                        "neither delivered nor reported lost when the run ended".into()
                    } else {
                        "never reached a server, and not reported lost when the run ended".into()
                    }
                });
            return None;
        }
        if !acked && !given_up {
            v.failed_reported += 1;
        }
        v.truth_lost += 1;
        let class = if truth_live {
            v.lost_live += 1;
            LossClass::LiveConnection
        } else {
            v.lost_in_flight += 1;
            LossClass::InFlightAtDisconnect
        };
        let reported = if given_up {
            Some(if claimed_live {
                LossClass::LiveConnection
            } else {
                LossClass::InFlightAtDisconnect
            })
        } else {
            None
        };
        if c.spec.replay && !(c.failed && !acked && !given_up) {
            v.findings.add(
                Invariant::LostWithReplay,
                Some(i),
                session,
                Some(sn),
                || {
                    if acked {
                        "replay on, never delivered: acknowledged".into()
                    } else {
                        "replay on, never delivered: given up".into()
                    }
                },
            );
        }
        if !c.spec.replay && given_up && reported != Some(class) {
            v.findings.add(
                Invariant::WrongLossClass,
                Some(i),
                session,
                Some(sn),
                || {
                    format!(
                        "reported as {}, the network lost it {}",
                        reported.map_or("nothing", LossClass::name),
                        class.name()
                    )
                },
            );
        }
        Some((class, reported))
    }
}

/// Most lost ranges a report names (all are counted).
pub const MAX_LISTED_LOST: usize = 10_000;

/// The truth's verdict and tallies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every violation.
    pub findings: Findings,
    /// Sns submitted.
    pub submitted: u64,
    /// Frames handed to server endpoints.
    pub carried_frames: u64,
    /// Of those, frames that did not parse.
    pub unparsable: u64,
    /// Sns the network carried to a server at least once.
    pub carried_sns: u64,
    /// Sns delivered at least once (from their client's own frames).
    pub delivered_unique: u64,
    /// Sns the clients released as acknowledged (not given up).
    pub acknowledged: u64,
    /// Deliveries, duplicates included.
    pub deliveries: u64,
    /// Deliveries beyond the first of each sn.
    pub duplicates: u64,
    /// Deliveries from a stray peer's frames.
    pub deliveries_by_stray: u64,
    /// Submitted sns never delivered and not pending.
    pub truth_lost: u64,
    /// Of those, lost by the network on a live connection.
    pub lost_live: u64,
    /// Of those, lost in flight at a disconnect.
    pub lost_in_flight: u64,
    /// Undelivered sns of clients that failed (and said so).
    pub failed_reported: u64,
    /// Submitted sns neither delivered nor reported lost.
    pub pending: u64,
    /// Sns the clients gave up (`NotReplayed`).
    pub given_up: u64,
    /// Of those, classed as live losses by the servers' claims.
    pub reported_live: u64,
    /// Of those, classed as in flight at a disconnect.
    pub reported_in_flight: u64,
    /// Sns claimed as live gaps.
    pub live_gap_sns: u64,
    /// Of those, delivered after the claim.
    pub recovered: u64,
    /// Handshakes completed.
    pub handshakes: u64,
    /// Handshakes after each client's first.
    pub reconnects: u64,
    /// Payloads the workload's checker found corrupt where no CRC covered
    /// them.
    pub corrupt: u64,
    /// Reads the clients submitted.
    pub reads: u64,
    /// Of those, reads whose data reached the client's application.
    pub reads_answered: u64,
    /// Client events dropped.
    pub events_dropped: u64,
    /// Clients that failed.
    pub failed_clients: u64,
    /// Sns the clients named lost with their server's state
    /// (`StateLost`).
    pub state_lost: u64,
    /// Acknowledged sns a journal lost after their client left (it was
    /// never established again): no instance could name them to it.
    pub state_lost_unreachable: u64,
    /// The lost sns, named (the first [`MAX_LISTED_LOST`] ranges).
    pub lost: Vec<LostRange>,
    /// All lost ranges, listed or not.
    pub lost_ranges: u64,
    /// Each session's losses as the ground truth classes them: every lost
    /// sn counted (the core's per-session report).
    pub sessions: BTreeMap<u64, SessionLoss>,
}

impl Verdict {
    fn push_lost(&mut self, r: LostRange) {
        self.sessions
            .entry(r.session)
            .or_default()
            .record(r.class, r.range.clone());
        self.lost_ranges += 1;
        if self.lost.len() < MAX_LISTED_LOST {
            self.lost.push(r);
        }
    }
}
