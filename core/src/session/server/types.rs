//! The server's public types: configuration, the output sink, events,
//! counters.

use core::ops::Range;
use core::time::Duration;

use crate::conn::{ConnId, DisconnectReason};
use crate::session::RequestOp;
use crate::wire::{Crc32c, RejectReason, WireError};

/// Server configuration. [`ServerConfig::new`] gives production defaults;
/// change fields after it (`#[non_exhaustive]`: a new field is not a
/// breaking change).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// This server process's instance id; random per start, chosen by the
    /// caller. Clients learn from it that a server lost its state.
    pub instance: u64,
    /// Streamed writes are acked at least every `ack_every` frames (K).
    pub ack_every: u32,
    /// ... and at most `ack_delay` after the first unacked one (T).
    pub ack_delay: Duration,
    /// Put payload CRCs on replies.
    pub validate: bool,
    /// The largest window offered to a client: how many sns past the
    /// cumulative ack it may have outstanding. Raised to
    /// [`MIN_WINDOW`](super::MIN_WINDOW) and capped at the tracker's
    /// capacity (`ServerCore::WINDOW`).
    pub window: u32,
    /// Sessions held at most, capped at the table's capacity. Past it an
    /// idle session without open holes is evicted (it leaves a tombstone).
    pub max_sessions: usize,
    /// The longest read answered (within the wire's 1 MiB and what the
    /// transport carries); a longer one is rejected as `ReadTooLong`.
    pub max_read: u32,
    /// How long an accepted connection may go without a `Hello`. Past it
    /// the connection is closed ([`ServerEvent::HandshakeTimeout`]), so
    /// peers that connect and say nothing cannot hold the connection
    /// table. A client sends its `Hello` first thing, so this only needs
    /// to cover a slow network and a busy client.
    pub handshake_timeout: Duration,
    /// Computes the CRC32C of every frame sent and received: this build's
    /// own ([`Crc32c::BUILTIN`]) unless a backend hands in a faster one
    /// (iomsg-ucx's `crc32c_provider()` detects the CPU's instruction).
    pub crc: Crc32c,
    /// Keep a journal: every session whose state changed is handed to
    /// [`ServerHandler::journal`] before [`ServerHandler::flush`], so that
    /// an instance started after a crash, given the records back through
    /// [`ServerCore::restore`](super::ServerCore::restore), recognises
    /// its past (see the [journal format](super::JournalRecord)). Off by
    /// default: it costs a record per changed session and flush.
    pub journal: bool,
}

impl ServerConfig {
    /// Defaults: ack every 32 streamed frames or 200 µs, no payload CRC,
    /// the tracker's whole window and the whole session table, reads up to
    /// the wire's 1 MiB, 5 s for a connection's `Hello`.
    pub const fn new(instance: u64) -> ServerConfig {
        ServerConfig {
            instance,
            ack_every: 32,
            ack_delay: Duration::from_micros(200),
            validate: false,
            window: u32::MAX,
            max_sessions: usize::MAX,
            max_read: crate::wire::MAX_DATA_LEN,
            handshake_timeout: Duration::from_secs(5),
            crc: Crc32c::BUILTIN,
            journal: false,
        }
    }
}

