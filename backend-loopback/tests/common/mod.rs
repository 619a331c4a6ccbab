//! What several integration tests share: a quiet network and the next
//! instant worth polling at. Each test crate uses part of it.
#![allow(dead_code)]

use core::time::Duration;

use iomsg_core::Instant;
use iomsg_loopback::{Network, NetworkConfig};

/// A network of 5 µs latency and 50 µs failure detection.
pub fn quiet_network() -> Network {
    Network::new(NetworkConfig {
        latency: Duration::from_micros(5),
        detect_delay: Duration::from_micros(50),
    })
}

/// The earliest of the network's next event and `timers`, at least 1 µs
/// after `now` (1 ms after it when nothing is due).
pub fn next_step(net: &Network, timers: [Option<Instant>; 2], now: Instant) -> Instant {
    net.next_event()
        .into_iter()
        .chain(timers.into_iter().flatten())
        .min()
        .unwrap_or(now + Duration::from_millis(1))
        .max(now + Duration::from_micros(1))
}
