//! `--metrics ADDR`: a recorder for the `metrics` facade and a small HTTP
//! endpoint that shows what it holds in the Prometheus text format.
//!
//! Whatever the process records through the facade (the command's own
//! figures, and the library's `iomsg_client_*` / `iomsg_server_*`
//! metrics) is kept in atomics: recording never waits for the endpoint.
//! Counters and gauges are shown as such; a histogram is shown as a
//! summary of its count and sum.
//!
//! The endpoint ([`serve`]) accepts on a [`std::net::TcpListener`] and
//! answers each connection from a short-lived thread of its own, so
//! scrapes are served concurrently and a slow or silent peer delays no
//! one else. It answers `GET /metrics` with the exposition and anything
//! else with 404.
//!
//! - Deadline: each connection has [`DEADLINE`] from its accept for its
//!   request head to arrive and its answer to be taken; every read and
//!   write waits only for what is left of it, and past it the connection
//!   is closed without an answer. Trickling bytes does not extend it.
//! - Cap: at most [`MAX_CONNECTIONS`] connections are served at once; one
//!   more is answered 503 at once, without its request being read, and
//!   closed.
//! - Size: a request head is [`MAX_REQUEST`] bytes at most (past it, 431;
//!   cut short, 400).
//! - Memory: a connection holds one [`MAX_REQUEST`] buffer and a
//!   [`STACK`]-byte thread stack, so connections take at most
//!   [`MAX_CONNECTIONS`] × (8 KiB + 128 KiB) = 8.5 MiB (the stacks
//!   reserved, touched only as used), plus the exposition's text for each
//!   scrape being answered.
//!
//! At most [`MAX_SERIES`] series are kept; past them, new ones are
//! dropped and counted in `iomsg_metrics_dropped_series_total`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// How long a connection may take, from its accept, for its request head
/// to arrive and its answer to be taken; past it, it is closed. Ample for
/// a scrape on a reachable network, and the most a peer holds a slot.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// The most connections served at once: far more than the scrapers of a
/// process, and few enough threads and buffers to hold at any time.
pub const MAX_CONNECTIONS: usize = 64;
/// The largest request head read (request line and headers).
pub const MAX_REQUEST: usize = 8 * 1024;
/// The stack of a connection's thread (it reads, renders and writes).
pub const STACK: usize = 128 * 1024;
/// The most bytes read and dropped after an answer, before closing.
const MAX_DRAIN: usize = 64 * 1024;
/// The most series (a name and its labels) kept.
pub const MAX_SERIES: usize = 4096;

/// A histogram's count and sum (the sum as `f64` bits).
#[derive(Default)]
struct Summary {
    count: AtomicU64,
    sum: AtomicU64,
}

impl HistogramFn for Summary {
    fn record(&self, value: f64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| {
                Some((f64::from_bits(s) + value).to_bits())
            });
    }
}

/// One series' value.
#[derive(Clone)]
enum Value {
    Counter(Arc<AtomicU64>),
    Gauge(Arc<AtomicU64>),
    Summary(Arc<Summary>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Counter(_) => "counter",
            Value::Gauge(_) => "gauge",
            Value::Summary(_) => "summary",
        }
    }
}

/// The series (name, rendered labels) and the descriptions, by name.
#[derive(Default)]
struct Registry {
    series: BTreeMap<(String, String), Value>,
    help: BTreeMap<String, String>,
}

/// The recorder: install it with [`install`], or use it locally (tests).
#[derive(Clone, Default)]
pub struct Exposition {
    registry: Arc<Mutex<Registry>>,
    dropped: Arc<AtomicU64>,
}

impl Exposition {
    /// An empty recorder.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The series `key` names, made as `make` says the first time.
    fn series(&self, key: &Key, make: fn() -> Value) -> Option<Value> {
        let id = (sanitize(key.name()), labels(key));
        let mut r = self.registry();
        if let Some(v) = r.series.get(&id) {
            return Some(v.clone());
        }
        if r.series.len() >= MAX_SERIES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let v = make();
        r.series.insert(id, v.clone());
        Some(v)
    }

