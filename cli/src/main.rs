//! `iomsg`: io_demo-style server and client over UCX, `info`, and `soak`,
//! the field report's reproduction on real UCX in one command.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use iomsg_cli::args::{self, Ops, Retries, SizeRange};
use iomsg_cli::durable::{SyncPolicy, COMPACT_OVER};
use iomsg_cli::journal::JournalJob;
use iomsg_cli::outbox::OutboxJob;
use iomsg_cli::{client, hostile, server, soak};

#[derive(Parser)]
#[command(
    name = "iomsg",
    max_term_width = 100,
    version,
    about = "io_msgs over UCX that are never lost unnoticed",
    long_about = "io_msgs over UCX tag matching with sequence numbers, acknowledgements and \
                  replay: a server restart or a reconnect loses nothing unnoticed, and with \
                  replay on loses nothing.\n\nSubcommands: `server` and `client` (io_demo's \
                  options), `info` (which UCX), `soak` (a server killed again and again while \
                  clients reconnect, judged from audit files), `hostile` (raw UCX traffic \
                  aimed at a server)."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Take io_msgs from clients: writes are taken, reads answered with
    /// io_demo's pattern.
    #[command(after_help = server_help())]
    Server(ServerArgs),
    /// Send io_demo's workload (random reads and writes of random sizes)
    /// to one or more servers and check every reply's bytes.
    #[command(after_help = CLIENT_HELP)]
    Client(ClientArgs),
    /// Which UCX this is: its version, the libucp file loaded, the
    /// transports it offers here; and iomsg's protocol version.
    Info,
    /// Kill the server again and again while clients reconnect (and, with
    /// --faults, kill, pause and cut off clients, pause the server, let a
    /// hostile peer loose); judge the run from the processes' audit files
    /// and exit statuses.
    #[command(args_override_self = true, after_help = soak_help())]
    Soak(Box<SoakArgs>),
    /// Attack a server with raw UCX traffic (random tags, wrong keys,
    /// broken and oversized frames, stalls, floods) and print what it sent
    /// and what the server answered.
    #[command(after_help = hostile::modes_help())]
    Hostile(HostileArgs),
}

#[derive(clap::Args)]
struct HostileArgs {
    /// The server's address, `ADDR:PORT`.
    #[arg(long, value_name = "ADDR:PORT")]
    server: std::net::SocketAddr,
    /// The modes, comma-separated, or `all` (listed below).
    #[arg(long, value_name = "LIST|all", default_value = "all")]
    modes: hostile::Modes,
    /// Seed of the run's choices (order, sizes, keys, delays).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How long to attack (the teardown takes up to a few seconds more).
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// Connections the flood opens at once (silent connections held: a
    /// sixteenth of it, at least 4).
    #[arg(long, default_value_t = 1100)]
    conns: usize,
    /// The UCX API the server uses (`am` or `tag`): the attack speaks it
    /// (the `am-*` modes send active messages whatever it is).
    #[arg(long, value_name = "am|tag", default_value_t = iomsg_ucx::Api::default())]
    api: iomsg_ucx::Api,
    /// The server speaks UCX io_demo's protocol (`iomsg server --io-demo`):
    /// connections open with io_demo's id exchange instead of iomsg's keys.
    #[arg(long)]
    io_demo: bool,
}

const CLIENT_HELP: &str = "Metrics (--metrics), summed over the sessions, as they change \
     (iomsg_ucx::observe): iomsg_client_submitted_total, iomsg_client_acked_total, \
     iomsg_client_replayed_total, iomsg_client_not_replayed_total, \
     iomsg_client_reconnects_total (counters), iomsg_client_handshake_seconds, \
     iomsg_client_ack_latency_seconds (histograms, shown as count and sum).";

