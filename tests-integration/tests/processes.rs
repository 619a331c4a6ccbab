//! Real UCX, separate processes: a server and a client `iomsg-ucx-peer`
//! over `UCX_TLS=tcp` on the loopback device, the server SIGKILLed
//! mid-stream and restarted on the same port. Every verdict comes from the
//! peers' record files (what each server instance's application took,
//! what the client submitted and gave up), never from the protocol's
//! counters. Each test is bounded in time and kills only the processes it
//! started, by pid.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{one_at_a_time, peer, Dir, Proc, PEER};

/// Starts a server on `addr` and returns it with the address it listens on.
fn server(dir: &Dir, addr: &str, n: u32) -> (Proc, String) {
    server_with(dir, addr, n, &[])
}

fn server_with(dir: &Dir, addr: &str, n: u32, extra: &[&str]) -> (Proc, String) {
    let out = dir.file(&format!("server{n}.out"));
    let record = dir.file(&format!("server{n}.rec"));
    let mut args = vec!["server", addr, "--record", record.to_str().unwrap()];
    args.extend_from_slice(extra);
    let p = peer(&args, &out);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = fs::read_to_string(&out).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.starts_with("listening on ")) {
            return (p, line["listening on ".len()..].to_string());
        }
        assert!(
            Instant::now() < deadline,
            "server {n} did not listen: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines(path: &Path) -> Vec<String> {
    match fs::File::open(path) {
        Ok(f) => BufReader::new(f).lines().map_while(Result::ok).collect(),
        Err(_) => Vec::new(),
    }
}

/// What the records say.
#[derive(Debug, Default)]
struct Audit {
    session: String,
    submitted: BTreeMap<u64, String>,
    given_up: BTreeSet<u64>,
    /// Per sn: the hashes the server instances recorded, one per instance.
    taken: BTreeMap<u64, Vec<String>>,
    lost: Vec<u64>,
    mismatched: Vec<u64>,
    /// Deliveries of an sn by an instance after another had it.
    duplicates: u64,
}

fn audit(dir: &Dir, instances: u32) -> Audit {
    let mut a = Audit::default();
    for l in lines(&dir.file("client.rec")) {
        let p: Vec<&str> = l.split_whitespace().collect();
        match p.as_slice() {
            ["#", "session", id] => a.session = id.to_string(),
            ["#", "not_replayed", s, e] => {
                let (s, e): (u64, u64) = (s.parse().unwrap(), e.parse().unwrap());
                a.given_up.extend(s..e);
            }
            [sn, hash] => {
                a.submitted.insert(sn.parse().unwrap(), hash.to_string());
            }
            _ => panic!("bad client record line {l:?}"),
        }
    }
    for n in 1..=instances {
        let mut once = BTreeSet::new();
        for l in lines(&dir.file(&format!("server{n}.rec"))) {
            let p: Vec<&str> = l.split_whitespace().collect();
            // A SIGKILL may cut the last line short: that message was
            // never acknowledged.
            let [session, sn, hash] = p.as_slice() else {
                continue;
            };
            if *session != a.session {
                continue;
            }
            let Ok(sn) = sn.parse::<u64>() else { continue };
            if hash.len() != 16 {
                continue;
            }
            assert!(once.insert(sn), "instance {n} took sn {sn} twice");
            let v = a.taken.entry(sn).or_default();
            if !v.is_empty() {
                a.duplicates += 1;
            }
            v.push(hash.to_string());
        }
    }
    for (sn, hash) in &a.submitted {
        match a.taken.get(sn) {
            None => a.lost.push(*sn),
            Some(v) if v.iter().any(|h| h != hash) => a.mismatched.push(*sn),
            Some(_) => {}
        }
    }
    a
}

