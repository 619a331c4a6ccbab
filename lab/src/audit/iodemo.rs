//! The judge of an io_demo soak: unmodified io_demo clients against
//! `iomsg server --io-demo` instances SIGKILLed and restarted, judged
//! from files the processes wrote themselves: each client's own log and
//! each instance's audit log and records.
//!
//! Each server connection is linked to its client by the ids both sides
//! logged ([`link`]: the server's id for a tag connection, the client's
//! endpoint address and the time for an `-A` one), so clients may share
//! a host and an address. A client's sns form one chain (io_demo
//! draws a random u32 and adds one per operation; with one server the
//! sns on a connection are contiguous and the next connection continues
//! the chain), unwrapped from the smallest sn the server saw from it. The
//! client's own `disconnecting ... read X/Y write A/B` lines cut the
//! chain in order, skipping those with nothing sent: line k covers the
//! next Y+B sns. io_demo's counters restart at each performance report
//! too (`total min:.. total:T | read .. total:R | write .. total:W`,
//! printed once all it sent has completed), so a report cuts the chain as
//! a segment of R+W sns with none forgotten (N = 0). In each segment, `replied` are the sns some instance
//! answered (a record), `unanswered` those an instance received and never
//! answered (`iodemo_inflight`), `never_arrived` the rest; `certain` is
//! never_arrived and unanswered. io_demo's count N = (Y-X)+(B-A) must
//! satisfy |certain| <= N <= |certain| + |replied|.
//!
//! io_demo adds one to its sn even for a send that fails at once (its
//! endpoint already failed in UCX, before it noticed): such sns were
//! never sent. So a connection's first segment starts where its instance
//! saw its first sn when that is at most 64 ahead, and the sns between
//! are counted as skipped (a request lost at a connection's start would
//! instead push the chain out of step, and fail a later segment).
//!
//! The ops io_demo forgot are then named by this rule: every certain
//! sn, and the last N - |certain| replied sns in reply order. A FIFO lane
//! delivers a prefix of what was sent, so the replies io_demo never saw
//! are the last ones posted before the SIGKILL.
//!
//! The verdict fails on: a client exit code other than 0 or an error
//! line in its log; any `iodemo_gap`, `iodemo_dup`, `corrupt` or
//! `iodemo_bad` line; a connection that answered operations and that no
//! client's log names; an sn
//! answered twice; a count out of the bounds above (an sn no instance saw
//! outside any disconnect's forgotten set, a loss on a live connection,
//! is named there); an sn past the client's last disconnect line; a
//! client with no connection on an instance started after a kill.
//!
//! Memory grows with operations (32 bytes per answered operation): the
//! records are read whole, for runs of minutes.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

pub mod files;
pub mod link;

pub use files::{parse_client_log, read_servers, ClientLog, Disconnect, ServerFiles, ARRIVED};

/// The rule that names the operations io_demo forgot, for the report.
pub const NAMING_RULE: &str = "forgotten at a disconnect = every sn of its segment no instance \
    answered (never arrived, or received and not answered) plus the last N-|those| answered sns \
    in reply order (a FIFO lane delivers a prefix of what was sent: the replies posted just \
    before a SIGKILL are the ones lost)";

/// Sns named in a report row: at most this many, then a count.
pub const NAMED_SHOWN: usize = 20;

/// One io_demo client of the run.
#[derive(Clone, Debug)]
pub struct IoDemoClient {
    /// Its name: its log is `DIR/NAME.log`.
    pub name: String,
    /// The IP address its connections come from.
    pub peer_ip: String,
    /// Its exit code (None: killed by a signal, or never reaped).
    pub exit_code: Option<i32>,
}

/// One disconnect of a client, judged.
#[derive(Clone, Debug, Serialize)]
pub struct DisconnectRow {
    /// The client.
    pub client: String,
    /// Its index among the client's disconnect lines that sent something.
    pub index: usize,
    /// The instances its segment's connections were on.
    pub instances: Vec<String>,
    /// When (io_demo's time stamp, microseconds since the epoch).
    pub at_us: u64,
    /// io_demo's reason.
    pub reason: String,
    /// Operations sent on the connection (its segment's length).
    pub sent: u64,
    /// io_demo's count of what it forgot, N.
    pub forgotten: u64,
    /// Its read part.
    pub forgotten_reads: u64,
    /// Its write part.
    pub forgotten_writes: u64,
    /// Sns of the segment no instance saw.
    pub never_arrived: u64,
    /// Sns received and not answered.
    pub unanswered: u64,
    /// Sns answered.
    pub replied: u64,
    /// The forgotten sns named by [`NAMING_RULE`] (the first
    /// [`NAMED_SHOWN`]).
    pub named: Vec<u32>,
    /// How many were named.
    pub named_count: u64,
}

