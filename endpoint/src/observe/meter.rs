//! The metrics of [`ClientObserver`](super::ClientObserver) and
//! [`ServerObserver`](super::ServerObserver) (feature `metrics`): handles
//! registered once, then one atomic add (or histogram record) per count.

use ::metrics::{
    counter, describe_counter, describe_histogram, histogram, Counter, Histogram, Unit,
};
use iomsg_core::session::{ClientEvent, ClientStats, ServerEvent};
use iomsg_core::Instant;

use super::names::*;
use super::SUBMIT_RING;

/// A counter registered with its description.
fn count(name: &'static str, unit: Unit, help: &'static str) -> Counter {
    describe_counter!(name, unit, help);
    counter!(name)
}

/// A histogram in seconds registered with its description.
fn seconds(name: &'static str, help: &'static str) -> Histogram {
    describe_histogram!(name, Unit::Seconds, help);
    histogram!(name)
}

/// A submit time, and the sn it belongs to plus one (0: empty).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    sn_plus_one: u64,
    at: Instant,
}

/// One client's metric handles and what they need to remember.
pub(super) struct ClientMeter {
    submitted: Counter,
    acked: Counter,
    replayed: Counter,
    not_replayed: Counter,
    reconnects: Counter,
    handshake: Histogram,
    ack_latency: Histogram,
    /// Every sn below it was counted acknowledged or given up.
    settled: u64,
    /// Handshakes completed so far.
    established: u64,
    /// When the current connection attempt started.
    connecting_at: Option<Instant>,
    /// `ClientStats::replayed` last seen.
    replayed_seen: u64,
    submits: [Slot; SUBMIT_RING],
}

impl Default for ClientMeter {
    fn default() -> ClientMeter {
        ClientMeter {
            submitted: count(
                CLIENT_SUBMITTED,
                Unit::Count,
                "submits accepted into the window",
            ),
            acked: count(CLIENT_ACKED, Unit::Count, "sns acknowledged by the server"),
            replayed: count(
                CLIENT_REPLAYED,
                Unit::Count,
                "sns sent again after a reconnect",
            ),
            not_replayed: count(
                CLIENT_NOT_REPLAYED,
                Unit::Count,
                "sns given up (replay off)",
            ),
            reconnects: count(CLIENT_RECONNECTS, Unit::Count, "handshakes after the first"),
            handshake: seconds(CLIENT_HANDSHAKE, "from Connecting to Established"),
            ack_latency: seconds(CLIENT_ACK_LATENCY, "from submit to acknowledgement"),
            settled: 0,
            established: 0,
            connecting_at: None,
            replayed_seen: 0,
            submits: [Slot::default(); SUBMIT_RING],
        }
    }
}

impl core::fmt::Debug for ClientMeter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The handles and the ring of submit times say nothing useful.
        f.debug_struct("ClientMeter")
            .field("settled", &self.settled)
            .field("established", &self.established)
            .field("connecting_at", &self.connecting_at)
            .field("replayed_seen", &self.replayed_seen)
            .finish_non_exhaustive()
    }
}

impl ClientMeter {
    pub(super) fn submit(&mut self, sn: u64, now: Instant) {
        self.submitted.increment(1);
        self.submits[ring_index(sn)] = Slot {
            sn_plus_one: sn + 1,
            at: now,
        };
    }

    pub(super) fn event(&mut self, event: &ClientEvent, now: Instant) {
        match event {
            ClientEvent::Connecting { .. } => self.connecting_at = Some(now),
            ClientEvent::Established { resume_from, .. } => {
                // Everything below `resume_from` was taken by the server.
                self.settle_acked(*resume_from, now);
                if let Some(at) = self.connecting_at.take() {
                    self.handshake
                        .record(now.saturating_since(at).as_secs_f64());
                }
                if self.established > 0 {
                    self.reconnects.increment(1);
                }
                self.established += 1;
            }
            ClientEvent::Acked { upto } => self.settle_acked(*upto, now),
            ClientEvent::NotReplayed { range } => {
                // The sns below it were confirmed by the same Welcome.
                self.settle_acked(range.start, now);
                self.give_up(range.end);
            }
            _ => {}
        }
    }

