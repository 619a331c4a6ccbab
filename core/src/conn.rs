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

/// What a backend knows of a failure: its own status code, that code's
/// name and its description (for UCX: the `ucs_status_t`, its `UCS_ERR_*`
/// name and `ucs_status_string`), so that a reset, a timeout and an
/// unreachable network read differently in a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cause {
    /// The backend's status code (0: none known).
    pub code: i32,
    /// The code's name, as the backend's headers spell it (empty: none).
    pub name: &'static str,
    /// What the backend says the code means (empty: nothing).
    pub text: &'static str,
}

impl Cause {
    /// No status known (a backend that has none to give).
    pub const UNKNOWN: Cause = Cause {
        code: 0,
        name: "",
        text: "",
    };
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name.is_empty(), self.text.is_empty()) {
            (true, true) if self.code == 0 => write!(f, "no status"),
            (true, true) => write!(f, "status {}", self.code),
            (false, true) => write!(f, "{} ({})", self.name, self.code),
            (true, false) => write!(f, "{} ({})", self.text, self.code),
            (false, false) => write!(f, "{}: {} ({})", self.name, self.text, self.code),
        }
    }
}

/// Why a backend reports a connection as gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// The peer closed it.
    PeerClosed,
    /// The peer failed (crashed, unreachable, reset): UCX's error
    /// callback, with the backend's status.
    PeerFailed(Cause),
    /// The connection could not be established, with the backend's status
    /// (refused, unreachable, timed out).
    ConnectFailed(Cause),
    /// The peer refused this connection for a reason another attempt does
    /// not change (the other API, a wire version it does not speak): the
    /// cause says which. Final for a client.
    Refused(Cause),
    /// The peer's connection table is full: it refused this connection
    /// before any frame. Another attempt may get in once peers leave.
    TableFull {
        /// The table's size.
        size: u64,
    },
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
    /// A backend-specific failure.
    Other(Cause),
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisconnectReason::PeerClosed => write!(f, "the peer closed the connection"),
            DisconnectReason::PeerFailed(c) if *c == Cause::UNKNOWN => {
                write!(f, "the peer failed (crashed, reset or unreachable)")
            }
            DisconnectReason::PeerFailed(c) => write!(f, "the peer failed: {c}"),
            DisconnectReason::ConnectFailed(c) if *c == Cause::UNKNOWN => {
                write!(f, "the connection could not be established")
            }
            DisconnectReason::ConnectFailed(c) => {
                write!(f, "the connection could not be established: {c}")
            }
            DisconnectReason::Refused(c) => write!(f, "the peer refused the connection: {c}"),
            DisconnectReason::TableFull { size } => write!(
                f,
                "the peer refused the connection: connection table full ({size})"
            ),
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
            DisconnectReason::Other(c) => write!(f, "the transport failed: {c}"),
        }
    }
}

impl core::error::Error for DisconnectReason {}
