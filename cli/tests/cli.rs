//! The `iomsg` command as a user runs it: argument errors, and short real
//! soaks over UCX judged from the audit files, which this test reads
//! itself as well.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn iomsg(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iomsg"))
        .args(args)
        .env("UCX_NET_DEVICES", "lo")
        .output()
        .unwrap()
}

/// The soaks run one at a time: they measure, and share two cores.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn bad_arguments_give_one_clear_line_and_exit_code_2() {
    let cases: &[&[&str]] = &[
        &["client"],
        &["client", "127.0.0.1", "--data-size", "4K:64"],
        &["client", "127.0.0.1", "--data-size", "2M"],
        &["client", "127.0.0.1", "--retries", "many"],
        &["client", "127.0.0.1", "--run-time", "1d"],
        &["client", "127.0.0.1", "--ops", "erase"],
        &["client", "127.0.0.1", "--replay", "maybe"],
        &["client", "127.0.0.1", "--conn-window", "5000"],
        &["client", "no such host..", "-i", "1"],
        &["server", "--port", "99999"],
        &["server", "--bogus"],
        &["soak", "--network", "mars"],
        &["soak", "--kills", "3", "--duration", "10s"],
        &["soak", "--window", "0"],
        &["soak", "--exactly-once", "--replay", "off"],
        &["soak", "--exactly-once", "--sim"],
        &["soak", "--transport", "unix"],
        &["soak", "--transport", "tcp", "--faults", "hostile"],
        &["server", "--transport", "rdma"],
        &["server", "--transport", "unix", "--listen", "127.0.0.1:1"],
        &["client", "--transport", "unix", "127.0.0.1:1"],
        &["client", "--transport", "tcp", "--io-demo", "127.0.0.1:1"],
        &["frobnicate"],
    ];
    for args in cases {
        let out = iomsg(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("iomsg"), "{args:?}: {err}");
    }
}

/// A server and a client of the command over `transport`, at `listen`
/// (the client connects where the server says it listens): every message
/// acknowledged, and the server's audit records hold each sn the client
/// sent, once.
fn serve_and_send(transport: &str, listen: &str, dir: &Path) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_iomsg"))
        .args(["server", "--transport", transport, "--listen", listen])
        .args([
            "--report-interval",
            "0",
            "--audit-name",
            "server",
            "--audit-dir",
        ])
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = std::io::BufReader::new(server.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let addr = line.split_whitespace().nth(2).unwrap().to_string();
    assert!(line.starts_with("listening on "), "{line}");
    let client = iomsg(&[
        "client",
        "--transport",
        transport,
        &addr,
        "-i",
        "3000",
        "--report-interval",
        "0",
    ]);
    let text = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "{transport}: {text}");
    assert!(
        text.contains("submitted=3000 acked=3000"),
        "{transport}: {text}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(server.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(server.wait().unwrap().success());
    let mut sns: Vec<u64> = records(&dir.join("server.records"))
        .into_iter()
        .map(|(_, sn)| sn)
        .collect();
    sns.sort_unstable();
    assert_eq!(sns, (0..3000).collect::<Vec<u64>>(), "{transport}");
}

