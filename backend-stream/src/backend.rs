//! Streams as an [`iomsg_endpoint::Backend`]: what makes
//! [`Client`](crate::Client), [`Server`](crate::Server) and the `tokio`
//! forms run over [`StreamTransport`], and [`StreamOptions`], the stream
//! setters of their options.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use iomsg_endpoint::{Backend, BindSetup, DialSetup, Error};

use crate::{Accept, Addr, Dial, StreamConfig, StreamTransport};

/// The backend's name in errors.
const NAME: &str = "the stream backend";

macro_rules! stream_backend {
    ($role:ty) => {
        impl Backend for StreamTransport<$role> {
            const NAME: &'static str = NAME;
            const MAX_WINDOW: u32 = 1024;
            type Addr = Addr;
            type Config = StreamConfig;

            fn sleep(&mut self, max: Duration) -> io::Result<()> {
                StreamTransport::sleep(self, max).map(drop)
            }
            fn ready_fd(&self) -> io::Result<BorrowedFd<'_>> {
                Ok(self.poller().as_fd())
            }
        }
    };
}

stream_backend!(Dial);
stream_backend!(Accept);

impl iomsg_endpoint::Dial for StreamTransport<Dial> {
    fn dial(addr: &Addr, setup: DialSetup<StreamConfig>) -> Result<Self, Error> {
        StreamTransport::client(addr.clone(), setup.config).map_err(|e| Error::setup(NAME, e))
    }
}

impl iomsg_endpoint::Accept for StreamTransport<Accept> {
    fn bind(addr: &Addr, setup: BindSetup<StreamConfig>) -> Result<Self, Error> {
        let mut config = setup.config;
        config.max_connections = setup.max_connections;
        StreamTransport::server(addr, config).map_err(|e| Error::Bind {
            addr: addr.to_string(),
            source: Box::new(e),
        })
    }
    fn local_addr(&self) -> Result<Addr, Error> {
        StreamTransport::local_addr(self).map_err(|e| Error::setup(NAME, e))
    }
}

/// The stream setters of [`ClientOptions`](crate::ClientOptions) and
/// [`ServerOptions`](crate::ServerOptions): bring the trait into scope
/// (`use iomsg_stream::StreamOptions;`) to use them.
///
/// ```
/// use iomsg_stream::{ClientOptions, StreamOptions};
/// let options = ClientOptions::default().send_buffer(1 << 20);
/// # let _ = options;
/// ```
pub trait StreamOptions: Sized {
    /// Bytes a connection's send buffer holds before sends wait for the
    /// socket (default 256 KiB).
    #[must_use]
    fn send_buffer(self, bytes: usize) -> Self;
}

impl StreamOptions for crate::ClientOptions {
    fn send_buffer(mut self, bytes: usize) -> Self {
        self.transport_mut().send_buffer = bytes.max(1);
        self
    }
}

impl StreamOptions for crate::ServerOptions {
    fn send_buffer(mut self, bytes: usize) -> Self {
        self.transport_mut().send_buffer = bytes.max(1);
        self
    }
}
