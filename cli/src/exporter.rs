//! `--metrics ADDR`: a recorder for the `metrics` facade and a small HTTP
//! endpoint that shows what it holds in the Prometheus text format.
//!
//! Whatever the process records through the facade (the command's own
//! figures, and the library's `iomsg_client_*` / `iomsg_server_*`
//! metrics) is kept in atomics: recording never waits for the endpoint.
//! Counters and gauges are shown as such; a histogram is shown as a
//! summary of its count and sum.
//!
//! The endpoint is one thread with a [`std::net::TcpListener`]: it answers
//! one request at a time, `GET /metrics` with the exposition and anything
//! else with 404. A request may take [`READ_TIMEOUT`] to arrive and be
//! [`MAX_REQUEST`] bytes at most (past either, the connection is closed
//! with 400 or nothing); the reply must be taken within
//! [`WRITE_TIMEOUT`]. At most [`MAX_SERIES`] series are kept; past them,
//! new ones are dropped and counted in
//! `iomsg_metrics_dropped_series_total`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// How long a request may take to arrive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the peer may take to read the reply.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest request read (request line and headers).
pub const MAX_REQUEST: usize = 8 * 1024;
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
/// (`GET /metrics`) from a thread of its own; returns the address bound
/// (the port chosen when `addr`'s is 0).
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

/// Answers the connections on `listener` one after the other, forever.
pub fn serve(listener: &TcpListener, exposition: &Exposition) {
    for stream in listener.incoming() {
        match stream {
            Ok(s) => answer(s, exposition),
            // Out of descriptors or the like: wait a little, go on.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Reads one request (bounded in size and time) and answers it.
fn answer(mut s: TcpStream, exposition: &Exposition) {
    if s.set_read_timeout(Some(READ_TIMEOUT)).is_err()
        || s.set_write_timeout(Some(WRITE_TIMEOUT)).is_err()
    {
        return;
    }
    let Some(head) = read_head(&mut s) else {
        let _ = s.write_all(&reply("400 Bad Request", "a request, at most 8 KiB\n"));
        return;
    };
    let line = head.lines().next().unwrap_or("");
    let mut words = line.split_whitespace();
    let (method, target) = (words.next(), words.next());
    let path = target.map(|t| t.split('?').next().unwrap_or(t));
    let bytes = if method == Some("GET") && path == Some("/metrics") {
        reply("200 OK", &exposition.render())
    } else {
        reply("404 Not Found", "only GET /metrics is served here\n")
    };
    let _ = s.write_all(&bytes);
    let _ = s.flush();
}

/// The request's head (up to the blank line), or `None` when it is larger
/// than [`MAX_REQUEST`], cut short, or too slow.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = s.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_REQUEST {
            return None;
        }
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
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
        assert!(big.starts_with("HTTP/1.1 400 "), "{big}");
        // A silent peer holds the endpoint for READ_TIMEOUT at most.
        let silent = TcpStream::connect(addr).unwrap();
        let t = std::time::Instant::now();
        let after = get(addr, b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(after.starts_with("HTTP/1.1 200 OK"), "{after}");
        assert!(t.elapsed() < READ_TIMEOUT + Duration::from_secs(2));
        drop(silent);
    }
}
