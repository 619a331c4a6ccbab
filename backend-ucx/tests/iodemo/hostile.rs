//! Raw peers that break io_demo's protocol, each on a connection of its
//! own, while a real io_demo client is served on another: every break is
//! named in an event ([`IoDemoEvent::Refused`], [`IoDemoEvent::Late`], or
//! a [`IoDemoEvent::Closed`] listing what was left unanswered), and the
//! real client completes every operation it asked for.

use std::time::Duration;

use iomsg_core::iodemo::{self as wire, IoDemoMsg, Op};
use iomsg_ucx::hostile::iodemo_peer::IoDemoPeer;
use iomsg_ucx::iodemo::{IoDemoEvent, IoDemoOptions, ID_DEADLINE};
use iomsg_ucx_sys as sys;

use crate::support::{self, assert_client_ok, completed, Client, ServerThread};

/// How long each step may take.
const STEP: Duration = Duration::from_secs(5);

/// The server's limit on one operation's data in this test.
const MAX_DATA: u64 = 1 << 20;
/// The server's share of bytes in flight per connection in this test.
const PER_CONN: u64 = 8 << 20;

/// An io message of `len` bytes (the header cut short below 21) with op
/// byte `op`, padded with io_demo's pattern.
fn msg(conn_id: u64, data_size: u64, sn: u32, op: u8, len: usize) -> Vec<u8> {
    let mut m = vec![0; len.max(wire::HEADER_LEN)];
    let h = IoDemoMsg {
        conn_id,
        data_size,
        sn,
        op: Op::Read,
    };
    h.encode(&mut m);
    m[20] = op;
    m.truncate(len);
    m
}

/// A tag peer that did io_demo's id exchange: the peer, the server's id
/// for it and the connection's key from the server's `Opened` event.
fn tag_peer(server: &mut ServerThread, our_id: u32) -> (IoDemoPeer, u32, u64) {
    let mut peer = IoDemoPeer::connect(server.addr, false).expect("a raw tag peer connects");
    // As io_demo's client does: our id goes out at once; the server
    // answers with its own once ours came.
    peer.send_id(our_id).expect("our id goes out");
    let sid = peer.recv_id(STEP).expect("the server sends its id");
    let opened = server.wait_for(
        STEP,
        |e| matches!(e, IoDemoEvent::Opened { tag: Some(true), ours, .. } if *ours == sid),
    );
    let Some(IoDemoEvent::Opened { conn, theirs, .. }) = opened else {
        panic!("no Opened event for the raw peer the server calls {sid}");
    };
    assert_eq!(theirs, u64::from(our_id), "the server read our id");
    (peer, sid, conn)
}

/// A new tag peer with id `id` does io_demo's id exchange and reads
/// (sn `sn`, no data): the server answers it.
fn read_is_answered(server: &mut ServerThread, id: u32, sn: u32) {
    let (mut p, sid, _) = tag_peer(server, id);
    p.send_tag(wire::iomsg_tag(sid), msg(u64::from(id), 0, sn, 0, 256))
        .expect("sent");
    let (_, done) = p
        .recv_tag(wire::data_tag(id, sn), u64::MAX, 4096, STEP)
        .expect("the read is answered");
    let done = IoDemoMsg::decode(&done).expect("an io message");
    assert_eq!((done.op, done.sn), (Op::ReadDone, sn));
}

/// Waits for a `Refused` naming `conn` (any connection when `None`)
/// whose reason holds `text`; returns the connection it names.
fn refused(server: &mut ServerThread, conn: Option<u64>, text: &str, real: u64) -> Option<u64> {
    let got = server.wait_for(STEP, |e| match e {
        IoDemoEvent::Refused { conn: c, reason } => {
            reason.contains(text) && (conn.is_none() || *c == conn)
        }
        _ => false,
    });
    let Some(IoDemoEvent::Refused { conn: c, reason }) = got else {
        panic!(
            "no Refused event saying {text:?} (for {conn:?}); seen: {:?}",
            server.seen
        );
    };
    assert_ne!(
        c,
        Some(real),
        "the real client's connection was refused: {reason}"
    );
    c
}

