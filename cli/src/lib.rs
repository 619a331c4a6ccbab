//! The `iomsg` command's parts: io_demo-style server and client over UCX,
//! TCP or Unix sockets, `info`, and `soak`, the field report's
//! reproduction with its verdict from ground truth kept apart from the
//! protocol. Feature `ucx` (on by default) brings UCX, io_demo and the
//! hostile peer.

pub mod args;
pub mod audit;
pub mod client;
pub mod common;
pub mod durable;
pub mod exporter;
#[cfg(feature = "ucx")]
pub mod hostile;
pub mod info;
#[cfg(feature = "ucx")]
pub mod iodemo_client;
#[cfg(feature = "ucx")]
pub mod iodemo_server;
pub mod journal;
pub mod outbox;
pub mod plot;
pub mod server;
pub mod soak;
pub mod transport;
