// Exactly once across a crash of each side, through the application API:
// a server that keeps a journal is stopped without its last batch and a
// new one restored from what it kept; a client is dropped mid-stream and
// resumed from what its outbox (here the test's own record) kept. Judged
// from each instance's committed record of what its handler took.


use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use iomsg_core::workload;

/// What one server instance kept: its committed deliveries (session, sn,
/// hash) and journal records, each batch made durable at `flush`.
#[derive(Default)]
struct Durable {
    taken: Vec<(u64, u64, u64)>,
    journal: Vec<Vec<u8>>,
    pending: Vec<(u64, u64, u64)>,
    pending_journal: Vec<Vec<u8>>,
    /// Dies (stops, without another flush) once it committed this many.
    crash_after: Option<usize>,
    dead: bool,
}

impl ServerHandler for Durable {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.pending.push((d.session, d.sn, workload::hash(d.data)));
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn journal(&mut self, record: &[u8]) {
        self.pending_journal.push(record.to_vec());
    }
    fn flush(&mut self) -> Result<(), Unkept> {
        // One commit: the deliveries and the journal that covers them.
        self.taken.append(&mut self.pending);
        self.journal.append(&mut self.pending_journal);
        // Dead right after a commit: the replies it was about to send,
        // acknowledgements of what it just kept among them, never leave.
        self.dead = self.crash_after.is_some_and(|n| self.taken.len() >= n);
        Ok(())
    }
}

/// A journaled server on `addr`, restored from `journal`, serving on a
/// thread until `stop`, or until it dies after committing `crash_after`
/// messages. Returns what it committed.
fn serve(
    addr: Addr,
    journal: &[Vec<u8>],
    stop: Arc<AtomicBool>,
    crash_after: Option<usize>,
) -> (Addr, JoinHandle<Durable>) {
    let options = ServerOptions::default().journal(true);
    let handler = Durable {
        crash_after,
        ..Durable::default()
    };
    let mut server = Server::bind(addr, options, handler).unwrap();
    for r in journal {
        server.restore(r).unwrap();
    }
    let addr = server.local_addr();
    let thread = std::thread::spawn(move || {
        server
            .run_until(|h| h.dead || stop.load(Ordering::Relaxed))
            .unwrap();
        if !server.handler().dead {
            server.flush().expect("the handler keeps its batch");
        }
        let mut kept = server.into_handler();
        kept.pending.clear();
        kept.pending_journal.clear();
        kept
    });
    (addr, thread)
}

/// What the client's events showed: its acknowledgement point, and
/// whether a `Welcome` ever confirmed sns past it (sns a dead instance
/// kept without its acknowledgement getting out: the journal's case).
#[derive(Default)]
struct Watch {
    acked: u64,
    /// The acknowledgement point when the last connection was lost.
    at_loss: u64,
    confirmed_unacked: bool,
}

impl Watch {
    fn see(&mut self, client: &mut Client) {
        while let Some(e) = client.next_event() {
            match e {
                ClientEvent::Acked { upto } => self.acked = self.acked.max(upto),
                ClientEvent::Disconnected { .. } => self.at_loss = self.acked,
                // (The Welcome's own Acked comes just before.)
                ClientEvent::Established {
                    known: true,
                    resume_from,
                    ..
                } if resume_from > self.at_loss => self.confirmed_unacked = true,
                _ => {}
            }
        }
    }
}

/// Sends `n` pattern messages, remembering each one's bytes (the outbox)
/// and, apart from it, its hash (what the client submitted).
fn send(
    client: &mut Client,
    n: u64,
    outbox: &mut BTreeMap<u64, Vec<u8>>,
    sent: &mut BTreeMap<u64, u64>,
    watch: &mut Watch,
) {
    for i in 0..n {
        let len = [16, 700, 4096][(i % 3) as usize];
        let sn = client.next_sn();
        let mut data = vec![0u8; len];
        workload::fill(client.session_id(), sn, &mut data);
        assert_eq!(client.send(&data).unwrap(), sn);
        watch.see(client);
        sent.insert(sn, workload::hash(&data));
        outbox.insert(sn, data);
    }
}

#[test]
fn every_message_is_taken_exactly_once_across_a_server_crash_and_a_client_crash() {
    prepare();
    // Whether the dead instance's last acks got out is up to timing: run
    // until a restored instance confirmed sns whose acks died with its
    // predecessor (each run is judged in full either way).
    let exercised = (0..8).filter(|_| crash_both_sides()).take(2).count();
    assert!(exercised > 0, "no run lost the acks of committed sns");
}

/// One run; returns whether a restored server confirmed sns whose acks
/// died with its predecessor.
fn crash_both_sides() -> bool {
    let stop_a = Arc::new(AtomicBool::new(false));
    let (addr, a) = serve(
        any_addr(),
        &[],
        Arc::clone(&stop_a),
        Some(1500),
    );
    let options = || ClientOptions::default().retry_for(Duration::from_secs(20));
    let mut client = Client::connect(addr.clone(), options()).unwrap();
    let mut outbox = BTreeMap::new();
    let mut sent = BTreeMap::new();
    let mut watch = Watch::default();
    // Instance A dies right after a commit, before its replies (acks of
    // what it just kept among them) leave; B starts from its journal.
    let stop_b = Arc::new(AtomicBool::new(false));
    let restart = {
        let stop_b = Arc::clone(&stop_b);
        let addr = addr.clone();
        std::thread::spawn(move || {
            let a = a.join().unwrap();
            let (_, b) = serve(addr, &a.journal, stop_b, None);
            (a, b)
        })
    };
    send(&mut client, 3000, &mut outbox, &mut sent, &mut watch);
    let (a, b) = restart.join().unwrap();
    assert!(a.dead, "instance A died after committing 1,500 messages");
    assert!(!a.journal.is_empty(), "instance A kept a journal");
    drop(stop_a);
    send(&mut client, 2000, &mut outbox, &mut sent, &mut watch);

    // The client dies with messages unacknowledged; its outbox resumes it.
    let identity = client.identity();
    let point = client.resume_point();
    drop(client);
    watch.at_loss = watch.acked;
    outbox.retain(|&sn, _| sn >= point.base_sn);
    let held: Vec<Vec<u8>> = outbox.values().cloned().collect();
    let next = point.base_sn + held.len() as u64;
    let mut client = Client::resume(addr, options(), identity, point, &held).unwrap();
    assert_eq!(client.next_sn(), next, "held messages keep their sns");
    send(&mut client, 1000, &mut outbox, &mut sent, &mut watch);
    client.flush(Duration::from_secs(20)).unwrap();
    let total = client.next_sn();
    assert_eq!(client.acked_below(), total);
    client.close(Duration::from_secs(5)).unwrap();
    stop_b.store(true, Ordering::Relaxed);
    let b = b.join().unwrap();

    // Each sn once over both instances' committed records, its own bytes.
    let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
    for &(session, sn, hash) in a.taken.iter().chain(&b.taken) {
        assert_eq!(session, identity.0);
        assert_eq!(sent.get(&sn), Some(&hash), "sn {sn}: not the bytes sent");
        *seen.entry(sn).or_default() += 1;
    }
    let twice: Vec<u64> = seen
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(&sn, _)| sn)
        .collect();
    let missing: Vec<u64> = (0..total).filter(|sn| !seen.contains_key(sn)).collect();
    assert!(twice.is_empty(), "taken twice: {twice:?}");
    assert!(missing.is_empty(), "never taken: {missing:?}");
    assert_eq!(sent.len() as u64, total);
    watch.confirmed_unacked
}
