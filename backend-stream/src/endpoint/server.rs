//! [`Server`]: takes every client's messages over TCP or Unix streams and
//! hands them to the application.

use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{ServerConfig, ServerHandler, ServerStats};
use iomsg_core::transport::{self, Readiness};

use super::{random_u64, sooner, Clock, Error, ServerOptions};
use crate::{Accept, Addr, StreamTransport, ToAddr};

/// Sessions the server's table holds.
pub(crate) const SESSIONS: usize = 1024;
/// Connections at once.
pub(crate) const CONNS: usize = 1024;
/// The tracker's window per session, in 64-sn words (2,112 sns).
pub(crate) const WORDS: usize = 33;

/// The server's session table with the sizes [`Server`] uses.
pub type ServerCore = iomsg_core::session::ServerCore<SESSIONS, CONNS, WORDS>;

/// A [`ServerCore`] on the heap. The core (megabytes) is built by value,
/// and an unoptimised build keeps copies of it on the stack: more than a
/// spawned thread's 2 MiB. It is built on a thread of its own with room
/// for them.
fn boxed_core(config: ServerConfig) -> Result<Box<ServerCore>, Error> {
    let thread = std::thread::Builder::new()
        .name("iomsg-core-build".into())
        .stack_size(64 << 20)
        .spawn(move || Box::new(ServerCore::new(config)))
        .map_err(Error::Thread)?;
    Ok(thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
}

/// The sans-IO driver under a [`Server`].
pub type ServerDriver =
    transport::Server<StreamTransport<Accept>, SESSIONS, CONNS, WORDS, Box<ServerCore>>;

/// A server: listens, accepts clients, hands each new message to the
/// application's handler once (per server instance) and acknowledges it
/// only after the handler took it, answers reads, notices and reports
/// gaps.
///
/// The handler is any [`ServerHandler`]; a closure taking
/// [`Delivery`](iomsg_core::session::Delivery) is one that takes writes
/// only.
///
/// ```no_run
/// # fn main() -> Result<(), iomsg_stream::Error> {
/// use iomsg_stream::{Delivery, Server};
/// let mut server = Server::bind("127.0.0.1:13337", Default::default(), |d: Delivery<'_>| {
///     println!("session {:x} sn {}: {} bytes", d.session, d.sn, d.data.len());
/// })?;
/// loop {
///     server.wait(std::time::Duration::from_secs(1))?;
/// }
/// # }
/// ```
///
/// A server does work only inside [`poll`](Self::poll) and the waits;
/// run one of them in a loop.
pub struct Server<H> {
    driver: ServerDriver,
    handler: H,
    clock: Clock,
    addr: Addr,
}

impl<H: ServerHandler> Server<H> {
    /// Listens on `addr` (`"127.0.0.1:7000"`, port 0 for any free port,
    /// see [`local_addr`](Self::local_addr); `"unix:/run/app.sock"`; an
    /// [`Addr`]). The server instance's id comes from the operating
    /// system's randomness: clients tell a restarted server from the one
    /// before by it. A server restarted on the same address binds again
    /// at once (a Unix socket file left by a dead server is replaced).
    ///
    /// # Errors
    ///
    /// [`Error::Address`] for an address that does not parse,
    /// [`Error::Bind`] if it cannot be listened on.
    pub fn bind(addr: impl ToAddr, options: ServerOptions, handler: H) -> Result<Server<H>, Error> {
        let addr = addr.to_addr()?;
        let mut config = ServerConfig::new(random_u64().map_err(Error::Random)?);
        config.validate = options.validate;
        config.handshake_timeout = options.handshake_timeout;
        config.max_sessions = SESSIONS;
        let mut stream = options.stream;
        stream.max_connections = stream.max_connections.min(CONNS);
        let transport = StreamTransport::server(&addr, stream)
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = transport.local_addr().map_err(Error::Poll)?;
        let driver = transport::Server::with_core(transport, boxed_core(config)?)?;
        Ok(Server {
            driver,
            handler,
            clock: Clock::start(),
            addr,
        })
    }

    /// The address it listens on.
    #[must_use]
    pub fn local_addr(&self) -> &Addr {
        &self.addr
    }

    /// Does all the work possible now without waiting; returns whether
    /// anything happened.
    pub fn poll(&mut self) -> bool {
        self.driver.poll(self.clock.now(), &mut self.handler)
    }

    /// How long the server may sleep before it must [`poll`](Self::poll)
    /// again (its timers).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.driver.poll_timeout().map(|t| self.clock.until(t))
    }

    /// Polls, and when there was nothing to do sleeps on the sockets
    /// until something arrives or a timer is due, at most `max`.
    ///
    /// # Errors
    ///
    /// [`Error::Poll`] if waiting on the sockets failed,
    /// [`Error::Halted`] once the handler's `flush` failed.
    pub fn wait(&mut self, max: Duration) -> Result<(), Error> {
        if self.poll() {
            return self.check();
        }
        self.check()?;
        if self.arm() {
            let wait = sooner(Some(max), self.poll_timeout()).unwrap_or(max);
            self.driver
                .transport_mut()
                .sleep(wait)
                .map_err(Error::Poll)?;
        }
        Ok(())
    }

    /// Whether the handler's `flush` failed: the server then acknowledges
    /// nothing more and refuses every client ([`Error::Halted`]).
    #[must_use]
    pub fn halted(&self) -> bool {
        self.driver.halted()
    }

    /// [`Error::Halted`] once the handler's `flush` failed.
    fn check(&self) -> Result<(), Error> {
        if self.driver.halted() {
            return Err(Error::Halted);
        }
        Ok(())
    }

    /// Arms the transport: whether the application may sleep on the
    /// sockets now.
    pub(crate) fn arm(&mut self) -> bool {
        self.driver.arm(self.clock.now()) == Readiness::Armed
    }

    /// A handle on the socket poller, readable when a socket has
    /// something.
    #[cfg(feature = "tokio")]
    pub(crate) fn registry(&self) -> Result<mio::Registry, Error> {
        self.driver.transport().registry().map_err(Error::Poll)
    }

    /// Serves for `time`.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub fn run_for(&mut self, time: Duration) -> Result<(), Error> {
        let started = Wall::now();
        while let Some(left) = time.checked_sub(started.elapsed()) {
            self.wait(left)?;
        }
        Ok(())
    }

    /// Serves until `done` says so (asked after every wait of at most
    /// 100 ms).
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub fn run_until(&mut self, mut done: impl FnMut(&mut H) -> bool) -> Result<(), Error> {
        while !done(&mut self.handler) {
            self.wait(Duration::from_millis(100))?;
        }
        Ok(())
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, mutably.
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }

    /// Counters: delivered, duplicates, gaps, losses, ...
    #[must_use]
    pub fn stats(&self) -> &ServerStats {
        self.driver.core().stats()
    }

    /// The sans-IO driver underneath (its core: sessions, counters).
    pub fn driver_mut(&mut self) -> &mut ServerDriver {
        &mut self.driver
    }

    /// Stops serving and gives the handler back.
    pub fn into_handler(self) -> H {
        self.handler
    }
}
