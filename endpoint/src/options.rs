//! What a [`Client`](crate::Client) or [`Server`](crate::Server) is built
//! with: every setting defaulted, changed through setters, so that new
//! settings never break a caller. `C` is the backend's own settings
//! (`UcxConfig`, `StreamConfig`); each backend adds setters for them
//! through a trait of its own.

use std::time::Duration;

use crate::server::CONNS;
use crate::WINDOW;

/// How a [`Client`](crate::Client) connects and sends.
///
/// ```
/// use std::time::Duration;
/// let options = iomsg_endpoint::ClientOptions::<()>::default()
///     .connect_timeout(Duration::from_secs(5))
///     .window_bytes(1 << 20);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions<C> {
    pub(crate) transport: C,
    pub(crate) busy_poll: bool,
    pub(crate) window: u32,
    pub(crate) window_bytes: usize,
    pub(crate) replay: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry_for: Duration,
    pub(crate) retry_full_table: bool,
    pub(crate) validate: bool,
}

impl<C: Default> Default for ClientOptions<C> {
    /// The backend's defaults, adaptive progress (a moment's polling after
    /// the last work, then sleeping), as many messages in
    /// flight as the backend allows and 4 MiB of them, replay on, 10 s
    /// for the first handshake, reconnects tried for 30 s of an outage.
    fn default() -> ClientOptions<C> {
        ClientOptions {
            transport: C::default(),
            busy_poll: false,
            window: WINDOW as u32,
            window_bytes: 4 << 20,
            replay: true,
            connect_timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(30),
            retry_full_table: false,
            validate: false,
        }
    }
}

impl<C> ClientOptions<C> {
    /// Never sleep: poll the transport even when idle (lowest latency,
    /// one core busy). Default off: [`Progress::Adaptive`](crate::Progress::Adaptive),
    /// polling for a moment after the last work and then sleeping on the
    /// transport, so an idle client costs no CPU.
    #[must_use]
    pub fn busy_poll(mut self, on: bool) -> Self {
        self.busy_poll = on;
        self
    }
    /// Messages sent and not yet acknowledged at most (from 1 to the
    /// backend's most: 256 on UCX, 1024 on streams; default the most).
    /// `send` waits while the window is full.
    #[must_use]
    pub fn window(mut self, messages: u32) -> Self {
        self.window = messages.clamp(1, WINDOW as u32);
        self
    }
    /// Bytes of messages kept until acknowledged (default 4 MiB): the
    /// storage replay sends from; a message may be at most this long
    /// (and at most what the wire carries).
    #[must_use]
    pub fn window_bytes(mut self, bytes: usize) -> Self {
        self.window_bytes = bytes.max(1);
        self
    }
    /// Resend what was not acknowledged after a reconnect (default on:
    /// nothing is lost, a resent message the server had already taken is
    /// announced as a possible duplicate). Off: such messages are given
    /// up and reported as lost ([`Error::Lost`](crate::Error::Lost)).
    #[must_use]
    pub fn replay(mut self, on: bool) -> Self {
        self.replay = on;
        self
    }
    /// How long [`Client::connect`](crate::Client::connect) waits for the
    /// first handshake (default 10 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
    /// How long the client keeps reconnecting through an outage before it
    /// fails (default 30 s).
    #[must_use]
    pub fn retry_for(mut self, outage: Duration) -> Self {
        self.retry_for = outage;
        self
    }
    /// Keep retrying when the server's table is full although this client
    /// was never let in (default off: [`Error::Failed`](crate::Error::Failed)
    /// with [`FailReason::TableFull`](iomsg_core::session::FailReason::TableFull)
    /// at once, since nothing of its session is on the server). A client
    /// let in before retries in any case, within `retry_for`.
    #[must_use]
    pub fn retry_full_table(mut self, on: bool) -> Self {
        self.retry_full_table = on;
        self
    }
    /// Ask for a CRC of every payload, checked by the server (default off:
    /// headers are always checked).
    #[must_use]
    pub fn validate(mut self, on: bool) -> Self {
        self.validate = on;
        self
    }
    /// The backend's own settings, for what the setters do not reach.
    #[must_use]
    pub fn transport(mut self, config: C) -> Self {
        self.transport = config;
        self
    }
    /// The backend's own settings, to change in place (the backends'
    /// option traits use it).
    pub fn transport_mut(&mut self) -> &mut C {
        &mut self.transport
    }
    /// Whether the client spins when idle.
    #[must_use]
    pub fn is_busy_poll(&self) -> bool {
        self.busy_poll
    }
}

/// How a [`Server`](crate::Server) listens and serves.
///
/// ```
/// let options = iomsg_endpoint::ServerOptions::<()>::default().max_connections(256);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions<C> {
    pub(crate) transport: C,
    pub(crate) busy_poll: bool,
    pub(crate) max_connections: usize,
    pub(crate) validate: bool,
    pub(crate) handshake_timeout: Duration,
    pub(crate) journal: bool,
}

impl<C: Default> Default for ServerOptions<C> {
    /// The backend's defaults, adaptive progress, 1024 connections and
    /// sessions, 5 s for a handshake, no journal.
    fn default() -> ServerOptions<C> {
        ServerOptions {
            transport: C::default(),
            busy_poll: false,
            max_connections: CONNS,
            validate: false,
            handshake_timeout: Duration::from_secs(5),
            journal: false,
        }
    }
}

impl<C> ServerOptions<C> {
    /// Keep a journal (default off): before any acknowledgement leaves,
    /// the handler's [`ServerHandler::journal`](iomsg_core::session::ServerHandler::journal)
    /// gets a record of every session that changed, to keep with what
    /// `deliver` took; give the records back to the next instance with
    /// [`Server::restore`](crate::Server::restore) and it recognises its
    /// past: replays of what it delivered are acknowledged, not delivered
    /// again.
    #[must_use]
    pub fn journal(mut self, on: bool) -> Self {
        self.journal = on;
        self
    }
    /// Never sleep: poll the transport even when idle (default off:
    /// [`Progress::Adaptive`](crate::Progress::Adaptive), so an idle
    /// server costs no CPU).
    #[must_use]
    pub fn busy_poll(mut self, on: bool) -> Self {
        self.busy_poll = on;
        self
    }
    /// Connections at once (1 to 1024; default 1024): one past it is
    /// refused and its client told why.
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.clamp(1, CONNS);
        self
    }
    /// Put a CRC on the payload of every read answer (default off; a
    /// write's payload CRC, when its client sends one, is always checked).
    #[must_use]
    pub fn validate(mut self, on: bool) -> Self {
        self.validate = on;
        self
    }
    /// How long a connection may take to say `Hello` (default 5 s).
    #[must_use]
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }
    /// The backend's own settings, for what the setters do not reach.
    #[must_use]
    pub fn transport(mut self, config: C) -> Self {
        self.transport = config;
        self
    }
    /// The backend's own settings, to change in place (the backends'
    /// option traits use it).
    pub fn transport_mut(&mut self) -> &mut C {
        &mut self.transport
    }
    /// Whether the server spins when idle.
    #[must_use]
    pub fn is_busy_poll(&self) -> bool {
        self.busy_poll
    }
    /// Whether the server keeps a journal.
    #[must_use]
    pub fn is_journal(&self) -> bool {
        self.journal
    }
}
