//! The soak's ground truth: what each client submitted (its records) and
//! saw (its log), and what each server instance handed to its application
//! (its records) — files written by the processes themselves, apart from
//! the protocol's counters — and their reconciliation into the verdict.
//!
//! Memory is bounded whatever the run's length or rate: the records (24
//! bytes per message and side) are never held whole. They are read as
//! streams and put in (session, sn) order by an external merge sort
//! ([`sort`]: chunks of [`sort::CHUNK`] records, 32 MiB, sorted in memory
//! and spilled to scratch files in the audit directory, merged
//! [`sort::FAN_IN`] at a time through 64 KiB buffers), and [`reconcile`]
//! walks that order holding one message at a time. The logs are read line
//! by line. What stays in memory grows with events, not messages: per
//! session its ranges given up or announced and the times of its
//! disconnects and first acknowledgements, per instance its lost ranges
//! and pause ends, per client its acknowledgement samples (16 bytes each,
//! one every 250 ms in a soak: 230 KB per client and hour), and at most
//! 100 lost ranges named. [`once`] judges `--exactly-once` soaks, whose
//! sessions span several client processes, over the same sorted walk.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::path::Path;

use serde::Serialize;

pub mod iodemo;
pub mod once;
mod reconcile;
pub mod sort;

pub use reconcile::reconcile;

/// One line of a log: when, what, and the rest of its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Microseconds since the Unix epoch.
    pub at_us: u64,
    /// Its first word after the time.
    pub kind: String,
    /// The words after it.
    pub words: Vec<String>,
}

/// Log lines longer than this are skipped (the processes write far
/// shorter ones).
pub const MAX_LINE: usize = 64 * 1024;

/// Calls `f` with each line of a log file, read as a stream; a torn last
/// line is skipped, and so is any line past [`MAX_LINE`].
///
/// # Errors
///
/// The file could not be read.
pub fn each_line(path: &Path, mut f: impl FnMut(Line)) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut r = BufReader::new(File::open(path).map_err(fail)?);
    let mut buf = Vec::new();
    let mut skipping = false;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)
            .map_err(fail)?;
        let whole = buf.last() == Some(&b'\n');
        if n == 0 || (!whole && n < MAX_LINE) {
            return Ok(());
        }
        if std::mem::replace(&mut skipping, !whole) || !whole {
            continue;
        }
        if let Some(line) = parse_line(&String::from_utf8_lossy(&buf)) {
            f(line);
        }
    }
}

/// One line's time, kind and words.
fn parse_line(l: &str) -> Option<Line> {
    let mut w = l.split_whitespace();
    let at_us = w.next()?.parse().ok()?;
    let kind = w.next()?.to_string();
    Some(Line {
        at_us,
        kind,
        words: w.map(str::to_string).collect(),
    })
}

fn hex(w: Option<&String>) -> Option<u64> {
    u64::from_str_radix(w?, 16).ok()
}

fn num(w: Option<&String>) -> Option<u64> {
    w?.parse().ok()
}

/// What one client's files say about one of its sessions.
#[derive(Clone, Debug, Default)]
pub struct SessionTrail {
    /// The session id.
    pub session: u64,
    /// The client it belongs to (its index).
    pub client: usize,
    /// Messages in the client's records: sns `0..submitted`, each once,
    /// in order (read with [`Sns::Resumed`]: records in this file, from
    /// `first_sn`).
    pub submitted: u64,
    /// The lowest sn in this file's records (0 unless the session was
    /// resumed from an outbox).
    pub first_sn: u64,
    /// One past the highest sn in this file's records.
    pub end_sn: u64,
    /// The protocol's counts from the client's `done` line.
    pub done: Option<Done>,
    /// Every sn below this was acknowledged (the last seen).
    pub acked: u64,
    /// Sns given up at disconnects (replay off).
    pub not_replayed: Vec<Range<u64>>,
    /// Sns a restarted server may have processed: announced duplicates.
    pub announced: Vec<Range<u64>>,
    /// Sns acknowledged earlier whose delivery a server said it can no
    /// longer vouch for (its journal went back in time).
    pub state_lost: Vec<Range<u64>>,
    /// When connections were lost.
    pub disconnects_us: Vec<u64>,
    /// When the first acknowledgement on a new connection came.
    pub first_acks_us: Vec<u64>,
    /// Handshakes completed.
    pub established: u64,
    /// Reads answered with wrong bytes.
    pub reads_corrupt: u64,
    /// Why the session failed.
    pub failed: Option<String>,
}