/// The server's application: takes delivered messages, answers reads,
/// hears events. Implemented by the application and passed to the
/// driver's `poll`.
pub trait ServerHandler {
    /// A new message: exactly once per sn per server instance, its bytes
    /// borrowed from the transport. Returning is taking it: the server
    /// acknowledges only messages handed over this way.
    fn deliver(&mut self, msg: Delivery<'_>);

    /// Writes the data a read asked for into `out` (exactly `read.len`
    /// bytes, the transport's own buffer). Called when the read
    /// completion goes out. A client asks a read again when its answer
    /// was lost, so `respond` may be called for one read more than once,
    /// and after a restart by an instance whose [`deliver`](Self::deliver)
    /// never saw it: answer from `read` (session, sn, length, request),
    /// and do not depend on being asked once.
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]);

    /// Something the reports may want (losses, rejections, sessions).
    fn event(&mut self, event: ServerEvent) {
        let _ = event;
    }

    /// Replies are about to go out, acknowledgements among them: an
    /// application that batches what [`deliver`](Self::deliver) took (a
    /// record written once per batch) completes the batch here, so that
    /// nothing is acknowledged before it is kept. The [`Server`] driver
    /// calls it; a bare [`ServerCore`](crate::session::ServerCore) user
    /// calls it before taking its transmits.
    ///
    /// # Errors
    ///
    /// [`Unkept`]: the batch could not be kept (a write or a sync
    /// failed; the application keeps its own error to report). The driver
    /// then [halts](crate::session::ServerCore::halt) the server: the
    /// replies of the batch never leave, so nothing that was not kept is
    /// acknowledged, and everything acknowledged before stays true.
    ///
    /// [`Server`]: crate::transport::Server
    fn flush(&mut self) -> Result<(), Unkept> {
        Ok(())
    }

    /// One session's journal record (with [`ServerConfig::journal`] on):
    /// keep it with what [`deliver`](Self::deliver) took, in the same
    /// batch, before the [`flush`](Self::flush) that follows returns — the
    /// acknowledgements that leave after it count on both. The last record
    /// of a session replaces the ones before: keep the latest of every
    /// session, give them back to
    /// [`ServerCore::restore`](super::ServerCore::restore) of the next
    /// instance, and answer [`recall`](Self::recall) from them.
    ///
    /// A record may also come outside a batch, when the server forgets a
    /// session it can no longer hold (its tombstone table is full): keep
    /// it with the next batch, as any other.
    fn journal(&mut self, record: &[u8]) {
        let _ = record;
    }

    /// With [`ServerConfig::journal`] on: the latest journal record of
    /// session `session`, which this instance does not hold (it forgot
    /// the session to make room, or had no room to restore it), written
    /// into `out` (of [`JOURNAL_MAX_RECORD`](super::JOURNAL_MAX_RECORD)
    /// bytes); returns its length. The server asks when a `Hello` names a
    /// session it does not know, before it opens a new record: a session
    /// the journal holds is taken back and resumed where the journal says,
    /// so that exactly once does not depend on the size of the server's
    /// tables.
    ///
    /// `None` (the default) says the journal does not hold the session:
    /// the `Hello` opens a new record, its client announces what may come
    /// twice, and — since nothing here can vouch for what it released —
    /// names `[0, base_sn)` as state lost
    /// ([`ServerEvent::StateLost`], `ClientEvent::StateLost`) when it
    /// released any. A journaled server whose application does not answer
    /// `recall` therefore names every session it forgot to make room.
    fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        let _ = (session, out);
        None
    }
}

/// The application could not keep a batch of what it took (see
/// [`ServerHandler::flush`]): the server stops acknowledging. Why is the
/// application's to say; it keeps its own error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unkept;

impl core::fmt::Display for Unkept {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(
            "the application could not keep what it took; the server stopped before \
             acknowledging it",
        )
    }
}

impl core::error::Error for Unkept {}

/// A closure that takes each delivered message is a handler for writes
/// only: a read it is asked to answer gets zeros (implement the trait to
/// answer reads), and events are ignored.
impl<F: FnMut(Delivery<'_>)> ServerHandler for F {
    fn deliver(&mut self, msg: Delivery<'_>) {
        self(msg);
    }
    fn respond(&mut self, _read: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
}

/// A message handed to the server's application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// The session.
    pub session: u64,
    /// The epoch it arrived in.
    pub epoch: u32,
    /// The connection that carried it.
    pub conn: ConnId,
    /// Its sn.
    pub sn: u64,
    /// What it is.
    pub op: RequestOp,
    /// A write's payload, or a read's request body.
    pub data: &'a [u8],
    /// A read's requested length (0 for writes).
    pub read_len: u32,
}

/// A read to answer (see [`ServerHandler::respond`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest<'a> {
    /// The session.
    pub session: u64,
    /// The read's sn.
    pub sn: u64,
    /// Bytes asked for: the length of `respond`'s buffer.
    pub len: u32,
    /// The read's request body.
    pub request: &'a [u8],
}

/// The next frame a server sends, as offered by
/// [`ServerCore::poll_transmit`](super::ServerCore::poll_transmit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerTransmit {
    /// The connection it goes on.
    pub conn: ConnId,
    pub(super) len: usize,
    /// A rejection to a connection outside the table.
    pub(super) stray: bool,
}

