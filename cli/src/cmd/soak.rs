//! `iomsg soak`: the field report reproduced and judged; `--sim` for the simulation.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use iomsg_cli::{client, server};
use iomsg_lab::args;
use iomsg_lab::soak;
use iomsg_lab::transport::Transport;

use super::common::{duration, Workload};

mod across;

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
pub(crate) struct SoakArgs {
    /// Clients, each its own process and session [default: 2; with
    /// --launcher, one per client host].
    #[arg(short = 'n', long)]
    pub(crate) clients: Option<usize>,
    /// UCX_TLS for every process (`tcp`; `tcp,posix,sysv,cma,self` for
    /// shared memory on one host) [default: tcp; with --launcher unset,
    /// UCX picks on each host (verbs where there is RDMA)].
    #[arg(long = "ucx-tls", alias = "tls")]
    pub(crate) tls: Option<String>,
    /// What carries the frames between the soak's servers and clients:
    /// `ucx` (the default) or `tcp` (plain sockets: no UCX needed). The
    /// judges are the same; the hostile fault and io_demo clients speak
    /// UCX only.
    #[arg(long, value_name = "ucx|tcp", default_value_t = Transport::default())]
    pub(crate) transport: Transport,
    /// Mean time between server kills (SIGKILL), jittered ±30 % by the
    /// seed [default: 5s; 1.5s with --exactly-once].
    #[arg(long, value_name = "TIME", value_parser = duration)]
    pub(crate) kill_every: Option<Duration>,
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
    pub(crate) exactly_once: bool,
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
    pub(crate) journal_faults: bool,
    /// Server kills to do.
    #[arg(long, default_value_t = 12, conflicts_with = "duration")]
    pub(crate) kills: u32,
    /// Run this long instead of a number of kills.
    #[arg(long, value_name = "TIME", value_parser = duration)]
    pub(crate) duration: Option<Duration>,
    /// `local` (this host, loopback device) or `netns` (root: a server
    /// host and a host per client, network namespaces joined by veth
    /// pairs, 169.254.78.0/24) [default: local; netns when the faults
    /// include link-cut].
    #[arg(long = "network", alias = "hosts", value_name = "local|netns")]
    pub(crate) hosts: Option<String>,
    /// Faults besides the server kills, at moments drawn from the seed:
    /// `all`, `none`, or a comma list of client-kill, client-pause,
    /// server-pause, link-cut, hostile.
    #[arg(long, value_name = "LIST", default_value = "none")]
    pub(crate) faults: String,
    /// Mean time between two faults, jittered ±30 % by the seed
    /// [default: --kill-every].
    #[arg(long, value_name = "TIME", value_parser = duration)]
    pub(crate) fault_every: Option<Duration>,
    /// Fail when a server instance's peak RSS passes this (K, M, G)
    /// [default: the server's memory bound for its configuration].
    #[arg(long, value_name = "SIZE", value_parser = args::size)]
    pub(crate) max_server_rss: Option<u64>,
    /// Also take client links down for a while: the link-cut fault
    /// (needs --network netns).
    #[arg(long)]
    pub(crate) cut_links: bool,
    /// How long a cut link stays down.
    #[arg(long, value_name = "TIME", default_value = "4s", value_parser = duration)]
    pub(crate) cut_for: Duration,
    /// Audit files go here (a new directory; default
    /// `iomsg-soak-<time>` in the temporary directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) audit_dir: Option<PathBuf>,
    /// The JSON report (default `report.json` in the audit directory).
    #[arg(long = "report-json", alias = "report", value_name = "FILE.json")]
    pub(crate) report: Option<PathBuf>,
    /// The timeline picture (default: the report's name with `.svg`).
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<PathBuf>,
    /// A status line this often when stderr is not a terminal (a progress
    /// bar when it is).
    #[arg(long, value_name = "TIME", default_value = "5s", value_parser = duration)]
    pub(crate) report_interval: Duration,
    /// After the last kill, clients get this long to finish.
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = duration)]
    pub(crate) drain: Duration,
    /// Keep the audit records (24 bytes per message and side) after a
    /// pass; after a fail they are always kept.
    #[arg(long)]
    pub(crate) keep_records: bool,
    /// Run the deterministic simulation instead (loopback transport,
    /// virtual time; --kills, --clients, --seed, --replay apply).
    #[arg(long, conflicts_with = "launcher")]
    pub(crate) sim: bool,
    /// Run N unmodified io_demo clients (`-q -o read,write`, `-d`
    /// from --data-size, `-w` from --window, `-A` with --api am, `-y
    /// 0.2s -t 10s -i 0`, `-l` past the last kill) against `iomsg server
    /// --io-demo`, SIGKILLed --kills times about every --kill-every and
    /// restarted; the verdict is judged from the clients' own output and
    /// the instances' audit files (see below). Clients are told apart by
    /// the ids both sides log, so all may run on the loopback device.
    #[arg(long, value_name = "N", conflicts_with_all = ["sim", "exactly_once", "duration", "launcher"])]
    pub(crate) io_demo_clients: Option<usize>,
    /// The io_demo program for --io-demo-clients (looked up on PATH).
    #[arg(long, value_name = "PATH", default_value = "io_demo")]
    pub(crate) io_demo_bin: PathBuf,
    /// A planted defect: every server instance drops the N-th request of
    /// each connection without a word; the verdict must fail naming it.
    #[arg(
        long,
        hide = true,
        value_name = "N",
        default_value_t = 0,
        requires = "io_demo_clients"
    )]
    pub(crate) io_demo_plant_drop: u64,
    #[command(flatten)]
    pub(crate) across: across::LauncherArgs,
    #[command(flatten)]
    pub(crate) workload: Workload,
}

