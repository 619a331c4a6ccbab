//! Connection handles and disconnect reasons: what both the session state
//! machines and the transport layer speak of, so neither imports the other.

use core::fmt;

/// A connection handle chosen by the backend: a slot and a generation.
///
/// A backend that reuses a slot gives the new connection a new generation,
/// so a frame or event still queued for the old connection can never be
/// taken for the new one's: the handles differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(u64);

impl ConnId {
    /// The handle of `slot` in its `generation`.
    #[must_use]
    pub const fn new(slot: u32, generation: u32) -> ConnId {
        ConnId(((generation as u64) << 32) | slot as u64)
    }
    /// The backend's slot.
    #[must_use]
    pub const fn slot(self) -> u32 {
        self.0 as u32
    }
    /// The slot's generation.
    #[must_use]
    pub const fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn {}.{}", self.slot(), self.generation())
    }
}

/// Why a backend reports a connection as gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The peer closed it.
    PeerClosed,
    /// The peer failed (crashed, unreachable, reset): UCX's error callback.
    PeerFailed,
    /// The connection could not be established.
    ConnectFailed,
    /// This side closed it.
    LocalClose,
    /// The backend refused a frame it had said it carries (see
    /// [`SendError`](crate::transport::SendError)); the driver closed the
    /// connection rather than skip the frame.
    SendFailed,
    /// Nothing was heard from the peer for longer than the backend's
    /// liveness timeout: a peer gone without a reset (a cut link, a host
    /// lost, a process frozen).
    PeerSilent,
    /// A backend-specific status code.
    Other(i32),
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisconnectReason::PeerClosed => write!(f, "the peer closed the connection"),
            DisconnectReason::PeerFailed => {
                write!(f, "the peer failed (crashed, reset or unreachable)")
            }
            DisconnectReason::ConnectFailed => write!(f, "the connection could not be established"),
            DisconnectReason::LocalClose => write!(f, "closed by this side"),
            DisconnectReason::SendFailed => {
                write!(
                    f,
                    "the transport refused a frame; the connection was closed"
                )
            }
            DisconnectReason::PeerSilent => {
                write!(f, "nothing heard from the peer within the liveness timeout")
            }
            DisconnectReason::Other(code) => write!(f, "transport status {code}"),
        }
    }
}

impl core::error::Error for DisconnectReason {}
