//! What a backend must do, and the drivers that give it sessions, replay
//! and loss detection.
//!
//! A backend moves opaque frames over connections. It implements
//! [`Transport`] (lend transmit buffers, report received frames and
//! disconnects, close) and one of the two roles: [`Connector`] (client
//! side: opens connections) or [`Listener`] (server side: accepts them).
//! The [`Client`] and [`Server`] drivers, generic over those traits, run
//! the session state machines of [`crate::session`] on top.
//!
//! Buffers are lent, in the manner of smoltcp's `TxToken` / `RxToken`:
//!
//! * to send, the driver asks for a [`TxToken`] for one frame of a given
//!   length on a connection. Getting the token is the backpressure check
//!   ([`SendError::WouldBlock`]); consuming it lends the backend's own
//!   buffer, the frame is emitted straight into it, and the backend keeps
//!   that buffer until its own completion (for UCX: the send callback);
//! * a received frame comes as an [`RxToken`] that lends the bytes where
//!   the backend holds them; the driver parses them in place.
//!
//! So a payload is copied at most once on each side (the client's send
//! window into the transmit buffer; nothing on the server, whose
//! application borrows the bytes), and the drivers allocate nothing.
//!
//! A backend states what it carries in [`Capabilities`]; the drivers check
//! it when they are built, so a message too large is refused at `submit`
//! and never becomes a reconnect loop.

mod client;
mod server;

pub use client::{Client, ClientHandler};
pub use server::Server;

pub use crate::conn::{Cause, ConnId, DisconnectReason};
use crate::time::Instant;
use crate::wire::{HEADER_LEN, MAX_FRAME_LEN};

use core::fmt;

/// What a backend carries. The drivers check it when they are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The largest frame (header and payload) the backend carries in one
    /// piece, in bytes.
    pub max_frame: usize,
    /// Frames sent on one connection arrive in the order sent, or not at
    /// all (UCX tag matching over one endpoint, TCP). The protocol's
    /// live-loss detection depends on it: the drivers refuse a backend
    /// without it.
    pub in_order: bool,
}

impl Capabilities {
    /// The largest application payload such a frame holds.
    #[must_use]
    pub fn max_payload(&self) -> usize {
        self.max_frame.min(MAX_FRAME_LEN).saturating_sub(HEADER_LEN)
    }
}

/// A lent transmit buffer for one frame.
pub trait TxToken {
    /// Lends the buffer, exactly as long as the length asked for, to
    /// `emit`, which writes the whole frame; the backend sends it once
    /// `emit` returns and keeps the buffer until its own completion.
    fn consume<R>(self, emit: impl FnOnce(&mut [u8]) -> R) -> R;
}

/// A received frame, lent where the backend holds it.
///
/// The release rule: a token borrows the transport
/// ([`Transport::RxToken`] is `RxToken<'_>` of `&mut self`), so it is
/// consumed or dropped before the transport is used again — no frame is
/// held across polls, and a backend lends one at a time. The bytes are
/// lent only for the closure given to [`consume`](RxToken::consume):
/// what must outlive it is copied. A token dropped without being consumed
/// discards its frame, which the session then never saw (the sequence
/// tracker reports the gap, a replay may fill it): a driver consumes
/// every frame it takes.
pub trait RxToken {
    /// Lends the frame's bytes to `read`; the backend may reuse its buffer
    /// once `read` returns (or once the token is dropped unconsumed).
    fn consume<R>(self, read: impl FnOnce(&[u8]) -> R) -> R;
}

/// What a backend reports when polled.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<Rx> {
    /// Client side: a connection from [`Connector::connect`] is up.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// Server side: a new connection.
    Accepted {
        /// The connection.
        conn: ConnId,
    },
    /// A frame arrived.
    Received {
        /// The connection.
        conn: ConnId,
        /// The frame.
        frame: Rx,
    },
    /// The connection is gone (or never came up). No event follows for it.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Why a backend lent no transmit buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// No room now; ask again after polling. Nothing was sent.
    WouldBlock,
    /// The connection is not (or no longer) open.
    NotConnected,
    /// Larger than the backend carries (its [`Capabilities::max_frame`]).
    TooLarge {
        /// The frame's length.
        len: usize,
        /// The backend's limit.
        max: usize,
    },
    /// A backend-specific failure, with the backend's status.
    Failed(Cause),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::WouldBlock => write!(f, "no transmit buffer free now; poll and try again"),
            SendError::NotConnected => write!(f, "the connection is not open"),
            SendError::TooLarge { len, max } => write!(
                f,
                "frame of {len} bytes is larger than the transport carries ({max} bytes)"
            ),
            SendError::Failed(c) => write!(f, "the transport failed: {c}"),
        }
    }
}

