//! [`Server`]: takes every client's messages over any backend and hands
//! them to the application.

use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{ServerConfig, ServerHandler, ServerStats};
use iomsg_core::transport::{self, Readiness};

use crate::backend::{Accept, BindSetup};
use crate::client::wait_error;
#[cfg(any(feature = "metrics", feature = "tracing"))]
use crate::observe::{server::Observed, ServerObserver};
use crate::{random_u64, sooner, Clock, Error, Idle, Progress, ServerOptions, ToAddr};

/// Sessions the server's table holds.
pub const SESSIONS: usize = 1024;
/// Connections at once.
pub const CONNS: usize = 1024;
/// The tracker's window per session, in 64-sn words (2,112 sns).
pub const WORDS: usize = 33;

/// The server's session table with the sizes [`Server`] uses.
pub type ServerCore = iomsg_core::session::ServerCore<SESSIONS, CONNS, WORDS>;

/// A [`ServerCore`] on the heap. The core (2.3 MB) is built by value,
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

/// The sans-IO driver under a [`Server`] on backend `B`.
pub type ServerDriver<B> = transport::Server<B, SESSIONS, CONNS, WORDS, Box<ServerCore>>;

/// A server over backend `B` (`iomsg_ucx::Server` and
/// `iomsg_stream::Server` name it for theirs): listens, accepts clients, hands each new message to the
/// application's handler once (per server instance) and acknowledges it
/// only after the handler took it, answers reads, notices and reports
/// gaps.
///
/// The handler is any [`ServerHandler`]; a closure taking
/// [`Delivery`](iomsg_core::session::Delivery) is one that takes writes
/// only.
///
/// ```no_run
/// # fn demo<B: iomsg_endpoint::Accept>() -> Result<(), iomsg_endpoint::Error> {
/// use iomsg_core::session::Delivery;
/// use iomsg_endpoint::Server;
/// let mut server = Server::<B, _>::bind("127.0.0.1:13337", Default::default(), |d: Delivery<'_>| {
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
pub struct Server<B: Accept, H> {
    driver: ServerDriver<B>,
    handler: H,
    clock: Clock,
    addr: B::Addr,
    progress: Progress,
    idle: Idle,
    /// Metrics and traces.
    #[cfg(any(feature = "metrics", feature = "tracing"))]
    observer: ServerObserver,
}

impl<B: Accept, H: ServerHandler> Server<B, H> {
    /// Listens on `addr` (text such as `"127.0.0.1:7000"` — port 0 for
    /// any free port, see [`local_addr`](Self::local_addr) — a
    /// `SocketAddr`, or the backend's own address). The server instance's
    /// id comes from the operating system's randomness: clients tell a
    /// restarted server from the one before by it.
    ///
    /// # Errors
    ///
    /// [`Error::Address`] for an address that does not parse,
    /// [`Error::Setup`] if the backend cannot be set up, [`Error::Bind`]
    /// if the address cannot be listened on.
    pub fn bind(
        addr: impl ToAddr<B::Addr>,
        options: ServerOptions<B::Config>,
        handler: H,
    ) -> Result<Server<B, H>, Error> {
        let addr = addr.to_addr()?;
        let mut config = ServerConfig::new(random_u64().map_err(Error::Random)?);
        config.validate = options.validate;
        config.handshake_timeout = options.handshake_timeout;
        config.max_sessions = SESSIONS;
        config.crc = B::crc();
        config.journal = options.journal;
        let progress = if options.busy_poll {
            Progress::BusyPoll
        } else {
            Progress::Adaptive
        };
        let setup = BindSetup {
            config: options.transport,
            busy_poll: options.busy_poll,
            max_connections: options.max_connections.min(CONNS),
        };
        let transport = B::bind(&addr, setup)?;
        let addr = transport.local_addr()?;
        let driver = transport::Server::with_core(transport, boxed_core(config)?)?;
        Ok(Server {
            driver,
            handler,
            clock: Clock::start(),
            addr,
            progress,
            idle: Idle::default(),
            #[cfg(any(feature = "metrics", feature = "tracing"))]
            observer: ServerObserver::new(),
        })
    }

    /// The address it listens on.
    #[must_use]
    pub fn local_addr(&self) -> B::Addr {
        self.addr.clone()
    }

