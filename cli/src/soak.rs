//! `iomsg soak`: the field report's reproduction on real UCX. One server
//! and N clients as separate processes (this same binary), the server
//! SIGKILLed again and again and restarted on its port while the clients
//! reconnect and replay; then the verdict, from the processes' own audit
//! files rather than the protocol's counters.

use std::fmt::Write as _;
use std::fs;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant as Wall};

use iomsg_core::rng::SplitMix64;
use serde::Serialize;

use crate::args::{Op, SizeRange};
use crate::audit::{self, ClientTrail, InstanceTrail, Reconciled};
use crate::common::{self, epoch_us};
use crate::plot;

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
    /// Mean time between kills (each jittered ±30 % by the seed).
    pub kill_every: Duration,
    /// Kills to do (with no `duration`).
    pub kills: u32,
    /// Run this long instead, killing all along.
    pub duration: Option<Duration>,
    /// Seeds the kill times and the clients' workloads.
    pub seed: u64,
    /// Clients replay after reconnects.
    pub replay: bool,
    /// Where the processes run.
    pub hosts: Hosts,
    /// Also take client links down for a while (netns only).
    pub cut_links: bool,
    /// How long a cut link stays down.
    pub cut_for: Duration,
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
    /// Client links cut.
    pub link_cuts: u64,
    /// Seconds from the first process to the verdict.
    pub seconds: f64,
    /// Acknowledged messages per second over the run.
    pub msgs_per_second: f64,
    /// Which UCX.
    pub ucx: UcxInfo,
    /// What was run.
    pub config: SoakConfig,
    /// Where the files are.
    pub files: Files,
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
    /// The transports UCX offers on this machine (`name/device`).
    pub transports: Vec<String>,
}

/// The soak's settings, for the report.
#[derive(Clone, Debug, Serialize)]
pub struct SoakConfig {
    /// Clients.
    pub clients: usize,
    /// Mean seconds between kills.
    pub kill_every_s: f64,
    /// Seed.
    pub seed: u64,
    /// Replay on.
    pub replay: bool,
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
    /// Whether the audit records (`*.records`) are still there: after a
    /// pass they are removed unless asked to keep them.
    pub records_kept: bool,
}

/// The network namespaces of `--hosts netns`, deleted on drop.
struct Lab {
    server_ns: String,
    client_ns: Vec<String>,
    bridge: String,
    client_dev: Vec<String>,
}

