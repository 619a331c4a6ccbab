//! The exactly-once reconciliation (`iomsg soak --exactly-once`). A
//! session there spans several client processes, one generation after
//! another of a client slot, each resuming it from the slot's outbox; the
//! server instances share one journal. Every record of every file is
//! walked once in (session, sn, source) order, one message at a time:
//!
//! - the clients' records are taken together: an sn that several
//!   generations recorded with one hash is one message (a restarted
//!   client records again what it submits again); with two hashes it is
//!   a `hash_conflict`;
//! - an sn the server instances handed over more than once, twice by one
//!   instance or once each by several, is a `duplicate`;
//! - a submitted sn no instance handed over is `missing`;
//! - an sn below a later sn of its session that no file holds at all is
//!   a `gap`: sns are given in order from 0, so it was used and is gone;
//! - an instance's bytes differing from the client's are `corrupt`;
//! - an sn an instance handed over that no client recorded is
//!   `unexplained`: a client with an outbox writes its records before a
//!   poll can send what they name, and one restarted records again every
//!   message its outbox still holds, so no window is allowed past a
//!   killed generation's records.
//!
//! Every failure is counted, and the first [`NAMED`] ranges are named:
//! the session, the sn range, and the instances (or client files)
//! involved. Memory: one message's records at a time.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use serde::Serialize;

use super::reconcile::{instance_figures, session_figures};
use super::sort::{self, Tagged};
use super::{ClientTrail, InstanceTrail, Lost, Reconciled};

/// The most failure ranges named.
pub const NAMED: usize = 100;

/// The files' names, by source: client file `j` is source `j`, server
/// instance `k` is source `clients.len() + k`.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// The client processes' audit names, in the order they ran.
    pub clients: Vec<String>,
    /// The server instances' audit names, in the order they ran.
    pub instances: Vec<String>,
}

impl Names {
    fn is_client(&self, source: u32) -> bool {
        (source as usize) < self.clients.len()
    }

    fn of(&self, sources: &[u32]) -> Vec<String> {
        let c = self.clients.len();
        sources
            .iter()
            .map(|&s| {
                let s = s as usize;
                match s.checked_sub(c) {
                    None => self.clients[s].clone(),
                    Some(k) => self
                        .instances
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| format!("source-{s}")),
                }
            })
            .collect()
    }
}

/// Every record of the client files `dir/NAME.records` (client `j`:
/// source `j`) and of the server instances' (instance `k`: source
/// `clients.len() + k`), in (session, sn, source) order, sorted with
/// bounded memory (see [`sort`]) in the scratch directory `dir/sort`.
///
/// # Errors
///
/// A file could not be read, or the scratch files not written.
pub fn sorted_records(
    dir: &Path,
    clients: &[&str],
    instances: &[&str],
) -> Result<sort::Sorted, String> {
    let mut s = sort::Sorter::new(&dir.join("sort"), sort::CHUNK, sort::FAN_IN);
    for (j, name) in clients.iter().chain(instances).enumerate() {
        let source = u32::try_from(j).map_err(|_| "too many audit files".to_string())?;
        let path = dir.join(format!("{name}.records"));
        // A client killed while it made its audit files has none: it
        // recorded nothing (what a server took of it would show up as
        // unexplained, so nothing can hide there).
        if j < clients.len() && !path.exists() {
            continue;
        }
        s.add_file(&path, source)?;
    }
    s.finish()
}

/// One named failure: a range of one session's sns and who was involved.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Finding {
    /// `duplicate`, `missing`, `gap`, `hash_conflict`, `corrupt` or
    /// `unexplained`.
    pub what: &'static str,
    /// The session (hex).
    pub session: String,
    /// First sn.
    pub from: u64,
    /// One past the last.
    pub to: u64,
    /// The server instances that handed these sns over (an instance
    /// twice when it handed one over twice); for `corrupt`, those whose
    /// bytes differ.
    pub instances: Vec<String>,
    /// The client files that recorded them.
    pub clients: Vec<String>,
}

impl Finding {
    /// Where, and who: `session S sns A..B handed over by ... recorded
    /// by ...`.
    pub fn place(&self) -> String {
        let mut s = format!("session {} sns {}..{}", self.session, self.from, self.to);
        if !self.instances.is_empty() {
            s += &format!(" handed over by {}", self.instances.join(", "));
        }
        if !self.clients.is_empty() {
            s += &format!(" recorded by {}", self.clients.join(", "));
        }
        s
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.place())
    }
}

