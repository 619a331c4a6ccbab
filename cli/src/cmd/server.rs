//! `iomsg server`: the iomsg protocol server, or with `--io-demo` a server for unmodified io_demo clients.

use std::path::PathBuf;
use std::process::ExitCode;

use iomsg_cli::server;
use iomsg_lab::args;
use iomsg_lab::durable::{SyncPolicy, COMPACT_OVER};
use iomsg_lab::journal::JournalJob;
use iomsg_lab::transport::{Place, Transport};

use super::common::{audit, serve_metrics, Common};

#[derive(clap::Args)]
pub(crate) struct ServerArgs {
    /// Port to listen on.
    #[arg(short, long, default_value_t = 1337)]
    pub(crate) port: u16,
    /// Address to listen on (`ADDR:PORT`, overriding --port; with
    /// `--transport unix`, `unix:PATH`).
    #[arg(long, value_name = "ADDR:PORT|unix:PATH")]
    pub(crate) listen: Option<String>,
    /// What carries the frames: `ucx` (UCX, the default; --api and
    /// --shared-memory choose how), `tcp` (plain TCP sockets) or `unix`
    /// (a Unix domain socket, --listen unix:PATH). Clients must use the
    /// same.
    #[arg(long, value_name = "ucx|tcp|unix", default_value_t = Transport::default())]
    pub(crate) transport: Transport,
    /// Sessions held at most (past it, idle ones are evicted).
    #[arg(long, default_value_t = server::SESSIONS)]
    pub(crate) sessions: usize,
    /// Check every write's bytes against io_demo's pattern.
    #[arg(short = 'q', long)]
    pub(crate) validate: bool,
    /// The UCX API that carries the frames: `am` (active messages, like
    /// io_demo's -A) or `tag` (tag matching). Both ends must use the same;
    /// a connection between ends that differ fails saying so.
    #[arg(long, value_name = "am|tag", default_value_t = iomsg_lab::transport::Api::default())]
    pub(crate) api: iomsg_lab::transport::Api,
    /// Keep a journal in this directory (DIR/journal, locked by DIR/lock:
    /// one server per journal). A server started on it takes back every
    /// session the last one knew, so that clients' replays of what was
    /// already delivered are acknowledged, not delivered again; with
    /// --audit-dir the audit records past the last acknowledged point are
    /// rolled back (their clients send them again).
    #[arg(long, value_name = "DIR")]
    pub(crate) journal: Option<PathBuf>,
    /// When the journal reaches the disk. A killed process (SIGKILL) loses
    /// nothing with `none`: write(2) is enough. A power cut needs fdatasync:
    /// `always` syncs before every flush returns (acknowledgements wait for
    /// the disk); `batch` syncs at most every 10 ms, so a power cut loses at
    /// most the acknowledgements of the last ~10 ms; `none` leaves it to
    /// the kernel.
    #[arg(
        long,
        value_name = "none|batch|always",
        default_value = "batch",
        requires = "journal"
    )]
    pub(crate) sync: SyncPolicy,
    /// Compact the journal past this size (for tests).
    #[arg(long, hide = true, value_parser = args::size, default_value_t = COMPACT_OVER)]
    pub(crate) journal_compact_over: u64,
    /// Speak UCX io_demo's own protocol instead of iomsg's: serve
    /// unmodified io_demo clients (tag, and -A, told apart per
    /// connection), answer their reads and writes as io_demo's server
    /// does (so their -q checks pass), and track each connection's sns:
    /// sns skipped on a live connection, duplicates, io messages of closed
    /// connections, requests unanswered when a connection ends. --sessions,
    /// --api, --journal and -q do not apply.
    #[arg(long, conflicts_with_all = ["journal", "validate"])]
    pub(crate) io_demo: bool,
    /// io_demo's chunk size (its -k) when the clients use one: tag writes
    /// arrive and tag reads go in chunks of this size.
    #[arg(long, value_name = "SIZE", value_parser = args::size, requires = "io_demo")]
    pub(crate) io_demo_chunk: Option<u64>,
    /// The largest data size of one io_demo operation; a larger request is
    /// refused and its connection closed.
    #[arg(long, value_name = "SIZE", value_parser = args::size, default_value = "16M")]
    pub(crate) io_demo_max_data: u64,
    /// A planted defect (to show the soak finds a loss): drop the N-th
    /// request of every connection without a word.
    #[arg(
        long,
        hide = true,
        value_name = "N",
        default_value_t = 0,
        requires = "io_demo"
    )]
    pub(crate) io_demo_plant_drop: u64,
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) fn server_help() -> String {
    format!(
        "Capacity: {} sessions and {} connections at most (a connection past them is \
         refused at once: the client prints \"connection table full ({})\"), a receive \
         window of 2,048 sns per session; the session table takes {} KiB.\n\n\
         Memory over UCX: at most {:.0} MiB whatever the peers send ({:.0} MiB for the \
         program and UCX, {:.0} MiB of frames in the transport: 64 MiB received, 64 MiB \
         being sent, 32 KiB of batch per connection, the buffer pool). A peer that floods, \
         stalls mid-message or stops reading is closed alone; the others are not \
         delayed.\n\n\
         Metrics (--metrics): iomsg_server_delivered_total, iomsg_server_duplicates_total, \
         iomsg_server_live_loss_sns_total, iomsg_server_in_flight_loss_sns_total, \
         iomsg_server_sessions_opened_total, iomsg_server_rejected_total (counters, as \
         they change: iomsg_ucx::observe), iomsg_server_connections, \
         iomsg_server_sessions (gauges, every second).",
        server::SESSIONS,
        server::CONNS,
        server::CONNS,
        std::mem::size_of::<server::Core>() / 1024,
        server::server_memory_bound() as f64 / f64::from(1 << 20),
        server::SERVER_BASE_RSS as f64 / f64::from(1 << 20),
        (server::server_memory_bound()
            - server::SERVER_BASE_RSS
            - std::mem::size_of::<server::Core>() as u64) as f64
            / f64::from(1 << 20),
    )
}

