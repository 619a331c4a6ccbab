//! The transport on its own: `arm` says `Armed` only with nothing pending,
//! `sleep` blocks on the sockets until one has something, the send buffer
//! is bounded, and connections past the bound are refused, saying why.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant as Wall};

use iomsg_core::transport::{Event, Readiness, RxToken, SendError, Transport, TxToken};
use iomsg_core::wire::{Body, IoMsg, RejectReason};
use iomsg_core::Instant;
use iomsg_stream::{Accept, Addr, StreamConfig, StreamTransport};

const LIMIT: Duration = Duration::from_secs(10);

fn server(config: StreamConfig) -> (StreamTransport<Accept>, std::net::SocketAddr) {
    let t =
        StreamTransport::server(&"127.0.0.1:0".parse().expect("addr"), config).expect("listens");
    let Ok(Addr::Tcp(addr)) = t.local_addr() else {
        panic!("a TCP address")
    };
    (t, addr)
}

fn config(max_connections: usize, send_buffer: usize) -> StreamConfig {
    let mut c = StreamConfig::default();
    c.max_connections = max_connections;
    c.send_buffer = send_buffer;
    c
}

/// A `Write` frame carrying `data`.
fn frame(data: &[u8]) -> Vec<u8> {
    let msg = IoMsg {
        session: 1,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Write { data },
    };
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf).expect("emits");
    buf
}

/// What the next events are, as text, polling (and sleeping on the
/// sockets) until `want` of them came or `LIMIT` passed.
fn next_events(t: &mut StreamTransport<Accept>, want: usize) -> Vec<String> {
    let started = Wall::now();
    let mut seen = Vec::new();
    while seen.len() < want && started.elapsed() < LIMIT {
        match t.poll(Instant::ZERO) {
            Some(Event::Accepted { conn }) => seen.push(format!("accepted {conn}")),
            Some(Event::Received { frame, .. }) => {
                seen.push(format!("received {} bytes", frame.consume(<[u8]>::len)));
            }
            Some(Event::Disconnected { reason, .. }) => seen.push(format!("gone: {reason}")),
            Some(_) => seen.push("other".into()),
            None => {
                if t.arm() == Readiness::Armed {
                    t.sleep(Duration::from_millis(50)).expect("sleeps");
                }
            }
        }
    }
    seen
}

/// Polls until nothing is left.
fn drain(t: &mut StreamTransport<Accept>) {
    for _ in 0..1000 {
        if t.poll(Instant::ZERO).is_none() {
            return;
        }
    }
    panic!("the transport never ran dry");
}

#[test]
fn armed_only_when_idle_and_the_sleep_wakes_for_data() {
    let (mut t, addr) = server(StreamConfig::default());
    let mut peer = TcpStream::connect(addr).expect("connects");
    let accepted = next_events(&mut t, 1);
    assert!(accepted[0].starts_with("accepted"), "{accepted:?}");
    drain(&mut t);
    assert_eq!(t.arm(), Readiness::Armed, "nothing pending");

    // An idle sleep lasts its timeout.
    let started = Wall::now();
    assert!(!t.sleep(Duration::from_millis(300)).expect("sleeps"));
    assert!(started.elapsed() >= Duration::from_millis(250), "it slept");

    // A frame that arrives during a sleep ends it.
    let bytes = frame(b"hello");
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        peer.write_all(&bytes).expect("written");
        peer
    });
    let started = Wall::now();
    assert!(
        t.sleep(Duration::from_secs(5)).expect("sleeps"),
        "woken by the socket"
    );
    let woke = started.elapsed();
    assert!(woke < Duration::from_secs(2), "woke after {woke:?}");
    assert_eq!(t.arm(), Readiness::Pending, "a frame waits");
    assert_eq!(next_events(&mut t, 1), ["received 53 bytes"]);
    drain(&mut t);
    assert_eq!(t.arm(), Readiness::Armed);
    drop(writer.join().expect("writer"));
}

#[test]
fn the_send_buffer_is_bounded_and_drains_when_the_peer_reads() {
    let (mut t, addr) = server(config(8, 64 * 1024));
    let mut peer = TcpStream::connect(addr).expect("connects");
    let started = Wall::now();
    let conn = loop {
        if let Some(Event::Accepted { conn }) = t.poll(Instant::ZERO) {
            break conn;
        }
        assert!(started.elapsed() < LIMIT, "no connection accepted");
        std::thread::sleep(Duration::from_millis(1));
    };
    // The peer reads nothing: the kernel's buffers fill, then ours.
    let mut frames = 0u32;
    let blocked = loop {
        match t.transmit(Instant::ZERO, conn, 16 * 1024) {
            Ok(tx) => tx.consume(|buf| buf.fill(7)),
            Err(e) => break e,
        }
        frames += 1;
        let _ = t.poll(Instant::ZERO);
        assert!(
            frames < 100_000,
            "never refused: the send buffer is not bounded"
        );
    };
    assert_eq!(blocked, SendError::WouldBlock);
    // Armed once the kernel takes nothing more: it waits for the socket.
    let mut armed = false;
    for _ in 0..1000 {
        if t.arm() == Readiness::Armed {
            armed = true;
            break;
        }
        let _ = t.poll(Instant::ZERO);
    }
    assert!(armed, "never armed while the peer reads nothing");

    // The peer reads: the socket wakes the sleeper, the buffer drains.
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        peer.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        while let Ok(n @ 1..) = peer.read(&mut buf) {
            total += n;
        }
        total
    });
    assert!(
        t.sleep(Duration::from_secs(5)).expect("sleeps"),
        "woken: writable"
    );
    let started = Wall::now();
    while t.transmit(Instant::ZERO, conn, 16).is_err() {
        assert!(started.elapsed() < LIMIT, "the send buffer never drained");
        if t.arm() == Readiness::Armed {
            t.sleep(Duration::from_millis(50)).expect("sleeps");
        }
    }
    drop(t);
    let total = reader.join().expect("reader");
    assert!(
        total >= frames as usize * 16 * 1024,
        "read {total} of {frames} frames"
    );
}

#[test]
fn connections_past_the_bound_are_refused() {
    let (mut t, addr) = server(config(2, 1 << 16));
    let first = TcpStream::connect(addr).expect("first");
    let second = TcpStream::connect(addr).expect("second");
    let events = next_events(&mut t, 2);
    assert_eq!(events.len(), 2, "{events:?}");
    let mut third = TcpStream::connect(addr).expect("the kernel accepts it");
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let started = Wall::now();
    while t.refused() == 0 {
        assert!(
            started.elapsed() < LIMIT,
            "the third connection was never refused"
        );
        let _ = t.poll(Instant::ZERO);
        std::thread::sleep(Duration::from_millis(1));
    }
    // Told why, then closed: a Reject addressed to no session, which the
    // client takes as its connection's.
    let mut told = Vec::new();
    let ended = Wall::now();
    loop {
        let _ = t.poll(Instant::ZERO);
        let mut buf = [0u8; 256];
        match third.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => told.extend_from_slice(&buf[..n]),
            Err(e) => panic!("{e} after {} bytes", told.len()),
        }
        assert!(ended.elapsed() < LIMIT, "never closed");
    }
    let reject = iomsg_core::wire::parse(&told).expect("one whole frame");
    assert_eq!((reject.session, reject.epoch), (0, 0));
    assert_eq!(
        reject.body,
        Body::Reject {
            reason: RejectReason::SessionTableFull,
            detail: 2
        }
    );
    assert_eq!(t.connections(), 2);
    drop((first, second));
}