    /// Does all the work possible now without waiting; returns whether
    /// anything happened.
    pub fn poll(&mut self) -> bool {
        let now = self.clock.now();
        // Without an observer the handler is the sink itself: the same
        // code as if there were no observing at all.
        #[cfg(any(feature = "metrics", feature = "tracing"))]
        return self.driver.poll(
            now,
            &mut Observed {
                handler: &mut self.handler,
                observer: &mut self.observer,
            },
        );
        #[cfg(not(any(feature = "metrics", feature = "tracing")))]
        self.driver.poll(now, &mut self.handler)
    }

    /// How long the server may sleep before it must [`poll`](Self::poll)
    /// again (its timers and the transport's heartbeats together).
    #[must_use]
    pub fn poll_delay(&self) -> Option<Duration> {
        sooner(
            self.driver.poll_timeout().map(|t| self.clock.until(t)),
            self.driver.transport().poll_delay(),
        )
    }

    /// The old name of [`poll_delay`](Self::poll_delay): a `Duration`,
    /// where the core's `poll_timeout` is an `Instant`.
    #[deprecated(
        since = "0.2.0",
        note = "renamed `poll_delay`: it is a Duration, not an Instant"
    )]
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.poll_delay()
    }

    /// Polls, and when there was nothing to do for a moment
    /// ([`SPIN_FOR`](crate::progress::SPIN_FOR), unless busy polling)
    /// sleeps on the transport until something arrives or a timer is due,
    /// at most `max`.
    ///
    /// # Errors
    ///
    /// [`Error::Wait`] if waiting on the transport failed, [`Error::Halted`] once
    /// the handler's `flush` failed.
    pub fn wait(&mut self, max: Duration) -> Result<(), Error> {
        if self.poll() {
            self.idle.busy();
            return self.check();
        }
        self.check()?;
        if self.idle.may_sleep(self.progress) && self.arm() {
            let wait = sooner(Some(max), self.poll_delay()).unwrap_or(max);
            self.driver
                .transport_mut()
                .sleep(wait)
                .map_err(wait_error::<B>)?;
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

    /// Arms the transport: whether the application may sleep on it now.
    pub(crate) fn arm(&mut self) -> bool {
        self.driver.arm(self.clock.now()) == Readiness::Armed
    }

    /// [`arm`](Self::arm) for an edge-triggered waiter (see
    /// [`Backend::take_wakeups`](crate::Backend::take_wakeups)).
    #[cfg(feature = "tokio")]
    pub(crate) fn arm_for_edges(&mut self) -> bool {
        self.arm() && matches!(self.driver.transport().take_wakeups(), Ok(0))
    }

    /// The backend's ready fd.
    #[cfg(feature = "tokio")]
    pub(crate) fn ready_fd(&self) -> Result<std::os::fd::BorrowedFd<'_>, Error> {
        self.driver.transport().ready_fd().map_err(wait_error::<B>)
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

    /// Takes back one journal record of an earlier instance (see
    /// [`ServerOptions::journal`](crate::ServerOptions::journal)): give
    /// the latest record of every session (or every record, in the order
    /// they were kept) before the first [`poll`](Self::poll). Returns the
    /// session id. Sessions past the tables' room are forgotten again:
    /// the handler's [`recall`](ServerHandler::recall) gives them back
    /// when their clients come.
    ///
    /// # Errors
    ///
    /// [`Error::Journal`]: the record is torn, changed, or has open holes
    /// and every place in the table holds a session with holes.
    pub fn restore(&mut self, record: &[u8]) -> Result<u64, Error> {
        let now = self.clock.now();
        self.driver.restore(now, record).map_err(Error::Journal)
    }

    /// Hands the journal records of changed sessions and then the
    /// handler's `flush` their turn, as `poll` does before replies leave:
    /// call it before stopping, so that the journal covers every message
    /// the handler took.
    ///
    /// # Errors
    ///
    /// [`Error::Halted`]: the handler's `flush` failed (now or before).
    pub fn flush(&mut self) -> Result<(), Error> {
        self.driver
            .flush(&mut self.handler)
            .map_err(|_| Error::Halted)
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
    pub fn driver_mut(&mut self) -> &mut ServerDriver<B> {
        &mut self.driver
    }

    /// Stops serving and gives the handler back.
    pub fn into_handler(self) -> H {
        self.handler
    }
}
