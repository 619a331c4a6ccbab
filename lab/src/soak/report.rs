//! The soak's report: the JSON structures, the verdict table and the
//! timeline picture's data.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::verdict::{Bounds, Kind};
use crate::audit::once::OnceFigures;
use crate::audit::{ClientTrail, InstanceTrail, Reconciled};
use crate::plot;

/// The JSON report.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// `pass` or `fail`.
    pub verdict: &'static str,
    /// Why it failed (empty on pass).
    pub reasons: Vec<String>,
    /// The reconciled figures.
    #[serde(flatten)]
    pub figures: Reconciled,
    /// Kills done.
    pub server_kills: u64,
    /// Client processes SIGKILLed (the client-kill fault, and with
    /// `--exactly-once` one after each server kill).
    pub client_kills: u64,
    /// With `--exactly-once`: the judge's figures and named failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exactly_once: Option<OnceReport>,
    /// Client links cut.
    pub link_cuts: u64,
    /// The faults besides the kills.
    pub faults: FaultReport,
    /// How each server instance ended, and its memory.
    pub server: ServerReport,
    /// Every client process, and how it ended.
    pub client_processes: Vec<ClientProcReport>,
    /// Every run of the hostile peer, and how it ended.
    pub hostile_runs: Vec<HostileReport>,
    /// How long acknowledgements stalled, by the fault they follow.
    pub stalls: StallReport,
    /// Seconds from the first process to the verdict.
    pub seconds: f64,
    /// Acknowledged messages per second over the run.
    pub msgs_per_second: f64,
    /// Which UCX (here, where the soak ran).
    pub ucx: UcxInfo,
    /// With `--launcher`: each host's clock offset, UCX, transports, and
    /// whether it was lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<super::remote::HostReport>,
    /// What was run.
    pub config: SoakConfig,
    /// Where the files are.
    pub files: Files,
}

/// The exactly-once verdict's figures (`--exactly-once`).
#[derive(Clone, Debug, Serialize)]
pub struct OnceReport {
    /// Server kills done.
    pub server_kills: u64,
    /// Client kills done (every kind).
    pub client_kills: u64,
    /// Submitted, delivered, duplicates, missing, and the rest, with
    /// every failure named.
    #[serde(flatten)]
    pub figures: OnceFigures,
    /// With `--journal-faults`: each fault done to the journal, and its
    /// outcome.
    pub journal_faults: Vec<super::journal_faults::Done>,
}

/// Which UCX the processes used.
#[derive(Clone, Debug, Serialize)]
pub struct UcxInfo {
    /// Its version, e.g. `1.13.1`.
    pub version: String,
    /// The libucp file loaded.
    pub library_path: Option<String>,
    /// `UCX_TLS` given to every process.
    pub tls: String,
    /// The UCX API that carried the frames: `am` or `tag`.
    pub api: String,
    /// The transports UCX offers on this machine (`name/device`).
    pub transports: Vec<String>,
    /// What carried the frames: `ucx`, or `tcp` without UCX.
    pub carried_by: String,
}

/// The soak's settings, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct SoakConfig {
    /// Clients.
    pub clients: usize,
    /// Mean seconds between kills.
    pub kill_every_s: f64,
    /// Mean seconds between faults.
    pub fault_every_s: f64,
    /// Seed.
    pub seed: u64,
    /// Replay on.
    pub replay: bool,
    /// Exactly once across crashes (journal, outboxes, client kills).
    pub exactly_once: bool,
    /// `local` or `netns`.
    pub hosts: String,
    /// Client links cut.
    pub cut_links: bool,
    /// Clients rebuilt their UCX context after disconnects.
    pub recreate_context: bool,
    /// Sizes, `MIN:MAX`.
    pub data_size: String,
    /// Operations.
    pub ops: String,
    /// Window per client.
    pub window: u32,
}

/// Where the run's files are.
#[derive(Clone, Debug, Serialize)]
pub struct Files {
    /// The audit directory.
    pub audit_dir: String,
    /// The picture.
    pub plot: String,
    /// Whether the audit records (`*.records`) are still there (and with
    /// `--exactly-once` the journal and the outboxes): after a pass they
    /// are removed unless asked to keep them.
    pub records_kept: bool,
}

