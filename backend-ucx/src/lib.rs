//! UCX transport for iomsg: the crate that holds the project's only unsafe
//! code, over the `ucx1-sys` bindings (iomsg's patched copy in
//! `vendor/ucx1-sys`, linked to the UCX that `pkg-config ucx` finds or the
//! one under `IOMSG_UCX_PREFIX`).
//!
//! - [`UcxTransport`]: the core's `Transport` over UCX tag matching, as a
//!   client ([`UcxTransport::client`], a `Connector`) or a server
//!   ([`UcxTransport::server`], a `Listener`); see [`transport`] for how
//!   connections, tags, buffers and requests work.
//! - [`version`]: which UCX the crate was built against and which libucp
//!   this process loaded.
//! - The `iomsg-ucx-peer` binary: one end of a session, for the
//!   multi-process tests.

#![deny(unsafe_op_in_unsafe_fn)]

mod crc;
pub mod hostile;
pub mod resources;
mod sockaddr;
pub mod status;
pub mod transport;
pub mod version;
mod worker;

pub use crc::crc32c_provider;
pub use status::Status;
pub use transport::{
    raise_open_files, sleep_any, Accept, Api, Dial, Liveness, UcxConfig, UcxError, UcxTransport,
    AM_MARK, ASYNC_MAX_EVENTS, FULL_MARK, REUSE_ADDRESS,
};
pub use worker::WaitMode;
