//! Peers that write what is not an io_msg frame — a garbage header, a
//! header whose length is over the wire's limit — are disconnected with
//! an error that names the corrupt stream, while a well-behaved client on
//! the same server keeps being served.

mod common;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{reconcile, Record};
use iomsg_core::transport::DisconnectReason;
use iomsg_core::wire::{Body, Crc32c, IoMsg, HEADER_COVERED, HEADER_LEN, MAX_DATA_LEN};
use iomsg_core::workload::{fill, hash};
use iomsg_stream::{Addr, Client, ClientOptions, Server, ServerEvent, CORRUPT_STREAM};

const LIMIT: Duration = Duration::from_secs(30);
/// Where `data_len` sits in the header.
const DATA_LEN_AT: usize = 20;

/// A header that is nothing but text.
fn garbage() -> Vec<u8> {
    b"GET / HTTP/1.1\r\nHost: example\r\n\r\n and more bytes here"[..HEADER_LEN].to_vec()
}

/// A well-formed `Write` header whose `data_len` says 1 MiB + 1, with a
/// header CRC that matches: only the length is wrong.
fn oversized() -> Vec<u8> {
    let msg = IoMsg {
        session: 7,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Write { data: &[] },
    };
    let mut head = vec![0u8; HEADER_LEN];
    msg.emit(&mut head).expect("a header");
    head[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&(MAX_DATA_LEN + 1).to_le_bytes());
    let covered: &[u8; HEADER_COVERED] = head[..HEADER_COVERED].try_into().expect("44 bytes");
    let crc = Crc32c::BUILTIN.header(covered);
    head[HEADER_COVERED..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    head
}

/// Writes `bytes` as a raw peer and waits for the server to hang up.
fn hostile(addr: &Addr, bytes: &[u8]) {
    let Addr::Tcp(addr) = addr else {
        panic!("a TCP server")
    };
    let mut peer = TcpStream::connect(addr).expect("the raw peer connects");
    peer.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    peer.write_all(bytes).expect("the bytes go out");
    let mut buf = [0u8; 64];
    match peer.read(&mut buf) {
        Ok(0) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("the server did not hang up on the raw peer: {other:?}"),
    }
}

/// The corrupt-stream disconnects the server reported, with their texts.
fn corrupt_disconnects(record: &Record) -> Vec<&'static str> {
    record
        .events()
        .into_iter()
        .filter_map(|e| match e {
            ServerEvent::Disconnected {
                reason: DisconnectReason::Other(cause),
                ..
            } if cause.name == CORRUPT_STREAM => Some(cause.text),
            _ => None,
        })
        .collect()
}

#[test]
fn bad_peers_are_dropped_while_a_good_client_is_served() {
    let record = Record::default();
    let mut server =
        Server::bind("127.0.0.1:0", Default::default(), record.clone()).expect("the server binds");
    let addr = server.local_addr().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&stop);
    let serving = std::thread::spawn(move || {
        let started = Instant::now();
        server
            .run_until(|_| done.load(Ordering::Relaxed) || started.elapsed() > LIMIT)
            .expect("the server runs");
    });

    let mut client = Client::connect(&addr, ClientOptions::default()).expect("connects");
    let session = client.session_id();
    let mut sent = HashMap::new();
    let mut buf = vec![0u8; 1000];
    let mut send_some = |client: &mut Client, from: u64| {
        for i in from..from + 200 {
            fill(session, i, &mut buf);
            let sn = client.send(&buf).expect("send");
            sent.insert(sn, hash(&buf));
        }
        client.flush(LIMIT).expect("acknowledged");
    };
    send_some(&mut client, 0);
    hostile(&addr, &garbage());
    send_some(&mut client, 200);
    hostile(&addr, &oversized());
    send_some(&mut client, 400);
    let stats = *client.stats();
    client.close(Duration::from_secs(5)).expect("close");
    stop.store(true, Ordering::Relaxed);
    serving.join().expect("the server thread");

    reconcile(session, &sent, &[record.taken()]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stats.disconnects, 0, "the good client was never cut off");
    let dropped = corrupt_disconnects(&record);
    assert_eq!(
        dropped.len(),
        2,
        "both raw peers dropped as corrupt: {dropped:?}"
    );
    assert!(dropped[0].contains("bad magic"), "{}", dropped[0]);
    assert!(dropped[1].contains("1 MiB"), "{}", dropped[1]);
}
