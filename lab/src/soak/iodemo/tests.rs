//! The io_demo soak's command lines and schedule, as the processes get
//! them.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::args::{Op, SizeRange};

fn job(api: crate::transport::Api) -> SoakJob {
    SoakJob {
        clients: 2,
        tls: "tcp".into(),
        api,
        transport: crate::transport::Transport::default(),
        kill_every: Duration::from_secs(5),
        kills: 12,
        duration: None,
        seed: 7,
        replay: true,
        exactly_once: false,
        journal_faults: false,
        hosts: Hosts::Local,
        faults: Vec::new(),
        fault_every: Duration::from_secs(5),
        cut_for: Duration::from_secs(4),
        max_server_rss: 1 << 30,
        recreate_context: false,
        ops: vec![Op::Read, Op::Write],
        sizes: SizeRange {
            min: 4096,
            max: 4096,
        },
        window: 16,
        audit_dir: PathBuf::from("/soak/audit"),
        report: PathBuf::from("/soak/audit/report.json"),
        plot: PathBuf::from("/soak/audit/report.svg"),
        report_interval: Duration::from_secs(5),
        drain: Duration::from_secs(30),
        keep_records: false,
        remote: None,
    }
}

#[test]
fn the_server_is_iomsg_in_io_demo_mode_with_its_audit_files() {
    let j = job(crate::transport::Api::Tag);
    let mut io = IoDemoJob {
        clients: 1,
        bin: "io_demo".into(),
        plant_drop: 0,
    };
    assert_eq!(
        server_args(&j, &io, "127.0.0.1:4242", "server-3").join(" "),
        "server --io-demo --listen 127.0.0.1:4242 --audit-dir /soak/audit --audit-name server-3 \
         --api tag"
    );
    io.plant_drop = 500;
    assert!(server_args(&j, &io, "127.0.0.1:4242", "server-3")
        .join(" ")
        .ends_with("--api tag --io-demo-plant-drop 500"));
}

#[test]
fn clients_validate_read_and_write_and_retry_quickly_until_their_limit() {
    let j = job(crate::transport::Api::Tag);
    let a = client_args(&j, 1, "169.254.78.1:13337", Duration::from_millis(66_500)).join(" ");
    assert_eq!(
        a,
        "-q -o read,write -d 4096:4096 -w 16 -i 0 -y 0.2s -t 10s -l 66.5s -s 9 \
         169.254.78.1:13337"
    );
    let am = client_args(
        &job(crate::transport::Api::Am),
        0,
        "x:1",
        Duration::from_secs(1),
    );
    assert_eq!(&am[..2], &["-q".to_string(), "-A".to_string()]);
}

#[test]
fn kills_are_jittered_and_the_limit_covers_them_with_a_tail() {
    let every = Duration::from_secs(5);
    let t = kill_times(7, every, 12);
    assert_eq!(t.len(), 12);
    let mut last = Duration::ZERO;
    for &at in &t {
        let gap = at - last;
        assert!(
            gap >= every.mul_f64(0.7) && gap <= every.mul_f64(1.3),
            "{gap:?}"
        );
        last = at;
    }
    assert_ne!(t[0], t[1] - t[0], "jittered");
    assert_eq!(t, kill_times(7, every, 12), "the seed decides");
    assert_eq!(run_time(&t, every), last + every);
    assert_eq!(run_time(&t, Duration::from_secs(1)), last + TAIL);
}

#[test]
fn each_client_has_an_address_of_its_own_in_the_lab() {
    let p = Placement::new(3, true, 1);
    assert_eq!(p.server, format!("{LAB_NET}.1:{LAB_PORT}"));
    assert_eq!(p.listen, format!("0.0.0.0:{LAB_PORT}"));
    assert_eq!(
        p.client_ips,
        vec![
            format!("{LAB_NET}.2"),
            format!("{LAB_NET}.3"),
            format!("{LAB_NET}.4")
        ]
    );
    let local = Placement::new(1, false, 4242);
    assert_eq!(local.server, "127.0.0.1:4242");
    assert_eq!(local.client_ips, vec!["127.0.0.1".to_string()]);
    let mut j = job(crate::transport::Api::Tag);
    assert!(
        !lab_needed(&j),
        "clients on one loopback are told apart by their ids"
    );
    j.hosts = Hosts::Netns;
    assert!(lab_needed(&j));
}
