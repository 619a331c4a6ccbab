//! The client's public types: requests, configuration, states, events,
//! errors and counters.

use core::ops::Range;
use core::time::Duration;

use super::super::backoff::Backoff;
use crate::time::Instant;
use crate::transport::DisconnectReason;
use crate::wire::{RejectReason, WireError};

/// What the application asked for, as kept in the send window for replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RequestOp {
    /// A write that the server completes with `WriteComp`.
    #[default]
    Write,
    /// A streamed write: no per-message completion, acked by cadence.
    StreamWrite,
    /// A read: the server answers `ReadComp` with `len` pattern bytes.
    Read,
}

/// One unacknowledged request: all that is needed to send it again (its
/// payload is the pattern of `(session, sn)`, regenerated on demand).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Request {
    /// The operation.
    pub op: RequestOp,
    /// Payload length of a write, requested length of a read.
    pub len: u32,
}

/// Client configuration. [`ClientConfig::new`] gives production defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// The session id; random per client, chosen by the caller.
    pub session: u64,
    /// Binds the session to this client: only a `Hello` with this token
    /// may resume it. Random per client (from the OS where there is one);
    /// two clients that share a session id by accident are told so instead
    /// of taking the session from each other. Not a secret against an
    /// attacker who can read the traffic.
    pub token: u64,
    /// Most sns outstanding (sent, unacknowledged) at once; capped at the
    /// send window `N` and at what the server agrees to in its `Welcome`.
    pub window: u32,
    /// Time allowed for the transport to connect.
    pub connect_timeout: Duration,
    /// Time allowed for the `Welcome`, and for ack progress while frames
    /// are outstanding; past it the connection is considered dead.
    pub reply_timeout: Duration,
    /// Delay between connection attempts.
    pub backoff: Backoff,
    /// Consecutive failed attempts tolerated before `Failed(RetriesExceeded)`.
    pub max_retries: u32,
    /// Total run time, after which the client fails with `Timeout`.
    pub run_limit: Option<Duration>,
    /// Replay unacknowledged frames after a reconnect (at-least-once). When
    /// off, they are given up and reported as not replayed.
    pub replay: bool,
    /// Send new frames right after the `Hello`, before the `Welcome`, when
    /// nothing is unacknowledged (they wait in the server's backlog).
    pub eager: bool,
    /// Ask for payload CRCs on every frame.
    pub validate: bool,
    /// Largest payload the application may submit.
    pub max_payload: u32,
    /// Seed of the backoff jitter.
    pub seed: u64,
}

impl ClientConfig {
    /// Defaults: connect timeout 1 s, reply timeout 2 s (a tail-loss probe
    /// after a quarter of it without ack progress), backoff 10 ms doubling
    /// to 500 ms with ±20 % jitter, 20 retries, no run limit, replay on,
    /// eager sends, no payload CRC, payloads up to 4 KiB, the whole send
    /// window.
    ///
    /// `token` must be random per client (see [`ClientConfig::token`]).
    pub fn new(session: u64, token: u64) -> ClientConfig {
        ClientConfig {
            session,
            token,
            window: u32::MAX,
            connect_timeout: Duration::from_secs(1),
            reply_timeout: Duration::from_secs(2),
            backoff: Backoff {
                initial: Duration::from_millis(10),
                max: Duration::from_millis(500),
                jitter_per_mille: 200,
            },
            max_retries: 20,
            run_limit: None,
            replay: true,
            eager: true,
            validate: false,
            max_payload: 4096,
            seed: session,
        }
    }
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
pub enum FailReason {
    /// `max_retries` consecutive attempts failed.
    RetriesExceeded {
        /// Attempts made in a row.
        attempts: u32,
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
}

impl core::fmt::Display for FailReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FailReason::RetriesExceeded { attempts, last } => write!(
                f,
                "gave up after {attempts} failed connection attempts in a row \
                 (last: {last:?}); check that the server runs and is reachable"
            ),
            FailReason::Timeout { limit } => {
                write!(f, "the run limit of {limit:?} passed")
            }
            FailReason::EpochExhausted => {
                write!(f, "the session reconnected 2^32 times; start a new session")
            }
            FailReason::SessionOwned { session } => write!(
                f,
                "session {session:#x} belongs to another client (its token differs): \
                 two clients were given the same session id; give each client its own \
                 random id"
            ),
        }
    }
}

