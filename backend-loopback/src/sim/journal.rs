//! A server slot's journal as the simulated application keeps it, and the
//! restore property checked against it.
//!
//! The application takes each record the server hands over
//! ([`Journal::keep`]) and commits them at each flush, together with its
//! record of deliveries ([`Journal::commit`]); a crash loses what was not
//! committed ([`Journal::crashed`]). Of the committed records it keeps the
//! latest of each session: that is what it gives back, to the next
//! instance ([`Journal::given_back`], in the order written) and on a
//! `Hello` for a session the instance does not hold ([`Journal::recall`]).
//!
//! A journal can also lose its last commits ([`Journal::cut`]: a power
//! cut under a lazy sync, an older copy restored): it keeps its last
//! commits, each with what it replaced, so that it can go back to an
//! earlier commit point.
//!
//! The restore property ([`Journal::compare_restored`]): a new instance
//! answers every session's `Hello` as the dead instance would have. The
//! record it holds of each session (table and tombstones, as
//! `ServerCore::journal_all` lists them), or for a session it does not
//! hold what the journal's recall gives back, is byte for byte the
//! session's latest committed record ([`Invariant::RestoreDiffers`]).
//!
//! A [`RestoreDefect`] planted in the journal rewrites or chooses what it
//! gives back; the committed records themselves stay true, so the
//! property and the other invariants are judged against them.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use iomsg_core::session::JournalRecord;
use iomsg_core::wire::Crc32c;

use super::check::{Findings, Invariant};
use super::scenario::RestoreDefect;

/// Bytes of a journal record before its bitmap: 72 in a version 1
/// record, 80 in a version 2 one (it adds `lost_from`).
fn record_header(record: &[u8]) -> usize {
    if record.get(4) == Some(&1) {
        72
    } else {
        80
    }
}

/// A session's latest committed record, and when it was written.
#[derive(Clone, Debug)]
struct Kept {
    written: u64,
    record: Vec<u8>,
}

/// One record a commit made latest: what it replaced, to go back.
#[derive(Debug)]
struct Change {
    session: u64,
    before: Option<Kept>,
    /// It was also the session's first committed record.
    first: bool,
}

/// A server slot's journal; see the module documentation.
#[derive(Debug, Default)]
pub struct Journal {
    /// Handed over since the last commit.
    pending: Vec<Vec<u8>>,
    /// The latest committed record of each session.
    latest: HashMap<u64, Kept>,
    /// The first committed record of each session.
    first: HashMap<u64, Vec<u8>>,
    /// The last `depth` commits, oldest first.
    tail: VecDeque<Vec<Change>>,
    depth: usize,
    /// Records committed so far (the order they were written in).
    written: u64,
    /// Per session, the cumulative point its latest record had before a
    /// cut took it back.
    lost_points: HashMap<u64, u64>,
    defect: Option<RestoreDefect>,
}

