//! `iomsg soak`: the field report's reproduction on real UCX. One server
//! and N clients as separate processes (this same binary), the server
//! SIGKILLed again and again and restarted on its port while the clients
//! reconnect and replay; with `--faults`, also clients killed and
//! restarted, clients and the server paused, client links cut and a
//! hostile peer let loose; then the verdict, from the processes' own
//! audit files rather than the protocol's counters, and from how every
//! process ended. With `--exactly-once`, the server instances keep one
//! journal and each client slot an outbox, a client is SIGKILLed after
//! each server kill and resumes its session, and the verdict asks every
//! submitted sn handed over exactly once.

use std::path::PathBuf;
use std::time::Duration;

use crate::args::{Op, SizeRange};

pub mod faults;
pub mod iodemo;
pub mod journal_faults;
mod judge;
mod lab;
pub mod remote;
mod report;
mod run;
mod supervision;
pub mod verdict;

pub use faults::Fault;
pub use report::{grouped, table, SoakReport};
pub use run::run;

use verdict::Bounds;

/// Where the processes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// All on this host, over the loopback device.
    Local,
    /// Each in its own network namespace (root): one server host and one
    /// host per client, joined by veth pairs on a bridge, link-local
    /// addresses (169.254.78.0/24).
    Netns,
}

/// What `iomsg soak` is asked to do.
#[derive(Clone, Debug)]
pub struct SoakJob {
    /// Clients.
    pub clients: usize,
    /// `UCX_TLS` for every process.
    pub tls: String,
    /// The UCX API of the server and the clients.
    pub api: crate::transport::Api,
    /// What carries the frames (`ucx` or `tcp`).
    pub transport: crate::transport::Transport,
    /// Mean time between kills (each jittered ±30 % by the seed).
    pub kill_every: Duration,
    /// Kills to do (with no `duration`).
    pub kills: u32,
    /// Run this long instead, killing all along.
    pub duration: Option<Duration>,
    /// Seeds the kill and fault times and the clients' workloads.
    pub seed: u64,
    /// Clients replay after reconnects.
    pub replay: bool,
    /// Exactly once across crashes of either side: the server instances
    /// keep one journal, each client slot an outbox kept across its
    /// generations, clients are SIGKILLed too
    /// ([`CLIENT_KILL_AFTER`]), and the verdict asks every submitted sn
    /// handed over once ([`crate::audit::once`]).
    pub exactly_once: bool,
    /// With `exactly_once`: the journal damaged between each server kill
    /// and the next instance ([`journal_faults`]), every outcome to be
    /// named.
    pub journal_faults: bool,
    /// Where the processes run.
    pub hosts: Hosts,
    /// The faults besides the server kills (`link-cut` needs netns).
    pub faults: Vec<Fault>,
    /// Mean time between two faults.
    pub fault_every: Duration,
    /// How long a cut link stays down.
    pub cut_for: Duration,
    /// The server's peak RSS may not pass this (bytes): the memory bound
    /// the server under test states (`iomsg server --help`), the caller's
    /// input.
    pub max_server_rss: u64,
    /// Clients rebuild their UCX context after every disconnect.
    pub recreate_context: bool,
    /// Operations and sizes of the clients' workload.
    pub ops: Vec<Op>,
    /// Sizes.
    pub sizes: SizeRange,
    /// Operations in flight per client.
    pub window: u32,
    /// The audit directory (made if missing; must hold no earlier run).
    pub audit_dir: PathBuf,
    /// The JSON report.
    pub report: PathBuf,
    /// The picture.
    pub plot: PathBuf,
    /// A status line this often when stderr is not a terminal.
    pub report_interval: Duration,
    /// After the last kill, clients get this long to finish.
    pub drain: Duration,
    /// Keep the audit records after a pass (they are always kept after a
    /// fail).
    pub keep_records: bool,
    /// Across hosts (`--launcher`): where and how; `tls` empty leaves
    /// UCX to pick on each host.
    pub remote: Option<remote::RemoteJob>,
}

/// How often the soak's clients write a status line and an audit
/// `sample` (their acknowledgements so far): the stall measurement's
/// resolution.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// The soak's clients' connect timeout (`--connect-timeout`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The soak's clients' reply timeout (`--reply-timeout`).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// The mean time between server kills with `--exactly-once` when
/// `--kill-every` is not given: 100 server and 100 client kills in
/// about 3 minutes (167 s measured on 2 cores, tcp on loopback).
pub const EXACTLY_ONCE_KILL_EVERY: Duration = Duration::from_millis(1500);

/// With `--exactly-once`, each server kill is followed by one client
/// kill, this share of `--kill-every` later (drawn from the seed between
/// the two, a slot drawn too): always before the next server kill (at
/// least 0.7 of `--kill-every` later), sometimes while the clients are
/// still reconnecting to the new instance, sometimes well after.
pub const CLIENT_KILL_AFTER: (f64, f64) = (0.05, 0.65);

/// The silence timeout of the UCX transport the server and the clients
/// run with (their default liveness): a peer silent this long is dead.
pub fn silence_timeout() -> Duration {
    #[cfg(feature = "ucx")]
    return iomsg_ucx::Liveness::default().timeout;
    // Without UCX the soak runs over tcp, whose silent peers the clients'
    // --reply-timeout finds.
    #[cfg(not(feature = "ucx"))]
    REPLY_TIMEOUT
}

/// What a client may take to be back once the outage is over: two
/// connect attempts.
pub fn reconnect_budget() -> Duration {
    CONNECT_TIMEOUT * 2
}

/// The stall bounds: after the server was paused, killed or died, after
/// a client's own pause or link cut, and for a client's first
/// acknowledgement, the silence timeout plus the reconnect budget
/// (3 s + 2 s), counted once the outage is over; otherwise (another
/// client killed, paused or cut, the hostile peer, no fault at all) half
/// the silence timeout, so that a client made to wait for another peer's
/// silence timeout fails the soak.
pub fn stall_bounds() -> Bounds {
    Bounds {
        recovery: silence_timeout() + reconnect_budget(),
        isolation: silence_timeout() / 2,
    }
}

/// `iomsg hostile`'s arguments for run `i` of a soak of `seed`: against
/// `server` (speaking `api`, and io_demo's protocol with `io_demo`), with
/// `modes`, for `hold`.
pub(crate) fn hostile_args(
    server: &str,
    modes: &str,
    api: crate::transport::Api,
    io_demo: bool,
    seed: u64,
    i: usize,
    hold: std::time::Duration,
) -> Vec<String> {
    let mut a: Vec<String> = ["hostile", "--server", server, "--modes", modes, "--api"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.push(api.name().to_string());
    if io_demo {
        a.push("--io-demo".into());
    }
    a.push("--seed".into());
    a.push(seed.wrapping_add(1000 + i as u64).to_string());
    a.push("--duration".into());
    a.push(format!("{}ms", hold.as_millis()));
    a
}

/// The hostile fault's modes against a server on `api`: every one, but
/// on active messages not `oversized`, whose memory UCX 1.13.1 spends
/// before the transport can refuse it (docs/guarantees.md, "One peer affects only itself").
#[cfg(feature = "ucx")]
pub fn hostile_modes(api: crate::transport::Api) -> String {
    use iomsg_ucx::hostile::Mode;
    Mode::ALL
        .iter()
        .filter(|m| api == crate::transport::Api::Tag || **m != Mode::Oversized)
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// No hostile modes without UCX: the hostile peer speaks UCX.
#[cfg(not(feature = "ucx"))]
pub fn hostile_modes(_api: crate::transport::Api) -> String {
    String::new()
}
