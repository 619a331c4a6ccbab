//! Messages per second through the application API, blocking or async:
//! a server and a client in one process over tcp on the loopback device,
//! `COUNT` messages of `SIZE` bytes, each acknowledged.
//!
//!     cargo run --release -p iomsg-ucx --features tokio --example throughput -- blocking 200000 64
//!     cargo run --release -p iomsg-ucx --features tokio --example throughput -- tokio 200000 64
//!
//! Prints one line: mode, count, size, seconds, messages per second.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iomsg_ucx::{Client, Delivery, Error, Server};

fn main() -> Result<(), Error> {
    // The loopback device and tcp, before any UCX context.
    std::env::set_var("UCX_NET_DEVICES", "lo");
    std::env::set_var("UCX_TLS", "tcp");
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: throughput blocking|busy|tokio COUNT SIZE";
    let (Some(mode), Some(count), Some(size)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let count: u64 = count.parse().expect("COUNT is a number");
    let size: usize = size.parse().expect("SIZE is a number");
    let payload = vec![0x5a; size];
    let seconds = match mode.as_str() {
        "blocking" => blocking(count, &payload, false)?,
        "busy" => blocking(count, &payload, true)?,
        "tokio" => asynchronous(count, &payload)?,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    println!(
        "{mode} count={count} size={size} seconds={seconds:.3} msgs_per_s={:.0}",
        count as f64 / seconds
    );
    Ok(())
}

fn blocking(count: u64, payload: &[u8], busy: bool) -> Result<f64, Error> {
    use iomsg_ucx::{ClientOptions, ServerOptions};
    let taken = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&taken);
    let options = ServerOptions::default().busy_poll(busy);
    let mut server = Server::bind("127.0.0.1:0", options, move |_: Delivery<'_>| {
        counter.fetch_add(1, Relaxed);
    })?;
    let (addr, stop) = (server.local_addr(), Arc::new(AtomicBool::new(false)));
    let stopped = Arc::clone(&stop);
    let serving = std::thread::spawn(move || server.run_until(|_| stopped.load(Relaxed)));
    let mut client = Client::connect(addr, ClientOptions::default().busy_poll(busy))?;
    let started = Instant::now();
    for _ in 0..count {
        client.send(payload)?;
    }
    client.flush(Duration::from_secs(60))?;
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(taken.load(Relaxed), count, "the server took every message");
    client.close(Duration::from_secs(1))?;
    stop.store(true, Relaxed);
    serving.join().expect("the server thread")?;
    Ok(seconds)
}

fn asynchronous(count: u64, payload: &[u8]) -> Result<f64, Error> {
    use iomsg_ucx::tokio::{Client, Server};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let mut server = Server::bind("127.0.0.1:0", Default::default()).await?;
        let client = Client::connect(server.local_addr(), Default::default()).await?;
        // The server is handed back when the stream has given every
        // message: it must outlive the client's last acknowledgements.
        let draining = tokio::spawn(async move {
            let mut n = 0;
            while n < count {
                server.next().await.expect("the server runs");
                n += 1;
            }
            (n, server)
        });
        let started = Instant::now();
        // A window's worth of receipts in flight: the oldest is awaited
        // before the next submit past it.
        let mut receipts = std::collections::VecDeque::new();
        for _ in 0..count {
            receipts.push_back(client.submit(payload).await?);
            if receipts.len() >= 256 {
                receipts.pop_front().expect("one is there").await?;
            }
        }
        for receipt in receipts {
            receipt.await?;
        }
        let seconds = started.elapsed().as_secs_f64();
        let (taken, server) = draining.await.expect("the drain");
        assert_eq!(taken, count, "the stream gave every message");
        client.close().await?;
        drop(server);
        Ok(seconds)
    })
}