/// The session id of a record (0 when it is too short to be one).
fn session_of(record: &[u8]) -> u64 {
    record
        .get(8..16)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The cumulative point of a record (0 when it is too short to be one).
fn cumulative_of(record: &[u8]) -> u64 {
    record
        .get(40..48)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl Journal {
    /// A journal that can go back up to `depth` commits ([`cut`](Self::cut)),
    /// giving records back through `defect` when one is planted.
    pub fn new(depth: usize, defect: Option<RestoreDefect>) -> Journal {
        Journal {
            depth,
            defect,
            ..Journal::default()
        }
    }

    /// A record handed over (`ServerHandler::journal`).
    pub fn keep(&mut self, record: &[u8]) {
        self.pending.push(record.to_vec());
    }

    /// The flush: what was handed over since the last one is committed,
    /// as one commit.
    pub fn commit(&mut self) {
        let mut changes = Vec::new();
        for record in self.pending.drain(..) {
            let session = session_of(&record);
            self.written += 1;
            let kept = Kept {
                written: self.written,
                record,
            };
            let first = !self.first.contains_key(&session);
            if first {
                self.first.insert(session, kept.record.clone());
            }
            let before = self.latest.insert(session, kept);
            if self.depth > 0 {
                changes.push(Change {
                    session,
                    before,
                    first,
                });
            }
        }
        if self.depth > 0 {
            if self.tail.len() == self.depth {
                self.tail.pop_front();
            }
            self.tail.push_back(changes);
        }
    }

    /// The server crashed: what was not committed is lost.
    pub fn crashed(&mut self) {
        self.pending.clear();
    }

    /// The journal loses its last `commits` commits (at most as many as it
    /// keeps to go back; with `synced_openings`, none from the last commit
    /// that holds a session's first record on, which was synced at once):
    /// each session's latest record is the one it had before them.
    /// Returns the commits lost.
    pub fn cut(&mut self, commits: usize, synced_openings: bool) -> usize {
        let mut n = 0;
        while n < commits {
            let synced = |c: &Vec<Change>| synced_openings && c.iter().any(|c| c.first);
            if self.tail.back().is_none_or(synced) {
                break;
            }
            let Some(changes) = self.tail.pop_back() else {
                break;
            };
            n += 1;
            for c in changes.into_iter().rev() {
                if let Some(lost) = self.latest.get(&c.session) {
                    let point = self.lost_points.entry(c.session).or_default();
                    *point = (*point).max(cumulative_of(&lost.record));
                }
                match c.before {
                    Some(kept) => {
                        self.latest.insert(c.session, kept);
                    }
                    None => {
                        self.latest.remove(&c.session);
                    }
                }
                if c.first {
                    self.first.remove(&c.session);
                }
            }
        }
        n
    }

    /// Commits it can still go back over.
    pub fn commits_kept(&self) -> usize {
        self.tail.len()
    }

    /// The latest committed record of `session`.
    pub fn latest(&self, session: u64) -> Option<&[u8]> {
        self.latest.get(&session).map(|k| k.record.as_slice())
    }

    /// Every session with a committed record, in the order their latest
    /// records were written.
    pub fn sessions(&self) -> Vec<u64> {
        let mut v: Vec<(u64, u64)> = self.latest.iter().map(|(&s, k)| (k.written, s)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, s)| s).collect()
    }

    /// What the application gives back for `session`: its latest
    /// committed record, through the planted defect.
    pub fn given_back(&self, session: u64) -> Option<Cow<'_, [u8]>> {
        let latest = self.latest(session)?;
        let Some(defect) = self.defect else {
            return Some(Cow::Borrowed(latest));
        };
        Some(match defect {
            RestoreDefect::DropHoles | RestoreDefect::Torn => Cow::Owned(defect.apply(latest)),
            RestoreDefect::KeepOldest => {
                Cow::Borrowed(self.first.get(&session).map_or(latest, Vec::as_slice))
            }
            RestoreDefect::HideStateLoss => match self.lost_points.get(&session) {
                Some(&point) if point > cumulative_of(latest) => {
                    Cow::Owned(raise_cumulative(latest, point))
                }
                _ => Cow::Borrowed(latest),
            },
        })
    }

    /// `ServerHandler::recall`: the latest record of `session` the
    /// application has (one handed over since the last commit, or the
    /// committed one given back), written into `out`; its length (longer
    /// than `out` when it does not fit: the server refuses it).
    pub fn recall(&self, session: u64, out: &mut [u8]) -> Option<usize> {
        let pending = self
            .pending
            .iter()
            .rev()
            .find(|r| session_of(r) == session)
            .map(|r| Cow::Borrowed(r.as_slice()));
        let record = pending.or_else(|| self.given_back(session))?;
        if let Some(dst) = out.get_mut(..record.len()) {
            dst.copy_from_slice(&record);
        }
        Some(record.len())
    }

    /// The restore property (see the module documentation): `held` is
    /// every record new instance `generation` holds (`journal_all`), right
    /// after its restore from this journal. Each difference is a
    /// violation in `findings`; returns the sessions compared.
    pub fn compare_restored(
        &self,
        generation: u32,
        held: &[Vec<u8>],
        findings: &mut Findings,
    ) -> u64 {
        let mut held_by: HashMap<u64, &[u8]> = HashMap::new();
        for r in held {
            held_by.insert(session_of(r), r);
        }
        let mut compared = 0;
        for session in self.sessions() {
            let Some(dead) = self.latest(session) else {
                continue;
            };
            compared += 1;
            let (answer, how) = match held_by.remove(&session) {
                Some(r) => (Some(Cow::Borrowed(r)), "holds it with"),
                None => (
                    self.given_back(session),
                    "does not hold it, and recall gives back",
                ),
            };
            let Some(answer) = answer else {
                findings.add(Invariant::RestoreDiffers, None, session, None, || {
                    format!("instance {generation} does not hold it, and recall gives nothing back")
                });
                continue;
            };
            if *answer == *dead {
                continue;
            }
            let what = differences(&answer, dead);
            findings.add(Invariant::RestoreDiffers, None, session, None, || {
                format!(
                    "instance {generation} {how} {}; the dead instance's last committed record has {}",
                    what.0, what.1
                )
            });
        }
        let mut strays: Vec<u64> = held_by.into_keys().collect();
        strays.sort_unstable();
        for session in strays {
            findings.add(Invariant::RestoreDiffers, None, session, None, || {
                format!("instance {generation} holds a session no committed record names")
            });
        }
        compared
    }
}