pub(crate) fn run_server(a: ServerArgs) -> ExitCode {
    if let Err(code) = serve_metrics(&a.common, "server") {
        return code;
    }
    if a.io_demo {
        return run_iodemo_server(a);
    }
    let listen = a.listen.as_deref().unwrap_or("0.0.0.0");
    let listen = match Place::parse(a.transport, listen, a.port) {
        Ok(place) => place,
        Err(e) => {
            eprintln!("iomsg server: {e}");
            return ExitCode::from(2);
        }
    };
    let job = server::ServerJob {
        listen,
        sessions: a.sessions,
        validate: a.validate,
        verbose: a.common.verbose,
        report_interval: a.common.report_interval,
        progress: a.common.progress(),
        shared_memory: a.common.shared_memory,
        api: a.api,
        audit: audit(&a.common, "server"),
        journal: a.journal.map(|dir| JournalJob {
            dir,
            sync: a.sync,
            compact_over: a.journal_compact_over,
        }),
    };
    match server::run(&job) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iomsg server: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "ucx"))]
pub(crate) fn run_iodemo_server(_: ServerArgs) -> ExitCode {
    eprintln!("iomsg server --io-demo: {}", iomsg_lab::transport::NO_UCX);
    ExitCode::from(2)
}

#[cfg(feature = "ucx")]
pub(crate) fn run_iodemo_server(a: ServerArgs) -> ExitCode {
    let mut opts = iomsg_ucx::iodemo::IoDemoOptions {
        max_data: a.io_demo_max_data,
        plant_drop: a.io_demo_plant_drop,
        ..Default::default()
    };
    if let Some(chunk) = a.io_demo_chunk {
        opts.chunk = chunk.max(1);
    }
    if !a.transport.is_ucx() {
        eprintln!("iomsg server --io-demo: io_demo speaks UCX only (--transport ucx)");
        return ExitCode::from(2);
    }
    let listen = match args::server_addr(a.listen.as_deref().unwrap_or("0.0.0.0"), a.port) {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("iomsg server --io-demo: {e}");
            return ExitCode::from(2);
        }
    };
    let job = iomsg_cli::iodemo_server::IoDemoJob {
        listen,
        opts,
        verbose: a.common.verbose,
        report_interval: a.common.report_interval,
        audit: audit(&a.common, "server"),
    };
    match iomsg_cli::iodemo_server::run(&job) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iomsg server --io-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