pub(crate) fn soak_help() -> String {
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
        across::HELP
    )
}

pub(crate) fn run_soak(a: SoakArgs) -> ExitCode {
    if a.sim {
        return run_sim(&a);
    }
    let (job, io_demo) = match soak_job(a) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("iomsg soak: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(io) = io_demo {
        // The field's mix, both directions validated, whatever --ops says.
        let job = soak::SoakJob {
            ops: vec![iomsg_lab::args::Op::Read, iomsg_lab::args::Op::Write],
            ..job
        };
        return if soak::iodemo::run_and_show(&job, &io) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    print_plan(&job);
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

/// The faults asked (`--faults`, `--cut-links`) and where the processes
/// run (`--network`; a link cut needs network namespaces).
fn faults_and_hosts(a: &SoakArgs) -> Result<(Vec<soak::Fault>, soak::Hosts), String> {
    let mut faults = soak::faults::parse_list(&a.faults).map_err(|e| format!("--faults: {e}"))?;
    if a.cut_links && !faults.contains(&soak::Fault::LinkCut) {
        faults.push(soak::Fault::LinkCut);
    }
    let cut = faults.contains(&soak::Fault::LinkCut);
    let hosts = match a.hosts.as_deref() {
        None if cut => {
            println!("iomsg soak: link-cut cuts veth links: running with --network netns");
            soak::Hosts::Netns
        }
        None | Some("local") if cut => {
            return Err("the link-cut fault needs --network netns (root), not local".into());
        }
        None | Some("local") => soak::Hosts::Local,
        Some("netns") => soak::Hosts::Netns,
        Some(other) => return Err(format!("--network {other:?}: local or netns")),
    };
    Ok((faults, hosts))
}

/// The time between server kills: `--kill-every`, or its default.
fn kill_every(a: &SoakArgs) -> Result<Duration, String> {
    if a.workload.window == 0 || a.workload.window > client::MAX_CONN_WINDOW {
        return Err(format!("--window must be 1 to {}", client::MAX_CONN_WINDOW));
    }
    if a.fault_every
        .is_some_and(|d| d < Duration::from_millis(100))
    {
        return Err("--fault-every must be at least 100ms".into());
    }
    if a.exactly_once && !a.workload.replay {
        return Err(
            "--exactly-once needs replay: a client that gives up what was in flight at a \
             reconnect loses it by design; leave out --replay off"
                .into(),
        );
    }
    let kill_every = a.kill_every.unwrap_or(if a.exactly_once {
        soak::EXACTLY_ONCE_KILL_EVERY
    } else {
        Duration::from_secs(5)
    });
    if kill_every < Duration::from_millis(100) {
        return Err("--kill-every must be at least 100ms".into());
    }
    Ok(kill_every)
}

/// The soak `a` asks for, and with `--io-demo-clients` the io_demo part;
/// or the usage error that refuses it.
fn soak_job(a: SoakArgs) -> Result<(soak::SoakJob, Option<soak::iodemo::IoDemoJob>), String> {
    let (faults, hosts) = faults_and_hosts(&a)?;
    match a.transport {
        Transport::Ucx => {}
        Transport::Unix => {
            return Err(
                "--transport unix: the soak runs over ucx or tcp (its hosts may be \
                        network namespaces or other machines)"
                    .into(),
            )
        }
        Transport::Tcp if faults.contains(&soak::Fault::Hostile) => {
            return Err("--transport tcp: the hostile fault speaks UCX; leave it out".into())
        }
        Transport::Tcp if a.io_demo_clients.is_some() => {
            return Err(
                "--transport tcp: io_demo clients speak UCX; leave out --io-demo-clients".into(),
            )
        }
        Transport::Tcp => {}
    }
    let kill_every = kill_every(&a)?;
    let audit_dir = a.audit_dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!(
            "iomsg-soak-{}-{}",
            iomsg_lab::common::epoch_us() / 1_000_000,
            std::process::id()
        ))
    });
    let report = a.report.unwrap_or_else(|| audit_dir.join("report.json"));
    let plot = a.plot.unwrap_or_else(|| report.with_extension("svg"));
    let remote = a.across.job()?;
    let io_demo = a.io_demo_clients.map(|clients| soak::iodemo::IoDemoJob {
        clients,
        bin: a.io_demo_bin,
        plant_drop: a.io_demo_plant_drop,
    });
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
        transport: a.transport,
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
        max_server_rss: a.max_server_rss.unwrap_or_else(server::server_memory_bound),
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
    Ok((job, io_demo))
}

/// The lines that say what the soak will do, before it starts.
fn print_plan(job: &soak::SoakJob) {
    println!(
        "iomsg soak: 1 server, {} clients, {}, {} kills about every {}, replay {}{}, audit in {}",
        job.clients,
        match (job.transport.is_ucx(), job.tls.is_empty()) {
            (false, _) => format!("over {} (no UCX)", job.transport),
            (true, true) => "UCX_TLS unset (UCX picks on each host)".into(),
            (true, false) => format!("UCX_TLS={}", job.tls),
        },
        job.duration.map_or(job.kills.to_string(), |d| format!("for {}", iomsg_lab::common::human(d))),
        iomsg_lab::common::human(job.kill_every),
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
            iomsg_lab::common::human(job.fault_every),
            iomsg_lab::common::human(b.recovery),
            iomsg_lab::common::human(b.isolation),
            job.max_server_rss as f64 / 1e6
        );
    }
}

pub(crate) fn run_sim(a: &SoakArgs) -> ExitCode {
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
