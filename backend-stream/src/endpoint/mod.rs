//! The API for applications: [`Client`] and [`Server`], one type per
//! role, with everything defaulted. They own the stream transport, the
//! session, its storage and the clock; the sans-IO layer under them
//! (`iomsg_core::transport::{Client, Server}` over [`StreamTransport`])
//! stays public for applications that drive several sessions from one
//! loop or keep the server's core themselves.
//!
//! Both types are `Send` (a client or server may be built on one thread
//! and run on another) and not `Sync`: one thread at a time drives it,
//! through `&mut self`.
//!
//! [`StreamTransport`]: crate::StreamTransport

pub(crate) mod client;
mod error;
pub(crate) mod events;
mod options;
pub(crate) mod server;

pub use client::Client;
pub use error::Error;
pub use options::{ClientOptions, ServerOptions};
pub use server::Server;

use std::io::Read;
use std::time::{Duration, Instant as Wall};

use iomsg_core::Instant;

/// The protocol's clock for one endpoint: microseconds since it was made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock(Wall);

impl Clock {
    pub(crate) fn start() -> Clock {
        Clock(Wall::now())
    }

    pub(crate) fn now(self) -> Instant {
        Instant::since(self.0)
    }

    /// How long from now until `at` (zero if it passed).
    pub(crate) fn until(self, at: Instant) -> Duration {
        at.saturating_since(self.now())
    }
}

/// 64 random bits from the operating system (`/dev/urandom`), never
/// zero: session ids, tokens and server instance ids.
///
/// # Errors
///
/// `/dev/urandom` could not be read (missing in a container, a sandbox).
pub fn random_u64() -> std::io::Result<u64> {
    let mut file = std::fs::File::open("/dev/urandom")?;
    for _ in 0..8 {
        let mut b = [0u8; 8];
        file.read_exact(&mut b)?;
        let k = u64::from_le_bytes(b);
        if k != 0 {
            return Ok(k);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "/dev/urandom gave only zeros",
    ))
}

/// The shorter of two optional waits.
pub(crate) fn sooner(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
