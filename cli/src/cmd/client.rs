//! `iomsg client`: io_demo's workload over iomsg sessions, or with `--io-demo` io_demo's own protocol.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use iomsg_cli::client;
use iomsg_lab::args::{self, Retries};
use iomsg_lab::durable::{SyncPolicy, COMPACT_OVER};
use iomsg_lab::outbox::OutboxJob;
use iomsg_lab::transport::{Place, Transport};

use super::common::{audit, duration, serve_metrics, Common, Workload};

#[derive(clap::Args)]
pub(crate) struct ClientArgs {
    /// Servers, `HOST[:PORT]` (`unix:PATH` with `--transport unix`);
    /// operations are spread over them, one session each.
    #[arg(required = true, value_name = "ADDR[:PORT]")]
    pub(crate) servers: Vec<String>,
    /// What carries the frames: `ucx` (the default), `tcp` or `unix`; the
    /// servers must use the same.
    #[arg(long, value_name = "ucx|tcp|unix", default_value_t = Transport::default())]
    pub(crate) transport: Transport,
    /// Port of servers given without one.
    #[arg(short, long, default_value_t = 1337)]
    pub(crate) port: u16,
    /// Operations in all (0: no limit).
    #[arg(short, long, default_value_t = 1000)]
    pub(crate) iterations: u64,
    /// Operations in flight at most per server (at most 1024).
    #[arg(long, default_value_t = 16)]
    pub(crate) conn_window: u32,
    /// No reply for this long while operations are in flight: the
    /// connection is dead and is made again.
    #[arg(short = 't', long, value_name = "TIME", default_value = "2s", value_parser = duration)]
    pub(crate) reply_timeout: Duration,
    /// How long a connection attempt may take.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = duration)]
    pub(crate) connect_timeout: Duration,
    /// Consecutive failed connection attempts before giving up (a number
    /// or `inf`). The client gives up only once these attempts failed
    /// and --retry-for has passed since the first of them.
    #[arg(short, long, default_value = "20")]
    pub(crate) retries: Retries,
    /// Keep retrying for at least this long after a connection is lost,
    /// whatever --retries says: attempts that fail at once (a network
    /// unreachable for a while) are spaced by --retry-interval, so an
    /// outage of up to this long is survived. `0`: --retries alone
    /// decides.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration)]
    pub(crate) retry_for: Duration,
    /// Delay between connection attempts (±20 % jitter).
    #[arg(long, value_name = "TIME", default_value = "100ms", value_parser = duration)]
    pub(crate) retry_interval: Duration,
    /// Keep retrying while the server's table is full, even before the
    /// server ever let this client in. Without it such a client fails at
    /// once, naming the full table (nothing of its session is on the
    /// server); a client let in before retries in any case. Refusals that
    /// no retry changes (the other --api, another protocol version,
    /// another client's session) fail at once whatever is set.
    #[arg(long)]
    pub(crate) retry_full_table: bool,
    /// Stop after this long (`17.5s`, `10m`, `1.5h`), then wait for what
    /// is in flight.
    #[arg(short = 'l', long, value_name = "TIME", value_parser = duration)]
    pub(crate) run_time: Option<Duration>,
    /// After stopping, wait this long at most for acknowledgements.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration)]
    pub(crate) drain: Duration,
    /// Payload CRCs on every frame, checked by the receiver.
    #[arg(short = 'q', long)]
    pub(crate) validate: bool,
    /// Write a JSON report here at the end (was --report, still taken
    /// for one release).
    #[arg(long = "report-json", alias = "report", value_name = "FILE.json")]
    pub(crate) report: Option<PathBuf>,
    /// Keep an outbox in this directory (DIR/outbox, the directory locked
    /// while the client runs; with several servers one per server, in
    /// DIR/server-ADDR-PORT): every message is kept until acknowledged,
    /// so that a client started again on it goes on with the same session
    /// id and token and sends again, with their old sns, what was not
    /// acknowledged, and hands no read's answer over twice. With a server
    /// that keeps a --journal nothing is delivered twice. A session that
    /// finished (everything acknowledged, closed) is not resumed: the next
    /// run starts a new one. A damaged outbox is refused, never replaced.
    #[arg(long, value_name = "DIR")]
    pub(crate) outbox: Option<PathBuf>,
    /// When the outbox reaches the disk: `none` (write(2): enough for a
    /// killed process), `batch` (fdatasync at most every 10 ms), `always`
    /// (fdatasync before every poll that may send).
    #[arg(
        long,
        value_name = "none|batch|always",
        default_value = "batch",
        requires = "outbox"
    )]
    pub(crate) sync: SyncPolicy,
    /// Compact the outbox past this size (for tests).
    #[arg(long, hide = true, value_parser = args::size, default_value_t = COMPACT_OVER)]
    pub(crate) outbox_compact_over: u64,
    /// Speak UCX io_demo's own protocol, to an unmodified io_demo server
    /// (`--api tag`, or `--api am` for a server started with -A): one
    /// server; every operation the server leaves unanswered when a
    /// connection ends is named (io_demo's own client forgets them), and
    /// every answer's bytes are checked. --window is the operations in
    /// flight; --replay, --outbox and --recreate-context do not apply.
    #[arg(long, conflicts_with = "outbox")]
    pub(crate) io_demo: bool,
    /// io_demo's io message size (its -r).
    #[arg(long, value_name = "SIZE", value_parser = args::size, default_value = "256", requires = "io_demo")]
    pub(crate) io_demo_msg_size: u64,
    /// io_demo's chunk size (its -k), if the server was given one.
    #[arg(long, value_name = "SIZE", value_parser = args::size, requires = "io_demo")]
    pub(crate) io_demo_chunk: Option<u64>,
    #[command(flatten)]
    pub(crate) workload: Workload,
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) const CLIENT_HELP: &str =
    "Metrics (--metrics), summed over the sessions, as they change \
     (iomsg_ucx::observe): iomsg_client_submitted_total, iomsg_client_acked_total, \
     iomsg_client_replayed_total, iomsg_client_not_replayed_total, \
     iomsg_client_reconnects_total (counters), iomsg_client_handshake_seconds, \
     iomsg_client_ack_latency_seconds (histograms, shown as count and sum).";

