//! `iomsg soak --launcher ssh|pdsh|slurm`: the soak across hosts.
//!
//! The server and the clients run on the hosts named, each started
//! through the launcher by a small `sh` wrapper that prints the process's
//! pid on its host and, when it ends, its exit status
//! ([`PID_LINE`], [`EXIT_LINE`]). Their output streams back into the
//! audit directory here (the status lines, the progress bar); their audit
//! files are written in a scratch directory on their host
//! (`--remote-dir`) and fetched at the end. The server is SIGKILLed on
//! its host by pid (`kill -KILL`, through the launcher) and restarted
//! there. Each host's clock offset from this one is measured before the
//! run (the midpoint of a round trip, the best of five) and taken off the
//! times in its files, and each host's UCX is asked what it offers
//! (`iomsg info`); its processes log the transports their endpoints use
//! (UCX's `ep_cfg` lines).

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as Wall};

use serde::Serialize;

use super::verdict::Exit;
use crate::common::epoch_us;

/// How the processes are started on their hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// `ssh HOST 'script'` (OpenSSH, keys already in place: `BatchMode`).
    Ssh,
    /// `pdsh -R ssh -w HOST 'script'`.
    Pdsh,
    /// `srun --overlap -N1 -n1 -w NODE sh -c 'script'`, one step per
    /// process, inside an allocation (`SLURM_JOB_ID`, or `--slurm-job`).
    Slurm,
}

impl Launcher {
    /// `--launcher`'s names.
    ///
    /// # Errors
    ///
    /// Not one of them.
    pub fn parse(s: &str) -> Result<Launcher, String> {
        match s {
            "ssh" => Ok(Launcher::Ssh),
            "pdsh" => Ok(Launcher::Pdsh),
            "slurm" => Ok(Launcher::Slurm),
            _ => Err(format!("{s:?} is not a launcher (ssh, pdsh or slurm)")),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Ssh => "ssh",
            Launcher::Pdsh => "pdsh",
            Launcher::Slurm => "slurm",
        }
    }

    /// The program it runs here.
    fn program(self) -> &'static str {
        match self {
            Launcher::Ssh => "ssh",
            Launcher::Pdsh => "pdsh",
            Launcher::Slurm => "srun",
        }
    }
}

/// What `iomsg soak --launcher` is asked to run where.
#[derive(Clone, Debug)]
pub struct RemoteJob {
    /// How.
    pub launcher: Launcher,
    /// The server's host (as the launcher names it).
    pub server: String,
    /// The clients' hosts: client slot `k` runs on `clients[k % len]`.
    pub clients: Vec<String>,
    /// The address the clients dial (default: the server host's address,
    /// `ssh -G`'s `hostname` for ssh and pdsh, the node name for Slurm).
    pub server_addr: Option<String>,
    /// The server's port.
    pub port: u16,
    /// The scratch directory on every host (made, and removed at the end).
    pub dir: String,
    /// The program on the hosts (default: this program's path, as on a
    /// shared file system).
    pub exe: Option<String>,
    /// Copy this program to `dir` on every host first.
    pub ship: bool,
    /// `ssh -F`: an ssh configuration file (ssh and pdsh).
    pub ssh_config: Option<PathBuf>,
    /// `ssh -o` options (ssh and pdsh).
    pub ssh_options: Vec<String>,
    /// `srun --jobid` (default: the allocation it runs in).
    pub slurm_job: Option<String>,
}

/// The wrapper's first line: the process's pid on its host.
pub const PID_LINE: &str = "iomsg-remote-pid";
/// The wrapper's last line: the process's exit status (128 + N for
/// signal N, as `sh`'s `wait` reports it).
pub const EXIT_LINE: &str = "iomsg-remote-exit";

/// The wait for short commands on a host (a kill, the clock, a probe).
const SHORT: Duration = Duration::from_secs(20);
/// The wait for the files of a host (or the copy of the program to it).
const COLLECT: Duration = Duration::from_secs(3600);