/// The faults besides the kills.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FaultReport {
    /// The kinds asked for (`--faults`).
    pub asked: Vec<String>,
    /// How many the seed's plan holds.
    pub planned: u64,
    /// How many happened, by kind (not `--exactly-once`'s client kills
    /// after the server kills: `client_kills` counts every client kill).
    pub done: BTreeMap<String, u64>,
    /// Each, in order (every client kill among them).
    pub events: Vec<EventReport>,
}

/// One fault as it happened.
#[derive(Clone, Debug, Serialize)]
pub struct EventReport {
    /// Its kind.
    pub kind: Kind,
    /// The client slot it was done to.
    pub client: Option<usize>,
    /// Seconds from the start.
    pub from_s: f64,
    /// Seconds from the start.
    pub to_s: f64,
}

/// How the server instances ended.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerReport {
    /// Each instance.
    pub instances: Vec<InstanceReport>,
    /// Instances that ended otherwise than by the soak's SIGKILL or a
    /// clean stop at the end.
    pub died: u64,
    /// The largest peak RSS (`VmHWM`) of any instance, in bytes.
    pub peak_rss_bytes: u64,
    /// The bound it is held to, in bytes.
    pub max_rss_bytes: u64,
}

/// One server instance.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceReport {
    /// Its name (`server-N`, its audit files').
    pub name: String,
    /// Seconds from the start.
    pub from_s: f64,
    /// Seconds from the start.
    pub to_s: f64,
    /// How it ended.
    pub end: String,
    /// Whether that is as the soak ended it.
    pub ok: bool,
    /// Its peak RSS, in bytes.
    pub peak_rss_bytes: u64,
}

/// One client process.
#[derive(Clone, Debug, Serialize)]
pub struct ClientProcReport {
    /// Its audit name.
    pub name: String,
    /// Its client slot.
    pub slot: usize,
    /// Its sessions (hex).
    pub sessions: Vec<String>,
    /// Seconds from the start.
    pub from_s: f64,
    /// Seconds from the start.
    pub to_s: f64,
    /// How it ended.
    pub end: String,
    /// Whether that is a good end (killed by the soak, or finished with
    /// exit status 0).
    pub ok: bool,
}

/// One run of the hostile peer.
#[derive(Clone, Debug, Serialize)]
pub struct HostileReport {
    /// Its name (its output file's).
    pub name: String,
    /// Seconds from the start.
    pub from_s: f64,
    /// Seconds from the start.
    pub to_s: f64,
    /// How it ended.
    pub end: String,
    /// Whether its attack ran (exit status 0).
    pub ok: bool,
}

/// The stalls of acknowledgement progress.
#[derive(Clone, Debug, Serialize)]
pub struct StallReport {
    /// The bounds.
    pub bounds: Bounds,
    /// How often the clients sample their acknowledgements (the
    /// measurement's resolution), in milliseconds.
    pub sample_interval_ms: f64,
    /// The longest stall of each kind.
    pub longest: Vec<LongestReport>,
    /// Every stall past its bound (at most 100).
    pub over_bound: Vec<StallRow>,
}

/// The longest stall of one kind.
#[derive(Clone, Debug, Serialize)]
pub struct LongestReport {
    /// The kind.
    pub kind: Kind,
    /// Its length less the outages it spans, in milliseconds.
    pub longest_ms: f64,
    /// The bound, in milliseconds.
    pub bound_ms: f64,
    /// Which client process.
    pub client: String,
    /// Seconds from the start.
    pub at_s: f64,
    /// Stalls of this kind past their bound.
    pub over_bound: u64,
}

/// One stall.
#[derive(Clone, Debug, Serialize)]
pub struct StallRow {
    /// Which client process.
    pub client: String,
    /// Its kind.
    pub kind: Kind,
    /// Seconds from the start.
    pub from_s: f64,
    /// Seconds from the start.
    pub to_s: f64,
    /// Its length less the outages it spans, in milliseconds.
    pub stalled_ms: f64,
    /// The outages taken off, in milliseconds.
    pub excused_ms: f64,
    /// The bound, in milliseconds.
    pub bound_ms: f64,
}