/// A session's closing counts (the protocol's view).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Done {
    /// Submitted.
    pub submitted: u64,
    /// Acknowledged.
    pub acked: u64,
    /// Sent again after reconnects.
    pub replayed: u64,
    /// Given up.
    pub not_replayed: u64,
    /// Announced as possible duplicates.
    pub announced: u64,
}

/// One client's files.
#[derive(Clone, Debug, Default)]
pub struct ClientTrail {
    /// Its sessions.
    pub sessions: Vec<SessionTrail>,
    /// (time, acknowledged so far) samples.
    pub samples: Vec<(u64, u64)>,
    /// The soak killed this client (SIGKILL): its sessions have no
    /// `done` line, and what it submitted but never saw acknowledged may
    /// be missing.
    pub killed: bool,
}

/// `us` on a clock `offset_us` ahead of this one, read on this one.
fn unskew(us: u64, offset_us: i64) -> u64 {
    us.saturating_add_signed(offset_us.saturating_neg())
}

impl ClientTrail {
    /// Puts its times on this host's clock: its files were written on a
    /// host whose clock is `offset_us` ahead.
    pub fn unskew(&mut self, offset_us: i64) {
        for s in &mut self.samples {
            s.0 = unskew(s.0, offset_us);
        }
        for s in &mut self.sessions {
            for t in s.disconnects_us.iter_mut().chain(&mut s.first_acks_us) {
                *t = unskew(*t, offset_us);
            }
        }
    }
}

/// Which sns a client's records of a session may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sns {
    /// `0, 1, 2, ...`: each session is new with this process.
    FromZero,
    /// Any sns, in any order (a session resumed from an outbox: its
    /// unreleased messages submitted again, then new ones), and sessions
    /// the log may not have opened (the process was killed before its
    /// first log line reached the file).
    Resumed,
}

/// Reads client `index`'s files `dir/NAME.records` (checked and counted,
/// not kept) and `dir/NAME.log`; each session's sns run from 0.
///
/// # Errors
///
/// A file could not be read.
pub fn read_client(dir: &Path, name: &str, index: usize) -> Result<ClientTrail, String> {
    read_client_as(dir, name, index, Sns::FromZero)
}

/// Reads client `index`'s files `dir/NAME.records` (checked and counted,
/// not kept) and `dir/NAME.log`, its records' sns as `sns` says.
///
/// # Errors
///
/// A file could not be read, or (with [`Sns::FromZero`]) a record is not
/// the next sn of a session the log opened.
pub fn read_client_as(
    dir: &Path,
    name: &str,
    index: usize,
    sns: Sns,
) -> Result<ClientTrail, String> {
    let mut trail = ClientTrail::default();
    let mut by_id: HashMap<u64, usize> = HashMap::new();
    each_line(&dir.join(format!("{name}.log")), |l| {
        client_line(&mut trail, &mut by_id, index, &l);
    })?;
    // A client killed before its `done` line: its samples tell how far
    // its acknowledgements had come (one session: its own count).
    if let ([s], Some(&(_, most))) = (
        trail.sessions.as_mut_slice(),
        trail.samples.iter().max_by_key(|x| x.1),
    ) {
        s.acked = s.acked.max(most);
    }
    for r in sort::Records::open(&dir.join(format!("{name}.records")))? {
        let r = r?;
        let i = match (by_id.get(&r.session), sns) {
            (Some(&i), _) => i,
            (None, Sns::Resumed) => {
                by_id.insert(r.session, trail.sessions.len());
                trail.sessions.push(SessionTrail {
                    session: r.session,
                    client: index,
                    first_sn: r.sn,
                    ..SessionTrail::default()
                });
                trail.sessions.len() - 1
            }
            (None, Sns::FromZero) => {
                return Err(format!(
                    "{name}: a record of session {:016x}, which its log never opened",
                    r.session
                ))
            }
        };
        let s = &mut trail.sessions[i];
        if sns == Sns::FromZero && r.sn != s.submitted {
            return Err(format!(
                "{name}: session {:016x} recorded sn {} after {} others",
                r.session, r.sn, s.submitted
            ));
        }
        if s.submitted == 0 || r.sn < s.first_sn {
            s.first_sn = r.sn;
        }
        s.end_sn = s.end_sn.max(r.sn.saturating_add(1));
        s.submitted += 1;
    }
    Ok(trail)
}