impl ServerTransmit {
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

/// What happened, for the application and the reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A `Hello` bound a connection to a session.
    SessionOpened {
        /// The session.
        session: u64,
        /// Its new epoch.
        epoch: u32,
        /// The connection.
        conn: ConnId,
        /// Whether the session was known (resumed) or new to this instance.
        known: bool,
        /// The `Welcome`'s `resume_from`.
        resume_from: u64,
    },
    /// A frame jumped over these sns on a live connection: lost by the
    /// transport unless a replay brings them (then `Recovered`).
    LiveLoss {
        /// The session.
        session: u64,
        /// The epoch in which the jump happened.
        epoch: u32,
        /// The sns jumped over.
        missing: Range<u64>,
    },
    /// A hole was filled (late arrival or replay).
    Recovered {
        /// The session.
        session: u64,
        /// The sn.
        sn: u64,
    },
    /// The client will not replay these sns: lost, in flight at disconnect.
    LostInFlight {
        /// The session.
        session: u64,
        /// The sns.
        range: Range<u64>,
    },
    /// Holes opened by live loss were given up or slid out of the window.
    LostLive {
        /// The session.
        session: u64,
        /// The sns.
        range: Range<u64>,
    },
    /// An sn that was already delivered arrived again (not delivered).
    Duplicate {
        /// The session.
        session: u64,
        /// Its sn.
        sn: u64,
    },
    /// A frame of an older epoch (discarded).
    Stale {
        /// The session.
        session: u64,
        /// The frame's epoch.
        epoch: u32,
        /// Its sn.
        sn: u64,
    },
    /// A connection was rejected and closed.
    Rejected {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: RejectReason,
        /// A value that explains it.
        detail: u64,
    },
    /// A session without a connection was evicted to make room; its
    /// tombstone remembers it.
    Evicted {
        /// The session.
        session: u64,
    },
    /// The tombstone table was full and forgot this session: a `Hello`
    /// for it now opens it as new, and frames it delivered before may be
    /// delivered again (the client announces them as possible duplicates).
    Forgotten {
        /// The session.
        session: u64,
    },
    /// The client closed the session with `Bye`.
    Closed {
        /// The session.
        session: u64,
    },
    /// A connection's replies no longer fit its queue: its transport took
    /// none of them for a whole queue's worth of frames (the peer stopped
    /// reading, or is frozen). Only this connection pays: its queued
    /// replies are dropped (the client replays what they acknowledged and
    /// asks its reads again) and it is closed. `session` is `None` for a
    /// connection outside the table whose rejection could not be queued
    /// (a driver that never transmits).
    SlowConsumer {
        /// The connection.
        conn: ConnId,
        /// The session it carried, if it was bound.
        session: Option<u64>,
        /// Replies dropped with it.
        dropped: usize,
    },
    /// The session's record is older than what an earlier instance
    /// acknowledged to its client (the journal lost its last commits, or
    /// was restored from an older copy): the client released these sns as
    /// acknowledged, and this record cannot say that they were delivered.
    /// Each may have been lost. The session goes on from the client's
    /// point under a new incarnation, so its client names these sns
    /// ([`ClientEvent::StateLost`](crate::session::ClientEvent::StateLost))
    /// and announces what it sends again as possible duplicates.
    StateLost {
        /// The session.
        session: u64,
        /// The sns whose delivery this record cannot vouch for.
        range: Range<u64>,
    },
    /// A journal record the application gave back for a session
    /// ([`ServerHandler::recall`]) was refused: the session's `Hello` is
    /// refused too (`BadHandshake`), since opening it anew could deliver
    /// its sns a second time.
    RecallRefused {
        /// The session.
        session: u64,
        /// Why.
        error: super::JournalError,
    },
    /// A connection sent no `Hello` within
    /// [`ServerConfig::handshake_timeout`] of being accepted: it was
    /// closed.
    HandshakeTimeout {
        /// The connection.
        conn: ConnId,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// The transport ended a connection (from the [`Server`] driver; the
    /// bare core learns it through `handle_disconnected`).
    ///
    /// [`Server`]: crate::transport::Server
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Why, as the transport says.
        reason: DisconnectReason,
    },
}

