//! iomsg's criterion benches (`cargo bench -p iomsg-benches`): the core's
//! kernels (`benches/core.rs`) and the full protocol over the loopback
//! backend (`benches/loopback.rs`). The library part holds what the
//! benches share.

use std::time::Duration;

use iomsg_core::session::{
    ClientConfig, ClientSession, Delivery, Message, ReadRequest, ServerConfig, ServerHandler,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::wire::{Body, Crc32c, IoMsg};
use iomsg_core::{workload, Instant};
use iomsg_loopback::{ClientPort, Network, NetworkConfig, ServerPort};

/// The header-only message the header kernels emit and parse (an `Ack`),
/// shared by `benches/core.rs` and the `kernels` example.
pub fn ack() -> IoMsg<'static> {
    IoMsg {
        session: 7,
        epoch: 1,
        sn: 42,
        ack: 41,
        validate: false,
        stream: false,
        body: Body::Ack,
    }
}

/// A server application that takes every message and answers reads with
/// the workload's pattern.
#[derive(Default)]
pub struct Sink {
    /// Messages taken.
    pub taken: u64,
    /// Bytes of journal records handed over (journal on).
    pub journal_bytes: u64,
}

impl ServerHandler for Sink {
    fn deliver(&mut self, _msg: Delivery<'_>) {
        self.taken += 1;
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn journal(&mut self, record: &[u8]) {
        self.journal_bytes += record.len() as u64;
    }
}

/// A client and a server over the loopback network, one thread, virtual
/// time: the full protocol (sessions, acks, tracker, the application's
/// payloads) without the simulation's ground truth.
pub struct Pair {
    client: Client<ClientPort, 1024, Vec<u8>>,
    server: Server<ServerPort>,
    sink: Sink,
    now: Instant,
    payload: Vec<u8>,
}

impl Pair {
    /// A connected pair whose client sends streamed writes of `size`
    /// bytes.
    ///
    /// # Panics
    ///
    /// If the loopback network refuses to listen (it never does here).
    pub fn new(size: usize) -> Pair {
        Pair::with_crc(size, Crc32c::BUILTIN)
    }

    /// [`Pair::new`] with both ends computing CRCs with `crc` (the
    /// benches hand in iomsg-ucx's run-time detected instruction, what
    /// the library's users get by default).
    ///
    /// # Panics
    ///
    /// If the loopback network refuses to listen (it never does here).
    pub fn with_crc(size: usize, crc: Crc32c) -> Pair {
        Pair::build(size, crc, false)
    }

    /// [`Pair::with_crc`] with the server keeping a journal (its records
    /// are counted, not stored: the core's share of the cost).
    ///
    /// # Panics
    ///
    /// If the loopback network refuses to listen (it never does here).
    pub fn with_journal(size: usize, crc: Crc32c) -> Pair {
        Pair::build(size, crc, true)
    }

    fn build(size: usize, crc: Crc32c, journal: bool) -> Pair {
        let net = Network::new(NetworkConfig {
            latency: Duration::from_micros(1),
            detect_delay: Duration::from_micros(50),
        });
        let port = net.listen(1, Instant::ZERO).expect("a fresh network");
        let mut server_config = ServerConfig::new(1);
        server_config.crc = crc;
        server_config.journal = journal;
        let server = Server::new(port, server_config).expect("loopback carries the protocol");
        let storage = vec![0u8; 1025 * size.max(1)];
        let mut client_config = ClientConfig::new(7, 8);
        client_config.crc = crc;
        let session = ClientSession::new(client_config, Instant::ZERO, storage);
        let client = Client::new(net.client(1), session).expect("loopback carries the protocol");
        let mut payload = vec![0u8; size];
        workload::fill(7, 0, &mut payload);
        let mut pair = Pair {
            client,
            server,
            sink: Sink::default(),
            now: Instant::ZERO,
            payload,
        };
        pair.client.start(pair.now);
        pair.run(1);
        pair
    }

    /// Sends `n` more messages and runs until all are acknowledged.
    pub fn run(&mut self, n: u64) {
        let target = self.client.session().next_sn() + n;
        let mut guard = 0u64;
        while self.client.session().base_sn() < target {
            while self.client.session().next_sn() < target
                && self
                    .client
                    .submit(Message::StreamWrite(&self.payload))
                    .is_ok()
            {}
            self.client.poll(self.now, &mut |_| {});
            self.server.poll(self.now, &mut self.sink);
            self.now = self.now + Duration::from_micros(1);
            guard += 1;
            assert!(
                guard < 100 * n + 100_000,
                "the pair stopped making progress"
            );
        }
    }

    /// Messages the server's application took.
    pub fn taken(&self) -> u64 {
        self.sink.taken
    }

    /// Bytes of journal records the server handed over.
    pub fn journal_bytes(&self) -> u64 {
        self.sink.journal_bytes
    }
}

/// The repository README's Rust examples, compiled and run as doctests
/// (this crate is never published: the README is outside every package).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The Rust examples of `docs/embedding.md`, compiled and run as
/// doctests (every other page of `docs/` holds none).
#[cfg(doctest)]
#[doc = include_str!("../../docs/embedding.md")]
struct EmbeddingDoctests;

#[cfg(test)]
mod doc_pages {
    /// The pages whose Rust examples run as doctests above.
    const DOCTESTED: [&str; 2] = ["README.md", "docs/embedding.md"];

    /// A page of `docs/` (or the README) with a Rust example that no
    /// doctest above includes would go unchecked: every such page is in
    /// [`DOCTESTED`].
    #[test]
    fn every_page_with_rust_examples_is_doctested() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let mut pages = vec!["README.md".to_string()];
        for e in std::fs::read_dir(format!("{root}/docs")).expect("docs/") {
            let name = e.expect("an entry").file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".md") {
                pages.push(format!("docs/{name}"));
            }
        }
        let mut unchecked = Vec::new();
        for page in &pages {
            let text = std::fs::read_to_string(format!("{root}/{page}")).expect("a page");
            let rust = text.lines().any(|l| l.trim_start().starts_with("```rust"));
            if rust && !DOCTESTED.contains(&page.as_str()) {
                unchecked.push(page.clone());
            }
        }
        assert!(
            unchecked.is_empty(),
            "pages with Rust examples no doctest runs: {unchecked:?}"
        );
        assert!(pages.len() > DOCTESTED.len(), "docs/ was read");
    }
}
