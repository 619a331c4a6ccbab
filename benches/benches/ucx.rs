//! The full protocol over UCX, client and server in separate processes:
//! acknowledged io_msgs (and bytes) per second.
//!
//! - `ucx_tcp_msgs`, `ucx_tcp_bytes`: streamed writes (`StreamWrite`) of
//!   64 B, 256 B, 4 KiB and 64 KiB over `UCX_TLS=tcp`, send window 1,024
//!   (as `iomsg-ucx-peer client --stream`);
//! - `ucx_shm_msgs`, `ucx_shm_bytes`: the same over shared memory
//!   (`UCX_TLS=tcp,posix,sysv,cma,self`, `UcxConfig::shared_memory` at
//!   both ends);
//! - `ucx_tcp_window16`: io_demo's default workload, 4 KiB writes each
//!   acknowledged on its own (`Message::Write`), client window 16.
//!
//! The bench re-executes itself as the server (`IOMSG_BENCH_ROLE=server`):
//! a `Server` over `UcxTransport<Accept>` on 127.0.0.1, on a port the OS
//! picks, whose application takes every message and keeps nothing. It
//! prints `listening on ADDR`, and exits when its parent goes away. One
//! server per transport setting; it is killed and reaped when its groups
//! end, on a panic too. The client runs in the bench process: a criterion
//! iteration is one message, a sample's time runs from its first submit
//! until every one of its messages is acknowledged, so "elem/s" reads as
//! acknowledged messages per second.
//!
//! Both processes run UCX on the loopback device only (`UCX_NET_DEVICES=lo`)
//! with the group's `UCX_TLS`, set in the bench process's environment
//! before each client's UCX context is created (no UCX context exists
//! then) and in the server's explicitly.

// A bench's main needs no docs.
#![allow(missing_docs)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant as Wall};

use criterion::{Criterion, Throughput};
use iomsg_benches::Sink;
use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, FailReason, Message, ServerConfig, SubmitError,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::{workload, Instant};
use iomsg_ucx::{Dial, UcxConfig, UcxTransport};

/// Set to `server` in the child that serves the bench.
const ROLE: &str = "IOMSG_BENCH_ROLE";
/// `1`: the server exchanges worker addresses for shared memory.
const SHARED_MEMORY: &str = "IOMSG_BENCH_SHARED_MEMORY";
/// The longest a server child lives, whatever its parent does.
const SERVER_LIFETIME: Duration = Duration::from_secs(900);
/// The longest one sample may take before the bench gives up.
const SAMPLE_LIMIT: Duration = Duration::from_secs(120);
/// How long the server child has to say where it listens.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(20);
/// The client's send window (`N`), as `iomsg-ucx-peer`'s.
const WINDOW: usize = 1024;
/// Streamed write sizes.
const SIZES: [usize; 4] = [64, 256, 4096, 65536];

/// The transports a group runs over, at both ends.
#[derive(Clone, Copy, Debug)]
struct Link {
    /// In the group's name: `tcp`, `shm`.
    name: &'static str,
    /// `UCX_TLS`.
    tls: &'static str,
    /// `UcxConfig::shared_memory`.
    shared_memory: bool,
}

const TCP: Link = Link {
    name: "tcp",
    tls: "tcp",
    shared_memory: false,
};

const SHM: Link = Link {
    name: "shm",
    tls: "tcp,posix,sysv,cma,self",
    shared_memory: true,
};

impl Link {
    /// The UCX variables both processes run with.
    fn env(self) -> [(&'static str, &'static str); 2] {
        [("UCX_TLS", self.tls), ("UCX_NET_DEVICES", "lo")]
    }

    fn ucx_config(self) -> UcxConfig {
        UcxConfig::default().shared_memory(self.shared_memory)
    }
}

fn clock(start: Wall) -> Instant {
    Instant::from_micros(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX))
}

/// Not a secret: distinct per process and call, for session ids and
/// instances.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher, RandomState};
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(Wall::now().elapsed().as_nanos());
    h.finish()
}

