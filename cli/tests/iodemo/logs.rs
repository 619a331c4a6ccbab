//! Reading the two sides' files: io_demo's own log (its connections, what
//! each completed and left uncompleted) and the server's audit (its
//! connections, their records, and what each left in flight or took too
//! late).

use std::collections::HashMap;
use std::path::Path;

use iomsg_lab::audit::iodemo::ARRIVED;

/// One connection as io_demo's log tells it.
#[derive(Debug, Default, Clone)]
pub struct ClientConn {
    /// io_demo's connection number (`#N`).
    pub number: u64,
    /// When its endpoint was made (µs since the epoch).
    pub created_us: u64,
    /// The server's id for it ("Remote id is R"; tag API).
    pub remote_id: Option<u32>,
    /// Its endpoint's address ("created endpoint 0xP"; what `-A` puts in
    /// its io messages).
    pub endpoint: u64,
    /// Operations completed: its share of the periodic reports, plus what
    /// its disconnect line counts since the last one.
    pub completed: u64,
    /// Operations sent and not completed when it disconnected:
    /// `(Y - X) + (B - A)` of its `read X/Y write A/B` line.
    pub uncompleted: u64,
    /// Whether its disconnect line was seen.
    pub disconnected: bool,
}

/// io_demo's connections, in the order it made them.
pub fn client_conns(log: &str) -> Vec<ClientConn> {
    let mut conns: Vec<ClientConn> = Vec::new();
    // The connection the periodic reports count (io_demo here has one
    // server, so one connection at a time).
    let mut current: Option<usize> = None;
    for line in log.lines() {
        if let Some((n, ep)) = created(line) {
            conns.push(ClientConn {
                number: n,
                created_us: stamp(line),
                endpoint: ep,
                ..ClientConn::default()
            });
            current = Some(conns.len() - 1);
        } else if let Some((n, r)) = remote_id(line) {
            if let Some(c) = conns.iter_mut().rev().find(|c| c.number == n) {
                c.remote_id = Some(r);
            }
        } else if line.contains("[DEMO] total min:") {
            if let Some(i) = current {
                conns[i].completed += report_total(line);
            }
        } else if let Some((n, [x, y, a, b])) = disconnect(line) {
            if let Some(c) = conns.iter_mut().rev().find(|c| c.number == n) {
                c.completed += x + a;
                c.uncompleted += (y - x) + (b - a);
                c.disconnected = true;
            }
            current = None;
        }
    }
    conns
}

/// A line's `[SECONDS.MICROS]` stamp in µs.
fn stamp(line: &str) -> u64 {
    let s = line.trim_start_matches('[');
    let s = s.split(']').next().unwrap_or("");
    let (sec, us) = s.split_once('.').unwrap_or((s, "0"));
    let sec: u64 = sec.parse().unwrap_or(0);
    let us: u64 = format!("{us:0<6}")[..6].parse().unwrap_or(0);
    sec * 1_000_000 + us
}