/// The client's last line: `done submitted=.. announced=..`.
fn summary(dir: &Dir) -> BTreeMap<String, u64> {
    let text = fs::read_to_string(dir.file("client.out")).unwrap_or_default();
    let line = text
        .lines()
        .find(|l| l.starts_with("done "))
        .unwrap_or_else(|| panic!("the client did not finish: {text}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// Waits up to `limit` for `p` to exit with success; the error says
/// whether it failed (and how) or was still running.
fn wait(mut p: Proc, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = p.0.try_wait() {
            return if status.success() {
                Ok(())
            } else {
                Err(format!("it exited with {status}"))
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("it was still running after {limit:?}"))
}

/// Waits until server `n` recorded at least `at` messages.
fn wait_for_records(dir: &Dir, n: u32, at: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while lines(&dir.file(&format!("server{n}.rec"))).len() < at {
        assert!(
            Instant::now() < deadline,
            "server {n} did not get {at} messages"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run_client(dir: &Dir, addr: &str, count: u64, size: usize, replay: bool) -> Proc {
    run_client_with(dir, addr, count, size, replay, &[])
}

fn run_client_with(
    dir: &Dir,
    addr: &str,
    count: u64,
    size: usize,
    replay: bool,
    extra: &[&str],
) -> Proc {
    let record = dir.file("client.rec");
    let count = count.to_string();
    let size = size.to_string();
    let mut args = vec![
        "client",
        addr,
        "--count",
        &count,
        "--size",
        &size,
        "--replay",
        if replay { "on" } else { "off" },
        "--record",
        record.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    peer(&args, &dir.file("client.out"))
}

/// A client streams messages of 64 B, 256 B, 4 KiB and 1 MiB; each
/// arrives once with its bytes. `extra` goes to both ends.
fn stream_every_size(name: &str, extra: &[&str]) {
    for (size, count) in [(64, 20_000), (256, 20_000), (4096, 5_000), (1 << 20, 40)] {
        let dir = Dir::new(&format!("{name}-{size}"));
        let (_server, addr) = server_with(&dir, "127.0.0.1:0", 1, extra);
        let client = run_client_with(&dir, &addr, count, size, true, extra);
        if let Err(e) = wait(client, Duration::from_secs(60)) {
            panic!("client {size} B: {e}\n{}", dir.tails(20));
        }
        let a = audit(&dir, 1);
        assert_eq!(a.submitted.len() as u64, count);
        assert!(
            a.lost.is_empty() && a.mismatched.is_empty(),
            "{size} B: {a:?}"
        );
        assert_eq!(summary(&dir)["acked"], count);
    }
}

#[test]
fn a_client_streams_its_own_bytes_of_every_size_and_each_arrives_once() {
    let _one = one_at_a_time();
    stream_every_size("sizes", &["--api", "tag"]);
}

#[test]
fn over_shared_memory_every_size_arrives_once_with_its_bytes() {
    let _one = one_at_a_time();
    stream_every_size("shm-sizes", &["--api", "tag", "--shared-memory"]);
}

#[test]
fn with_active_messages_every_size_arrives_once_with_its_bytes() {
    let _one = one_at_a_time();
    stream_every_size("am-sizes", &["--api", "am"]);
}

#[test]
fn with_active_messages_over_shared_memory_every_size_arrives_once_with_its_bytes() {
    let _one = one_at_a_time();
    stream_every_size("am-shm-sizes", &["--api", "am", "--shared-memory"]);
}

/// A server killed (SIGKILL, by pid) once it recorded `kill_at` messages
/// and restarted on its port, under a client streaming `count` messages of
/// `size` bytes; `extra` goes to both ends. Returns the records' verdict
/// and the client's summary.
fn kill_and_restart(
    name: &str,
    count: u64,
    kill_at: usize,
    replay: bool,
    extra: &[&str],
) -> (Audit, BTreeMap<String, u64>) {
    let dir = Dir::new(name);
    // Everything but the client's own flags goes to the servers too.
    let server_extra: Vec<&str> = extra
        .iter()
        .copied()
        .filter(|a| *a != "--recreate-context")
        .collect();
    let (first, addr) = server_with(&dir, "127.0.0.1:0", 1, &server_extra);
    let client = run_client_with(&dir, &addr, count, 256, replay, extra);
    wait_for_records(&dir, 1, kill_at);
    drop(first);
    let (_second, again) = server_with(&dir, &addr, 2, &server_extra);
    assert_eq!(again, addr, "the restarted server listens on the same port");
    if let Err(e) = wait(client, Duration::from_secs(90)) {
        panic!("the client did not finish: {e}\n{}", dir.tails(80));
    }
    (audit(&dir, 2), summary(&dir))
}

/// Nothing lost or changed, every duplicate announced.
fn assert_replayed_all(a: &Audit, s: &BTreeMap<String, u64>, count: u64) {
    assert_eq!(a.submitted.len() as u64, count);
    assert!(
        a.lost.is_empty(),
        "lost {:?}",
        &a.lost[..a.lost.len().min(10)]
    );
    assert!(a.mismatched.is_empty(), "bytes changed: {:?}", a.mismatched);
    assert!(s["restarts"] >= 1, "the client saw the restart: {s:?}");
    assert!(
        a.duplicates <= s["announced"],
        "{} duplicates, {s:?}",
        a.duplicates
    );
}

#[test]
fn a_server_killed_mid_stream_and_restarted_loses_nothing_with_replay() {
    let _one = one_at_a_time();
    let extra = ["--api", "tag"];
    let (a, s) = kill_and_restart("kill-replay", 200_000, 20_000, true, &extra);
    assert_replayed_all(&a, &s, 200_000);
}

#[test]
fn with_active_messages_a_server_killed_mid_stream_loses_nothing_with_replay() {
    let _one = one_at_a_time();
    let extra = ["--api", "am"];
    let (a, s) = kill_and_restart("am-kill-replay", 200_000, 20_000, true, &extra);
    assert_replayed_all(&a, &s, 200_000);
}

#[test]
fn with_active_messages_over_shared_memory_a_server_killed_mid_stream_loses_nothing() {
    let _one = one_at_a_time();
    let extra = ["--api", "am", "--shared-memory"];
    let (a, s) = kill_and_restart("am-shm", 1_000_000, 100_000, true, &extra);
    assert_replayed_all(&a, &s, 1_000_000);
}

#[test]
fn with_active_messages_and_without_replay_the_lost_sns_are_those_given_up() {
    let _one = one_at_a_time();
    let extra = ["--api", "am"];
    let (a, s) = kill_and_restart("am-kill-noreplay", 200_000, 20_000, false, &extra);
    assert_lost_only_given_up(&a, &s);
}

#[test]
fn a_client_that_rebuilds_its_ucx_context_on_every_reconnect_keeps_its_session() {
    let _one = one_at_a_time();
    let extra = ["--recreate-context"];
    let (a, s) = kill_and_restart("recreate", 200_000, 20_000, true, &extra);
    assert!(s["rebuilds"] >= 1, "the context was rebuilt: {s:?}");
    assert_replayed_all(&a, &s, 200_000);
}

#[test]
fn over_shared_memory_a_server_killed_mid_stream_loses_nothing_with_replay() {
    let _one = one_at_a_time();
    let extra = ["--api", "tag", "--shared-memory"];
    let (a, s) = kill_and_restart("shm", 1_000_000, 100_000, true, &extra);
    assert_replayed_all(&a, &s, 1_000_000);
}

#[test]
fn without_replay_the_lost_sns_are_exactly_those_given_up_at_the_kill() {
    let _one = one_at_a_time();
    let (a, s) = kill_and_restart("kill-noreplay", 200_000, 20_000, false, &["--api", "tag"]);
    assert_lost_only_given_up(&a, &s);
}

/// Without replay: nothing sent twice, and what was lost is exactly what
/// the client gave up.
fn assert_lost_only_given_up(a: &Audit, s: &BTreeMap<String, u64>) {
    assert!(a.mismatched.is_empty());
    assert_eq!(a.duplicates, 0, "nothing is sent twice without replay");
    let lost: BTreeSet<u64> = a.lost.iter().copied().collect();
    assert!(
        lost.is_subset(&a.given_up),
        "lost but not given up: {:?}",
        lost.difference(&a.given_up).take(10).collect::<Vec<_>>()
    );
    // Given up but delivered: processed by the dead instance before its
    // ack got out; the client says "may have been lost".
    assert_eq!(s["not_replayed"], a.given_up.len() as u64);
}

#[test]
fn a_raw_peers_malformed_frames_are_rejected_with_a_log_line_while_a_good_client_goes_on() {
    let _one = one_at_a_time();
    let dir = Dir::new("malformed");
    let (_server, addr) = server(&dir, "127.0.0.1:0", 1);
    let good = run_client(&dir, &addr, 100_000, 64, true);
    let bad = peer(&["raw", &addr], &dir.file("raw.out"));
    if let Err(e) = wait(bad, Duration::from_secs(40)) {
        panic!("the raw peer: {e}\n{}", dir.tails(20));
    }
    if let Err(e) = wait(good, Duration::from_secs(60)) {
        panic!("the good client: {e}\n{}", dir.tails(20));
    }
    let out = fs::read_to_string(dir.file("server1.out")).unwrap_or_default();
    let reasons: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("rejected "))
        .filter_map(|l| l.split(": ").nth(1))
        .filter_map(|l| l.split(' ').next())
        .collect();
    // Six frames that do not parse, and data before any Hello.
    assert_eq!(
        reasons.iter().filter(|r| **r == "Malformed").count(),
        6,
        "{out}"
    );
    assert_eq!(
        reasons.iter().filter(|r| **r == "NotBound").count(),
        1,
        "{out}"
    );
    assert!(fs::read_to_string(dir.file("raw.out"))
        .unwrap_or_default()
        .contains("raw sent 7"));
    let a = audit(&dir, 1);
    assert_eq!(a.submitted.len(), 100_000);
    assert!(a.lost.is_empty() && a.mismatched.is_empty(), "{a:?}");
}

#[test]
fn a_client_killed_mid_stream_leaves_the_other_unharmed_and_its_connection_freed() {
    let _one = one_at_a_time();
    let dir = Dir::new("two-clients");
    let (_server, addr) = server(&dir, "127.0.0.1:0", 1);
    let doomed_dir = Dir::new("two-clients-doomed");
    let doomed = run_client(&doomed_dir, &addr, 10_000_000, 64, true);
    let survivor = run_client(&dir, &addr, 100_000, 64, true);
    // Both are streaming: then the first one dies.
    let deadline = Instant::now() + Duration::from_secs(20);
    while lines(&doomed_dir.file("client.rec")).len() < 5_000 {
        assert!(
            Instant::now() < deadline,
            "the doomed client never streamed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(doomed); // SIGKILL, by pid
    if let Err(e) = wait(survivor, Duration::from_secs(60)) {
        panic!("the survivor did not finish: {e}\n{}", dir.tails(20));
    }
    let a = audit(&dir, 1);
    assert_eq!(a.submitted.len(), 100_000);
    assert!(a.lost.is_empty() && a.mismatched.is_empty(), "{a:?}");
    // The dead client's connection is found dead (peer failure or
    // keepalive) and freed; the survivor closed its own.
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
}

/// Runs `ip` with `args`; whether it succeeded.
fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Network namespaces this test made, deleted (with their veths) at the end.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            ip(&["netns", "delete", ns]);
        }
    }
}

/// A peer inside namespace `ns`, its UCX limited to `device`.
fn peer_in(ns: &str, device: &str, args: &[&str], out: &Path) -> Proc {
    let out = fs::File::create(out).unwrap();
    let mut full = vec!["netns", "exec", ns, PEER];
    full.extend_from_slice(args);
    let child = Command::new("ip")
        .args(&full)
        .env("UCX_NET_DEVICES", device)
        .env("UCX_TLS", "tcp")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Proc(child)
}

#[test]
fn hosts_in_network_namespaces_survive_a_cut_client_link() {
    let _one = one_at_a_time();
    // One server host and two client hosts, joined by veth pairs whose
    // addresses are link-local (169.254.0.0/16).
    let id = std::process::id();
    let names: Vec<String> = ["s", "a", "b"]
        .iter()
        .map(|h| format!("iomsg{h}{id}"))
        .collect();
    let probe = format!("iomsgp{id}");
    if !ip(&["netns", "add", &probe]) {
        eprintln!("skipped: needs root and `ip netns` (iproute2) to make network namespaces");
        return;
    }
    ip(&["netns", "delete", &probe]);
    let mut made = Namespaces(Vec::new());
    for ns in &names {
        assert!(ip(&["netns", "add", ns]), "netns add {ns}");
        made.0.push(ns.clone());
        assert!(ip(&["-n", ns, "link", "set", "lo", "up"]));
    }
    let (srv, ca, cb) = (&names[0], &names[1], &names[2]);
    // The server host's two links join a bridge that holds its one address
    // (with an address on each link, UCX may offer a client the server's
    // address on the other link, which that client cannot reach).
    let bridge = format!("br{id}");
    assert!(ip(&["-n", srv, "link", "add", &bridge, "type", "bridge"]));
    assert!(ip(&[
        "-n",
        srv,
        "addr",
        "add",
        "169.254.77.1/24",
        "dev",
        &bridge
    ]));
    assert!(ip(&["-n", srv, "link", "set", &bridge, "up"]));
    let links = [
        (ca, "2", format!("ia{id}"), format!("sa{id}")),
        (cb, "3", format!("ib{id}"), format!("sb{id}")),
    ];
    for (client, host, cdev, sdev) in &links {
        assert!(ip(&[
            "link", "add", cdev, "netns", client, "type", "veth", "peer", "name", sdev, "netns",
            srv
        ]));
        let caddr = format!("169.254.77.{host}/24");
        assert!(ip(&["-n", client, "addr", "add", &caddr, "dev", cdev]));
        assert!(ip(&["-n", srv, "link", "set", sdev, "master", &bridge]));
        assert!(ip(&["-n", client, "link", "set", cdev, "up"]));
        assert!(ip(&["-n", srv, "link", "set", sdev, "up"]));
    }
    // UCX lists a device only once its link is up at both ends.
    let mut devices: Vec<(&str, &str)> = vec![(srv.as_str(), bridge.as_str())];
    for (client, _, cdev, _) in &links {
        devices.push((client.as_str(), cdev.as_str()));
    }
    for (ns, dev) in devices {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("ip")
                .args(["-n", ns, "link", "show", "dev", dev])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("state UP") && !text.contains("NO-CARRIER") {
                break;
            }
            assert!(Instant::now() < deadline, "{dev} in {ns} never came up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Addresses settle (duplicate address detection) before UCX reads them.
    std::thread::sleep(Duration::from_secs(2));
    let dir = Dir::new("netns");
    let srecord = dir.file("server1.rec");
    let _server = peer_in(
        srv,
        &bridge,
        &[
            "server",
            "0.0.0.0:13337",
            "--record",
            srecord.to_str().unwrap(),
        ],
        &dir.file("server1.out"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !fs::read_to_string(dir.file("server1.out"))
        .unwrap_or_default()
        .contains("listening on")
    {
        assert!(
            Instant::now() < deadline,
            "the server in its namespace did not listen"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut clients = Vec::new();
    // Client b sends more, so that it still streams while a's link is cut.
    let counts = [300_000usize, 3_000_000];
    for (k, (client, _, cdev, _)) in links.iter().enumerate() {
        let sub = Dir::new(&format!("netns-client{k}"));
        let record = sub.file("client.rec");
        let addr = "169.254.77.1:13337".to_string();
        let count = counts[k].to_string();
        let p = peer_in(
            client,
            cdev,
            &[
                "client",
                &addr,
                "--count",
                &count,
                "--size",
                "64",
                "--record",
                record.to_str().unwrap(),
            ],
            &sub.file("client.out"),
        );
        clients.push((p, sub));
    }
    // Cut client a's link for longer than the keepalive, mid-stream.
    let deadline = Instant::now() + Duration::from_secs(20);
    while lines(&clients[0].1.file("client.rec")).len() < 20_000 {
        assert!(
            Instant::now() < deadline,
            "client a never streamed: {} / server: {}",
            fs::read_to_string(clients[0].1.file("client.out")).unwrap_or_default(),
            fs::read_to_string(dir.file("server1.out")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The link goes down without a reset reaching either end: the server
    // must notice the silence itself (heartbeats, 3 s by default) and
    // free client a's connection while client b's stays.
    assert!(ip(&["-n", ca, "link", "set", &links[0].2, "down"]));
    let cut = Instant::now();
    let deadline = cut + Duration::from_secs(10);
    loop {
        let out = fs::read_to_string(dir.file("server1.out")).unwrap_or_default();
        // The connection count the server printed after it let go.
        let after = out
            .lines()
            .skip_while(|l| !l.ends_with(": PeerSilent"))
            .find(|l| l.starts_with("conns "));
        if let Some(count) = after {
            assert!(count.starts_with("conns 1 "), "server holds: {out}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not notice the silent client in 10 s: {out}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let noticed = cut.elapsed();
    eprintln!("the server noticed the cut link after {noticed:?}");
    assert!(
        noticed >= Duration::from_secs(2),
        "noticed too soon: {noticed:?}"
    );
    std::thread::sleep((cut + Duration::from_secs(4)).saturating_duration_since(Instant::now()));
    assert!(ip(&["-n", ca, "link", "set", &links[0].2, "up"]));
    for (k, (p, sub)) in clients.into_iter().enumerate() {
        if let Err(e) = wait(p, Duration::from_secs(90)) {
            panic!("client {k} did not finish: {e}\n{}", sub.tails(20));
        }
        // Each client's own record against the server's.
        fs::copy(dir.file("server1.rec"), sub.file("server1.rec")).unwrap();
        let a = audit(&sub, 1);
        assert_eq!(a.submitted.len(), counts[k]);
        assert!(
            a.lost.is_empty() && a.mismatched.is_empty(),
            "client {k}: {:?}",
            a.lost.len()
        );
    }
}
