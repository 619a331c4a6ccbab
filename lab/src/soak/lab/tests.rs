//! The soak's command lines, as the processes get them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::{Hosts, SoakJob};
use super::Runner;
use crate::args::{Op, SizeRange};

fn job(exactly_once: bool) -> SoakJob {
    SoakJob {
        clients: 3,
        tls: "tcp".into(),
        api: crate::transport::Api::default(),
        transport: crate::transport::Transport::default(),
        kill_every: Duration::from_millis(1500),
        kills: 100,
        duration: None,
        seed: 7,
        replay: true,
        exactly_once,
        journal_faults: false,
        hosts: Hosts::Local,
        faults: Vec::new(),
        fault_every: Duration::from_secs(5),
        cut_for: Duration::from_secs(4),
        max_server_rss: 1 << 30,
        recreate_context: false,
        ops: vec![Op::Write],
        sizes: SizeRange { min: 64, max: 4096 },
        window: 256,
        audit_dir: PathBuf::from("/soak/audit"),
        report: PathBuf::from("/soak/audit/report.json"),
        plot: PathBuf::from("/soak/audit/report.svg"),
        report_interval: Duration::from_secs(5),
        drain: Duration::from_secs(30),
        keep_records: false,
        remote: None,
    }
}

fn runner(job: &SoakJob) -> Runner<'_> {
    Runner {
        job,
        exe: PathBuf::from("/bin/iomsg"),
        lab: None,
        remote: None,
        port: 4242,
        faults_log: None,
        t0: 0,
    }
}

fn args(c: &std::process::Command) -> Vec<String> {
    c.get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The value after `flag`, if it is there once.
fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at: Vec<usize> = (0..args.len()).filter(|&i| args[i] == flag).collect();
    match at.as_slice() {
        [i] => args.get(i + 1).map(String::as_str),
        _ => None,
    }
}

#[test]
fn exactly_once_servers_share_one_journal_without_sync() {
    let j = job(true);
    let r = runner(&j);
    for n in ["server-0", "server-7"] {
        let a = args(&r.server_command(n, "127.0.0.1:4242"));
        assert_eq!(value(&a, "--journal"), Some("/soak/audit/journal"), "{a:?}");
        assert_eq!(value(&a, "--sync"), Some("none"), "{a:?}");
        assert_eq!(value(&a, "--audit-name"), Some(n), "{a:?}");
    }
}

#[test]
fn exactly_once_clients_keep_one_outbox_per_slot_over_their_generations() {
    let j = job(true);
    let r = runner(&j);
    let first = args(&r.client_command(1, 0, "client-1"));
    let third = args(&r.client_command(1, 2, "client-1.2"));
    let other = args(&r.client_command(2, 0, "client-2"));
    for (a, name) in [(&first, "client-1"), (&third, "client-1.2")] {
        assert_eq!(value(a, "--outbox"), Some("/soak/audit/outbox-1"), "{a:?}");
        assert_eq!(value(a, "--sync"), Some("none"), "{a:?}");
        assert_eq!(value(a, "--audit-name"), Some(name), "{a:?}");
        assert_eq!(value(a, "--replay"), Some("on"), "{a:?}");
    }
    assert_eq!(value(&other, "--outbox"), Some("/soak/audit/outbox-2"));
    assert_eq!(
        super::outbox_dir(Path::new("/x"), 4),
        PathBuf::from("/x/outbox-4")
    );
}

#[test]
fn without_exactly_once_no_journal_and_no_outbox() {
    let j = job(false);
    let r = runner(&j);
    let server = args(&r.server_command("server-0", "127.0.0.1:4242"));
    let client = args(&r.client_command(0, 1, "client-0.1"));
    for a in [&server, &client] {
        for flag in ["--journal", "--outbox", "--sync"] {
            assert!(!a.iter().any(|x| x == flag), "{flag} in {a:?}");
        }
    }
    assert_eq!(value(&client, "--audit-name"), Some("client-0.1"));
}

#[test]
fn clients_wait_for_room_in_a_table_the_hostile_fault_fills() {
    for exactly_once in [false, true] {
        let j = job(exactly_once);
        let r = runner(&j);
        let a = args(&r.client_command(0, 3, "client-0.3"));
        assert!(a.iter().any(|x| x == "--retry-full-table"), "{a:?}");
    }
}
