//! Feature `metrics`: a recorder of our own counts what the observers
//! record; each test compares the differences with what it sent and what
//! the handlers took.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use iomsg_core::session::{ClientEvent, ClientStats, DisconnectCause};
use iomsg_core::Instant;
use iomsg_ucx::observe::{ClientObserver, SUBMIT_RING};
use iomsg_ucx::ClientOptions;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

use super::support::{one_at_a_time, run, IN_FLIGHT};

/// The system allocator, counting the allocations each thread makes (the
/// harness's other threads allocate when they like).
struct PerThread;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Allocations (and reallocations) this thread made so far.
fn allocations() -> u64 {
    ALLOCATIONS.with(std::cell::Cell::get)
}

fn count_one() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call goes to the system allocator with the caller's
// arguments; counting touches only a thread-local Cell.
unsafe impl std::alloc::GlobalAlloc for PerThread {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's guarantees for `alloc`, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc`/`realloc` above, i.e. System.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        count_one();
        // SAFETY: the caller's guarantees for `realloc`, passed on.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: PerThread = PerThread;

/// Every counter and histogram sample recorded in this process, by name.
#[derive(Default)]
struct Recorded {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
}

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl metrics::HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// The process's recorder (installed once).
struct Global(&'static Recorded);

impl Recorder for Global {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        assert_eq!(key.labels().count(), 0, "{key:?} has labels");
        let mut counters = self.0.counters.lock().unwrap();
        Counter::from_arc(Arc::clone(
            counters.entry(key.name().to_owned()).or_default(),
        ))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        panic!("no gauge expected, got {key:?}");
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.0.histograms.lock().unwrap();
        Histogram::from_arc(Arc::clone(
            histograms.entry(key.name().to_owned()).or_default(),
        ))
    }
}

fn recorded() -> &'static Recorded {
    static RECORDED: OnceLock<&'static Recorded> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let recorded: &'static Recorded = Box::leak(Box::default());
        metrics::set_global_recorder(Global(recorded)).unwrap();
        recorded
    })
}

/// What the recorder holds at one moment.
#[derive(Clone, Debug)]
struct Snapshot {
    counters: BTreeMap<String, u64>,
    histograms: BTreeMap<String, Vec<f64>>,
}

impl Snapshot {
    fn take() -> Snapshot {
        let r = recorded();
        Snapshot {
            counters: (r.counters.lock().unwrap().iter())
                .map(|(k, v)| (k.clone(), v.load(Ordering::Relaxed)))
                .collect(),
            histograms: (r.histograms.lock().unwrap().iter())
                .map(|(k, v)| (k.clone(), v.0.lock().unwrap().clone()))
                .collect(),
        }
    }

    /// How much counter `name` grew since `before`.
    fn grew(&self, before: &Snapshot, name: &str) -> u64 {
        let at = |s: &Snapshot| s.counters.get(name).copied().unwrap_or(0);
        at(self) - at(before)
    }

    /// Samples of histogram `name` recorded since `before`.
    fn new_samples(&self, before: &Snapshot, name: &str) -> Vec<f64> {
        let old = before.histograms.get(name).map_or(0, Vec::len);
        self.histograms
            .get(name)
            .map(|v| v[old..].to_vec())
            .unwrap_or_default()
    }
}

#[test]
fn a_clean_run_counts_exactly_what_was_sent_and_taken() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let r = run(ClientOptions::default(), 1, 3000);
    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    let sent = r.sent.len() as u64;
    assert_eq!(sent, 3000);
    // Ground truth: the test sent 3000, one server instance took them all.
    assert_eq!(r.instances.len(), 1);
    assert_eq!(r.instances[0].messages.len() as u64, sent);
    assert_eq!(grew("iomsg_client_submitted_total"), sent);
    assert_eq!(grew("iomsg_client_acked_total"), sent);
    assert_eq!(grew("iomsg_server_delivered_total"), r.delivered());
    assert_eq!(grew("iomsg_server_delivered_total"), sent);
    assert_eq!(grew("iomsg_client_not_replayed_total"), 0);
    assert_eq!(grew("iomsg_client_replayed_total"), 0);
    assert_eq!(grew("iomsg_client_reconnects_total"), 0);
    assert_eq!(grew("iomsg_server_duplicates_total"), 0);
    assert_eq!(grew("iomsg_server_live_loss_sns_total"), 0);
    assert_eq!(grew("iomsg_server_in_flight_loss_sns_total"), 0);
    assert_eq!(grew("iomsg_server_sessions_opened_total"), 1);
    assert_eq!(
        grew("iomsg_server_sessions_opened_total"),
        r.instances[0].opened
    );
    assert_eq!(grew("iomsg_server_rejected_total"), 0);
    let handshakes = after.new_samples(&before, "iomsg_client_handshake_seconds");
    assert_eq!(handshakes.len(), 1, "{handshakes:?}");
    assert!(
        handshakes[0] > 0.0 && handshakes[0] < 10.0,
        "{handshakes:?}"
    );
    // One sample per acknowledged message: the window fits the ring.
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    assert_eq!(latencies.len() as u64, sent);
    assert!(latencies.iter().all(|&s| (0.0..30.0).contains(&s)));
}

