//! The `iomsg` command's parts: io_demo-style server and client over UCX,
//! TCP or Unix sockets, the hostile peer's front end and the metrics
//! exporter. `soak`, the audit judges and the exactly-once files are the
//! lab's ([`iomsg_lab`]). Feature `ucx` (on by default) brings UCX,
//! io_demo and the hostile peer.

pub mod client;
pub mod common;
pub mod exporter;
#[cfg(feature = "ucx")]
pub mod hostile;
#[cfg(feature = "ucx")]
pub mod iodemo_client;
#[cfg(feature = "ucx")]
pub mod iodemo_server;
pub mod server;
