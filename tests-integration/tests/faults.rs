//! Faults around separate processes: a server paused past a client's
//! connect timeout, clients killed while sending 1 MiB messages. The
//! server must live, keep serving the others, and give its memory back.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::time::{Duration, Instant};

use iomsg_core::transport::{Connector, DisconnectReason, Event, Transport};
use iomsg_ucx::{Liveness, UcxConfig, UcxTransport};

mod support;
use support::{one_at_a_time, peer, Dir, Proc};

fn server(dir: &Dir) -> (Proc, String) {
    server_on(dir, "tag")
}

/// A server on UCX API `api` (`am` or `tag`).
fn server_on(dir: &Dir, api: &str) -> (Proc, String) {
    let out = dir.file("server1.out");
    let p = peer(
        &["server", "127.0.0.1:0", "--record", "none", "--api", api],
        &out,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = fs::read_to_string(&out).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.starts_with("listening on ")) {
            return (p, line["listening on ".len()..].to_string());
        }
        assert!(Instant::now() < deadline, "no server: {text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client(dir: &Dir, addr: &str, count: u64, size: usize) -> Proc {
    client_on(dir, addr, count, size, "tag")
}

fn client_on(dir: &Dir, addr: &str, count: u64, size: usize, api: &str) -> Proc {
    let record = dir.file("client.rec");
    client_recording(dir, addr, count, size, api, record.to_str().unwrap())
}

/// A client whose record goes to `record` (`none`: no record).
fn client_recording(
    dir: &Dir,
    addr: &str,
    count: u64,
    size: usize,
    api: &str,
    record: &str,
) -> Proc {
    peer(
        &[
            "client",
            addr,
            "--api",
            api,
            "--count",
            &count.to_string(),
            "--size",
            &size.to_string(),
            "--record",
            record,
        ],
        &dir.file("client.out"),
    )
}

fn finished(mut p: Proc, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = p.0.try_wait() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_server_stopped_past_a_clients_connect_timeout_lives_on_after_sigcont() {
    let _one = one_at_a_time();
    let dir = Dir::new("faults-stop");
    let (mut srv, addr) = server(&dir);
    srv.signal(libc::SIGSTOP);
    // A client with a 1 s connect timeout and no retry connects to the
    // stopped server, gives up and goes.
    let cfg = UcxConfig::default().liveness(Some(Liveness {
        interval: Duration::from_millis(100),
        timeout: Duration::from_secs(1),
    }));
    let mut c = UcxTransport::client(addr.parse().unwrap(), cfg).unwrap();
    let t0 = iomsg_core::Instant::from_micros(0);
    let failed = c.connect(t0).is_err() || {
        let end = Instant::now() + Duration::from_millis(1500);
        let mut failed = false;
        while Instant::now() < end {
            if let Some(Event::Disconnected {
                reason: DisconnectReason::ConnectFailed(_),
                ..
            }) = c.poll(t0)
            {
                failed = true;
            }
        }
        failed
    };
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    srv.signal(libc::SIGCONT);
    assert!(failed, "the client did not give up on the stopped server");
    // The server lives, and serves.
    let good = client(&dir, &addr, 20_000, 64);
    assert!(
        finished(good, Duration::from_secs(60)),
        "the client after the pause did not finish: {}",
        fs::read_to_string(dir.file("client.out")).unwrap_or_default()
    );
    assert!(
        srv.alive(),
        "the server died: {}",
        fs::read_to_string(dir.file("server1.out")).unwrap_or_default()
    );
}

#[test]
fn clients_killed_while_sending_1_mib_messages_leave_the_server_serving_and_its_memory_back() {
    clients_killed_mid_message("tag");
}

#[test]
fn with_active_messages_clients_killed_mid_message_leave_the_server_serving_and_its_memory() {
    clients_killed_mid_message("am");
}

fn clients_killed_mid_message(api: &str) {
    let _one = one_at_a_time();
    let dir = Dir::new(&format!("faults-kill-{api}"));
    let (mut srv, addr) = server_on(&dir, api);
    let survivor_dir = Dir::new(&format!("faults-kill-survivor-{api}"));
    // It outlives the three doomed clients (stopped below, by pid): its
    // count is more than it can send meanwhile.
    let mut survivor = client_recording(&survivor_dir, &addr, 1 << 40, 64, api, "none");
    let mut peak = 0;
    let start = srv.rss_kib().unwrap_or(0);
    for k in 0..3 {
        let doomed_dir = Dir::new(&format!("faults-kill-doomed{k}-{api}"));
        // Few messages: the peer fills its whole window before it connects.
        let doomed = client_on(&doomed_dir, &addr, 40, 1 << 20, api);
        // Connected (the server counts two), then streaming for a while.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = fs::read_to_string(dir.file("server1.out")).unwrap_or_default();
            if out
                .lines()
                .rfind(|l| l.starts_with("conns "))
                .is_some_and(|l| l.starts_with("conns 2 "))
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the doomed client never connected: {out}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Mid-message, most likely: it sends without pause.
        std::thread::sleep(Duration::from_millis(150 + 37 * k));
        peak = peak.max(srv.rss_kib().unwrap_or(0));
        drop(doomed); // SIGKILL, by pid
        std::thread::sleep(Duration::from_millis(300));
    }
    // The survivor was served throughout: still running, its connection
    // (the server's first, slot 0) never closed.
    let out = fs::read_to_string(dir.file("server1.out")).unwrap_or_default();
    assert!(
        survivor.alive(),
        "the survivor ended: {}",
        fs::read_to_string(survivor_dir.file("client.out")).unwrap_or_default()
    );
    assert!(
        !out.lines().any(|l| l.starts_with("disconnected conn 0.")),
        "the survivor's connection was closed: {out}"
    );
    drop(survivor);
    assert!(srv.alive(), "the server died");
    // Every dead client's connection freed.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = fs::read_to_string(dir.file("server1.out")).unwrap_or_default();
        let last = out.lines().rfind(|l| l.starts_with("conns "));
        if last.is_some_and(|l| l.starts_with("conns 0 ")) {
            break;
        }
        assert!(Instant::now() < deadline, "connections not freed: {out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let end = srv.rss_kib().unwrap_or(0);
    eprintln!("server RSS: {start} KiB at start, peak {peak} KiB, {end} KiB after");
    assert!(
        end < start + 64 * 1024,
        "the server kept {} KiB after its clients went",
        end - start
    );
}