fn server_help() -> String {
    format!(
        "Capacity: {} sessions and {} connections at most (a connection past them is \
         refused at once: the client prints \"connection table full ({})\"), a receive \
         window of 2,048 sns per session; the session table takes {} KiB.\n\n\
         Memory: at most {:.0} MiB whatever the peers send ({:.0} MiB for the program and \
         UCX, {:.0} MiB of frames in the transport: 64 MiB received, 64 MiB being sent, \
         32 KiB of batch per connection, the buffer pool). A peer that floods, stalls \
         mid-message or stops reading is closed alone; the others are not delayed.\n\n\
         Metrics (--metrics): iomsg_server_delivered_total, iomsg_server_duplicates_total, \
         iomsg_server_live_loss_sns_total, iomsg_server_in_flight_loss_sns_total, \
         iomsg_server_sessions_opened_total, iomsg_server_rejected_total (counters, as \
         they change: iomsg_ucx::observe), iomsg_server_connections, \
         iomsg_server_sessions (gauges, every second).",
        server::SESSIONS,
        server::CONNS,
        server::CONNS,
        std::mem::size_of::<server::Core>() / 1024,
        soak::server_memory_bound() as f64 / f64::from(1 << 20),
        soak::SERVER_BASE_RSS as f64 / f64::from(1 << 20),
        iomsg_cli::common::ucx_config(false, false, iomsg_ucx::Api::default()).memory_bound()
            as f64
            / f64::from(1 << 20),
    )
}

fn soak_help() -> String {
    let b = soak::stall_bounds();
    format!(
        "Faults (--faults): client-kill (SIGKILL a client; a new client with a new session \
         takes its place, or with --exactly-once the same session from its outbox), \
         client-pause and server-pause (SIGSTOP, SIGCONT after 0.3-0.6 or 1.3-2 times the \
         {:.0} s silence timeout, alternately), link-cut (a client's link down for \
         --cut-for; network namespaces), hostile (`iomsg hostile --modes all` against the \
         server for twice --fault-every). The verdict adds: every server instance ended by \
         the soak's SIGKILL or exit 0 at the end; acknowledgements resume within {:.1} s of \
         a server or a client's own outage ending, and stall no more than {:.1} s \
         otherwise; peak server RSS within --max-server-rss; every client finished. With \
         --exactly-once (kill times and client slots drawn from the seed; 100 server and \
         100 client kills take about 3 minutes at the 1.5 s default) the audit asks \
         instead, per session over all its client generations' records and all the server \
         instances' records: no sn handed over twice, no submitted sn never handed over, \
         no sn used and in no record, the same bytes for an sn in every record; the \
         report's `exactly_once` holds submitted, delivered, duplicates, missing, server \
         and client kills, and names every failure by session, sn range and file. With \
         --io-demo-clients N the clients are unmodified io_demo processes: each server \
         connection is linked to its client by the ids both logged (the server's tag id, \
         or the -A endpoint address and the time), a client's sns are cut into \
         segments by its own `disconnecting ... read X/Y write A/B` lines, and each \
         segment's count N=(Y-X)+(B-A) must cover what no instance answered and stay \
         within what it answered; the ops io_demo forgot are named as those never \
         answered plus the last N-|those| answered in reply order (a FIFO lane delivers \
         a prefix; the replies posted just before a SIGKILL are the ones lost). It fails \
         on a client exit other than 0 or an error in its output, any gap, duplicate, \
         corrupt or malformed message the server logged, an sn lost on a live \
         connection (one no instance saw below one the same connection delivered), a \
         count out of bounds, fewer kills than asked, or a client with no \
         connection on an instance after a kill; report.json and report.txt hold a row \
         per disconnect and the totals.\n\n{}",
        soak::silence_timeout().as_secs_f64(),
        b.recovery.as_secs_f64(),
        b.isolation.as_secs_f64(),
        soak::remote::cli::HELP
    )
}

fn duration(s: &str) -> Result<Duration, String> {
    args::duration(s)
}

fn on_off(s: &str) -> Result<bool, String> {
    args::on_off(s)
}

#[derive(clap::Args)]
struct Common {
    /// Print every event (connections, restarts, losses).
    #[arg(short, long)]
    verbose: bool,
    /// Print a status line this often (0: never).
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = duration)]
    report_interval: Duration,
    /// Sleep on UCX's event fd when there is nothing to do, instead of
    /// busy polling.
    #[arg(short = 'b', long)]
    blocking: bool,
    /// Carry frames over shared memory (posix, sysv, cma) when both ends
    /// are on one host and UCX_TLS allows it; both ends must say so.
    #[arg(long)]
    shared_memory: bool,
    /// Keep audit files (what was handed over or submitted, and events)
    /// in this directory.
    #[arg(long, value_name = "DIR")]
    audit_dir: Option<PathBuf>,
    /// The audit files' name (default: the role and the process id).
    #[arg(long, value_name = "NAME", requires = "audit_dir")]
    audit_name: Option<String>,
    /// Serve the process's metrics in the Prometheus text format over
    /// HTTP on this address (`GET /metrics`; port 0: any free port, the
    /// one chosen is printed). The names are listed below.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<std::net::SocketAddr>,
}

