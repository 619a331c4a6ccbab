//! The server's public types: configuration, the output sink, events,
//! counters.

use core::ops::Range;
use core::time::Duration;

use crate::transport::ConnId;
use crate::wire::{IoMsg, Op, RejectReason, WireError};

/// Server configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl ServerConfig {
    /// Defaults: ack every 32 streamed frames or 200 µs, no payload CRC,
    /// the tracker's whole window and the whole session table.
    pub fn new(instance: u64) -> ServerConfig {
        ServerConfig {
            instance,
            ack_every: 32,
            ack_delay: Duration::from_micros(200),
            validate: false,
            window: u32::MAX,
            max_sessions: usize::MAX,
        }
    }
}

/// Where the server's output goes: frames to send, connections to close,
/// events for the application. Implemented by the driver.
pub trait ServerSink {
    /// Send `msg` on `conn`.
    fn transmit(&mut self, conn: ConnId, msg: &IoMsg<'_>);
    /// Close `conn` (after the frames already given to `transmit`).
    fn close(&mut self, conn: ConnId);
    /// Tell the application.
    fn event(&mut self, event: ServerEvent);
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
    /// A frame reached the application: exactly once per sn per instance.
    Delivered {
        /// The session.
        session: u64,
        /// The epoch it arrived in.
        epoch: u32,
        /// The connection that carried it.
        conn: ConnId,
        /// Its sn.
        sn: u64,
        /// `Write` or `Read`.
        op: Op,
        /// Payload length of a write, requested length of a read.
        len: u32,
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
    /// Frames held before their connection's handshake.
    pub backlogged: u64,
    /// Backlogged frames dropped with their connection before any `Hello`.
    pub backlog_discarded: u64,
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
    /// Rejections, indexed by `RejectReason::as_u16()`.
    pub rejects: [u64; 16],
    /// The last parse error seen.
    pub last_wire_error: Option<WireError>,
}

impl ServerStats {
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
