//! Messages of 1 B to 64 KiB over TCP on 127.0.0.1 and over a Unix socket:
//! every acknowledged message is in the server handler's own record with
//! the same bytes, none twice.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{reconcile, Record, TempDir, SIZES};
use iomsg_core::workload::{fill, hash};
use iomsg_stream::{Addr, Client, ClientOptions, Server, ServerOptions};

const MESSAGES: u64 = 600;
const LIMIT: Duration = Duration::from_secs(30);

/// Serves `addr` on a thread until told to stop (or `LIMIT` passed);
/// returns the address it listens on, its record and the stop switch.
fn serve(addr: &str) -> (Addr, Record, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let record = Record::default();
    let mut server =
        Server::bind(addr, ServerOptions::default(), record.clone()).expect("the server binds");
    let local = server.local_addr().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        server
            .run_until(|_| done.load(Ordering::Relaxed) || started.elapsed() > LIMIT)
            .expect("the server runs");
    });
    (local, record, stop, thread)
}

/// Sends `MESSAGES` messages of every size in turn, waits for every ack,
/// closes; returns the session and what was sent (sn -> hash).
fn send_all(addr: &Addr) -> (u64, HashMap<u64, u64>) {
    let mut client = Client::connect(addr, ClientOptions::default()).expect("the client connects");
    let session = client.session_id();
    let mut sent = HashMap::new();
    let mut buf = Vec::new();
    for i in 0..MESSAGES {
        buf.resize(SIZES[i as usize % SIZES.len()], 0);
        fill(session, i, &mut buf);
        let sn = client.send(&buf).expect("send");
        assert_eq!(sn, i);
        sent.insert(sn, hash(&buf));
    }
    client.flush(LIMIT).expect("every message acknowledged");
    assert_eq!(client.acked_below(), MESSAGES);
    client.close(Duration::from_secs(5)).expect("close");
    (session, sent)
}

fn roundtrip(addr: &str) {
    let (local, record, stop, thread) = serve(addr);
    let (session, sent) = send_all(&local);
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("the server thread");
    let across = reconcile(session, &sent, &[record.taken()]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(across, 0, "one instance, so no copies across instances");
}

#[test]
fn tcp_every_acked_message_is_on_record_with_its_bytes() {
    roundtrip("127.0.0.1:0");
}

#[test]
fn unix_every_acked_message_is_on_record_with_its_bytes() {
    let dir = TempDir::new("roundtrip");
    let path = dir.0.join("server.sock");
    roundtrip(&format!("unix:{}", path.display()));
    assert!(!path.exists(), "the server removes its socket file");
}

#[test]
fn both_endpoints_are_send() {
    fn send<T: Send>() {}
    send::<Client>();
    send::<Server<Record>>();
}
