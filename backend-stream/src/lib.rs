//! Messages over TCP or Unix domain sockets whose loss is never silent:
//! the stream backend of iomsg.
//!
//! - [`Client`] and [`Server`] (with [`ClientOptions`], [`ServerOptions`],
//!   [`Error`]): the API for applications, one type per role. Both are
//!   `Send` and not `Sync`.
//! - `tokio` (feature `tokio`): the same for async code; sends resolve
//!   when acknowledged, deliveries are a stream.
//! - [`StreamTransport`]: the core's `Transport` over non-blocking
//!   sockets, as a client ([`StreamTransport::client`], a `Connector`) or
//!   a server ([`StreamTransport::server`], a `Listener`), for the sans-IO
//!   drivers of `iomsg_core::transport`.
//! - [`Addr`]: `"127.0.0.1:7000"` or `"unix:/run/app.sock"`.
//!
//! ```no_run
//! # fn main() -> Result<(), iomsg_stream::Error> {
//! use std::time::Duration;
//! let mut client = iomsg_stream::Client::connect("127.0.0.1:7000", Default::default())?;
//! let sn = client.send(b"hello")?;
//! client.wait_acked(sn, Duration::from_secs(5))?; // the server took it
//! client.close(Duration::from_secs(5))?;
//! # Ok(()) }
//! ```
//!
//! The crate has no `unsafe` code: sockets are `mio`'s, and a blocking
//! client or server sleeps on them through `mio::Poll`.

#![forbid(unsafe_code)]

mod addr;
mod conn;
pub(crate) mod endpoint;
mod socket;
#[cfg(feature = "tokio")]
pub mod tokio;
pub mod transport;

pub use addr::{Addr, AddrError, ToAddr};
pub use conn::CORRUPT_STREAM;
pub use endpoint::client::ClientDriver;
pub use endpoint::server::{ServerCore, ServerDriver};
pub use endpoint::{random_u64, Client, ClientOptions, Error, Server, ServerOptions};
pub use iomsg_core::session::{
    ClientEvent, Delivery, ReadRequest, ServerEvent, ServerHandler, Unkept,
};
pub use transport::{Accept, Dial, Role, StreamConfig, StreamRx, StreamTransport, StreamTx};

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