/// Installs the metrics recorder and its endpoint when `--metrics` asks.
fn serve_metrics(common: &Common, role: &str) -> Result<(), ExitCode> {
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

#[derive(clap::Args)]
struct ServerArgs {
    /// Port to listen on.
    #[arg(short, long, default_value_t = 1337)]
    port: u16,
    /// Address to listen on (`ADDR:PORT`; overrides --port).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Sessions held at most (past it, idle ones are evicted).
    #[arg(long, default_value_t = server::SESSIONS)]
    sessions: usize,
    /// Check every write's bytes against io_demo's pattern.
    #[arg(short = 'q', long)]
    validate: bool,
    /// The UCX API that carries the frames: `am` (active messages, like
    /// io_demo's -A) or `tag` (tag matching). Both ends must use the same;
    /// a connection between ends that differ fails saying so.
    #[arg(long, value_name = "am|tag", default_value_t = iomsg_ucx::Api::default())]
    api: iomsg_ucx::Api,
    /// Keep a journal in this directory (DIR/journal, locked by DIR/lock:
    /// one server per journal). A server started on it takes back every
    /// session the last one knew, so that clients' replays of what was
    /// already delivered are acknowledged, not delivered again; with
    /// --audit-dir the audit records past the last acknowledged point are
    /// rolled back (their clients send them again).
    #[arg(long, value_name = "DIR")]
    journal: Option<PathBuf>,
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
    sync: SyncPolicy,
    /// Compact the journal past this size (for tests).
    #[arg(long, hide = true, value_parser = args::size, default_value_t = COMPACT_OVER)]
    journal_compact_over: u64,
    /// Speak UCX io_demo's own protocol instead of iomsg's: serve
    /// unmodified io_demo clients (tag, and -A, told apart per
    /// connection), answer their reads and writes as io_demo's server
    /// does (so their -q checks pass), and track each connection's sns:
    /// sns skipped on a live connection, duplicates, io messages of closed
    /// connections, requests unanswered when a connection ends. --sessions,
    /// --api, --journal and -q do not apply.
    #[arg(long, conflicts_with_all = ["journal", "validate"])]
    io_demo: bool,
    /// io_demo's chunk size (its -k) when the clients use one: tag writes
    /// arrive and tag reads go in chunks of this size.
    #[arg(long, value_name = "SIZE", value_parser = args::size, requires = "io_demo")]
    io_demo_chunk: Option<u64>,
    /// The largest data size of one io_demo operation; a larger request is
    /// refused and its connection closed.
    #[arg(long, value_name = "SIZE", value_parser = args::size, default_value = "16M")]
    io_demo_max_data: u64,
    /// A planted defect (to show the soak finds a loss): drop the N-th
    /// request of every connection without a word.
    #[arg(
        long,
        hide = true,
        value_name = "N",
        default_value_t = 0,
        requires = "io_demo"
    )]
    io_demo_plant_drop: u64,
    #[command(flatten)]
    common: Common,
}

