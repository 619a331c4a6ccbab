// Feature `metrics`: a recorder of our own counts what the observers
// record; each backend's tests compare the differences with what they
// sent and what the handlers took. The observer's own tests (no backend)
// run once, here.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use iomsg_core::session::{ClientEvent, ClientStats, DisconnectCause};
use iomsg_core::Instant;
use iomsg_endpoint::observe::{ClientObserver, SUBMIT_RING};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// The system allocator, counting the allocations each thread makes (the
/// harness's other threads allocate when they like).
struct PerThread;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Allocations (and reallocations) this thread made so far.
pub fn allocations() -> u64 {
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
pub struct Snapshot {
    counters: BTreeMap<String, u64>,
    histograms: BTreeMap<String, Vec<f64>>,
}

impl Snapshot {
    pub fn take() -> Snapshot {
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
    pub fn grew(&self, before: &Snapshot, name: &str) -> u64 {
        let at = |s: &Snapshot| s.counters.get(name).copied().unwrap_or(0);
        at(self) - at(before)
    }

    /// Samples of histogram `name` recorded since `before`.
    pub fn new_samples(&self, before: &Snapshot, name: &str) -> Vec<f64> {
        let old = before.histograms.get(name).map_or(0, Vec::len);
        self.histograms
            .get(name)
            .map(|v| v[old..].to_vec())
            .unwrap_or_default()
    }
}

#[test]
fn a_scripted_session_gives_exact_counts_and_latencies() {
    let _one = crate::one_at_a_time();
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
    let _one = crate::one_at_a_time();
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
