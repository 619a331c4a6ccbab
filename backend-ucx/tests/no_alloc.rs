//! The UCX transport allocates nothing per message of up to 64 KiB, on
//! either API, over tcp and over shared memory: a counting global allocator watches a
//! steady stream of writes between a `Client` and a `Server` in one
//! process, after a warm-up that lets every queue and pool grow to its
//! working size. (UCX's own allocations are C's and not counted: the
//! claim is about this crate and the core.)

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, Message, ReadRequest, ServerConfig,
    ServerEvent, ServerHandler,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::{workload, Instant};
use iomsg_ucx::{Api, UcxConfig, UcxTransport};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The allocator counts every thread: one test at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const WINDOW: usize = 256;

/// Counts what it is handed; allocates nothing.
#[derive(Default)]
struct Count {
    taken: u64,
    bytes: u64,
}

impl ServerHandler for Count {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.taken += 1;
        self.bytes += d.data.len() as u64;
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn event(&mut self, _: ServerEvent) {}
}

fn clock(start: Wall) -> Instant {
    Instant::from_micros(start.elapsed().as_micros() as u64)
}

/// Streams `warm + measured` writes of `size` bytes; returns the
/// allocations made while the last `measured` were acknowledged.
fn allocations(api: Api, shared_memory: bool, size: usize, warm: u64, measured: u64) -> usize {
    let tls = if shared_memory {
        "tcp,posix,sysv,cma,self"
    } else {
        "tcp"
    };
    let config = UcxConfig::default()
        .api(api)
        .shared_memory(shared_memory)
        .setting("TLS", tls)
        .setting("NET_DEVICES", "lo");
    let t = UcxTransport::server("127.0.0.1:0".parse().unwrap(), config.clone()).unwrap();
    let addr = t.local_addr();
    let mut server = Server::new(t, ServerConfig::new(1)).unwrap();
    let transport = UcxTransport::client(addr, config).unwrap();
    let session = ClientSession::<WINDOW, _>::new(
        ClientConfig::new(7, 8),
        Instant::ZERO,
        vec![0u8; WINDOW * size],
    );
    let mut client = Client::new(transport, session).unwrap();
    let start = Wall::now();
    client.start(clock(start));
    let mut app = Count::default();
    let buf = vec![0x5a; size];
    let mut region = None;
    let end = warm + measured;
    while client.session().base_sn() < end {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{api} shm {shared_memory}: stuck at {}",
            client.session().base_sn()
        );
        if region.is_none() && client.session().base_sn() >= warm {
            region = Some(Region::new(GLOBAL));
        }
        while client.session().next_sn() < end && client.submit(Message::Write(&buf)).is_ok() {}
        client.poll(clock(start), &mut |_: ClientEvent| {});
        server.poll(clock(start), &mut app);
    }
    let stats = region.unwrap().change();
    assert!(app.taken >= end, "{api}: the server took {}", app.taken);
    stats.allocations + stats.reallocations
}

fn check(api: Api, shared_memory: bool) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Up to the pool's buffer size (64 KiB); past it the pool keeps only
    // eight buffers, so more in flight at once allocate (docs/ucx.md).
    for size in [64, 4096, 60_000] {
        let measured = if size > 8192 { 10_000 } else { 100_000 };
        let n = allocations(api, shared_memory, size, 20_000.min(measured), measured);
        eprintln!("{api} shm {shared_memory}: {size} B: {n} allocations over {measured} messages");
        // A few when a queue or the slot table grows to a new high-water
        // mark under the run's timing; none per message.
        assert!(
            n <= 16,
            "{api} shm {shared_memory}: {n} allocations over {measured} messages of {size} B"
        );
    }
}

#[test]
fn active_messages_over_tcp_allocate_nothing_per_message() {
    check(Api::Am, false);
}

#[test]
fn active_messages_over_shared_memory_allocate_nothing_per_message() {
    check(Api::Am, true);
}

#[test]
fn tag_matching_over_tcp_allocates_nothing_per_message() {
    check(Api::Tag, false);
}

#[test]
fn tag_matching_over_shared_memory_allocates_nothing_per_message() {
    check(Api::Tag, true);
}