/// The `#N` of a `[UCX-connection 0x…: #N …]` prefix.
fn number(line: &str) -> Option<u64> {
    let rest = &line[line.find("[UCX-connection ")?..];
    let rest = &rest[rest.find(": #")? + 3..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `created endpoint 0xP, connection id …`: (N, P).
fn created(line: &str) -> Option<(u64, u64)> {
    let at = line.find("] created endpoint 0x")?;
    let hex = line[at + 21..].split(',').next()?;
    Some((number(line)?, u64::from_str_radix(hex, 16).ok()?))
}

/// `Remote id is R…`: (N, R).
fn remote_id(line: &str) -> Option<(u64, u32)> {
    let at = line.find("] Remote id is ")?;
    let r = line[at + 15..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?;
    Some((number(line)?, r.parse().ok()?))
}

/// A periodic report's `total min:… max:… total:T`: T.
fn report_total(line: &str) -> u64 {
    line.split(" | ")
        .next()
        .and_then(|p| p.rsplit_once("total:"))
        .and_then(|(_, t)| t.trim().parse().ok())
        .unwrap_or(0)
}

/// `disconnecting [… #N …] read X/Y write A/B due to …`: (N, [X, Y, A, B]).
fn disconnect(line: &str) -> Option<(u64, [u64; 4])> {
    if !line.contains("[DEMO] disconnecting ") {
        return None;
    }
    let rest = &line[line.find("] read ")? + 7..];
    let (r, rest) = rest.split_once(" write ")?;
    let w = rest.split_whitespace().next()?;
    let pair = |s: &str| -> Option<(u64, u64)> {
        let (a, b) = s.split_once('/')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let ((x, y), (a, b)) = (pair(r)?, pair(w)?);
    Some((number(line)?, [x, y, a, b]))
}

/// One connection as a server's audit tells it.
#[derive(Debug, Default, Clone)]
pub struct ServerConn {
    /// Its key (CONN).
    pub conn: u64,
    /// When it showed its API (µs since the epoch).
    pub opened_us: u64,
    /// `tag`, `am` or `none`.
    pub api: String,
    /// Our id for it (OURS).
    pub ours: u32,
    /// The client's id for it (THEIRS).
    pub theirs: u64,
    /// Records: operations answered.
    pub records: u64,
    /// Records: requests taken (answered or not).
    pub taken: u64,
    /// `iodemo_inflight` lines: requests left unanswered as it closed.
    pub inflight: u64,
    /// `iodemo_late` lines naming it: requests taken after it closed.
    pub late: u64,
}

/// A server instance's audit: its connections, and the lines that say
/// something went wrong.
#[derive(Debug, Default)]
pub struct ServerAudit {
    /// Connections by key.
    pub conns: HashMap<u64, ServerConn>,
    /// Records naming a connection that has no `iodemo_open` line.
    pub stray_records: u64,
    /// `iodemo_gap`, `iodemo_dup`, `corrupt` and `iodemo_bad` lines.
    pub bad_lines: Vec<String>,
    /// Records: (CONN, op << 32 | sn) answered more than once.
    pub twice: Vec<(u64, u64)>,
}

/// Reads `NAME.log` and `NAME.records` in `dir`.
pub fn server_audit(dir: &Path, name: &str) -> ServerAudit {
    let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
    let records = std::fs::read(dir.join(format!("{name}.records"))).unwrap_or_default();
    let mut a = ServerAudit::default();
    for line in log.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let hex = |i: usize| w.get(i).and_then(|s| u64::from_str_radix(s, 16).ok());
        match w.get(1).copied() {
            Some("iodemo_open") if w.len() >= 7 => {
                let conn = hex(2).unwrap_or(0);
                a.conns.insert(
                    conn,
                    ServerConn {
                        conn,
                        opened_us: w[0].parse().unwrap_or(0),
                        api: w[4].to_string(),
                        ours: w[5].parse().unwrap_or(0),
                        theirs: hex(6).unwrap_or(0),
                        ..ServerConn::default()
                    },
                );
            }
            Some("iodemo_inflight") => {
                if let Some(c) = hex(2).and_then(|k| a.conns.get_mut(&k)) {
                    c.inflight += 1;
                }
            }
            Some("iodemo_late") => {
                if let Some(c) = hex(4).and_then(|k| a.conns.get_mut(&k)) {
                    c.late += 1;
                }
            }
            Some("iodemo_gap" | "iodemo_dup" | "corrupt" | "iodemo_bad") => {
                a.bad_lines.push(line.to_string());
            }
            _ => {}
        }
    }
    let mut seen = std::collections::HashSet::new();
    let mut taken = std::collections::HashSet::new();
    for c in records.chunks_exact(24) {
        let word = |i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
        let (conn, sn) = (word(0), word(1));
        // A request taken; every answer follows its request's.
        let arrival = sn >> 32 & ARRIVED != 0;
        let op_sn = sn & !(ARRIVED << 32);
        if arrival {
            if !taken.insert((conn, op_sn)) {
                a.bad_lines
                    .push(format!("{conn:016x} {op_sn:#x} taken twice"));
            }
        } else {
            if !seen.insert((conn, sn)) {
                a.twice.push((conn, sn));
            }
            if !taken.contains(&(conn, sn)) {
                a.bad_lines
                    .push(format!("{conn:016x} {sn:#x} answered and never taken"));
            }
        }
        match a.conns.get_mut(&conn) {
            Some(sc) if arrival => sc.taken += 1,
            Some(sc) => sc.records += 1,
            None => a.stray_records += 1,
        }
    }
    a
}

/// The io_demo connection a server connection served: by the server's
/// id for it (tag API), or by the endpoint address the `-A` client sent,
/// the latest such connection made before the server saw it (io_demo
/// reuses endpoint addresses).
pub fn link<'a>(s: &ServerConn, client: &'a [ClientConn]) -> Option<&'a ClientConn> {
    match s.api.as_str() {
        "tag" => client
            .iter()
            .find(|c| c.remote_id == Some(s.ours) && c.number == s.theirs),
        "am" => client
            .iter()
            .filter(|c| c.endpoint == s.theirs && c.created_us <= s.opened_us)
            .max_by_key(|c| c.created_us),
        _ => None,
    }
}
