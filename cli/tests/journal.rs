//! `iomsg server --journal` and `iomsg client --outbox` as a user runs
//! them: real processes over UCX on loopback, killed with SIGKILL and
//! started again, judged from the audit records each process wrote (what
//! every server instance handed to its application, what the client
//! submitted), read here on their own.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;

mod procs;

use procs::{free_port, one_at_a_time, Proc};

fn scratch(name: &str) -> PathBuf {
    procs::scratch("journal", name)
}

fn server(port: u16, dir: &Path, name: &str) -> Proc {
    server_with(port, dir, name, &[])
}

fn server_with(port: u16, dir: &Path, name: &str, extra: &[&str]) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    let journal = dir.join("journal");
    let audit = dir.join("audit");
    let mut args = vec![
        "server",
        "--listen",
        &listen,
        "--journal",
        journal.to_str().unwrap(),
        "--audit-dir",
        audit.to_str().unwrap(),
        "--audit-name",
        name,
        "--report-interval",
        "0",
    ];
    args.extend_from_slice(extra);
    let mut p = Proc::start(&args, dir.join(format!("{name}.out")));
    p.wait_for("listening on", Duration::from_secs(15));
    p
}

fn client(port: u16, dir: &Path, run: &str, extra: &[&str]) -> Proc {
    let addr = format!("127.0.0.1:{port}");
    let audit = dir.join("audit");
    let mut args = vec![
        "client",
        &addr,
        "--audit-dir",
        audit.to_str().unwrap(),
        "--audit-name",
        "client",
        "--retries",
        "inf",
        "--report-interval",
        "0",
        "--window",
        "64",
        "--conn-window",
        "64",
        "--data-size",
        "64:4K",
    ];
    args.extend_from_slice(extra);
    Proc::start(&args, dir.join(format!("{run}.out")))
}

/// The (session, sn, payload hash) of every record in an audit records
/// file, repeats kept.
fn records(path: &Path) -> Vec<(u64, u64, u64)> {
    let word = |c: &[u8], i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
    std::fs::read(path)
        .unwrap_or_default()
        .chunks_exact(24)
        .map(|c| (word(c, 0), word(c, 1), word(c, 2)))
        .collect()
}

/// The payload hashes each (session, sn) was handed to a server
/// application with, over every server instance's records.
fn delivered(audit: &Path) -> HashMap<(u64, u64), Vec<u64>> {
    let mut n: HashMap<(u64, u64), Vec<u64>> = HashMap::new();
    for e in std::fs::read_dir(audit).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("server-") && name.ends_with(".records") {
            for (session, sn, hash) in records(&p) {
                n.entry((session, sn)).or_default().push(hash);
            }
        }
    }
    n
}

/// The client's records name one session whose sns run from 0 without a
/// gap, each sn with one payload (a resubmission repeats the record
/// identically); each was delivered exactly once over the server
/// instances, with that payload, and nothing else was delivered.
fn assert_exactly_once(dir: &Path) -> usize {
    let audit = dir.join("audit");
    let mut submitted: BTreeMap<(u64, u64), BTreeSet<u64>> = BTreeMap::new();
    for (session, sn, hash) in records(&audit.join("client.records")) {
        submitted.entry((session, sn)).or_default().insert(hash);
    }
    assert!(!submitted.is_empty());
    let sessions: BTreeSet<u64> = submitted.keys().map(|r| r.0).collect();
    assert_eq!(sessions.len(), 1, "one session across the client's runs");
    let sns: Vec<u64> = submitted.keys().map(|r| r.1).collect();
    assert_eq!(
        sns,
        (0..sns.len() as u64).collect::<Vec<_>>(),
        "sns from 0, no gap"
    );
    let changed: Vec<_> = submitted.iter().filter(|(_, h)| h.len() > 1).collect();
    assert!(changed.is_empty(), "one sn, two payloads: {changed:?}");
    let got = delivered(&audit);
    let twice: Vec<_> = got.iter().filter(|(_, h)| h.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "{} delivered more than once: {:?}",
        twice.len(),
        &twice[..twice.len().min(20)]
    );
    let missing: Vec<_> = submitted.keys().filter(|r| !got.contains_key(r)).collect();
    assert!(
        missing.is_empty(),
        "{} never delivered: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    for (k, hashes) in &submitted {
        assert_eq!(
            Some(hashes.iter().copied().collect()),
            got.get(k).cloned(),
            "{k:?}: payloads differ"
        );
    }
    assert_eq!(
        got.len(),
        submitted.len(),
        "delivered what no client submitted"
    );
    submitted.len()
}

