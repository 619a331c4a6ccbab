//! A close races nothing: frames written before it reach the peer
//! before the peer learns of it, whichever end closes.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use super::*;
use iomsg_core::wire::{Body, IoMsg};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener};

/// Bytes of data in the frames a server sends.
const DATA: usize = 16 * 1024;

fn now() -> Instant {
    Instant::from_micros(0)
}

/// Frame `sn` (a `Write` of `len` bytes), emitted.
fn frame(sn: u64, len: usize) -> Vec<u8> {
    let data = vec![7u8; len];
    let msg = IoMsg {
        session: 1,
        epoch: 1,
        sn,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Write { data: &data },
    };
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf).unwrap();
    buf
}

/// The sn of a received frame.
fn sn_of(bytes: &[u8]) -> u64 {
    iomsg_core::wire::parse(bytes).unwrap().sn
}

/// What a poll said, owned.
#[derive(Debug)]
enum Seen {
    Up(ConnId),
    Frame(u64),
    Gone(DisconnectReason),
}

fn poll<R: Role>(t: &mut StreamTransport<R>) -> Option<Seen> {
    match t.poll(now())? {
        Event::Connected { conn } | Event::Accepted { conn } => Some(Seen::Up(conn)),
        Event::Received { frame, .. } => Some(Seen::Frame(frame.consume(sn_of))),
        Event::Disconnected { reason, .. } => Some(Seen::Gone(reason)),
        _ => None,
    }
}

/// Sends frame `sn` on `conn`, or says it would block.
fn send<R: Role>(t: &mut StreamTransport<R>, conn: ConnId, sn: u64) -> bool {
    let bytes = frame(sn, DATA);
    match t.transmit(now(), conn, bytes.len()) {
        Ok(tx) => {
            tx.consume(|b| b.copy_from_slice(&bytes));
            true
        }
        Err(SendError::WouldBlock) => false,
        Err(e) => panic!("{e:?}"),
    }
}

/// Polls `t` until it reports a connection up: its id.
fn wait_up<R: Role>(t: &mut StreamTransport<R>) -> ConnId {
    let started = Wall::now();
    while started.elapsed() < Duration::from_secs(5) {
        if let Some(Seen::Up(id)) = poll(t) {
            return id;
        }
    }
    panic!("no connection came up");
}

/// Polls `client` (and `server`, when there is one) until the client's
/// connection is gone; the sns it received, and how it ended.
fn drain(
    client: &mut StreamTransport<Dial>,
    mut server: Option<&mut StreamTransport<Accept>>,
) -> (Vec<u64>, Option<DisconnectReason>) {
    let mut sns = Vec::new();
    let started = Wall::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Some(s) = server.as_deref_mut() {
            while poll(s).is_some() {}
        }
        match poll(client) {
            Some(Seen::Frame(sn)) => sns.push(sn),
            Some(Seen::Gone(reason)) => return (sns, Some(reason)),
            _ => {}
        }
    }
    (sns, None)
}

#[test]
fn a_server_that_closes_with_input_unread_still_delivers_what_it_wrote() {
    let addr = Addr::Tcp("127.0.0.1:0".parse().unwrap());
    let mut server = StreamTransport::server(&addr, StreamConfig::default()).unwrap();
    let addr = server.local_addr().unwrap();
    let mut client = StreamTransport::client(addr, StreamConfig::default()).unwrap();
    let cid = client.connect(now()).unwrap();
    let sid = wait_up(&mut server);
    wait_up(&mut client);
    // The server writes until the sockets hold all they take (the
    // client does not read meanwhile) ...
    let mut sent = 0;
    let mut stalled = 0;
    while stalled < 50 {
        if send(&mut server, sid, sent) {
            sent += 1;
            stalled = 0;
        } else {
            stalled += 1;
            while poll(&mut server).is_some() {}
        }
    }
    // ... the client writes a frame the server will never read ...
    assert!(send(&mut client, cid, 0));
    // (`arm` writes without reading.)
    let _ = client.arm();
    std::thread::sleep(Duration::from_millis(20));
    // ... and the server closes (as after a `Reject` or a `Bye`).
    server.close(now(), sid);
    let (sns, end) = drain(&mut client, Some(&mut server));
    assert_eq!(sns.len() as u64, sent, "{end:?}");
    assert!(sns.iter().copied().eq(0..sent));
    assert_eq!(end, Some(DisconnectReason::PeerClosed));
}

#[test]
fn an_end_that_comes_with_the_last_frame_is_seen() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let at: SocketAddr = listener.local_addr().unwrap();
    let mut client = StreamTransport::client(Addr::Tcp(at), StreamConfig::default()).unwrap();
    client.connect(now()).unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    wait_up(&mut client);
    // The frame and the peer's end arrive before the client reads:
    // one edge for both, and a short read.
    peer.write_all(&frame(0, 1024)).unwrap();
    drop(peer);
    std::thread::sleep(Duration::from_millis(20));
    let (sns, end) = drain(&mut client, None);
    assert_eq!(sns, [0]);
    assert_eq!(end, Some(DisconnectReason::PeerClosed));
}

#[test]
fn a_client_whose_write_fails_still_delivers_what_arrived_before() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let at: SocketAddr = listener.local_addr().unwrap();
    let mut client = StreamTransport::client(Addr::Tcp(at), StreamConfig::default()).unwrap();
    let cid = client.connect(now()).unwrap();
    let (mut peer, _) = listener.accept().unwrap();
    wait_up(&mut client);
    // The client writes a frame the peer never reads ...
    assert!(send(&mut client, cid, 0));
    while poll(&mut client).is_some() {}
    // ... the peer writes frames (small: its kernel sends them all at
    // once) and closes with that frame unread: its kernel resets the
    // connection.
    for sn in 0..4 {
        peer.write_all(&frame(sn, 1024)).unwrap();
    }
    let mut nothing = [0u8; 1];
    assert!(peer.read(&mut nothing).is_ok_and(|n| n == 1));
    std::thread::sleep(Duration::from_millis(20));
    drop(peer);
    std::thread::sleep(Duration::from_millis(20));
    // The client's next write fails; what arrived before is handed over.
    assert!(send(&mut client, cid, 1));
    let (sns, end) = drain(&mut client, None);
    assert_eq!(sns, [0, 1, 2, 3], "{end:?}");
    assert!(
        matches!(end, Some(DisconnectReason::PeerFailed(_))),
        "{end:?}"
    );
}