/// The totals of the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    /// Operations io_demo completed (X+A over every disconnect line).
    pub completed: u64,
    /// Operations io_demo forgot (N over every disconnect line).
    pub forgotten: u64,
    /// Operations named forgotten (must equal `forgotten`).
    pub named: u64,
    /// Operations answered, per instance.
    pub replied_per_instance: Vec<u64>,
    /// Connections opened.
    pub connections: u64,
    /// Late messages for no known connection.
    pub late_unknown: u64,
    /// Sns io_demo skipped between connections (counted up, never sent:
    /// a send that failed at once).
    pub skipped: u64,
    /// With strangers (the hostile fault): gap, dup, corrupt and bad lines
    /// of connections no client's log names, and of none.
    pub stranger_lines: u64,
    /// With strangers: operations answered on connections no client's log
    /// names.
    pub stranger_answers: u64,
}

/// The judge's report.
#[derive(Clone, Debug, Serialize)]
pub struct IoDemoJudged {
    /// How forgotten operations are named.
    pub rule: &'static str,
    /// Every disconnect that sent something.
    pub disconnects: Vec<DisconnectRow>,
    /// The totals.
    pub totals: Totals,
    /// Why the run fails (empty: it passes).
    pub failures: Vec<String>,
}

/// What one client's segment holds.
struct Segment<'a> {
    replied: Vec<&'a files::Replied>,
    unanswered: Vec<u32>,
    never_arrived: Vec<u32>,
}

/// Judges the run in `dir`: `instances` in the order they ran (kill k
/// ended instance k), `clients` with their addresses and exit codes.
///
/// # Errors
///
/// A file could not be read.
pub fn judge(
    dir: &Path,
    instances: &[String],
    clients: &[IoDemoClient],
    kills: u32,
    strangers: bool,
) -> Result<IoDemoJudged, String> {
    let server = read_servers(dir, instances)?;
    let mut out = IoDemoJudged {
        rule: NAMING_RULE,
        disconnects: Vec::new(),
        totals: Totals {
            replied_per_instance: server.replied_per_instance.clone(),
            connections: server.conns.len() as u64,
            late_unknown: server.late_unknown,
            ..Totals::default()
        },
        failures: Vec::new(),
    };
    let links = link::ServerLinks::read(dir, instances)?;
    let mut claimed: HashSet<u64> = HashSet::new();
    for c in clients {
        let path = dir.join(format!("{}.log", c.name));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}'s log in {}: {e}", c.name, dir.display()))?;
        let log = parse_client_log(&text);
        let mine = link::read_client_conns(&path)?;
        let resolved = links.resolve(&mine, &mut claimed);
        let conn_of: HashMap<u32, u64> = mine
            .iter()
            .zip(&resolved)
            .filter_map(|(c, k)| Some((c.number, (*k)?)))
            .collect();
        let conns: HashSet<u64> = conn_of.values().copied().collect();
        judge_exit(c, &log, &mut out.failures);
        judge_reconnects(&server, instances, c, &conns, kills, &mut out.failures);
        judge_chain(&server, instances, c, &log, (&conns, &conn_of), &mut out);
        judge_live_holes(&server, instances, c, &conns, &mut out.failures);
    }
    judge_lines(&server, &claimed, strangers, &mut out);
    if strangers {
        out.totals.stranger_answers = server
            .replied
            .iter()
            .filter(|r| !claimed.contains(&r.op.conn))
            .count() as u64;
    } else {
        judge_unclaimed(&server, instances, &claimed, &mut out.failures);
    }
    Ok(out)
}

/// A client must exit 0 with no error line.
fn judge_exit(c: &IoDemoClient, log: &ClientLog, failures: &mut Vec<String>) {
    match c.exit_code {
        Some(0) => {}
        Some(code) => failures.push(format!("{} exited with code {code}", c.name)),
        None => failures.push(format!("{} was killed or never exited", c.name)),
    }
    for e in &log.errors {
        failures.push(format!("{} logged an error: {e}", c.name));
    }
    if c.exit_code == Some(0) && log.exit_status.is_none() {
        failures.push(format!(
            "{}'s log has no `Client exit with status` line",
            c.name
        ));
    }
}

