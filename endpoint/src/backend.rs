//! The seam between the application layer and a transport: [`Backend`],
//! with [`Dial`] for a client's end and [`Accept`] for a server's.
//!
//! A backend is the core's [`Transport`] plus what an endpoint needs to
//! sleep when idle and to be built from an address: `iomsg-ucx` and
//! `iomsg-stream` each implement it in a few dozen lines, and
//! [`Client`](crate::Client) and [`Server`](crate::Server) (and their
//! tokio forms) are written once over it.

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use iomsg_core::transport::{Connector, Listener, Transport};
use iomsg_core::wire::Crc32c;

use crate::addr::{ParseAddr, ToAddr};
use crate::Error;

/// A transport an endpoint can run on.
pub trait Backend: Transport + Send + Sized + 'static {
    /// The backend's name in errors and logs (`"UCX"`, `"stream"`).
    const NAME: &'static str;
    /// The most messages a client's window may hold on this backend.
    const MAX_WINDOW: u32;
    /// Where a server listens and a client connects.
    type Addr: ParseAddr
        + ToAddr<Self::Addr>
        + Clone
        + fmt::Display
        + fmt::Debug
        + Send
        + Sync
        + 'static;
    /// The transport's own settings (`ClientOptions::transport`).
    type Config: Clone + fmt::Debug + Default + Send + Sync + 'static;

    /// The CRC32C provider for the session on this backend (the core's
    /// own unless the backend has a faster one for this CPU).
    fn crc() -> Crc32c {
        Crc32c::BUILTIN
    }

    /// Sleeps until the transport may have work, `max` at most. Called
    /// only after [`Transport::arm`] said `Armed`.
    ///
    /// # Errors
    ///
    /// Waiting failed (other than by a signal).
    fn sleep(&mut self, max: Duration) -> io::Result<()>;

    /// A descriptor that becomes readable when the transport may have
    /// work, for an async runtime to wait on (the tokio driver registers
    /// a duplicate of it).
    ///
    /// # Errors
    ///
    /// The transport has no such descriptor (it was built to spin).
    fn ready_fd(&self) -> io::Result<BorrowedFd<'_>>;

    /// Wakeups already pending that an edge-triggered waiter would miss
    /// (UCX reports some only here); zero by default.
    ///
    /// # Errors
    ///
    /// The transport could not tell.
    fn take_wakeups(&self) -> io::Result<usize> {
        Ok(0)
    }

    /// The transport's own next deadline (UCX's heartbeats), which the
    /// endpoint's sleep must not pass; none by default.
    fn poll_delay(&self) -> Option<Duration> {
        None
    }
}

/// What a client's transport is built with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DialSetup<C> {
    /// The transport's own settings.
    pub config: C,
    /// Spin when idle instead of sleeping.
    pub busy_poll: bool,
}

impl<C> DialSetup<C> {
    /// A client transport's setup: `config`, spinning when idle if
    /// `busy_poll`.
    pub fn new(config: C, busy_poll: bool) -> DialSetup<C> {
        DialSetup { config, busy_poll }
    }
}

/// What a server's transport is built with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BindSetup<C> {
    /// The transport's own settings.
    pub config: C,
    /// Spin when idle instead of sleeping.
    pub busy_poll: bool,
    /// Connections at once; one past it is refused and told why.
    pub max_connections: usize,
}

/// A backend's client end: dials one server.
pub trait Dial: Backend + Connector {
    /// A transport that connects to `addr` (the first attempt starts at
    /// the driver's first poll).
    ///
    /// # Errors
    ///
    /// [`Error::Setup`] if the transport cannot be made.
    fn dial(addr: &Self::Addr, setup: DialSetup<Self::Config>) -> Result<Self, Error>;
}

/// A backend's server end: listens and accepts.
pub trait Accept: Backend + Listener {
    /// A transport listening on `addr`.
    ///
    /// # Errors
    ///
    /// [`Error::Setup`] if the transport cannot be made, [`Error::Bind`]
    /// if the address cannot be listened on.
    fn bind(addr: &Self::Addr, setup: BindSetup<Self::Config>) -> Result<Self, Error>;

    /// The address it listens on (the port chosen for port 0).
    ///
    /// # Errors
    ///
    /// The transport could not tell.
    fn local_addr(&self) -> Result<Self::Addr, Error>;
}
