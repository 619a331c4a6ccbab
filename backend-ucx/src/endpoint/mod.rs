//! The API for applications: [`Client`] and [`Server`], one type per
//! role, with everything defaulted. They own the UCX transport, the
//! session, its storage and the clock; the sans-IO layer under them
//! (`iomsg_core::transport::{Client, Server}` over [`UcxTransport`]) stays
//! public for applications that drive several sessions from one loop or
//! keep the server's core themselves.
//!
//! Both types are `Send` (a client or server may be built on one thread
//! and run on another) and not `Sync`: one thread at a time drives it,
//! through `&mut self`.
//!
//! Both report every submit, delivery and event to the observers of
//! [`crate::observe`] (metrics with feature `metrics`, events with
//! feature `tracing`; nothing without them).
//!
//! [`UcxTransport`]: crate::UcxTransport

pub(crate) mod client;
mod error;
pub(crate) mod events;
mod options;
pub(crate) mod server;

pub use client::Client;
pub use error::Error;
pub use options::{ClientOptions, ServerOptions};
pub use server::Server;

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

/// 64 random bits from the operating system (`getrandom(2)`, or
/// `/dev/urandom`), never zero: session ids and tokens.
///
/// # Errors
///
/// Neither source gave bytes (no `/dev/urandom` in a container, a seccomp
/// filter).
pub fn random_u64() -> std::io::Result<u64> {
    crate::transport::random_nonzero().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "neither getrandom(2) nor /dev/urandom gave random bytes",
        )
    })
}

/// The first address `addr` resolves to.
pub(crate) fn resolve(addr: impl std::net::ToSocketAddrs) -> Result<std::net::SocketAddr, Error> {
    addr.to_socket_addrs()
        .map_err(Error::Address)?
        .next()
        .ok_or_else(|| {
            Error::Address(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the name resolved to no address",
            ))
        })
}

/// The shorter of two optional waits.
pub(crate) fn sooner(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