/// Takes one line of a client's log into its trail.
fn client_line(trail: &mut ClientTrail, by_id: &mut HashMap<u64, usize>, index: usize, l: &Line) {
    {
        let session = hex(l.words.first());
        let find = |by_id: &HashMap<u64, usize>| session.and_then(|s| by_id.get(&s).copied());
        let range = || Some(num(l.words.get(1))?..num(l.words.get(2))?);
        match l.kind.as_str() {
            "session" => {
                if let Some(s) = session {
                    by_id.insert(s, trail.sessions.len());
                    trail.sessions.push(SessionTrail {
                        session: s,
                        client: index,
                        ..SessionTrail::default()
                    });
                }
            }
            "sample" => {
                if let Some(n) = num(l.words.first()) {
                    trail.samples.push((l.at_us, n));
                }
            }
            _ => {
                let Some(i) = find(by_id) else { return };
                let s = &mut trail.sessions[i];
                match l.kind.as_str() {
                    "established" => s.established += 1,
                    "first_ack" => {
                        s.first_acks_us.push(l.at_us);
                        s.acked = s.acked.max(num(l.words.get(1)).unwrap_or(0));
                    }
                    "disconnected" => s.disconnects_us.push(l.at_us),
                    "restarted" => s.announced.extend(range()),
                    "state_lost" => s.state_lost.extend(range()),
                    "not_replayed" => s.not_replayed.extend(range()),
                    "read_corrupt" => s.reads_corrupt += 1,
                    "failed" => s.failed = Some(l.words[1..].join(" ")),
                    "done" => {
                        let field = |name: &str| {
                            let at = l.words.iter().position(|w| w == name)?;
                            num(l.words.get(at + 1))
                        };
                        let d = Done {
                            submitted: field("submitted").unwrap_or(0),
                            acked: field("acked").unwrap_or(0),
                            replayed: field("replayed").unwrap_or(0),
                            not_replayed: field("not_replayed").unwrap_or(0),
                            announced: field("announced").unwrap_or(0),
                        };
                        s.acked = d.acked;
                        s.done = Some(d);
                    }
                    _ => {}
                }
            }
        }
    }
}

/// One server instance's files.
#[derive(Clone, Debug, Default)]
pub struct InstanceTrail {
    /// When it listened.
    pub listening_us: Option<u64>,
    /// When it was let go on after a pause (SIGCONT), as the soak noted.
    pub resumed_us: Vec<u64>,
    /// Sn ranges its protocol declared lost on live connections.
    pub lost_live: Vec<(u64, Range<u64>)>,
    /// Frames of older epochs discarded (the protocol's count).
    pub stale: u64,
    /// Duplicates discarded (the protocol's count).
    pub duplicates: u64,
    /// Writes whose bytes were not the pattern (`--validate`).
    pub corrupt: u64,
    /// Connections rejected.
    pub rejected: u64,
}

impl InstanceTrail {
    /// Puts its times on this host's clock: its files were written on a
    /// host whose clock is `offset_us` ahead.
    pub fn unskew(&mut self, offset_us: i64) {
        if let Some(t) = self.listening_us.as_mut() {
            *t = unskew(*t, offset_us);
        }
        for t in &mut self.resumed_us {
            *t = unskew(*t, offset_us);
        }
    }
}

