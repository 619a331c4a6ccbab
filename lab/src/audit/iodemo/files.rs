//! Reading the io_demo run's files: each io_demo client's own log (its
//! disconnect lines, how it ended) and each `iomsg server --io-demo`
//! instance's audit log and records.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::audit::each_line;
use crate::common::Record;
/// The kind bit of an `iomsg server --io-demo` record that says a
/// request was taken (not answered): the server writes it, the judge
/// reads it.
pub const ARRIVED: u64 = 2;

/// A line of an io_demo client's log that cuts its sn chain: a
/// `disconnecting` line (completed/sent per operation on the connection
/// since its counters were last reset, and why), or a performance report
/// (`total min:.. max:.. total:T | read .. total:R | write .. total:W`),
/// which io_demo prints once every operation sent has completed and after
/// which it resets its counters: R reads and W writes, none forgotten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disconnect {
    /// io_demo's own time stamp, microseconds since the epoch.
    pub at_us: u64,
    /// Reads completed on the connection.
    pub read_done: u64,
    /// Reads sent on it.
    pub read_sent: u64,
    /// Writes completed on it.
    pub write_done: u64,
    /// Writes sent on it.
    pub write_sent: u64,
    /// The reason io_demo gave.
    pub reason: String,
    /// A performance report, not a disconnect.
    pub performance: bool,
    /// io_demo's connection number (`#N`) of a disconnect.
    pub number: Option<u32>,
}

impl Disconnect {
    /// Operations sent on the connection: the sns it covers.
    pub fn sent(&self) -> u64 {
        self.read_sent + self.write_sent
    }

    /// Operations io_demo forgot at this disconnect (sent, not
    /// completed).
    pub fn forgotten(&self) -> u64 {
        self.read_sent.saturating_sub(self.read_done)
            + self.write_sent.saturating_sub(self.write_done)
    }
}

/// What an io_demo client's log says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientLog {
    /// Its disconnect lines and performance reports in order (repeats,
    /// "not disconnecting", left out).
    pub disconnects: Vec<Disconnect>,
    /// Its `Client exit with status '...'`, if it got there.
    pub exit_status: Option<String>,
    /// Lines that say it found an error (data corruption, sn mismatch,
    /// a failed assertion), at most 20.
    pub errors: Vec<String>,
}

/// The time stamp `[1796312682.084773]` that starts an io_demo line.
fn stamp_us(line: &str) -> Option<u64> {
    let inner = line.strip_prefix('[')?.split(']').next()?;
    let (s, us) = inner.split_once('.')?;
    Some(s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?)
}

/// `X/Y` after `key` in `s`.
fn pair_after(s: &str, key: &str) -> Option<(u64, u64)> {
    let rest = &s[s.find(key)? + key.len()..];
    let word = rest.split_whitespace().next()?;
    let (a, b) = word.split_once('/')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A `[DEMO] disconnecting ... read X/Y write A/B due to "R"` line.
pub fn parse_disconnect(line: &str) -> Option<Disconnect> {
    let at = line.find("[DEMO] disconnecting ")?;
    let rest = &line[at..];
    // The counts follow the connection's `[UCX-connection ...]` prefix.
    let after = &rest[rest.find("] read ")? + 1..];
    let (read_done, read_sent) = pair_after(after, " read ")?;
    let (write_done, write_sent) = pair_after(after, " write ")?;
    let reason = after
        .split_once(" due to \"")
        .and_then(|(_, r)| r.rsplit_once('"'))
        .map_or(String::new(), |(r, _)| r.to_string());
    Some(Disconnect {
        at_us: stamp_us(line).unwrap_or(0),
        read_done,
        read_sent,
        write_done,
        write_sent,
        reason,
        performance: false,
        number: rest
            .split('#')
            .nth(1)
            .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok()),
    })
}