/// What the exactly-once walk finds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct OnceFigures {
    /// Distinct (session, sn) in the clients' records.
    pub submitted: u64,
    /// Distinct (session, sn) some server instance handed over
    /// (`unexplained` included).
    pub delivered: u64,
    /// Sns handed over more than once (by one instance or several).
    pub duplicates: u64,
    /// Handovers past each sn's first.
    pub extra_deliveries: u64,
    /// Submitted sns no server instance handed over.
    pub missing: u64,
    /// Sns below a later sn of their session that no file holds.
    pub gaps: u64,
    /// Sns the clients recorded with differing bytes.
    pub hash_conflicts: u64,
    /// Sns a server instance handed over with bytes differing from the
    /// client's.
    pub corrupt: u64,
    /// Client records repeating an earlier generation's (same session,
    /// sn and bytes): messages submitted again after a restart.
    pub repeated_client_records: u64,
    /// Sns handed over that no client recorded.
    pub unexplained: u64,
    /// Of the duplicates, those a client announced as possible repeats
    /// (`ServerRestarted`: a server lost the session's state).
    pub duplicates_announced: u64,
    /// Of the missing sns, those a client named as acknowledged by a
    /// server that then lost the state (`StateLost`: its journal went
    /// back in time).
    pub missing_named: u64,
    /// Sns the clients named as state lost (acknowledged, then a server's
    /// journal went back in time).
    pub state_lost: u64,
    /// The failures, by range (at most [`NAMED`]).
    pub findings: Vec<Finding>,
}

/// Reconciles the clients' files (every generation, in the order they
/// ran) and the server instances' (in the order they ran); `records` are
/// every record of them in (session, sn, source) order, sources as
/// [`Names`] says ([`sorted_records`]). Returns the soak's usual figures
/// (the sessions' counts merged over generations) and the exactly-once
/// figures.
///
/// # Errors
///
/// A record could not be read.
pub fn reconcile(
    clients: &[ClientTrail],
    names: &Names,
    instances: &[InstanceTrail],
    records: impl Iterator<Item = Result<Tagged, String>>,
) -> Result<(Reconciled, OnceFigures), String> {
    let mut walk = Walk {
        names,
        o: OnceFigures::default(),
        group: None,
        cursor: None,
        named: Named::default(),
        told: Told::of(clients),
    };
    walk.o.state_lost = walk.told.state_lost();
    for t in records {
        walk.record(t?);
    }
    walk.end_group();
    let mut o = walk.o;
    o.findings = walk.named.finish();
    let mut r = Reconciled::default();
    instance_figures(&mut r, instances);
    session_figures(&mut r, clients, instances);
    merge_figures(&mut r, clients, &o);
    Ok((r, o))
}

/// The usual figures over sessions that span generations: what was sent
/// and acknowledged counted once per session.
fn merge_figures(r: &mut Reconciled, clients: &[ClientTrail], o: &OnceFigures) {
    let mut acked: HashMap<u64, u64> = HashMap::new();
    for s in clients.iter().flat_map(|c| &c.sessions) {
        let a = acked.entry(s.session).or_default();
        *a = (*a).max(s.acked);
    }
    r.sent = o.submitted;
    r.acked = acked.values().sum();
    r.duplicates_after_restart = o.extra_deliveries;
    r.corrupt += o.corrupt;
    let a = &mut r.audit;
    a.processed_unique = o.delivered;
    a.missing = o.missing + o.gaps;
    a.unexplained = o.unexplained;
    a.hash_mismatches = o.corrupt;
    a.lost = o
        .findings
        .iter()
        .filter(|f| matches!(f.what, "missing" | "gap"))
        .map(|f| Lost {
            session: f.session.clone(),
            from: f.from,
            to: f.to,
            why: f.what.to_string(),
        })
        .collect();
}

/// One message's records seen so far.
struct Group {
    session: u64,
    sn: u64,
    /// The first hash a client recorded.
    hash: Option<u64>,
    /// The client files that recorded it.
    clients: Vec<u32>,
    /// Clients recorded differing hashes.
    conflict: bool,
    /// The instances that handed it over, once per handover.
    servers: Vec<u32>,
    /// Those whose bytes differ from the client's.
    corrupt: Vec<u32>,
}

/// Sns a session's clients announced as possible repeats, and those they
/// named as state lost.
type Ranges = (Vec<Range<u64>>, Vec<Range<u64>>);

/// What the clients told of each session: the sns they announced as
/// possible repeats and those they named as state lost, over every
/// generation.
#[derive(Default)]
struct Told {
    by_session: HashMap<u64, Ranges>,
}

impl Told {
    fn of(clients: &[ClientTrail]) -> Told {
        let mut t = Told::default();
        for s in clients.iter().flat_map(|c| &c.sessions) {
            let (announced, lost) = t.by_session.entry(s.session).or_default();
            announced.extend(s.announced.iter().cloned());
            lost.extend(s.state_lost.iter().cloned());
        }
        t
    }

