//! What the process tests share: one test at a time, a temporary directory
//! of the test's own, child processes stopped by their pid, and the
//! `iomsg-ucx-peer` binary started on the loopback device.

// Each test file uses its own part of this.
#![allow(dead_code)]

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The peer binary of this crate.
pub const PEER: &str = env!("CARGO_BIN_EXE_iomsg-ucx-peer");

/// One test at a time: each runs a server and clients that busy-poll, and
/// on two cores several at once starve each other past their time limits.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A temporary directory of the test's own, removed at the end.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("iomsg-ucx-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("a temporary directory");
        Dir(p)
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    /// The last `n` lines of every `*.out` file here, each under its name:
    /// what a failed test prints so that a run that cannot be repeated
    /// still says what its processes saw.
    pub fn tails(&self, n: usize) -> String {
        let mut names: Vec<PathBuf> = fs::read_dir(&self.0)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        names.retain(|p| p.extension().is_some_and(|e| e == "out"));
        names.sort();
        let mut text = String::new();
        for p in names {
            let body = fs::read_to_string(&p).unwrap_or_default();
            let lines: Vec<&str> = body.lines().collect();
            let from = lines.len().saturating_sub(n);
            text += &format!("--- {} (last {} lines)\n", p.display(), lines.len() - from);
            for l in &lines[from..] {
                text += l;
                text.push('\n');
            }
        }
        text
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A child process, continued (if stopped) and killed by its pid if the
/// test ends first.
pub struct Proc(pub Child);

impl Proc {
    /// Sends `sig`; panics if it could not be sent.
    pub fn signal(&self, sig: i32) {
        assert_eq!(self.signal_quietly(sig), 0, "kill({sig})");
    }
    /// kill(2) on the pid of this child (started by the test, not yet
    /// reaped): 0, or the errno.
    fn signal_quietly(&self, sig: i32) -> i32 {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        match nix::sys::signal::Signal::try_from(sig) {
            Ok(sig) => nix::sys::signal::kill(pid, sig).map_or_else(|e| e as i32, |()| 0),
            Err(e) => e as i32,
        }
    }
    /// Its resident memory in KiB, while it runs.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = fs::read_to_string(format!("/proc/{}/status", self.0.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
    /// `None` while it runs; how it ended otherwise.
    pub fn ended(&mut self) -> Option<String> {
        match self.0.try_wait() {
            Ok(Some(s)) => Some(match s.signal() {
                Some(sig) => format!("killed by signal {sig}"),
                None => format!("exited with {s}"),
            }),
            _ => None,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.signal_quietly(libc::SIGCONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The transports the peers may use: tcp, plus shared memory when a test
/// passes `--shared-memory` to both ends.
fn transports(args: &[&str]) -> &'static str {
    if args.contains(&"--shared-memory") {
        "tcp,posix,sysv,cma,self"
    } else {
        "tcp"
    }
}

/// `iomsg-ucx-peer ARGS` on the loopback device (this machine has other
/// interfaces), its output in `out`.
pub fn peer(args: &[&str], out: &Path) -> Proc {
    let out = fs::File::create(out).expect("the peer's output file");
    let child = Command::new(PEER)
        .args(args)
        .env("UCX_NET_DEVICES", "lo")
        .env("UCX_TLS", transports(args))
        .stdout(out.try_clone().expect("a second handle"))
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .expect("the peer binary starts");
    Proc(child)
}

/// This test binary started again to run its test `test` alone, with
/// `env` set (the test serves when it finds its variable), on the
/// loopback device over tcp, its output in `out`; waits (10 s at most)
/// for the `listening on ADDR` line it prints and returns the process and
/// ADDR.
pub fn start_self(test: &str, env: &[(&str, &str)], out: &Path) -> (Proc, std::net::SocketAddr) {
    let log = fs::File::create(out).expect("the server's output file");
    let mut c = Command::new(std::env::current_exe().expect("this test binary"));
    c.args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env("UCX_NET_DEVICES", "lo")
        .env("UCX_TLS", "tcp")
        .stdout(log.try_clone().expect("a second handle"))
        .stderr(log)
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    let p = Proc(c.spawn().expect("this test binary starts again"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let text = fs::read_to_string(out).unwrap_or_default();
        // (libtest's own words may come first on the line.)
        let addr = text.lines().find_map(|l| {
            let at = l.find("listening on ")?;
            l[at + "listening on ".len()..].trim().parse().ok()
        });
        if let Some(addr) = addr {
            return (p, addr);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not listen: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The last `lines` lines of the file at `path` (empty if unreadable).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// How long the hostile tests' every-mode runs attack:
/// `IOMSG_HOSTILE_SECS`, 60 s unless set.
pub fn every_mode_for() -> std::time::Duration {
    let secs = std::env::var("IOMSG_HOSTILE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    std::time::Duration::from_secs(secs)
}
