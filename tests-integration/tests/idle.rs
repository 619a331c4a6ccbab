//! An idle endpoint costs no CPU: a client connected to a server, both
//! with the default progress (a moment's polling after the last work,
//! then sleeping on the transport), use under 1 % of a core each while
//! nothing is sent, on every backend; and a message sent after the
//! quiet spell is still acknowledged at once. The CPU is the process's
//! own count (/proc/self/stat), the only test in this binary.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iomsg_core::session::Delivery;
use iomsg_endpoint::{Accept, Client, ClientOptions, Dial, Server, ServerOptions};

/// The process's CPU time so far (user and system), in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name (which may hold spaces) start
    // after its closing parenthesis; utime and stime are fields 14, 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// Percent of one core the process used while a client and a server of
/// backend `D`/`A` sat idle for `quiet`.
fn idle_percent<D, A>(any: &str, quiet: Duration) -> f64
where
    D: Dial,
    A: Accept<Addr = D::Addr, Config = D::Config>,
{
    let mut server =
        Server::<A, _>::bind(any, ServerOptions::default(), |_: Delivery<'_>| {}).unwrap();
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let serving = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || server.run_until(|_| stop.load(Ordering::Relaxed)).unwrap())
    };
    let mut client = Client::<D>::connect(addr, ClientOptions::default()).unwrap();
    let sn = client.send(b"before").unwrap();
    client.wait_acked(sn, Duration::from_secs(5)).unwrap();
    // The client works only inside its calls: it waits, as an idle
    // application would, in one long call.
    let (t0, at) = (cpu_ticks(), Instant::now());
    client.wait(quiet).unwrap();
    while at.elapsed() < quiet {
        client.wait(quiet - at.elapsed()).unwrap();
    }
    let used = (cpu_ticks() - t0) as f64 / TICKS_PER_SECOND;
    let percent = 100.0 * used / at.elapsed().as_secs_f64();
    let sent = Instant::now();
    let sn = client.send(b"after").unwrap();
    client.wait_acked(sn, Duration::from_secs(5)).unwrap();
    assert!(
        sent.elapsed() < Duration::from_millis(500),
        "a message after the quiet spell took {:?}",
        sent.elapsed()
    );
    client.close(Duration::from_secs(5)).unwrap();
    stop.store(true, Ordering::Relaxed);
    serving.join().unwrap();
    percent
}

#[test]
fn an_idle_client_and_server_use_under_one_percent_of_a_core_each() {
    std::env::set_var("UCX_NET_DEVICES", "lo");
    std::env::set_var("UCX_TLS", "tcp");
    let quiet = Duration::from_secs(3);
    for (backend, percent) in [
        (
            "stream",
            idle_percent::<
                iomsg_stream::StreamTransport<iomsg_stream::Dial>,
                iomsg_stream::StreamTransport<iomsg_stream::Accept>,
            >("127.0.0.1:0", quiet),
        ),
        (
            "UCX",
            idle_percent::<
                iomsg_ucx::UcxTransport<iomsg_ucx::Dial>,
                iomsg_ucx::UcxTransport<iomsg_ucx::Accept>,
            >("127.0.0.1:0", quiet),
        ),
    ] {
        // Two endpoints: under 1 % each is under 2 % together.
        assert!(
            percent < 2.0,
            "{backend}: idle client and server used {percent:.1} % of a core"
        );
        println!("{backend}: idle client and server used {percent:.2} % of a core");
    }
}
