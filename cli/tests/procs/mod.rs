//! What the tests of `iomsg server --journal` and `iomsg client --outbox`
//! share: the real `iomsg` started as a process of the test's own, one
//! test at a time, in a scratch directory, on a free port.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used, dead_code)]

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The tests run one at a time: they share two cores and kill processes
/// mid-stream.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new empty directory for test `kind`, case `name`.
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iomsg-{kind}-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process of ours, killed (by its pid) if the test ends first.
pub struct Proc {
    pub child: Child,
    pub out: PathBuf,
}

impl Proc {
    /// `iomsg ARGS`, stdout and stderr into `out`.
    pub fn start(args: &[&str], out: PathBuf) -> Proc {
        let f = File::create(&out).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_iomsg"))
            .args(args)
            .env("UCX_NET_DEVICES", "lo")
            .env("UCX_TLS", "tcp")
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Proc { child, out }
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits until the output holds `what` (`limit` at most).
    pub fn wait_for(&mut self, what: &str, limit: Duration) -> String {
        let t = Instant::now();
        while t.elapsed() < limit {
            let text = self.text();
            if text.contains(what) {
                return text;
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("exited ({st}) before saying {what:?}: {text}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no {what:?} within {limit:?}: {}", self.text());
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn signal(&mut self, sig: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits for the exit (`limit` at most).
    pub fn wait(&mut self, limit: Duration) -> ExitStatus {
        let t = Instant::now();
        while t.elapsed() < limit {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("still running after {limit:?}: {}", self.text());
    }

    /// SIGTERM, and the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        self.wait(Duration::from_secs(10))
    }

    /// SIGKILL, reaped.
    pub fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        self.wait(Duration::from_secs(10));
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
