//! The one error type of every [`Client`](crate::Client) and
//! [`Server`](crate::Server), on every backend.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use iomsg_core::session::{DisconnectCause, FailReason, JournalError, SubmitError};
use iomsg_core::transport::DriverError;

use crate::AddrError;

/// An error of a backend, kept as its source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a call of a [`Client`](crate::Client) or [`Server`](crate::Server)
/// failed. Each says what was being done and, where one is known, what to
/// change. The variants are grouped by who can fix it: the caller's input
/// (`Address`, `Rejected`, `Unsupported`), this machine (`Setup`, `Bind`,
/// `Wait`, `Thread`, `Random`, `Transport`), the peer or the network
/// (`ConnectTimeout`, `Failed`, `Lost`, `StateLost`, `Timeout`, `Journal`)
/// and the application's own handler or runtime (`Halted`, `Shutdown`,
/// `Dropped`).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The address given does not parse or resolve: the error names it
    /// and the forms the backend takes.
    Address(AddrError),
    /// The backend could not be set up (UCX's context, worker or
    /// endpoint; a socket poller).
    Setup {
        /// The backend (`"UCX"`, `"stream"`).
        backend: &'static str,
        /// What it said.
        source: BoxError,
    },
    /// The server could not listen on its address.
    Bind {
        /// The address.
        addr: String,
        /// What the system or the backend said.
        source: BoxError,
    },
    /// Waiting on the backend failed while running.
    Wait {
        /// The backend.
        backend: &'static str,
        /// What it said.
        source: std::io::Error,
    },
    /// The transport cannot carry the protocol (its frames are too small).
    Transport(DriverError),
    /// No thread could be started (to build the server's session table).
    Thread(std::io::Error),
    /// No random session id from the operating system.
    Random(std::io::Error),
    /// `connect` saw no handshake complete in time.
    ConnectTimeout {
        /// The server's address.
        addr: String,
        /// How long it tried.
        waited: Duration,
        /// How the last attempt ended, if one did.
        last: Option<DisconnectCause>,
    },
    /// The client gave up for good (every later call fails the same way);
    /// messages not acknowledged by then are lost to it.
    Failed(FailReason),
    /// The message can never be sent: longer than the largest message
    /// (the transport's, the window storage's), or sns exhausted.
    Rejected(SubmitError),
    /// The message was given up without an acknowledgement: replay is off
    /// and it was in flight when a connection ended, so the server may or
    /// may not have it.
    Lost {
        /// The message.
        sn: u64,
        /// The sns given up with it.
        range: Range<u64>,
    },
    /// The async runtime is shutting down (feature `tokio`).
    Shutdown,
    /// The client was dropped before the message's outcome was known
    /// (feature `tokio`: a receipt outlived its client).
    Dropped,
    /// A wait ended before what it waited for.
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// A journal record given to [`Server::restore`](crate::Server::restore)
    /// was not taken back (torn, changed, or no room): that session's
    /// client is told it is new and announces what may arrive twice.
    Journal(JournalError),
    /// An option this endpoint does not offer (the text says which, and
    /// what offers it).
    Unsupported(&'static str),
    /// A server lost state it had acknowledged (its journal went back in
    /// time: a power cut under a lazy sync, an older copy restored): the
    /// sns in `unknown` were acknowledged, and whether its application
    /// kept them is no longer known. Reported once, by the `flush` after
    /// it; each range is a
    /// [`ClientEvent::StateLost`](iomsg_core::session::ClientEvent::StateLost).
    StateLost {
        /// The sns whose delivery is unknown (from the lowest to the
        /// highest named since the last `flush`).
        unknown: Range<u64>,
    },
    /// The server's handler could not keep what it took (its
    /// [`flush`](iomsg_core::session::ServerHandler::flush) failed): the
    /// server acknowledged nothing it did not keep, refuses every client
    /// from now on and must be stopped; the handler holds the cause.
    Halted,
}

impl Error {
    /// [`Error::Setup`] for `backend`.
    pub fn setup(backend: &'static str, source: impl Into<BoxError>) -> Error {
        Error::Setup {
            backend,
            source: source.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Address(e) => write!(f, "{e}"),
            Error::Setup { backend, source } => write!(f, "cannot set up {backend}: {source}"),
            Error::Bind { addr, source } => write!(
                f,
                "cannot listen on {addr}: {source}; pick another address, or stop what holds it"
            ),
            Error::Wait { backend, source } => write!(f, "cannot wait for {backend}: {source}"),
            Error::Transport(e) => write!(f, "the transport cannot carry iomsg: {e}"),
            Error::Random(e) => write!(f, "no random session id from the system: {e}"),
            Error::Thread(e) => write!(f, "cannot start a thread: {e}"),
            Error::ConnectTimeout { addr, waited, last } => {
                write!(
                    f,
                    "no connection to {addr} within {:.1} s",
                    waited.as_secs_f64()
                )?;
                match last {
                    Some(cause) => write!(f, " (last attempt: {cause})"),
                    None => write!(f, " (no attempt ended: is the address reachable?)"),
                }
            }
            Error::Failed(reason) => write!(f, "the client gave up: {reason}"),
            Error::Rejected(e) => write!(f, "message refused: {e}"),
            Error::Lost { sn, range } => write!(
                f,
                "message {sn} was given up unacknowledged (sns {}..{} were in flight when \
                 a connection ended, and replay is off): the server may or may not have it",
                range.start, range.end
            ),
            Error::Shutdown => write!(f, "the async runtime is shutting down"),
            Error::Dropped => write!(
                f,
                "the client was dropped before the message was acknowledged"
            ),
            Error::Timeout { what, waited } => {
                write!(f, "{what}: not within {:.3} s", waited.as_secs_f64())
            }
            Error::Journal(e) => write!(f, "cannot restore from the journal: {e}"),
            Error::Unsupported(what) => write!(f, "not supported: {what}"),
            Error::StateLost { unknown } => write!(
                f,
                "the server lost state it had acknowledged (its journal went back in time): \
                 sns {}..{} were acknowledged and may not have been kept; each range is a \
                 ClientEvent::StateLost",
                unknown.start, unknown.end
            ),
            Error::Halted => write!(
                f,
                "the server stopped: its handler could not keep what it took (its flush \
                 failed), and nothing it did not keep was acknowledged; fix the cause the \
                 handler reports, then start a new server"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Address(e) => Some(e),
            Error::Setup { source, .. } | Error::Bind { source, .. } => Some(source.as_ref()),
            Error::Wait { source, .. } => Some(source),
            Error::Random(e) | Error::Thread(e) => Some(e),
            Error::Journal(e) => Some(e),
            _ => None,
        }
    }
}

impl From<AddrError> for Error {
    fn from(e: AddrError) -> Error {
        Error::Address(e)
    }
}

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Error {
        Error::Transport(e)
    }
}
