//! The API for applications: [`Client`] and [`Server`], one type per
//! role, with everything defaulted. They own the stream transport, the
//! session, its storage and the clock; the sans-IO layer under them
//! (`iomsg_core::transport::{Client, Server}` over [`StreamTransport`])
//! stays public for applications that drive several sessions from one
//! loop or keep the server's core themselves.
//!
//! Both types are `Send` (a client or server may be built on one thread
//! and run on another) and not `Sync`: one thread at a time drives it,
//! through `&mut self`.
//!
//! [`StreamTransport`]: crate::StreamTransport

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