#[test]
fn with_replay_off_and_restarts_the_counts_match_each_instances_record() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let r = run(ClientOptions::default().replay(false), 3, 2000);
    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    let sent = r.sent.len() as u64;
    assert_eq!(grew("iomsg_client_submitted_total"), sent);
    assert_eq!(grew("iomsg_server_delivered_total"), r.delivered());
    let opened: u64 = r.instances.iter().map(|t| t.opened).sum();
    assert_eq!(grew("iomsg_server_sessions_opened_total"), opened);
    let rejected: u64 = r.instances.iter().map(|t| t.rejected).sum();
    assert_eq!(grew("iomsg_server_rejected_total"), rejected);
    // Every sn ended: acknowledged (taken by some instance) or given up.
    let acked = grew("iomsg_client_acked_total");
    let given_up = grew("iomsg_client_not_replayed_total");
    assert_eq!(acked, r.acked);
    assert_eq!(given_up, r.lost.len() as u64);
    assert_eq!(acked + given_up, sent);
    assert!(acked <= r.taken_by_any() as u64, "acked {acked}");
    // Twice a parked server went away with messages it never took.
    let taken_by_none = sent - r.taken_by_any() as u64;
    assert!(taken_by_none >= 2 * IN_FLIGHT, "{taken_by_none}");
    assert!(given_up >= taken_by_none, "{given_up} < {taken_by_none}");
    assert_eq!(grew("iomsg_client_replayed_total"), 0, "replay is off");
    // Four instances, each reached: at least three reconnects.
    let reconnects = grew("iomsg_client_reconnects_total");
    let reached = r.instances.iter().filter(|t| t.opened > 0).count() as u64;
    assert!(reached >= 3 && reconnects + 1 >= reached, "{reconnects}");
    assert_eq!(reconnects + 1, r.established);
    let handshakes = after.new_samples(&before, "iomsg_client_handshake_seconds");
    assert_eq!(handshakes.len() as u64, r.established);
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    assert_eq!(latencies.len() as u64, acked);
}

#[test]
fn with_replay_on_a_restart_counts_replays_and_every_message_acknowledged() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let r = run(ClientOptions::default(), 2, 3000);
    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    let sent = r.sent.len() as u64;
    assert!(r.lost.is_empty());
    assert_eq!(r.taken_by_any() as u64, sent, "replay brings every sn");
    assert_eq!(grew("iomsg_client_submitted_total"), sent);
    assert_eq!(grew("iomsg_client_acked_total"), sent);
    assert_eq!(grew("iomsg_client_not_replayed_total"), 0);
    assert_eq!(grew("iomsg_server_delivered_total"), r.delivered());
    // An sn both instances took was sent twice.
    let twice = r.sent.keys().filter(|&&sn| r.taken_by(sn) == 2).count() as u64;
    let replayed = grew("iomsg_client_replayed_total");
    assert!(replayed >= twice, "{replayed} < {twice}");
    // The messages the parked server never took went out to it, and again
    // to the next instance, which took them.
    assert!(replayed >= IN_FLIGHT, "{replayed}");
    assert!(grew("iomsg_client_reconnects_total") >= 1);
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    assert_eq!(latencies.len() as u64, sent);
}