/// Server-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Frames handled.
    pub frames: u64,
    /// Sns delivered to the application.
    pub delivered: u64,
    /// Duplicates discarded.
    pub duplicates: u64,
    /// Stale-epoch frames discarded.
    pub stale: u64,
    /// Sns jumped over on live connections.
    pub live_gap_sns: u64,
    /// Holes filled afterwards.
    pub recovered: u64,
    /// Live-loss sns confirmed lost (given up or slid out).
    pub lost_live: u64,
    /// Sns lost in flight at a disconnect (replay off).
    pub lost_in_flight: u64,
    /// Frames sent (replies, acks, rejections).
    pub frames_sent: u64,
    /// Queued replies dropped because their connection ended or was
    /// closed first.
    pub replies_discarded: u64,
    /// Connections closed because their replies no longer fit
    /// ([`ServerEvent::SlowConsumer`]).
    pub slow_consumers: u64,
    /// Connections closed without a `Hello` in time
    /// ([`ServerEvent::HandshakeTimeout`]).
    pub handshake_timeouts: u64,
    /// Rejections to connections outside the table that were given up
    /// (the transport could not take them while their queue was half
    /// full); the connection was closed without its reason.
    pub rejects_unsent: u64,
    /// Frames of a rejected or closed connection that arrived before its
    /// close took effect (not processed).
    pub after_close: u64,
    /// Handshakes of sessions this instance knew.
    pub resumed: u64,
    /// Handshakes of sessions new to this instance.
    pub opened: u64,
    /// Sessions evicted.
    pub evicted: u64,
    /// Sessions resumed from their tombstone.
    pub revived: u64,
    /// Tombstones forgotten because their table was full.
    pub tombs_forgotten: u64,
    /// Connections closed because their session's owner connected again.
    pub superseded: u64,
    /// Tail-loss probes answered.
    pub probes: u64,
    /// `WriteComp` / `ReadComp` sent.
    pub completions: u64,
    /// `Ack` frames sent.
    pub acks: u64,
    /// Sessions taken back from the journal
    /// ([`ServerCore::restore`](super::ServerCore::restore)).
    pub restored: u64,
    /// Sessions taken back from the journal on a `Hello`
    /// ([`ServerHandler::recall`]).
    pub recalled: u64,
    /// Sns an earlier instance acknowledged that this one's records
    /// cannot vouch for ([`ServerEvent::StateLost`]).
    pub state_lost: u64,
    /// Rejections, indexed by `RejectReason::as_u16()`.
    pub rejects: [u64; 16],
    /// The last parse error seen.
    pub last_wire_error: Option<WireError>,
}

impl ServerStats {
    /// All counters zero (`Default`, usable in `const` context).
    pub const ZERO: ServerStats = ServerStats {
        frames: 0,
        delivered: 0,
        duplicates: 0,
        stale: 0,
        live_gap_sns: 0,
        recovered: 0,
        lost_live: 0,
        lost_in_flight: 0,
        frames_sent: 0,
        replies_discarded: 0,
        slow_consumers: 0,
        handshake_timeouts: 0,
        rejects_unsent: 0,
        after_close: 0,
        resumed: 0,
        opened: 0,
        evicted: 0,
        revived: 0,
        tombs_forgotten: 0,
        superseded: 0,
        probes: 0,
        completions: 0,
        acks: 0,
        restored: 0,
        recalled: 0,
        state_lost: 0,
        rejects: [0; 16],
        last_wire_error: None,
    };

    /// Rejections for one reason.
    pub fn rejects(&self, reason: RejectReason) -> u64 {
        self.rejects
            .get(usize::from(reason.as_u16()))
            .copied()
            .unwrap_or(0)
    }
    /// All rejections.
    pub fn rejects_total(&self) -> u64 {
        self.rejects.iter().sum()
    }
}

/// Per-session state and counters, as the server sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// Current epoch.
    pub epoch: u32,
    /// The record's incarnation (sent in every `Welcome`).
    pub incarnation: u64,
    /// The window agreed at the last `Hello`.
    pub window: u64,
    /// Its bound connection, if any.
    pub conn: Option<ConnId>,
    /// The cumulative ack: every sn below is delivered or given up.
    pub cumulative: u64,
    /// One past the highest sn received.
    pub top: u64,
    /// Open holes below `top`.
    pub missing: u64,
    /// Sns delivered.
    pub delivered: u64,
}
