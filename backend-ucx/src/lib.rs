//! Messages over UCX whose loss is never silent: the UCX backend of iomsg.
//!
//! - [`Client`] and [`Server`] (with [`ClientOptions`], [`ServerOptions`],
//!   [`Error`]): the API for applications, one type per role. Both are
//!   `Send` and not `Sync`.
//! - [`tokio`] (feature `tokio`): the same for async code; sends resolve
//!   when acknowledged, deliveries are a stream.
//! - [`UcxTransport`]: the core's `Transport` over UCX tag matching or
//!   active messages, as a client ([`UcxTransport::client`], a
//!   `Connector`) or a server ([`UcxTransport::server`], a `Listener`),
//!   for the sans-IO drivers of `iomsg_core::transport`; see [`transport`]
//!   for how connections, tags, buffers and requests work.
//! - [`observe`]: metrics (feature `metrics`) and tracing events
//!   (feature `tracing`) for clients and servers, which [`Client`] and
//!   [`Server`] report to; nothing without the features.
//! - [`version`]: which UCX the crate was built against and which libucp
//!   this process loaded; [`crc32c_provider`]: the CPU's CRC32C for the
//!   core.
//!
//! ```no_run
//! # fn main() -> Result<(), iomsg_ucx::Error> {
//! let mut client = iomsg_ucx::Client::connect("127.0.0.1:13337", Default::default())?;
//! let sn = client.send(b"hello")?;
//! client.wait_acked(sn, std::time::Duration::from_secs(5))?; // the server took it
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! - `tokio`: the async API, [`tokio`].
//! - `metrics`: counters and histograms (submits, acks, replays, losses,
//!   handshake and ack latency) through the `metrics` facade; names,
//!   types and units in [`observe`].
//! - `tracing`: `tracing` events for connections, handshakes, losses and
//!   replays; levels and fields in [`observe`].
//!
//! None is on by default; without `metrics` and `tracing` the observers
//! are empty and cost nothing.
//!
//! This crate holds the project's only unsafe code, over the
//! `iomsg-ucx-sys` bindings (linked to the UCX that `pkg-config ucx` finds
//! or the one under `IOMSG_UCX_PREFIX`).

#![deny(unsafe_op_in_unsafe_fn)]

mod backend;
mod crc;
pub mod hostile;
pub mod iodemo;
pub mod resources;
mod sockaddr;
pub mod status;
pub mod transport;
pub mod version;
mod worker;

pub use backend::UcxOptions;
pub use crc::crc32c_provider;
pub use iomsg_core::session::{
    ClientEvent, Delivery, JournalError, ReadRequest, ResumePoint, ServerEvent, ServerHandler,
    Unkept,
};
pub use iomsg_endpoint::{observe, random_u64, AddrError, Error, ServerCore, ToAddr};
pub use status::Status;
pub use transport::{
    raise_open_files, sleep_any, Accept, Api, Dial, Liveness, UcxConfig, UcxError, UcxTransport,
    AM_MARK, ASYNC_MAX_EVENTS, FULL_MARK, REUSE_ADDRESS,
};
pub use worker::WaitMode;

/// One session to one server over UCX (see [`iomsg_endpoint::Client`]).
pub type Client = iomsg_endpoint::Client<UcxTransport<Dial>>;
/// A server over UCX (see [`iomsg_endpoint::Server`]).
pub type Server<H> = iomsg_endpoint::Server<UcxTransport<Accept>, H>;
/// How a UCX [`Client`] connects and sends; the UCX setters are
/// [`UcxOptions`].
pub type ClientOptions = iomsg_endpoint::ClientOptions<UcxConfig>;
/// How a UCX [`Server`] listens and serves; the UCX setters are
/// [`UcxOptions`].
pub type ServerOptions = iomsg_endpoint::ServerOptions<UcxConfig>;
/// The sans-IO driver under a [`Client`].
pub type ClientDriver = iomsg_endpoint::ClientDriver<UcxTransport<Dial>>;
/// The sans-IO driver under a [`Server`].
pub type ServerDriver = iomsg_endpoint::ServerDriver<UcxTransport<Accept>>;

/// The async API over UCX (feature `tokio`): see [`iomsg_endpoint::tokio`].
///
/// ```no_run
/// # async fn demo() -> Result<(), iomsg_ucx::Error> {
/// use iomsg_ucx::tokio::{Client, Server};
/// let mut server = Server::bind("127.0.0.1:0", Default::default()).await?;
/// let client = Client::connect(server.local_addr(), Default::default()).await?;
/// let sn = client.send(b"hello").await?; // resolves once acknowledged
/// let delivered = server.next().await.expect("the server runs");
/// assert_eq!((delivered.sn, &delivered.data[..]), (sn, &b"hello"[..]));
/// # Ok(()) }
/// ```
#[cfg(feature = "tokio")]
pub mod tokio {
    use crate::{Accept, Dial, UcxTransport};
    pub use iomsg_endpoint::tokio::{Batch, Delivered, Keeper};

    /// [`iomsg_endpoint::tokio::Client`] over UCX.
    pub type Client = iomsg_endpoint::tokio::Client<UcxTransport<Dial>>;
    /// [`iomsg_endpoint::tokio::Server`] over UCX.
    pub type Server = iomsg_endpoint::tokio::Server<UcxTransport<Accept>>;
    /// [`iomsg_endpoint::tokio::Receipt`] over UCX.
    pub type Receipt = iomsg_endpoint::tokio::Receipt<UcxTransport<Dial>>;
}

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
