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

mod crc;
pub(crate) mod endpoint;
pub mod hostile;
pub mod iodemo;
pub mod observe;
pub mod resources;
mod sockaddr;
pub mod status;
#[cfg(feature = "tokio")]
pub mod tokio;
pub mod transport;
pub mod version;
mod worker;

pub use crc::crc32c_provider;
pub use endpoint::client::ClientDriver;
pub use endpoint::server::{ServerCore, ServerDriver};
pub use endpoint::{random_u64, Client, ClientOptions, Error, Server, ServerOptions};
pub use iomsg_core::session::{
    ClientEvent, Delivery, JournalError, ReadRequest, ResumePoint, ServerEvent, ServerHandler,
    Unkept,
};
pub use status::Status;
pub use transport::{
    raise_open_files, sleep_any, Accept, Api, Dial, Liveness, UcxConfig, UcxError, UcxTransport,
    AM_MARK, ASYNC_MAX_EVENTS, FULL_MARK, REUSE_ADDRESS,
};
pub use worker::WaitMode;

/// The README's examples, compiled and run as doctests.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
