//! A server in a child process (this test binary, run as `child_server`)
//! SIGKILLed twice mid-stream and restarted on the same address, over TCP
//! and over a Unix socket. The client reconnects and replays; from the
//! server instances' records alone, every message sent reached some
//! instance with the same bytes and no instance took one twice.

mod common;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{reconcile, Taken, TempDir, SIZES};
use iomsg_core::workload::{fill, hash};
use iomsg_stream::{Addr, Client, ClientOptions, Delivery, ReadRequest, Server, ServerHandler};

const MESSAGES: u64 = 3000;
const KILLS: usize = 2;
/// A kill waits until the running instance has recorded this many.
const KILL_AFTER: usize = (MESSAGES / 5) as usize;
/// The longest wait for any one step.
const STEP: Duration = Duration::from_secs(30);

const ENV_ADDR: &str = "IOMSG_STREAM_CHILD_ADDR";
const ENV_RECORD: &str = "IOMSG_STREAM_CHILD_RECORD";
const ENV_READY: &str = "IOMSG_STREAM_CHILD_READY";

// ---------------------------------------------------------------------------
// The child: a server that appends `session sn hash` per message taken.

/// Writes each message to the record; the batch is on the file (written
/// to the kernel) before any acknowledgement of it leaves.
struct FileRecord {
    out: BufWriter<File>,
}