#[test]
fn a_torn_journal_tail_is_cut_the_uncommitted_records_rolled_back_and_the_server_serves() {
    let _one = one_at_a_time();
    let dir = scratch("torn");
    let port = free_port();
    let mut s1 = server(port, &dir, "server-1");
    let mut c = client(port, &dir, "c1", &["-i", "500"]);
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.text());
    assert!(s1.stop().success(), "{}", s1.text());

    let journal = dir.join("journal").join("journal");
    let good = std::fs::metadata(&journal).unwrap().len();
    // Half a batch: a header that promises more than follows.
    let mut torn = Vec::from(*b"IOJB");
    torn.extend_from_slice(&200u32.to_le_bytes());
    torn.extend_from_slice(&[0x5a; 4 + 37]);
    File::options()
        .append(true)
        .open(&journal)
        .unwrap()
        .write_all(&torn)
        .unwrap();
    // Two deliveries recorded whose batch never made it: never acknowledged.
    let rec1 = dir.join("audit").join("server-1.records");
    let committed = std::fs::metadata(&rec1).unwrap().len();
    assert_eq!(committed, 500 * 24);
    File::options()
        .append(true)
        .open(&rec1)
        .unwrap()
        .write_all(&[9u8; 48])
        .unwrap();

    let mut s2 = server(port, &dir, "server-2");
    let text = s2.text();
    assert!(text.contains(": 1 sessions restored from"), "{text}");
    assert!(
        text.contains(&format!("{} bytes of torn tail cut at offset", torn.len())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "back from {} to {committed} bytes, its last commit point: 2 deliveries",
            committed + 48
        )),
        "{text}"
    );
    assert_eq!(std::fs::metadata(&rec1).unwrap().len(), committed);
    let now = std::fs::metadata(&journal).unwrap().len();
    assert!(
        now > good && now < good + torn.len() as u64 + 200,
        "{good} then {now}"
    );
    // It serves.
    let mut c = client(port, &dir, "c2", &["-i", "300"]);
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.text());
    assert!(s2.stop().success(), "{}", s2.text());
    assert_eq!(
        records(&dir.join("audit").join("server-2.records")).len(),
        300
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_killed_three_times_mid_stream_delivers_every_sn_exactly_once() {
    let _one = one_at_a_time();
    let dir = scratch("kills");
    let port = free_port();
    // A small threshold: the journal is compacted again and again.
    let compact = ["--journal-compact-over", "32K"];
    let mut s = server_with(port, &dir, "server-1", &compact);
    let mut c = client(port, &dir, "c", &["-i", "0", "--run-time", "9s"]);
    for k in 2..=4 {
        std::thread::sleep(Duration::from_millis(1300));
        assert!(
            c.running(),
            "the client finished before kill {}: {}",
            k - 1,
            c.text()
        );
        // The client stops reading for a while: the server delivers what
        // is in flight and acknowledges it, and dies before the client
        // takes the acknowledgements. The next instance must know from
        // the journal that it delivered them.
        c.signal(Signal::SIGSTOP);
        std::thread::sleep(Duration::from_millis(200));
        s.kill();
        c.signal(Signal::SIGCONT);
        s = server_with(port, &dir, &format!("server-{k}"), &compact);
        let text = s.text();
        assert!(text.contains(": 1 sessions restored from"), "{text}");
    }
    assert!(c.wait(Duration::from_secs(90)).success(), "{}", c.text());
    assert!(s.text().contains("journal compacted"), "{}", s.text());
    assert!(s.stop().success(), "{}", s.text());
    for k in 1..=3 {
        let n = records(&dir.join("audit").join(format!("server-{k}.records"))).len();
        assert!(n > 0, "instance {k} delivered nothing: not mid-stream");
    }
    let n = assert_exactly_once(&dir);
    eprintln!("{n} sns, each delivered once over 4 server instances");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_client_killed_twice_goes_on_from_its_outbox_and_nothing_is_delivered_twice() {
    let _one = one_at_a_time();
    let dir = scratch("outbox");
    let port = free_port();
    let mut s = server(port, &dir, "server-1");
    let outbox = dir.join("outbox");
    let ob = outbox.to_str().unwrap();
    let mut session = None;
    for run in 1..=2 {
        let mut c = client(
            port,
            &dir,
            &format!("c{run}"),
            &["-i", "0", "--outbox", ob, "--outbox-compact-over", "1M"],
        );
        let text = c.wait_for("session ", Duration::from_secs(15));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(c.running(), "{}", c.text());
        c.kill();
        let id = text
            .split_whitespace()
            .skip_while(|w| *w != "session")
            .nth(1)
            .map(str::to_string);
        if run == 2 {
            assert!(text.contains("resumed session"), "{text}");
            assert_eq!(id, session, "the outbox's session goes on");
        }
        session = id;
    }
    let mut c = client(
        port,
        &dir,
        "c3",
        &["-i", "2000", "--outbox", ob, "--outbox-compact-over", "1M"],
    );
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.text());
    assert!(c.text().contains("resumed session"), "{}", c.text());
    assert!(c.text().contains("outbox compacted"), "{}", c.text());
    assert!(s.stop().success(), "{}", s.text());
    let n = assert_exactly_once(&dir);
    assert!(n > 2000, "{n}");
    eprintln!("{n} sns, each delivered once over 3 client processes");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_server_on_one_journal_is_refused_with_a_clear_error() {
    let _one = one_at_a_time();
    let dir = scratch("second");
    let mut s1 = server(free_port(), &dir, "server-1");
    let listen = format!("127.0.0.1:{}", free_port());
    let journal = dir.join("journal");
    let mut s2 = Proc::start(
        &[
            "server",
            "--listen",
            &listen,
            "--journal",
            journal.to_str().unwrap(),
        ],
        dir.join("second.out"),
    );
    let st = s2.wait(Duration::from_secs(15));
    let text = s2.text();
    assert_eq!(st.code(), Some(1), "{text}");
    assert!(text.contains("is in use: another process holds"), "{text}");
    assert!(
        text.contains(&journal.join("lock").display().to_string()),
        "{text}"
    );
    assert!(!text.contains("listening on"), "{text}");
    assert!(s1.running());
    assert!(s1.stop().success(), "{}", s1.text());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_explains_the_journal_the_outbox_and_the_sync_policies() {
    let out = Command::new(env!("CARGO_BIN_EXE_iomsg"))
        .args(["server", "--help"])
        .output()
        .unwrap();
    // Wrapped at 100 columns: read as one line.
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for s in [
        "--journal",
        "--sync",
        "SIGKILL",
        "fdatasync",
        "10 ms",
        "[default: batch]",
    ] {
        assert!(text.contains(s), "server --help lacks {s}: {text}");
    }
    assert!(!text.contains("compact-over"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_iomsg"))
        .args(["client", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for s in ["--outbox", "--sync", "DIR/server-ADDR-PORT", "finished"] {
        assert!(text.contains(s), "client --help lacks {s}: {text}");
    }
}

/// The client's audit log lines of kind `kind` (`state_lost`,
/// `restarted`), as (session, range).
fn told(dir: &Path, kind: &str) -> Vec<(u64, std::ops::Range<u64>)> {
    let log = std::fs::read_to_string(dir.join("audit").join("client.log")).unwrap_or_default();
    log.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.get(1) == Some(&kind)).then_some(())?;
            let session = u64::from_str_radix(w.get(2)?, 16).ok()?;
            Some((session, w.get(3)?.parse().ok()?..w.get(4)?.parse().ok()?))
        })
        .collect()
}

/// Where each batch of the journal at `path` ends.
fn batch_ends(path: &Path) -> Vec<usize> {
    let bytes = std::fs::read(path).unwrap();
    let mut ends = Vec::new();
    let mut at = 0;
    while bytes.get(at..at + 4) == Some(b"IOJB") {
        let n = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 12 + n;
        if at > bytes.len() {
            break;
        }
        ends.push(at);
    }
    ends
}

#[test]
fn a_journal_cut_back_to_an_earlier_commit_is_named_to_the_client_which_goes_on() {
    let _one = one_at_a_time();
    let dir = scratch("cutback");
    let port = free_port();
    let mut s = server(port, &dir, "server-1");
    let outbox = dir.join("outbox");
    let ob = outbox.to_str().unwrap();
    let mut c = client(
        port,
        &dir,
        "c",
        &["-i", "0", "--run-time", "6s", "--outbox", ob],
    );
    c.wait_for("session ", Duration::from_secs(15));
    std::thread::sleep(Duration::from_millis(2500));
    s.kill();
    // What a power cut under a lazy sync, or an older copy put back,
    // leaves: the journal without its last 40 batches.
    let journal = dir.join("journal").join("journal");
    let ends = batch_ends(&journal);
    assert!(ends.len() > 60, "{} batches", ends.len());
    let keep = ends[ends.len() - 41];
    let bytes = std::fs::read(&journal).unwrap();
    std::fs::write(&journal, &bytes[..keep]).unwrap();
    let mut s = server(port, &dir, "server-2");
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.text());
    assert!(s.stop().success(), "{}", s.text());
    // The client was told, by name, and never locked out.
    let lost = told(&dir, "state_lost");
    assert!(!lost.is_empty(), "no StateLost: {}", c.text());
    assert!(
        c.text().contains("lost state it had acknowledged"),
        "{}",
        c.text()
    );
    let announced = told(&dir, "restarted");
    // Every sn the client submitted (all acknowledged: it finished) was
    // handed over, or named as state lost; every repeat was announced.
    let audit = dir.join("audit");
    let got = delivered(&audit);
    let in_any = |ranges: &[(u64, std::ops::Range<u64>)], k: &(u64, u64)| {
        ranges.iter().any(|(s, r)| *s == k.0 && r.contains(&k.1))
    };
    let mut named = 0;
    for (session, sn, _) in records(&audit.join("client.records")) {
        let k = (session, sn);
        match got.get(&k).map_or(0, Vec::len) {
            0 => {
                assert!(in_any(&lost, &k), "{k:?} never handed over and not named");
                named += 1;
            }
            1 => {}
            _ => assert!(
                in_any(&announced, &k),
                "{k:?} handed over twice, unannounced"
            ),
        }
    }
    // The records past the restored commit point were kept aside, not
    // erased.
    let aside = audit.join("server-1.records.uncommitted");
    assert!(aside.exists(), "nothing kept aside: {}", s.text());
    eprintln!(
        "{named} sns gone with the cut, each named; {} state-lost ranges",
        lost.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_finished_session_is_not_resumed_and_several_servers_keep_an_outbox_each() {
    let _one = one_at_a_time();
    let dir = scratch("finished");
    let (p1, p2) = (free_port(), free_port());
    for d in ["a", "b"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let mut s1 = server(p1, &dir.join("a"), "server-a");
    let mut s2 = server(p2, &dir.join("b"), "server-b");
    let outbox = dir.join("outbox");
    let ob = outbox.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let (a1, a2) = (format!("127.0.0.1:{p1}"), format!("127.0.0.1:{p2}"));
        let mut args = vec!["client", &a1, &a2, "--outbox", ob, "--report-interval", "0"];
        args.extend_from_slice(extra);
        Proc::start(&args, dir.join(format!("{name}.out")))
    };
    // A first run killed mid-stream, a second resumes both sessions and
    // finishes them, a third starts new ones.
    let mut c = run("c1", &["-i", "0"]);
    c.wait_for("session ", Duration::from_secs(15));
    std::thread::sleep(Duration::from_millis(1000));
    c.kill();
    for (ip_port, p) in [("127.0.0.1-", p1), ("127.0.0.1-", p2)] {
        let own = outbox.join(format!("server-{ip_port}{p}")).join("outbox");
        assert!(own.exists(), "{} missing", own.display());
    }
    let mut c = run("c2", &["-i", "500"]);
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.text());
    let text = c.text();
    assert_eq!(text.matches("resumed session").count(), 2, "{text}");
    let mut c = run("c3", &["-i", "100"]);
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.text());
    let text = c.text();
    assert_eq!(
        text.matches("finished in an earlier run").count(),
        2,
        "{text}"
    );
    assert!(!text.contains("resumed session"), "{text}");
    assert!(s1.stop().success() && s2.stop().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_disk_halts_the_server_before_it_acknowledges_what_it_could_not_keep() {
    let _one = one_at_a_time();
    let dir = scratch("full");
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    // A small file system of the test's own (root: CI runs as root).
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&disk)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
        assert_ne!(uid, 0, "root, and no tmpfs could be mounted");
        eprintln!("not root: a tmpfs cannot be mounted; the full-disk test needs one");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(disk.clone());
    let port = free_port();
    let mut s = server(port, &disk, "server-1");
    let mut c = client(port, &dir, "c", &["-i", "0", "--run-time", "20s"]);
    let st = s.wait(Duration::from_secs(60));
    let text = s.text();
    assert_eq!(st.code(), Some(1), "{text}");
    assert!(text.contains("No space left on device"), "{text}");
    assert!(
        text.contains("stopped before acknowledging what it could not keep"),
        "{text}"
    );
    c.stop();
    // Every sn the client saw acknowledged is in the server's records.
    let log = std::fs::read_to_string(dir.join("audit").join("client.log")).unwrap();
    let acked: u64 = log
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| *x == "acked")?;
            (w.get(1) == Some(&"done")).then(|| w.get(at + 1)?.parse().ok())?
        })
        .max()
        .expect("the client's done line");
    let kept = records(&disk.join("audit").join("server-1.records"));
    let sns: BTreeSet<u64> = kept.iter().map(|r| r.1).collect();
    assert!(acked > 0);
    let unkept: Vec<u64> = (0..acked).filter(|sn| !sns.contains(sn)).collect();
    assert!(
        unkept.is_empty(),
        "acknowledged, not kept: {:?}",
        &unkept[..unkept.len().min(20)]
    );
    eprintln!("{acked} sns acknowledged, each kept; the server stopped at a full disk");
    drop(_unmount);
    std::fs::remove_dir_all(&dir).unwrap();
}
