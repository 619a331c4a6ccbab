//! `--metrics`: a real server and client over UCX on loopback, their
//! Prometheus endpoints read with a plain TCP stream, the figures checked
//! against the audit files the processes write.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_iomsg"))
        .args(args)
        .env("UCX_NET_DEVICES", "lo")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The response to `GET path`, or `None` when nothing listens yet.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The value of the unlabelled series `name` in an exposition.
fn value(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Distinct (session, sn) in an audit records file.
fn records(path: &Path) -> HashSet<(u64, u64)> {
    std::fs::read(path)
        .unwrap_or_default()
        .chunks_exact(24)
        .map(|c| {
            (
                u64::from_le_bytes(c[0..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..16].try_into().unwrap()),
            )
        })
        .collect()
}

/// Polls `GET /metrics` on `addr` until `ok` holds for the text (10 s at
/// most); the last text either way.
fn poll_until(addr: SocketAddr, ok: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    let mut last = String::new();
    while t.elapsed() < Duration::from_secs(10) {
        if let Some(text) = get(addr, "/metrics") {
            if ok(&text) {
                return text;
            }
            last = text;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    last
}

#[test]
fn metrics_endpoints_show_what_the_audit_files_record() {
    let dir = std::env::temp_dir().join(format!("iomsg-metrics-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let server_metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let client_metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut server = spawn(&[
        "server",
        "--listen",
        &listen,
        "--metrics",
        &server_metrics.to_string(),
        "--audit-dir",
        d,
        "--audit-name",
        "server",
        "--report-interval",
        "0",
    ]);
    let up = poll_until(server_metrics, |t| t.contains("iomsg_server_sessions 0"));
    assert!(up.starts_with("HTTP/1.1 200 OK\r\n"), "{up}");
    let other = get(server_metrics, "/").unwrap();
    assert!(other.starts_with("HTTP/1.1 404 "), "{other}");

    let report = dir.join("client.json");
    let mut client = spawn(&[
        "client",
        &listen,
        "--iterations",
        "0",
        "--run-time",
        "3s",
        "--metrics",
        &client_metrics.to_string(),
        "--audit-dir",
        d,
        "--audit-name",
        "client",
        "--report-json",
        report.to_str().unwrap(),
        "--report-interval",
        "0",
    ]);
    // Mid-run: the client's figures as they change (the library's
    // observer); none may exceed what its audit ends up holding.
    let mid = poll_until(client_metrics, |t| {
        value(t, "iomsg_client_acked_total").is_some_and(|a| a > 0)
    });
    let submitted = value(&mid, "iomsg_client_submitted_total").unwrap();
    let acked = value(&mid, "iomsg_client_acked_total").unwrap();
    assert!(acked > 0 && acked <= submitted, "{mid}");
    assert_eq!(
        value(&mid, "iomsg_client_not_replayed_total"),
        Some(0),
        "{mid}"
    );
    // One session, one handshake; an ack latency per acknowledged sn
    // (at most: a sn whose submit slot was reused has none).
    assert_eq!(
        value(&mid, "iomsg_client_handshake_seconds_count"),
        Some(1),
        "{mid}"
    );
    let latencies = value(&mid, "iomsg_client_ack_latency_seconds_count").unwrap_or(0);
    assert!(latencies > 0 && latencies <= acked, "{mid}");
    assert!(client.wait().unwrap().success());
    assert!(
        submitted <= records(&dir.join("client.records")).len() as u64,
        "{mid}"
    );

    // After the client: the server's delivered counter is what its audit
    // says it handed to the application, and what the client submitted.
    let handed = records(&dir.join("server.records"));
    let sent = records(&dir.join("client.records"));
    assert_eq!(handed, sent);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        r["sessions"][0]["acked"].as_u64().unwrap(),
        sent.len() as u64
    );
    let want = handed.len() as u64;
    let text = poll_until(server_metrics, |t| {
        value(t, "iomsg_server_delivered_total") == Some(want)
            && value(t, "iomsg_server_connections") == Some(0)
    });
    assert_eq!(
        value(&text, "iomsg_server_delivered_total"),
        Some(want),
        "{text}"
    );
    assert_eq!(
        value(&text, "iomsg_server_duplicates_total"),
        Some(0),
        "{text}"
    );
    assert_eq!(
        value(&text, "iomsg_server_live_loss_sns_total"),
        Some(0),
        "{text}"
    );
    assert_eq!(
        value(&text, "iomsg_server_in_flight_loss_sns_total"),
        Some(0),
        "{text}"
    );
    assert!(
        text.contains("# TYPE iomsg_server_connections gauge"),
        "{text}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