impl ServerHandler for FileRecord {
    fn deliver(&mut self, d: Delivery<'_>) {
        writeln!(
            self.out,
            "{:016x} {} {:016x}",
            d.session,
            d.sn,
            hash(d.data)
        )
        .expect("the record takes the line");
    }
    fn respond(&mut self, _read: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
    fn flush(&mut self) -> Result<(), iomsg_core::session::Unkept> {
        self.out.flush().expect("the record is written");
        Ok(())
    }
}

/// Not a test of its own: the server process that the kill tests start.
#[test]
#[ignore = "the server process of the kill tests, started by them"]
fn child_server() {
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let record = OpenOptions::new()
        .create(true)
        .append(true)
        .open(env(ENV_RECORD))
        .expect("the record opens");
    let handler = FileRecord {
        out: BufWriter::new(record),
    };
    let mut server =
        Server::bind(env(ENV_ADDR), Default::default(), handler).expect("the server binds");
    let ready = PathBuf::from(env(ENV_READY));
    let staged = ready.with_extension("tmp");
    std::fs::write(&staged, server.local_addr().to_string()).expect("ready file");
    std::fs::rename(&staged, &ready).expect("ready file in place");
    // Killed long before; the bound keeps a lost child from living on.
    server.run_for(Duration::from_secs(120)).expect("serves");
}

// ---------------------------------------------------------------------------
// The parent.

/// The running server instance; killed when dropped.
struct Instance {
    child: Child,
    record: PathBuf,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts instance `n` on `addr` and waits until it listens; returns it
/// and the address it listens on.
fn start(dir: &Path, n: usize, addr: &str) -> (Instance, String) {
    let record = dir.join(format!("server-{n}.rec"));
    let ready = dir.join(format!("server-{n}.ready"));
    let log = dir.join(format!("server-{n}.log"));
    let child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--ignored", "--exact", "child_server", "--nocapture"])
        .env(ENV_ADDR, addr)
        .env(ENV_RECORD, &record)
        .env(ENV_READY, &ready)
        .stdin(Stdio::null())
        .stdout(File::create(&log).expect("log"))
        .stderr(File::create(dir.join(format!("server-{n}.err"))).expect("log"))
        .spawn()
        .expect("the server process starts");
    let mut instance = Instance { child, record };
    let started = Instant::now();
    loop {
        if let Ok(addr) = std::fs::read_to_string(&ready) {
            return (instance, addr);
        }
        if let Ok(Some(status)) = instance.child.try_wait() {
            let err = std::fs::read_to_string(dir.join(format!("server-{n}.err")));
            panic!("server {n} exited ({status}) before it listened: {err:?}");
        }
        assert!(
            started.elapsed() < STEP,
            "server {n} did not listen within {STEP:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whole lines of a record: a SIGKILL may cut the last one short; its
/// batch was never acknowledged, so the client sent it again.
fn read_record(path: &Path) -> Vec<Taken> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let whole = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    whole
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 3, "a malformed record line {line:?} in {path:?}");
            let hex = |s: &str| u64::from_str_radix(s, 16).expect("hex");
            Taken {
                session: hex(f[0]),
                sn: f[1].parse().expect("sn"),
                hash: hex(f[2]),
            }
        })
        .collect()
}

fn lines(path: &Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

/// What the client thread reports: its session, what it sent, and the
/// restarts and possible duplicates it saw.
struct Sent {
    session: u64,
    sent: HashMap<u64, u64>,
    restarts: u64,
    possible_duplicates: u64,
}

/// Sends every message (sizes 1 B to 64 KiB), through whatever restarts,
/// then waits for every acknowledgement.
fn client(addr: Addr, finished: Arc<AtomicBool>) -> Sent {
    let options = ClientOptions::default().retry_for(STEP);
    let mut client = Client::connect(&addr, options).expect("the client connects");
    let session = client.session_id();
    let mut sent = HashMap::new();
    let mut buf = Vec::new();
    for i in 0..MESSAGES {
        buf.resize(SIZES[i as usize % SIZES.len()], 0);
        fill(session, i, &mut buf);
        let sn = client.send(&buf).expect("send");
        sent.insert(sn, hash(&buf));
        if i % 10 == 9 {
            // Paced (at most 10 messages a millisecond), so that even an
            // optimised build is still sending when a kill comes.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    client.flush(STEP).expect("every message acknowledged");
    let stats = *client.stats();
    finished.store(true, Ordering::Relaxed);
    client.close(Duration::from_secs(5)).expect("close");
    Sent {
        session,
        sent,
        restarts: stats.server_restarts,
        possible_duplicates: stats.possible_duplicates,
    }
}

/// Freezes (so that frames are in flight), then SIGKILLs, `instance`.
fn kill(mut instance: Instance) -> usize {
    let pid = instance.child.id();
    // The shell's own `kill`: no procps needed.
    let stopped = Command::new("sh")
        .args(["-c", &format!("kill -STOP {pid}")])
        .status();
    assert!(
        stopped.is_ok_and(|s| s.success()),
        "cannot SIGSTOP pid {pid}"
    );
    std::thread::sleep(Duration::from_millis(100));
    let delivered = lines(&instance.record);
    instance.child.kill().expect("SIGKILL");
    instance.child.wait().expect("reaped");
    delivered
}

fn kill_twice_and_reconcile(addr: &str) {
    let dir = TempDir::new("kill");
    let addr = addr.replace("DIR", &dir.0.display().to_string());
    let (mut instance, bound) = start(&dir.0, 1, &addr);
    let finished = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&finished);
    let target: Addr = bound.parse().expect("the address the server printed");
    let client = std::thread::spawn(move || client(target, done));
    let mut records = vec![instance.record.clone()];
    for k in 1..=KILLS {
        let started = Instant::now();
        while lines(&instance.record) < KILL_AFTER {
            assert!(!client.is_finished(), "the client ended before kill {k}");
            assert!(
                started.elapsed() < STEP,
                "server {k} recorded too little in {STEP:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            !finished.load(Ordering::Relaxed),
            "kill {k} would not be mid-stream"
        );
        let delivered = kill(instance);
        eprintln!("kill {k}: SIGKILLed server {k} after it recorded {delivered} messages");
        (instance, _) = start(&dir.0, k + 1, &bound);
        records.push(instance.record.clone());
    }
    let sent = client.join().expect("the client thread");
    drop(instance);
    let instances: Vec<Vec<Taken>> = records.iter().map(|r| read_record(r)).collect();
    let across = reconcile(sent.session, &sent.sent, &instances).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "{} messages, {KILLS} kills: none lost, {across} copies across instances \
         ({} announced as possible duplicates)",
        sent.sent.len(),
        sent.possible_duplicates
    );
    assert_eq!(sent.sent.len() as u64, MESSAGES);
    assert_eq!(sent.restarts, KILLS as u64, "each kill cut a live session");
    assert!(
        across as u64 <= sent.possible_duplicates,
        "{across} copies across instances, {} announced",
        sent.possible_duplicates
    );
}

#[test]
fn tcp_server_killed_twice_loses_nothing() {
    kill_twice_and_reconcile("127.0.0.1:0");
}

#[test]
fn unix_server_killed_twice_loses_nothing() {
    kill_twice_and_reconcile("unix:DIR/server.sock");
}

/// The check can fail: a record missing one message, holding other bytes
/// for one, or holding one twice, is caught.
#[test]
fn reconcile_catches_a_lost_a_changed_and_a_doubled_message() {
    let sent: HashMap<u64, u64> = (0..10).map(|sn| (sn, sn * 7)).collect();
    let whole: Vec<Taken> = (0..10)
        .map(|sn| Taken {
            session: 1,
            sn,
            hash: sn * 7,
        })
        .collect();
    assert_eq!(reconcile(1, &sent, std::slice::from_ref(&whole)), Ok(0));
    let mut missing = whole.clone();
    missing.remove(4);
    let lost = reconcile(1, &sent, &[missing]).expect_err("a lost message noticed");
    assert!(lost.contains("[4]"), "{lost}");
    let mut changed = whole.clone();
    changed[3].hash ^= 1;
    let mismatch = reconcile(1, &sent, &[changed]).expect_err("changed bytes noticed");
    assert!(mismatch.contains("sn 3"), "{mismatch}");
    let doubled = [&whole[..], &whole[..1]].concat();
    let twice = reconcile(1, &sent, &[doubled]).expect_err("an sn taken twice noticed");
    assert!(twice.contains("twice"), "{twice}");
    let split = [whole[..5].to_vec(), whole.clone()];
    assert_eq!(
        reconcile(1, &sent, &split),
        Ok(5),
        "copies across instances counted"
    );
}
