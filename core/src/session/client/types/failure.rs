//! Why a connection ended, what broke the protocol, and why a client
//! gave up: with the text each says to the application.

use super::*;

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisconnectCause {
    /// The transport reported it.
    Transport(DisconnectReason),
    /// The transport did not connect within `connect_timeout`.
    ConnectTimeout,
    /// No `Welcome`, or no ack progress, within `reply_timeout`.
    ReplyTimeout,
    /// The server rejected the connection.
    Rejected {
        /// The server's reason.
        reason: RejectReason,
        /// A value that explains it (reason-specific).
        detail: u64,
    },
    /// The server said `Bye`.
    ServerBye,
    /// The server broke the protocol.
    Protocol(ProtocolError),
}

/// A server frame that breaks the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The frame did not parse.
    Malformed(WireError),
    /// `resume_from` outside `[base_sn, next_sn]` (or not `base_sn` for an
    /// unknown session that is replayed).
    BadResume {
        /// The `Hello`'s `base_sn`.
        base_sn: u64,
        /// The server's answer.
        resume_from: u64,
        /// The `Hello`'s `next_sn`.
        next_sn: u64,
    },
    /// A cumulative ack beyond what was ever sent.
    AckBeyondSent {
        /// The ack received.
        ack: u64,
        /// One past the highest sn sent.
        sent: u64,
    },
    /// A frame for another session.
    SessionMismatch {
        /// This client's session.
        expected: u64,
        /// The frame's.
        got: u64,
    },
    /// An op a server never sends to a client, or not in this state.
    Unexpected(crate::wire::Op),
    /// A `Welcome` or `Reject` whose body carries no payload CRC.
    UncheckedBody(crate::wire::Op),
    /// A `Welcome` that agrees to a window of 0.
    ZeroWindow,
}

/// Why the client gave up for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailReason {
    /// `max_retries` consecutive attempts failed, and they took longer
    /// than `retry_for`.
    RetriesExceeded {
        /// Attempts made in a row.
        attempts: u32,
        /// From the first failed attempt in a row to the last.
        over: Duration,
        /// How the last one ended.
        last: DisconnectCause,
    },
    /// The run limit passed.
    Timeout {
        /// The configured limit.
        limit: Duration,
    },
    /// The epoch counter would wrap.
    EpochExhausted,
    /// The server refused the `Hello`: another client owns this session id
    /// (its token differs). Two clients were started with the same session
    /// id; give each its own (ids and tokens should come from the OS's
    /// randomness, not from a shared seed).
    SessionOwned {
        /// The session id in dispute.
        session: u64,
    },
    /// The server refused the `Hello`: it has seen sns of this session up
    /// to `seen`, more than this client says it ever sent. A client was
    /// restarted with the same session id and token and counts its sns
    /// from 0 again; its new sns would be taken for the old ones. Give
    /// every client run a new session id (or keep its sn state).
    Rewound {
        /// The session id.
        session: u64,
        /// One past the highest sn the server has of it.
        seen: u64,
    },
    /// The transport refused a frame as too large although its
    /// capabilities say it carries it: retrying would fail the same way.
    TransportRefused {
        /// The frame's length.
        len: usize,
        /// The largest frame the transport said it carries.
        max_frame: usize,
    },
    /// The server refused the connection for a reason another attempt
    /// does not change ([`DisconnectReason::Refused`]): the transport's
    /// cause says which (for UCX: the other API).
    Refused {
        /// What the transport learnt from the server.
        cause: Cause,
    },
    /// The server's table was full and this client was never let in, so
    /// nothing of its session is on the server (see
    /// [`ClientConfig::retry_full_table`]).
    TableFull {
        /// The table's size.
        size: u64,
        /// How the attempt ended: the transport's
        /// [`DisconnectReason::TableFull`], or a `Reject`
        /// (`SessionTableFull`).
        last: DisconnectCause,
    },
    /// The server refused the `Hello`: it has seen connection epoch
    /// `seen` of this session, not below this attempt's. A client was
    /// restarted with the same session id and token but without its
    /// epochs (two processes share one identity, or an outbox went back
    /// in time); its sns would be taken for the old ones.
    StaleEpoch {
        /// The session id.
        session: u64,
        /// This attempt's epoch.
        epoch: u32,
        /// The highest epoch of the session the server has seen.
        seen: u64,
    },
    /// Client and server speak different wire versions.
    WireVersion {
        /// The version this client speaks.
        ours: u8,
        /// The version the server speaks, when it said.
        theirs: Option<u8>,
    },
}

