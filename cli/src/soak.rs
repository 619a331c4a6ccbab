//! `iomsg soak`: the field report's reproduction on real UCX. One server
//! and N clients as separate processes (this same binary), the server
//! SIGKILLed again and again and restarted on its port while the clients
//! reconnect and replay; with `--faults`, also clients killed and
//! restarted, clients and the server paused, client links cut and a
//! hostile peer let loose; then the verdict, from the processes' own
//! audit files rather than the protocol's counters, and from how every
//! process ended.

use std::fs;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant as Wall};

use iomsg_core::rng::SplitMix64;

use crate::args::{Op, SizeRange};
use crate::common::{self, epoch_us};

pub mod faults;
mod judge;
mod lab;
mod report;
pub mod verdict;

pub use faults::Fault;
pub use report::{grouped, table, SoakReport};

use lab::{Lab, LAB_NET, LAB_PORT};
use verdict::{Bounds, ClientEnd, Event, Exit, Kind, ServerEnd};

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
    pub api: iomsg_ucx::Api,
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
    /// Where the processes run.
    pub hosts: Hosts,
    /// The faults besides the server kills (`link-cut` needs netns).
    pub faults: Vec<Fault>,
    /// Mean time between two faults.
    pub fault_every: Duration,
    /// How long a cut link stays down.
    pub cut_for: Duration,
    /// The server's peak RSS may not pass this (bytes).
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
}

