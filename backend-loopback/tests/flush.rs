//! The `Server` driver calls `ServerHandler::flush` before any reply goes
//! out, so an application that keeps what it took in batches has kept
//! every message an acknowledgement covers. Ground truth: what the
//! application kept at its flushes, against what the client saw acked.

mod common;

use core::time::Duration;

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, Message, ReadRequest, ServerConfig,
    ServerHandler,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::Instant;
use iomsg_loopback::{Network, NetworkConfig};

/// Keeps deliveries in a batch until `flush`.
#[derive(Default)]
struct Batching {
    batch: Vec<u64>,
    kept: Vec<u64>,
    flushes: u64,
}

impl ServerHandler for Batching {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.batch.push(d.sn);
    }
    fn respond(&mut self, _: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
    fn flush(&mut self) -> Result<(), iomsg_core::session::Unkept> {
        self.flushes += 1;
        self.kept.append(&mut self.batch);
        Ok(())
    }
}

#[test]
fn nothing_is_acknowledged_before_the_application_flushed_it() {
    let net = Network::new(NetworkConfig {
        latency: Duration::from_micros(20),
        detect_delay: Duration::from_micros(100),
    });
    let port = net.listen(1, Instant::ZERO).expect("a free address");
    let mut server = Server::new(port, ServerConfig::new(7)).expect("a server");
    let config = ClientConfig::new(0x5e55, 0x70ce);
    let session = ClientSession::<256, _>::new(config, Instant::ZERO, vec![0u8; 256 * 100]);
    let mut client = Client::new(net.client(1), session).expect("a client");
    let mut app = Batching::default();
    let mut acked = 0u64;
    let mut now = Instant::ZERO;
    client.start(now);
    let total = 5_000u64;
    let mut next = 0u64;
    let mut steps = 0u64;
    while acked < total {
        while next < total && client.submit(Message::Write(&next.to_le_bytes())).is_ok() {
            next += 1;
        }
        client.poll(now, &mut |e| {
            if let ClientEvent::Acked { upto } = e {
                acked = upto;
            }
        });
        server.poll(now, &mut app);
        // Every sn below the client's ack was kept by a flush.
        let mut kept = app.kept.clone();
        kept.sort_unstable();
        kept.dedup();
        assert!(
            kept.len() as u64 >= acked
                && kept
                    .iter()
                    .take(acked as usize)
                    .eq(&(0..acked).collect::<Vec<_>>()),
            "acked {acked} with {} kept",
            kept.len()
        );
        now = common::next_step(&net, [client.poll_timeout(), server.poll_timeout()], now);
        steps += 1;
        assert!(steps < 1_000_000, "stuck at acked {acked}");
    }
    assert!(
        app.flushes > 0 && app.flushes < total,
        "batches: {}",
        app.flushes
    );
}
