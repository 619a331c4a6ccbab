//! What a [`Client`](super::Client) or [`Server`](super::Server) is built
//! with: every setting defaulted, changed through setters, so that new
//! settings never break a caller.

use std::time::Duration;

use crate::{Api, UcxConfig, WaitMode};

/// How a [`Client`](super::Client) connects and sends.
///
/// ```
/// use std::time::Duration;
/// let options = iomsg_ucx::ClientOptions::default()
///     .connect_timeout(Duration::from_secs(5))
///     .window_bytes(1 << 20);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    pub(crate) ucx: UcxConfig,
    pub(crate) window: u32,
    pub(crate) window_bytes: usize,
    pub(crate) replay: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry_for: Duration,
    pub(crate) retry_full_table: bool,
    pub(crate) validate: bool,
}

impl Default for ClientOptions {
    /// Tag matching, tcp (no shared memory), sleeping on UCX's event fd
    /// when idle, 256 messages and 4 MiB in flight, replay on, 10 s for
    /// the first handshake, reconnects tried for 30 s of an outage.
    fn default() -> ClientOptions {
        ClientOptions {
            ucx: UcxConfig {
                mode: WaitMode::Blocking,
                ..UcxConfig::default()
            },
            window: crate::endpoint::client::WINDOW as u32,
            window_bytes: 4 << 20,
            replay: true,
            connect_timeout: Duration::from_secs(10),
            retry_for: Duration::from_secs(30),
            retry_full_table: false,
            validate: false,
        }
    }
}

impl ClientOptions {
    /// Which UCX API carries the frames; the server must use the same
    /// (default [`Api::Tag`]).
    #[must_use]
    pub fn api(mut self, api: Api) -> Self {
        self.ucx.api = api;
        self
    }
    /// Let UCX carry frames over shared memory when both ends are on one
    /// host (the server must say the same; default off).
    #[must_use]
    pub fn shared_memory(mut self, on: bool) -> Self {
        self.ucx.shared_memory = on;
        self
    }
    /// Spin on UCX instead of sleeping on its event fd when idle: lower
    /// latency, one core busy (default off).
    #[must_use]
    pub fn busy_poll(mut self, on: bool) -> Self {
        self.ucx.mode = if on {
            WaitMode::BusyPoll
        } else {
            WaitMode::Blocking
        };
        self
    }
    /// Messages sent and not yet acknowledged at most (1 to 256; default
    /// 256). `send` waits while the window is full.
    #[must_use]
    pub fn window(mut self, messages: u32) -> Self {
        self.window = messages.clamp(1, crate::endpoint::client::WINDOW as u32);
        self
    }
    /// Bytes of messages kept until acknowledged (default 4 MiB): the
    /// storage replay sends from; a message may be at most this long.
    #[must_use]
    pub fn window_bytes(mut self, bytes: usize) -> Self {
        self.window_bytes = bytes.max(1);
        self
    }
    /// Resend what was not acknowledged after a reconnect (default on:
    /// nothing is lost, a resent message the server had already taken is
    /// announced as a possible duplicate). Off: such messages are given
    /// up and reported as lost ([`Error::Lost`](super::Error::Lost)).
    #[must_use]
    pub fn replay(mut self, on: bool) -> Self {
        self.replay = on;
        self
    }
    /// How long [`Client::connect`](super::Client::connect) waits for the
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
    /// was never let in (default off: [`Error::Failed`](super::Error::Failed)
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
    /// Every transport setting ([`UcxConfig`]), for what the setters above
    /// do not reach; its `mode` replaces `busy_poll`.
    #[must_use]
    pub fn ucx(mut self, config: UcxConfig) -> Self {
        self.ucx = config;
        self
    }
}

/// How a [`Server`](super::Server) listens and serves.
///
/// ```
/// let options = iomsg_ucx::ServerOptions::default().max_connections(256);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    pub(crate) ucx: UcxConfig,
    pub(crate) validate: bool,
    pub(crate) handshake_timeout: Duration,
    pub(crate) journal: bool,
}

impl Default for ServerOptions {
    /// Tag matching, tcp (no shared memory), sleeping on UCX's event fd
    /// when idle, 1024 connections and sessions, 5 s for a handshake.
    fn default() -> ServerOptions {
        ServerOptions {
            ucx: UcxConfig {
                mode: WaitMode::Blocking,
                max_connections: crate::endpoint::server::CONNS,
                ..UcxConfig::default()
            },
            validate: false,
            handshake_timeout: Duration::from_secs(5),
            journal: false,
        }
    }
}

impl ServerOptions {
    /// Keep a journal (default off): before any acknowledgement leaves,
    /// the handler's [`ServerHandler::journal`](crate::ServerHandler::journal)
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
    /// Which UCX API carries the frames; clients must use the same
    /// (default [`Api::Tag`]).
    #[must_use]
    pub fn api(mut self, api: Api) -> Self {
        self.ucx.api = api;
        self
    }
    /// Let UCX carry frames over shared memory with clients on this host
    /// (clients must say the same; default off).
    #[must_use]
    pub fn shared_memory(mut self, on: bool) -> Self {
        self.ucx.shared_memory = on;
        self
    }
    /// Spin on UCX instead of sleeping on its event fd when idle (default
    /// off).
    #[must_use]
    pub fn busy_poll(mut self, on: bool) -> Self {
        self.ucx.mode = if on {
            WaitMode::BusyPoll
        } else {
            WaitMode::Blocking
        };
        self
    }
    /// Connections at once (1 to 1024; default 1024): one past it is
    /// refused and its client told why.
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.ucx.max_connections = n.clamp(1, crate::endpoint::server::CONNS);
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
    /// Every transport setting ([`UcxConfig`]); its `mode` replaces
    /// `busy_poll`, its `max_connections` is capped at 1024.
    #[must_use]
    pub fn ucx(mut self, config: UcxConfig) -> Self {
        self.ucx = config;
        self
    }
}