/// Tag peers that send what io_demo never would.
fn bad_tag_messages(server: &mut ServerThread, real: u64) {
    // The header cut short.
    let (mut p, sid, conn) = tag_peer(server, 11);
    p.send_tag(wire::iomsg_tag(sid), msg(11, 0, 1, 0, 20))
        .expect("sent");
    refused(server, Some(conn), "of 20 bytes", real);
    // A data size past the server's limit.
    let (mut p, sid, conn) = tag_peer(server, 12);
    p.send_tag(wire::iomsg_tag(sid), msg(12, MAX_DATA + 1, 1, 1, 256))
        .expect("sent");
    refused(server, Some(conn), "past the server's limit", real);
    // Op codes that are no request: unknown (7), and the server's own
    // answers (2, 3).
    for (op, text) in [(7, "op code 7"), (2, "read-done"), (3, "write-done")] {
        let (mut p, sid, conn) = tag_peer(server, 13);
        p.send_tag(wire::iomsg_tag(sid), msg(13, 8, 1, op, 256))
            .expect("sent");
        refused(server, Some(conn), text, real);
    }
}

/// A peer that asks for reads and never takes the answers (its worker
/// is never progressed again): refused once its answers fill its share
/// of the bytes in flight, before they take the others' room.
fn stalled_reader(server: &mut ServerThread, real: u64) {
    let (mut p, sid, conn) = tag_peer(server, 15);
    for sn in 0..(PER_CONN / MAX_DATA + 4) as u32 {
        p.send_tag(wire::iomsg_tag(sid), msg(15, MAX_DATA, sn, 0, 256))
            .expect("sent");
    }
    refused(server, Some(conn), "does not take its answers", real);
    drop(p);
}

/// An io message whose tag names a connection id the server never gave.
fn unknown_connection(server: &mut ServerThread) {
    let (mut p, sid, _) = tag_peer(server, 14);
    let wrong = (sid ^ 0x2000_0000) & 0x7fff_ffff;
    p.send_tag(wire::iomsg_tag(wrong), msg(14, 8, 77, 0, 256))
        .expect("sent");
    let late = server.wait_for(
        STEP,
        |e| matches!(e, IoDemoEvent::Late { id, .. } if *id == wrong),
    );
    assert_eq!(
        late,
        Some(IoDemoEvent::Late {
            id: wrong,
            conn: None,
            sn: Some(77)
        })
    );
}

/// A write whose data never comes: the client dies first. A read sent
/// after it is answered, so the write had arrived.
fn write_then_die(server: &mut ServerThread) {
    let our = 16;
    let (mut p, sid, conn) = tag_peer(server, our);
    p.send_tag(wire::iomsg_tag(sid), msg(u64::from(our), 4096, 100, 1, 256))
        .expect("the write's io message goes");
    p.send_tag(wire::iomsg_tag(sid), msg(u64::from(our), 0, 101, 0, 256))
        .expect("the read's io message goes");
    let (tag, done) = p
        .recv_tag(wire::data_tag(our, 101), u64::MAX, 4096, STEP)
        .expect("the read is answered");
    assert_eq!(tag, wire::data_tag(our, 101));
    let done = IoDemoMsg::decode(&done).expect("an io message");
    assert_eq!((done.op, done.sn), (Op::ReadDone, 101));
    p.close_abruptly();
    let closed = server.wait_for(
        STEP * 2,
        |e| matches!(e, IoDemoEvent::Closed { conn: c, .. } if *c == conn),
    );
    let Some(IoDemoEvent::Closed { in_flight, .. }) = closed else {
        panic!("the dead client's connection was not closed");
    };
    assert_eq!(in_flight, vec![(Op::Write, 100)]);
}

