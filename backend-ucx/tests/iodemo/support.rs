//! What the io_demo tests share: an [`IoDemoServer`] in its own thread
//! (its events sent back over a channel), io_demo clients as child
//! processes with bounded waits, and the counts io_demo's own log gives.

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iomsg_ucx::iodemo::{IoDemoEvent, IoDemoOptions, IoDemoServer};

/// The io_demo binary, if it is on PATH.
pub fn io_demo() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("io_demo"))
        .find(|p| p.is_file())
}

/// A server running in a thread of its own; stopped (and joined) on drop.
pub struct ServerThread {
    /// Where it listens.
    pub addr: SocketAddr,
    events: Receiver<IoDemoEvent>,
    /// Every event taken so far, in order.
    pub seen: Vec<IoDemoEvent>,
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<()>>,
    /// One server (and its test) at a time: on two cores, raw peers that
    /// are progressed only while their test waits on them had their
    /// endpoints time out while the other tests' io_demo processes ran.
    _one: std::sync::MutexGuard<'static, ()>,
}

/// The lock [`ServerThread`] holds for its life.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The longest a server thread runs, whatever the test does.
const SERVER_LIFE: Duration = Duration::from_secs(60);

impl ServerThread {
    /// Starts a server on 127.0.0.1 (a free port) with `opts`.
    pub fn start(opts: IoDemoOptions) -> ServerThread {
        let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let (tx, events) = mpsc::channel();
        let (addr_tx, addr_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let join = std::thread::spawn(move || {
            let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
            let mut server = match IoDemoServer::bind(any, opts) {
                Ok(s) => s,
                Err(e) => {
                    let _ = addr_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = addr_tx.send(Ok(server.local_addr()));
            let end = Instant::now() + SERVER_LIFE;
            while !flag.load(Ordering::Relaxed) && Instant::now() < end {
                server.wait(Duration::from_millis(20));
                while let Some(e) = server.next_event() {
                    let _ = tx.send(e);
                }
            }
            server.shutdown(Duration::from_secs(2));
            while let Some(e) = server.next_event() {
                let _ = tx.send(e);
            }
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the server thread says where it listens")
            .expect("the server listens");
        ServerThread {
            addr,
            events,
            seen: Vec::new(),
            stop,
            join: Some(join),
            _one: one,
        }
    }

    /// Takes events until one satisfies `want` (returned) or `limit`
    /// passes (`None`); every event taken is kept in [`seen`](Self::seen).
    pub fn wait_for(
        &mut self,
        limit: Duration,
        mut want: impl FnMut(&IoDemoEvent) -> bool,
    ) -> Option<IoDemoEvent> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(e) => {
                    self.seen.push(e.clone());
                    if want(&e) {
                        return Some(e);
                    }
                }
                Err(_) if Instant::now() >= end => return None,
                Err(_) => {}
            }
        }
    }

    /// Stops the server and returns every event it reported.
    pub fn stop(mut self) -> Vec<IoDemoEvent> {
        self.halt();
        self.seen.extend(self.events.try_iter());
        std::mem::take(&mut self.seen)
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            j.join().expect("the server thread does not panic");
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

/// An io_demo client process, killed (by its pid) if still running when
/// dropped.
pub struct Client {
    child: Child,
    /// Its stdout and stderr, together.
    pub log: PathBuf,
}

impl Client {
    /// Starts `io_demo ARGS ADDR`, its output to a fresh file.
    pub fn spawn(bin: &PathBuf, args: &[&str], addr: SocketAddr, name: &str) -> Client {
        let log = std::env::temp_dir().join(format!(
            "iomsg-iodemo-{}-{}-{name}.log",
            std::process::id(),
            crate::support::unique()
        ));
        let out = File::create(&log).expect("a log file");
        let err = out.try_clone().expect("the log file twice");
        let child = Command::new(bin)
            .args(args)
            .arg(addr.to_string())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("io_demo starts");
        Client { child, log }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `limit` for it to exit: its exit code and log; killed
    /// (and the test failed) if it does not exit in time.
    pub fn finish(mut self, limit: Duration) -> (Option<i32>, String) {
        let end = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for io_demo") {
                return (status.code(), self.read_log());
            }
            if Instant::now() >= end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "io_demo did not exit within {limit:?}; its log:\n{}",
                    self.read_log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn read_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A number not given out before in this process.
pub fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Reads and writes io_demo completed, from its own log: the sum of its
/// periodic reports' totals, plus what its disconnect lines count since
/// the last report (both are per interval: a report resets the counts).
pub fn completed(log: &str) -> (u64, u64) {
    let (mut reads, mut writes) = (0, 0);
    for line in log.lines() {
        if line.contains("[DEMO] total min:") {
            for part in line.split(" | ") {
                let n = part
                    .rsplit_once("total:")
                    .and_then(|(_, n)| n.trim().parse::<u64>().ok());
                match (part.split_whitespace().next(), n) {
                    (Some("read"), Some(n)) => reads += n,
                    (Some("write"), Some(n)) => writes += n,
                    _ => {}
                }
            }
        } else if let Some(c) = disconnect_counts(line) {
            reads += c[0];
            writes += c[2];
        }
    }
    (reads, writes)
}

/// A disconnect line's `read X/Y write A/B`: `[X, Y, A, B]`.
pub fn disconnect_counts(line: &str) -> Option<[u64; 4]> {
    if !line.contains("[DEMO] disconnecting ") {
        return None;
    }
    let rest = &line[line.find(" read ")? + 6..];
    let (r, rest) = rest.split_once(" write ")?;
    let w = rest.split_whitespace().next()?;
    let pair = |s: &str| -> Option<(u64, u64)> {
        let (a, b) = s.split_once('/')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let ((x, y), (a, b)) = (pair(r)?, pair(w)?);
    Some([x, y, a, b])
}

/// Checks that io_demo exited 0, said so, and logged no error.
pub fn assert_client_ok(code: Option<i32>, log: &str) {
    assert_eq!(code, Some(0), "io_demo's exit code; its log:\n{log}");
    assert!(
        log.contains("Client exit with status 'OK'"),
        "io_demo did not report OK; its log:\n{log}"
    );
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "io_demo logged errors: {errors:#?}");
}
