//! The client's public types: requests, configuration, states, events,
//! errors and counters.

use core::ops::Range;
use core::time::Duration;

use super::super::backoff::Backoff;
use crate::conn::{Cause, DisconnectReason};
use crate::time::Instant;
use crate::wire::{Crc32c, RejectReason, WireError};

mod failure;

pub use failure::{DisconnectCause, FailReason, ProtocolError};

/// What kind of message the application sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub enum RequestOp {
    /// A write that the server completes with `WriteComp`.
    #[default]
    Write,
    /// A streamed write: no per-message completion, acked by cadence.
    StreamWrite,
    /// A read: the server's application answers with the data.
    Read,
}

/// A message the application submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// Bytes for the server's application, completed one by one.
    Write(&'a [u8]),
    /// Bytes for the server's application, acknowledged by cadence.
    StreamWrite(&'a [u8]),
    /// A request for `len` bytes that the server's application answers;
    /// `request` (at most [`MAX_READ_REQUEST`](crate::session::MAX_READ_REQUEST)
    /// bytes, possibly none) says what to read.
    Read {
        /// Bytes asked for.
        len: u32,
        /// What to read: a key, an offset; opaque to the protocol.
        request: &'a [u8],
    },
}

/// The data of a read completion, borrowed from the received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadData<'a> {
    /// The read's sn.
    pub sn: u64,
    /// The bytes the server's application answered.
    pub data: &'a [u8],
}

/// How large one message may be: the least of three limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageLimits {
    /// `ClientConfig::max_payload` (within the wire's 1 MiB).
    pub configured: usize,
    /// What the transport carries in one frame, less the header.
    pub transport: usize,
    /// The session's payload storage.
    pub storage: usize,
}

impl MessageLimits {
    /// The limit in force.
    #[must_use]
    pub fn max(&self) -> usize {
        self.configured.min(self.transport).min(self.storage)
    }
}

/// The next frame a client sends, as offered by
/// [`ClientSession::poll_transmit`](super::ClientSession::poll_transmit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub(super) len: usize,
    pub(super) frame: Frame,
}

impl Transmit {
    /// The frame's length in bytes: what to ask the transport for.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }
    /// Always `false`: a frame has a header.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// What a [`Transmit`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Frame {
    Hello,
    Data {
        sn: u64,
    },
    /// A read asked again: its answer was lost.
    Reask {
        sn: u64,
    },
    Probe,
    Bye,
}