/// The picture's data: per client slot, its processes' rates one after
/// another.
pub fn timeline(
    report: &SoakReport,
    clients: &[(usize, ClientTrail)],
    slots: usize,
    instances: &[InstanceTrail],
    kills_us: &[u64],
    cuts: &[(usize, u64, u64)],
    t0: u64,
) -> plot::Timeline {
    let at = |us: u64| us.saturating_sub(t0) as f64 / 1e6;
    let mut t = plot::Timeline {
        title: format!(
            "iomsg soak: {} — {} kills, {} msgs acked, {} lost, reconnect p50 {:.0} ms",
            report.verdict.to_uppercase(),
            report.server_kills,
            grouped(report.figures.acked),
            report.figures.audit.missing,
            report.figures.reconnect_ms.p50
        ),
        seconds: report.seconds,
        kills: kills_us.iter().map(|&k| at(k)).collect(),
        restarts: instances
            .iter()
            .skip(1)
            .filter_map(|i| i.listening_us.map(at))
            .collect(),
        cuts: cuts
            .iter()
            .map(|&(client, from, to)| plot::Cut {
                client,
                from: at(from),
                to: at(to),
            })
            .collect(),
        clients: Vec::new(),
    };
    for k in 0..slots {
        let mut series = plot::ClientSeries {
            name: format!("client {}", k + 1),
            ..plot::ClientSeries::default()
        };
        for (_, c) in clients.iter().filter(|(slot, _)| *slot == k) {
            for w in c.samples.windows(2) {
                let dt = w[1].0.saturating_sub(w[0].0) as f64 / 1e6;
                if dt > 0.0 {
                    series
                        .rate
                        .push((at(w[1].0), w[1].1.saturating_sub(w[0].1) as f64 / dt));
                }
            }
            for s in &c.sessions {
                for &ack in &s.first_acks_us {
                    if s.disconnects_us.iter().any(|&d| d <= ack) {
                        series.reconnects.push(at(ack));
                    }
                }
            }
            for l in &report.figures.audit.lost {
                if c.sessions
                    .iter()
                    .any(|s| format!("{:016x}", s.session) == l.session)
                {
                    series.losses.push((report.seconds, l.to - l.from));
                }
            }
        }
        t.clients.push(series);
    }
    t
}

fn secs(ms: f64) -> String {
    format!("{:.2} s", ms / 1e3)
}

/// The verdict table.
pub fn table(r: &SoakReport) -> String {
    let f = &r.figures;
    let mut t = Rows::default();
    if r.reasons.iter().any(|w| w.starts_with("not reconciled")) {
        t.row(
            "not reconciled",
            "-".into(),
            "a host's files are missing: the figures below count nothing".into(),
        );
    }
    t.row("messages sent", grouped(f.sent), String::new());
    t.row("acknowledged", grouped(f.acked), String::new());
    match &r.exactly_once {
        Some(o) => exactly_once_rows(&mut t, o),
        None => audit_rows(&mut t, f),
    }
    fault_rows(&mut t, r);
    process_rows(&mut t, r);
    timing_rows(&mut t, r);
    environment_lines(&mut t, r);
    verdict_lines(&mut t, r);
    t.0
}

/// The table's text, a row at a time.
#[derive(Default)]
struct Rows(String);

impl Rows {
    /// One row: a name, a value, and a note.
    fn row(&mut self, name: &str, value: String, note: String) {
        let line = format!("  {name:<34} {value:>12}  {note}");
        let _ = writeln!(self.0, "{}", line.trim_end());
    }
}