/// `s` quoted for `sh`.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A host name the launchers can take: no blanks, no quotes, not an
/// option, no list (pdsh reads commas as lists).
///
/// # Errors
///
/// It is not.
pub fn check_host(h: &str) -> Result<(), String> {
    if h.is_empty()
        || h.starts_with('-')
        || h.chars()
            .any(|c| c.is_whitespace() || "'\",;$`\\[]^*?!()&|<>{}".contains(c))
    {
        return Err(format!("{h:?} is not a host name the launchers can take"));
    }
    Ok(())
}

/// A hosts file: `server HOST` and `client HOST` lines (any number of
/// clients), `#` comments; returns the server and the clients.
///
/// # Errors
///
/// A line that is neither, not one server, or no client.
pub fn parse_hosts_file(text: &str) -> Result<(String, Vec<String>), String> {
    let mut server = None;
    let mut clients = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (role, host) = (words.next(), words.next());
        let bad = || format!("line {}: {line:?}: `server HOST` or `client HOST`", n + 1);
        let host = host.ok_or_else(bad)?;
        if words.next().is_some() {
            return Err(bad());
        }
        check_host(host).map_err(|e| format!("line {}: {e}", n + 1))?;
        match role {
            Some("server") if server.is_none() => server = Some(host.to_string()),
            Some("server") => return Err(format!("line {}: a second server", n + 1)),
            Some("client") => clients.push(host.to_string()),
            _ => return Err(bad()),
        }
    }
    let server = server.ok_or("no `server HOST` line")?;
    if clients.is_empty() {
        return Err("no `client HOST` line".into());
    }
    Ok((server, clients))
}

impl RemoteJob {
    /// The command that runs `script` (`sh`) on `host`, its output ours.
    pub fn on(&self, host: &str, script: &str) -> Command {
        let mut c = Command::new(self.launcher.program());
        match self.launcher {
            // ssh and pdsh hand the command to the login shell, which may
            // be csh or fish: the script is run by sh.
            Launcher::Ssh => {
                c.arg("-T")
                    .args(self.ssh_args())
                    .arg(host)
                    .arg(format!("sh -c {}", quote(script)));
            }
            Launcher::Pdsh => {
                c.env("PDSH_SSH_ARGS_APPEND", self.ssh_args().join(" "))
                    .args(["-N", "-S", "-R", "ssh", "-w", host])
                    .arg(format!("sh -c {}", quote(script)));
            }
            Launcher::Slurm => {
                if let Some(j) = &self.slurm_job {
                    c.arg(format!("--jobid={j}"));
                }
                c.args(["--overlap", "-N1", "-n1", "--unbuffered", "--quiet"])
                    .arg(format!("--nodelist={host}"))
                    .args(["sh", "-c", script]);
            }
        }
        c.stdin(Stdio::null());
        c
    }

