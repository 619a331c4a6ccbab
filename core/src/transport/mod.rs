//! What a backend must do, and the drivers that give it sessions, replay
//! and loss detection.
//!
//! A backend implements [`Transport`]: open or accept connections, send a
//! frame on one, report received frames and disconnects, and make progress
//! when polled. It knows nothing of io_msgs. The [`Client`] and [`Server`]
//! drivers, generic over the trait, run the session state machines of
//! [`crate::session`] on top of it. They own fixed buffers of `MTU` bytes
//! and allocate nothing per message.

mod client;
mod server;

pub use client::{Client, DriverError};
pub use server::Server;

use crate::time::Instant;

/// A connection handle chosen by the backend. Handles of closed
/// connections should not be reused soon (a frame still queued for an old
/// handle would otherwise be taken for the new connection's).
pub type ConnId = u32;

/// Why a backend reports a connection as gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisconnectReason {
    /// The peer closed it.
    PeerClosed,
    /// The peer failed (crashed, unreachable, reset): UCX's error callback.
    PeerFailed,
    /// The connection could not be established.
    ConnectFailed,
    /// This side closed it.
    LocalClose,
    /// A backend-specific status code.
    Other(i32),
}

/// What a backend reports when polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportEvent {
    /// Client side: a connection from [`Transport::connect`] is up.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// Server side: a new connection.
    Accepted {
        /// The connection.
        conn: ConnId,
    },
    /// A frame arrived and was copied to the start of the poll buffer. If
    /// `len` exceeds the buffer, only the buffer's length was copied and
    /// the frame is oversized.
    Received {
        /// The connection.
        conn: ConnId,
        /// The frame's full length.
        len: usize,
    },
    /// The connection is gone (or never came up).
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Why a backend did not take a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No room now; try the same frame again after polling.
    WouldBlock,
    /// The connection is not (or no longer) open.
    NotConnected,
    /// Larger than the backend carries.
    TooLarge {
        /// The frame's length.
        len: usize,
        /// The backend's limit.
        max: usize,
    },
    /// A backend-specific failure; a `Disconnected` event follows.
    Failed(i32),
}

/// A connection-oriented frame transport: the only thing a backend provides.
///
/// Frames sent on one connection must arrive in order or not at all — the
/// guarantee UCX tag matching gives over one endpoint. A frame the backend
/// took with `Ok` may still be lost if the connection breaks; the protocol
/// above finds out and replays.
pub trait Transport {
    /// Client side: start opening a connection to the backend's configured
    /// server. Completion is reported with `Connected` or `Disconnected`.
    fn connect(&mut self, now: Instant) -> Result<ConnId, DisconnectReason>;

    /// Send one frame. The backend copies it or finishes with it before
    /// returning; `buf` is reused right after.
    fn send(&mut self, now: Instant, conn: ConnId, frame: &[u8]) -> Result<(), SendError>;

    /// Close a connection; no event is reported for it afterwards.
    fn close(&mut self, now: Instant, conn: ConnId);

    /// Make progress and return the next event, copying a received frame to
    /// the start of `buf`.
    fn poll(&mut self, now: Instant, buf: &mut [u8]) -> Option<TransportEvent>;
}

#[cfg(test)]
mod tests;
