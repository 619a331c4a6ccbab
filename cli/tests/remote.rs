//! `iomsg soak --launcher`: the soak across hosts, each host a network
//! namespace with its own OpenSSH server (ssh, pdsh), or a one-node Slurm
//! cluster (`ci/slurm-one-node`). Skipped, saying why, where root, `ip
//! netns`, sshd, pdsh or Slurm is missing.

#![allow(clippy::unwrap_used)]

mod remote {
    pub mod lab;
}

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use remote::lab::{self, SshLab};

/// One soak at a time: they time stalls on two cores.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The (session, sn) pairs of the `.records` files in `dir` whose names
/// start with `prefix`, read here without the soak's code.
fn records(dir: &Path, prefix: &str) -> HashSet<(u64, u64)> {
    let mut out = HashSet::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(prefix) && name.ends_with(".records") {
            for c in std::fs::read(&p).unwrap().chunks_exact(24) {
                out.insert((
                    u64::from_le_bytes(c[0..8].try_into().unwrap()),
                    u64::from_le_bytes(c[8..16].try_into().unwrap()),
                ));
            }
        }
    }
    out
}

/// The pids the wrapper lines in the `.out` files of `dir` name.
fn remote_pids(dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "out") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            out.extend(text.lines().filter_map(|l| {
                l.split_once("iomsg-remote-pid ")?
                    .1
                    .trim()
                    .parse::<u32>()
                    .ok()
            }));
        }
    }
    out
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("iomsg-remote-test-{}-{name}", std::process::id()))
}

/// Runs `cmd` (an `iomsg soak`) to its end, at most `limit`; its exit
/// code, output, and report.
fn soak(mut cmd: Command, dir: &Path, limit: Duration) -> (Option<i32>, String, serde_json::Value) {
    let out_path = dir.with_extension("txt");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the soak did not end in {limit:?}: {}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let report = std::fs::read_to_string(dir.join("report.json"))
        .unwrap_or_else(|e| panic!("no report ({e}): {text}"));
    (status.code(), text, serde_json::from_str(&report).unwrap())
}

/// This test's turn at a lab (one soak at a time), if the lab can be
/// made here; says why not.
fn lab_turn() -> Option<std::sync::MutexGuard<'static, ()>> {
    let turn = one_at_a_time();
    match lab::unavailable() {
        Some(why) => {
            eprintln!("skipped: {why}");
            None
        }
        None => Some(turn),
    }
}

/// `iomsg soak --launcher L` in the lab's control namespace: server on
/// h0, clients on h1 and h2.
fn lab_soak(lab: &SshLab, launcher: &str, dir: &Path, extra: &[&str]) -> Command {
    let _ = std::fs::remove_dir_all(dir);
    let mut c = lab.in_ctl(env!("CARGO_BIN_EXE_iomsg"));
    c.args(["soak", "--launcher", launcher, "--ssh-config"])
        .arg(&lab.config)
        .args(["--server", "h0", "--client", "h1", "h2", "--ucx-tls", "tcp"]);
    short_run(&mut c, dir, &lab.dir.join("remote"));
    c.args(extra);
    c
}

/// A short run's options: its audit directory `dir` here, its scratch
/// directory `remote` on the hosts, the records kept for the test.
fn short_run(c: &mut Command, dir: &Path, remote: &Path) {
    c.args([
        "--window",
        "128",
        "--drain",
        "10s",
        "--report-interval",
        "1s",
    ])
    .args(["--keep-records", "--audit-dir"])
    .arg(dir)
    .arg("--remote-dir")
    .arg(remote);
}

