//! The reconciliation: the clients' and the server instances' files
//! into the soak's figures, walking every record once in (session, sn,
//! source) order and holding one message at a time.

use std::collections::HashMap;
use std::ops::Range;

use super::sort::Tagged;
use super::{
    ClientTrail, InstanceTrail, Lost, Percentiles, Reconciled, SessionTrail, UNRECORDED_AT_KILL_MAX,
};

/// The most lost ranges the report names.
const LOST_NAMED: usize = 100;

/// Whether `sn` lies in one of `ranges`.
fn within(ranges: &[Range<u64>], sn: u64) -> bool {
    ranges.iter().any(|r| r.contains(&sn))
}

/// Reconciles the clients' and the server instances' files (instances in
/// the order they ran); `records` are every record of them in (session,
/// sn, source) order (`audit::sorted_records`).
///
/// # Errors
///
/// A record could not be read.
pub fn reconcile(
    clients: &[ClientTrail],
    instances: &[InstanceTrail],
    records: impl Iterator<Item = Result<Tagged, String>>,
) -> Result<Reconciled, String> {
    let mut r = Reconciled::default();
    let mut sessions: HashMap<u64, Session<'_>> = HashMap::new();
    for c in clients {
        for s in &c.sessions {
            let killed = c.killed && s.done.is_none();
            sessions.insert(s.session, Session { trail: s, killed });
        }
    }
    let lost_live = instance_figures(&mut r, instances);
    let mut walk = Walk {
        r: &mut r,
        sessions: &sessions,
        lost_live: &lost_live,
        group: None,
        lost: LostList::default(),
    };
    for t in records {
        walk.record(t?);
    }
    walk.end_group();
    let lost = walk.lost.finish();
    r.corrupt += r.audit.hash_mismatches;
    session_figures(&mut r, clients, instances);
    r.audit.lost = lost;
    Ok(r)
}

/// A session as the walk needs it.
struct Session<'a> {
    trail: &'a SessionTrail,
    /// Its client was killed by the soak before the session's `done` line.
    killed: bool,
}

/// The instances' own counts; returns their lost-live ranges by session.
pub(super) fn instance_figures(
    r: &mut Reconciled,
    instances: &[InstanceTrail],
) -> HashMap<u64, Vec<Range<u64>>> {
    let mut lost_live: HashMap<u64, Vec<Range<u64>>> = HashMap::new();
    for inst in instances {
        r.stale += inst.stale;
        r.rejected += inst.rejected;
        r.corrupt += inst.corrupt;
        for (s, range) in &inst.lost_live {
            r.lost_live += range.end - range.start;
            lost_live.entry(*s).or_default().push(range.clone());
        }
    }
    lost_live
}

/// One message's records seen so far.
struct Group {
    session: u64,
    sn: u64,
    /// The hash the client recorded.
    client: Option<u64>,
    /// The last instance that handed it over.
    last_source: Option<u32>,
    /// Instances that handed it over.
    count: u32,
}

/// The walk over the sorted records.
struct Walk<'a, 'r> {
    r: &'r mut Reconciled,
    sessions: &'a HashMap<u64, Session<'a>>,
    lost_live: &'a HashMap<u64, Vec<Range<u64>>>,
    group: Option<Group>,
    lost: LostList,
}

impl Walk<'_, '_> {
    fn record(&mut self, t: Tagged) {
        if self
            .group
            .as_ref()
            .is_none_or(|g| (g.session, g.sn) != (t.session, t.sn))
        {
            self.end_group();
            self.group = Some(Group {
                session: t.session,
                sn: t.sn,
                client: None,
                last_source: None,
                count: 0,
            });
        }
        let Some(g) = self.group.as_mut() else {
            return;
        };
        if t.source == 0 {
            g.client = Some(t.hash);
            return;
        }
        let a = &mut self.r.audit;
        let Some(session) = self.sessions.get(&t.session) else {
            a.unexplained += 1;
            return;
        };
        let Some(hash) = g.client else {
            // Past the client's records (they come first in the order).
            let recorded = session.trail.submitted;
            if session.killed && t.sn < recorded + UNRECORDED_AT_KILL_MAX {
                a.unrecorded_at_kill += 1;
            } else {
                a.unexplained += 1;
            }
            return;
        };
        if hash != t.hash {
            a.hash_mismatches += 1;
        }
        if g.last_source == Some(t.source) {
            a.duplicates_within_instance += 1;
            return;
        }
        g.last_source = Some(t.source);
        g.count += 1;
        if g.count > 1 {
            self.r.duplicates_after_restart += 1;
            if !within(&session.trail.announced, t.sn) {
                a.unannounced_duplicates += 1;
            }
        }
    }

