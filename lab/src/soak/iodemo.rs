//! `iomsg soak --io-demo-clients N`: the field report's run with the
//! field's own client. N unmodified io_demo client processes run against
//! `iomsg server --io-demo`, which is SIGKILLed on a jittered schedule
//! and restarted on its port; after the last kill the server runs until
//! every client has exited (bounded), then the verdict comes from the
//! files the processes wrote: each client's own output and each
//! instance's audit files ([`crate::audit::iodemo`]).
//!
//! The judge links a server connection to its client by the ids both
//! logged ([`crate::audit::iodemo::link`]), so every process may run on
//! the loopback device (`--network local`, the default); with `--network
//! netns` (root) each runs in a network namespace of its own, each client
//! at its own link-local address.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as Wall};

use iomsg_core::rng::SplitMix64;

use super::lab::{free_port, Lab, LAB_NET, LAB_PORT};
use super::verdict::Exit;
use super::{Hosts, SoakJob};
use crate::args::Op;
use crate::audit::iodemo::{self, IoDemoClient, IoDemoJudged};
use crate::common::epoch_us;

mod report;
#[cfg(test)]
mod tests;
mod timeline;

pub use report::{table, IoDemoSoakReport};

/// What `--io-demo-clients` adds to a soak job.
#[derive(Clone, Debug)]
pub struct IoDemoJob {
    /// io_demo client processes.
    pub clients: usize,
    /// The io_demo program (a name is looked up on `PATH`).
    pub bin: PathBuf,
    /// A planted defect: the servers drop the N-th request of each
    /// connection without a word (0: none).
    pub plant_drop: u64,
}

/// io_demo's retry interval between connection attempts (its default, 5
/// s, would leave clients away for most of a kill interval).
pub const RETRY_INTERVAL: &str = "0.2s";
/// io_demo's reply timeout.
pub const CLIENT_TIMEOUT: &str = "10s";
/// After the last kill the clients run at least this much longer.
pub const TAIL: Duration = Duration::from_secs(5);
/// After their run-time limit, clients get this long to exit before they
/// are killed and the run fails (io_demo checks its limit only between
/// connection attempts, which UCX may hold up to 20 s).
pub const EXIT_GRACE: Duration = Duration::from_secs(30);

/// Where the processes run and how they reach each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The server's `--listen` address.
    pub listen: String,
    /// The address clients connect to.
    pub server: String,
    /// Each client's IP address as the server sees it.
    pub client_ips: Vec<String>,
}

impl Placement {
    /// The addresses for `clients` clients, in the lab or on loopback
    /// (`port`).
    pub fn new(clients: usize, lab: bool, port: u16) -> Placement {
        if lab {
            Placement {
                listen: format!("0.0.0.0:{LAB_PORT}"),
                server: format!("{LAB_NET}.1:{LAB_PORT}"),
                client_ips: (0..clients)
                    .map(|k| format!("{LAB_NET}.{}", k + 2))
                    .collect(),
            }
        } else {
            Placement {
                listen: format!("127.0.0.1:{port}"),
                server: format!("127.0.0.1:{port}"),
                client_ips: vec!["127.0.0.1".into(); clients],
            }
        }
    }
}

/// `iomsg server --io-demo`'s arguments for instance `name`.
pub fn server_args(job: &SoakJob, io: &IoDemoJob, listen: &str, name: &str) -> Vec<String> {
    let dir = job.audit_dir.display().to_string();
    let mut args: Vec<String> = [
        "server",
        "--io-demo",
        "--listen",
        listen,
        "--audit-dir",
        &dir,
        "--audit-name",
        name,
        "--api",
        job.api.name(),
    ]
    .map(str::to_string)
    .to_vec();
    if io.plant_drop > 0 {
        args.extend(["--io-demo-plant-drop".into(), io.plant_drop.to_string()]);
    }
    args
}