impl core::error::Error for SendError {}

/// Whether a driver may sleep (see [`Transport::arm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Work is waiting: poll again now.
    Pending,
    /// Nothing is waiting and the backend will wake its waiter (an event
    /// fd, a condition variable: the backend's own) when something comes.
    /// Sleep on it until the driver's `poll_timeout` at the latest.
    Armed,
    /// The backend cannot signal: poll again at the application's own
    /// cadence, and by the driver's `poll_timeout` at the latest.
    Unsupported,
}

/// A connection-oriented transport of opaque frames: what every backend
/// provides, in either role.
///
/// A frame the backend took may still be lost if its connection breaks;
/// the protocol above finds out and replays. Frames on one connection
/// arrive in order or not at all when [`Capabilities::in_order`] says so.
pub trait Transport {
    /// A lent transmit buffer.
    type TxToken<'a>: TxToken
    where
        Self: 'a;
    /// A lent received frame.
    type RxToken<'a>: RxToken
    where
        Self: 'a;

    /// What this backend carries.
    fn capabilities(&self) -> Capabilities;

    /// A transmit buffer for one frame of `len` bytes on `conn`.
    ///
    /// # Errors
    ///
    /// [`SendError::WouldBlock`] when no buffer is free now (backpressure:
    /// nothing changed, ask again after polling); the other variants when
    /// the frame can never go out on `conn`.
    fn transmit(
        &mut self,
        now: Instant,
        conn: ConnId,
        len: usize,
    ) -> Result<Self::TxToken<'_>, SendError>;

    /// Makes progress and returns the next event, if any.
    fn poll(&mut self, now: Instant) -> Option<Event<Self::RxToken<'_>>>;

    /// Closes a connection; no event is reported for it afterwards.
    fn close(&mut self, now: Instant, conn: ConnId);

    /// The readiness hook: called by a driver with nothing left to do,
    /// before its application sleeps. The default cannot signal.
    fn arm(&mut self) -> Readiness {
        Readiness::Unsupported
    }
}

/// The client role: opens connections to the backend's configured server.
pub trait Connector: Transport {
    /// Starts opening a connection. Completion is reported with
    /// [`Event::Connected`] or [`Event::Disconnected`].
    ///
    /// # Errors
    ///
    /// Why the attempt could not even start.
    fn connect(&mut self, now: Instant) -> Result<ConnId, DisconnectReason>;
}

/// The server role: accepts connections, reported as [`Event::Accepted`].
pub trait Listener: Transport {}

/// Why a driver could not be built over a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriverError {
    /// The backend's largest frame cannot hold the protocol's control
    /// frames (`Hello`, `Welcome`, `Reject`).
    FrameTooSmall {
        /// The backend's `max_frame`.
        max_frame: usize,
        /// The least the protocol needs.
        need: usize,
    },
    /// The backend does not keep frames of a connection in order.
    Unordered,
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::FrameTooSmall { max_frame, need } => write!(
                f,
                "the transport carries frames of at most {max_frame} bytes; the protocol needs \
                 at least {need}"
            ),
            DriverError::Unordered => write!(
                f,
                "the transport does not keep frames of a connection in order; loss detection \
                 needs in-order delivery (use one UCX endpoint or one stream per connection)"
            ),
        }
    }
}

impl core::error::Error for DriverError {}

/// The least `max_frame` a backend must carry: a header and the largest
/// control body.
pub const MIN_FRAME: usize = HEADER_LEN + 32;

/// Checks a backend's capabilities for a driver.
fn check(caps: Capabilities) -> Result<(), DriverError> {
    if !caps.in_order {
        return Err(DriverError::Unordered);
    }
    if caps.max_frame < MIN_FRAME {
        return Err(DriverError::FrameTooSmall {
            max_frame: caps.max_frame,
            need: MIN_FRAME,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