    fn announced(&self, session: u64, sn: u64) -> bool {
        self.by_session
            .get(&session)
            .is_some_and(|(a, _)| a.iter().any(|r| r.contains(&sn)))
    }

    fn named_lost(&self, session: u64, sn: u64) -> bool {
        self.by_session
            .get(&session)
            .is_some_and(|(_, l)| l.iter().any(|r| r.contains(&sn)))
    }

    /// Sns named state lost, each once.
    fn state_lost(&self) -> u64 {
        self.by_session
            .values()
            .map(|(_, lost)| {
                let mut l = lost.clone();
                l.sort_by_key(|r| r.start);
                let (mut n, mut upto) = (0, 0);
                for r in l {
                    let from = r.start.max(upto);
                    n += r.end.saturating_sub(from);
                    upto = upto.max(r.end);
                }
                n
            })
            .sum()
    }
}

/// The walk over the sorted records.
struct Walk<'a> {
    names: &'a Names,
    o: OnceFigures,
    group: Option<Group>,
    /// The session walked, and the sn expected next in it.
    cursor: Option<(u64, u64)>,
    named: Named,
    told: Told,
}

impl Walk<'_> {
    fn record(&mut self, t: Tagged) {
        if self
            .group
            .as_ref()
            .is_none_or(|g| (g.session, g.sn) != (t.session, t.sn))
        {
            self.end_group();
            self.gap_before(t.session, t.sn);
            self.group = Some(Group {
                session: t.session,
                sn: t.sn,
                hash: None,
                clients: Vec::new(),
                conflict: false,
                servers: Vec::new(),
                corrupt: Vec::new(),
            });
        }
        let Some(g) = self.group.as_mut() else {
            return;
        };
        if self.names.is_client(t.source) {
            match g.hash {
                None => g.hash = Some(t.hash),
                Some(h) if h == t.hash => self.o.repeated_client_records += 1,
                Some(_) => g.conflict = true,
            }
            g.clients.push(t.source);
            return;
        }
        // Clients' records come first in the order: the hash is known.
        if g.hash.is_some_and(|h| h != t.hash) {
            g.corrupt.push(t.source);
        }
        g.servers.push(t.source);
    }

    /// Sns of `session` below `sn` that no file holds.
    fn gap_before(&mut self, session: u64, sn: u64) {
        let expected = match self.cursor {
            Some((s, next)) if s == session => next,
            _ => 0,
        };
        if sn > expected {
            self.o.gaps += sn - expected;
            self.named
                .add_range("gap", session, expected..sn, Vec::new(), Vec::new());
        }
        self.cursor = Some((session, sn.saturating_add(1)));
    }

    /// A message whose records are all seen: judged.
    fn end_group(&mut self) {
        let Some(g) = self.group.take() else {
            return;
        };
        let (o, names) = (&mut self.o, self.names);
        let recorded = g.hash.is_some();
        let handed = g.servers.len() as u64;
        o.submitted += u64::from(recorded);
        o.delivered += u64::from(handed > 0);
        let mut name = |what, instances: &[u32], clients: &[u32]| {
            self.named.add(
                what,
                g.session,
                g.sn,
                names.of(instances),
                names.of(clients),
            );
        };
        if g.conflict {
            o.hash_conflicts += 1;
            name("hash_conflict", &[], &g.clients);
        }
        if !g.corrupt.is_empty() {
            o.corrupt += 1;
            name("corrupt", &g.corrupt, &g.clients);
        }
        if handed > 1 {
            o.duplicates += 1;
            o.extra_deliveries += handed - 1;
            if self.told.announced(g.session, g.sn) {
                o.duplicates_announced += 1;
                name("duplicate_announced", &g.servers, &[]);
            } else {
                name("duplicate", &g.servers, &[]);
            }
        }
        if recorded && handed == 0 {
            o.missing += 1;
            if self.told.named_lost(g.session, g.sn) {
                o.missing_named += 1;
                name("missing_named", &[], &g.clients);
            } else {
                name("missing", &[], &g.clients);
            }
        }
        if !recorded && handed > 0 {
            o.unexplained += 1;
            name("unexplained", &g.servers, &[]);
        }
    }
}

/// The first [`NAMED`] failure ranges, built as the sorted walk finds
/// their sns: one range while the kind, the session and the files stay
/// the same and the sns follow on.
#[derive(Default)]
struct Named {
    kept: Vec<Finding>,
    open: Vec<(u64, Finding)>,
}

impl Named {
    fn add(
        &mut self,
        what: &'static str,
        session: u64,
        sn: u64,
        instances: Vec<String>,
        clients: Vec<String>,
    ) {
        self.add_range(what, session, sn..sn.saturating_add(1), instances, clients);
    }