/// Client configuration. [`ClientConfig::new`] gives production defaults;
/// change fields after it (`#[non_exhaustive]`: a new field is not a
/// breaking change).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Delay before retrying an attempt the transport refused before it
    /// connected (`ConnectFailed`: nothing listens at the address yet, as
    /// while a server restarts), jittered like `backoff` and never longer
    /// than `backoff`'s next step, for the first `refused_retries` such
    /// refusals of a run of failed attempts; those
    /// neither count towards `max_retries` nor make `backoff` grow. A
    /// refusal comes back at once and tells more than a timer: retried
    /// sooner, the client is back a fraction of `backoff` after the
    /// server listens again instead of up to a whole step of it. Any other
    /// failure (a connect that timed out, a lost connection), and
    /// refusals past the first `refused_retries`, wait for `backoff`.
    pub refused_retry: Duration,
    /// How many refusals of a run of failed attempts are retried after
    /// `refused_retry` (0: none; every failure waits for `backoff`).
    pub refused_retries: u32,
    /// Consecutive failed attempts tolerated before `Failed(RetriesExceeded)`
    /// (unless `retry_for` has not passed yet).
    pub max_retries: u32,
    /// How long, from the first failed attempt in a row, the client keeps
    /// trying whatever the count: it gives up only once both
    /// `max_retries` attempts failed and `retry_for` has passed. Attempts
    /// that fail at once (a network that is unreachable for a while) are
    /// spaced by `backoff`, so a count alone would be spent in seconds;
    /// this carries a session over an outage of up to `retry_for`. Zero:
    /// the count alone decides.
    pub retry_for: Duration,
    /// Keep retrying when the server's table is full (its transport's
    /// connection table, or its session table) although this client was
    /// never let in. Off: such a client fails at once with
    /// [`FailReason::TableFull`], since nothing of its session is on the
    /// server and a table that is full when a client starts usually means
    /// a server too small for its clients. A client let in before (in
    /// this run, or resumed at a point that names a server) retries in any
    /// case, within `max_retries` and `retry_for`: the server holds its
    /// session, and the table frees as peers leave. On: for clients
    /// started while the table is filled on purpose (a soak's hostile
    /// peer).
    pub retry_full_table: bool,
    /// Total run time, after which the client fails with `Timeout`.
    pub run_limit: Option<Duration>,
    /// Replay unacknowledged frames after a reconnect (at-least-once). When
    /// off, they are given up and reported as not replayed.
    pub replay: bool,
    /// Send new frames right after the `Hello`, before the `Welcome`, when
    /// nothing is unacknowledged (the server takes them in order after the
    /// `Hello`).
    pub eager: bool,
    /// Ask for payload CRCs on every frame.
    pub validate: bool,
    /// Largest message the application may submit (a write's payload, a
    /// read's length); also bounded by the transport and the storage (see
    /// [`MessageLimits`]).
    pub max_payload: u32,
    /// Seed of the backoff jitter.
    pub seed: u64,
    /// Computes the CRC32C of every frame sent and received: this build's
    /// own ([`Crc32c::BUILTIN`]) unless a backend hands in a faster one
    /// (iomsg-ucx's `crc32c_provider()` detects the CPU's instruction).
    pub crc: Crc32c,
}

