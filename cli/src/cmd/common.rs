//! What several subcommands take: the common options, the workload, and their helpers.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use iomsg_endpoint::Progress;
use iomsg_lab::args::{self, Ops, SizeRange};

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    args::duration(s)
}

pub(crate) fn on_off(s: &str) -> Result<bool, String> {
    args::on_off(s)
}

#[derive(clap::Args)]
pub(crate) struct Common {
    /// Print every event (connections, restarts, losses).
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Print a status line this often (0: never).
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = duration)]
    pub(crate) report_interval: Duration,
    /// Sleep on UCX's event fd as soon as there is nothing to do. The
    /// default polls for 50 µs after the last work, then sleeps: an idle
    /// process uses no CPU.
    #[arg(short = 'b', long, conflicts_with = "busy_poll")]
    pub(crate) blocking: bool,
    /// Never sleep: poll UCX even when idle (lowest latency, one core
    /// busy; the behaviour before adaptive progress).
    #[arg(long)]
    pub(crate) busy_poll: bool,
    /// Carry frames over shared memory (posix, sysv, cma) when both ends
    /// are on one host and UCX_TLS allows it; both ends must say so.
    #[arg(long)]
    pub(crate) shared_memory: bool,
    /// Keep audit files (what was handed over or submitted, and events)
    /// in this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) audit_dir: Option<PathBuf>,
    /// The audit files' name (default: the role and the process id).
    #[arg(long, value_name = "NAME", requires = "audit_dir")]
    pub(crate) audit_name: Option<String>,
    /// Serve the process's metrics in the Prometheus text format over
    /// HTTP on this address (`GET /metrics`; port 0: any free port, the
    /// one chosen is printed). The names are listed below.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) metrics: Option<std::net::SocketAddr>,
}

/// Installs the metrics recorder and its endpoint when `--metrics` asks.
pub(crate) fn serve_metrics(common: &Common, role: &str) -> Result<(), ExitCode> {
    let Some(addr) = common.metrics else {
        return Ok(());
    };
    match iomsg_cli::exporter::install(addr) {
        Ok(local) => {
            println!("metrics on http://{local}/metrics");
            Ok(())
        }
        Err(e) => {
            eprintln!("iomsg {role}: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

pub(crate) fn audit(common: &Common, role: &str) -> Option<(PathBuf, String)> {
    let dir = common.audit_dir.clone()?;
    let name = common
        .audit_name
        .clone()
        .unwrap_or_else(|| format!("{role}-{}", std::process::id()));
    Some((dir, name))
}

/// What `client` and `soak` both take: the workload and how it is carried.
#[derive(clap::Args)]
pub(crate) struct Workload {
    /// The UCX API that carries the frames: `am` (active messages, like
    /// io_demo's -A) or `tag` (tag matching). Both ends must use the same;
    /// a connection between ends that differ fails saying so.
    #[arg(long, value_name = "am|tag", default_value_t = iomsg_lab::transport::Api::default())]
    pub(crate) api: iomsg_lab::transport::Api,
    /// Operations, drawn at random: `read`, `write` or `read,write`.
    #[arg(short, long, default_value = "write")]
    pub(crate) ops: Ops,
    /// Size of each operation's data, `MIN:MAX` (or one size), with K, M,
    /// G suffixes; drawn uniformly. At most 1M.
    #[arg(
        short,
        long = "data-size",
        value_name = "MIN:MAX",
        default_value = "4K"
    )]
    pub(crate) data_size: SizeRange,
    /// Operations in flight at most, over all servers.
    #[arg(short, long, default_value_t = 16)]
    pub(crate) window: u32,
    /// Seed of the workload (operations and sizes) and of the retry
    /// jitter. Session ids come from the OS, never from the seed.
    #[arg(short, long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Replay what was unacknowledged after a reconnect (`on`: nothing is
    /// lost; `off`: in-flight io_msgs are given up and reported).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    pub(crate) replay: bool,
    /// Rebuild the UCX context and worker after every disconnect, as the
    /// field report's clients did; the session lives on above them.
    #[arg(long)]
    pub(crate) recreate_context: bool,
}

impl Common {
    /// How the process waits when it has nothing to do.
    pub(crate) fn progress(&self) -> Progress {
        if self.busy_poll {
            Progress::BusyPoll
        } else if self.blocking {
            Progress::Sleep
        } else {
            Progress::Adaptive
        }
    }
}