/// How often the soak's clients write a status line and an audit
/// `sample` (their acknowledgements so far): the stall measurement's
/// resolution.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// The soak's clients' connect timeout (`--connect-timeout`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The soak's clients' reply timeout (`--reply-timeout`).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// The silence timeout of the UCX transport the server and the clients
/// run with (their default liveness): a peer silent this long is dead.
pub fn silence_timeout() -> Duration {
    iomsg_ucx::Liveness::default().timeout
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

/// What a server process takes besides the buffers the UCX transport
/// and the session table account for: the program, the UCX libraries, its
/// context and worker, and UCX's own per-connection state (measured: 11 MB
/// at rest, 21 MB holding a full table of 1,024 connections from the
/// hostile peer's flood, 24 MB after every hostile mode).
pub const SERVER_BASE_RSS: u64 = 64 << 20;

/// The server's worst-case memory for `iomsg server`'s configuration,
/// whatever its peers send: [`SERVER_BASE_RSS`], the session table, and
/// the UCX transport's own bound (`UcxConfig::memory_bound`: receive and
/// send memory, batches, the buffer pool). The soak holds every server
/// instance's peak RSS to it (`--max-server-rss`); `iomsg server --help`
/// states it.
pub fn server_memory_bound() -> u64 {
    SERVER_BASE_RSS
        + std::mem::size_of::<crate::server::Core>() as u64
        + crate::common::ucx_config(false, false, iomsg_ucx::Api::default()).memory_bound()
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Waits for `child` to exit, at most `limit`; kills it (SIGKILL) after.
fn reap(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Wall::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Wall::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One server instance.
struct Instance {
    name: String,
    child: Option<Child>,
    pid: u32,
    from_us: u64,
    to_us: u64,
    peak_rss: u64,
    end: ServerEnd,
}

impl Instance {
    fn sample_rss(&mut self) {
        if let Some((hwm, now)) = verdict::rss(self.pid) {
            self.peak_rss = self.peak_rss.max(hwm).max(now);
        }
    }
}

/// One client process.
struct ClientProc {
    slot: usize,
    name: String,
    child: Option<Child>,
    pid: u32,
    from_us: u64,
    to_us: Option<u64>,
    restarted: bool,
    end: Option<ClientEnd>,
}

/// One run of the hostile peer.
struct HostileRun {
    name: String,
    child: Option<Child>,
    from_us: u64,
    to_us: u64,
    end: Option<Result<Exit, &'static str>>,
}

/// Every process the soak started; those still running are killed (by
/// pid) on drop.
#[derive(Default)]
struct World {
    instances: Vec<Instance>,
    clients: Vec<ClientProc>,
    hostiles: Vec<HostileRun>,
}

impl Drop for World {
    fn drop(&mut self) {
        let children = self
            .instances
            .iter_mut()
            .filter_map(|i| i.child.as_mut())
            .chain(self.clients.iter_mut().filter_map(|c| c.child.as_mut()))
            .chain(self.hostiles.iter_mut().filter_map(|h| h.child.as_mut()));
        for c in children {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl World {
    fn server(&mut self) -> Option<&mut Instance> {
        self.instances.last_mut().filter(|i| i.child.is_some())
    }

    fn client(&mut self, slot: usize) -> Option<&mut ClientProc> {
        self.clients
            .iter_mut()
            .rev()
            .find(|c| c.slot == slot && c.end.is_none())
    }
}

struct Runner<'a> {
    job: &'a SoakJob,
    exe: PathBuf,
    lab: Option<Lab>,
    port: u16,
    faults_log: Option<fs::File>,
    t0: u64,
}

impl Runner<'_> {
    fn command(&self, host: Option<usize>, device: &str) -> Command {
        let mut c = match (&self.lab, host) {
            (Some(lab), h) => {
                let ns = h.map_or(&lab.server_ns, |k| &lab.client_ns[k]);
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&self.exe);
                c
            }
            (None, _) => Command::new(&self.exe),
        };
        c.env("UCX_TLS", &self.job.tls)
            .env("UCX_NET_DEVICES", device)
            .stdin(Stdio::null());
        c
    }

    fn shared_memory(&self) -> bool {
        ["posix", "sysv", "cma", "shm"]
            .iter()
            .any(|t| self.job.tls.split(',').any(|x| x == *t))
    }

    fn server_addr(&self) -> String {
        match self.lab {
            Some(_) => format!("{LAB_NET}.1:{}", self.port),
            None => format!("127.0.0.1:{}", self.port),
        }
    }

    fn server_device(&self) -> String {
        self.lab
            .as_ref()
            .map_or("lo".to_string(), |l| l.bridge.clone())
    }

    /// Notes a fault in `faults.log` (time, what, details).
    fn note(&mut self, what: std::fmt::Arguments<'_>) {
        if let Some(f) = self.faults_log.as_mut() {
            let _ = writeln!(f, "{} {what}", epoch_us());
        }
    }

    /// Starts server instance `n` and waits until it listens.
    fn start_server(&self, n: usize) -> Result<Instance, String> {
        let dir = &self.job.audit_dir;
        let device = self.server_device();
        let bind = match self.lab {
            Some(_) => format!("0.0.0.0:{}", self.port),
            None => format!("127.0.0.1:{}", self.port),
        };
        let name = format!("server-{n}");
        for attempt in 0..20 {
            let out = dir.join(format!("{name}.out"));
            let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let mut c = self.command(None, &device);
            c.args(["server", "--listen", &bind, "--audit-dir"])
                .arg(dir)
                .args(["--audit-name", &name])
                .stdout(file.try_clone().map_err(|e| e.to_string())?)
                .stderr(file);
            if self.shared_memory() {
                c.arg("--shared-memory");
            }
            c.args(["--api", self.job.api.name()]);
            let from_us = epoch_us();
            let mut child = c
                .spawn()
                .map_err(|e| format!("cannot start the server: {e}"))?;
            let deadline = Wall::now() + Duration::from_secs(15);
            loop {
                let text = fs::read_to_string(&out).unwrap_or_default();
                if text.contains("listening on") {
                    return Ok(Instance {
                        name,
                        pid: child.id(),
                        child: Some(child),
                        from_us,
                        to_us: 0,
                        peak_rss: 0,
                        end: ServerEnd::Unknown,
                    });
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Wall::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{name} did not listen in 15 s: {text}"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // It exited (its port still held, say): try again shortly.
            if attempt == 19 {
                return Err(format!(
                    "{name} could not start: {}",
                    fs::read_to_string(&out).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err("unreachable".into())
    }

    /// Starts client process `gen` of slot `k` (a new session, its own
    /// audit files).
    fn start_client(&self, k: usize, gen: u32) -> Result<ClientProc, String> {
        let dir = &self.job.audit_dir;
        let device = self
            .lab
            .as_ref()
            .map_or("lo".to_string(), |l| l.client_dev[k].clone());
        let name = if gen == 0 {
            format!("client-{k}")
        } else {
            format!("client-{k}.{gen}")
        };
        let out = dir.join(format!("{name}.out"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let ops: Vec<&str> = self
            .job
            .ops
            .iter()
            .map(|o| match o {
                Op::Write => "write",
                Op::Read => "read",
            })
            .collect();
        let seed = self
            .job
            .seed
            .wrapping_add(k as u64 + 1)
            .wrapping_add(u64::from(gen) << 32);
        let mut c = self.command(Some(k), &device);
        c.args(["client", &self.server_addr()])
            .args(["--ops", &ops.join(",")])
            .args(["--data-size", &self.job.sizes.to_string()])
            .args(["--window", &self.job.window.to_string()])
            .args(["--conn-window", &self.job.window.to_string()])
            .args([
                "--iterations",
                "0",
                "--retries",
                "inf",
                "--retry-interval",
                "10ms",
            ])
            .args([
                "--connect-timeout",
                &format!("{}ms", CONNECT_TIMEOUT.as_millis()),
                "--reply-timeout",
                &format!("{}ms", REPLY_TIMEOUT.as_millis()),
            ])
            .args([
                "--report-interval",
                &format!("{}ms", SAMPLE_EVERY.as_millis()),
            ])
            .args(["--seed", &seed.to_string()])
            .args(["--replay", if self.job.replay { "on" } else { "off" }])
            .args(["--drain", &format!("{}s", self.job.drain.as_secs_f64())])
            .arg("--audit-dir")
            .arg(dir)
            .args(["--audit-name", &name])
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file);
        if self.job.recreate_context {
            c.arg("--recreate-context");
        }
        if self.shared_memory() {
            c.arg("--shared-memory");
        }
        c.args(["--api", self.job.api.name()]);
        let from_us = epoch_us();
        let child = c.spawn().map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(ClientProc {
            slot: k,
            name,
            pid: child.id(),
            child: Some(child),
            from_us,
            to_us: None,
            restarted: gen > 0,
            end: None,
        })
    }

    /// Starts run `i` of the hostile peer, for `hold`.
    fn start_hostile(&self, i: usize, hold: Duration) -> Result<HostileRun, String> {
        let name = format!("hostile-{i}");
        let out = self.job.audit_dir.join(format!("{name}.out"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        // In the lab it runs on the server's host, through its bridge.
        let mut c = self.command(None, &self.server_device());
        c.args(["hostile", "--server", &self.server_addr()])
            .args(["--modes", &hostile_modes(self.job.api)])
            .args(["--api", self.job.api.name()])
            .args([
                "--seed",
                &self.job.seed.wrapping_add(1000 + i as u64).to_string(),
            ])
            .args(["--duration", &format!("{}ms", hold.as_millis())])
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file);
        let child = c.spawn().map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(HostileRun {
            name,
            child: Some(child),
            from_us: epoch_us(),
            to_us: 0,
            end: None,
        })
    }
}

/// Whether this program has the `hostile` subcommand.
fn has_hostile(exe: &Path) -> bool {
    Command::new(exe)
        .args(["hostile", "--help"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The hostile fault's modes against a server on `api`: every one, but
/// on active messages not `oversized`, whose memory UCX 1.13.1 spends
/// before the transport can refuse it (README, "Isolation").
pub fn hostile_modes(api: iomsg_ucx::Api) -> String {
    use iomsg_ucx::hostile::Mode;
    Mode::ALL
        .iter()
        .filter(|m| api == iomsg_ucx::Api::Tag || **m != Mode::Oversized)
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// The last `status` line of a client's output: acked so far, rate, and
/// the sns it gave up so far.
fn client_status(path: &Path) -> Option<(u64, f64, u64)> {
    let text = fs::read_to_string(path).ok()?;
    let line = text.lines().rfind(|l| l.starts_with("status "))?;
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
    };
    Some((
        field("acked")? as u64,
        field("rate")?,
        field("not_replayed")? as u64 + field("reads_corrupt")? as u64,
    ))
}

/// A free TCP port on 127.0.0.1 (the OS's pick), for the server to use
/// across its restarts.
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// A fault under way.
struct Active {
    fault: Fault,
    client: usize,
    pid: u32,
    from_us: u64,
    until: Wall,
    /// The hostile run's index in `World::hostiles`.
    hostile: Option<usize>,
}

/// Runs the soak; returns the report (also written to `job.report`).
///
/// # Errors
///
/// The processes or namespaces could not be set up, or the files could
/// not be read or written.
pub fn run(job: &SoakJob) -> Result<SoakReport, String> {
    if job.clients == 0 {
        return Err("--clients must be at least 1".into());
    }
    if job.faults.contains(&Fault::LinkCut) && job.hosts != Hosts::Netns {
        return Err(
            "the link-cut fault needs --hosts netns (root): client links are veth pairs there"
                .into(),
        );
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    if job.faults.contains(&Fault::Hostile) && !has_hostile(&exe) {
        return Err(format!(
            "the hostile fault runs `{} hostile`, and this iomsg has no `hostile` subcommand: \
             leave hostile out of --faults",
            exe.display()
        ));
    }
    if job.audit_dir.exists()
        && fs::read_dir(&job.audit_dir)
            .map_err(|e| e.to_string())?
            .next()
            .is_some()
    {
        return Err(format!(
            "the audit directory {} is not empty: give a new one (--audit-dir)",
            job.audit_dir.display()
        ));
    }
    fs::create_dir_all(&job.audit_dir)
        .map_err(|e| format!("cannot create {}: {e}", job.audit_dir.display()))?;
    let stop = common::stop_on_signals()?;
    let lab = match job.hosts {
        Hosts::Netns => Some(Lab::new(job.clients)?),
        Hosts::Local => None,
    };
    let port = match lab {
        Some(_) => LAB_PORT,
        None => free_port()?,
    };
    let faults_log = if job.faults.is_empty() {
        None
    } else {
        let p = job.audit_dir.join("faults.log");
        Some(fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?)
    };
    let mut runner = Runner {
        job,
        exe,
        lab,
        port,
        faults_log,
        t0: epoch_us(),
    };
    let planned = match job.duration {
        Some(d) => (d.as_secs_f64() / job.kill_every.as_secs_f64()).floor() as u32,
        None => job.kills,
    };
    let span = job
        .duration
        .unwrap_or_else(|| job.kill_every * planned.max(1));
    let plan = faults::plan(
        job.seed,
        &job.faults,
        &faults::PlanParams {
            span,
            every: job.fault_every,
            clients: job.clients,
            silence: silence_timeout(),
            cut_for: job.cut_for,
            hostile_for: job.fault_every * 2,
        },
    );
    for p in &plan {
        runner.note(format_args!(
            "planned {} client {} at {:.3}s for {:.3}s",
            p.fault.name(),
            p.client,
            p.at.as_secs_f64(),
            p.hold.as_secs_f64()
        ));
    }
    let started = Wall::now();
    let t0 = runner.t0;
    let mut rng = SplitMix64::new(job.seed);
    let mut jitter = |mean: Duration| {
        let f = 0.7 + 0.6 * (rng.below(1_000_000) as f64 / 1_000_000.0);
        mean.mul_f64(f)
    };
    let mut world = World::default();
    world.instances.push(runner.start_server(0)?);
    let mut gens = vec![0u32; job.clients];
    for k in 0..job.clients {
        world.clients.push(runner.start_client(k, 0)?);
    }
    let end_of_kills = job.duration;
    let mut kills = 0u32;
    let mut kills_us = Vec::new();
    let mut next_kill = Wall::now() + jitter(job.kill_every);
    let mut last_kill_at = Wall::now();
    let mut last_fault_end = Wall::now();
    let mut events: Vec<Event> = Vec::new();
    let mut active: Vec<Active> = Vec::new();
    let mut next_planned = 0usize;
    let terminal = std::io::stderr().is_terminal();
    let mut last_status = Wall::now();
    let mut last_rss = Wall::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) {
            return Err(
                "interrupted: the processes were stopped and the namespaces deleted".into(),
            );
        }
        let now = Wall::now();
        let kills_done = match end_of_kills {
            Some(d) => started.elapsed() >= d,
            None => kills >= job.kills,
        };
        let faults_done = next_planned >= plan.len() && active.is_empty();
        if kills_done && faults_done {
            // Traffic after the last kill and the last fault, so that the
            // last instance and the last recovery are seen to work, then
            // stop.
            let settled = now >= last_fault_end + job.kill_every.min(Duration::from_secs(5));
            if settled && (end_of_kills.is_some() || now >= last_kill_at + job.kill_every) {
                break;
            }
        }
        // A server instance that died by itself: noted, and replaced.
        let died = world.server().and_then(|s| {
            let status = s.child.as_mut()?.try_wait().ok()??;
            Some((s.name.clone(), Exit::of(status)))
        });
        if let Some((name, exit)) = died {
            let at = epoch_us();
            if let Some(s) = world.server() {
                s.end = ServerEnd::Died(exit);
                s.to_us = at;
                s.child = None;
            }
            active.retain(|a| a.fault != Fault::ServerPause);
            runner.note(format_args!("died {name} {exit}"));
            eprintln!("soak: {name} died: {exit}; starting another");
            let n = world.instances.len();
            world.instances.push(runner.start_server(n)?);
            events.push(Event {
                kind: Kind::ServerDied,
                client: None,
                from_us: at,
                to_us: epoch_us(),
            });
        }
        if now >= last_rss + Duration::from_millis(100) {
            if let Some(s) = world.server() {
                s.sample_rss();
            }
            last_rss = now;
        }
        let server_paused = active.iter().any(|a| a.fault == Fault::ServerPause);
        if !kills_done && now >= next_kill && !server_paused {
            let at = epoch_us();
            if let Some(s) = world.server() {
                s.sample_rss();
                if let Some(mut c) = s.child.take() {
                    let _ = c.kill();
                    s.end = c
                        .wait()
                        .map_or(ServerEnd::Unknown, |st| ServerEnd::Killed(Exit::of(st)));
                }
                s.to_us = at;
            }
            kills_us.push(at);
            kills += 1;
            last_kill_at = Wall::now();
            let n = world.instances.len();
            world.instances.push(runner.start_server(n)?);
            events.push(Event {
                kind: Kind::ServerKill,
                client: None,
                from_us: at,
                to_us: epoch_us(),
            });
            next_kill = Wall::now() + jitter(job.kill_every);
        }
        // Faults whose time has come, unless their target is still busy.
        while let Some(p) = plan.get(next_planned) {
            if started.elapsed() < p.at {
                break;
            }
            let busy = active.iter().any(|a| {
                a.fault == p.fault && !p.fault.on_client()
                    || a.fault.on_client() && p.fault.on_client() && a.client == p.client
            });
            if busy {
                break;
            }
            next_planned += 1;
            let at = epoch_us();
            let until = Wall::now() + p.hold;
            let k = p.client;
            match p.fault {
                Fault::ClientKill => {
                    let Some(c) = world.client(k) else { continue };
                    let name = c.name.clone();
                    if let Some(mut child) = c.child.take() {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                    c.end = Some(ClientEnd::Killed);
                    c.to_us = Some(at);
                    gens[k] += 1;
                    let fresh = runner.start_client(k, gens[k])?;
                    runner.note(format_args!("client-kill {name} new {}", fresh.name));
                    events.push(Event {
                        kind: Kind::ClientKill,
                        client: Some(k),
                        from_us: at,
                        to_us: fresh.from_us,
                    });
                    world.clients.push(fresh);
                }
                Fault::ClientPause | Fault::ServerPause => {
                    let target = if p.fault == Fault::ClientPause {
                        world.client(k).map(|c| (c.pid, c.name.clone(), k))
                    } else {
                        world.server().map(|s| (s.pid, s.name.clone(), 0))
                    };
                    let Some((pid, name, client)) = target else {
                        continue;
                    };
                    signal(pid, nix::sys::signal::Signal::SIGSTOP);
                    runner.note(format_args!(
                        "{} {name} for {:.3}s",
                        p.fault.name(),
                        p.hold.as_secs_f64()
                    ));
                    active.push(Active {
                        fault: p.fault,
                        client,
                        pid,
                        from_us: at,
                        until,
                        hostile: None,
                    });
                }
                Fault::LinkCut => {
                    if let Some(lab) = runner.lab.as_ref() {
                        lab.link(k, false)?;
                    }
                    runner.note(format_args!(
                        "link-cut client-{k} for {:.3}s",
                        p.hold.as_secs_f64()
                    ));
                    active.push(Active {
                        fault: p.fault,
                        client: k,
                        pid: 0,
                        from_us: at,
                        until,
                        hostile: None,
                    });
                }
                Fault::Hostile => {
                    let h = runner.start_hostile(world.hostiles.len(), p.hold)?;
                    runner.note(format_args!(
                        "hostile {} for {:.3}s",
                        h.name,
                        p.hold.as_secs_f64()
                    ));
                    world.hostiles.push(h);
                    active.push(Active {
                        fault: p.fault,
                        client: 0,
                        pid: 0,
                        from_us: at,
                        until,
                        hostile: Some(world.hostiles.len() - 1),
                    });
                }
            }
        }
        // Faults whose time is up.
        let mut i = 0;
        while i < active.len() {
            let a = &active[i];
            let now = Wall::now();
            if now < a.until {
                i += 1;
                continue;
            }
            let (kind, client) = match a.fault {
                Fault::ClientPause => {
                    signal(a.pid, nix::sys::signal::Signal::SIGCONT);
                    (Kind::ClientPause, Some(a.client))
                }
                Fault::ServerPause => {
                    signal(a.pid, nix::sys::signal::Signal::SIGCONT);
                    (Kind::ServerPause, None)
                }
                Fault::LinkCut => {
                    if let Some(lab) = runner.lab.as_ref() {
                        lab.link(a.client, true)?;
                    }
                    (Kind::LinkCut, Some(a.client))
                }
                Fault::Hostile => {
                    // It stops by itself after its --duration; give it
                    // 15 s more, then kill it.
                    let Some(h) = a.hostile.and_then(|n| world.hostiles.get_mut(n)) else {
                        active.swap_remove(i);
                        continue;
                    };
                    let exited = h.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
                    match exited {
                        Some(st) => h.end = Some(Ok(Exit::of(st))),
                        None if now >= a.until + Duration::from_secs(15) => {
                            if let Some(mut c) = h.child.take() {
                                let _ = c.kill();
                                let _ = c.wait();
                            }
                            h.end = Some(Err("did not stop 15 s after its duration; killed"));
                        }
                        None => {
                            i += 1;
                            continue;
                        }
                    }
                    h.child = None;
                    h.to_us = epoch_us();
                    (Kind::Hostile, None)
                }
                Fault::ClientKill => (Kind::ClientKill, Some(a.client)),
            };
            runner.note(format_args!("end {}", a.fault.name()));
            events.push(Event {
                kind,
                client,
                from_us: a.from_us,
                to_us: epoch_us(),
            });
            last_fault_end = Wall::now();
            active.swap_remove(i);
        }
        // A client that ended by itself is a failure; it is not replaced.
        for c in world.clients.iter_mut().filter(|c| c.end.is_none()) {
            let Some(child) = c.child.as_mut() else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                let exit = Exit::of(status);
                eprintln!("soak: {} ended by itself: {exit}", c.name);
                c.end = Some(ClientEnd::EndedEarly(exit));
                c.to_us = Some(epoch_us());
                c.child = None;
            }
        }
        let show = terminal || last_status.elapsed() >= job.report_interval;
        if show && last_status.elapsed() >= Duration::from_millis(200) {
            let mut acked = 0;
            let mut rate = 0.0;
            let mut gaps = 0;
            for c in world.clients.iter().filter(|c| c.end.is_none()) {
                if let Some((a, r, g)) =
                    client_status(&job.audit_dir.join(format!("{}.out", c.name)))
                {
                    acked += a;
                    rate += r;
                    gaps += g;
                }
            }
            let t = started.elapsed().as_secs_f64();
            let nfaults = events
                .iter()
                .filter(|e| !matches!(e.kind, Kind::ServerKill | Kind::ServerDied))
                .count();
            if terminal {
                let width = 24usize;
                let filled = (kills as usize * width)
                    .checked_div(planned.max(1) as usize)
                    .unwrap_or(0)
                    .min(width);
                eprint!(
                    "\r[{}{}] kills {kills}/{planned}  faults {nfaults}/{}  {t:5.1} s  {:>9} msg/s  acked {}  gaps {gaps}   ",
                    "#".repeat(filled),
                    ".".repeat(width - filled),
                    plan.len(),
                    grouped(rate as u64),
                    grouped(acked),
                );
            } else {
                eprintln!(
                    "soak: t={t:.1}s kills={kills}/{planned} faults={nfaults}/{} acked={acked} rate={rate:.0} msg/s gaps={gaps}",
                    plan.len()
                );
            }
            last_status = Wall::now();
        }
    }
    if terminal {
        eprintln!();
    }
    let stop_us = epoch_us();
    // Stop the clients (they drain what is in flight and exit), then the
    // server.
    for c in world.clients.iter().filter(|c| c.end.is_none()) {
        signal(c.pid, nix::sys::signal::Signal::SIGTERM);
    }
    for c in world.clients.iter_mut().filter(|c| c.end.is_none()) {
        c.to_us = Some(stop_us);
        let Some(child) = c.child.as_mut() else {
            continue;
        };
        c.end = Some(match reap(child, job.drain + Duration::from_secs(10)) {
            Some(st) => ClientEnd::Finished(Exit::of(st)),
            None => {
                eprintln!("soak: {} did not finish in time and was killed", c.name);
                ClientEnd::NeverFinished
            }
        });
        c.child = None;
    }
    if let Some(s) = world.server() {
        s.sample_rss();
        signal(s.pid, nix::sys::signal::Signal::SIGTERM);
        s.to_us = epoch_us();
        if let Some(mut child) = s.child.take() {
            s.end = match reap(&mut child, Duration::from_secs(10)) {
                Some(st) => ServerEnd::Stopped(Exit::of(st)),
                None => ServerEnd::Hung,
            };
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let lab = runner.lab.take();
    drop(lab);
    judge::verdict_and_report(
        job,
        &world,
        &plan,
        &events,
        judge::VerdictInput {
            kills,
            // A run of --duration kills on its schedule until its end,
            // later while the server is paused: how many fit is not fixed
            // beforehand, but at least one must happen when one was due.
            planned_kills: match job.duration {
                Some(_) if planned > 0 => kills.max(1),
                Some(_) => 0,
                None => planned,
            },
            kills_us: &kills_us,
            seconds,
            t0,
        },
    )
}