/// The server child's whole life: listen, print the address, serve until
/// the parent goes away (or [`SERVER_LIFETIME`]).
fn serve() -> ExitCode {
    let shared_memory = std::env::var(SHARED_MEMORY).is_ok_and(|v| v == "1");
    let config = UcxConfig::default().shared_memory(shared_memory);
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let transport = match UcxTransport::server(any_port, config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ucx bench server: cannot listen on {any_port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening on {}", transport.local_addr());
    let mut server_config = ServerConfig::new(random_u64());
    server_config.crc = iomsg_ucx::crc32c_provider();
    let mut server: Server<_> = match Server::new(transport, server_config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ucx bench server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let parent = std::os::unix::process::parent_id();
    let start = Wall::now();
    let mut sink = Sink::default();
    for round in 0u64.. {
        server.poll(clock(start), &mut sink);
        if round % 4096 == 0
            && (std::os::unix::process::parent_id() != parent || start.elapsed() > SERVER_LIFETIME)
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

/// The server child; killed (SIGKILL to its pid) and reaped when dropped.
struct ServerChild {
    child: Child,
    link: Link,
}

impl ServerChild {
    /// Starts a server child over `link` and waits for its address.
    ///
    /// # Panics
    ///
    /// If the child cannot be started or does not say where it listens
    /// within [`LISTEN_TIMEOUT`] (its stderr is the bench's).
    fn spawn(link: Link) -> (ServerChild, SocketAddr) {
        let exe = std::env::current_exe().expect("the bench knows its own executable");
        let mut child = Command::new(&exe)
            .env(ROLE, "server")
            .env(SHARED_MEMORY, if link.shared_memory { "1" } else { "0" })
            .envs(link.env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} as the server: {e}", exe.display()));
        let stdout = child.stdout.take().expect("the child's stdout is piped");
        let server = ServerChild { child, link };
        let (tx, rx) = mpsc::channel();
        // The first line that names the address goes to the bench; the
        // rest (UCX's log, with UCX_LOG_LEVEL set) to its stderr, until
        // the child ends, so that the child never blocks on a full pipe.
        let name = link.name;
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                match line.strip_prefix("listening on ") {
                    Some(addr) if tx.is_some() => {
                        let _ = tx.take().map(|tx| tx.send(addr.to_string()));
                    }
                    _ => eprintln!("[{name} server] {line}"),
                }
            }
        });
        let line = rx.recv_timeout(LISTEN_TIMEOUT).unwrap_or_else(|_| {
            panic!(
                "the {} server child did not say where it listens within {LISTEN_TIMEOUT:?} \
                 (see its stderr above)",
                link.name
            )
        });
        let addr = line.trim().parse().unwrap_or_else(|e| {
            panic!(
                "the {} server child listens on {line:?}, not an address: {e}",
                link.name
            )
        });
        (server, addr)
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            eprintln!(
                "ucx bench: the {} server child (pid {}) had exited early: {status}",
                self.link.name,
                self.child.id()
            );
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The client end: one session over one UCX context, kept across a
/// group's benchmarks.
struct Bench {
    client: Client<UcxTransport<Dial>, WINDOW, Vec<u8>>,
    start: Wall,
    payload: Vec<u8>,
    /// Streamed writes, or writes acknowledged one by one.
    stream: bool,
    link: Link,
    /// Disconnects before the benchmarks began (while connecting).
    connect_drops: u64,
}

impl Bench {
    /// A client of the server at `addr` that sends messages of up to
    /// `max_size` bytes, `window` at most outstanding; returns once its
    /// first message is acknowledged.
    ///
    /// # Panics
    ///
    /// If UCX cannot make a context, or the session fails.
    fn connect(addr: SocketAddr, link: Link, window: u32, max_size: usize, stream: bool) -> Bench {
        // UCX reads its variables when the context is made: now. No UCX
        // context lives in this process at this point (the previous
        // group's client is gone), and the bench runs no other thread that
        // reads the environment.
        for (name, value) in link.env() {
            std::env::set_var(name, value);
        }
        let transport = UcxTransport::client(addr, link.ucx_config())
            .unwrap_or_else(|e| panic!("cannot make a UCX client for {addr} over {link:?}: {e}"));
        let session_id = random_u64();
        let mut config = ClientConfig::new(session_id, random_u64());
        config.crc = iomsg_ucx::crc32c_provider();
        config.window = window;
        let slots = (window as usize).min(WINDOW);
        let storage = vec![0u8; slots * (max_size + 8) + max_size];
        let session = ClientSession::<WINDOW, _>::new(config, Instant::ZERO, storage);
        let mut client = Client::new(transport, session).expect("UCX carries the protocol");
        let most = client.session().limits().max();
        assert!(
            most >= max_size,
            "{max_size}-byte messages do not fit: at most {most} here"
        );
        let mut payload = vec![0u8; max_size];
        workload::fill(session_id, 0, &mut payload);
        let start = Wall::now();
        client.start(clock(start));
        let mut bench = Bench {
            client,
            start,
            payload,
            stream,
            link,
            connect_drops: 0,
        };
        bench.run(1, 64);
        bench.connect_drops = bench.client.session().stats().disconnects;
        bench
    }

    /// Submits `n` messages of `size` bytes and runs until every one is
    /// acknowledged; returns how long that took.
    ///
    /// # Panics
    ///
    /// If the session fails, or the messages are not acknowledged within
    /// [`SAMPLE_LIMIT`].
    fn run(&mut self, n: u64, size: usize) -> Duration {
        let begin = Wall::now();
        let target = self.client.session().next_sn() + n;
        let data = &self.payload[..size];
        let mut failed: Option<FailReason> = None;
        while self.client.session().base_sn() < target {
            while self.client.session().next_sn() < target {
                let msg = match self.stream {
                    true => Message::StreamWrite(data),
                    false => Message::Write(data),
                };
                match self.client.submit(msg) {
                    Ok(_) => {}
                    Err(SubmitError::WindowFull { .. } | SubmitError::BufferFull(_)) => break,
                    Err(e) => panic!("cannot submit a {size}-byte write: {e}"),
                }
            }
            let link = self.link.name;
            self.client
                .poll(clock(self.start), &mut |event: ClientEvent| match event {
                    ClientEvent::Failed(reason) => failed = Some(reason),
                    // Rare, and worth seeing where it happened: the
                    // reconnect and replay are in this sample's time.
                    ClientEvent::Disconnected { epoch, cause } => eprintln!(
                        "ucx bench: the {link} client's connection (epoch {epoch}) dropped: \
                         {cause:?}, during {n} messages of {size} B"
                    ),
                    _ => {}
                });
            if let Some(reason) = failed {
                panic!(
                    "the {} client failed: {reason} (did the server child die? its stderr is \
                     above)",
                    self.link.name
                );
            }
            assert!(
                begin.elapsed() < SAMPLE_LIMIT,
                "{n} messages of {size} B over {} not acknowledged after {SAMPLE_LIMIT:?}: \
                 acknowledged up to sn {} of {target}",
                self.link.name,
                self.client.session().base_sn()
            );
        }
        begin.elapsed()
    }

    /// Closes the session (a `Bye`), for a bounded while; says so if the
    /// connection dropped during the benchmarks (their figures then
    /// include reconnects).
    fn close(mut self) {
        let drops = self.client.session().stats().disconnects - self.connect_drops;
        if drops > 0 {
            eprintln!(
                "ucx bench: warning: the {} client's connection dropped {drops} times during \
                 the benchmarks: their figures include reconnects and replays",
                self.link.name
            );
        }
        self.client.close(clock(self.start));
        let closing = Wall::now();
        while !self.client.session().is_terminal() && closing.elapsed() < Duration::from_secs(1) {
            self.client.poll(clock(self.start), &mut |_| {});
        }
    }
}

/// Streamed writes of every size over `link`, counted in messages, then in
/// bytes.
fn streams(c: &mut Criterion, link: Link) {
    let (server, addr) = ServerChild::spawn(link);
    let max = SIZES[SIZES.len() - 1];
    let mut bench = Bench::connect(addr, link, WINDOW as u32, max, true);
    for (unit, bytes) in [("msgs", false), ("bytes", true)] {
        let mut g = c.benchmark_group(format!("ucx_{}_{unit}", link.name));
        for size in SIZES {
            g.throughput(match bytes {
                true => Throughput::Bytes(size as u64),
                false => Throughput::Elements(1),
            });
            g.bench_function(format!("stream_{size}B"), |b| {
                b.iter_custom(|n| bench.run(n, size))
            });
        }
        g.finish();
    }
    bench.close();
    drop(server);
}

/// io_demo's default workload over tcp: 4 KiB writes, each acknowledged on
/// its own, at most 16 outstanding.
fn window16(c: &mut Criterion) {
    let (server, addr) = ServerChild::spawn(TCP);
    let mut bench = Bench::connect(addr, TCP, 16, 4096, false);
    let mut g = c.benchmark_group("ucx_tcp_window16");
    g.throughput(Throughput::Elements(1));
    g.bench_function("write_4096B_msgs", |b| {
        b.iter_custom(|n| bench.run(n, 4096))
    });
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("write_4096B_bytes", |b| {
        b.iter_custom(|n| bench.run(n, 4096))
    });
    g.finish();
    bench.close();
    drop(server);
}

fn main() -> ExitCode {
    if std::env::var_os(ROLE).is_some_and(|r| r == "server") {
        return serve();
    }
    eprintln!(
        "ucx bench: {}; client and server in separate processes on 127.0.0.1 (UCX_NET_DEVICES=lo)",
        iomsg_ucx::version::ucx_version()
    );
    // About 4 s a benchmark with its analysis, 18 benchmarks and three
    // server children: under two minutes in all.
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    streams(&mut c, TCP);
    streams(&mut c, SHM);
    window16(&mut c);
    c.final_summary();
    ExitCode::SUCCESS
}