/// io_demo client `k`'s arguments, running `run_time`.
pub fn client_args(job: &SoakJob, k: usize, server: &str, run_time: Duration) -> Vec<String> {
    let ops: Vec<&str> = job
        .ops
        .iter()
        .map(|o| match o {
            Op::Read => "read",
            Op::Write => "write",
        })
        .collect();
    let seed = (job.seed.wrapping_add(k as u64 + 1) & 0xffff_ffff).to_string();
    let mut a: Vec<String> = vec!["-q".into()];
    if job.api == crate::transport::Api::Am {
        a.push("-A".into());
    }
    for (flag, value) in [
        ("-o", ops.join(",")),
        ("-d", format!("{}:{}", job.sizes.min, job.sizes.max)),
        ("-w", job.window.to_string()),
        ("-i", "0".into()),
        ("-y", RETRY_INTERVAL.into()),
        ("-t", CLIENT_TIMEOUT.into()),
        ("-l", format!("{:.1}s", run_time.as_secs_f64())),
        ("-s", seed),
    ] {
        a.push(flag.into());
        a.push(value);
    }
    a.push(server.into());
    a
}

/// The kill times from the clients' start: `kills` gaps of `every`
/// jittered ±30 % by `seed` (as the regular soak draws them).
pub fn kill_times(seed: u64, every: Duration, kills: u32) -> Vec<Duration> {
    let mut rng = SplitMix64::new(seed);
    let mut at = Duration::ZERO;
    (0..kills)
        .map(|_| {
            let f = 0.7 + 0.6 * (rng.below(1_000_000) as f64 / 1_000_000.0);
            at += every.mul_f64(f);
            at
        })
        .collect()
}

/// The clients' run-time limit: past the last kill by `TAIL` or one kill
/// interval, whichever is longer.
pub fn run_time(kills: &[Duration], every: Duration) -> Duration {
    kills.last().copied().unwrap_or(Duration::ZERO) + TAIL.max(every)
}

/// One server instance of the run.
struct Instance {
    name: String,
    child: Child,
    pid: u32,
    from_us: u64,
    end: Option<String>,
}

/// One io_demo client.
struct ClientProc {
    name: String,
    child: Child,
    pid: u32,
    exit: Option<Exit>,
    killed: bool,
}

/// One run of the hostile peer (`--faults hostile`), speaking io_demo's
/// protocol.
struct HostileProc {
    name: String,
    child: Child,
    /// The API it spoke.
    api: crate::transport::Api,
    exit: Option<Exit>,
}

/// The processes of the run; those still running are killed (by pid) on
/// drop, before the lab's namespaces go.
struct World<'a> {
    job: &'a SoakJob,
    io: &'a IoDemoJob,
    lab: Option<Lab>,
    at: Placement,
    instances: Vec<Instance>,
    clients: Vec<ClientProc>,
    reasons: Vec<String>,
    /// When each kill was sent (µs since the epoch).
    kills_us: Vec<u64>,
    /// The hostile peer's runs, in order.
    hostiles: Vec<HostileProc>,
}