/// On one connection a FIFO lane delivers a prefix of what was sent: an
/// sn no instance saw below one that the same connection's instance saw
/// was lost on a live connection, whatever io_demo's counts say (a
/// request the server dropped stays in io_demo's window until a
/// disconnect forgets it with the rest).
fn judge_live_holes(
    server: &ServerFiles,
    instances: &[String],
    c: &IoDemoClient,
    conns: &HashSet<u64>,
    failures: &mut Vec<String>,
) {
    let mut seen: HashMap<u64, Vec<u32>> = HashMap::new();
    let replied = server.replied.iter().map(|r| r.op);
    for n in replied.chain(server.inflight.iter().copied()) {
        if conns.contains(&n.conn) {
            seen.entry(n.conn).or_default().push(n.sn);
        }
    }
    for (conn, sns) in seen {
        let Some(base) = chain_base(sns.iter().copied()) else {
            continue;
        };
        let mut offs: Vec<u64> = sns
            .iter()
            .map(|&s| u64::from(s.wrapping_sub(base)))
            .collect();
        offs.sort_unstable();
        offs.dedup();
        let top = offs.last().copied().unwrap_or(0);
        if top + 1 == offs.len() as u64 {
            continue;
        }
        let have: HashSet<u64> = offs.iter().copied().collect();
        let missing: Vec<u32> = (0..top)
            .filter(|o| !have.contains(o))
            .map(|o| base.wrapping_add(o as u32))
            .collect();
        let on = server
            .conns
            .get(&conn)
            .map_or("an instance", |x| instances[x.instance].as_str());
        failures.push(format!(
            "{}: {} sns never reached {on} on connection {conn:016x} although later ones did \
             (lost on a live connection): {:?}",
            c.name,
            missing.len(),
            shown(&missing)
        ));
    }
}