/// `total:N` in `part`.
fn total_in(part: &str) -> Option<u64> {
    part.split_whitespace()
        .find_map(|w| w.strip_prefix("total:"))?
        .parse()
        .ok()
}

/// A `[DEMO] total min:.. max:.. total:T | read .. total:R | write ..
/// total:W | ...` performance report, as a cut with nothing forgotten.
pub fn parse_performance(line: &str) -> Option<Disconnect> {
    let at = line.find("[DEMO] total min:")?;
    let parts: Vec<&str> = line[at..].split(" | ").collect();
    let read = parts.iter().find(|p| p.starts_with("read "))?;
    let write = parts.iter().find(|p| p.starts_with("write "))?;
    let (r, w) = (total_in(read)?, total_in(write)?);
    Some(Disconnect {
        at_us: stamp_us(line).unwrap_or(0),
        read_done: r,
        read_sent: r,
        write_done: w,
        write_sent: w,
        reason: "performance report".into(),
        performance: true,
        number: None,
    })
}

/// Whether an io_demo line reports an error of its own: data corruption,
/// an sn mismatch, a failed assertion. UCX's own `UCX  ERROR` lines (a
/// refused connect while the server is down) are not.
fn is_error(line: &str) -> bool {
    line.contains("[DEMO] ERROR")
        || line.contains("data corruption")
        || line.contains("sn mismatch")
        || line.contains("Assertion")
}

/// Parses io_demo's output `text`.
pub fn parse_client_log(text: &str) -> ClientLog {
    let mut log = ClientLog::default();
    for line in text.lines() {
        if let Some(d) = parse_disconnect(line).or_else(|| parse_performance(line)) {
            log.disconnects.push(d);
        } else if let Some(i) = line.find("Client exit with status '") {
            let rest = &line[i + "Client exit with status '".len()..];
            log.exit_status = rest.split('\'').next().map(str::to_string);
        } else if is_error(line) && log.errors.len() < 20 {
            log.errors.push(line.to_string());
        }
    }
    log
}

/// A connection an instance accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    /// The instance's index.
    pub instance: usize,
    /// The peer's IP address.
    pub peer_ip: String,
}

/// An operation named by the server: its connection, read or write, sn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    /// The server's connection.
    pub conn: u64,
    /// A write (else a read).
    pub write: bool,
    /// io_demo's sn.
    pub sn: u32,
}

/// An answered operation, in the order the replies were posted
/// (`order`: instance index in the high bits, record index below).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replied {
    /// Where it stands in reply order over the run.
    pub order: u64,
    /// The operation.
    pub op: Named,
    /// Its data size.
    pub size: u64,
}

/// What every instance's audit files say.
#[derive(Clone, Debug, Default)]
pub struct ServerFiles {
    /// Connections by id.
    pub conns: HashMap<u64, Conn>,
    /// Connections in the order they were opened (per instance, then
    /// instance order).
    pub opened: Vec<u64>,
    /// Operations received and never answered (`iodemo_inflight`,
    /// records of requests taken that no answer record follows, and
    /// `iodemo_late` naming its sn and a known connection).
    pub inflight: Vec<Named>,
    /// Operations answered.
    pub replied: Vec<Replied>,
    /// Lines that fail the run by themselves (gap, dup, corrupt, bad, a
    /// late message for no known connection is only counted), with the
    /// connection each names (the judge decides whose they are).
    pub failures: Vec<(Option<u64>, String)>,
    /// `iodemo_late` lines naming no sn or no known connection.
    pub late_unknown: u64,
    /// Gap, dup, corrupt and bad lines in all (the first 100 are in
    /// `failures`).
    pub failing_lines: u64,
    /// Replies per instance.
    pub replied_per_instance: Vec<u64>,
}

/// Failing lines kept with their connection (the rest only counted).
const MAX_FAILING: usize = 100_000;

/// A 16-hex-digit connection id.
fn conn_id(w: Option<&String>) -> Option<u64> {
    u64::from_str_radix(w?, 16).ok()
}