/// The client's state. Data-carrying: each state holds what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// Not started.
    Idle,
    /// Waiting for the transport to connect.
    Connecting {
        /// Attempt number since the last established connection (1-based).
        attempt: u32,
        /// When the attempt times out.
        deadline: Instant,
    },
    /// `Hello` sent or about to be; waiting for `Welcome`.
    Handshaking {
        /// Attempt number.
        attempt: u32,
        /// When the handshake times out.
        deadline: Instant,
    },
    /// Streaming.
    Established {
        /// The server instance.
        instance: u64,
        /// When the handshake completed.
        since: Instant,
    },
    /// The connection just ended; next comes `Backoff` or `Failed`.
    Disconnected {
        /// Why.
        cause: DisconnectCause,
    },
    /// Waiting before the next attempt.
    Backoff {
        /// When to try again.
        until: Instant,
    },
    /// Closed gracefully: everything acknowledged, `Bye` sent.
    Closed,
    /// Gave up.
    Failed(FailReason),
}

/// Something the application may want to know. None is ever dropped:
/// an `Acked` replaces an `Acked` right before it, and `ReadMismatch`es of
/// one run of completions add up (see [`ClientSession::poll_event`]).
///
/// [`ClientSession::poll_event`]: super::ClientSession::poll_event
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A connection attempt starts (the driver asks the transport).
    Connecting {
        /// The new connection's epoch.
        epoch: u32,
        /// Attempt number.
        attempt: u32,
    },
    /// The handshake completed.
    Established {
        /// The connection's epoch.
        epoch: u32,
        /// The server instance.
        instance: u64,
        /// Whether the server knew the session.
        known: bool,
        /// Where sending resumes.
        resume_from: u64,
    },
    /// The server lost the session's state (restart or eviction).
    ServerRestarted {
        /// The previous instance, if one was seen.
        previous: Option<u64>,
        /// The new instance.
        instance: u64,
        /// Sns the old server may or may not have processed: replayed
        /// (possible duplicates) when replay is on, given up otherwise.
        unconfirmed: Range<u64>,
    },
    /// Cumulative ack progress.
    Acked {
        /// Every sn below this is acknowledged.
        upto: u64,
    },
    /// Replay is off: these sns were in flight at a disconnect, are not
    /// acknowledged and will not be sent again.
    NotReplayed {
        /// The sns given up.
        range: Range<u64>,
    },
    /// Read completions whose data did not match the pattern.
    ReadMismatch {
        /// The first such read's sn.
        sn: u64,
        /// How many (this one and later ones of the same run of
        /// completions).
        count: u64,
    },
    /// The connection ended.
    Disconnected {
        /// Its epoch.
        epoch: u32,
        /// Why.
        cause: DisconnectCause,
    },
    /// The client gave up.
    Failed(FailReason),
    /// The client closed gracefully.
    Closed,
}

/// What the driver must do with the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a new connection (and report it with `handle_connected`).
    Connect,
    /// Close the current connection.
    Close,
}

/// Why `submit` refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// The send window is full: wait for acks (backpressure, not an error).
    Full,
    /// Sequence numbers are exhausted (never wraps).
    Exhausted,
    /// Payload larger than `max_payload`.
    TooLong {
        /// Requested length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The client is closing, closed or failed.
    Closed,
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SubmitError::Full => write!(f, "send window full; wait for acks and submit again"),
            SubmitError::Exhausted => write!(f, "sequence numbers exhausted; start a new session"),
            SubmitError::TooLong { len, max } => {
                write!(f, "payload of {len} bytes exceeds max_payload {max}")
            }
            SubmitError::Closed => write!(f, "client is closing, closed or failed"),
        }
    }
}

/// Counters of one client session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests accepted by `submit`.
    pub submitted: u64,
    /// First transmissions.
    pub sent: u64,
    /// Retransmissions after a reconnect.
    pub replayed: u64,
    /// Sns released by cumulative acks.
    pub acked: u64,
    /// `WriteComp` / `ReadComp` frames received.
    pub completions: u64,
    /// Read completions whose data did not match.
    pub read_mismatches: u64,
    /// Sns given up because replay is off.
    pub not_replayed: u64,
    /// Sns replayed after the server lost the session (possible duplicates).
    pub possible_duplicates: u64,
    /// Connection attempts.
    pub connects: u64,
    /// Handshakes completed.
    pub established: u64,
    /// Connections that ended.
    pub disconnects: u64,
    /// Server restarts (or evictions) seen.
    pub server_restarts: u64,
    /// Frames of an older epoch, ignored.
    pub stale_frames: u64,
    /// `Reject` frames received.
    pub rejects: u64,
    /// Protocol errors seen.
    pub protocol_errors: u64,
    /// Tail-loss probes sent.
    pub probes: u64,
}