    pub(super) fn stats(&mut self, stats: &ClientStats) {
        if stats.replayed > self.replayed_seen {
            self.replayed.increment(stats.replayed - self.replayed_seen);
        }
        self.replayed_seen = stats.replayed;
    }

    /// Counts the sns from `settled` to `upto` acknowledged, with their
    /// latencies (those still in the ring).
    fn settle_acked(&mut self, upto: u64, now: Instant) {
        if upto <= self.settled {
            return;
        }
        self.acked.increment(upto - self.settled);
        for sn in self.in_ring(upto) {
            let slot = &mut self.submits[ring_index(sn)];
            if slot.sn_plus_one == sn + 1 {
                self.ack_latency
                    .record(now.saturating_since(slot.at).as_secs_f64());
                slot.sn_plus_one = 0;
            }
        }
        self.settled = upto;
    }

    /// Counts the sns from `settled` to `end` given up.
    fn give_up(&mut self, end: u64) {
        if end <= self.settled {
            return;
        }
        self.not_replayed.increment(end - self.settled);
        for sn in self.in_ring(end) {
            self.submits[ring_index(sn)].sn_plus_one = 0;
        }
        self.settled = end;
    }

    /// The sns from `settled` to `end` that may still have a slot (the
    /// last [`SUBMIT_RING`] of them).
    fn in_ring(&self, end: u64) -> core::ops::Range<u64> {
        self.settled.max(end.saturating_sub(SUBMIT_RING as u64))..end
    }
}

/// The ring slot of `sn`.
fn ring_index(sn: u64) -> usize {
    // The remainder is below SUBMIT_RING, a usize.
    (sn % SUBMIT_RING as u64) as usize
}

/// One server's metric handles.
#[derive(Debug)]
pub(super) struct ServerMeter {
    delivered: Counter,
    duplicates: Counter,
    live_loss: Counter,
    in_flight_loss: Counter,
    sessions_opened: Counter,
    rejected: Counter,
}

impl Default for ServerMeter {
    fn default() -> ServerMeter {
        ServerMeter {
            delivered: count(
                SERVER_DELIVERED,
                Unit::Count,
                "messages the application took",
            ),
            duplicates: count(SERVER_DUPLICATES, Unit::Count, "sns that arrived again"),
            live_loss: count(
                SERVER_LIVE_LOSS,
                Unit::Count,
                "sns lost on a live connection",
            ),
            in_flight_loss: count(
                SERVER_IN_FLIGHT_LOSS,
                Unit::Count,
                "sns in flight at a disconnect, never replayed",
            ),
            sessions_opened: count(SERVER_SESSIONS_OPENED, Unit::Count, "handshakes accepted"),
            rejected: count(SERVER_REJECTED, Unit::Count, "connections rejected"),
        }
    }
}

impl ServerMeter {
    pub(super) fn deliver(&mut self) {
        self.delivered.increment(1);
    }

    pub(super) fn event(&mut self, event: &ServerEvent) {
        match event {
            ServerEvent::Duplicate { .. } => self.duplicates.increment(1),
            ServerEvent::LostLive { range, .. } => self.live_loss.increment(sns(range)),
            ServerEvent::LostInFlight { range, .. } => self.in_flight_loss.increment(sns(range)),
            ServerEvent::SessionOpened { .. } => self.sessions_opened.increment(1),
            ServerEvent::Rejected { .. } => self.rejected.increment(1),
            _ => {}
        }
    }
}

/// How many sns `range` holds.
fn sns(range: &core::ops::Range<u64>) -> u64 {
    range.end.saturating_sub(range.start)
}