/// Reads instance `i`'s log `DIR/NAME.log` into `out`.
fn read_instance_log(
    dir: &Path,
    name: &str,
    i: usize,
    out: &mut ServerFiles,
) -> Result<(), String> {
    let path = dir.join(format!("{name}.log"));
    let mut late = Vec::new();
    each_line(&path, |l| {
        let w = &l.words;
        let sn = |k: usize| w.get(k).and_then(|s| s.parse::<u32>().ok());
        match l.kind.as_str() {
            "iodemo_open" => {
                if let (Some(c), Some(peer)) = (conn_id(w.first()), w.get(1)) {
                    let ip = peer.rsplit_once(':').map_or(peer.as_str(), |(ip, _)| ip);
                    let ip = ip.trim_start_matches('[').trim_end_matches(']');
                    out.conns.insert(
                        c,
                        Conn {
                            instance: i,
                            peer_ip: ip.to_string(),
                        },
                    );
                    out.opened.push(c);
                }
            }
            "iodemo_inflight" => {
                if let (Some(conn), Some(op), Some(sn)) = (conn_id(w.first()), w.get(1), sn(2)) {
                    out.inflight.push(Named {
                        conn,
                        write: op == "write",
                        sn,
                    });
                }
            }
            "iodemo_late" => {
                // `iodemo_late ID SN|- CONN|-`: CONN is the connection the
                // message was for, when it closed lately.
                match (sn(1), conn_id(w.get(2))) {
                    (Some(sn), Some(conn)) => late.push((conn, sn)),
                    _ => out.late_unknown += 1,
                }
            }
            "iodemo_gap" | "iodemo_dup" | "corrupt" | "iodemo_bad" => {
                out.failing_lines += 1;
                if out.failures.len() < MAX_FAILING {
                    let line = format!("{name}: {} {}", l.kind, w.join(" "));
                    out.failures.push((conn_id(w.first()), line));
                }
            }
            _ => {}
        }
    })?;
    for (conn, sn) in late {
        // The operation is unknown (the late message says only its sn);
        // counted as a read, which the report does not split.
        if out.conns.contains_key(&conn) {
            out.inflight.push(Named {
                conn,
                write: false,
                sn,
            });
        } else {
            out.late_unknown += 1;
        }
    }
    Ok(())
}

/// Reads instance `i`'s records `DIR/NAME.records` into `out` (a missing
/// file is an instance that answered nothing).
fn read_instance_records(
    dir: &Path,
    name: &str,
    i: usize,
    out: &mut ServerFiles,
) -> Result<(), String> {
    let path = dir.join(format!("{name}.records"));
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut n = 0u64;
    let mut taken = Vec::new();
    let mut answered = HashSet::new();
    for r in Record::all(&bytes) {
        let kind = r.sn >> 32;
        let op = Named {
            conn: r.session,
            write: kind & 1 == 1,
            sn: r.sn as u32,
        };
        if kind & ARRIVED != 0 {
            taken.push(op);
            continue;
        }
        answered.insert((op.conn, op.sn));
        out.replied.push(Replied {
            order: ((i as u64) << 40) | n,
            op,
            size: r.hash,
        });
        n += 1;
    }
    // Taken and never answered: the instance ended first.
    out.inflight.extend(
        taken
            .into_iter()
            .filter(|t| !answered.contains(&(t.conn, t.sn))),
    );
    out.replied_per_instance.push(n);
    Ok(())
}

/// Reads every instance's files, `instances` in the order they ran.
///
/// # Errors
///
/// A log could not be read.
pub fn read_servers(dir: &Path, instances: &[String]) -> Result<ServerFiles, String> {
    let mut out = ServerFiles::default();
    for (i, name) in instances.iter().enumerate() {
        read_instance_log(dir, name, i, &mut out)?;
        read_instance_records(dir, name, i, &mut out)?;
    }
    Ok(out)
}
