//! The soak's lab: the processes it starts (server instances, clients,
//! runs of the hostile peer), how they are started, and the network
//! namespaces of `--network netns` (a server host and a host per client on a
//! bridge, link-local addresses; a client's link can be cut and restored).

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as Wall};

use super::remote::{self, RemoteJob};
use super::verdict::{self, ClientEnd, Exit, ServerEnd};
use super::{hostile_args, hostile_modes, SoakJob, CONNECT_TIMEOUT, REPLY_TIMEOUT, SAMPLE_EVERY};
use crate::args::Op;
use crate::common::epoch_us;

/// The network namespaces of `--network netns`, deleted on drop.
pub struct Lab {
    /// The server's namespace.
    pub server_ns: String,
    /// Each client's namespace.
    pub client_ns: Vec<String>,
    /// The bridge (in the server's namespace).
    pub bridge: String,
    /// Each client's device (in its namespace).
    pub client_dev: Vec<String>,
}

/// The lab's network (`/24`); the server is `.1`.
pub const LAB_NET: &str = "169.254.78";
/// The server's port in the lab.
pub const LAB_PORT: u16 = 13337;

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
    /// Makes the namespaces and links, and waits until they are up.
    ///
    /// # Errors
    ///
    /// Not root, no iproute2, or a link that never came up.
    pub fn new(clients: usize) -> Result<Lab, String> {
        let id = std::process::id();
        let mut lab = Lab {
            server_ns: format!("iomsoak{id}s"),
            client_ns: Vec::new(),
            bridge: format!("iombr{id}"),
            client_dev: Vec::new(),
        };
        ip(&["netns", "add", &lab.server_ns])
            .map_err(|e| format!("--network netns needs root and iproute2: {e}"))?;
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
        // A bridge whose ports are all down loses its carrier, and UCX
        // then lists no device on it: a server started while every client
        // link is cut could not listen. A veth pair of the server host's
        // own, one end on the bridge, keeps it up.
        let (keep, peer) = (format!("iomka{id}"), format!("iomkb{id}"));
        ip(&[
            "-n", &s, "link", "add", &keep, "type", "veth", "peer", "name", &peer,
        ])?;
        ip(&["-n", &s, "link", "set", &keep, "master", &lab.bridge])?;
        ip(&["-n", &s, "link", "set", &peer, "up"])?;
        ip(&["-n", &s, "link", "set", &keep, "up"])?;
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

    /// Takes client `client`'s link up or down.
    ///
    /// # Errors
    ///
    /// `ip` failed.
    pub fn link(&self, client: usize, up: bool) -> Result<(), String> {
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

/// One server instance.
pub(super) struct Instance {
    pub(super) name: String,
    /// The process, or with `--launcher` the launcher running it.
    pub(super) child: Option<Child>,
    /// Its pid (on its host with `--launcher`; 0 until known).
    pub(super) pid: u32,
    /// Its host with `--launcher`.
    pub(super) host: Option<String>,
    pub(super) from_us: u64,
    /// When it ended (0 while it runs).
    pub(super) to_us: u64,
    pub(super) peak_rss: u64,
    pub(super) end: ServerEnd,
}

impl Instance {
    /// Takes the peak of its resident memory so far.
    pub(super) fn sample_rss(&mut self) {
        if self.host.is_some() {
            // Read on its host when it is signalled (VmHWM, the peak).
            return;
        }
        if let Some((hwm, now)) = verdict::rss(self.pid) {
            self.peak_rss = self.peak_rss.max(hwm).max(now);
        }
    }
}

/// One client process.
pub(super) struct ClientProc {
    pub(super) slot: usize,
    pub(super) name: String,
    /// The process, or with `--launcher` the launcher running it.
    pub(super) child: Option<Child>,
    /// Its pid (on its host with `--launcher`; 0 until known).
    pub(super) pid: u32,
    /// Its host with `--launcher`.
    pub(super) host: Option<String>,
    pub(super) from_us: u64,
    pub(super) to_us: Option<u64>,
    pub(super) restarted: bool,
    pub(super) end: Option<ClientEnd>,
}

/// One run of the hostile peer.
pub(super) struct HostileRun {
    pub(super) name: String,
    pub(super) child: Option<Child>,
    pub(super) from_us: u64,
    pub(super) to_us: u64,
    pub(super) end: Option<Result<Exit, &'static str>>,
}

/// Every process the soak started; those still running are killed (by
/// pid; on their hosts first with `--launcher`) on drop.
#[derive(Default)]
pub(super) struct World {
    pub(super) instances: Vec<Instance>,
    pub(super) clients: Vec<ClientProc>,
    pub(super) hostiles: Vec<HostileRun>,
    /// With `--launcher`: how to reach the hosts.
    pub(super) remote: Option<RemoteJob>,
    /// Where the processes' output is (their remote pids are there).
    pub(super) audit_dir: PathBuf,
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(job) = &self.remote {
            let running = self
                .instances
                .iter_mut()
                .map(|i| (&i.name, &i.host, &mut i.child))
                .chain(
                    self.clients
                        .iter_mut()
                        .map(|c| (&c.name, &c.host, &mut c.child)),
                );
            for (name, host, child) in running {
                let (Some(h), Some(c)) = (host, child.as_mut()) else {
                    continue;
                };
                if c.try_wait().ok().flatten().is_some() {
                    continue;
                }
                let out = fs::read_to_string(remote::out_file(&self.audit_dir, name));
                if let Some(pid) = remote::wrapped(&out.unwrap_or_default()).pid {
                    let _ = remote::signal(job, h, pid, name, "KILL");
                }
            }
        }
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
    /// The server instance running, if one is.
    pub(super) fn server(&mut self) -> Option<&mut Instance> {
        self.instances.last_mut().filter(|i| i.child.is_some())
    }

    /// The client process of `slot` running, if one is.
    pub(super) fn client(&mut self, slot: usize) -> Option<&mut ClientProc> {
        self.clients
            .iter_mut()
            .rev()
            .find(|c| c.slot == slot && c.end.is_none())
    }
}

/// What starts the soak's processes: the program, where they run, the
/// server's port, the faults log.
pub(super) struct Runner<'a> {
    pub(super) job: &'a SoakJob,
    pub(super) exe: PathBuf,
    pub(super) lab: Option<Lab>,
    /// With `--launcher`: the hosts, and the address the clients dial.
    pub(super) remote: Option<Remote>,
    pub(super) port: u16,
    pub(super) faults_log: Option<fs::File>,
    pub(super) t0: u64,
}

/// How a process ended, as the soak saw it.
pub(super) enum Ended {
    /// With this status.
    Exit(Exit),
    /// Not within the time given (its child was then killed).
    TimedOut,
    /// Its host, or the link to it, was lost: why.
    Lost(String),
}

/// The soak across hosts (`--launcher`).
pub(super) struct Remote {
    pub(super) job: RemoteJob,
    /// The address the clients dial (no port).
    pub(super) addr: String,
    /// The program's path on the hosts.
    pub(super) exe: String,
}

impl Runner<'_> {
    fn command(&self, host: Option<usize>, device: &str) -> Command {
        if self.remote.is_some() {
            // UCX on the hosts picks its transports and devices, unless
            // --ucx-tls says.
            let mut c = Command::new(&self.exe);
            if !self.job.tls.is_empty() {
                c.env("UCX_TLS", &self.job.tls);
            }
            // The transports each endpoint uses, in UCX's `ep_cfg` lines.
            c.env("UCX_LOG_LEVEL", "info");
            return c;
        }
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
        if let Some(r) = &self.remote {
            return format!("{}:{}", r.addr, self.port);
        }
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

    /// Where the processes write their audit files: the audit directory,
    /// or with `--launcher` the scratch directory on their hosts.
    fn audit_dir_arg(&self) -> PathBuf {
        match &self.remote {
            Some(r) => PathBuf::from(&r.job.dir),
            None => self.job.audit_dir.clone(),
        }
    }

    /// `host`'s name with `--launcher` (`None`: the server's).
    pub(super) fn host_name(&self, host: Option<usize>) -> Option<String> {
        let r = self.remote.as_ref()?;
        Some(match host {
            None => r.job.server.clone(),
            Some(k) => r.job.client_host(k).to_string(),
        })
    }

    /// Starts `c` (output to `out`) here, or with `--launcher` on its
    /// host through the launcher's wrapper.
    fn spawn(&self, host: Option<usize>, c: Command, out: fs::File) -> std::io::Result<Child> {
        let mut c = match (&self.remote, self.host_name(host)) {
            (Some(r), Some(h)) => {
                let env: Vec<(String, String)> = c
                    .get_envs()
                    .filter_map(|(k, v)| Some((k.to_str()?.to_string(), v?.to_str()?.to_string())))
                    .collect();
                let argv: Vec<String> = std::iter::once(r.exe.clone())
                    .chain(c.get_args().map(|a| a.to_string_lossy().into_owned()))
                    .collect();
                let mut c = r.job.on(&h, &r.job.wrapper(&env, &argv));
                if r.job.watches_stdin() {
                    // Held open while the child is kept; see the wrapper.
                    c.stdin(Stdio::piped());
                }
                c
            }
            _ => c,
        };
        c.stdout(out.try_clone()?).stderr(out);
        c.spawn()
    }

    /// How process `name` ended, its child (or launcher) having ended
    /// with `status`: with `--launcher`, the wrapper's exit line (`None`:
    /// there is none, the link to its host was lost).
    pub(super) fn ended(&self, name: &str, status: std::process::ExitStatus) -> Option<Exit> {
        if self.remote.is_none() {
            return Some(Exit::of(status));
        }
        let out = fs::read_to_string(remote::out_file(&self.job.audit_dir, name));
        remote::wrapped(&out.unwrap_or_default()).exit
    }

    /// Sends `sig` to process `name` (`pid` here, or on `host` with
    /// `--launcher`, its pid from the wrapper's line); the peak resident
    /// memory read on its host first, if it could be.
    ///
    /// # Errors
    ///
    /// Its host did not answer, or its pid is not known.
    pub(super) fn signal(
        &self,
        name: &str,
        pid: u32,
        host: Option<&str>,
        sig: nix::sys::signal::Signal,
    ) -> Result<Option<u64>, String> {
        let (Some(r), Some(host)) = (&self.remote, host) else {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
            }
            return Ok(None);
        };
        let pid = match pid {
            0 => {
                let out = fs::read_to_string(remote::out_file(&self.job.audit_dir, name));
                remote::wrapped(&out.unwrap_or_default())
                    .pid
                    .ok_or_else(|| format!("{name} on {host}: its pid never came"))?
            }
            p => p,
        };
        let sig = sig.as_str().trim_start_matches("SIG");
        remote::signal(&r.job, host, pid, name, sig)
    }

    /// Waits at most `limit` for process `name` (its child or launcher
    /// `child`, on `host` with `--launcher`) to end; kills the child
    /// after.
    pub(super) fn end_of(
        &self,
        name: &str,
        host: Option<&str>,
        child: &mut Child,
        limit: Duration,
    ) -> Ended {
        match remote::wait_bounded(child, limit) {
            None => Ended::TimedOut,
            Some(st) => match self.ended(name, st) {
                Some(e) => Ended::Exit(e),
                None => Ended::Lost(self.lost_why(host.unwrap_or("?"), st)),
            },
        }
    }

    /// Why the launcher of a process on `host` ended (`status`) without
    /// its exit line: the host does not answer, or only the link was cut.
    pub(super) fn lost_why(&self, host: &str, status: std::process::ExitStatus) -> String {
        let Some(r) = &self.remote else {
            return format!("{host}: ended without an exit status ({status})");
        };
        if remote::answers(&r.job, host, Duration::from_secs(5)) {
            format!(
                "{host}: the {} connection ended ({status}) while the process ran; the host still answers",
                r.job.launcher.name()
            )
        } else {
            format!(
                "{host} stopped answering (its {} connection ended: {status})",
                r.job.launcher.name()
            )
        }
    }

    /// Notes a fault in `faults.log` (time, what, details).
    pub(super) fn note(&mut self, what: std::fmt::Arguments<'_>) {
        if let Some(f) = self.faults_log.as_mut() {
            let _ = writeln!(f, "{} {what}", epoch_us());
        }
    }

    /// Starts server instance `n` and waits until it listens.
    pub(super) fn start_server(&self, n: usize) -> Result<Instance, String> {
        let dir = &self.job.audit_dir;
        let bind = match self.lab {
            _ if self.remote.is_some() => format!("0.0.0.0:{}", self.port),
            Some(_) => format!("0.0.0.0:{}", self.port),
            None => format!("127.0.0.1:{}", self.port),
        };
        let name = format!("server-{n}");
        for attempt in 0..20 {
            let out = dir.join(format!("{name}.out"));
            let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
            let c = self.server_command(&name, &bind);
            let from_us = epoch_us();
            let mut child = self
                .spawn(None, c, file)
                .map_err(|e| format!("cannot start the server: {e}"))?;
            let deadline = Wall::now() + Duration::from_secs(15);
            loop {
                let text = fs::read_to_string(&out).unwrap_or_default();
                if text.contains("listening on") {
                    let host = self.host_name(None);
                    let pid = match host {
                        Some(_) => remote::wrapped(&text).pid.unwrap_or(0),
                        None => child.id(),
                    };
                    return Ok(Instance {
                        name,
                        pid,
                        host,
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
                    // On its host first: the launcher's end need not end it.
                    let host = self.host_name(None);
                    if host.is_some() {
                        let kill = nix::sys::signal::Signal::SIGKILL;
                        let _ = self.signal(&name, 0, host.as_deref(), kill);
                    }
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

    /// Starts a server instance named `name` that is expected to refuse
    /// its journal, and waits until it exits or listens (15 s at most).
    /// Returns whether it exited without listening, and what it said; one
    /// that listens anyway is killed at once.
    ///
    /// # Errors
    ///
    /// It could not be started.
    pub(super) fn probe_server(&self, name: &str) -> Result<(bool, String), String> {
        let bind = match self.lab {
            Some(_) => format!("0.0.0.0:{}", self.port),
            None => format!("127.0.0.1:{}", self.port),
        };
        let out = self.job.audit_dir.join(format!("{name}.out"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let c = self.server_command(name, &bind);
        let mut child = self
            .spawn(None, c, file)
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let deadline = Wall::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok((true, fs::read_to_string(&out).unwrap_or_default()));
            }
            let text = fs::read_to_string(&out).unwrap_or_default();
            if text.contains("listening on") || Wall::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Ok((false, text));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts client process `gen` of slot `k` (its own audit files; a
    /// new session, or with `--exactly-once` the slot's session resumed
    /// from its outbox).
    pub(super) fn start_client(&self, k: usize, gen: u32) -> Result<ClientProc, String> {
        let dir = &self.job.audit_dir;
        let name = if gen == 0 {
            format!("client-{k}")
        } else {
            format!("client-{k}.{gen}")
        };
        let out = dir.join(format!("{name}.out"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let c = self.client_command(k, gen, &name);
        let from_us = epoch_us();
        let host = self.host_name(Some(k));
        let child = self
            .spawn(Some(k), c, file)
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(ClientProc {
            slot: k,
            name,
            pid: if host.is_some() { 0 } else { child.id() },
            host,
            child: Some(child),
            from_us,
            to_us: None,
            restarted: gen > 0,
            end: None,
        })
    }

    /// The server instance `name`'s command line, listening on `bind`;
    /// with `--exactly-once` it keeps the run's one journal.
    fn server_command(&self, name: &str, bind: &str) -> Command {
        let dir = &self.audit_dir_arg();
        let mut c = self.command(None, &self.server_device());
        c.args(["server", "--listen", bind, "--audit-dir"])
            .arg(dir)
            .args(["--audit-name", name])
            .args(["--transport", self.job.transport.name()]);
        if self.shared_memory() {
            c.arg("--shared-memory");
        }
        c.args(["--api", self.job.api.name()]);
        if self.job.exactly_once {
            c.arg("--journal")
                .arg(journal_dir(dir))
                .args(["--sync", "none"]);
        }
        c
    }

    /// Client process `gen` of slot `k`'s command line, its audit name
    /// `name`; with `--exactly-once` it keeps the slot's outbox, the same
    /// for every generation.
    fn client_command(&self, k: usize, gen: u32, name: &str) -> Command {
        let dir = &self.audit_dir_arg();
        let device = self
            .lab
            .as_ref()
            .map_or("lo".to_string(), |l| l.client_dev[k].clone());
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
            .args(["--transport", self.job.transport.name()])
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
                // The hostile fault fills the server's table while
                // clients are started again as new sessions.
                "--retry-full-table",
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
            .args(["--audit-name", name]);
        if self.job.recreate_context {
            c.arg("--recreate-context");
        }
        if self.shared_memory() {
            c.arg("--shared-memory");
        }
        c.args(["--api", self.job.api.name()]);
        if self.job.exactly_once {
            c.arg("--outbox")
                .arg(outbox_dir(dir, k))
                .args(["--sync", "none"]);
        }
        c
    }

    /// Starts run `i` of the hostile peer, for `hold`.
    pub(super) fn start_hostile(&self, i: usize, hold: Duration) -> Result<HostileRun, String> {
        let name = format!("hostile-{i}");
        let out = self.job.audit_dir.join(format!("{name}.out"));
        let file = fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        // In the lab it runs on the server's host, through its bridge.
        let mut c = self.command(None, &self.server_device());
        let modes = hostile_modes(self.job.api);
        let (api, seed) = (self.job.api, self.job.seed);
        c.args(hostile_args(
            &self.server_addr(),
            &modes,
            api,
            false,
            seed,
            i,
            hold,
        ))
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

/// The server instances' one journal in audit directory `dir`
/// (`--exactly-once`).
pub(super) fn journal_dir(dir: &Path) -> PathBuf {
    dir.join("journal")
}

/// Client slot `k`'s outbox in audit directory `dir` (`--exactly-once`),
/// kept across the slot's generations.
pub(super) fn outbox_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("outbox-{k}"))
}

/// Whether this program has the `hostile` subcommand.
pub(super) fn has_hostile(exe: &Path) -> bool {
    Command::new(exe)
        .args(["hostile", "--help"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A free TCP port on 127.0.0.1 (the OS's pick), for the server to use
/// across its restarts.
pub(super) fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