/// What every passing soak across the lab shows, checked against the
/// files and the lab rather than the soak's own counts.
fn check_pass(lab: &SshLab, dir: &Path, code: Option<i32>, text: &str, r: &serde_json::Value) {
    assert_eq!(r["verdict"], "pass", "{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(r["server_kills"].as_u64().unwrap() >= 3, "{text}");
    // Ground truth: the records fetched from the hosts. Every sn a client
    // submitted was handed over by a server instance on h0.
    let (sent, handed) = (records(dir, "client-"), records(dir, "server-"));
    assert!(sent.len() > 1000, "{text}");
    assert!(
        sent.is_subset(&handed),
        "{} sns never handed over",
        sent.difference(&handed).count()
    );
    for n in 0..4 {
        assert!(
            dir.join(format!("server-{n}.records")).exists(),
            "server-{n}: {text}"
        );
    }
    // Each role ran on its host: the endpoints' transports name the
    // host's own device.
    let hosts = r["hosts"].as_array().expect("hosts in the report");
    assert_eq!(hosts.len(), 3, "{text}");
    for (i, h) in hosts.iter().enumerate() {
        assert_eq!(h["host"], format!("h{i}"));
        let used = h["transports_used"].to_string();
        assert!(
            used.contains(&format!("tcp/{}", lab.devices[i])),
            "h{i}: {used}"
        );
        assert!(h["lost"].is_null());
    }
    assert_eq!(hosts[0]["roles"], serde_json::json!(["server"]));
    // Status lines streamed back while it ran.
    assert!(text.contains("soak: t="), "{text}");
    // Nothing left: no process, no scratch directory on the hosts.
    let pids = remote_pids(dir);
    assert!(pids.len() >= 6, "{pids:?}");
    assert!(pids.iter().all(|&p| !alive(p)), "left running: {pids:?}");
    assert!(
        !lab.dir.join("remote").exists(),
        "the hosts' scratch directory is left"
    );
}

#[test]
fn a_soak_over_pdsh_across_three_namespace_hosts_passes_with_server_kills() {
    let Some(_one) = lab_turn() else {
        return;
    };
    if !Path::new("/usr/bin/pdsh").exists() {
        eprintln!("skipped: pdsh is missing (Debian's pdsh)");
        return;
    }
    let lab = SshLab::new("pdsh", 82, 3).unwrap();
    let dir = scratch("pdsh");
    // The program copied to each host with pdcp.
    let cmd = lab_soak(
        &lab,
        "pdsh",
        &dir,
        &["--kills", "3", "--kill-every", "2s", "--ship"],
    );
    let (code, text, r) = soak(cmd, &dir, Duration::from_secs(180));
    check_pass(&lab, &dir, code, &text, &r);
    for h in r["hosts"].as_array().unwrap() {
        assert!(h["clock_offset_ms"].as_f64().unwrap().abs() < 50.0, "{h}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_soak_over_ssh_across_three_namespace_hosts_with_clocks_off_passes_with_server_kills() {
    let Some(_one) = lab_turn() else {
        return;
    };
    // The server's host 20 s ahead, one client host 30 s behind: read on
    // their own clocks, that client's acknowledgements would all come
    // before it started (a stall of the whole run), and the instances
    // would listen after the clients reconnected.
    let skews: &[(usize, i32)] = if Path::new(lab::FAKETIME).exists() {
        &[(0, 20), (1, -30)]
    } else {
        eprintln!(
            "the clocks are left right: {} is missing (Debian's libfaketime)",
            lab::FAKETIME
        );
        &[]
    };
    let lab = SshLab::with_clocks("ssh", 81, 3, skews).unwrap();
    let dir = scratch("ssh");
    // The program copied to each host (over ssh) and run from there.
    let cmd = lab_soak(
        &lab,
        "ssh",
        &dir,
        &["--kills", "3", "--kill-every", "2s", "--ship"],
    );
    let (code, text, r) = soak(cmd, &dir, Duration::from_secs(180));
    let skew = |i: usize| {
        skews
            .iter()
            .find(|s| s.0 == i)
            .map_or(0.0, |s| f64::from(s.1))
    };
    for i in 0..3 {
        let measured = r["hosts"][i]["clock_offset_ms"].as_f64().unwrap();
        assert!(
            (measured - skew(i) * 1e3).abs() < 50.0,
            "h{i}: {measured} ms: {text}"
        );
    }
    if !skews.is_empty() {
        // The files' own times are off: the first times of the
        // processes' logs, read here, are seconds apart.
        let first = |name: &str| {
            let log = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap();
            log.split_whitespace()
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        let (s0, c0, c1) = (first("server-0"), first("client-0"), first("client-1"));
        assert!(
            s0 > c1 + 19_000_000 && c1 > c0 + 29_000_000,
            "{s0} {c0} {c1}"
        );
    }
    // Judged on one clock, it passes: no stall past its bound.
    check_pass(&lab, &dir, code, &text, &r);
    assert_eq!(r["config"]["hosts"], "ssh launcher");
    assert!(
        text.contains("/remote/iomsg (copied there first)"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_client_host_that_stops_answering_is_reported_lost_and_the_run_ends() {
    let Some(_one) = lab_turn() else {
        return;
    };
    let lab = SshLab::new("lost", 83, 3).unwrap();
    let dir = scratch("lost");
    // Far more kills than the run will see: it must end at the loss.
    let cmd = lab_soak(&lab, "ssh", &dir, &["--kills", "100", "--kill-every", "2s"]);
    let cutter = {
        let out = dir.join("client-1.out");
        let (ctl, link) = (lab.ctl.clone(), lab.links[2].clone());
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until {
                let text = std::fs::read_to_string(&out).unwrap_or_default();
                if text.matches("status ").count() >= 8 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let ok = Command::new("ip")
                .args(["-n", &ctl, "link", "set", &link, "down"])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "could not cut h2's link");
        })
    };
    let started = Instant::now();
    let (code, text, r) = soak(cmd, &dir, Duration::from_secs(150));
    cutter.join().unwrap();
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(r["verdict"], "fail", "{text}");
    let reasons = r["reasons"].to_string();
    assert!(reasons.contains("lost h2"), "{reasons}");
    assert!(r["server_kills"].as_u64().unwrap() < 100, "{text}");
    let h2 = &r["hosts"][2];
    assert_eq!(h2["host"], "h2");
    assert!(
        h2["lost"].as_str().is_some_and(|w| w.contains("h2")),
        "{h2}"
    );
    assert!(r["hosts"][1]["lost"].is_null() && r["hosts"][0]["lost"].is_null());
    let c1 = r["client_processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "client-1")
        .unwrap()
        .clone();
    assert_eq!(c1["end"], "its host stopped answering", "{c1}");
    assert!(started.elapsed() < Duration::from_secs(120));
    // The client on h2 could not be reached; the lab stops it.
    drop(lab);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A one-node Slurm cluster (`ci/slurm-one-node`), stopped on drop.
struct Slurm {
    dir: PathBuf,
    conf: String,
    node: String,
}

impl Slurm {
    fn start() -> Result<Slurm, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/slurm-one-node");
        let dir = scratch("slurm-cluster");
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .output()
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let value = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {k}=")))
                .map(|v| v.trim_matches(['\'', '"']).to_string())
        };
        let s = Slurm {
            dir,
            conf: value("SLURM_CONF").unwrap_or_default(),
            node: value("SLURM_ONE_NODE").unwrap_or_default(),
        };
        if !out.status.success() || s.conf.is_empty() {
            return Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(s)
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/slurm-one-node");
        let _ = Command::new("bash")
            .arg(script)
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

#[test]
fn a_soak_over_slurm_steps_on_a_one_node_cluster_passes_with_server_kills() {
    let _one = one_at_a_time();
    for p in [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/bin/srun",
        "/usr/sbin/munged",
    ] {
        if !Path::new(p).exists() {
            eprintln!("skipped: {p} is missing (Debian's slurmctld, slurmd, slurm-client, munge)");
            return;
        }
    }
    let slurm = Slurm::start().unwrap();
    let alloc = slurm
        .command("salloc")
        .args(["-N1", "--no-shell", "--job-name", "iomsg-soak-test"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&alloc.stderr).into_owned();
    let job = said
        .split_whitespace()
        .last()
        .filter(|_| said.contains("Granted job allocation"))
        .unwrap_or_else(|| panic!("no allocation: {said}"))
        .to_string();
    let dir = scratch("slurm");
    let _ = std::fs::remove_dir_all(&dir);
    let remote = scratch("slurm-remote");
    let mut cmd = slurm.command(env!("CARGO_BIN_EXE_iomsg"));
    cmd.args(["soak", "--launcher", "slurm", "--slurm-job", &job])
        .args([
            "--server",
            &slurm.node,
            "--client",
            &slurm.node,
            "--clients",
            "2",
        ])
        .args(["--ucx-tls", "tcp", "--kills", "3", "--kill-every", "2s"]);
    short_run(&mut cmd, &dir, &remote);
    let (code, text, r) = soak(cmd, &dir, Duration::from_secs(180));
    assert_eq!(r["verdict"], "pass", "{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(r["server_kills"].as_u64().unwrap() >= 3, "{text}");
    let (sent, handed) = (records(&dir, "client-"), records(&dir, "server-"));
    assert!(sent.len() > 1000 && sent.is_subset(&handed), "{text}");
    let h = &r["hosts"][0];
    assert_eq!(
        h["roles"],
        serde_json::json!(["server", "client-0", "client-1"])
    );
    assert!(h["transports_used"].to_string().contains("tcp/"), "{h}");
    let pids = remote_pids(&dir);
    assert!(
        pids.len() >= 6 && pids.iter().all(|&p| !alive(p)),
        "{pids:?}"
    );
    assert!(!remote.exists());
    let _ = slurm.command("scancel").arg(&job).status();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn launcher_mistakes_are_refused_before_anything_starts() {
    let dir = scratch("refused");
    let hosts = dir.with_extension("hosts");
    std::fs::write(&hosts, "server a\nserver b\nclient c\n").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--launcher", "ssh"], "--server HOST"),
        (&["--launcher", "ssh", "--server", "a"], "--client"),
        (
            &["--launcher", "rsh", "--server", "a", "--client", "b"],
            "not a launcher",
        ),
        (
            &["--launcher", "ssh", "--server", "a,b", "--client", "c"],
            "host name",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client=-oProxyCommand=x",
            ],
            "host name",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client",
                "b",
                "--ssh-option=-p2222",
            ],
            "-o OPT",
        ),
        (
            &["--launcher", "ssh", "--hosts-file", hosts.to_str().unwrap()],
            "a second server",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client",
                "b",
                "--faults",
                "client-kill",
            ],
            "--faults",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client",
                "b",
                "--exactly-once",
            ],
            "--exactly-once",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client",
                "b",
                "--remote-dir",
                "rel",
            ],
            "absolute",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client",
                "b",
                "--sim",
            ],
            "--sim",
        ),
        (
            &[
                "--launcher",
                "ssh",
                "--server",
                "a",
                "--client",
                "b",
                "--io-demo-clients",
                "1",
            ],
            "--io-demo-clients",
        ),
    ];
    for (args, says) in cases {
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(env!("CARGO_BIN_EXE_iomsg"))
            .arg("soak")
            .args(*args)
            .arg("--audit-dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was taken");
        assert!(text.contains(says), "{args:?}: {text}");
        // Refused before any host was reached: nothing was run.
        assert!(!dir.join("report.json").exists(), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::remove_file(&hosts).unwrap();
}

#[test]
fn a_soak_killed_outright_leaves_nothing_running_on_the_hosts() {
    let Some(_one) = lab_turn() else {
        return;
    };
    let lab = SshLab::new("kill", 85, 3).unwrap();
    let dir = scratch("killed");
    // A scratch directory that is already there is someone's: refused,
    // and left as it was.
    let theirs = lab.dir.join("remote");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("thesis.txt"), "mine").unwrap();
    let out = lab_soak(&lab, "ssh", &dir, &["--kills", "3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("already exists"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(theirs.join("thesis.txt")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(&theirs).unwrap();
    // SIGKILL to the soak mid-run: it can stop nothing itself.
    let mut soak = lab_soak(&lab, "ssh", &dir, &["--kills", "100", "--kill-every", "2s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        let text = std::fs::read_to_string(dir.join("client-1.out")).unwrap_or_default();
        if text.matches("status ").count() >= 8 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let pids = remote_pids(&dir);
    assert!(
        pids.len() >= 3 && pids.iter().any(|&p| alive(p)),
        "{pids:?}"
    );
    soak.kill().unwrap();
    soak.wait().unwrap();
    // The hosts' processes end with the soak's pipes (ssh carries their
    // end to each wrapper).
    let until = Instant::now() + Duration::from_secs(15);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<u32> = pids.into_iter().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "still running on the hosts: {left:?}");
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
}
