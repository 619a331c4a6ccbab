//! The io_demo soak's report: the verdict and its reasons, the run's
//! configuration, each process's end, and the judge's rows and totals.

use std::time::Duration;

use serde::Serialize;

use super::{client_args, World};
use crate::audit::iodemo::{self, IoDemoClient, IoDemoJudged};

/// A server instance's life.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceRow {
    /// Its name (its audit files are `NAME.log`, `NAME.records`).
    pub name: String,
    /// Its pid.
    pub pid: u32,
    /// When it started (microseconds since the epoch).
    pub from_us: u64,
    /// How it ended.
    pub end: String,
}

/// An io_demo client's end.
#[derive(Clone, Debug, Serialize)]
pub struct ClientRow {
    /// Its name (its output is `NAME.log`).
    pub name: String,
    /// Its pid.
    pub pid: u32,
    /// Its IP address as the server saw it.
    pub ip: String,
    /// Its exit code (null: a signal ended it).
    pub exit_code: Option<i32>,
    /// How it ended, in words.
    pub end: String,
}

/// What the run was asked.
#[derive(Clone, Debug, Serialize)]
pub struct IoDemoConfig {
    /// io_demo clients.
    pub clients: usize,
    /// The io_demo program.
    pub io_demo: String,
    /// Client 0's arguments (the others differ in `-s`).
    pub client_args: Vec<String>,
    /// `UCX_TLS`.
    pub tls: String,
    /// The UCX API.
    pub api: String,
    /// Kills asked.
    pub kills: u32,
    /// Mean time between kills, seconds.
    pub kill_every: f64,
    /// The seed of the kill times and the clients' seeds.
    pub seed: u64,
    /// Each process in a network namespace of its own.
    pub netns: bool,
}

/// The io_demo soak's report (`report.json`; `report.txt` holds
/// [`table`]).
#[derive(Clone, Debug, Serialize)]
pub struct IoDemoSoakReport {
    /// `pass` or `fail`.
    pub verdict: &'static str,
    /// Why it failed.
    pub reasons: Vec<String>,
    /// Kills done.
    pub server_kills: u32,
    /// The run's length, seconds.
    pub seconds: f64,
    /// What was asked.
    pub config: IoDemoConfig,
    /// Every server instance.
    pub server: Vec<InstanceRow>,
    /// Every io_demo client.
    pub clients: Vec<ClientRow>,
    /// The hostile peer's runs (`--faults hostile`): name, API, end.
    pub hostile: Vec<String>,
    /// The judge's rows and totals.
    pub judge: IoDemoJudged,
}

/// Puts the report together.
pub(super) fn build(
    w: &World<'_>,
    clients: &[IoDemoClient],
    judge: IoDemoJudged,
    reasons: Vec<String>,
    kills: u32,
    limit: Duration,
    seconds: f64,
) -> IoDemoSoakReport {
    let job = w.job;
    IoDemoSoakReport {
        verdict: if reasons.is_empty() { "pass" } else { "fail" },
        reasons,
        server_kills: kills,
        seconds,
        config: IoDemoConfig {
            clients: w.io.clients,
            io_demo: w.io.bin.display().to_string(),
            client_args: client_args(job, 0, &w.at.server, limit),
            tls: job.tls.clone(),
            api: job.api.name().to_string(),
            kills: job.kills,
            kill_every: job.kill_every.as_secs_f64(),
            seed: job.seed,
            netns: w.lab.is_some(),
        },
        server: w
            .instances
            .iter()
            .map(|i| InstanceRow {
                name: i.name.clone(),
                pid: i.pid,
                from_us: i.from_us,
                end: i.end.clone().unwrap_or_else(|| "running".into()),
            })
            .collect(),
        clients: w
            .clients
            .iter()
            .zip(clients)
            .map(|(c, j)| ClientRow {
                name: c.name.clone(),
                pid: c.pid,
                ip: j.peer_ip.clone(),
                exit_code: j.exit_code,
                end: match (c.killed, c.exit) {
                    (true, _) => "killed: did not exit in time".into(),
                    (false, Some(e)) => e.to_string(),
                    (false, None) => "unknown".into(),
                },
            })
            .collect(),
        hostile: w
            .hostiles
            .iter()
            .map(|h| {
                let end = h.exit.map_or_else(|| "unknown".into(), |e| e.to_string());
                format!("{} ({}): {end}", h.name, h.api)
            })
            .collect(),
        judge,
    }
}

/// The report as text: the verdict, the disconnects, the totals, the
/// reasons.
pub fn table(r: &IoDemoSoakReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "iomsg soak (io_demo clients): {} — {} kills, {} instances, {} clients, {:.1} s",
        r.verdict.to_uppercase(),
        r.server_kills,
        r.server.len(),
        r.clients.len(),
        r.seconds
    );
    for c in &r.clients {
        let _ = writeln!(s, "  {} ({}): {}", c.name, c.ip, c.end);
    }
    if !r.hostile.is_empty() {
        let _ = writeln!(
            s,
            "  hostile peer: {} runs; on connections no client names: {} refused, gap or \
             other lines, {} operations answered",
            r.hostile.len(),
            r.judge.totals.stranger_lines,
            r.judge.totals.stranger_answers
        );
    }
    s.push_str(&iodemo::table(&r.judge));
    let _ = writeln!(s, "  rule: {}", r.judge.rule);
    for reason in r.reasons.iter().take(30) {
        let _ = writeln!(s, "  FAIL: {reason}");
    }
    if r.reasons.len() > 30 {
        let _ = writeln!(
            s,
            "  ... {} more reasons in the report",
            r.reasons.len() - 30
        );
    }
    s
}