/// Reads a server instance's log `dir/NAME.log` (its records are read by
/// [`sorted_records`]).
///
/// # Errors
///
/// A file could not be read.
pub fn read_instance(dir: &Path, name: &str) -> Result<InstanceTrail, String> {
    let mut t = InstanceTrail::default();
    each_line(&dir.join(format!("{name}.log")), |l| {
        match l.kind.as_str() {
            "listening" => t.listening_us = Some(l.at_us),
            "lost_live" => {
                if let (Some(s), Some(a), Some(b)) = (
                    hex(l.words.first()),
                    num(l.words.get(1)),
                    num(l.words.get(2)),
                ) {
                    t.lost_live.push((s, a..b));
                }
            }
            "stale" => t.stale += 1,
            "duplicate" => t.duplicates += 1,
            "corrupt" => t.corrupt += 1,
            "rejected" => t.rejected += 1,
            _ => {}
        }
    })?;
    Ok(t)
}

/// Every record of the clients' files `dir/NAME.records` (source 0) and
/// of the server instances' (instance k: source k + 1, in the order they
/// ran), in (session, sn, source) order, sorted with bounded memory (see
/// [`sort`]) in the scratch directory `dir/sort`.
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
    for name in clients {
        s.add_file(&dir.join(format!("{name}.records")), 0)?;
    }
    for (k, name) in instances.iter().enumerate() {
        let source = u32::try_from(k + 1).map_err(|_| "too many server instances".to_string())?;
        s.add_file(&dir.join(format!("{name}.records")), source)?;
    }
    s.finish()
}

/// Percentiles of the reconnect times, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Worst.
    pub max: f64,
    /// How many.
    pub count: usize,
}

impl Percentiles {
    /// Of `values` (any order).
    pub fn of(values: &[f64]) -> Percentiles {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            if v.is_empty() {
                0.0
            } else {
                v[((v.len() - 1) as f64 * q).round() as usize]
            }
        };
        Percentiles {
            p50: at(0.5),
            p99: at(0.99),
            max: v.last().copied().unwrap_or(0.0),
            count: v.len(),
        }
    }
}

/// Sns one reason covers: a session, a range, why.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Lost {
    /// The session (hex).
    pub session: String,
    /// First sn.
    pub from: u64,
    /// One past the last.
    pub to: u64,
    /// Why: `lost_in_flight` (given up at a disconnect, replay off),
    /// `lost_live` (the server declared it lost on a live connection),
    /// `unacknowledged` (still in flight when the client stopped), or
    /// `unexplained`.
    pub why: String,
}

/// What the audit finds, against the protocol's own counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AuditCounts {
    /// Distinct (session, sn) handed to a server application with the
    /// bytes the client submitted.
    pub processed_unique: u64,
    /// Submitted sns no server instance handed to its application.
    pub missing: u64,
    /// Missing sns nothing explains, acknowledged sns missing, and
    /// records of sns never submitted.
    pub unexplained: u64,
    /// Acknowledged sns no server instance has: the worst kind.
    pub acked_but_missing: u64,
    /// Sns handed over twice by one instance.
    pub duplicates_within_instance: u64,
    /// Sns handed over again by a later instance outside every announced
    /// range.
    pub unannounced_duplicates: u64,
    /// Records whose bytes differ from what the client submitted.
    pub hash_mismatches: u64,
    /// Missing sns of clients the soak killed that their files never
    /// showed acknowledged: allowed.
    pub unacknowledged_at_kill: u64,
    /// Sns a server handed over past the end of a killed client's
    /// records, within one window of it: the client sends a batch before
    /// its records of it reach the file, and the SIGKILL fell between.
    /// Allowed (their bytes cannot be checked).
    pub unrecorded_at_kill: u64,
    /// Every missing sn, by range, with its reason (at most 100 ranges).
    pub lost: Vec<Lost>,
}