/// Active-message peers with a short header, an unknown op, and a data
/// size past the limit.
fn bad_active_messages(server: &mut ServerThread, real: u64) {
    let cases: [(usize, u8, u64, &str); 3] = [
        (20, 0, 8, "of 20 bytes"),
        (256, 7, 8, "op code 7"),
        (256, 1, MAX_DATA + 1, "past the server's limit"),
    ];
    for (len, op, size, text) in cases {
        let mut p = IoDemoPeer::connect(server.addr, true).expect("a raw AM peer connects");
        let header = msg(p.endpoint_id(), size, 1, op, len);
        p.send_am(header, vec![0; 8]).expect("sent");
        assert!(p.flush(STEP), "the active message went out");
        let conn = refused(server, None, text, real);
        assert!(conn.is_some(), "the refusal names the connection");
    }
}

#[test]
fn protocol_breakers_are_named_while_a_real_client_is_served() {
    let Some(bin) = support::io_demo() else {
        eprintln!("skipped: io_demo is not on PATH (Debian's ucx-utils has it)");
        return;
    };
    let opts = IoDemoOptions {
        max_data: MAX_DATA,
        max_bytes_per_conn: PER_CONN,
        ..IoDemoOptions::default()
    };
    let mut server = ServerThread::start(opts);
    let iters: u64 = 6000;
    let it = iters.to_string();
    let args = ["-q", "-o", "read,write", "-d", "1000:20000", "-i", &it];
    let mut client = Client::spawn(&bin, &args, server.addr, "beside-hostile");
    let Some(IoDemoEvent::Opened { conn: real, .. }) =
        server.wait_for(STEP, |e| matches!(e, IoDemoEvent::Opened { .. }))
    else {
        panic!("io_demo's connection did not open");
    };
    bad_tag_messages(&mut server, real);
    stalled_reader(&mut server, real);
    unknown_connection(&mut server);
    write_then_die(&mut server);
    bad_active_messages(&mut server, real);
    let running = client.running();
    let (code, log) = client.finish(Duration::from_secs(25));
    assert_client_ok(code, &log);
    let (reads, writes) = completed(&log);
    assert_eq!(
        reads + writes,
        iters,
        "io_demo's own count; its log:\n{log}"
    );
    let closed = server.wait_for(
        STEP * 2,
        |e| matches!(e, IoDemoEvent::Closed { conn, .. } if *conn == real),
    );
    assert!(closed.is_some(), "the real client's connection closed");
    let events = server.stop();
    let mut answered = (0, 0);
    for e in &events {
        match e {
            IoDemoEvent::Answered { conn, op, .. } if *conn == real => match op {
                Op::Read => answered.0 += 1,
                _ => answered.1 += 1,
            },
            IoDemoEvent::Gap { conn, .. }
            | IoDemoEvent::Duplicate { conn, .. }
            | IoDemoEvent::Corrupt { conn, .. }
                if *conn == real =>
            {
                panic!("the real client's connection: {e:?}")
            }
            IoDemoEvent::Closed {
                conn, in_flight, ..
            } if *conn == real => assert!(in_flight.is_empty(), "{in_flight:?}"),
            _ => {}
        }
    }
    assert_eq!(
        answered,
        (reads, writes),
        "server (reads, writes) vs io_demo's"
    );
    if !running {
        eprintln!("note: io_demo finished before the raw peers were done");
    }
}

