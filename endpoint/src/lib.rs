//! The application layer of iomsg above its transports, written once for
//! every backend: `iomsg-ucx` and `iomsg-stream` implement [`Backend`]
//! and name these types for themselves (`iomsg_ucx::Client` is
//! `Client<UcxTransport<Dial>>`), so every feature below works the same
//! on each.
//!
//! - [`Client`] and [`Server`], with [`ClientOptions`], [`ServerOptions`]
//!   and the one [`Error`]: one type per role, everything defaulted; the
//!   journal and resume for exactly once ([`ServerOptions::journal`],
//!   [`Client::resume`]);
//! - [`tokio`] (feature `tokio`): the same for async code;
//! - [`observe`]: metrics (feature `metrics`) and tracing events (feature
//!   `tracing`), reported by every client and server;
//! - [`Backend`], [`Dial`], [`Accept`]: the seam a transport implements;
//!   [`ToAddr`] and [`AddrError`]: addresses as the application gives
//!   them;
//! - [`Clock`], [`random_u64`], [`events`]: the endpoint's clock, its
//!   ids, and what a session told until the application asks.

#![forbid(unsafe_code)]

mod addr;
mod backend;
mod client;
mod error;
pub mod events;
pub mod observe;
mod options;
pub mod progress;
mod server;
#[cfg(feature = "tokio")]
pub mod tokio;

pub use addr::{AddrError, ParseAddr, ToAddr};
pub use backend::{Accept, Backend, BindSetup, Dial, DialSetup};
pub use client::{Client, ClientDriver};
pub use error::{BoxError, Error};
pub use options::{ClientOptions, ServerOptions};
pub use progress::{Idle, Progress};
pub use server::{Server, ServerCore, ServerDriver, CONNS, SESSIONS, WORDS};

use std::time::{Duration, Instant as Wall};

/// The send window's capacity in messages: the most a client may have
/// unacknowledged on any backend (each backend may allow fewer,
/// [`Backend::MAX_WINDOW`]).
pub const WINDOW: usize = 1024;

use iomsg_core::Instant;

/// The protocol's clock for one endpoint: microseconds since it was made.
#[derive(Clone, Copy, Debug)]
pub struct Clock(Wall);

impl Clock {
    /// A clock that reads zero now.
    pub fn start() -> Clock {
        Clock(Wall::now())
    }

    /// The protocol's time now.
    pub fn now(self) -> Instant {
        Instant::since(self.0)
    }

    /// How long from now until `at` (zero if it passed).
    pub fn until(self, at: Instant) -> Duration {
        at.saturating_since(self.now())
    }
}

/// The shorter of two optional waits.
pub fn sooner(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// 64 random bits from the operating system (`getrandom(2)`, or
/// `/dev/urandom` where that is missing), never zero: session ids,
/// tokens and server instance ids.
///
/// # Errors
///
/// The operating system gave no random bytes (no `getrandom(2)` and no
/// `/dev/urandom`, a seccomp filter); the error says what failed.
pub fn random_u64() -> std::io::Result<u64> {
    random_masked(u64::MAX)
}

/// Random bits under `mask`, never zero (eight draws at most).
///
/// # Errors
///
/// As [`random_u64`]; and eight draws in a row were zero under `mask`.
pub fn random_masked(mask: u64) -> std::io::Result<u64> {
    for _ in 0..8 {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("the operating system gave no random bytes: {e}"),
            )
        })?;
        let k = u64::from_le_bytes(b) & mask;
        if k != 0 {
            return Ok(k);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "eight random draws in a row were zero",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bits_are_never_zero_and_differ() {
        let a = random_u64().unwrap();
        let b = random_u64().unwrap();
        assert!(a != 0 && b != 0);
        assert_ne!(a, b, "two draws of 64 bits");
        for _ in 0..1000 {
            let k = random_masked(0xff).unwrap();
            assert!(k != 0 && k <= 0xff);
        }
    }

    #[test]
    fn the_clock_counts_from_its_start_and_waits_until_a_deadline() {
        let c = Clock::start();
        let t0 = c.now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.now() > t0);
        assert_eq!(c.until(t0), Duration::ZERO, "a deadline passed");
        let later = c.now() + Duration::from_secs(10);
        assert!(c.until(later) > Duration::from_secs(9));
        assert_eq!(
            sooner(None, Some(Duration::from_secs(1))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            sooner(Some(Duration::from_secs(2)), Some(Duration::from_secs(1))),
            Some(Duration::from_secs(1))
        );
        assert_eq!(sooner(None, None), None);
    }
}
