//! Messages over TCP or Unix domain sockets whose loss is never silent:
//! the stream backend of iomsg.
//!
//! - [`Client`] and [`Server`] (with [`ClientOptions`], [`ServerOptions`],
//!   [`Error`]): the API for applications, one type per role. Both are
//!   `Send` and not `Sync`.
//! - [`tokio`] (feature `tokio`): the same for async code; sends resolve
//!   when acknowledged, deliveries are a stream.
//! - The journal and resume for exactly once
//!   ([`ServerOptions::journal`](iomsg_endpoint::ServerOptions::journal),
//!   [`Client::resume`](iomsg_endpoint::Client::resume)), and metrics and
//!   tracing ([`observe`], features `metrics` and `tracing`): the same
//!   application layer as every backend's, `iomsg-endpoint`.
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
mod backend;
mod conn;
mod socket;
pub mod transport;

pub use addr::Addr;
pub use backend::StreamOptions;
pub use conn::CORRUPT_STREAM;
pub use iomsg_core::session::{
    ClientEvent, Delivery, JournalError, ReadRequest, ResumePoint, ServerEvent, ServerHandler,
    Unkept,
};
pub use iomsg_endpoint::{observe, random_u64, AddrError, Error, ServerCore, ToAddr};
pub use transport::{Accept, Dial, Role, StreamConfig, StreamRx, StreamTransport, StreamTx};

/// One session to one server over a stream (see [`iomsg_endpoint::Client`]).
pub type Client = iomsg_endpoint::Client<StreamTransport<Dial>>;
/// A server over streams (see [`iomsg_endpoint::Server`]).
pub type Server<H> = iomsg_endpoint::Server<StreamTransport<Accept>, H>;
/// How a stream [`Client`] connects and sends; the stream setters are
/// [`StreamOptions`].
pub type ClientOptions = iomsg_endpoint::ClientOptions<StreamConfig>;
/// How a stream [`Server`] listens and serves; the stream setters are
/// [`StreamOptions`].
pub type ServerOptions = iomsg_endpoint::ServerOptions<StreamConfig>;
/// The sans-IO driver under a [`Client`].
pub type ClientDriver = iomsg_endpoint::ClientDriver<StreamTransport<Dial>>;
/// The sans-IO driver under a [`Server`].
pub type ServerDriver = iomsg_endpoint::ServerDriver<StreamTransport<Accept>>;

/// The async API over streams (feature `tokio`): see
/// [`iomsg_endpoint::tokio`].
///
/// ```no_run
/// # async fn demo() -> Result<(), iomsg_stream::Error> {
/// use iomsg_stream::tokio::{Client, Server};
/// let mut server = Server::bind("127.0.0.1:0", Default::default()).await?;
/// let client = Client::connect(server.local_addr(), Default::default()).await?;
/// let sn = client.send(b"hello").await?; // resolves once acknowledged
/// let delivered = server.next().await.expect("the server runs");
/// assert_eq!((delivered.sn, &delivered.data[..]), (sn, &b"hello"[..]));
/// # Ok(()) }
/// ```
#[cfg(feature = "tokio")]
pub mod tokio {
    use crate::{Accept, Dial, StreamTransport};
    pub use iomsg_endpoint::tokio::{Batch, Delivered, Keeper};

    /// [`iomsg_endpoint::tokio::Client`] over streams.
    pub type Client = iomsg_endpoint::tokio::Client<StreamTransport<Dial>>;
    /// [`iomsg_endpoint::tokio::Server`] over streams.
    pub type Server = iomsg_endpoint::tokio::Server<StreamTransport<Accept>>;
    /// [`iomsg_endpoint::tokio::Receipt`] over streams.
    pub type Receipt = iomsg_endpoint::tokio::Receipt<StreamTransport<Dial>>;
}

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