/// The instances' gap, dup, corrupt and bad lines fail the run; with
/// `strangers` (a hostile peer let loose), only those of connections some
/// client's log names: the others are the stranger's, counted.
fn judge_lines(
    server: &ServerFiles,
    claimed: &HashSet<u64>,
    strangers: bool,
    out: &mut IoDemoJudged,
) {
    let mut shown = 0u64;
    let mut more = server
        .failing_lines
        .saturating_sub(server.failures.len() as u64);
    for (conn, line) in &server.failures {
        if strangers && !conn.is_some_and(|c| claimed.contains(&c)) {
            out.totals.stranger_lines += 1;
        } else if shown < 100 {
            shown += 1;
            out.failures.push(line.clone());
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.failures.push(format!(
            "{more} more gap, dup, corrupt or bad lines in the instances' logs"
        ));
    }
}

/// Server connections that answered operations must be some client's.
fn judge_unclaimed(
    server: &ServerFiles,
    instances: &[String],
    claimed: &HashSet<u64>,
    failures: &mut Vec<String>,
) {
    let mut answered: HashMap<u64, u64> = HashMap::new();
    for r in &server.replied {
        *answered.entry(r.op.conn).or_default() += 1;
    }
    for (id, n) in answered {
        if !claimed.contains(&id) {
            let on = server
                .conns
                .get(&id)
                .map_or("an instance", |c| instances[c.instance].as_str());
            failures.push(format!(
                "{on}: connection {id:016x} answered {n} operations, and no client's log names it"
            ));
        }
    }
}

/// After kill k, the client must have opened a connection on instance k
/// (the one started after it; instance 0 is the first).
fn judge_reconnects(
    server: &ServerFiles,
    instances: &[String],
    c: &IoDemoClient,
    conns: &HashSet<u64>,
    kills: u32,
    failures: &mut Vec<String>,
) {
    let on: HashSet<usize> = conns
        .iter()
        .filter_map(|id| server.conns.get(id))
        .map(|x| x.instance)
        .collect();
    for k in 1..=kills as usize {
        if !on.contains(&k) {
            failures.push(format!(
                "{} never reconnected after kill {k}: no connection of its (from {}) on {}, the \
                 instance started after it",
                c.name,
                c.peer_ip,
                instances.get(k).map_or("(none started)", String::as_str),
            ));
        }
    }
}

/// The first `NAMED_SHOWN` of `v`.
fn shown(v: &[u32]) -> Vec<u32> {
    v.iter().take(NAMED_SHOWN).copied().collect()
}

/// Cuts the client's chain by its disconnect lines and checks each
/// segment's counts.
fn judge_chain(
    server: &ServerFiles,
    instances: &[String],
    c: &IoDemoClient,
    log: &ClientLog,
    (conns, conn_of): (&HashSet<u64>, &HashMap<u32, u64>),
    out: &mut IoDemoJudged,
) {
    let mut replied: HashMap<u32, &files::Replied> = HashMap::new();
    for r in server.replied.iter().filter(|r| conns.contains(&r.op.conn)) {
        if replied.insert(r.op.sn, r).is_some() {
            out.failures
                .push(format!("{}: sn {} answered twice", c.name, r.op.sn));
        }
    }
    let inflight: HashSet<u32> = server
        .inflight
        .iter()
        .filter(|n| conns.contains(&n.conn))
        .map(|n| n.sn)
        .collect();
    let Some(base) = chain_base(replied.keys().chain(inflight.iter()).copied()) else {
        if log.disconnects.iter().any(|d| d.sent() > 0) {
            out.failures.push(format!(
                "{}: sent operations and no instance saw one",
                c.name
            ));
        }
        return;
    };
    let mut start = 0u64;
    let mut index = 0;
    let segments: Vec<&Disconnect> = log.disconnects.iter().filter(|d| d.sent() > 0).collect();
    let owners = segment_conns(&segments, conn_of);
    let first_seen = first_seen_per_conn(server, conns, base);
    for (k, d) in segments.iter().enumerate() {
        // A connection's first segment starts where its instance saw its
        // first sn, if that is a little ahead: io_demo adds one to its sn
        // even when a send fails at once (an endpoint UCX already knows
        // failed), so sns it never sent sit between connections.
        let new_conn = k == 0 || owners[k] != owners[k - 1];
        if let (true, Some(first)) = (new_conn, owners[k].and_then(|o| first_seen.get(&o))) {
            if *first > start && *first - start <= MAX_SKIPPED {
                out.totals.skipped += *first - start;
                start = *first;
            }
        }
        let seg = segment(base, start, d.sent(), &replied, &inflight);
        let row = judge_segment(server, instances, c, index, d, &seg, &mut out.failures);
        out.totals.completed += d.read_done + d.write_done;
        out.totals.forgotten += d.forgotten();
        out.totals.named += row.named_count;
        if !d.performance {
            out.disconnects.push(row);
            index += 1;
        }
        start += d.sent();
    }
    let past: Vec<u32> = replied
        .keys()
        .chain(inflight.iter())
        .copied()
        .filter(|&sn| u64::from(sn.wrapping_sub(base)) >= start)
        .collect();
    if !past.is_empty() {
        out.failures.push(format!(
            "{}: {} sns seen by the server past the {} its disconnect lines cover (e.g. {:?})",
            c.name,
            past.len(),
            start,
            shown(&past)
        ));
    }
}

/// Sns io_demo may skip between two connections (a failed send per
/// operation it tried before it noticed the failure; at most its window).
const MAX_SKIPPED: u64 = 64;

/// Which server connection each segment belongs to: a disconnect line
/// names its own; a status report belongs to the connection of the next
/// disconnect line.
fn segment_conns(segments: &[&Disconnect], conn_of: &HashMap<u32, u64>) -> Vec<Option<u64>> {
    let mut owners = vec![None; segments.len()];
    let mut next: Option<u64> = None;
    for (k, d) in segments.iter().enumerate().rev() {
        if !d.performance {
            next = d.number.and_then(|n| conn_of.get(&n).copied());
        }
        owners[k] = next;
    }
    owners
}

/// The first sn (as an offset from `base`) each of `conns` saw.
fn first_seen_per_conn(server: &ServerFiles, conns: &HashSet<u64>, base: u32) -> HashMap<u64, u64> {
    let mut first: HashMap<u64, u64> = HashMap::new();
    let seen = server
        .replied
        .iter()
        .map(|r| r.op)
        .chain(server.inflight.iter().copied());
    for n in seen.filter(|n| conns.contains(&n.conn)) {
        let off = u64::from(n.sn.wrapping_sub(base));
        let e = first.entry(n.conn).or_insert(off);
        *e = (*e).min(off);
    }
    first
}

/// The chain's first sn: the smallest of `seen` in wrapping order.
fn chain_base(seen: impl Iterator<Item = u32> + Clone) -> Option<u32> {
    let r = seen.clone().next()?;
    let low = seen.map(|s| s.wrapping_sub(r) as i32).min()?;
    Some(r.wrapping_add(low as u32))
}

/// The sns `[base+start, base+start+len)` sorted into replied (in reply
/// order), unanswered and never arrived.
fn segment<'a>(
    base: u32,
    start: u64,
    len: u64,
    replied: &HashMap<u32, &'a files::Replied>,
    inflight: &HashSet<u32>,
) -> Segment<'a> {
    let mut seg = Segment {
        replied: Vec::new(),
        unanswered: Vec::new(),
        never_arrived: Vec::new(),
    };
    for off in start..start + len {
        let sn = base.wrapping_add(off as u32);
        if let Some(r) = replied.get(&sn) {
            seg.replied.push(r);
        } else if inflight.contains(&sn) {
            seg.unanswered.push(sn);
        } else {
            seg.never_arrived.push(sn);
        }
    }
    seg.replied.sort_by_key(|r| r.order);
    seg
}

