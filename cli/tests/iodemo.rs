//! `iomsg server --io-demo` as a process, killed (SIGKILL) twice under an
//! unmodified io_demo client (`/usr/bin/io_demo`, skipped with a note
//! when it is not on PATH) and restarted on the same port; what io_demo
//! logged is reconciled with what each server instance audited.
//!
//! io_demo's log is the ground truth of what the client asked for and
//! completed; the server's audit files of what it answered. A server
//! killed with SIGKILL writes nothing more, so what it took and did not
//! answer is visible only as io_demo's uncompleted operations.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

#[path = "iodemo/logs.rs"]
mod logs;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use logs::{client_conns, link, server_audit, ClientConn, ServerAudit};

/// The io_demo binary, if it is on PATH.
fn io_demo() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("io_demo"))
        .find(|p| p.is_file())
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iomsg-cli-iodemo-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child process, killed by its pid if still running when dropped.
struct Proc(Child);

impl Proc {
    fn spawn(cmd: &mut Command, out: &Path) -> Proc {
        let f = File::create(out).unwrap();
        let e = f.try_clone().unwrap();
        Proc(
            cmd.stdin(Stdio::null())
                .stdout(f)
                .stderr(e)
                .spawn()
                .unwrap(),
        )
    }

    /// SIGKILL, by pid, and reaped.
    fn kill(mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// Waits up to `limit` for an exit: its code, or `None` (still
    /// running: killed).
    fn wait(mut self, limit: Duration) -> Option<i32> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Some(s) = self.0.try_wait().unwrap() {
                return Some(s.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM (by pid), then up to `limit` for it to exit.
    fn stop(self, limit: Duration) -> Option<i32> {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.wait(limit)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Starts the command `make` builds, its output to `out`, and waits
/// until `out` says `ready` (a few tries: the port may take a moment to
/// come free after a kill).
fn start_until(make: impl Fn() -> Command, out: &Path, ready: &str, what: &str) -> Proc {
    for _ in 0..10 {
        let mut p = Proc::spawn(&mut make(), out);
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let log = String::from_utf8_lossy(&std::fs::read(out).unwrap_or_default()).into_owned();
            if log.contains(ready) {
                return p;
            }
            if let Ok(Some(_)) = p.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = p.0.kill();
        let _ = p.0.wait();
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("{what} never said {ready:?}");
}

/// Starts `iomsg server --io-demo` on `port`, auditing as `name` in
/// `dir`, and waits until it listens.
fn start_server(dir: &Path, name: &str, port: u16) -> Proc {
    let make = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_iomsg"));
        cmd.args(["server", "--io-demo", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--audit-dir")
            .arg(dir)
            .args(["--audit-name", name])
            .env("UCX_TCP_CM_REUSEADDR", "y")
            .env("UCX_NET_DEVICES", "lo");
        cmd
    };
    let out = dir.join(format!("{name}.out"));
    // The audit log says it: the server writes `listening` there.
    let p = start_until(make, &out, "listening on", &format!("the server {name}"));
    let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
    assert!(
        log.contains(" listening "),
        "{name}'s audit log has no listening line"
    );
    p
}

/// The runs go one at a time: each keeps a server and a client busy on
/// two cores.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// io_demo against a server killed twice; see the module.
fn killed_twice(name: &str, extra: &[&str]) {
    let _one = one_at_a_time();
    let Some(bin) = io_demo() else {
        eprintln!("skipped: io_demo is not on PATH (Debian's ucx-utils has it)");
        return;
    };
    let dir = scratch(name);
    let port = free_port();
    let names = ["s0", "s1", "s2"];
    let mut server = start_server(&dir, names[0], port);
    let mut cmd = Command::new(bin);
    cmd.args(extra)
        .args(["-y", "0.2s", "-l", "6s", "-i", "100000000", "-q"])
        .args(["-o", "read,write"])
        .arg(format!("127.0.0.1:{port}"));
    let client_log = dir.join("io_demo.log");
    let client = Proc::spawn(&mut cmd, &client_log);
    for next in &names[1..] {
        std::thread::sleep(Duration::from_millis(1600));
        server.kill();
        std::thread::sleep(Duration::from_millis(300));
        server = start_server(&dir, next, port);
    }
    let code = client.wait(Duration::from_secs(20));
    let stopped = server.stop(Duration::from_secs(10));
    let log = std::fs::read_to_string(&client_log).unwrap();
    assert_eq!(code, Some(0), "io_demo's exit; its log:\n{}", tail(&log));
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "io_demo logged errors: {errors:#?}");
    assert_eq!(stopped, Some(0), "the last server stops on SIGTERM");
    let audits: Vec<ServerAudit> = names.iter().map(|n| server_audit(&dir, n)).collect();
    reconcile(&client_conns(&log), &audits);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The last lines of a long log.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Every answer the servers recorded belongs to a connection io_demo
/// opened, none twice; no server saw a gap, a duplicate, corrupt data or
/// bad input; and per connection, io_demo completed no more than the
/// server answered, and the server answered, held or took late no more
/// than io_demo sent.
fn reconcile(client: &[ClientConn], audits: &[ServerAudit]) {
    assert!(!client.is_empty(), "io_demo logged no connection");
    let mut answered = 0;
    let mut linked = Vec::new();
    for (i, a) in audits.iter().enumerate() {
        assert!(a.bad_lines.is_empty(), "server {i}: {:#?}", a.bad_lines);
        assert!(
            a.twice.is_empty(),
            "server {i} answered twice: {:?}",
            a.twice
        );
        assert_eq!(
            a.stray_records, 0,
            "server {i}: records of unopened connections"
        );
        let records: u64 = a.conns.values().map(|c| c.records).sum();
        assert!(
            records > 0,
            "server {i} answered nothing: the kills tested nothing"
        );
        answered += records;
        for s in a.conns.values() {
            let Some(c) = link(s, client) else {
                assert_eq!(
                    s.records, 0,
                    "server {i} answered connection {:016x}, which io_demo never opened: {s:?}",
                    s.conn
                );
                continue;
            };
            assert!(
                c.disconnected,
                "io_demo's connection #{} never disconnected",
                c.number
            );
            assert!(
                c.completed <= s.records,
                "io_demo's #{} completed {} operations, the server recorded {}: {s:?}",
                c.number,
                c.completed,
                s.records
            );
            let sent = c.completed + c.uncompleted;
            assert!(
                s.records <= s.taken && s.taken <= sent,
                "server {i} took {} of io_demo's #{} {sent} and answered {}: {s:?}",
                s.taken,
                c.number,
                s.records
            );
            assert!(
                s.records + s.inflight + s.late <= sent,
                "server {i} accounts for more than io_demo's #{} sent ({sent}): {s:?}",
                c.number
            );
            eprintln!(
                "io_demo #{}: completed {} uncompleted {} | server {i} {:016x}: records {} \
                 in flight {} late {}",
                c.number, c.completed, c.uncompleted, s.conn, s.records, s.inflight, s.late
            );
            linked.push(c.number);
        }
    }
    linked.sort_unstable();
    let before = linked.len();
    linked.dedup();
    assert_eq!(
        before,
        linked.len(),
        "one io_demo connection linked to two servers' connections"
    );
    let completed: u64 = client.iter().map(|c| c.completed).sum();
    assert!(completed > 0, "io_demo completed nothing");
    assert!(
        completed <= answered,
        "io_demo completed {completed} operations, the servers recorded {answered}"
    );
    for c in client.iter().filter(|c| !linked.contains(&c.number)) {
        assert_eq!(
            c.completed, 0,
            "io_demo's #{} completed operations no server recorded",
            c.number
        );
    }
}

#[test]
fn tag_clients_survive_two_server_kills_and_every_answer_is_accounted() {
    killed_twice("tag", &[]);
}

#[test]
fn active_message_clients_survive_two_server_kills_and_every_answer_is_accounted() {
    killed_twice("am", &["-A"]);
}

/// Starts an unmodified io_demo server (`-v`: it logs every request it
/// gets, the ground truth of what arrived) on `port` and waits until it
/// listens.
fn start_io_demo_server(bin: &Path, dir: &Path, name: &str, port: u16, am: bool) -> Proc {
    let make = || {
        let mut cmd = Command::new(bin);
        cmd.args(["-q", "-v", "-d", "4096", "-p", &port.to_string()])
            .args(if am { &["-A"][..] } else { &[][..] })
            .env("UCX_TCP_CM_REUSEADDR", "y");
        cmd
    };
    let out = dir.join(format!("{name}.log"));
    start_until(
        make,
        &out,
        "started listener",
        &format!("io_demo's server {name}"),
    )
}

/// The sns an io_demo server's verbose log says it got.
fn io_demo_received(dir: &Path, name: &str) -> std::collections::HashSet<u32> {
    let log = String::from_utf8_lossy(&std::fs::read(dir.join(format!("{name}.log"))).unwrap())
        .into_owned();
    log.lines()
        .filter(|l| l.contains("got io"))
        .filter_map(|l| {
            l.split(" sn ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// `iomsg client --io-demo` against an unmodified io_demo server killed
/// once (SIGKILL) and restarted: the client exits 0; every operation it
/// sent is either answered (its audit records) or named unanswered
/// (`iodemo_forgot`), never both; every answered one is one an io_demo
/// server logged getting; and the kill left some named.
fn iomsg_client_against_io_demo(name: &str, am: bool) {
    let _one = one_at_a_time();
    let Some(bin) = io_demo() else {
        eprintln!("skipped: io_demo is not on PATH (Debian's ucx-utils has it)");
        return;
    };
    let dir = scratch(name);
    let port = free_port();
    let server = start_io_demo_server(&bin, &dir, "io-demo-0", port, am);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iomsg"));
    cmd.args([
        "client",
        "--io-demo",
        "-q",
        "--api",
        if am { "am" } else { "tag" },
    ])
    .args(["-o", "read,write", "-d", "4096", "-l", "4s", "-i", "0"])
    .args(["--retry-interval", "100ms", "--report-interval", "0"])
    .arg("--audit-dir")
    .arg(&dir)
    .args(["--audit-name", "client"])
    .arg(format!("127.0.0.1:{port}"));
    let client = Proc::spawn(&mut cmd, &dir.join("client.out"));
    std::thread::sleep(Duration::from_millis(1500));
    server.kill();
    std::thread::sleep(Duration::from_millis(300));
    let server = start_io_demo_server(&bin, &dir, "io-demo-1", port, am);
    let code = client.wait(Duration::from_secs(30));
    server.kill();
    let out = std::fs::read_to_string(dir.join("client.out")).unwrap_or_default();
    assert_eq!(
        code,
        Some(0),
        "iomsg client's exit; its output:\n{}",
        tail(&out)
    );
    let log = std::fs::read_to_string(dir.join("client.log")).unwrap();
    let forgot: Vec<u32> = log
        .lines()
        .filter(|l| l.contains(" iodemo_forgot "))
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect();
    let records = std::fs::read(dir.join("client.records")).unwrap();
    let answered: Vec<u32> = records
        .chunks_exact(24)
        .map(|c| u32::from_le_bytes([c[8], c[9], c[10], c[11]]))
        .collect();
    let received: std::collections::HashSet<u32> = io_demo_received(&dir, "io-demo-0")
        .union(&io_demo_received(&dir, "io-demo-1"))
        .copied()
        .collect();
    assert!(
        !forgot.is_empty(),
        "the kill left nothing unanswered:\n{}",
        tail(&out)
    );
    let both: Vec<&u32> = forgot.iter().filter(|s| answered.contains(s)).collect();
    assert!(both.is_empty(), "answered and named unanswered: {both:?}");
    let unheard: Vec<&u32> = answered.iter().filter(|s| !received.contains(s)).collect();
    assert!(
        unheard.is_empty(),
        "answered, though no io_demo server got them: {unheard:?}"
    );
    // One counter: every sn from the first to the last is accounted for.
    let first = answered.iter().chain(&forgot).copied().min().unwrap();
    let all: std::collections::HashSet<u32> = answered.iter().chain(&forgot).copied().collect();
    let last = all.iter().map(|s| s.wrapping_sub(first)).max().unwrap();
    assert_eq!(
        all.len() as u32,
        last + 1,
        "every sn sent is answered or named"
    );
    assert_eq!(answered.len() + forgot.len(), all.len(), "no sn twice");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_iomsg_client_names_what_a_killed_tag_io_demo_server_left_unanswered() {
    iomsg_client_against_io_demo("client-tag", false);
}

#[test]
fn the_iomsg_client_names_what_a_killed_am_io_demo_server_left_unanswered() {
    iomsg_client_against_io_demo("client-am", true);
}