/// What `client` and `soak` both take: the workload and how it is carried.
#[derive(clap::Args)]
struct Workload {
    /// The UCX API that carries the frames: `am` (active messages, like
    /// io_demo's -A) or `tag` (tag matching). Both ends must use the same;
    /// a connection between ends that differ fails saying so.
    #[arg(long, value_name = "am|tag", default_value_t = iomsg_ucx::Api::default())]
    api: iomsg_ucx::Api,
    /// Operations, drawn at random: `read`, `write` or `read,write`.
    #[arg(short, long, default_value = "write")]
    ops: Ops,
    /// Size of each operation's data, `MIN:MAX` (or one size), with K, M,
    /// G suffixes; drawn uniformly. At most 1M.
    #[arg(
        short,
        long = "data-size",
        value_name = "MIN:MAX",
        default_value = "4K"
    )]
    data_size: SizeRange,
    /// Operations in flight at most, over all servers.
    #[arg(short, long, default_value_t = 16)]
    window: u32,
    /// Seed of the workload (operations and sizes) and of the retry
    /// jitter. Session ids come from the OS, never from the seed.
    #[arg(short, long, default_value_t = 1)]
    seed: u64,
    /// Replay what was unacknowledged after a reconnect (`on`: nothing is
    /// lost; `off`: in-flight io_msgs are given up and reported).
    #[arg(long, value_name = "on|off", default_value = "on", value_parser = on_off, action = clap::ArgAction::Set)]
    replay: bool,
    /// Rebuild the UCX context and worker after every disconnect, as the
    /// field report's clients did; the session lives on above them.
    #[arg(long)]
    recreate_context: bool,
}

#[derive(clap::Args)]
struct ClientArgs {
    /// Servers, `HOST[:PORT]`; operations are spread over them, one
    /// session each.
    #[arg(required = true, value_name = "ADDR[:PORT]")]
    servers: Vec<String>,
    /// Port of servers given without one.
    #[arg(short, long, default_value_t = 1337)]
    port: u16,
    /// Operations in all (0: no limit).
    #[arg(short, long, default_value_t = 1000)]
    iterations: u64,
    /// Operations in flight at most per server (at most 1024).
    #[arg(long, default_value_t = 16)]
    conn_window: u32,
    /// No reply for this long while operations are in flight: the
    /// connection is dead and is made again.
    #[arg(short = 't', long, value_name = "TIME", default_value = "2s", value_parser = duration)]
    reply_timeout: Duration,
    /// How long a connection attempt may take.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = duration)]
    connect_timeout: Duration,
    /// Consecutive failed connection attempts before giving up (a number
    /// or `inf`). The client gives up only once these attempts failed
    /// and --retry-for has passed since the first of them.
    #[arg(short, long, default_value = "20")]
    retries: Retries,
    /// Keep retrying for at least this long after a connection is lost,
    /// whatever --retries says: attempts that fail at once (a network
    /// unreachable for a while) are spaced by --retry-interval, so an
    /// outage of up to this long is survived. `0`: --retries alone
    /// decides.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration)]
    retry_for: Duration,
    /// Delay between connection attempts (±20 % jitter).
    #[arg(long, value_name = "TIME", default_value = "100ms", value_parser = duration)]
    retry_interval: Duration,
    /// Keep retrying while the server's table is full, even before the
    /// server ever let this client in. Without it such a client fails at
    /// once, naming the full table (nothing of its session is on the
    /// server); a client let in before retries in any case. Refusals that
    /// no retry changes (the other --api, another protocol version,
    /// another client's session) fail at once whatever is set.
    #[arg(long)]
    retry_full_table: bool,
    /// Stop after this long (`17.5s`, `10m`, `1.5h`), then wait for what
    /// is in flight.
    #[arg(short = 'l', long, value_name = "TIME", value_parser = duration)]
    run_time: Option<Duration>,
    /// After stopping, wait this long at most for acknowledgements.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration)]
    drain: Duration,
    /// Payload CRCs on every frame, checked by the receiver.
    #[arg(short = 'q', long)]
    validate: bool,
    /// Write a JSON report here at the end.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
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
    outbox: Option<PathBuf>,
    /// When the outbox reaches the disk: `none` (write(2): enough for a
    /// killed process), `batch` (fdatasync at most every 10 ms), `always`
    /// (fdatasync before every poll that may send).
    #[arg(
        long,
        value_name = "none|batch|always",
        default_value = "batch",
        requires = "outbox"
    )]
    sync: SyncPolicy,
    /// Compact the outbox past this size (for tests).
    #[arg(long, hide = true, value_parser = args::size, default_value_t = COMPACT_OVER)]
    outbox_compact_over: u64,
    /// Speak UCX io_demo's own protocol, to an unmodified io_demo server
    /// (`--api tag`, or `--api am` for a server started with -A): one
    /// server; every operation the server leaves unanswered when a
    /// connection ends is named (io_demo's own client forgets them), and
    /// every answer's bytes are checked. --window is the operations in
    /// flight; --replay, --outbox and --recreate-context do not apply.
    #[arg(long, conflicts_with = "outbox")]
    io_demo: bool,
    /// io_demo's io message size (its -r).
    #[arg(long, value_name = "SIZE", value_parser = args::size, default_value = "256", requires = "io_demo")]
    io_demo_msg_size: u64,
    /// io_demo's chunk size (its -k), if the server was given one.
    #[arg(long, value_name = "SIZE", value_parser = args::size, requires = "io_demo")]
    io_demo_chunk: Option<u64>,
    #[command(flatten)]
    workload: Workload,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args)]
