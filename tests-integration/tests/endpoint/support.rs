// One run of a client against server instances that restart, and what
// each instance took: shared by the observer tests of every backend.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use iomsg_core::workload;

/// What one server instance's application took and heard.
#[derive(Default, Debug)]
pub struct Taken {
    /// (session, sn) -> hash of the bytes.
    pub messages: BTreeMap<(u64, u64), u64>,
    /// `SessionOpened` events its handler heard.
    pub opened: u64,
    /// `Rejected` events its handler heard.
    pub rejected: u64,
}

impl ServerHandler for Taken {
    fn deliver(&mut self, d: Delivery<'_>) {
        let first = self
            .messages
            .insert((d.session, d.sn), workload::hash(d.data));
        assert!(first.is_none(), "sn {} taken twice by one instance", d.sn);
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn event(&mut self, event: ServerEvent) {
        match event {
            ServerEvent::SessionOpened { .. } => self.opened += 1,
            ServerEvent::Rejected { .. } => self.rejected += 1,
            _ => {}
        }
    }
}

/// Tells a server thread to stop, or to stop polling for a while.
#[derive(Default)]
pub struct Control {
    stop: AtomicBool,
    pause: AtomicBool,
    parked: AtomicBool,
}

impl Control {
    /// Stops the server from polling, and waits until it stopped.
    fn park(&self) {
        self.pause.store(true, Ordering::SeqCst);
        let started = std::time::Instant::now();
        while !self.parked.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(10), "no park");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Asked between the server's waits: parks while paused, then
    /// says whether to stop.
    fn done(&self) -> bool {
        let started = std::time::Instant::now();
        while self.pause.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(30) {
            self.parked.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1));
        }
        self.parked.store(false, Ordering::SeqCst);
        self.stop.load(Ordering::SeqCst)
    }
}

/// A server on a thread of its own until `control` stops it; returns
/// its record.
pub fn serve(
    addr: Addr,
    control: Arc<Control>,
) -> (Addr, std::thread::JoinHandle<Taken>) {
    let mut server = Server::bind(addr, ServerOptions::default(), Taken::default()).unwrap();
    let addr = server.local_addr();
    let thread = std::thread::spawn(move || {
        server.run_until(|_| control.done()).unwrap();
        server.into_handler()
    });
    (addr, thread)
}

/// What a run sent, and how each sn ended for the client.
pub struct Run {
    /// The client's session.
    pub session: u64,
    /// sn -> hash of what was sent.
    pub sent: BTreeMap<u64, u64>,
    /// What each server instance took, in order.
    pub instances: Vec<Taken>,
    /// Sns the client says are acknowledged.
    pub acked: u64,
    /// Given-up ranges the client reported, one entry per sn.
    pub lost: BTreeMap<u64, std::ops::Range<u64>>,
    /// Handshakes the client completed (its own count).
    pub established: u64,
}

impl Run {
    /// Sns at least one server instance took.
    pub fn taken_by_any(&self) -> usize {
        self.sent
            .keys()
            .filter(|&&sn| self.taken_by(sn) > 0)
            .count()
    }

    /// How many server instances took `sn`.
    pub fn taken_by(&self, sn: u64) -> usize {
        self.instances
            .iter()
            .filter(|t| t.messages.contains_key(&(self.session, sn)))
            .count()
    }

    /// Messages all instances' handlers took together.
    pub fn delivered(&self) -> u64 {
        self.instances.iter().map(|t| t.messages.len() as u64).sum()
    }
}

/// Messages sent to a parked server right before it goes away: none
/// is taken by it, all are in flight at the disconnect.
pub const IN_FLIGHT: u64 = 100;

/// Sends `rounds` × `per_round` messages of 512 bytes; after each
/// round but the last the server stops polling, takes [`IN_FLIGHT`]
/// more messages it never reads, and goes away; a new instance takes
/// its port. Then flushes and closes.
pub fn run(options: ClientOptions, rounds: usize, per_round: u64) -> Run {
    let control = Arc::new(Control::default());
    let (addr, mut thread) = serve(any_addr(), Arc::clone(&control));
    let mut client = Client::connect(addr.clone(), options).unwrap();
    let session = client.session_id();
    let mut sent = BTreeMap::new();
    let mut instances = Vec::new();
    let mut buf = [0u8; 512];
    let mut send = |client: &mut Client, n: u64| {
        for _ in 0..n {
            let sn = client.next_sn();
            workload::fill(session, sn, &mut buf);
            assert_eq!(client.send(&buf).unwrap(), sn);
            sent.insert(sn, workload::hash(&buf));
        }
    };
    for round in 0..rounds {
        send(&mut client, per_round);
        if round + 1 < rounds {
            // Room in the window for what the parked server will
            // not acknowledge.
            let _ = client.flush(Duration::from_secs(20));
            assert_eq!(client.outstanding(), 0);
            control.park();
            send(&mut client, IN_FLIGHT);
            control.stop.store(true, Ordering::SeqCst);
            control.pause.store(false, Ordering::SeqCst);
            instances.push(thread.join().unwrap());
            control.stop.store(false, Ordering::SeqCst);
            (_, thread) = serve(addr.clone(), Arc::clone(&control));
        }
    }
    let _ = client.flush(Duration::from_secs(30));
    let mut acked = 0;
    let mut lost = BTreeMap::new();
    for &sn in sent.keys() {
        match client.wait_acked(sn, Duration::ZERO) {
            Ok(()) => acked += 1,
            Err(Error::Lost { range, .. }) => {
                lost.insert(sn, range);
            }
            Err(e) => panic!("sn {sn} did not end: {e}"),
        }
    }
    let established = client.stats().established;
    client.close(Duration::from_secs(5)).unwrap_or(());
    control.stop.store(true, Ordering::SeqCst);
    instances.push(thread.join().unwrap());
    Run {
        session,
        sent,
        instances,
        acked,
        lost,
        established,
    }
}