#[test]
fn a_server_and_a_client_speak_tcp_and_unix_sockets_too() {
    let _one = one_at_a_time();
    let dir = scratch("transports");
    serve_and_send("tcp", "127.0.0.1:0", &dir.join("tcp"));
    let sock = dir.join("server.sock");
    serve_and_send(
        "unix",
        &format!("unix:{}", sock.display()),
        &dir.join("unix"),
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn renamed_flags_are_still_taken_and_say_their_new_names() {
    for (old, new, args) in [
        ("--hosts", "--network", &["soak", "--hosts", "mars"][..]),
        (
            "--tls",
            "--ucx-tls",
            &["soak", "--tls", "tcp", "--window", "0"][..],
        ),
        (
            "--report",
            "--report-json",
            &["soak", "--report", "x.json", "--window", "0"][..],
        ),
    ] {
        let out = iomsg(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{old} is now {new}")),
            "{args:?}: {err}"
        );
        // The flag itself was taken: the refusal is about something else.
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
}

#[test]
fn every_help_line_fits_in_100_columns() {
    for sub in [
        &[][..],
        &["server"],
        &["client"],
        &["soak"],
        &["hostile"],
        &["info"],
    ] {
        let mut args = sub.to_vec();
        args.push("--help");
        let out = iomsg(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
        assert!(
            long.is_empty(),
            "{args:?}: lines past 100 columns: {long:#?}"
        );
    }
}

#[test]
fn help_explains_every_option_and_its_default() {
    for sub in ["server", "client", "soak"] {
        let out = iomsg(&[sub, "--help"]);
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("[default:"), "{sub}: {text}");
    }
    let server = String::from_utf8_lossy(&iomsg(&["server", "--help"]).stdout).into_owned();
    assert!(server.contains("1024 sessions"), "{server}");
    assert!(server.contains("KiB"), "{server}");
    assert!(server.contains("--metrics"), "{server}");
    assert!(server.contains("iomsg_server_delivered_total"), "{server}");
    let client = String::from_utf8_lossy(&iomsg(&["client", "--help"]).stdout).into_owned();
    for opt in [
        "--ops",
        "--data-size",
        "--iterations",
        "--window",
        "--conn-window",
        "--reply-timeout",
        "--connect-timeout",
        "--retries",
        "--retry-interval",
        "--run-time",
        "--seed",
        "--verbose",
        "--validate",
        "--report-interval",
        "--blocking",
        "--replay",
        "--recreate-context",
        "--report-json",
        "--metrics",
        "iomsg_client_acked_total",
    ] {
        assert!(client.contains(opt), "client --help lacks {opt}");
    }
}

#[test]
fn info_names_the_loaded_ucx_and_its_transports() {
    let out = iomsg(&["info"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("protocol version 1"), "{text}");
    assert!(text.contains("libucp"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("tcp") && l.contains(" lo ")),
        "{text}"
    );
}

/// What the audit files hold, read here without the soak's code: the
/// clients' submitted (session, sn) and the distinct ones any server
/// instance handed to its application.
struct Truth {
    submitted: HashSet<(u64, u64)>,
    processed: HashSet<(u64, u64)>,
}

fn records(path: &Path) -> Vec<(u64, u64)> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(24)
        .map(|c| {
            (
                u64::from_le_bytes(c[0..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..16].try_into().unwrap()),
            )
        })
        .collect()
}

fn truth(dir: &Path) -> Truth {
    let mut t = Truth {
        submitted: HashSet::new(),
        processed: HashSet::new(),
    };
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".records") {
            continue;
        }
        let set = if name.starts_with("client-") {
            &mut t.submitted
        } else {
            &mut t.processed
        };
        set.extend(records(&p));
    }
    t
}

fn soak(dir: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    let _ = std::fs::remove_dir_all(dir);
    let mut args = vec![
        "soak",
        "--kills",
        "3",
        "--kill-every",
        "1500ms",
        "--window",
        "128",
        "--keep-records",
        "--audit-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = Command::new(env!("CARGO_BIN_EXE_iomsg"))
        .args(&args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(dir.join("report.json"))
        .unwrap_or_else(|e| panic!("no report ({e}): {text}"));
    assert!(dir.join("report.svg").exists(), "no picture: {text}");
    (serde_json::from_str(&report).unwrap(), text)
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("iomsg-cli-test-{}-{name}", std::process::id()))
}

#[test]
fn a_short_soak_with_replay_passes_and_agrees_with_the_audit() {
    let _one = one_at_a_time();
    let dir = scratch("replay");
    let (r, text) = soak(&dir, &[]);
    assert_eq!(r["verdict"], "pass", "{text}");
    assert_eq!(r["server_kills"], 3, "{text}");
    assert_eq!(r["audit"]["missing"], 0, "{text}");
    assert_eq!(r["lost_in_flight"], 0, "{text}");
    assert_eq!(r["lost_live"], 0, "{text}");
    let t = truth(&dir);
    let sent = r["sent"].as_u64().unwrap();
    assert!(sent > 10_000, "{text}");
    assert_eq!(t.submitted.len() as u64, sent);
    assert_eq!(r["acked"].as_u64().unwrap(), sent);
    // Every submitted sn was handed to a server application, and nothing
    // else was.
    assert_eq!(t.processed, t.submitted);
    assert_eq!(r["audit"]["processed_unique"].as_u64().unwrap(), sent);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_short_soak_without_replay_names_exactly_the_sns_lost_in_flight() {
    let _one = one_at_a_time();
    let dir = scratch("noreplay");
    let (r, text) = soak(&dir, &["--replay", "off"]);
    assert_eq!(r["verdict"], "pass", "{text}");
    let t = truth(&dir);
    let missing: HashSet<_> = t.submitted.difference(&t.processed).copied().collect();
    assert!(
        !missing.is_empty(),
        "three kills mid-stream lost nothing: {text}"
    );
    assert_eq!(
        r["audit"]["missing"].as_u64().unwrap(),
        missing.len() as u64
    );
    assert_eq!(r["lost_in_flight"].as_u64().unwrap(), missing.len() as u64);
    // Each lost range is named lost_in_flight and holds exactly the
    // missing sns.
    let mut named: HashMap<u64, Vec<u64>> = HashMap::new();
    for l in r["audit"]["lost"].as_array().unwrap() {
        assert_eq!(l["why"], "lost_in_flight", "{l}");
        let s = u64::from_str_radix(l["session"].as_str().unwrap(), 16).unwrap();
        named
            .entry(s)
            .or_default()
            .extend(l["from"].as_u64().unwrap()..l["to"].as_u64().unwrap());
    }
    let named: HashSet<(u64, u64)> = named
        .into_iter()
        .flat_map(|(s, sns)| sns.into_iter().map(move |sn| (s, sn)))
        .collect();
    assert_eq!(named, missing);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every record of a file: (session, sn, hash).
fn hashed(path: &Path) -> Vec<(u64, u64, u64)> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(24)
        .map(|c| {
            let word = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap());
            (word(0), word(8), word(16))
        })
        .collect()
}

#[test]
fn an_exactly_once_soak_kills_both_sides_and_hands_every_sn_over_once() {
    let _one = one_at_a_time();
    let dir = scratch("once");
    let (r, text) = soak(&dir, &["--exactly-once"]);
    assert_eq!(r["verdict"], "pass", "{text}");
    let once = &r["exactly_once"];
    assert_eq!(once["server_kills"], 3, "{text}");
    assert_eq!(once["client_kills"], 3, "{text}");
    assert_eq!(once["duplicates"], 0, "{text}");
    assert_eq!(once["missing"], 0, "{text}");
    // Read here: per client slot, every generation's session; per
    // (session, sn), the clients' hashes and the servers' handovers.
    let mut slot_sessions: HashMap<String, HashSet<u64>> = HashMap::new();
    let mut client: HashMap<(u64, u64), u64> = HashMap::new();
    let mut handed: HashMap<(u64, u64), u32> = HashMap::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".records") else {
            continue;
        };
        for (s, sn, h) in hashed(&p) {
            if let Some(rest) = stem.strip_prefix("client-") {
                let slot = rest.split('.').next().unwrap().to_string();
                slot_sessions.entry(slot).or_default().insert(s);
                let old = client.insert((s, sn), h);
                assert!(
                    old.is_none_or(|o| o == h),
                    "{stem}: sn {sn} with other bytes"
                );
            } else {
                *handed.entry((s, sn)).or_default() += 1;
            }
        }
    }
    // A killed client's next generation went on with its session.
    assert_eq!(slot_sessions.len(), 2, "{slot_sessions:?}");
    assert!(
        slot_sessions.values().all(|s| s.len() == 1),
        "{slot_sessions:?}"
    );
    assert!(handed.values().all(|&n| n == 1), "an sn handed over twice");
    assert!(
        client.keys().all(|k| handed.contains_key(k)),
        "an sn missing"
    );
    let unrecorded = handed.keys().filter(|k| !client.contains_key(k)).count();
    assert_eq!(once["submitted"].as_u64().unwrap(), client.len() as u64);
    assert_eq!(once["delivered"].as_u64().unwrap(), handed.len() as u64);
    // A client with an outbox records before it sends: every sn handed
    // over is in a client's records.
    assert_eq!(unrecorded, 0, "sns handed over that no client recorded");
    assert_eq!(once["unexplained"].as_u64().unwrap(), 0);
    assert!(client.len() > 10_000, "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_soak_across_network_namespaces_with_cut_links_passes() {
    let _one = one_at_a_time();
    let probe = format!("iomsgprobe{}", std::process::id());
    let made = Command::new("ip")
        .args(["netns", "add", &probe])
        .output()
        .is_ok_and(|o| o.status.success());
    if !made {
        eprintln!("skipped: needs root and `ip netns` (iproute2) to make network namespaces");
        return;
    }
    let _ = Command::new("ip")
        .args(["netns", "delete", &probe])
        .output();
    let dir = scratch("netns");
    let (r, text) = soak(
        &dir,
        &["--network", "netns", "--cut-links", "--cut-for", "3500ms"],
    );
    assert_eq!(r["verdict"], "pass", "{text}");
    assert!(r["link_cuts"].as_u64().unwrap() >= 1, "{text}");
    let t = truth(&dir);
    assert_eq!(t.processed, t.submitted);
    // The namespaces are gone.
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        !list.lines().any(|l| l.starts_with("iomsoak")),
        "namespaces left: {list}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