/// What the exactly-once judge counted from the records.
fn exactly_once_rows(t: &mut Rows, o: &OnceReport) {
    let x = &o.figures;
    t.row(
        "submitted (the clients' records)",
        grouped(x.submitted),
        format!(
            "distinct sns; {} records repeated by restarted clients",
            grouped(x.repeated_client_records)
        ),
    );
    t.row(
        "delivered (the servers' records)",
        grouped(x.delivered),
        format!(
            "distinct sns; {} that no client recorded",
            grouped(x.unexplained)
        ),
    );
    t.row(
        "duplicates (exactly once)",
        grouped(x.duplicates),
        format!(
            "extra deliveries {}, announced {}",
            x.extra_deliveries, x.duplicates_announced
        ),
    );
    t.row(
        "missing (exactly once)",
        grouped(x.missing),
        format!(
            "gaps {}, differing bytes {}, unexplained {}, named state lost {}",
            x.gaps, x.hash_conflicts, x.unexplained, x.missing_named
        ),
    );
    if !o.journal_faults.is_empty() {
        let of = |outcome| {
            o.journal_faults
                .iter()
                .filter(|d| d.outcome == outcome)
                .count()
        };
        use super::journal_faults::Outcome;
        t.row(
            "journal faults",
            grouped(o.journal_faults.len() as u64),
            format!(
                "refused {}, torn tail cut {}, started {}, unnamed {}; {} sns named state lost",
                of(Outcome::Refused),
                of(Outcome::TornTailCut),
                of(Outcome::Started),
                of(Outcome::Unnamed),
                grouped(x.state_lost)
            ),
        );
    }
    t.row(
        "client kills",
        grouped(o.client_kills),
        "each restarted on its outbox".into(),
    );
}

/// What the audit counted, with replay on or off.
fn audit_rows(t: &mut Rows, f: &Reconciled) {
    let a = &f.audit;
    t.row(
        "processed by a server (audit)",
        grouped(a.processed_unique),
        if a.unrecorded_at_kill > 0 {
            format!(
                "distinct sns with the client's bytes; {} more a killed client sent past its records",
                a.unrecorded_at_kill
            )
        } else {
            "distinct sns with the client's bytes".into()
        },
    );
    t.row(
        "replayed after reconnects",
        grouped(f.replayed),
        String::new(),
    );
    t.row(
        "duplicates after restarts",
        grouped(f.duplicates_after_restart),
        format!(
            "announced {}, unannounced {}",
            grouped(f.duplicates_announced),
            a.unannounced_duplicates
        ),
    );
    t.row(
        "lost in flight (replay off)",
        grouped(f.lost_in_flight),
        format!("given up by the clients {}", grouped(f.not_replayed)),
    );
    t.row(
        "lost on live connections",
        grouped(f.lost_live),
        String::new(),
    );
    t.row(
        "missing (audit)",
        grouped(a.missing),
        format!(
            "unexplained {}, acknowledged {}, unacknowledged at a client kill {}",
            a.unexplained, a.acked_but_missing, a.unacknowledged_at_kill
        ),
    );
}

/// Corruption, stale frames, kills, cuts and the faults done.
fn fault_rows(t: &mut Rows, r: &SoakReport) {
    let f = &r.figures;
    t.row("corrupt", grouped(f.corrupt), String::new());
    t.row("stale frames discarded", grouped(f.stale), String::new());
    t.row(
        "server kills",
        grouped(r.server_kills),
        format!("link cuts {}", r.link_cuts),
    );
    if !r.faults.asked.is_empty() {
        let done: Vec<String> = r
            .faults
            .done
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        t.row(
            "faults",
            grouped(r.faults.done.values().sum()),
            format!("of {} planned: {}", r.faults.planned, done.join(", ")),
        );
    }
}

/// The server instances and their memory, the client processes, the
/// hostile peer's runs.
fn process_rows(t: &mut Rows, r: &SoakReport) {
    let sv = &r.server;
    t.row(
        "server instances",
        grouped(sv.instances.len() as u64),
        format!("died {} (every exit status checked)", sv.died),
    );
    let peak = sv
        .instances
        .iter()
        .max_by_key(|i| i.peak_rss_bytes)
        .map_or(String::new(), |i| format!(" ({})", i.name));
    t.row(
        "peak server RSS",
        format!("{:.1} MB", sv.peak_rss_bytes as f64 / 1e6),
        format!("bound {:.1} MB{peak}", sv.max_rss_bytes as f64 / 1e6),
    );
    let count = |end: &str| {
        r.client_processes
            .iter()
            .filter(|c| c.end.starts_with(end))
            .count()
    };
    let bad = r.client_processes.iter().filter(|c| !c.ok).count();
    t.row(
        "client processes",
        grouped(r.client_processes.len() as u64),
        format!(
            "finished {}, killed by the soak {}, not ended well {bad}",
            count("finished"),
            count("killed"),
        ),
    );
    if !r.hostile_runs.is_empty() {
        t.row(
            "hostile peer runs",
            grouped(r.hostile_runs.len() as u64),
            format!(
                "attack ran {}",
                r.hostile_runs.iter().filter(|h| h.ok).count()
            ),
        );
    }
}