#[command(
    mut_arg("window", |a| a
        .default_value("256")
        .help("Operations in flight per client (at most 1024)")),
    mut_arg("data_size", |a| a.default_value("64:4K")),
    mut_arg("seed", |a| a.help("Seed of the kill and fault times and the clients' workloads")),
    mut_arg("replay", |a| a.help(
        "Clients replay after reconnects (`off` shows what is lost without it, every sn named)"
    )),
    mut_arg("recreate_context", |a| a
        .help("Clients rebuild their UCX context after every disconnect")),
)]
struct SoakArgs {
    /// Clients, each its own process and session [default: 2; with
    /// --launcher, one per client host].
    #[arg(short = 'n', long)]
    clients: Option<usize>,
    /// UCX_TLS for every process (`tcp`; `tcp,posix,sysv,cma,self` for
    /// shared memory on one host) [default: tcp; with --launcher unset,
    /// UCX picks on each host (verbs where there is RDMA)].
    #[arg(long)]
    tls: Option<String>,
    /// Mean time between server kills (SIGKILL), jittered ±30 % by the
    /// seed [default: 5s; 1.5s with --exactly-once].
    #[arg(long, value_name = "TIME", value_parser = duration)]
    kill_every: Option<Duration>,
    /// Exactly once across crashes of either side: the server instances
    /// keep one journal (`--journal AUDIT_DIR/journal --sync none`), each
    /// client slot an outbox kept across its restarts (`--outbox
    /// AUDIT_DIR/outbox-K --sync none`), and after each server kill one
    /// client, drawn from the seed, is SIGKILLed 5-65 % of --kill-every
    /// later and restarted at once on its outbox (the same session). The
    /// verdict asks every sn the clients submitted to be handed over
    /// exactly once over all the server instances, and names each
    /// duplicate and missing sn. Needs replay.
    #[arg(long, conflicts_with = "sim")]
    exactly_once: bool,
    /// With --exactly-once: damage the journal between each server kill
    /// and the next instance, in turn (a seeded order): cut back 1-3
    /// commits at a batch's end (what a power cut under a lazy sync, or
    /// an older copy restored, leaves), cut inside the last batch (a torn
    /// write), garbage appended, one byte changed early, half way, or in
    /// the last batch. The verdict asks every outcome named: a changed
    /// byte refused by the next instance (naming the journal and the
    /// offset; the soak then puts the journal back and starts another), a
    /// torn tail cut and said, sns acknowledged past a cut named by the
    /// clients (StateLost) and what they send again announced; every
    /// duplicate and missing sn an announced or named one.
    #[arg(long, requires = "exactly_once")]
    journal_faults: bool,
    /// Server kills to do.
    #[arg(long, default_value_t = 12, conflicts_with = "duration")]
    kills: u32,
    /// Run this long instead of a number of kills.
    #[arg(long, value_name = "TIME", value_parser = duration)]
    duration: Option<Duration>,
    /// `local` (this host, loopback device) or `netns` (root: a server
    /// host and a host per client, network namespaces joined by veth
    /// pairs, 169.254.78.0/24) [default: local; netns when the faults
    /// include link-cut].
    #[arg(long, value_name = "local|netns")]
    hosts: Option<String>,
    /// Faults besides the server kills, at moments drawn from the seed:
    /// `all`, `none`, or a comma list of client-kill, client-pause,
    /// server-pause, link-cut, hostile.
    #[arg(long, value_name = "LIST", default_value = "none")]
    faults: String,
    /// Mean time between two faults, jittered ±30 % by the seed
    /// [default: --kill-every].
    #[arg(long, value_name = "TIME", value_parser = duration)]
    fault_every: Option<Duration>,
    /// Fail when a server instance's peak RSS passes this (K, M, G)
    /// [default: the server's memory bound for its configuration].
    #[arg(long, value_name = "SIZE", value_parser = args::size)]
    max_server_rss: Option<u64>,
    /// Also take client links down for a while: the link-cut fault
    /// (needs --hosts netns).
    #[arg(long)]
    cut_links: bool,
    /// How long a cut link stays down.
    #[arg(long, value_name = "TIME", default_value = "4s", value_parser = duration)]
    cut_for: Duration,
    /// Audit files go here (a new directory; default
    /// `iomsg-soak-<time>` in the temporary directory).
    #[arg(long, value_name = "DIR")]
    audit_dir: Option<PathBuf>,
    /// The JSON report (default `report.json` in the audit directory).
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// The timeline picture (default: the report's name with `.svg`).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// A status line this often when stderr is not a terminal (a progress
    /// bar when it is).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = duration)]
    report_interval: Duration,
    /// After the last kill, clients get this long to finish.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration)]
    drain: Duration,
    /// Keep the audit records (24 bytes per message and side) after a
    /// pass; after a fail they are always kept.
    #[arg(long)]
    keep_records: bool,
    /// Run the deterministic simulation instead (loopback transport,
    /// virtual time; --kills, --clients, --seed, --replay apply).
    #[arg(long, conflicts_with = "launcher")]
    sim: bool,
    /// Run N unmodified io_demo clients (`-q -o read,write`, `-d`
    /// from --data-size, `-w` from --window, `-A` with --api am, `-y
    /// 0.2s -t 10s -i 0`, `-l` past the last kill) against `iomsg server
    /// --io-demo`, SIGKILLed --kills times about every --kill-every and
    /// restarted; the verdict is judged from the clients' own output and
    /// the instances' audit files (see below). Clients are told apart by
    /// the ids both sides log, so all may run on the loopback device.
    #[arg(long, value_name = "N", conflicts_with_all = ["sim", "exactly_once", "duration", "launcher"])]
    io_demo_clients: Option<usize>,
    /// The io_demo program for --io-demo-clients (looked up on PATH).
    #[arg(long, value_name = "PATH", default_value = "io_demo")]
    io_demo_bin: PathBuf,
    /// A planted defect: every server instance drops the N-th request of
    /// each connection without a word; the verdict must fail naming it.
    #[arg(
        long,
        hide = true,
        value_name = "N",
        default_value_t = 0,
        requires = "io_demo_clients"
    )]
    io_demo_plant_drop: u64,
    #[command(flatten)]
    across: soak::remote::cli::LauncherArgs,
    #[command(flatten)]
    workload: Workload,
}