    fn describe(&self, key: &KeyName, description: &SharedString) {
        let text = description.replace('\\', "\\\\").replace('\n', "\\n");
        self.registry().help.insert(sanitize(key.as_str()), text);
    }

    /// Everything recorded, in the Prometheus text exposition format
    /// (version 0.0.4), sorted by name.
    pub fn render(&self) -> String {
        // Copy the handles out so that recording never waits on the text.
        let (series, help) = {
            let r = self.registry();
            let series: Vec<_> = r
                .series
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (series, r.help.clone())
        };
        let mut out = String::new();
        let mut last = "";
        for ((name, labels), v) in &series {
            if name != last {
                if let Some(h) = help.get(name) {
                    let _ = writeln!(out, "# HELP {name} {h}");
                }
                let _ = writeln!(out, "# TYPE {name} {}", v.kind());
                last = name;
            }
            let braces = |l: &str| {
                if l.is_empty() {
                    String::new()
                } else {
                    format!("{{{l}}}")
                }
            };
            match v {
                Value::Counter(c) => {
                    let _ = writeln!(
                        out,
                        "{name}{} {}",
                        braces(labels),
                        c.load(Ordering::Acquire)
                    );
                }
                Value::Gauge(g) => {
                    let x = f64::from_bits(g.load(Ordering::Acquire));
                    let _ = writeln!(out, "{name}{} {}", braces(labels), number(x));
                }
                Value::Summary(s) => {
                    let sum = f64::from_bits(s.sum.load(Ordering::Relaxed));
                    let count = s.count.load(Ordering::Relaxed);
                    let _ = writeln!(out, "{name}_sum{} {}", braces(labels), number(sum));
                    let _ = writeln!(out, "{name}_count{} {count}", braces(labels));
                }
            }
        }
        let _ = writeln!(
            out,
            "# TYPE iomsg_metrics_dropped_series_total counter\niomsg_metrics_dropped_series_total {}",
            self.dropped.load(Ordering::Relaxed)
        );
        out
    }
}

/// A float as Prometheus writes it.
fn number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{x}")
    }
}

