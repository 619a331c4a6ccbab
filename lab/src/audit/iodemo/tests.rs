use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::*;
use crate::audit::iodemo::ARRIVED;
use crate::common::Record;

/// A scratch directory of its own per test.
fn scratch(test: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("iomsg-iodemo-judge-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The chain's first sn: close to the top of u32, so that the chain wraps.
const BASE: u32 = u32::MAX - 3;
const CONN_A: u64 = 0x00a1_0000_0000_0001;
const CONN_B: u64 = 0x00b2_0000_0000_0002;

fn sn(off: u32) -> u32 {
    BASE.wrapping_add(off)
}

/// An instance's files: log lines and the records of `replied` (conn,
/// offset; even offsets reads, odd writes).
fn instance(dir: &Path, name: &str, lines: &[String], replied: &[(u64, u32)]) {
    let mut log = String::new();
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(log, "{} {l}", 1_000 + i);
    }
    std::fs::write(dir.join(format!("{name}.log")), log).unwrap();
    let mut bytes = Vec::new();
    for &(conn, off) in replied {
        let op = u64::from(off % 2);
        Record {
            session: conn,
            sn: (op << 32) | u64::from(sn(off)),
            hash: 4096,
        }
        .put(&mut bytes);
    }
    std::fs::write(dir.join(format!("{name}.records")), bytes).unwrap();
}

/// The server's id for a connection, as the client logs it.
fn ours(conn: u64) -> u64 {
    conn & 0xffff
}

/// io_demo's line naming the server's id for its connection `#n`.
fn remote_id(n: u32, conn: u64) -> String {
    format!(
        "[1796312680.{n:06}] [UCX-connection 0x557d44c718e0: #{n} 127.0.0.1:24570] Remote id \
         is {}, endpoint 0x7f00, local address 127.0.0.1:1 remote address 127.0.0.1:2",
        ours(conn)
    )
}

fn disconnect(n: u32, counts: &str, why: &str) -> String {
    format!(
        "[1796312682.{n:06}] [DEMO] disconnecting [UCX-connection 0x557d44c718e0: #{n} \
         127.0.0.1:24570] {counts} due to \"{why}\""
    )
}

/// A clean run: connection A on server-0 sends offsets 0..10 (reads
/// 0,2,4,6,8, writes 1,3,5,7,9), the server answered 0..9 and was killed
/// before offset 9 arrived; io_demo completed 7 (read 3/5 write 4/5, N
/// = 3). A failed connect (0/0). Connection B on server-1 sends 10..16,
/// all answered: a performance report covers 10..14 (its counters
/// restart), and the run ends with nothing forgotten.
fn clean_run(dir: &Path, b_replied: &[u32], first_line: &str) -> Vec<IoDemoClient> {
    let open = |c: u64| format!("iodemo_open {c:016x} 127.0.1.1:40000 tag {} 1", ours(c));
    let a: Vec<(u64, u32)> = (0..9).map(|o| (CONN_A, o)).collect();
    instance(
        dir,
        "server-0",
        &["listening 0.0.0.0:1 iodemo".into(), open(CONN_A)],
        &a,
    );
    let b: Vec<(u64, u32)> = b_replied.iter().map(|&o| (CONN_B, o)).collect();
    instance(
        dir,
        "server-1",
        &[
            "listening 0.0.0.0:1 iodemo".into(),
            open(CONN_B),
            format!("iodemo_close {CONN_B:016x} peer closed"),
        ],
        &b,
    );
    let log = [
        "[1796312680.076066] [DEMO] Command line: io_demo -q".to_string(),
        remote_id(1, CONN_A),
        disconnect(1, first_line, "Endpoint timeout"),
        "[1796312682.2] [vm:1:0] sock.c:325  UCX  ERROR   connect(fd=13) failed".into(),
        disconnect(2, "read 0/0 write 0/0", "Endpoint is not connected"),
        "[1796312683.561627] [DEMO] total min:4 max:4 total:4 | read 14.7 MBs \
         min:2(127.0.0.1:24570) max:2 total:2 | write 14.9 MBs min:2(127.0.0.1:24570) max:2 \
         total:2 | active:1/1 buffers:15"
            .into(),
        remote_id(4, CONN_B),
        disconnect(4, "read 1/1 write 1/1", "End of the Client run"),
        format!(
            "[1796312680.1] [DEMO] not {}",
            &disconnect(4, "read 3/3 write 3/3", "x")[23..]
        ),
        "[1796312688.079345] [DEMO] Client exit with status 'run-time exceeded'".into(),
    ];
    std::fs::write(dir.join("client-0.log"), log.join("\n") + "\n").unwrap();
    vec![IoDemoClient {
        name: "client-0".into(),
        peer_ip: "127.0.1.1".into(),
        exit_code: Some(0),
    }]
}

fn names() -> Vec<String> {
    vec!["server-0".into(), "server-1".into()]
}

#[test]
fn a_clean_run_passes_and_names_the_forgotten_by_the_rule() {
    let dir = scratch("clean");
    let clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 3/5 write 4/5");
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert!(j.failures.is_empty(), "{:?}", j.failures);
    assert_eq!(
        j.disconnects.len(),
        2,
        "the 0/0 line and the report are no rows"
    );
    let first = &j.disconnects[0];
    assert_eq!(
        (
            first.forgotten,
            first.forgotten_reads,
            first.forgotten_writes
        ),
        (3, 2, 1)
    );
    assert_eq!(
        (first.never_arrived, first.unanswered, first.replied),
        (1, 0, 9)
    );
    // Offset 9 never arrived; the last two replies posted (7, 8) are the
    // ones the kill cut off.
    assert_eq!(first.named, vec![sn(9), sn(7), sn(8)]);
    assert_eq!(first.instances, vec!["server-0".to_string()]);
    assert_eq!(j.disconnects[1].forgotten, 0);
    assert_eq!(j.disconnects[1].named_count, 0);
    assert_eq!(
        (j.totals.completed, j.totals.forgotten, j.totals.named),
        (13, 3, 3)
    );
    assert_eq!(j.totals.replied_per_instance, vec![9, 6]);
    assert!(table(&j).contains("server-1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hole_on_a_live_connection_fails_naming_the_sn() {
    let dir = scratch("hole");
    // Offset 13 was never answered on connection B, which io_demo closed
    // at the end having completed everything.
    let clients = clean_run(&dir, &[10, 11, 12, 14, 15], "read 3/5 write 4/5");
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    // Named twice: by io_demo's counts (its segment forgot nothing), and
    // by the connection that delivered later sns.
    assert_eq!(j.failures.len(), 2, "{:?}", j.failures);
    let named = format!("[{}]", sn(13));
    assert!(
        j.failures.iter().all(|f| f.contains(&named)),
        "{:?}",
        j.failures
    );
    assert!(
        j.failures[0].contains("never seen by any instance"),
        "{:?}",
        j.failures
    );
    assert!(
        j.failures[1].contains("lost on a live connection"),
        "{:?}",
        j.failures
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_sn_io_demo_counted_up_and_never_sent_between_connections_is_skipped_not_lost() {
    let dir = scratch("skipped");
    // io_demo added one to its sn for a send that failed at once at the
    // kill: connection B's sns start at offset 11, not 10.
    let clients = clean_run(&dir, &(11..17).collect::<Vec<_>>(), "read 3/5 write 4/5");
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert!(j.failures.is_empty(), "{:?}", j.failures);
    assert_eq!(j.totals.skipped, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_request_dropped_on_a_live_connection_fails_even_when_io_demos_counts_add_up() {
    let dir = scratch("dropped");
    let clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 3/5 write 4/5");
    // server-0 never answered offset 4 (a request dropped without a
    // word) but answered 5..9 after it; io_demo forgot it at the kill
    // with the rest of its window, so N = 3 still covers {4, 9}.
    let records = std::fs::read(dir.join("server-0.records")).unwrap();
    let kept: Vec<u8> = records
        .chunks_exact(24)
        .filter(|c| u32::from_le_bytes([c[8], c[9], c[10], c[11]]) != sn(4))
        .flatten()
        .copied()
        .collect();
    std::fs::write(dir.join("server-0.records"), kept).unwrap();
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert_eq!(j.failures.len(), 1, "{:?}", j.failures);
    assert!(
        j.failures[0].contains("lost on a live connection"),
        "{:?}",
        j.failures
    );
    assert!(
        j.failures[0].contains(&format!("[{}]", sn(4))),
        "{:?}",
        j.failures
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_write_taken_and_killed_before_its_answer_is_unanswered_not_lost() {
    let dir = scratch("taken");
    let clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 3/5 write 4/5");
    // server-0 took offsets 0..9 (9 never came) and was killed while the
    // write at offset 5 waited for its data: reads 6 and 8 were answered
    // after it. Its taken record says it arrived.
    let mut bytes = Vec::new();
    for off in 0..9u32 {
        let op = u64::from(off % 2);
        let taken = Record {
            session: CONN_A,
            sn: ((ARRIVED | op) << 32) | u64::from(sn(off)),
            hash: 0,
        };
        taken.put(&mut bytes);
        if off != 5 {
            Record {
                hash: 4096,
                sn: (op << 32) | u64::from(sn(off)),
                ..taken
            }
            .put(&mut bytes);
        }
    }
    let records = dir.join("server-0.records");
    std::fs::write(&records, &bytes).unwrap();
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert!(j.failures.is_empty(), "{:?}", j.failures);
    let first = &j.disconnects[0];
    assert_eq!(
        (first.never_arrived, first.unanswered, first.replied),
        (1, 1, 8)
    );
    assert_eq!(j.totals.replied_per_instance, vec![8, 6]);
    // Without its taken record the same run is a live loss.
    let untaken: Vec<u8> = bytes
        .chunks_exact(24)
        .filter(|c| {
            !(c[12] & ARRIVED as u8 != 0 && u32::from_le_bytes([c[8], c[9], c[10], c[11]]) == sn(5))
        })
        .flatten()
        .copied()
        .collect();
    std::fs::write(&records, untaken).unwrap();
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert!(
        j.failures
            .iter()
            .any(|f| f.contains("lost on a live connection") && f.contains(&format!("[{}]", sn(5)))),
        "{:?}",
        j.failures
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_late_message_for_a_closed_connection_counts_as_unanswered() {
    let dir = scratch("late");
    // Offset 9 reached server-0 after its connection closed: received,
    // never answered, so io_demo's N = 3 names it, then 7 and 8.
    let clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 3/5 write 4/5");
    let mut log = std::fs::read_to_string(dir.join("server-0.log")).unwrap();
    log.push_str(&format!("3000 iodemo_late 77 {} {CONN_A:016x}\n", sn(9)));
    log.push_str("3001 iodemo_late 78 - -\n");
    std::fs::write(dir.join("server-0.log"), log).unwrap();
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert!(j.failures.is_empty(), "{:?}", j.failures);
    let first = &j.disconnects[0];
    assert_eq!((first.never_arrived, first.unanswered), (0, 1));
    assert_eq!(first.named, vec![sn(9), sn(7), sn(8)]);
    assert_eq!(j.totals.late_unknown, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_count_below_what_was_never_answered_fails() {
    let dir = scratch("count");
    // io_demo says it completed everything on connection A, but offset 9
    // never reached any instance.
    let clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 5/5 write 5/5");
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert_eq!(j.failures.len(), 1, "{:?}", j.failures);
    assert!(
        j.failures[0].contains("forgot 0 but 1"),
        "{}",
        j.failures[0]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn server_lines_a_bad_exit_and_a_missed_reconnect_fail() {
    let dir = scratch("lines");
    let mut clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 3/5 write 4/5");
    let mut log = std::fs::read_to_string(dir.join("server-1.log")).unwrap();
    log.push_str(&format!("2000 iodemo_gap {CONN_B:016x} 5 7\n"));
    log.push_str("2001 iodemo_open 00000000000000ff 127.0.9.9:1 tag 99 1\n");
    std::fs::write(dir.join("server-1.log"), log).unwrap();
    // A stranger's connection that answered an operation.
    let mut records = std::fs::read(dir.join("server-1.records")).unwrap();
    Record {
        session: 0xff,
        sn: 5,
        hash: 1,
    }
    .put(&mut records);
    std::fs::write(dir.join("server-1.records"), records).unwrap();
    clients[0].exit_code = Some(134);
    let j = judge(&dir, &names(), &clients, 2, false).unwrap();
    let all = j.failures.join("\n");
    assert!(all.contains("iodemo_gap"), "{all}");
    assert!(
        all.contains(
            "connection 00000000000000ff answered 1 operations, and no client's log names it"
        ),
        "{all}"
    );
    assert!(all.contains("exited with code 134"), "{all}");
    assert!(all.contains("never reconnected after kill 2"), "{all}");
    assert!(!all.contains("after kill 1"), "{all}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn io_demo_lines_parse_as_io_demo_writes_them() {
    let line = "[1796312684.386634] [DEMO] disconnecting [UCX-connection 0x557d44c718e0: #4 \
                127.0.0.1:24570] read 826/832 write 838/848 due to \"Connection reset by remote peer\"";
    let d = files::parse_disconnect(line).unwrap();
    assert_eq!(d.at_us, 1_796_312_684_386_634);
    assert_eq!(
        (d.read_done, d.read_sent, d.write_done, d.write_sent),
        (826, 832, 838, 848)
    );
    assert_eq!((d.sent(), d.forgotten()), (1680, 16));
    assert_eq!(d.reason, "Connection reset by remote peer");
    let log = parse_client_log(
        "[1.000001] [DEMO] not disconnecting [UCX-connection 0x1: #4 a:1] read 1/2 write 0/0 \
         due to \"x\" because disconnection is already in progress\n\
         [1.000002] [DEMO] ERROR: iov data corruption (0x1: expected: seed=1 got: seed=2)\n\
         [1.000003] [DEMO] Client exit with status 'OK'\n",
    );
    assert!(log.disconnects.is_empty(), "a repeat is not a disconnect");
    assert_eq!(log.errors.len(), 1);
    assert_eq!(log.exit_status.as_deref(), Some("OK"));
    let report = "[1796312681.097656] [DEMO] total min:1860 max:1860 total:1860 | read 3.59417 \
                  MBs min:932(127.0.0.1:24570) max:932 total:932 | write 3.57875 MBs \
                  min:928(127.0.0.1:24570) max:928 total:928 | active:1/1 buffers:12";
    let p = files::parse_performance(report).unwrap();
    assert_eq!((p.read_sent, p.write_sent, p.forgotten()), (932, 928, 0));
    assert!(p.performance);
}

#[test]
fn with_strangers_only_the_clients_connections_are_judged() {
    let dir = scratch("strangers");
    let clients = clean_run(&dir, &(10..16).collect::<Vec<_>>(), "read 3/5 write 4/5");
    let mut log = std::fs::read_to_string(dir.join("server-1.log")).unwrap();
    // A stranger's connection: refused, a gap, an answered operation;
    // a connection past the limit; and a gap on a client's connection.
    log.push_str("2001 iodemo_open 00000000000000ff 127.0.9.9:1 tag 99 1\n");
    log.push_str("2002 iodemo_bad 00000000000000ff a connection that spoke both APIs\n");
    log.push_str("2003 iodemo_gap 00000000000000ff 5 9\n");
    log.push_str("2004 iodemo_bad - a connection from 127.0.9.9:2 past the limit\n");
    std::fs::write(dir.join("server-1.log"), &log).unwrap();
    let mut records = std::fs::read(dir.join("server-1.records")).unwrap();
    Record {
        session: 0xff,
        sn: 5,
        hash: 1,
    }
    .put(&mut records);
    std::fs::write(dir.join("server-1.records"), records).unwrap();
    let j = judge(&dir, &names(), &clients, 1, true).unwrap();
    assert!(j.failures.is_empty(), "{:?}", j.failures);
    assert_eq!(j.totals.stranger_lines, 3);
    assert_eq!(j.totals.stranger_answers, 1);
    // Without strangers the same lines fail the run.
    let j = judge(&dir, &names(), &clients, 1, false).unwrap();
    assert_eq!(j.failures.len(), 4, "{:?}", j.failures);
    // A client's own connection is judged either way.
    log.push_str(&format!("2005 iodemo_gap {CONN_B:016x} 5 7\n"));
    std::fs::write(dir.join("server-1.log"), &log).unwrap();
    let j = judge(&dir, &names(), &clients, 1, true).unwrap();
    assert!(
        j.failures.join("\n").contains("iodemo_gap"),
        "{:?}",
        j.failures
    );
    let _ = std::fs::remove_dir_all(&dir);
}