fn audit(common: &Common, role: &str) -> Option<(PathBuf, String)> {
    let dir = common.audit_dir.clone()?;
    let name = common
        .audit_name
        .clone()
        .unwrap_or_else(|| format!("{role}-{}", std::process::id()));
    Some((dir, name))
}

fn run_server(a: ServerArgs) -> ExitCode {
    if let Err(code) = serve_metrics(&a.common, "server") {
        return code;
    }
    if a.io_demo {
        return run_iodemo_server(a);
    }
    let job = server::ServerJob {
        listen: a
            .listen
            .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], a.port))),
        sessions: a.sessions,
        validate: a.validate,
        verbose: a.common.verbose,
        report_interval: a.common.report_interval,
        blocking: a.common.blocking,
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

fn run_iodemo_client(a: ClientArgs, servers: &[std::net::SocketAddr]) -> ExitCode {
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
        tag: w.api == iomsg_ucx::Api::Tag,
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

fn run_iodemo_server(a: ServerArgs) -> ExitCode {
    let mut opts = iomsg_ucx::iodemo::IoDemoOptions {
        max_data: a.io_demo_max_data,
        plant_drop: a.io_demo_plant_drop,
        ..Default::default()
    };
    if let Some(chunk) = a.io_demo_chunk {
        opts.chunk = chunk.max(1);
    }
    let job = iomsg_cli::iodemo_server::IoDemoJob {
        listen: a
            .listen
            .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], a.port))),
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

