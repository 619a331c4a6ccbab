//! What a [`Client`](super::Client) or [`Server`](super::Server) is built
//! with: every setting defaulted, changed through setters, so that new
//! settings never break a caller.

use std::time::Duration;

use crate::StreamConfig;

/// How a [`Client`](super::Client) connects and sends.
///
/// ```
/// use std::time::Duration;
/// let options = iomsg_stream::ClientOptions::default()
///     .connect_timeout(Duration::from_secs(5))
///     .window_bytes(1 << 20);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientOptions {
    pub(crate) stream: StreamConfig,
    pub(crate) window: u32,
    pub(crate) window_bytes: usize,
    pub(crate) replay: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry_for: Duration,
    pub(crate) retry_full_table: bool,
    pub(crate) validate: bool,
}

impl Default for ClientOptions {
    /// 1024 messages and 4 MiB in flight, replay on, 10 s for the first
    /// handshake, reconnects tried for 30 s of an outage, 256 KiB of send
    /// buffer.
    fn default() -> ClientOptions {
        ClientOptions {
            stream: StreamConfig::default(),
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
    /// Messages sent and not yet acknowledged at most (1 to 1024; default
    /// 1024). `send` waits while the window is full.
    #[must_use]
    pub fn window(mut self, messages: u32) -> Self {
        self.window = messages.clamp(1, crate::endpoint::client::WINDOW as u32);
        self
    }
    /// Bytes of messages kept until acknowledged (default 4 MiB): the
    /// storage replay sends from; a message may be at most this long (and
    /// at most 1 MiB, the wire's limit).
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
    /// Bytes the connection's send buffer holds before sends wait for
    /// the socket (default 256 KiB).
    #[must_use]
    pub fn send_buffer(mut self, bytes: usize) -> Self {
        self.stream.send_buffer = bytes.max(1);
        self
    }
}

/// How a [`Server`](super::Server) listens and serves.
///
/// ```
/// let options = iomsg_stream::ServerOptions::default().max_connections(256);
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerOptions {
    pub(crate) stream: StreamConfig,
    pub(crate) validate: bool,
    pub(crate) handshake_timeout: Duration,
}

impl Default for ServerOptions {
    /// 1024 connections and sessions, 5 s for a handshake, 256 KiB of
    /// send buffer per connection.
    fn default() -> ServerOptions {
        ServerOptions {
            stream: StreamConfig {
                max_connections: crate::endpoint::server::CONNS,
                ..StreamConfig::default()
            },
            validate: false,
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

impl ServerOptions {
    /// Connections at once (1 to 1024; default 1024): one past it is
    /// told the table is full and closed; its client fails saying so if
    /// the server never let it in, and tries again later if it did (see
    /// [`ClientOptions::retry_full_table`]).
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.stream.max_connections = n.clamp(1, crate::endpoint::server::CONNS);
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
    /// Bytes a connection's send buffer holds before replies to it wait
    /// for its socket (default 256 KiB).
    #[must_use]
    pub fn send_buffer(mut self, bytes: usize) -> Self {
        self.stream.send_buffer = bytes.max(1);
        self
    }
}