/// A metric name with every character Prometheus refuses made `_`.
fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// `key`'s labels as `a="x",b="y"`, sorted, values escaped.
fn labels(key: &Key) -> String {
    let mut pairs: Vec<(String, String)> = key
        .labels()
        .map(|l| {
            let v = l
                .value()
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            (sanitize(l.key()), v)
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect::<Vec<_>>()
        .join(",")
}

impl Recorder for Exposition {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(&key, &description);
    }

    fn describe_gauge(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(&key, &description);
    }

    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.describe(&key, &description);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.series(key, || Value::Counter(Arc::default())) {
            Some(Value::Counter(c)) => Counter::from_arc(c),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        match self.series(key, || Value::Gauge(Arc::default())) {
            Some(Value::Gauge(g)) => Gauge::from_arc(g),
            _ => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        match self.series(key, || Value::Summary(Arc::default())) {
            Some(Value::Summary(s)) => Histogram::from_arc(s),
            _ => Histogram::noop(),
        }
    }
}

/// Installs a recorder for the whole process and serves it on `addr`
/// (`GET /metrics`, see [`serve`]) from a thread of its own; returns the
/// address bound (the port chosen when `addr`'s is 0).
///
/// # Errors
///
/// `addr` could not be bound (say which address and why), or a recorder
/// was installed already.
pub fn install(addr: SocketAddr) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| format!("--metrics {addr}: cannot listen there: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("--metrics {addr}: {e}"))?;
    let exposition = Exposition::new();
    metrics::set_global_recorder(exposition.clone())
        .map_err(|_| "--metrics: a metrics recorder is installed already".to_string())?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || serve(&listener, &exposition))
        .map_err(|e| format!("--metrics: cannot start its thread: {e}"))?;
    Ok(local)
}

/// Accepts the connections on `listener` forever and answers each from a
/// short-lived thread of its own, so that scrapes are served concurrently
/// and a slow peer delays no one else. At most [`MAX_CONNECTIONS`] are
/// served at once; one more is answered 503 at once, its request unread,
/// and closed. Each has [`DEADLINE`] from its accept (see `answer`).
pub fn serve(listener: &TcpListener, exposition: &Exposition) {
    let live = Arc::new(AtomicUsize::new(0));
    // Renders take turns: recording waits on one copy of the registry at
    // most, however many scrapes are in progress.
    let turn = Arc::new(Mutex::new(()));
    for stream in listener.incoming() {
        let s = match stream {
            Ok(s) => s,
            // Out of descriptors or the like: wait a little, go on.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let deadline = Instant::now() + DEADLINE;
        let Some(slot) = Slot::take(&live) else {
            refuse(s);
            continue;
        };
        let (exposition, turn) = (exposition.clone(), Arc::clone(&turn));
        // When the thread cannot start, the closure is dropped: the
        // connection is closed and its slot given back.
        let _ = std::thread::Builder::new()
            .name("metrics-conn".into())
            .stack_size(STACK)
            .spawn(move || {
                let _slot = slot;
                answer(s, deadline, &exposition, &turn);
            });
    }
}

/// One of the [`MAX_CONNECTIONS`] connections served at once, given back
/// when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    /// A slot, or `None` when all are taken.
    fn take(live: &Arc<AtomicUsize>) -> Option<Slot> {
        live.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_CONNECTIONS).then_some(n + 1)
        })
        .ok()?;
        Some(Slot(Arc::clone(live)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Answers a connection past [`MAX_CONNECTIONS`] with 503, without waiting
/// and without reading its request; dropping it closes it.
fn refuse(mut s: TcpStream) {
    if s.set_nonblocking(true).is_ok() {
        let body = format!("{MAX_CONNECTIONS} connections in progress, try again\n");
        let _ = s.write_all(&reply("503 Service Unavailable", &body));
    }
}

/// The time left before `deadline`, or `None` once it has passed.
fn left(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Reads one request head and answers it, all before `deadline`: every
/// read and write waits only for the time left, and past it the
/// connection is closed without an answer.
fn answer(mut s: TcpStream, deadline: Instant, exposition: &Exposition, turn: &Mutex<()>) {
    let mut buf = vec![0u8; MAX_REQUEST];
    let bytes = match read_head(&mut s, &mut buf, deadline) {
        Head::Complete(len) => {
            let line = buf[..len].split(|&b| b == b'\n').next().unwrap_or(&[]);
            let mut words = line
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty());
            let (method, target) = (words.next(), words.next());
            let path = target.map(|t| t.split(|&b| b == b'?').next().unwrap_or(t));
            if method == Some(b"GET") && path == Some(b"/metrics") {
                let text = {
                    let _turn = turn.lock().unwrap_or_else(PoisonError::into_inner);
                    exposition.render()
                };
                reply("200 OK", &text)
            } else {
                reply("404 Not Found", "only GET /metrics is served here\n")
            }
        }
        Head::TooLarge => reply(
            "431 Request Header Fields Too Large",
            "a request head of at most 8 KiB\n",
        ),
        Head::CutShort => reply("400 Bad Request", "a request head ending in a blank line\n"),
        Head::Closed => return,
    };
    if write_by(&mut s, &bytes, deadline) {
        linger(&mut s, &mut buf, deadline);
    }
}

/// How reading a request head ended.
enum Head {
    /// The head (up to its blank line) is the first this many bytes.
    Complete(usize),
    /// [`MAX_REQUEST`] bytes came without a blank line.
    TooLarge,
    /// The peer stopped sending before the blank line.
    CutShort,
    /// The deadline passed or the connection failed.
    Closed,
}

/// Reads into `buf` (at most its length, [`MAX_REQUEST`]) until the blank
/// line that ends a request head, before `deadline`.
fn read_head(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Head {
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Head::TooLarge;
        }
        let Some(t) = left(deadline) else {
            return Head::Closed;
        };
        if s.set_read_timeout(Some(t)).is_err() {
            return Head::Closed;
        }
        let n = match s.read(&mut buf[len..]) {
            Ok(0) => return Head::CutShort,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Head::Closed,
        };
        // The blank line may straddle the previous read.
        let from = len.saturating_sub(3);
        len += n;
        let new = &buf[from..len];
        if new.windows(4).any(|w| w == b"\r\n\r\n") || new.windows(2).any(|w| w == b"\n\n") {
            return Head::Complete(len);
        }
    }
}

/// Writes all of `bytes` before `deadline`; `false` when it could not.
fn write_by(s: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> bool {
    while !bytes.is_empty() {
        let Some(t) = left(deadline) else {
            return false;
        };
        if s.set_write_timeout(Some(t)).is_err() {
            return false;
        }
        match s.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Ends the answer and reads what the peer still sends (at most
/// [`MAX_DRAIN`] bytes, before `deadline`): closing with unread bytes
/// would reset the connection, and the peer could lose the answer.
fn linger(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) {
    if s.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let mut drained = 0;
    while drained < MAX_DRAIN {
        let Some(t) = left(deadline) else {
            return;
        };
        if s.set_read_timeout(Some(t)).is_err() {
            return;
        }
        match s.read(buf) {
            Ok(0) => return,
            Ok(n) => drained += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

fn reply(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn renders_counters_gauges_and_summaries_by_name() {
        let e = Exposition::new();
        metrics::with_local_recorder(&e, || {
            metrics::describe_counter!("iomsg_test_total", "what the test counts");
            metrics::counter!("iomsg_test_total").absolute(41);
            metrics::counter!("iomsg_test_total").absolute(42);
            metrics::counter!("iomsg_test_total", "conn" => "a\"b").increment(3);
            metrics::gauge!("iomsg_test_gauge").set(2.5);
            metrics::histogram!("iomsg-test.lat").record(1.0);
            metrics::histogram!("iomsg-test.lat").record(2.0);
        });
        let text = e.render();
        assert!(
            text.contains("# HELP iomsg_test_total what the test counts\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE iomsg_test_total counter\n"), "{text}");
        assert!(text.contains("\niomsg_test_total 42\n"), "{text}");
        assert!(
            text.contains("iomsg_test_total{conn=\"a\\\"b\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE iomsg_test_gauge gauge\niomsg_test_gauge 2.5\n"),
            "{text}"
        );
        assert!(
            text.contains("iomsg_test_lat_sum 3\niomsg_test_lat_count 2\n"),
            "{text}"
        );
        assert_eq!(text.matches("# TYPE iomsg_test_total").count(), 1, "{text}");
    }

    #[test]
    fn series_past_the_cap_are_dropped_and_counted() {
        let e = Exposition::new();
        metrics::with_local_recorder(&e, || {
            for i in 0..MAX_SERIES + 5 {
                metrics::counter!("iomsg_many", "i" => i.to_string()).increment(1);
            }
        });
        let text = e.render();
        assert_eq!(text.matches("iomsg_many{").count(), MAX_SERIES);
        assert!(
            text.contains("iomsg_metrics_dropped_series_total 5\n"),
            "{text}"
        );
    }

    #[test]
    fn the_endpoint_serves_get_metrics_and_404_otherwise() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let e = Exposition::new();
        metrics::with_local_recorder(&e, || metrics::gauge!("iomsg_up").set(1.0));
        let served = e.clone();
        std::thread::spawn(move || serve(&listener, &served));
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("iomsg_up 1\n# TYPE iomsg_metrics_dropped_series_total counter\niomsg_metrics_dropped_series_total 0\n"), "{ok}");
        let other = get(addr, b"GET / HTTP/1.1\r\n\r\n");
        assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
        let post = get(addr, b"POST /metrics HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 404 "), "{post}");
        // One byte past the cap and no end: refused (every byte sent is
        // read, so the answer is not lost to a reset).
        let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        huge.resize(MAX_REQUEST + 1, b'a');
        let big = get(addr, &huge);
        assert!(big.starts_with("HTTP/1.1 431 "), "{big}");
        // A silent peer holds the endpoint for DEADLINE at most.
        let silent = TcpStream::connect(addr).unwrap();
        let t = std::time::Instant::now();
        let after = get(addr, b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(after.starts_with("HTTP/1.1 200 OK"), "{after}");
        assert!(t.elapsed() < DEADLINE + Duration::from_secs(2));
        drop(silent);
    }

    /// An endpoint on 127.0.0.1 served by [`serve`] from a thread.
    fn endpoint() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let e = Exposition::new();
        metrics::with_local_recorder(&e, || metrics::gauge!("iomsg_up").set(1.0));
        std::thread::spawn(move || serve(&listener, &e));
        addr
    }

    /// `GET /metrics`, waiting `limit` at most for each read: the answer
    /// (empty when none came) and how long it took.
    fn scrape(addr: SocketAddr, limit: Duration) -> (String, Duration) {
        let t = Instant::now();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(limit)).unwrap();
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        (String::from_utf8_lossy(&out).into_owned(), t.elapsed())
    }

    fn is_full_exposition(answer: &str) -> bool {
        answer.starts_with("HTTP/1.1 200 OK\r\n")
            && answer.ends_with("iomsg_metrics_dropped_series_total 0\n")
    }

    #[test]
    fn a_slow_loris_delays_no_scrape_and_is_closed_at_the_deadline() {
        let addr = endpoint();
        // One byte every 300 ms, a head that never ends; how long until
        // the endpoint closes the connection.
        let slow = std::thread::spawn(move || -> Result<Duration, String> {
            let mut s = TcpStream::connect(addr).unwrap();
            let opened = Instant::now();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut bytes = b"GET /metrics HTTP/1.1\r\nX-Slow: "
                .iter()
                .chain(std::iter::repeat(&b'a'));
            let mut sink = [0u8; 256];
            while opened.elapsed() < DEADLINE + Duration::from_secs(2) {
                if s.write_all(&[*bytes.next().unwrap()]).is_err() {
                    return Ok(opened.elapsed());
                }
                match s.read(&mut sink) {
                    Ok(0) => return Ok(opened.elapsed()),
                    Ok(n) => return Err(String::from_utf8_lossy(&sink[..n]).into_owned()),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => return Ok(opened.elapsed()),
                }
            }
            Err(format!("still open after {:?}", opened.elapsed()))
        });
        // The slow peer is accepted and trickling before the scrape.
        std::thread::sleep(Duration::from_millis(700));
        let (answer, took) = scrape(addr, Duration::from_secs(1));
        assert!(is_full_exposition(&answer), "{answer:?}");
        assert!(took < Duration::from_secs(1), "{took:?}");
        let closed = slow.join().unwrap().unwrap();
        assert!(
            closed >= DEADLINE - Duration::from_millis(250)
                && closed < DEADLINE + Duration::from_secs(1),
            "closed after {closed:?}"
        );
    }

    #[test]
    fn silent_connections_below_the_cap_delay_no_scrape() {
        let addr = endpoint();
        let silent: Vec<TcpStream> = (0..MAX_CONNECTIONS - 1)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let (answer, took) = scrape(addr, Duration::from_secs(1));
        assert!(is_full_exposition(&answer), "{answer:?}");
        assert!(took < Duration::from_secs(1), "{took:?}");
        drop(silent);
    }

    #[test]
    fn connections_past_the_cap_are_refused_and_serving_goes_on_after() {
        let addr = endpoint();
        let held: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // Every slot is taken: one more is answered 503 and closed at once.
        let t = Instant::now();
        let mut extra = TcpStream::connect(addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let mut refused = String::new();
        let end = extra.read_to_string(&mut refused);
        assert!(end.is_ok(), "{end:?} {refused:?}");
        assert!(refused.starts_with("HTTP/1.1 503 "), "{refused:?}");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        // Once the held ones go (well before their deadline), scrapes are
        // answered again.
        drop(held);
        let gone = Instant::now();
        let answer = loop {
            let (answer, _) = scrape(addr, Duration::from_secs(1));
            if is_full_exposition(&answer) || gone.elapsed() > Duration::from_secs(1) {
                break answer;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(is_full_exposition(&answer), "{answer:?}");
        assert!(gone.elapsed() < DEADLINE / 2, "{:?}", gone.elapsed());
    }

    #[test]
    fn a_head_in_pieces_within_the_deadline_is_answered() {
        let addr = endpoint();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        // The blank line split across reads.
        for piece in [&b"GET /metrics HTTP/1.1\r\nHost: x\r"[..], b"\n\r", b"\n"] {
            s.write_all(piece).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(is_full_exposition(&answer), "{answer:?}");
    }
}
