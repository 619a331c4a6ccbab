//! The `iomsg` command's parts: io_demo-style server and client over UCX,
//! `info`, and `soak`, the field report's reproduction on real UCX with
//! its verdict from ground truth kept apart from the protocol.

pub mod args;
pub mod audit;
pub mod client;
pub mod common;
pub mod durable;
pub mod exporter;
pub mod hostile;
pub mod info;
pub mod iodemo_client;
pub mod iodemo_server;
pub mod journal;
pub mod outbox;
pub mod plot;
pub mod server;
pub mod soak;