    /// A message whose records are all seen: processed, or missing and
    /// why.
    fn end_group(&mut self) {
        let Some(g) = self.group.take() else {
            return;
        };
        let (Some(_), Some(session)) = (g.client, self.sessions.get(&g.session)) else {
            return;
        };
        let a = &mut self.r.audit;
        if g.count > 0 {
            a.processed_unique += 1;
            return;
        }
        a.missing += 1;
        let s = session.trail;
        let live = self
            .lost_live
            .get(&g.session)
            .map_or(&[][..], Vec::as_slice);
        // Given-up sns come first: the cumulative ack moves past them, so
        // `acked` covers them too.
        let why = if within(&s.not_replayed, g.sn) {
            self.r.lost_in_flight += 1;
            "lost_in_flight"
        } else if g.sn < s.acked {
            a.acked_but_missing += 1;
            a.unexplained += 1;
            "acknowledged but never processed"
        } else if within(live, g.sn) {
            "lost_live"
        } else if session.killed {
            a.unacknowledged_at_kill += 1;
            "unacknowledged_at_kill"
        } else if s.done.is_none() || s.failed.is_some() {
            "unacknowledged"
        } else {
            a.unexplained += 1;
            "unexplained"
        };
        self.lost.add(g.session, g.sn, why);
    }
}

/// The first [`LOST_NAMED`] lost ranges, built as the sorted walk finds
/// their sns.
#[derive(Default)]
struct LostList {
    kept: Vec<Lost>,
    /// The range being extended, and its session.
    open: Option<(u64, Lost)>,
}

impl LostList {
    fn add(&mut self, session: u64, sn: u64, why: &str) {
        if let Some((s, l)) = self.open.as_mut() {
            if *s == session && l.to == sn && l.why == why {
                l.to = sn + 1;
                return;
            }
        }
        self.close();
        self.open = Some((
            session,
            Lost {
                session: format!("{session:016x}"),
                from: sn,
                to: sn + 1,
                why: why.to_string(),
            },
        ));
    }

    fn close(&mut self) {
        if let Some((_, l)) = self.open.take() {
            if self.kept.len() < LOST_NAMED {
                self.kept.push(l);
            }
        }
    }

    fn finish(mut self) -> Vec<Lost> {
        self.close();
        self.kept
    }
}

/// The sessions' own figures: counts, acknowledgements, reconnect times.
pub(super) fn session_figures(
    r: &mut Reconciled,
    clients: &[ClientTrail],
    instances: &[InstanceTrail],
) {
    // When the server could take clients again: each instance's start
    // and each end of a pause.
    let listening: Vec<u64> = instances
        .iter()
        .flat_map(|i| {
            i.listening_us
                .into_iter()
                .chain(i.resumed_us.iter().copied())
        })
        .collect();
    let mut reconnect_ms = Vec::new();
    for c in clients {
        for s in &c.sessions {
            r.sent += s.submitted;
            match s.done {
                Some(d) => {
                    r.protocol_sent += d.submitted;
                    r.sent_finished += s.submitted;
                }
                None if !c.killed => r.unfinished_sessions += 1,
                None => {}
            }
            // The cumulative ack passes given-up sns without acknowledging
            // them.
            let given_up_below: u64 = s
                .not_replayed
                .iter()
                .map(|g| g.end.min(s.acked).saturating_sub(g.start))
                .sum();
            r.acked += s.acked - given_up_below.min(s.acked);
            r.reconnects += s.established.saturating_sub(1);
            r.corrupt += s.reads_corrupt;
            r.failed_sessions += u64::from(s.failed.is_some());
            r.duplicates_announced += s.announced.iter().map(|a| a.end - a.start).sum::<u64>();
            r.not_replayed += s.not_replayed.iter().map(|a| a.end - a.start).sum::<u64>();
            if let Some(d) = s.done {
                r.replayed += d.replayed;
            }
            // Each first ack after a disconnect: how long service was out
            // once the server could take it again (listened anew, or went
            // on after a pause).
            for &ack in &s.first_acks_us {
                let Some(&gone) = s.disconnects_us.iter().rev().find(|&&d| d <= ack) else {
                    continue;
                };
                let back = listening
                    .iter()
                    .copied()
                    .filter(|&l| l <= ack)
                    .max()
                    .unwrap_or(0);
                reconnect_ms.push((ack - gone.max(back)) as f64 / 1000.0);
            }
        }
    }
    r.reconnect_ms = Percentiles::of(&reconnect_ms);
}