fn run_client(a: ClientArgs) -> ExitCode {
    let mut servers = Vec::new();
    for s in &a.servers {
        match args::server_addr(s, a.port) {
            Ok(addr) => servers.push(addr),
            Err(e) => {
                eprintln!("iomsg client: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if a.io_demo {
        return run_iodemo_client(a, &servers);
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
        blocking: a.common.blocking,
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

fn run_info() -> ExitCode {
    use std::io::Write as _;
    // A reader that stops early (`| head`) is no error of ours.
    let _ = std::io::stdout()
        .lock()
        .write_all(iomsg_cli::info::text().as_bytes());
    ExitCode::SUCCESS
}

fn run_soak(a: SoakArgs) -> ExitCode {
    if a.sim {
        return run_sim(&a);
    }
    let mut faults = match soak::faults::parse_list(&a.faults) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("iomsg soak: --faults: {e}");
            return ExitCode::from(2);
        }
    };
    if a.cut_links && !faults.contains(&soak::Fault::LinkCut) {
        faults.push(soak::Fault::LinkCut);
    }
    let cut = faults.contains(&soak::Fault::LinkCut);
    let hosts = match a.hosts.as_deref() {
        None if cut => {
            println!("iomsg soak: link-cut cuts veth links: running with --hosts netns");
            soak::Hosts::Netns
        }
        None | Some("local") if cut => {
            eprintln!("iomsg soak: the link-cut fault needs --hosts netns (root), not local");
            return ExitCode::from(2);
        }
        None | Some("local") => soak::Hosts::Local,
        Some("netns") => soak::Hosts::Netns,
        Some(other) => {
            eprintln!("iomsg soak: --hosts {other:?}: local or netns");
            return ExitCode::from(2);
        }
    };
    if a.workload.window == 0 || a.workload.window > client::MAX_CONN_WINDOW {
        eprintln!(
            "iomsg soak: --window must be 1 to {}",
            client::MAX_CONN_WINDOW
        );
        return ExitCode::from(2);
    }
    if a.fault_every
        .is_some_and(|d| d < Duration::from_millis(100))
    {
        eprintln!("iomsg soak: --fault-every must be at least 100ms");
        return ExitCode::from(2);
    }
    if a.exactly_once && !a.workload.replay {
        eprintln!(
            "iomsg soak: --exactly-once needs replay: a client that gives up what was in flight \
             at a reconnect loses it by design; leave out --replay off"
        );
        return ExitCode::from(2);
    }
    let kill_every = a.kill_every.unwrap_or(if a.exactly_once {
        soak::EXACTLY_ONCE_KILL_EVERY
    } else {
        Duration::from_secs(5)
    });
    if kill_every < Duration::from_millis(100) {
        eprintln!("iomsg soak: --kill-every must be at least 100ms");
        return ExitCode::from(2);
    }
    let audit_dir = a.audit_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "iomsg-soak-{}-{}",
            iomsg_cli::common::epoch_us() / 1_000_000,
            std::process::id()
        ))
    });
    let report = a.report.unwrap_or_else(|| audit_dir.join("report.json"));
    let plot = a.plot.unwrap_or_else(|| report.with_extension("svg"));
    let remote = match a.across.job() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("iomsg soak: {e}");
            return ExitCode::from(2);
        }
    };
    let job = soak::SoakJob {
        clients: a
            .clients
            .unwrap_or_else(|| remote.as_ref().map_or(2, |r| r.clients.len())),
        tls: a.tls.unwrap_or_else(|| {
            if remote.is_some() {
                String::new()
            } else {
                "tcp".into()
            }
        }),
        api: a.workload.api,
        kill_every,
        kills: a.kills,
        duration: a.duration,
        seed: a.workload.seed,
        replay: a.workload.replay,
        exactly_once: a.exactly_once,
        journal_faults: a.journal_faults,
        hosts,
        faults,
        fault_every: a.fault_every.unwrap_or(kill_every),
        cut_for: a.cut_for,
        max_server_rss: a.max_server_rss.unwrap_or_else(soak::server_memory_bound),
        recreate_context: a.workload.recreate_context,
        ops: a.workload.ops.0,
        sizes: a.workload.data_size,
        window: a.workload.window,
        audit_dir,
        report,
        plot,
        report_interval: a.report_interval,
        drain: a.drain,
        keep_records: a.keep_records,
        remote,
    };
    if let Some(n) = a.io_demo_clients {
        // The field's mix, both directions validated, whatever --ops says.
        let job = soak::SoakJob {
            ops: vec![iomsg_cli::args::Op::Read, iomsg_cli::args::Op::Write],
            ..job
        };
        let io = soak::iodemo::IoDemoJob {
            clients: n,
            bin: a.io_demo_bin,
            plant_drop: a.io_demo_plant_drop,
        };
        return if soak::iodemo::run_and_show(&job, &io) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    println!(
        "iomsg soak: 1 server, {} clients, UCX_TLS={}, {} kills about every {}, replay {}{}, audit in {}",
        job.clients,
        if job.tls.is_empty() {
            "unset (UCX picks on each host)"
        } else {
            &job.tls
        },
        job.duration.map_or(job.kills.to_string(), |d| format!("for {}", iomsg_cli::common::human(d))),
        iomsg_cli::common::human(job.kill_every),
        if job.replay { "on" } else { "off" },
        match (job.exactly_once, job.journal_faults) {
            (true, true) => ", exactly once (journal, outboxes, a client kill after each server kill), the journal damaged at each kill",
            (true, false) => ", exactly once (journal, outboxes, a client kill after each server kill)",
            _ => "",
        },
        job.audit_dir.display()
    );
    if !job.faults.is_empty() {
        let b = soak::stall_bounds();
        println!(
            "iomsg soak: faults {} about every {}; stall bounds {} after an outage, {} otherwise; server RSS at most {:.1} MB",
            job.faults.iter().map(|f| f.name()).collect::<Vec<_>>().join(","),
            iomsg_cli::common::human(job.fault_every),
            iomsg_cli::common::human(b.recovery),
            iomsg_cli::common::human(b.isolation),
            job.max_server_rss as f64 / 1e6
        );
    }
    match soak::run(&job) {
        Ok(r) => {
            print!("{}", soak::table(&r));
            println!("  report: {}", job.report.display());
            println!("  picture: {}", job.plot.display());
            if r.verdict == "pass" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("iomsg soak: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_hostile(a: HostileArgs) -> ExitCode {
    if a.conns == 0 || a.conns > iomsg_ucx::hostile::MAX_CONNS {
        eprintln!(
            "iomsg hostile: --conns must be 1 to {}",
            iomsg_ucx::hostile::MAX_CONNS
        );
        return ExitCode::from(2);
    }
    let job = hostile::HostileJob {
        server: a.server,
        modes: a.modes.0,
        seed: a.seed,
        duration: a.duration,
        conns: a.conns,
        api: a.api,
        protocol: if a.io_demo {
            iomsg_ucx::hostile::Protocol::IoDemo
        } else {
            iomsg_ucx::hostile::Protocol::Iomsg
        },
    };
    match hostile::run(&job) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iomsg hostile: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_sim(a: &SoakArgs) -> ExitCode {
    use iomsg_loopback::sim;
    let mut s = sim::Scenario::field_repro(a.workload.seed, u64::from(a.kills));
    s.clients = a.clients.unwrap_or(2);
    s.replay = a.workload.replay;
    s.rebuild_transport = a.workload.recreate_context;
    let report = match sim::run(&s) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("iomsg soak --sim: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{report}");
    let kills = s.crash.map_or(0, |c| c.max_kills);
    if report.kills == kills && report.passed() && (!s.replay || report.lost_total() == 0) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    // Before any thread and any UCX context: a restarted server listens on
    // its port again at once, and the open-files limit admits a full
    // connection table.
    let ucx = iomsg_cli::common::ucx_config(false, false, iomsg_ucx::Api::default());
    for (name, value) in ucx.environment() {
        if std::env::var_os(name).is_none() {
            std::env::set_var(name, value);
        }
    }
    iomsg_ucx::raise_open_files(ucx.open_files());
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // One clear line, exit code 2.
            let text = e.to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            eprintln!("iomsg: {first} (see `iomsg --help`)");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Cmd::Server(a) => run_server(a),
        Cmd::Client(a) => run_client(a),
        Cmd::Info => run_info(),
        Cmd::Soak(a) => run_soak(*a),
        Cmd::Hostile(a) => run_hostile(a),
    }
}