/// The longest stalls, the reconnects and the run's length and rate.
fn timing_rows(t: &mut Rows, r: &SoakReport) {
    let f = &r.figures;
    for l in &r.stalls.longest {
        t.row(
            &format!("longest stall: {}", l.kind.name()),
            secs(l.longest_ms),
            format!(
                "bound {}, {} at {:.1} s{}",
                secs(l.bound_ms),
                l.client,
                l.at_s,
                if l.over_bound > 0 {
                    format!(", {} past the bound", l.over_bound)
                } else {
                    String::new()
                }
            ),
        );
    }
    t.row(
        "reconnects",
        grouped(f.reconnects),
        format!(
            "to first ack: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            f.reconnect_ms.p50, f.reconnect_ms.p99, f.reconnect_ms.max
        ),
    );
    t.row(
        "run",
        format!("{:.1} s", r.seconds),
        format!("{} msgs/s acknowledged", grouped(r.msgs_per_second as u64)),
    );
}

/// What carried the frames: UCX (its version, transports, API) and each
/// host, or the stream backend.
fn environment_lines(t: &mut Rows, r: &SoakReport) {
    if r.ucx.carried_by != "ucx" {
        let _ = writeln!(t.0, "  carried by {} (no UCX)", r.ucx.carried_by);
    } else if r.hosts.is_empty() {
        let _ = writeln!(
            t.0,
            "  UCX {} ({}), UCX_TLS={}, API {}",
            r.ucx.version,
            r.ucx.library_path.as_deref().unwrap_or("path unknown"),
            r.ucx.tls,
            r.ucx.api
        );
    } else {
        let tls = if r.ucx.tls.is_empty() {
            "unset (UCX's choice)"
        } else {
            &r.ucx.tls
        };
        let _ = writeln!(t.0, "  UCX_TLS {tls}, API {}", r.ucx.api);
    }
    for h in &r.hosts {
        let used = if h.transports_used.is_empty() {
            "none seen".to_string()
        } else {
            h.transports_used.join(" ")
        };
        let _ = writeln!(
            t.0,
            "  host {} ({}): UCX {}, used {used}; clock {:+.1} ms{}",
            h.host,
            h.roles.join(", "),
            h.ucx_version,
            h.clock_offset_ms,
            h.lost
                .as_ref()
                .map_or(String::new(), |w| format!("; LOST: {w}"))
        );
    }
}

/// The findings and losses named, the records' fate, and the verdict with
/// its reasons.
fn verdict_lines(t: &mut Rows, r: &SoakReport) {
    let a = &r.figures.audit;
    if let Some(o) = &r.exactly_once {
        for f in o.figures.findings.iter().take(20) {
            let _ = writeln!(t.0, "  {f}");
        }
    }
    for l in a
        .lost
        .iter()
        .take(if r.exactly_once.is_some() { 0 } else { 20 })
    {
        let _ = writeln!(
            t.0,
            "  lost: session {} sns {}..{}: {}",
            l.session, l.from, l.to, l.why
        );
    }
    if !r.files.records_kept {
        let _ = writeln!(
            t.0,
            "  audit records removed after the pass (--keep-records keeps them)"
        );
    }
    let _ = writeln!(t.0, "  verdict: {}", r.verdict.to_uppercase());
    for why in &r.reasons {
        let _ = writeln!(t.0, "    {why}");
    }
}

/// Thousands separated by commas.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