const LAB_NET: &str = "169.254.78";
const LAB_PORT: u16 = 13337;

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Lab {
    fn new(clients: usize) -> Result<Lab, String> {
        let id = std::process::id();
        let mut lab = Lab {
            server_ns: format!("iomsoak{id}s"),
            client_ns: Vec::new(),
            bridge: format!("iombr{id}"),
            client_dev: Vec::new(),
        };
        ip(&["netns", "add", &lab.server_ns])
            .map_err(|e| format!("--hosts netns needs root and iproute2: {e}"))?;
        let s = lab.server_ns.clone();
        ip(&["-n", &s, "link", "set", "lo", "up"])?;
        ip(&["-n", &s, "link", "add", &lab.bridge, "type", "bridge"])?;
        ip(&[
            "-n",
            &s,
            "addr",
            "add",
            &format!("{LAB_NET}.1/24"),
            "dev",
            &lab.bridge,
        ])?;
        ip(&["-n", &s, "link", "set", &lab.bridge, "up"])?;
        for k in 0..clients {
            let ns = format!("iomsoak{id}c{k}");
            ip(&["netns", "add", &ns])?;
            lab.client_ns.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let (cdev, sdev) = (format!("ioc{id}x{k}"), format!("ios{id}x{k}"));
            ip(&[
                "link", "add", &cdev, "netns", &ns, "type", "veth", "peer", "name", &sdev, "netns",
                &s,
            ])?;
            lab.client_dev.push(cdev.clone());
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{LAB_NET}.{}/24", k + 2),
                "dev",
                &cdev,
            ])?;
            ip(&["-n", &s, "link", "set", &sdev, "master", &lab.bridge])?;
            ip(&["-n", &ns, "link", "set", &cdev, "up"])?;
            ip(&["-n", &s, "link", "set", &sdev, "up"])?;
        }
        // UCX lists a device only once its link is up at both ends.
        let mut devices = vec![(lab.server_ns.clone(), lab.bridge.clone())];
        devices.extend(
            lab.client_ns
                .iter()
                .cloned()
                .zip(lab.client_dev.iter().cloned()),
        );
        for (ns, dev) in devices {
            let deadline = Wall::now() + Duration::from_secs(10);
            loop {
                let out = Command::new("ip")
                    .args(["-n", &ns, "link", "show", "dev", &dev])
                    .output()
                    .map_err(|e| e.to_string())?;
                let text = String::from_utf8_lossy(&out.stdout);
                if text.contains("state UP") && !text.contains("NO-CARRIER") {
                    break;
                }
                if Wall::now() > deadline {
                    return Err(format!("{dev} in {ns} never came up"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        Ok(lab)
    }

    fn link(&self, client: usize, up: bool) -> Result<(), String> {
        ip(&[
            "-n",
            &self.client_ns[client],
            "link",
            "set",
            &self.client_dev[client],
            if up { "up" } else { "down" },
        ])
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes the links in it.
        for ns in self.client_ns.iter().chain([&self.server_ns]) {
            let _ = ip(&["netns", "delete", ns]);
        }
    }
}

/// The processes, stopped (by pid) on drop if still running.
struct Procs {
    server: Option<Child>,
    clients: Vec<Child>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in self.server.iter_mut().chain(self.clients.iter_mut()) {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn terminate(child: &Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
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

struct Runner<'a> {
    job: &'a SoakJob,
    exe: PathBuf,
    lab: Option<Lab>,
    port: u16,
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

    /// Starts server instance `n` and waits until it listens.
    fn start_server(&self, n: usize) -> Result<Child, String> {
        let dir = &self.job.audit_dir;
        let device = self
            .lab
            .as_ref()
            .map_or("lo".to_string(), |l| l.bridge.clone());
        let bind = match self.lab {
            Some(_) => format!("0.0.0.0:{}", self.port),
            None => format!("127.0.0.1:{}", self.port),
        };
        for attempt in 0..20 {
            let out = dir.join(format!("server-{n}.out"));
            let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let mut c = self.command(None, &device);
            c.args(["server", "--listen", &bind, "--audit-dir"])
                .arg(dir)
                .args(["--audit-name", &format!("server-{n}")])
                .stdout(file.try_clone().map_err(|e| e.to_string())?)
                .stderr(file);
            if self.shared_memory() {
                c.arg("--shared-memory");
            }
            let mut child = c
                .spawn()
                .map_err(|e| format!("cannot start the server: {e}"))?;
            let deadline = Wall::now() + Duration::from_secs(15);
            loop {
                let text = fs::read_to_string(&out).unwrap_or_default();
                if text.contains("listening on") {
                    return Ok(child);
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Wall::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("server {n} did not listen in 15 s: {text}"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // It exited (its port still held, say): try again shortly.
            if attempt == 19 {
                return Err(format!(
                    "server {n} could not start: {}",
                    fs::read_to_string(&out).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err("unreachable".into())
    }

    fn start_client(&self, k: usize) -> Result<Child, String> {
        let dir = &self.job.audit_dir;
        let device = self
            .lab
            .as_ref()
            .map_or("lo".to_string(), |l| l.client_dev[k].clone());
        let out = dir.join(format!("client-{k}.out"));
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
            .args(["--connect-timeout", "1s", "--reply-timeout", "2s"])
            .args(["--report-interval", "250ms"])
            .args([
                "--seed",
                &self.job.seed.wrapping_add(k as u64 + 1).to_string(),
            ])
            .args(["--replay", if self.job.replay { "on" } else { "off" }])
            .args(["--drain", &format!("{}s", self.job.drain.as_secs_f64())])
            .arg("--audit-dir")
            .arg(dir)
            .args(["--audit-name", &format!("client-{k}")])
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file);
        if self.job.recreate_context {
            c.arg("--recreate-context");
        }
        if self.shared_memory() {
            c.arg("--shared-memory");
        }
        c.spawn()
            .map_err(|e| format!("cannot start client {k}: {e}"))
    }
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

/// A free TCP port on 127.0.0.1 (the OS's pick), for the server to use
/// across its restarts.
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
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
    if job.cut_links && job.hosts != Hosts::Netns {
        return Err("--cut-links needs --hosts netns".into());
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
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let lab = match job.hosts {
        Hosts::Netns => Some(Lab::new(job.clients)?),
        Hosts::Local => None,
    };
    let port = match lab {
        Some(_) => LAB_PORT,
        None => free_port()?,
    };
    let runner = Runner {
        job,
        exe,
        lab,
        port,
    };
    let started = Wall::now();
    let t0 = epoch_us();
    let mut rng = SplitMix64::new(job.seed);
    let mut jitter = |mean: Duration| {
        let f = 0.7 + 0.6 * (rng.below(1_000_000) as f64 / 1_000_000.0);
        mean.mul_f64(f)
    };
    let mut procs = Procs {
        server: Some(runner.start_server(0)?),
        clients: Vec::new(),
    };
    for k in 0..job.clients {
        procs.clients.push(runner.start_client(k)?);
    }
    let planned = match job.duration {
        Some(d) => (d.as_secs_f64() / job.kill_every.as_secs_f64()).floor() as u32,
        None => job.kills,
    };
    let end_of_kills = job.duration;
    let mut kills = 0u32;
    let mut kills_us = Vec::new();
    let mut next_kill = Wall::now() + jitter(job.kill_every);
    let mut last_kill_at = Wall::now();
    let mut instance = 0usize;
    let mut cuts: Vec<(usize, u64, u64)> = Vec::new();
    let mut open_cut: Option<(usize, Wall, u64)> = None;
    let mut next_cut = job
        .cut_links
        .then(|| Wall::now() + job.kill_every.mul_f64(0.5));
    let terminal = std::io::stderr().is_terminal();
    let mut last_status = Wall::now();
    let stopping_at;
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
        if kills_done && open_cut.is_none() {
            // Traffic after the last kill, so that the last instance is
            // seen to work, then stop.
            if end_of_kills.is_some() || now >= last_kill_at + job.kill_every {
                stopping_at = now;
                break;
            }
        }
        if !kills_done && now >= next_kill {
            if let Some(mut s) = procs.server.take() {
                let _ = s.kill();
                let _ = s.wait();
            }
            kills_us.push(epoch_us());
            kills += 1;
            instance += 1;
            last_kill_at = Wall::now();
            procs.server = Some(runner.start_server(instance)?);
            next_kill = Wall::now() + jitter(job.kill_every);
        }
        if let (Some(lab), Some(at)) = (runner.lab.as_ref(), next_cut) {
            if now >= at && open_cut.is_none() && !kills_done {
                let k = cuts.len() % job.clients;
                lab.link(k, false)?;
                open_cut = Some((k, now, epoch_us()));
                next_cut = Some(now + job.cut_for + job.kill_every.mul_f64(1.5));
            }
        }
        if let (Some(lab), Some((k, from, from_us))) = (runner.lab.as_ref(), open_cut) {
            if now >= from + job.cut_for {
                lab.link(k, true)?;
                cuts.push((k, from_us, epoch_us()));
                open_cut = None;
            }
        }
        for (k, c) in procs.clients.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                let out = job.audit_dir.join(format!("client-{k}.out"));
                return Err(format!(
                    "client {k} ended early ({status}): {}",
                    fs::read_to_string(out).unwrap_or_default()
                ));
            }
        }
        let show = terminal || last_status.elapsed() >= job.report_interval;
        if show && last_status.elapsed() >= Duration::from_millis(200) {
            let mut acked = 0;
            let mut rate = 0.0;
            let mut gaps = 0;
            for k in 0..job.clients {
                if let Some((a, r, g)) =
                    client_status(&job.audit_dir.join(format!("client-{k}.out")))
                {
                    acked += a;
                    rate += r;
                    gaps += g;
                }
            }
            let t = started.elapsed().as_secs_f64();
            if terminal {
                let width = 24usize;
                let filled = (kills as usize * width)
                    .checked_div(planned.max(1) as usize)
                    .unwrap_or(0)
                    .min(width);
                eprint!(
                    "\r[{}{}] kills {kills}/{planned}  {t:5.1} s  {:>9} msg/s  acked {}  gaps {gaps}   ",
                    "#".repeat(filled),
                    ".".repeat(width - filled),
                    grouped(rate as u64),
                    grouped(acked),
                );
            } else {
                eprintln!(
                    "soak: t={t:.1}s kills={kills}/{planned} acked={acked} rate={rate:.0} msg/s gaps={gaps}"
                );
            }
            last_status = Wall::now();
        }
    }
    if terminal {
        eprintln!();
    }
    // Stop the clients (they drain what is in flight and exit), then the
    // server.
    for c in &procs.clients {
        terminate(c);
    }
    let mut protocol_sent_ok = true;
    for (k, c) in procs.clients.iter_mut().enumerate() {
        if reap(c, job.drain + Duration::from_secs(10)).is_none() {
            protocol_sent_ok = false;
            eprintln!("soak: client {k} did not finish in time and was killed");
        }
    }
    if let Some(s) = procs.server.as_ref() {
        terminate(s);
    }
    if let Some(s) = procs.server.as_mut() {
        reap(s, Duration::from_secs(10));
    }
    let _ = stopping_at;
    let seconds = started.elapsed().as_secs_f64();
    drop(procs);
    drop(runner);
    // The ground truth.
    let dir = &job.audit_dir;
    let mut clients: Vec<ClientTrail> = Vec::new();
    for k in 0..job.clients {
        clients.push(audit::read_client(dir, &format!("client-{k}"), k)?);
    }
    let mut instances: Vec<InstanceTrail> = Vec::new();
    for n in 0..=instance {
        instances.push(audit::read_instance(dir, &format!("server-{n}"))?);
    }
    let figures = audit::reconcile(&clients, &instances);
    let protocol_sent: u64 = clients
        .iter()
        .flat_map(|c| &c.sessions)
        .map(|s| s.done.map_or(u64::MAX, |d| d.submitted))
        .fold(0u64, u64::saturating_add);
    let mut reasons = audit::failures(&figures, job.replay, protocol_sent);
    if !protocol_sent_ok {
        reasons.push("a client did not finish".into());
    }
    if kills < planned {
        reasons.push(format!("only {kills} of {planned} kills happened"));
    }
    let version = iomsg_ucx::version::ucx_version();
    let transports = iomsg_ucx::resources::transports()
        .map(|v| {
            v.into_iter()
                .map(|r| format!("{}/{}", r.transport, r.device))
                .collect()
        })
        .unwrap_or_default();
    let report = SoakReport {
        verdict: if reasons.is_empty() { "pass" } else { "fail" },
        reasons,
        msgs_per_second: figures.acked as f64 / seconds.max(1e-9),
        figures,
        server_kills: u64::from(kills),
        link_cuts: cuts.len() as u64,
        seconds,
        ucx: UcxInfo {
            version: version.number(),
            library_path: version.library_path.map(|p| p.display().to_string()),
            tls: job.tls.clone(),
            transports,
        },
        config: SoakConfig {
            clients: job.clients,
            kill_every_s: job.kill_every.as_secs_f64(),
            seed: job.seed,
            replay: job.replay,
            hosts: match job.hosts {
                Hosts::Local => "local".into(),
                Hosts::Netns => "netns".into(),
            },
            cut_links: job.cut_links,
            recreate_context: job.recreate_context,
            data_size: job.sizes.to_string(),
            ops: job
                .ops
                .iter()
                .map(|o| format!("{o:?}").to_lowercase())
                .collect::<Vec<_>>()
                .join(","),
            window: job.window,
        },
        files: Files {
            audit_dir: dir.display().to_string(),
            plot: job.plot.display().to_string(),
            records_kept: true,
        },
    };
    let mut report = report;
    if report.verdict == "pass" && !job.keep_records {
        // Reconciled: the records are large (24 bytes per message and
        // side) and the report holds what they showed.
        for e in fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
            if e.path().extension().is_some_and(|x| x == "records") {
                let _ = fs::remove_file(e.path());
            }
        }
        report.files.records_kept = false;
    }
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    fs::write(&job.report, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", job.report.display()))?;
    let timeline = timeline(&report, &clients, &instances, &kills_us, &cuts, t0);
    plot::write_svg(&timeline, &job.plot)?;
    Ok(report)
}

fn timeline(
    report: &SoakReport,
    clients: &[ClientTrail],
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
    for (k, c) in clients.iter().enumerate() {
        let mut series = plot::ClientSeries {
            name: format!("client {}", k + 1),
            ..plot::ClientSeries::default()
        };
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
        t.clients.push(series);
    }
    t
}

/// The verdict table.
pub fn table(r: &SoakReport) -> String {
    let f = &r.figures;
    let a = &f.audit;
    let mut s = String::new();
    let mut row = |name: &str, value: String, note: String| {
        let line = format!("  {name:<34} {value:>12}  {note}");
        let _ = writeln!(s, "{}", line.trim_end());
    };
    row("messages sent", grouped(f.sent), String::new());
    row("acknowledged", grouped(f.acked), String::new());
    row(
        "processed by a server (audit)",
        grouped(a.processed_unique),
        "distinct sns with the client's bytes".into(),
    );
    row(
        "replayed after reconnects",
        grouped(f.replayed),
        String::new(),
    );
    row(
        "duplicates after restarts",
        grouped(f.duplicates_after_restart),
        format!(
            "announced {}, unannounced {}",
            grouped(f.duplicates_announced),
            a.unannounced_duplicates
        ),
    );
    row(
        "lost in flight (replay off)",
        grouped(f.lost_in_flight),
        format!("given up by the clients {}", grouped(f.not_replayed)),
    );
    row(
        "lost on live connections",
        grouped(f.lost_live),
        String::new(),
    );
    row(
        "missing (audit)",
        grouped(a.missing),
        format!(
            "unexplained {}, acknowledged {}",
            a.unexplained, a.acked_but_missing
        ),
    );
    row("corrupt", grouped(f.corrupt), String::new());
    row("stale frames discarded", grouped(f.stale), String::new());
    row(
        "server kills",
        grouped(r.server_kills),
        format!("link cuts {}", r.link_cuts),
    );
    row(
        "reconnects",
        grouped(f.reconnects),
        format!(
            "to first ack: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            f.reconnect_ms.p50, f.reconnect_ms.p99, f.reconnect_ms.max
        ),
    );
    row(
        "run",
        format!("{:.1} s", r.seconds),
        format!("{} msgs/s acknowledged", grouped(r.msgs_per_second as u64)),
    );
    let _ = writeln!(
        s,
        "  UCX {} ({}), UCX_TLS={}",
        r.ucx.version,
        r.ucx.library_path.as_deref().unwrap_or("path unknown"),
        r.ucx.tls
    );
    for l in a.lost.iter().take(20) {
        let _ = writeln!(
            s,
            "  lost: session {} sns {}..{}: {}",
            l.session, l.from, l.to, l.why
        );
    }
    if !r.files.records_kept {
        let _ = writeln!(
            s,
            "  audit records removed after the pass (--keep-records keeps them)"
        );
    }
    let _ = writeln!(s, "  verdict: {}", r.verdict.to_uppercase());
    for why in &r.reasons {
        let _ = writeln!(s, "    {why}");
    }
    s
}