    /// The ssh options: no prompts, a dead host noticed in about 5 s (a
    /// keepalive every second, 5 unanswered), then the user's.
    fn ssh_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "BatchMode=yes",
            "ConnectTimeout=10",
            "ServerAliveInterval=1",
            "ServerAliveCountMax=5",
            "LogLevel=ERROR",
        ]
        .iter()
        .flat_map(|o| ["-o".to_string(), (*o).to_string()])
        .collect();
        if let Some(f) = &self.ssh_config {
            a.push("-F".into());
            a.push(f.display().to_string());
        }
        for o in &self.ssh_options {
            a.push("-o".into());
            a.push(o.clone());
        }
        a
    }

    /// The program's path on the hosts.
    pub fn exe_on_hosts(&self, local: &Path) -> String {
        match (&self.exe, self.ship) {
            (_, true) => format!("{}/iomsg", self.dir),
            (Some(e), false) => e.clone(),
            (None, false) => local.display().to_string(),
        }
    }

    /// The wrapper that runs `argv` with `env` on a host in the scratch
    /// directory: prints [`PID_LINE`], then [`EXIT_LINE`] when it ends.
    pub fn wrapper(&self, env: &[(String, String)], argv: &[String]) -> String {
        let mut cmd = String::from("env");
        for (k, v) in env {
            cmd.push(' ');
            cmd.push_str(&quote(&format!("{k}={v}")));
        }
        for a in argv {
            cmd.push(' ');
            cmd.push_str(&quote(a));
        }
        // Over ssh the wrapper's stdin is the soak's pipe: when it ends
        // (the soak is gone, even SIGKILLed) a watcher kills the process.
        // pdsh does not carry stdin, and Slurm ends a step whose srun is
        // gone by itself.
        // (sh gives a background job /dev/null for stdin unless told:
        // the watcher reads the wrapper's stdin through fd 3.)
        let (keep, watch) = if self.watches_stdin() {
            (
                "exec 3<&0; ",
                "(while read -r _; do :; done; kill -KILL $p) <&3 >/dev/null 2>&1 & w=$!; ",
            )
        } else {
            ("", "w=; ")
        };
        format!(
            "{keep}mkdir -p {d} && cd {d} && {{ {cmd} </dev/null 3<&- & p=$!; echo {PID_LINE} $p; {watch}\
             wait $p; s=$?; [ -n \"$w\" ] && kill $w 2>/dev/null; echo {EXIT_LINE} $s; }}",
            d = quote(&self.dir)
        )
    }

    /// Whether the launcher carries the soak's stdin to the wrapper (its
    /// watcher, see [`RemoteJob::wrapper`]).
    pub fn watches_stdin(&self) -> bool {
        self.launcher == Launcher::Ssh
    }

    /// Every host, each once, the server's first.
    pub fn hosts(&self) -> Vec<String> {
        let mut out = vec![self.server.clone()];
        for h in &self.clients {
            if !out.contains(h) {
                out.push(h.clone());
            }
        }
        out
    }

    /// Client slot `k`'s host.
    pub fn client_host(&self, k: usize) -> &str {
        &self.clients[k % self.clients.len()]
    }

    /// The address the clients dial.
    ///
    /// # Errors
    ///
    /// ssh could not say the server host's address.
    pub fn server_address(&self) -> Result<String, String> {
        if let Some(a) = &self.server_addr {
            return Ok(a.clone());
        }
        if self.launcher == Launcher::Slurm {
            return Ok(self.server.clone());
        }
        let out = Command::new("ssh")
            .arg("-G")
            .args(self.ssh_args())
            .arg(&self.server)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run ssh: {e}"))?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("hostname "))
            .map(|h| h.trim().to_string())
            .ok_or_else(|| {
                format!(
                    "`ssh -G {}` named no address for the server: give --server-addr",
                    self.server
                )
            })
    }
}

/// Runs `c` to its end, at most `limit`; its stdout, or why not.
///
/// # Errors
///
/// It could not start, failed, or took too long (then it is killed).
pub fn run_bounded(mut c: Command, limit: Duration, what: &str) -> Result<Vec<u8>, String> {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", c.get_program()))?;
    let reader = stdout_of(&mut child);
    let err_reader = stderr_of(&mut child);
    let status = wait_bounded(&mut child, limit);
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!(
            "{what}: {s}: {}",
            String::from_utf8_lossy(&stderr).trim()
        )),
        None => Err(format!("{what}: no answer in {} s", limit.as_secs())),
    }
}

/// Waits for `child` at most `limit`; kills it after.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Wall::now() + limit;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Wall::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What the wrapper's lines in a process's output say: its pid on its
/// host, and how it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wrapped {
    /// Its pid on its host.
    pub pid: Option<u32>,
    /// How it ended, once it has.
    pub exit: Option<Exit>,
}

/// Reads the wrapper's lines from output `text` (a launcher may prefix
/// lines with the host's name).
pub fn wrapped(text: &str) -> Wrapped {
    let mut w = Wrapped::default();
    for line in text.lines() {
        let word_after = |tag: &str| {
            let (_, rest) = line.split_once(tag)?;
            rest.split_whitespace().next()?.parse::<u32>().ok()
        };
        if let Some(p) = word_after(PID_LINE) {
            w.pid = Some(p);
        } else if let Some(code) = word_after(EXIT_LINE) {
            w.exit = Some(exit_of_status(code));
        }
    }
    w
}