/// Checks one segment against io_demo's count; names what it forgot.
fn judge_segment(
    server: &ServerFiles,
    instances: &[String],
    c: &IoDemoClient,
    index: usize,
    d: &Disconnect,
    seg: &Segment<'_>,
    failures: &mut Vec<String>,
) -> DisconnectRow {
    let n = d.forgotten();
    let certain = (seg.never_arrived.len() + seg.unanswered.len()) as u64;
    let replied = seg.replied.len() as u64;
    let what = format!(
        "{} {} (\"{}\" at {:.6}, read {}/{} write {}/{})",
        c.name,
        if d.performance {
            "segment".to_string()
        } else {
            format!("disconnect {index}")
        },
        d.reason,
        d.at_us as f64 / 1e6,
        d.read_done,
        d.read_sent,
        d.write_done,
        d.write_sent
    );
    if n < certain {
        failures.push(format!(
            "{what}: io_demo forgot {n} but {certain} sns of it were never answered; never seen \
             by any instance: {:?} ({} in all), received and not answered: {:?} ({} in all)",
            shown(&seg.never_arrived),
            seg.never_arrived.len(),
            shown(&seg.unanswered),
            seg.unanswered.len()
        ));
    } else if n > certain + replied {
        failures.push(format!(
            "{what}: io_demo forgot {n}, more than the {certain} never answered and {replied} \
             answered together"
        ));
    }
    let extra = n.saturating_sub(certain).min(replied) as usize;
    let mut named: Vec<u32> = seg.never_arrived.clone();
    named.extend(&seg.unanswered);
    named.extend(
        seg.replied[seg.replied.len() - extra..]
            .iter()
            .map(|r| r.op.sn),
    );
    let mut on: Vec<String> = seg
        .replied
        .iter()
        .filter_map(|r| server.conns.get(&r.op.conn))
        .map(|x| instances[x.instance].clone())
        .collect();
    on.dedup();
    DisconnectRow {
        client: c.name.clone(),
        index,
        instances: on,
        at_us: d.at_us,
        reason: d.reason.clone(),
        sent: d.sent(),
        forgotten: n,
        forgotten_reads: d.read_sent.saturating_sub(d.read_done),
        forgotten_writes: d.write_sent.saturating_sub(d.write_done),
        never_arrived: seg.never_arrived.len() as u64,
        unanswered: seg.unanswered.len() as u64,
        replied,
        named: shown(&named),
        named_count: named.len() as u64,
    }
}

/// The judge's report as a short text table.
pub fn table(j: &IoDemoJudged) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<10} {:>3} {:<22} {:>7} {:>6} {:>5} {:>5} {:>6} {:>6} {:>7}  named",
        "client", "#", "instance", "sent", "N", "read", "write", "never", "unans", "replied"
    );
    for r in &j.disconnects {
        let more = r.named_count.saturating_sub(r.named.len() as u64);
        let _ = writeln!(
            s,
            "  {:<10} {:>3} {:<22} {:>7} {:>6} {:>5} {:>5} {:>6} {:>6} {:>7}  {:?}{}",
            r.client,
            r.index,
            if r.instances.is_empty() {
                "-".to_string()
            } else {
                r.instances.join(",")
            },
            r.sent,
            r.forgotten,
            r.forgotten_reads,
            r.forgotten_writes,
            r.never_arrived,
            r.unanswered,
            r.replied,
            r.named,
            if more > 0 {
                format!(" +{more}")
            } else {
                String::new()
            }
        );
    }
    let t = &j.totals;
    let _ = writeln!(
        s,
        "  completed {}  forgotten {} (named {})  replied per instance {:?}  connections {}  \
         sns io_demo skipped (a send that failed at once) {}",
        t.completed, t.forgotten, t.named, t.replied_per_instance, t.connections, t.skipped
    );
    s
}

#[cfg(test)]
mod tests;