/// The soak's reconciled figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Reconciled {
    /// Messages submitted (the clients' records).
    pub sent: u64,
    /// Messages the finished sessions' `done` lines say were submitted.
    pub protocol_sent: u64,
    /// Messages in the records of the finished sessions.
    pub sent_finished: u64,
    /// Sessions of clients the soak did not kill that have no `done`
    /// line: they never finished.
    pub unfinished_sessions: u64,
    /// Acknowledged (the clients' protocol; sns given up are not).
    pub acked: u64,
    /// Frames sent again after reconnects (the clients' protocol).
    pub replayed: u64,
    /// Extra deliveries by later server instances (the audit).
    pub duplicates_after_restart: u64,
    /// Sns announced as possible duplicates by restarts (the protocol).
    pub duplicates_announced: u64,
    /// Sns given up at disconnects and absent from every instance.
    pub lost_in_flight: u64,
    /// Sns given up by the clients' protocol (some may have arrived).
    pub not_replayed: u64,
    /// Sns the servers' protocol declared lost on live connections.
    pub lost_live: u64,
    /// Corrupt messages: bytes differing from the client's (audit), reads
    /// answered wrong, writes failing the pattern.
    pub corrupt: u64,
    /// Frames of older epochs the servers discarded.
    pub stale: u64,
    /// Connections the servers rejected.
    pub rejected: u64,
    /// Reconnections (handshakes after each session's first).
    pub reconnects: u64,
    /// From the later of a disconnect and the server listening again, to
    /// the first acknowledgement on the new connection.
    pub reconnect_ms: Percentiles,
    /// Sessions that failed.
    pub failed_sessions: u64,
    /// The audit's own findings.
    pub audit: AuditCounts,
}

/// How far past its records a killed client may have sent: its window
/// at most, which no endpoint's client passes ([`iomsg_endpoint::WINDOW`]).
pub const UNRECORDED_AT_KILL_MAX: u64 = iomsg_endpoint::WINDOW as u64;

/// Why a soak fails, one reason per line; empty when it passes.
///
/// Passing means: the protocol's counts equal the audit's (every sn the
/// clients submitted is in their records, every acknowledged sn was
/// handed to a server application with its bytes, every missing sn is one
/// the protocol gave up and said so), nothing was lost on a live
/// connection, nothing is corrupt, every duplicate was announced, no
/// session failed, every session finished, and with replay on nothing is
/// missing. A client the soak killed has no `done` line; what it
/// submitted and never saw acknowledged may be missing
/// (`unacknowledged_at_kill`), what it saw acknowledged may not.
pub fn failures(r: &Reconciled, replay: bool) -> Vec<String> {
    let mut why = Vec::new();
    let a = &r.audit;
    if r.protocol_sent != r.sent_finished {
        why.push(format!(
            "the clients say they submitted {}, their records hold {}",
            r.protocol_sent, r.sent_finished
        ));
    }
    if r.unfinished_sessions > 0 {
        why.push(format!(
            "{} sessions never finished (no `done` line, and the soak did not kill their client)",
            r.unfinished_sessions
        ));
    }
    let missing = a.missing - a.unacknowledged_at_kill.min(a.missing);
    if a.acked_but_missing > 0 {
        why.push(format!(
            "{} acknowledged sns were never processed",
            a.acked_but_missing
        ));
    }
    if a.unexplained > 0 {
        why.push(format!(
            "{} sns missing or recorded without explanation",
            a.unexplained
        ));
    }
    if replay && missing > 0 {
        why.push(format!("{missing} sns missing with replay on"));
    }
    if missing != r.lost_in_flight {
        why.push(format!(
            "{missing} sns missing, {} of them given up by the protocol",
            r.lost_in_flight
        ));
    }
    if r.lost_live > 0 {
        why.push(format!("{} sns lost on live connections", r.lost_live));
    }
    if r.corrupt > 0 {
        why.push(format!("{} corrupt messages", r.corrupt));
    }
    if a.unannounced_duplicates > 0 {
        why.push(format!(
            "{} duplicates no restart announced",
            a.unannounced_duplicates
        ));
    }
    if a.duplicates_within_instance > 0 {
        why.push(format!(
            "{} sns handed over twice by one server instance",
            a.duplicates_within_instance
        ));
    }
    if r.failed_sessions > 0 {
        why.push(format!("{} sessions failed", r.failed_sessions));
    }
    why
}

#[cfg(test)]
mod tests;
