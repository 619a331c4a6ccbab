//! The io_demo server against UCX's own io_demo client (`/usr/bin/io_demo`
//! from ucx-utils, skipped with a note when it is not on PATH), and
//! against a raw peer that breaks io_demo's protocol on purpose.
//!
//! What the client completed comes from io_demo itself (its exit code,
//! its "Client exit with status 'OK'", its reports' counts); the server's
//! events are checked against that, never against themselves alone.

#[path = "iodemo/support.rs"]
mod support;

#[path = "iodemo/hostile.rs"]
mod hostile;

use std::collections::HashSet;
use std::time::Duration;

use iomsg_core::iodemo::Op;
use iomsg_ucx::iodemo::{IoDemoEvent, IoDemoOptions};
use support::{assert_client_ok, completed, Client, ServerThread};

/// Operations each client run asks for.
const ITERS: u64 = 2000;

/// Runs one io_demo client (`extra` added to the common arguments)
/// against a fresh server with `opts`, and checks what both saw.
fn run_client(name: &str, extra: &[&str], opts: IoDemoOptions, tag: bool) {
    let Some(bin) = support::io_demo() else {
        eprintln!("skipped: io_demo is not on PATH (Debian's ucx-utils has it)");
        return;
    };
    let mut server = ServerThread::start(opts.clone());
    let iters = ITERS.to_string();
    let mut args = vec!["-q", "-o", "read,write", "-d", "1000:70000", "-i", &iters];
    args.extend_from_slice(extra);
    let client = Client::spawn(&bin, &args, server.addr, name);
    let (code, log) = client.finish(Duration::from_secs(25));
    assert_client_ok(code, &log);
    let (reads, writes) = completed(&log);
    assert_eq!(
        reads + writes,
        ITERS,
        "io_demo's own reports count {reads} reads and {writes} writes; its log:\n{log}"
    );
    // The client is gone: its connection closes on the server.
    let closed = server.wait_for(Duration::from_secs(10), |e| {
        matches!(e, IoDemoEvent::Closed { .. })
    });
    assert!(closed.is_some(), "the server never saw the client go");
    let events = server.stop();
    check_served(&events, tag, reads, writes, opts.report_arrivals);
}

/// The server answered exactly what io_demo completed, once each, on one
/// connection of the right API, with sns in one unbroken run, and saw
/// nothing wrong; with `arrivals`, each answer after its request's
/// arrival and every request that arrived answered.
fn check_served(events: &[IoDemoEvent], tag: bool, reads: u64, writes: u64, arrivals: bool) {
    let opened: Vec<(u64, Option<bool>)> = events
        .iter()
        .filter_map(|e| match e {
            IoDemoEvent::Opened { conn, tag, .. } => Some((*conn, *tag)),
            _ => None,
        })
        .collect();
    assert_eq!(opened.len(), 1, "one connection: {opened:?}");
    let (conn, api) = opened[0];
    assert_eq!(api, Some(tag), "the connection's API");
    let mut sns = Vec::new();
    let (mut r, mut w) = (0, 0);
    let mut taken = HashSet::new();
    for e in events {
        match e {
            IoDemoEvent::Arrived { conn: c, op, sn } if arrivals => {
                assert_eq!(*c, conn, "an arrival on another connection");
                assert!(taken.insert((*op, *sn)), "{op:?} {sn} arrived twice");
            }
            IoDemoEvent::Answered {
                conn: c, op, sn, ..
            } => {
                assert_eq!(*c, conn, "an answer on another connection");
                assert!(
                    !arrivals || taken.contains(&(*op, *sn)),
                    "{op:?} {sn} answered before it was reported taken"
                );
                match op {
                    Op::Read => r += 1,
                    Op::Write => w += 1,
                    other => panic!("answered {other:?}"),
                }
                sns.push(*sn);
            }
            IoDemoEvent::Closed {
                conn: c, in_flight, ..
            } => {
                assert_eq!(*c, conn);
                assert!(in_flight.is_empty(), "left unanswered: {in_flight:?}");
            }
            IoDemoEvent::Opened { .. } => {}
            other => panic!("the server saw something wrong: {other:?}"),
        }
    }
    assert_eq!(
        (r, w),
        (reads, writes),
        "server (reads, writes) vs io_demo's"
    );
    assert_contiguous(&sns);
    if arrivals {
        assert_eq!(taken.len(), sns.len(), "requests taken vs answered");
    }
}

/// `sns` are distinct and, as 32-bit sns that wrap, one unbroken run.
fn assert_contiguous(sns: &[u32]) {
    let Some(&first) = sns.first() else {
        panic!("no sn answered");
    };
    let low = sns
        .iter()
        .map(|&s| s.wrapping_sub(first) as i32)
        .min()
        .expect("not empty");
    let base = first.wrapping_add(low as u32);
    let offsets: HashSet<u32> = sns.iter().map(|&s| s.wrapping_sub(base)).collect();
    assert_eq!(offsets.len(), sns.len(), "an sn answered twice");
    let top = offsets.iter().max().copied().unwrap_or(0);
    assert_eq!(
        top as usize + 1,
        sns.len(),
        "sns from {base} on are not one run: the highest is {top} above it"
    );
}

#[test]
fn tag_clients_are_served_every_operation_once() {
    run_client("tag", &[], IoDemoOptions::default(), true);
}

#[test]
fn active_message_clients_are_served_every_operation_once() {
    let opts = IoDemoOptions {
        report_arrivals: true,
        ..IoDemoOptions::default()
    };
    run_client("am", &["-A"], opts, false);
}

#[test]
fn chunked_tag_clients_are_served_every_operation_once() {
    let opts = IoDemoOptions {
        chunk: 16384,
        report_arrivals: true,
        ..IoDemoOptions::default()
    };
    run_client("chunked", &["-k", "16384"], opts, true);
}