impl Drop for World<'_> {
    fn drop(&mut self) {
        let children = self
            .instances
            .iter_mut()
            .map(|i| &mut i.child)
            .chain(self.clients.iter_mut().map(|c| &mut c.child))
            .chain(self.hostiles.iter_mut().map(|h| &mut h.child));
        for c in children {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl World<'_> {
    /// A command run on `host` (a client index, or the server), with the
    /// soak's UCX settings.
    fn command(&self, program: &Path, host: Option<usize>) -> Command {
        let (mut c, device) = match &self.lab {
            Some(lab) => {
                let ns = host.map_or(&lab.server_ns, |k| &lab.client_ns[k]);
                let dev = host.map_or(&lab.bridge, |k| &lab.client_dev[k]);
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                (c, dev.clone())
            }
            None => (Command::new(program), "lo".to_string()),
        };
        c.env("UCX_TLS", &self.job.tls)
            .env("UCX_NET_DEVICES", device)
            .env("UCX_TCP_CM_REUSEADDR", "y")
            .stdin(Stdio::null());
        c
    }

    /// Starts the next server instance and waits until its audit log says
    /// it listens (it is retried while the port is still held).
    fn start_server(&mut self, exe: &Path) -> Result<(), String> {
        let dir = &self.job.audit_dir;
        let name = format!("server-{}", self.instances.len());
        for _attempt in 0..20 {
            let out = dir.join(format!("{name}.out"));
            let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let mut c = self.command(exe, None);
            c.args(server_args(self.job, self.io, &self.at.listen, &name))
                .stdout(file.try_clone().map_err(|e| e.to_string())?)
                .stderr(file);
            let from_us = epoch_us();
            let mut child = c.spawn().map_err(|e| format!("cannot start {name}: {e}"))?;
            if wait_listening(&mut child, &dir.join(format!("{name}.log")), &name)? {
                self.instances.push(Instance {
                    name,
                    pid: child.id(),
                    child,
                    from_us,
                    end: None,
                });
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "{name} could not start: {}",
            fs::read_to_string(dir.join(format!("{name}.out"))).unwrap_or_default()
        ))
    }

    /// Starts io_demo client `k`, its output in `DIR/client-k.log`.
    fn start_client(&mut self, k: usize, run_time: Duration) -> Result<(), String> {
        let name = format!("client-{k}");
        let out = self.job.audit_dir.join(format!("{name}.log"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let mut c = self.command(&self.io.bin, Some(k));
        c.args(client_args(self.job, k, &self.at.server, run_time))
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file);
        let child = c.spawn().map_err(|e| {
            format!(
                "cannot start io_demo ({}): {e}; give --io-demo-bin",
                self.io.bin.display()
            )
        })?;
        self.clients.push(ClientProc {
            name,
            pid: child.id(),
            child,
            exit: None,
            killed: false,
        });
        Ok(())
    }

    /// Starts hostile run `i` against the server for `hold`: every mode,
    /// io_demo's protocol, tag on even runs and `-A` on odd ones, from the
    /// server's host.
    fn start_hostile(&mut self, exe: &Path, i: usize, hold: Duration) -> Result<(), String> {
        let name = format!("hostile-{i}");
        let out = self.job.audit_dir.join(format!("{name}.out"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let api = if i % 2 == 0 {
            crate::transport::Api::Tag
        } else {
            crate::transport::Api::Am
        };
        let mut c = self.command(exe, None);
        let seed = self.job.seed;
        c.args(super::hostile_args(
            &self.at.server,
            "all",
            api,
            true,
            seed,
            i,
            hold,
        ))
        .stdout(file.try_clone().map_err(|e| e.to_string())?)
        .stderr(file);
        let child = c.spawn().map_err(|e| format!("cannot start {name}: {e}"))?;
        self.hostiles.push(HostileProc {
            name,
            child,
            api,
            exit: None,
        });
        Ok(())
    }

    /// Notes the hostile runs that ended; true when all have.
    fn hostiles_done(&mut self) -> bool {
        for h in self.hostiles.iter_mut().filter(|h| h.exit.is_none()) {
            if let Ok(Some(st)) = h.child.try_wait() {
                h.exit = Some(Exit::of(st));
            }
        }
        self.hostiles.iter().all(|h| h.exit.is_some())
    }

    /// SIGKILLs the running instance and starts the next.
    fn kill_server(&mut self, exe: &Path) -> Result<(), String> {
        self.kills_us.push(epoch_us());
        if let Some(s) = self.instances.last_mut() {
            let _ = s.child.kill();
            s.end = Some(match s.child.wait() {
                Ok(st) => format!("killed: {}", Exit::of(st)),
                Err(e) => format!("killed: {e}"),
            });
        }
        self.start_server(exe)
    }

    /// An instance that ended by itself: a failure, and replaced.
    fn replace_dead_server(&mut self, exe: &Path) -> Result<(), String> {
        let Some(s) = self.instances.last_mut() else {
            return Ok(());
        };
        let Ok(Some(st)) = s.child.try_wait() else {
            return Ok(());
        };
        s.end = Some(format!("died: {}", Exit::of(st)));
        self.reasons
            .push(format!("{} died by itself: {}", s.name, Exit::of(st)));
        self.start_server(exe)
    }

    /// Notes clients that exited; true when all have.
    fn clients_done(&mut self) -> bool {
        for c in self.clients.iter_mut().filter(|c| c.exit.is_none()) {
            if let Ok(Some(st)) = c.child.try_wait() {
                c.exit = Some(Exit::of(st));
            }
        }
        self.clients.iter().all(|c| c.exit.is_some())
    }

    /// SIGTERM to the last instance; SIGKILL if it has not ended in 5 s.
    fn stop_server(&mut self) {
        let Some(s) = self.instances.last_mut() else {
            return;
        };
        if s.end.is_some() {
            return;
        }
        if let Ok(pid) = i32::try_from(s.pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let until = Wall::now() + Duration::from_secs(5);
        while Wall::now() < until {
            if let Ok(Some(st)) = s.child.try_wait() {
                s.end = Some(format!("stopped: {}", Exit::of(st)));
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = s.child.kill();
        let _ = s.child.wait();
        s.end = Some("hung after SIGTERM, killed".into());
        self.reasons
            .push(format!("{} did not end within 5 s of SIGTERM", s.name));
    }
}

/// Waits (15 s at most) for the instance's audit log to hold its
/// `listening` line; false if it exited first (its port still held).
fn wait_listening(child: &mut Child, log: &Path, name: &str) -> Result<bool, String> {
    let deadline = Wall::now() + Duration::from_secs(15);
    loop {
        let text = fs::read_to_string(log).unwrap_or_default();
        if text
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("listening"))
        {
            return Ok(true);
        }
        if let Ok(Some(_)) = child.try_wait() {
            return Ok(false);
        }
        if Wall::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{name} did not listen in 15 s (no `listening` in {})",
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the io_demo soak; returns the report (also written to
/// `job.report`).
///
/// # Errors
///
/// The processes or namespaces could not be set up, or the files could
/// not be read or written.
pub fn run(job: &SoakJob, io: &IoDemoJob) -> Result<IoDemoSoakReport, String> {
    check(job, io)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let stop = crate::common::stop_on_signals()?;
    let lab = if lab_needed(job) {
        Some(Lab::new(io.clients)?)
    } else {
        None
    };
    let port = if lab.is_some() {
        LAB_PORT
    } else {
        free_port()?
    };
    let kills = kill_times(job.seed, job.kill_every, job.kills);
    let limit = run_time(&kills, job.kill_every);
    let mut w = World {
        job,
        io,
        at: Placement::new(io.clients, lab.is_some(), port),
        lab,
        instances: Vec::new(),
        clients: Vec::new(),
        reasons: Vec::new(),
        kills_us: Vec::new(),
        hostiles: Vec::new(),
    };
    w.start_server(&exe)?;
    let started = Wall::now();
    for k in 0..io.clients {
        w.start_client(k, limit)?;
    }
    let done = supervise(&mut w, &exe, &kills, started, limit, &stop)?;
    w.stop_server();
    let seconds = started.elapsed().as_secs_f64();
    finish(&mut w, done, limit, seconds)
}

/// Runs the io_demo soak from the command line: a line saying what runs,
/// then the report's table or the error; true on a pass.
pub fn run_and_show(job: &SoakJob, io: &IoDemoJob) -> bool {
    println!(
        "iomsg soak: iomsg server --io-demo, {} io_demo clients ({}), {} kills about every {}, \
         audit in {}",
        io.clients,
        io.bin.display(),
        job.kills,
        crate::common::human(job.kill_every),
        job.audit_dir.display()
    );
    match run(job, io) {
        Ok(r) => {
            print!("{}", table(&r));
            println!("  report: {}", job.report.display());
            println!("  picture: {}", job.plot.display());
            r.verdict == "pass"
        }
        Err(e) => {
            eprintln!("iomsg soak: {e}");
            false
        }
    }
}

/// Kills on schedule, then waits for the clients (bounded); returns the
/// kills done.
fn supervise(
    w: &mut World<'_>,
    exe: &Path,
    kills: &[Duration],
    started: Wall,
    limit: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<u32, String> {
    let mut done = 0u32;
    let give_up = started + limit + EXIT_GRACE;
    let hostile = hostile_times(w.job, kills);
    loop {
        if let Some(&(at, hold)) = hostile.get(w.hostiles.len()) {
            if started.elapsed() >= at {
                let i = w.hostiles.len();
                w.start_hostile(exe, i, hold)?;
                eprintln!(
                    "soak: t={:.1}s hostile peer {i} ({}) for {:.1} s",
                    started.elapsed().as_secs_f64(),
                    w.hostiles[i].api,
                    hold.as_secs_f64()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("interrupted: the processes were stopped".into());
        }
        w.replace_dead_server(exe)?;
        if let Some(&at) = kills.get(done as usize) {
            if started.elapsed() >= at {
                w.kill_server(exe)?;
                done += 1;
                eprintln!(
                    "soak: t={:.1}s kill {done}/{} (server-{} now)",
                    started.elapsed().as_secs_f64(),
                    kills.len(),
                    w.instances.len() - 1
                );
            }
        }
        let all_exited = w.clients_done() && w.hostiles_done();
        if all_exited && done as usize >= kills.len() && w.hostiles.len() >= hostile.len() {
            return Ok(done);
        }
        if all_exited || Wall::now() > give_up {
            break;
        }
    }
    for h in w.hostiles.iter_mut().filter(|h| h.exit.is_none()) {
        let _ = h.child.kill();
        let _ = h.child.wait();
        w.reasons.push(format!(
            "{} had not ended {} s after the clients' run-time limit: killed",
            h.name,
            EXIT_GRACE.as_secs()
        ));
    }
    for c in w.clients.iter_mut().filter(|c| c.exit.is_none()) {
        let _ = c.child.kill();
        let _ = c.child.wait();
        c.killed = true;
        w.reasons.push(format!(
            "{} (pid {}) had not exited {} s after its run-time limit: killed",
            c.name,
            c.pid,
            EXIT_GRACE.as_secs()
        ));
    }
    Ok(done)
}

/// With `--faults hostile`, when each hostile run starts (from the
/// clients' start) and how long it attacks: one halfway to each kill and
/// one halfway from the last kill to the clients' end, each a third of
/// the gap (at most the fault's usual 8 s), so that no run meets a kill.
pub fn hostile_times(job: &SoakJob, kills: &[Duration]) -> Vec<(Duration, Duration)> {
    if !job.faults.contains(&super::Fault::Hostile) {
        return Vec::new();
    }
    let end = run_time(kills, job.kill_every);
    let mut marks = vec![Duration::ZERO];
    marks.extend_from_slice(kills);
    marks.push(end);
    marks
        .windows(2)
        .filter_map(|w| {
            let gap = w[1].saturating_sub(w[0]);
            let hold = (gap / 3).min(Duration::from_secs(8));
            (hold >= Duration::from_secs(1)).then_some((w[0] + gap / 3, hold))
        })
        .collect()
}

/// Whether the run needs the namespaces: `--network netns`.
fn lab_needed(job: &SoakJob) -> bool {
    job.hosts == Hosts::Netns
}

/// Checks the job; the audit directory made and empty.
fn check(job: &SoakJob, io: &IoDemoJob) -> Result<(), String> {
    if io.clients == 0 {
        return Err("--io-demo-clients must be at least 1".into());
    }
    let only_hostile = job.faults.iter().all(|f| *f == super::Fault::Hostile);
    if !only_hostile || job.exactly_once || job.duration.is_some() {
        return Err(
            "--io-demo-clients runs server kills and, with --faults hostile, the hostile peer: \
             leave out the other faults, --exactly-once and --duration (use --kills)"
                .into(),
        );
    }
    fs::create_dir_all(&job.audit_dir)
        .map_err(|e| format!("cannot create {}: {e}", job.audit_dir.display()))?;
    let empty = fs::read_dir(&job.audit_dir)
        .map_err(|e| e.to_string())?
        .next()
        .is_none();
    if !empty {
        return Err(format!(
            "the audit directory {} is not empty: give a new one (--audit-dir)",
            job.audit_dir.display()
        ));
    }
    Ok(())
}

/// The judge, the verdict, the report file.
fn finish(
    w: &mut World<'_>,
    kills: u32,
    limit: Duration,
    seconds: f64,
) -> Result<IoDemoSoakReport, String> {
    let job = w.job;
    let names: Vec<String> = w.instances.iter().map(|i| i.name.clone()).collect();
    let clients: Vec<IoDemoClient> = w
        .clients
        .iter()
        .enumerate()
        .map(|(k, c)| IoDemoClient {
            name: c.name.clone(),
            peer_ip: w.at.client_ips[k].clone(),
            exit_code: c.exit.and_then(|e| e.code),
        })
        .collect();
    let strangers = !w.hostiles.is_empty();
    let judged: IoDemoJudged = iodemo::judge(&job.audit_dir, &names, &clients, kills, strangers)?;
    let mut reasons = std::mem::take(&mut w.reasons);
    for h in &w.hostiles {
        if let Some(e) = h.exit.filter(|e| e.code != Some(0)) {
            let out = job.audit_dir.join(format!("{}.out", h.name));
            let said = fs::read_to_string(&out).unwrap_or_default();
            let last = said.lines().last().unwrap_or("").to_string();
            reasons.push(format!("{} ({}) did not run: {e}: {last}", h.name, h.api));
        }
    }
    if kills < job.kills {
        reasons.push(format!("only {kills} of {} kills happened", job.kills));
    }
    reasons.extend(judged.failures.iter().cloned());
    let r = report::build(w, &clients, judged, reasons, kills, limit, seconds);
    let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
    fs::write(&job.report, json)
        .map_err(|e| format!("cannot write {}: {e}", job.report.display()))?;
    let text = job.report.with_extension("txt");
    fs::write(&text, table(&r)).map_err(|e| format!("cannot write {}: {e}", text.display()))?;
    let run = timeline::Run {
        start_us: w.instances.first().map_or(0, |i| i.from_us),
        kills_us: &w.kills_us,
        restarts_us: &w.instances.iter().map(|i| i.from_us).collect::<Vec<_>>(),
        clients: w
            .clients
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    job.audit_dir.join(format!("{}.log", c.name)),
                )
            })
            .collect(),
    };
    let title = format!(
        "iomsg soak, io_demo clients: {} ({} kills, {} forgotten by io_demo, {} named)",
        r.verdict.to_uppercase(),
        kills,
        r.judge.totals.forgotten,
        r.judge.totals.named
    );
    if let Err(e) = timeline::write(&run, &r.judge, title, &job.plot) {
        eprintln!("iomsg soak: no timeline picture: {e}");
    }
    if r.verdict == "pass" && !job.keep_records {
        // Judged: the records (24 bytes per request and per answer) are
        // large, and the report holds what they showed.
        for e in fs::read_dir(&job.audit_dir)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            if e.path().extension().is_some_and(|x| x == "records") {
                let _ = fs::remove_file(e.path());
            }
        }
        println!("  audit records removed after the pass (--keep-records keeps them)");
    }
    Ok(r)
}
