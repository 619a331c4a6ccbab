//! [`ClientObserver`]: what one client's metrics and traces see.

use iomsg_core::session::{ClientEvent, ClientStats};
use iomsg_core::Instant;

/// Submit times kept for the ack-latency histogram: one slot per sn
/// modulo this, the facade's window. A driver with a larger window gets
/// no sample for an sn whose slot a later submit took.
pub const SUBMIT_RING: usize = crate::WINDOW;

/// One client's observer: counts submits, acks, replays and losses, times
/// handshakes and acks (feature `metrics`), and traces the connection's
/// life (feature `tracing`). Empty without either feature.
///
/// Make one per client session, after installing the metrics recorder.
#[derive(Debug, Default)]
pub struct ClientObserver {
    #[cfg(feature = "metrics")]
    meter: super::meter::ClientMeter,
}

impl ClientObserver {
    /// Whether [`on_submit`](Self::on_submit) does anything (feature
    /// `metrics`): a caller may skip the call, and reading the clock for
    /// it, when this is false.
    pub const OBSERVES_SUBMITS: bool = cfg!(feature = "metrics");

    /// An observer for a new session (registers its metrics with the
    /// installed recorder).
    #[must_use]
    pub fn new() -> ClientObserver {
        ClientObserver::default()
    }

    /// Message `sn` was accepted into the window at `now`.
    #[inline]
    pub fn on_submit(&mut self, sn: u64, now: Instant) {
        #[cfg(feature = "metrics")]
        self.meter.submit(sn, now);
        let _ = (sn, now);
    }

    /// The session told `event`, at `now` (the instant of the poll that
    /// produced it).
    #[inline]
    pub fn on_event(&mut self, event: &ClientEvent, now: Instant) {
        #[cfg(feature = "metrics")]
        self.meter.event(event, now);
        #[cfg(feature = "tracing")]
        super::trace::client_event(event);
        let _ = (event, now);
    }

    /// The session's own counters after a poll: brings the replay count up
    /// to date (replays go out over later polls, not as events).
    #[inline]
    pub fn on_stats(&mut self, stats: &ClientStats) {
        #[cfg(feature = "metrics")]
        self.meter.stats(stats);
        let _ = stats;
    }
}
