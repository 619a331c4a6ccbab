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
mod options;
pub(crate) mod server;

pub use client::Client;
pub use error::Error;
pub use options::{ClientOptions, ServerOptions};
pub use server::Server;

pub use iomsg_endpoint::random_u64;
pub(crate) use iomsg_endpoint::{sooner, Clock};

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
