//! `iomsg server --io-demo`: a server for unmodified UCX io_demo clients
//! (tag, or `-A`), with loss tracking and the same audit files as the
//! iomsg server.
//!
//! The audit log (`NAME.log`, each line after its time in µs):
//!
//! - `listening ADDR iodemo`
//! - `iodemo_open CONN PEER tag|am|none OURS THEIRS` (CONN: 16 hex
//!   digits, unique across instances; OURS: our id, decimal, which a tag
//!   client logs as "Remote id is OURS"; THEIRS, hex: the client's
//!   connection number, or with -A its endpoint's address, which it logs
//!   as "created endpoint 0xTHEIRS")
//! - `iodemo_gap CONN FIRST END`: sns `[FIRST, END)` skipped on a live
//!   connection; `iodemo_dup CONN SN`; `iodemo_late ID SN|- CONN|-`: an
//!   io message for a connection not open (CONN: the one it was for, if
//!   it closed lately: it arrived, and was not answered);
//!   `corrupt CONN SN OFFSET`; `iodemo_bad CONN|- REASON…`
//! - `iodemo_close CONN REASON…`, then `iodemo_inflight CONN read|write SN`
//!   for each request it left unanswered.
//!
//! `NAME.records` holds one 24-byte record per request taken and one per
//! operation answered, each in the order it happened: session = CONN,
//! sn = kind << 32 | sn, hash = the data size of an answer (0 for an
//! arrival). Kind: 0 read answered, 1 write answered, 2 read taken,
//! 3 write taken. Each is written before any answer posted after it can
//! leave (the server posts answers at its next poll), so a request the
//! server took and never answered (it was killed first) is told from one
//! that never reached it, although answers may leave out of request
//! order.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use iomsg_core::iodemo::Op;
use iomsg_ucx::iodemo::{IoDemoEvent, IoDemoOptions, IoDemoServer};

use iomsg_lab::common::{Audit, Record};

pub use iomsg_lab::audit::iodemo::ARRIVED;

/// What `iomsg server --io-demo` is asked to do.
#[derive(Clone, Debug)]
pub struct IoDemoJob {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The server's limits.
    pub opts: IoDemoOptions,
    /// Print every event.
    pub verbose: bool,
    /// A status line this often (zero: never).
    pub report_interval: Duration,
    /// Audit directory and name.
    pub audit: Option<(PathBuf, String)>,
}

/// What the server counted.
#[derive(Clone, Debug, Default)]
struct Tally {
    reads: u64,
    writes: u64,
    bytes: u64,
    opened: u64,
    closed: u64,
    forgotten: u64,
    gaps: u64,
    duplicates: u64,
    late: u64,
    corrupt: u64,
    refused: u64,
}

/// The io_demo server's worst-case memory whatever its peers send: the
/// program, the UCX libraries and UCX's own per-connection state (as
/// `iomsg server`'s, [`SERVER_BASE_RSS`](crate::server::SERVER_BASE_RSS)),
/// and the server's buffers ([`IoDemoOptions::memory_bound`]).
///
/// [`IoDemoOptions::memory_bound`]: iomsg_ucx::iodemo::IoDemoOptions::memory_bound
pub fn memory_bound(opts: &iomsg_ucx::iodemo::IoDemoOptions) -> u64 {
    crate::server::SERVER_BASE_RSS + opts.memory_bound()
}

/// Runs the server until SIGINT or SIGTERM.
///
/// # Errors
///
/// UCX could not listen, or an audit file could not be written.
pub fn run(job: &IoDemoJob) -> Result<(), String> {
    let stop = iomsg_lab::common::stop_on_signals()?;
    let mut audit = match &job.audit {
        Some((dir, name)) => Some(Audit::create(dir, name)?),
        None => None,
    };
    let opts = IoDemoOptions {
        report_arrivals: job.opts.report_arrivals || audit.is_some(),
        ..job.opts.clone()
    };
    let mut server =
        IoDemoServer::bind(job.listen, opts).map_err(|e| format!("{e} (on {})", job.listen))?;
    let addr = server.local_addr();
    if let Some(a) = audit.as_mut() {
        a.event(format_args!("listening {addr} iodemo"));
        a.flush()?;
    }
    println!(
        "listening on {addr} for io_demo clients (tag and -A); memory bound {:.0} MiB",
        memory_bound(&job.opts) as f64 / f64::from(1 << 20)
    );
    let mut t = Tally::default();
    let mut peers: HashMap<u64, String> = HashMap::new();
    let mut next_report = Instant::now() + job.report_interval;
    while !stop.load(Ordering::Relaxed) {
        server.wait(Duration::from_millis(50));
        drain(&mut server, &mut audit, &mut t, &mut peers, job.verbose);
        if let Some(a) = audit.as_mut() {
            a.flush()?;
        }
        if !job.report_interval.is_zero() && Instant::now() >= next_report {
            next_report = Instant::now() + job.report_interval;
            println!("{}", status(&t, server.connections()));
        }
    }
    server.shutdown(Duration::from_secs(2));
    drain(&mut server, &mut audit, &mut t, &mut peers, job.verbose);
    if let Some(a) = audit.as_mut() {
        a.event(format_args!("stopped"));
        a.flush()?;
    }
    println!("stopped: {}", status(&t, 0));
    Ok(())
}