    fn add_range(
        &mut self,
        what: &'static str,
        session: u64,
        sns: Range<u64>,
        instances: Vec<String>,
        clients: Vec<String>,
    ) {
        // One range open per kind: kinds interleave within a session.
        if let Some(at) = self.open.iter().position(|(_, f)| f.what == what) {
            let (s, f) = &mut self.open[at];
            if *s == session
                && f.to == sns.start
                && f.instances == instances
                && f.clients == clients
            {
                f.to = sns.end;
                return;
            }
            let (_, done) = self.open.swap_remove(at);
            self.keep(done);
        }
        if self.kept.len() + self.open.len() >= NAMED {
            return;
        }
        self.open.push((
            session,
            Finding {
                what,
                session: format!("{session:016x}"),
                from: sns.start,
                to: sns.end,
                instances,
                clients,
            },
        ));
    }

    fn keep(&mut self, f: Finding) {
        if self.kept.len() < NAMED {
            self.kept.push(f);
        }
    }

    fn finish(mut self) -> Vec<Finding> {
        for (_, f) in std::mem::take(&mut self.open) {
            self.keep(f);
        }
        self.kept
            .sort_by(|a, b| (&a.session, a.from, a.what).cmp(&(&b.session, b.from, b.what)));
        self.kept
    }
}

/// Why an exactly-once soak fails, one reason per line; empty when it
/// passes.
///
/// Passing means: something was submitted and handed over; every sn the
/// clients submitted was handed to a server application exactly once
/// over all the instances (no duplicate, none missing, no gap), with the
/// bytes the client submitted, and no generation recorded other bytes for
/// an sn an earlier one had; nothing was handed over that no client
/// recorded (but a killed generation's last window); nothing was lost on
/// a live connection or corrupt; no session failed; every session's last
/// generation finished.
///
/// With `journal_faults` (the soak damaged the journal between kills) a
/// duplicate a client announced and a missing sn a client named as state
/// lost are named outcomes, not failures: only unnamed ones fail.
/// Without, a client that named state lost is itself a failure (nothing
/// but a damaged journal may lose state).
pub fn failures(r: &Reconciled, o: &OnceFigures, journal_faults: bool) -> Vec<String> {
    let mut why = Vec::new();
    let named = |what: &str| -> String {
        let list: Vec<String> = o
            .findings
            .iter()
            .filter(|f| {
                // Strict, the named kinds fail with the unnamed ones.
                f.what == what
                    || (!journal_faults && f.what.strip_suffix("_announced") == Some(what))
                    || (!journal_faults && f.what.strip_suffix("_named") == Some(what))
            })
            .take(3)
            .map(Finding::place)
            .collect();
        if list.is_empty() {
            String::new()
        } else {
            format!(": {}", list.join("; "))
        }
    };
    if o.submitted == 0 || o.delivered == 0 {
        why.push(format!(
            "nothing to judge: {} sns submitted, {} handed over (did the clients connect?)",
            o.submitted, o.delivered
        ));
    }
    let (duplicates, missing) = if journal_faults {
        (
            o.duplicates - o.duplicates_announced,
            o.missing - o.missing_named,
        )
    } else {
        (o.duplicates, o.missing)
    };
    if !journal_faults && o.state_lost > 0 {
        why.push(format!(
            "{} acknowledged sns named state lost by the clients, with the journal undamaged",
            o.state_lost
        ));
    }
    let counts = [
        (duplicates, "duplicate", "sns handed over more than once"),
        (missing, "missing", "submitted sns never handed over"),
        (o.gaps, "gap", "sns used but in no record (gaps)"),
        (
            o.hash_conflicts,
            "hash_conflict",
            "sns recorded with differing bytes by the clients",
        ),
        (
            o.corrupt,
            "corrupt",
            "sns handed over with bytes other than the client's",
        ),
        (
            o.unexplained,
            "unexplained",
            "sns handed over that no client recorded",
        ),
    ];
    for (n, what, text) in counts {
        if n > 0 {
            why.push(format!("{n} {text}{}", named(what)));
        }
    }
    if r.lost_live > 0 {
        why.push(format!("{} sns lost on live connections", r.lost_live));
    }
    let other_corrupt = r.corrupt - o.corrupt.min(r.corrupt);
    if other_corrupt > 0 {
        why.push(format!(
            "{other_corrupt} corrupt reads or writes (the processes' own checks)"
        ));
    }
    if r.unfinished_sessions > 0 {
        why.push(format!(
            "{} sessions never finished (no `done` line, and the soak did not kill their client)",
            r.unfinished_sessions
        ));
    }
    if r.failed_sessions > 0 {
        why.push(format!("{} sessions failed", r.failed_sessions));
    }
    why
}

#[cfg(test)]
mod tests;