impl ClientConfig {
    /// Defaults: connect timeout 1 s, reply timeout 2 s (a tail-loss probe
    /// after a quarter of it without ack progress), backoff 10 ms doubling
    /// to 500 ms with ±20 % jitter (the first 16 refusals of a run
    /// retried after 2 ms instead), 20 retries and at least 30 s of
    /// retrying (an outage of up to 30 s is survived), a full table final
    /// for a client never let in, no run limit, replay on,
    /// eager sends, no payload CRC, messages up to the wire's 1 MiB (and
    /// what the transport and the storage hold), the whole send window.
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
            refused_retry: Duration::from_millis(2),
            refused_retries: 16,
            max_retries: 20,
            retry_for: Duration::from_secs(30),
            retry_full_table: false,
            run_limit: None,
            replay: true,
            eager: true,
            validate: false,
            max_payload: crate::wire::MAX_DATA_LEN,
            seed: session,
            crc: Crc32c::BUILTIN,
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
/// an `Acked` replaces an `Acked` right before it (see
/// [`ClientSession::poll_event`]).
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
    /// The server lost the session's state: a new server instance, or the
    /// same one after it evicted the session (then only when sns are
    /// replayed).
    ServerRestarted {
        /// The previous instance, if one was seen.
        previous: Option<u64>,
        /// The new instance.
        instance: u64,
        /// Sns the old server may or may not have processed, which are
        /// sent again: each may be delivered twice (possible duplicates).
        /// Always empty with replay off: the sns given up are named by
        /// [`NotReplayed`](ClientEvent::NotReplayed) alone, so every
        /// given-up sn is reported once, in one event.
        unconfirmed: Range<u64>,
    },
    /// The server's record of the session is older than what the server
    /// acknowledged before (its journal lost its last commits, or was
    /// restored from an older copy): the sns in `unknown` were
    /// acknowledged and released, but the server can no longer vouch that
    /// its application kept them — each may have been lost. Always
    /// followed by a [`ServerRestarted`](ClientEvent::ServerRestarted)
    /// when sns are sent again (they may arrive twice). Never empty.
    StateLost {
        /// The server instance that said so.
        instance: u64,
        /// The sns whose delivery is now unknown.
        unknown: Range<u64>,
    },
    /// Cumulative progress: every sn below `upto` is settled —
    /// acknowledged by the server (its application took it), or, with
    /// replay off, given up earlier and named by a
    /// [`NotReplayed`](ClientEvent::NotReplayed) that came before this
    /// event. `upto` alone therefore does not say that an sn was
    /// delivered; [`ClientStats::acked`] counts only the acknowledged
    /// ones.
    Acked {
        /// Every sn below this is settled.
        upto: u64,
    },
    /// Replay is off: these sns were in flight at a disconnect, are not
    /// acknowledged and will not be sent again. Reported once per sn, in
    /// this event only; never empty.
    NotReplayed {
        /// The sns given up.
        range: Range<u64>,
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

/// Why `submit` refused a message. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubmitError {
    /// The send window holds its most messages: backpressure. Submit
    /// again after acks.
    WindowFull {
        /// Unacknowledged messages.
        outstanding: usize,
    },
    /// The payload storage has no room for the message's bytes now:
    /// backpressure. Submit again after acks.
    BufferFull(crate::seq::RingFull),
    /// Sequence numbers are exhausted (never wraps).
    Exhausted,
    /// The message is larger than it may ever be.
    TooLong {
        /// The payload length of a write, the requested length of a read.
        len: usize,
        /// The limits, of which the least is in force.
        limits: MessageLimits,
    },
    /// A read's request body is over
    /// [`MAX_READ_REQUEST`](crate::session::MAX_READ_REQUEST) bytes.
    RequestTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `submit_with`: a read without a length, or a write with one.
    BadRequest,
    /// The client is closing, closed or failed.
    Closed,
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SubmitError::WindowFull { outstanding } => write!(
                f,
                "send window full ({outstanding} unacknowledged messages); wait for acks \
                 and submit again"
            ),
            SubmitError::BufferFull(full) => full.fmt(f),
            SubmitError::Exhausted => write!(f, "sequence numbers exhausted; start a new session"),
            SubmitError::TooLong { len, limits } => write!(
                f,
                "message of {len} bytes exceeds the limit of {} bytes (max_payload {}, \
                 transport carries {}, send storage {}); split it or raise the smallest limit",
                limits.max(),
                limits.configured,
                limits.transport,
                limits.storage
            ),
            SubmitError::RequestTooLong { len, max } => write!(
                f,
                "read request of {len} bytes exceeds {max} bytes; send a shorter key"
            ),
            SubmitError::BadRequest => write!(
                f,
                "a read needs a requested length and a write must not have one"
            ),
            SubmitError::Closed => write!(f, "client is closing, closed or failed"),
        }
    }
}

impl core::error::Error for SubmitError {}

/// Counters of one client session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests accepted by `submit`.
    pub submitted: u64,
    /// First transmissions.
    pub sent: u64,
    /// Retransmissions after a reconnect.
    pub replayed: u64,
    /// Sns acknowledged by the server (given-up sns are not counted: see
    /// `not_replayed`).
    pub acked: u64,
    /// `WriteComp` / `ReadComp` frames received.
    pub completions: u64,
    /// Reads whose data was handed to the application.
    pub reads_answered: u64,
    /// Reads asked again because their answer was lost (with a
    /// connection, or on a live one) after an ack had passed them.
    pub reads_reasked: u64,
    /// Read completions ignored: for an sn that is not an unanswered read
    /// of the window, or of another length than asked.
    pub stray_read_data: u64,
    /// Sns given up because replay is off.
    pub not_replayed: u64,
    /// Sns replayed after the server lost the session (possible duplicates).
    pub possible_duplicates: u64,
    /// Sns acknowledged earlier whose delivery the server can no longer
    /// vouch for ([`ClientEvent::StateLost`]).
    pub state_lost: u64,
    /// Connection attempts.
    pub connects: u64,
    /// Handshakes completed.
    pub established: u64,
    /// Connections that ended.
    pub disconnects: u64,
    /// `ServerRestarted` events: server restarts (or evictions) seen.
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