/// `sh`'s exit status as an [`Exit`]: 129–159 is a signal.
pub fn exit_of_status(code: u32) -> Exit {
    if (129..160).contains(&code) {
        Exit {
            code: None,
            signal: Some((code - 128) as i32),
            core_dumped: false,
        }
    } else {
        Exit {
            code: Some(code as i32),
            signal: None,
            core_dumped: false,
        }
    }
}

/// What was learned of one host before and after the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HostReport {
    /// As the launcher names it.
    pub host: String,
    /// `server`, `client-0`, … run there.
    pub roles: Vec<String>,
    /// Its clock minus this one's, in milliseconds, less the one-way
    /// trip of the measurement ([`clock_offset`]); taken off its files'
    /// times.
    pub clock_offset_ms: f64,
    /// Its UCX's version (`iomsg info`).
    pub ucx_version: String,
    /// The transports its UCX offers (`name/device`, with the run's
    /// `UCX_TLS`).
    pub transports_offered: Vec<String>,
    /// The transports its processes' endpoints used (UCX's `ep_cfg`
    /// lines, e.g. `tag(tcp/eth0)`).
    pub transports_used: Vec<String>,
    /// Lost during the run: why.
    pub lost: Option<String>,
    /// Its files could not be fetched: why.
    pub collect_error: Option<String>,
}

/// Clock samples taken per host ([`clock_offset`]).
const CLOCK_SAMPLES: usize = 8;

/// Measures `host`'s clock offset from this one, in microseconds: the
/// host prints its time (8 times, 50 ms apart) and each
/// line is stamped here as it arrives; the largest difference is kept,
/// the one whose trip was shortest. The offset is thereby under-read by
/// that one-way trip (the launcher's connection is up by then: well
/// under a millisecond on a LAN), never by the connection's setup.
///
/// # Errors
///
/// The host did not answer.
pub fn clock_offset(job: &RemoteJob, host: &str) -> Result<i64, String> {
    use std::io::BufRead as _;
    let what = format!("the clock of {host}");
    let script = format!(
        "i=0; while [ $i -lt {CLOCK_SAMPLES} ]; do date +%s%N; sleep 0.05; i=$((i+1)); done"
    );
    let (mut child, out, said) = stream_from(job, host, &script, &what)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send((epoch_us(), line)).is_err() {
                break;
            }
        }
    });
    let until = Wall::now() + SHORT;
    let mut best: Option<i64> = None;
    let mut odd = String::new();
    while let Ok((at, line)) = rx.recv_timeout(until.saturating_duration_since(Wall::now())) {
        let Some(ns) = line
            .split_whitespace()
            .last()
            .and_then(|w| w.parse::<u64>().ok())
        else {
            odd = line;
            continue;
        };
        let offset = (ns / 1000) as i64 - at as i64;
        best = Some(best.map_or(offset, |b| b.max(offset)));
    }
    let _ = wait_bounded(&mut child, Duration::from_secs(1));
    let said = said.join().unwrap_or_default();
    best.ok_or_else(|| {
        format!(
            "{what}: no time came back (`date +%s%N` said {odd:?}; {} said {:?})",
            job.launcher.program(),
            String::from_utf8_lossy(&said).trim()
        )
    })
}

/// `iomsg info` on `host` (with `env`): UCX's version and the transports
/// offered.
///
/// # Errors
///
/// It did not run.
pub fn ucx_on(
    job: &RemoteJob,
    host: &str,
    exe: &str,
    env: &[(String, String)],
) -> Result<(String, Vec<String>), String> {
    let mut script = String::from("env");
    for (k, v) in env {
        script.push(' ');
        script.push_str(&quote(&format!("{k}={v}")));
    }
    script.push(' ');
    script.push_str(&quote(exe));
    script.push_str(" info");
    let out = run_bounded(
        job.on(host, &script),
        SHORT,
        &format!("`iomsg info` on {host}"),
    )?;
    Ok(parse_info(&String::from_utf8_lossy(&out)))
}