/// The observer without the facade, as a sans-IO driver's user calls it:
/// exact counts and latencies from a scripted session.
#[test]
fn a_scripted_session_gives_exact_counts_and_latencies() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let at = Instant::from_micros;
    let mut o = ClientObserver::new();
    o.on_event(
        &ClientEvent::Connecting {
            epoch: 1,
            attempt: 0,
        },
        at(0),
    );
    let established = |resume_from| ClientEvent::Established {
        epoch: 1,
        instance: 7,
        known: false,
        resume_from,
    };
    o.on_event(&established(0), at(1_000));
    for sn in 0..10 {
        o.on_submit(sn, at(2_000 + sn * 10));
    }
    o.on_event(&ClientEvent::Acked { upto: 4 }, at(5_000));
    let cause = DisconnectCause::ServerBye;
    o.on_event(&ClientEvent::Disconnected { epoch: 1, cause }, at(6_000));
    o.on_event(
        &ClientEvent::Connecting {
            epoch: 2,
            attempt: 0,
        },
        at(7_000),
    );
    // The Welcome confirmed 4 and 5; 6..10 are given up.
    o.on_event(&ClientEvent::NotReplayed { range: 6..10 }, at(8_500));
    o.on_event(&established(6), at(8_500));
    o.on_event(&ClientEvent::Acked { upto: 10 }, at(8_600));
    o.on_submit(10, at(9_000));
    o.on_event(&ClientEvent::Acked { upto: 11 }, at(9_500));
    let stats = ClientStats {
        replayed: 3,
        ..ClientStats::default()
    };
    o.on_stats(&stats);
    o.on_stats(&stats);
    // An sn past the ring: its slot was taken, no sample.
    let far = 11 + SUBMIT_RING as u64;
    o.on_submit(11, at(10_000));
    o.on_submit(far, at(10_000));
    o.on_event(&ClientEvent::Acked { upto: 12 }, at(11_000));

    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    assert_eq!(grew("iomsg_client_submitted_total"), 13);
    assert_eq!(grew("iomsg_client_acked_total"), 4 + 2 + 1 + 1);
    assert_eq!(grew("iomsg_client_not_replayed_total"), 4);
    assert_eq!(grew("iomsg_client_reconnects_total"), 1);
    assert_eq!(grew("iomsg_client_replayed_total"), 3);
    let micros = |v: Vec<f64>| -> Vec<u64> { v.iter().map(|s| (s * 1e6).round() as u64).collect() };
    let handshakes = after.new_samples(&before, "iomsg_client_handshake_seconds");
    assert_eq!(micros(handshakes), [1_000, 1_500]);
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    // Sns 0..4 at the first ack, 4 and 5 at the Welcome, 10 at its ack.
    assert_eq!(
        micros(latencies),
        [3_000, 2_990, 2_980, 2_970, 6_460, 6_450, 500],
        "µs"
    );
}

/// A recorder that allocates nothing per count: counters and histograms
/// are atomics (a histogram counts its samples).
struct Counting {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<SampleCount>>>,
}

#[derive(Default)]
struct SampleCount(AtomicU64);

impl metrics::HistogramFn for SampleCount {
    fn record(&self, _: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Recorder for Counting {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.counters.lock().unwrap();
        Counter::from_arc(Arc::clone(
            counters.entry(key.name().to_owned()).or_default(),
        ))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        panic!("no gauge expected, got {key:?}");
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.histograms.lock().unwrap();
        Histogram::from_arc(Arc::clone(
            histograms.entry(key.name().to_owned()).or_default(),
        ))
    }
}

#[test]
fn the_client_observer_allocates_nothing_per_message() {
    let _one = one_at_a_time();
    let recorder = Counting {
        counters: Mutex::default(),
        histograms: Mutex::default(),
    };
    let mut o = metrics::with_local_recorder(&recorder, ClientObserver::new);
    let rounds = 10_000u64;
    let before = allocations();
    for round in 0..rounds {
        let base = round * 100;
        for sn in base..base + 100 {
            o.on_submit(sn, Instant::from_micros(sn));
        }
        let upto = base + 100;
        o.on_event(&ClientEvent::Acked { upto }, Instant::from_micros(upto + 7));
    }
    assert_eq!(allocations() - before, 0, "allocations in the loop");
    let counters = recorder.counters.lock().unwrap();
    let count = |name: &str| counters[name].load(Ordering::Relaxed);
    assert_eq!(count("iomsg_client_submitted_total"), rounds * 100);
    assert_eq!(count("iomsg_client_acked_total"), rounds * 100);
    let histograms = recorder.histograms.lock().unwrap();
    let samples = histograms["iomsg_client_ack_latency_seconds"]
        .0
        .load(Ordering::Relaxed);
    assert_eq!(samples, rounds * 100);
}