fn status(t: &Tally, conns: usize) -> String {
    format!(
        "{conns} connections ({} opened, {} closed) | {} reads {} writes {:.1} MB | \
         unanswered at disconnects {} | skipped sns {} duplicates {} late {} corrupt {} \
         refused {}",
        t.opened,
        t.closed,
        t.reads,
        t.writes,
        t.bytes as f64 / 1e6,
        t.forgotten,
        t.gaps,
        t.duplicates,
        t.late,
        t.corrupt,
        t.refused
    )
}

/// Takes the server's events into the tally, the audit files and (when
/// verbose) stdout.
fn drain(
    server: &mut IoDemoServer,
    audit: &mut Option<Audit>,
    t: &mut Tally,
    peers: &mut HashMap<u64, String>,
    verbose: bool,
) {
    while let Some(e) = server.next_event() {
        if let IoDemoEvent::Arrived { conn, op, sn } = e {
            if let Some(a) = audit.as_mut() {
                a.record(Record {
                    session: conn,
                    sn: (ARRIVED | u64::from(op == Op::Write)) << 32 | u64::from(sn),
                    hash: 0,
                });
            }
            continue;
        }
        if let IoDemoEvent::Answered { conn, op, sn, size } = e {
            match op {
                Op::Read => t.reads += 1,
                _ => t.writes += 1,
            }
            t.bytes += size;
            if let Some(a) = audit.as_mut() {
                let code = u64::from(op == Op::Write);
                a.record(Record {
                    session: conn,
                    sn: code << 32 | u64::from(sn),
                    hash: size,
                });
            }
            continue;
        }
        let lines = describe(&e, t, peers);
        for line in &lines {
            if let Some(a) = audit.as_mut() {
                a.event(format_args!("{line}"));
            }
            if verbose || line.starts_with("iodemo_bad") || line.starts_with("corrupt") {
                println!("{line}");
            }
        }
    }
}

/// An event's audit lines, counted in the tally.
fn describe(e: &IoDemoEvent, t: &mut Tally, peers: &mut HashMap<u64, String>) -> Vec<String> {
    match e {
        IoDemoEvent::Opened {
            conn,
            peer,
            tag,
            ours,
            theirs,
        } => {
            t.opened += 1;
            let peer = peer.map_or_else(|| "-".to_string(), |p| p.to_string());
            peers.insert(*conn, peer.clone());
            let api = match tag {
                Some(true) => "tag",
                Some(false) => "am",
                None => "none",
            };
            vec![format!(
                "iodemo_open {conn:016x} {peer} {api} {ours} {theirs:x}"
            )]
        }
        IoDemoEvent::Gap { conn, first, end } => {
            t.gaps += u64::from(end.wrapping_sub(*first));
            vec![format!("iodemo_gap {conn:016x} {first} {end}")]
        }
        IoDemoEvent::Duplicate { conn, sn } => {
            t.duplicates += 1;
            vec![format!("iodemo_dup {conn:016x} {sn}")]
        }
        IoDemoEvent::Late { id, conn, sn } => {
            t.late += 1;
            let sn = sn.map_or_else(|| "-".to_string(), |s| s.to_string());
            let conn = conn.map_or_else(|| "-".to_string(), |c| format!("{c:016x}"));
            vec![format!("iodemo_late {id} {sn} {conn}")]
        }
        IoDemoEvent::Corrupt { conn, sn, offset } => {
            t.corrupt += 1;
            vec![format!("corrupt {conn:016x} {sn} {offset}")]
        }
        IoDemoEvent::Refused { conn, reason } => {
            t.refused += 1;
            let c = conn.map_or_else(|| "-".to_string(), |c| format!("{c:016x}"));
            vec![format!("iodemo_bad {c} {reason}")]
        }
        IoDemoEvent::Closed {
            conn,
            reason,
            in_flight,
        } => {
            t.closed += 1;
            t.forgotten += in_flight.len() as u64;
            let peer = peers.remove(conn).unwrap_or_default();
            let mut v = vec![format!("iodemo_close {conn:016x} {reason} (peer {peer})")];
            v.extend(
                in_flight
                    .iter()
                    .map(|(op, sn)| format!("iodemo_inflight {conn:016x} {} {sn}", op.name())),
            );
            v
        }
        IoDemoEvent::Answered { .. } | IoDemoEvent::Arrived { .. } => Vec::new(),
    }
}