impl core::fmt::Display for FailReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FailReason::RetriesExceeded {
                attempts,
                over,
                last: DisconnectCause::Rejected { reason, detail },
            } => write!(
                f,
                "gave up after {attempts} failed connection attempts in a row over {:.1} s: \
                 the server refused the last one: {}",
                over.as_secs_f64(),
                RefusalHelp(*reason, *detail)
            ),
            FailReason::RetriesExceeded {
                attempts,
                over,
                last,
            } => write!(
                f,
                "gave up after {attempts} failed connection attempts in a row over {:.1} s \
                 (last: {last}); check that the server runs, is reachable and speaks this \
                 transport, or retry for longer (retries, retry time)",
                over.as_secs_f64()
            ),
            FailReason::Timeout { limit } => {
                write!(f, "the run limit of {limit:?} passed")
            }
            FailReason::EpochExhausted => {
                write!(f, "the session reconnected 2^32 times; start a new session")
            }
            FailReason::Rewound { session, seen } => write!(
                f,
                "session {session:#x} was restarted: the server has its sns up to {seen}, more \
                 than this client ever sent; start every client run with a new session id"
            ),
            FailReason::SessionOwned { session } => write!(
                f,
                "session {session:#x} belongs to another client (its token differs): \
                 two clients were given the same session id; give each client its own \
                 random id"
            ),
            FailReason::TransportRefused { len, max_frame } => write!(
                f,
                "the transport refused a frame of {len} bytes although it says it carries \
                 {max_frame}; fix the backend's capabilities"
            ),
            FailReason::Refused { cause } => write!(
                f,
                "the server refused the connection: {cause}; another attempt would be \
                 refused the same way"
            ),
            FailReason::TableFull { size, last } => {
                match last {
                    DisconnectCause::Transport(_) => write!(
                        f,
                        "the server refused the connection: connection table full ({size})"
                    )?,
                    _ => write!(
                        f,
                        "the server refused the session: its table of {size} sessions (or \
                         connections) is full"
                    )?,
                }
                write!(
                    f,
                    ", and this client was never let in (nothing of its session is on the \
                     server); the table frees as other clients leave: start the client again \
                     later, give the server a larger table, or let the client wait for room \
                     (retry_full_table, --retry-full-table)"
                )
            }
            FailReason::StaleEpoch {
                session,
                epoch,
                seen,
            } => write!(
                f,
                "session {session:#x} was restarted: the server has seen its connection \
                 epoch {seen}, this attempt's is {epoch}; two processes share its session id \
                 and token, or its outbox went back in time: start every client run with a \
                 new session id (or keep the outbox synced)"
            ),
            FailReason::WireVersion {
                ours,
                theirs: Some(theirs),
            } => write!(
                f,
                "wire version mismatch: this client speaks version {ours}, the server \
                 {theirs}; run a client and a server of the same protocol version"
            ),
            FailReason::WireVersion { ours, theirs: None } => write!(
                f,
                "wire version mismatch: the server does not speak version {ours}, which \
                 this client speaks; run a client and a server of the same protocol version"
            ),
        }
    }
}

impl core::error::Error for FailReason {}

/// A server's refusal, with what the user can do about it.
struct RefusalHelp(RejectReason, u64);

impl core::fmt::Display for RefusalHelp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let RefusalHelp(reason, detail) = *self;
        match reason {
            RejectReason::SessionTableFull => write!(
                f,
                "SessionTableFull: its table of {detail} sessions (or connections) is full. \
                 Sessions with sns still missing are never evicted: they wait for their \
                 clients to reconnect and replay, however long that takes. It frees when \
                 those clients come back, close, or the server restarts; or give the \
                 server a larger table"
            ),
            RejectReason::ShuttingDown if detail == crate::session::HALTED_UNKEPT => write!(
                f,
                "ShuttingDown: the server could not keep what it took (its disk failed) and \
                 stopped acknowledging; nothing it did not keep was acknowledged. Retry once \
                 it is back"
            ),
            RejectReason::StaleConnection => write!(
                f,
                "StaleConnection: each attempt's connection was older than a session the \
                 server forgot (detail {detail}); it is busy closing sessions, retry later"
            ),
            other => write!(f, "{other} (detail {detail})"),
        }
    }
}

impl core::fmt::Display for DisconnectCause {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DisconnectCause::Transport(reason) => write!(f, "transport: {reason}"),
            DisconnectCause::ConnectTimeout => write!(f, "the transport did not connect in time"),
            DisconnectCause::ReplyTimeout => write!(
                f,
                "no Welcome, or no ack progress, within the reply timeout"
            ),
            DisconnectCause::Rejected { reason, detail } => {
                write!(
                    f,
                    "the server rejected the connection: {reason:?} (detail {detail})"
                )
            }
            DisconnectCause::ServerBye => write!(f, "the server said Bye"),
            DisconnectCause::Protocol(e) => write!(f, "protocol error: {e}"),
        }
    }
}

impl core::error::Error for DisconnectCause {}

impl core::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProtocolError::Malformed(e) => write!(f, "malformed frame from the server: {e}"),
            ProtocolError::BadResume {
                base_sn,
                resume_from,
                next_sn,
            } => write!(
                f,
                "Welcome resumes from sn {resume_from}, outside the Hello's {base_sn}..={next_sn}"
            ),
            ProtocolError::AckBeyondSent { ack, sent } => {
                write!(f, "ack {ack} is beyond the sns sent (below {sent})")
            }
            ProtocolError::SessionMismatch { expected, got } => {
                write!(f, "frame for session {got:#x}, this is {expected:#x}")
            }
            ProtocolError::Unexpected(op) => write!(f, "unexpected {op} from the server"),
            ProtocolError::UncheckedBody(op) => write!(f, "{op} without a payload CRC"),
            ProtocolError::ZeroWindow => write!(f, "Welcome agrees to a window of 0"),
        }
    }
}

impl core::error::Error for ProtocolError {}
