//! UCX as an [`iomsg_endpoint::Backend`]: what makes
//! [`Client`](crate::Client), [`Server`](crate::Server) and the
//! [`tokio`](crate::tokio) forms run over [`UcxTransport`], and
//! [`UcxOptions`], the UCX setters of their options.

use std::io;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use iomsg_core::wire::Crc32c;
use iomsg_endpoint::{Backend, BindSetup, DialSetup, Error};

use crate::{Accept, Api, Dial, Status, UcxConfig, UcxTransport, WaitMode};

/// The backend's name in errors.
const NAME: &str = "UCX";

fn io_error(status: Status) -> io::Error {
    io::Error::other(status)
}

fn mode(busy_poll: bool) -> WaitMode {
    if busy_poll {
        WaitMode::BusyPoll
    } else {
        WaitMode::Blocking
    }
}

macro_rules! ucx_backend {
    ($role:ty) => {
        impl Backend for UcxTransport<$role> {
            const NAME: &'static str = NAME;
            const MAX_WINDOW: u32 = MAX_WINDOW;
            type Addr = SocketAddr;
            type Config = UcxConfig;

            fn crc() -> Crc32c {
                crate::crc32c_provider()
            }
            fn sleep(&mut self, max: Duration) -> io::Result<()> {
                UcxTransport::sleep(self, max).map(drop).map_err(io_error)
            }
            fn ready_fd(&self) -> io::Result<BorrowedFd<'_>> {
                let fd = self.event_fd().map_err(io_error)?;
                // SAFETY: the worker's event fd is open from the worker's
                // creation until its destruction in the transport's drop,
                // and the borrow lasts no longer than `&self`.
                Ok(unsafe { BorrowedFd::borrow_raw(fd) })
            }
            fn take_wakeups(&self) -> io::Result<usize> {
                UcxTransport::take_wakeups(self).map_err(io_error)
            }
            fn poll_delay(&self) -> Option<Duration> {
                UcxTransport::poll_delay(self)
            }
        }
    };
}

/// The most messages a UCX client keeps unacknowledged.
const MAX_WINDOW: u32 = 256;

ucx_backend!(Dial);
ucx_backend!(Accept);

impl iomsg_endpoint::Dial for UcxTransport<Dial> {
    fn dial(addr: &SocketAddr, setup: DialSetup<UcxConfig>) -> Result<Self, Error> {
        let mut config = setup.config;
        config.mode = mode(setup.busy_poll);
        UcxTransport::client(*addr, config).map_err(|e| Error::setup(NAME, e))
    }
}

impl iomsg_endpoint::Accept for UcxTransport<Accept> {
    fn bind(addr: &SocketAddr, setup: BindSetup<UcxConfig>) -> Result<Self, Error> {
        let mut config = setup.config;
        config.mode = mode(setup.busy_poll);
        config.max_connections = setup.max_connections;
        UcxTransport::server(*addr, config).map_err(|e| {
            if e.what.starts_with("listening") {
                Error::Bind {
                    addr: addr.to_string(),
                    source: Box::new(e),
                }
            } else {
                Error::setup(NAME, e)
            }
        })
    }
    fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(UcxTransport::local_addr(self))
    }
}

/// The UCX setters of [`ClientOptions`](crate::ClientOptions) and
/// [`ServerOptions`](crate::ServerOptions): bring the trait into scope
/// (`use iomsg_ucx::UcxOptions;`) to use them.
///
/// ```
/// use iomsg_ucx::{Api, ClientOptions, UcxOptions};
/// let options = ClientOptions::default().api(Api::Am).shared_memory(true);
/// # let _ = options;
/// ```
pub trait UcxOptions: Sized {
    /// Which UCX API carries the frames; both ends must use the same
    /// (default [`Api::Tag`]).
    #[must_use]
    fn api(self, api: Api) -> Self;
    /// Let UCX carry frames over shared memory between ends on one host
    /// (both ends must say the same; default off).
    #[must_use]
    fn shared_memory(self, on: bool) -> Self;
    /// Every transport setting ([`UcxConfig`]), for what the setters do
    /// not reach; its `mode` replaces `busy_poll`.
    #[must_use]
    fn ucx(self, config: UcxConfig) -> Self;
}

impl UcxOptions for crate::ClientOptions {
    fn api(mut self, api: Api) -> Self {
        self.transport_mut().api = api;
        self
    }
    fn shared_memory(mut self, on: bool) -> Self {
        self.transport_mut().shared_memory = on;
        self
    }
    fn ucx(self, config: UcxConfig) -> Self {
        let busy = config.mode == WaitMode::BusyPoll;
        self.transport(config).busy_poll(busy)
    }
}

/// As for clients; [`ucx`](UcxOptions::ucx) also takes the config's
/// `max_connections` (capped at 1024).
impl UcxOptions for crate::ServerOptions {
    fn api(mut self, api: Api) -> Self {
        self.transport_mut().api = api;
        self
    }
    fn shared_memory(mut self, on: bool) -> Self {
        self.transport_mut().shared_memory = on;
        self
    }
    fn ucx(self, config: UcxConfig) -> Self {
        let busy = config.mode == WaitMode::BusyPoll;
        let most = config.max_connections;
        self.transport(config).busy_poll(busy).max_connections(most)
    }
}