/// How record `a` differs from record `b`: the fields that differ, as
/// each has them.
fn differences(a: &[u8], b: &[u8]) -> (String, String) {
    let crc = Crc32c::BUILTIN;
    let (ra, rb) = match (
        JournalRecord::decode(a, &crc),
        JournalRecord::decode(b, &crc),
    ) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(e), _) => {
            return (
                format!("a record that does not read ({e})"),
                "one that does".into(),
            )
        }
        (_, Err(e)) => {
            return (
                "a record that reads".into(),
                format!("one that does not ({e})"),
            )
        }
    };
    let fields = |r: &JournalRecord<'_>| {
        [
            ("cumulative point", r.cumulative.to_string()),
            ("top", r.top.to_string()),
            ("holes", holes(r)),
            ("epoch", r.epoch.to_string()),
            ("incarnation", format!("{:#x}", r.incarnation)),
            ("token", format!("{:#x}", r.token)),
            ("announced", r.announced.to_string()),
            (
                "given up from",
                r.given_up_from.map_or("none".into(), |g| g.to_string()),
            ),
        ]
    };
    let (fa, fb) = (fields(&ra), fields(&rb));
    let (mut da, mut db) = (Vec::new(), Vec::new());
    for ((name, va), (_, vb)) in fa.iter().zip(&fb) {
        if va != vb {
            da.push(format!("{name} {va}"));
            db.push(format!("{name} {vb}"));
        }
    }
    if da.is_empty() {
        return ("other bytes".into(), "the same fields".into());
    }
    (da.join(", "), db.join(", "))
}

/// A record's open holes: `none`, or `[a..b, c..d]` (the first 8).
fn holes(r: &JournalRecord<'_>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut sn = r.cumulative;
    while sn < r.top && out.len() < 8 {
        if r.received(sn) {
            sn += 1;
            continue;
        }
        let start = sn;
        while sn < r.top && !r.received(sn) {
            sn += 1;
        }
        out.push(format!("{start}..{sn}"));
    }
    if out.is_empty() {
        "none".into()
    } else {
        format!("[{}]", out.join(", "))
    }
}

impl RestoreDefect {
    /// `record` with the defect planted, its checksum recomputed (from the
    /// documented layout; a record too short to be one is left alone).
    /// [`KeepOldest`](RestoreDefect::KeepOldest) and
    /// [`HideStateLoss`](RestoreDefect::HideStateLoss) choose or rewrite
    /// from the journal's history ([`Journal::given_back`]): one record
    /// alone is left as it is.
    pub fn apply(self, record: &[u8]) -> Vec<u8> {
        match self {
            RestoreDefect::DropHoles => drop_holes(record),
            RestoreDefect::Torn => record[..record.len().saturating_sub(1)].to_vec(),
            RestoreDefect::KeepOldest | RestoreDefect::HideStateLoss => record.to_vec(),
        }
    }
}

/// The record with every sn in `[cumulative, top)` received: its
/// cumulative point moved to its top, no bitmap.
fn drop_holes(record: &[u8]) -> Vec<u8> {
    let top = record
        .get(48..56)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes);
    raise_cumulative(record, top)
}

/// The record with every sn below `point` done: its cumulative point
/// raised to `point` (and past the sns received right after it), its top
/// at least that, the bitmap of what is left, checksum recomputed. A
/// record too short to be one, or already at or past `point`, is left
/// alone.
pub fn raise_cumulative(record: &[u8], point: u64) -> Vec<u8> {
    let Ok(r) = JournalRecord::decode(record, &Crc32c::BUILTIN) else {
        return record.to_vec();
    };
    if r.cumulative >= point {
        return record.to_vec();
    }
    let mut cum = point.max(r.cumulative);
    while cum < r.top && r.received(cum) {
        cum += 1;
    }
    let top = r.top.max(cum);
    let span = top - cum;
    let words = span.div_ceil(64) as usize;
    let mut out = record[..record_header(record)].to_vec();
    out[6..8].copy_from_slice(&(words as u16).to_le_bytes());
    out[40..48].copy_from_slice(&cum.to_le_bytes());
    out[48..56].copy_from_slice(&top.to_le_bytes());
    for w in 0..words {
        let mut word = 0u64;
        for i in 0..64u64 {
            let sn = cum + 64 * w as u64 + i;
            if sn < top && r.received(sn) {
                word |= 1 << i;
            }
        }
        out.extend_from_slice(&word.to_le_bytes());
    }
    let sum = Crc32c::BUILTIN.checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}