/// The entries a peer reaches before it has proved anything, each of which
/// once let one peer crash the server or make it hold memory for good:
/// active messages on ids past UCX's handler table, stream bytes after the
/// id, connections that never show their API, and a rendezvous write whose
/// payload is larger than its io message says. Each ends in a named
/// refusal or a close, and the server goes on serving.
#[test]
fn a_peer_before_it_proved_anything_is_bounded() {
    let mut server = ServerThread::start(IoDemoOptions::default());
    // Active messages on ids nobody registered (UCX 1.13.1 read its table
    // past its end at 16,384 and up), with and without the reply flag.
    let mut p = IoDemoPeer::connect(server.addr, true).expect("a raw AM peer connects");
    for (k, id) in [1u32, 8192, 16384, 32768, 65535].into_iter().enumerate() {
        let flags = if k % 2 == 0 {
            sys::UCP_AM_SEND_FLAG_REPLY
        } else {
            0
        };
        p.send_am_raw(id, flags, vec![7; 8], vec![1; 64])
            .expect("sent");
    }
    assert!(p.flush(STEP), "the active messages went out");
    p.close_abruptly();
    // Bytes on the stream after the id.
    let (mut p, _, conn) = tag_peer(&mut server, 21);
    // The server refuses at the first bytes and closes the connection:
    // the rest of the send may fail (seen under load), and the refusal
    // below is what counts.
    let _ = p.send_stream(vec![0xee; 1 << 20]);
    p.progress_for(Duration::from_millis(50));
    refused(
        &mut server,
        Some(conn),
        "on the stream after the connection id",
        0,
    );
    // A rendezvous write carrying more than its io message says.
    let mut p = IoDemoPeer::connect(server.addr, true).expect("a raw AM peer connects");
    let header = msg(p.endpoint_id(), 8, 1, 1, 256);
    let flags = sys::UCP_AM_SEND_FLAG_REPLY | sys::UCP_AM_SEND_FLAG_RNDV;
    p.send_am_raw(wire::AM_ID, flags, header, vec![0; 4 << 20])
        .expect("sent");
    p.flush(STEP);
    refused(&mut server, None, "its active message carries", 0);
    drop(p);
    // Connections that never send their id (tag) or anything (AM): all
    // closed by the id deadline.
    let mut silent: Vec<IoDemoPeer> = (0..100)
        .map(|k| IoDemoPeer::connect(server.addr, k % 10 == 0).expect("a raw peer connects"))
        .collect();
    let mut closed = 0;
    let deadline = std::time::Instant::now() + ID_DEADLINE + STEP;
    while closed < silent.len() && std::time::Instant::now() < deadline {
        // Their workers progressed (their connections open), nothing sent.
        for p in &mut silent {
            p.progress_for(Duration::from_micros(200));
        }
        let got = server.wait_for(Duration::from_millis(20), |e| {
            matches!(e, IoDemoEvent::Refused { reason, .. } if reason.contains("no connection id"))
        });
        if got.is_some() {
            closed += 1;
        }
    }
    assert_eq!(
        closed,
        silent.len(),
        "silent connections closed by the deadline"
    );
    drop(silent);
    // Still serving: a well-behaved tag peer's read is answered.
    read_is_answered(&mut server, 22, 5);
    server.stop();
}

/// Sockets UCX's event table held by default (`ASYNC_MAX_EVENTS`): past
/// it, UCX 1.13.1's listener freed a connection it kept on its list, and
/// the list's next use corrupted memory (sockets closed twice, an abort).
const UCX_DEFAULT_EVENTS: usize = 1024;
/// The table the server once asked for (four times UCX's default).
const OLD_TABLE: usize = 4 * UCX_DEFAULT_EVENTS;

/// Plain TCP connections to the listener that never speak UCX's
/// connection protocol, more than the server's event table once held:
/// the table is sized from the open-file limit, so every one that can be
/// accepted is watched, and the server goes on serving and stops clean.
#[test]
fn more_raw_sockets_than_the_old_event_table_leave_the_server_whole() {
    let want = OLD_TABLE + 300;
    // Each connection costs two descriptors here: ours and the server's.
    let limit = iomsg_ucx::raise_open_files(2 * want as u64 + 512);
    if limit < 2 * want as u64 + 256 {
        eprintln!(
            "skipped: the open-file limit stops at {limit}, below {}",
            2 * want
        );
        return;
    }
    let mut server = ServerThread::start(IoDemoOptions::default());
    let mut raw = Vec::with_capacity(want);
    for _ in 0..want {
        match std::net::TcpStream::connect(server.addr) {
            Ok(s) => raw.push(s),
            Err(e) => panic!("raw connection {} of {want}: {e}", raw.len() + 1),
        }
    }
    // UCX accepts them on its own thread; give it time to watch them all.
    std::thread::sleep(Duration::from_secs(1));
    read_is_answered(&mut server, 23, 9);
    drop(raw);
    std::thread::sleep(Duration::from_millis(500));
    // Its worker is destroyed with every socket UCX watched: a corrupted
    // list aborts here.
    server.stop();
}