/// `iomsg info`'s UCX version and transports (`name/device`).
pub fn parse_info(text: &str) -> (String, Vec<String>) {
    let mut version = String::new();
    let mut transports = Vec::new();
    let mut listing = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("UCX ") {
            version = rest.split_whitespace().next().unwrap_or("").to_string();
        } else if line.starts_with("transports UCX offers") {
            listing = true;
        } else if listing && line.starts_with("  ") {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() >= 2 {
                transports.push(format!("{}/{}", w[0], w[1]));
            }
        } else {
            listing = false;
        }
    }
    (version, transports)
}

/// The transports UCX's `ep_cfg` lines in output `text` name, one entry
/// per lane group: `tag(tcp/lo tcp/eth0) stream(tcp/lo)` gives
/// `tag(tcp/lo tcp/eth0)` and `stream(tcp/lo)`.
pub fn transports_used(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some((_, mut rest)) = line.split_once("ep_cfg[") else {
            continue;
        };
        rest = rest.split_once("]:").map_or("", |(_, r)| r);
        while let Some((name, after)) = rest.split_once('(') {
            let Some((list, tail)) = after.split_once(')') else {
                break;
            };
            let group = format!("{}({})", name.trim(), list.trim());
            if !out.contains(&group) {
                out.push(group);
            }
            rest = tail;
        }
    }
    out
}

/// Removes the scratch directory on `host`.
///
/// # Errors
///
/// The host did not answer.
pub fn clean(job: &RemoteJob, host: &str) -> Result<(), String> {
    run_bounded(
        job.on(host, &format!("rm -rf {}", quote(&job.dir))),
        SHORT,
        &format!("removing {host}:{}", job.dir),
    )
    .map(|_| ())
}

/// Sends `sig` (`KILL`, `TERM`) to `pid` on `host`, if that is still
/// process `name` (its command line holds `--audit-name NAME`: a pid
/// used again by another process is left alone); first reads its peak
/// resident memory (bytes), which it returns if it could.
///
/// # Errors
///
/// The host did not answer, or the process was gone.
pub fn signal(
    job: &RemoteJob,
    host: &str,
    pid: u32,
    name: &str,
    sig: &str,
) -> Result<Option<u64>, String> {
    let out = run_bounded(
        job.on(host, &signal_script(pid, name, sig)),
        SHORT,
        &format!("kill -{sig} {pid} ({name}) on {host}"),
    )?;
    let text = String::from_utf8_lossy(&out);
    Ok(text
        .lines()
        .find_map(|l| l.split_once("VmHWM:"))
        .and_then(|(_, v)| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kb| kb * 1024))
}

/// The script that signals process `name` by `pid` (see [`signal`]).
pub fn signal_script(pid: u32, name: &str, sig: &str) -> String {
    // Each argument ends with a NUL, read as a blank: the name is whole.
    let mark = quote(&format!("--audit-name {name} "));
    format!(
        "tr '\\0' ' ' < /proc/{pid}/cmdline 2>/dev/null | grep -qF -e {mark} \
         || {{ echo {pid} is no longer {name}; exit 3; }}; \
         grep VmHWM /proc/{pid}/status 2>/dev/null; kill -{sig} {pid}"
    )
}

/// Whether `host` answers a command within `limit`.
pub fn answers(job: &RemoteJob, host: &str, limit: Duration) -> bool {
    run_bounded(job.on(host, "true"), limit, "probe").is_ok()
}

/// A scratch directory name for this run on the hosts.
pub fn default_dir() -> String {
    format!(
        "/tmp/iomsg-soak-{}-{}",
        epoch_us() / 1_000_000,
        std::process::id()
    )
}

/// The local file of the wrapper's output for process `name`.
pub fn out_file(audit_dir: &Path, name: &str) -> PathBuf {
    audit_dir.join(format!("{name}.out"))
}

mod files;

pub use files::{collect, ship};
use files::{stderr_of, stdout_of, stream_from};
pub(super) mod fleet;
#[cfg(test)]
mod tests;