/// The servers given, as addresses of `--transport`.
fn servers(a: &ClientArgs) -> Result<Vec<Place>, String> {
    a.servers
        .iter()
        .map(|s| Place::parse(a.transport, s, a.port))
        .collect()
}

/// The servers' UCX addresses; `None` if one is not of UCX.
fn ucx_servers(servers: &[Place]) -> Option<Vec<std::net::SocketAddr>> {
    servers
        .iter()
        .map(|p| match p {
            Place::Ucx(a) => Some(*a),
            Place::Stream(_) => None,
        })
        .collect()
}

pub(crate) fn run_client(a: ClientArgs) -> ExitCode {
    let servers = match servers(&a) {
        Ok(servers) => servers,
        Err(e) => {
            eprintln!("iomsg client: {e}");
            return ExitCode::from(2);
        }
    };
    if a.io_demo {
        return match ucx_servers(&servers) {
            Some(ucx) => run_iodemo_client(a, &ucx),
            None => {
                eprintln!("iomsg client --io-demo: io_demo speaks UCX only (--transport ucx)");
                ExitCode::from(2)
            }
        };
    }
    let w = a.workload;
    if w.data_size.max > u64::from(iomsg_core::wire::MAX_DATA_LEN) {
        eprintln!(
            "iomsg client: --data-size {}: at most {} bytes per io_msg",
            w.data_size,
            iomsg_core::wire::MAX_DATA_LEN
        );
        return ExitCode::from(2);
    }
    if w.window == 0 || a.conn_window == 0 || a.conn_window > client::MAX_CONN_WINDOW {
        eprintln!(
            "iomsg client: --window and --conn-window must be at least 1, --conn-window at most {}",
            client::MAX_CONN_WINDOW
        );
        return ExitCode::from(2);
    }
    if let Err(code) = serve_metrics(&a.common, "client") {
        return code;
    }
    let job = client::ClientJob {
        servers,
        transport: a.transport,
        ops: w.ops.0,
        sizes: w.data_size,
        iterations: a.iterations,
        window: w.window,
        conn_window: a.conn_window,
        reply_timeout: a.reply_timeout,
        connect_timeout: a.connect_timeout,
        retries: a.retries,
        retry_for: a.retry_for,
        retry_interval: a.retry_interval,
        retry_full_table: a.retry_full_table,
        run_time: a.run_time,
        seed: w.seed,
        verbose: a.common.verbose,
        validate: a.validate,
        report_interval: a.common.report_interval,
        progress: a.common.progress(),
        replay: w.replay,
        recreate_context: w.recreate_context,
        shared_memory: a.common.shared_memory,
        api: w.api,
        report: a.report,
        audit: audit(&a.common, "client"),
        drain: a.drain,
        outbox: a.outbox.map(|dir| OutboxJob {
            dir,
            sync: a.sync,
            compact_over: a.outbox_compact_over,
        }),
    };
    match client::run(&job) {
        Ok(r) if r.ok => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("iomsg client: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "ucx"))]
pub(crate) fn run_iodemo_client(_: ClientArgs, _: &[std::net::SocketAddr]) -> ExitCode {
    eprintln!("iomsg client --io-demo: {}", iomsg_lab::transport::NO_UCX);
    ExitCode::from(2)
}

#[cfg(feature = "ucx")]
pub(crate) fn run_iodemo_client(a: ClientArgs, servers: &[std::net::SocketAddr]) -> ExitCode {
    let [server] = servers else {
        eprintln!(
            "iomsg client --io-demo: give one io_demo server, not {}",
            servers.len()
        );
        return ExitCode::from(2);
    };
    let w = a.workload;
    if w.window == 0 || w.data_size.min > w.data_size.max {
        eprintln!("iomsg client --io-demo: --window must be at least 1 and --data-size MIN <= MAX");
        return ExitCode::from(2);
    }
    let job = iomsg_cli::iodemo_client::IoDemoClientJob {
        server: *server,
        tag: w.api == iomsg_lab::transport::Api::Tag,
        ops: w.ops.0.clone(),
        sizes: w.data_size,
        window: w.window,
        iterations: a.iterations,
        run_time: a.run_time,
        reply_timeout: a.reply_timeout,
        retry_interval: a.retry_interval,
        retries: a.retries.max(),
        drain: a.drain,
        seed: w.seed,
        msg_len: a.io_demo_msg_size.clamp(21, 1 << 16) as usize,
        chunk: a.io_demo_chunk.unwrap_or(u64::MAX).max(1),
        check: a.validate,
        report_interval: a.common.report_interval,
        verbose: a.common.verbose,
        audit: audit(&a.common, "client"),
    };
    match iomsg_cli::iodemo_client::run(&job) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iomsg client --io-demo: {e}");
            ExitCode::FAILURE
        }
    }
}
