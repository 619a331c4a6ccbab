//! Heartbeats on quiet connections and the silence timeout.

use super::*;

/// The longest a waiter sleeps on the event fd while UCX has work in
/// progress that it may not signal (see [`UcxTransport::poll_delay`]).
pub(crate) const PROGRESS_GAP: Duration = Duration::from_millis(1);

/// How long after its last arrival a connection counts as streaming (see
/// [`UcxTransport::poll_delay`]).
pub(crate) const RECENT: Duration = Duration::from_millis(20);

impl<R: Role> UcxTransport<R> {
    /// Heartbeats on the connections that sent nothing for a while, and
    /// the end of those from which nothing arrived for too long.
    pub(super) fn keep_alive(&mut self) {
        let Some(live) = self.config.liveness else {
            return;
        };
        let now = self.now;
        if now < self.next_beat {
            return;
        }
        self.next_beat = now + (live.interval / 4).max(Duration::from_millis(1));
        for slot in 0..self.conns.len() {
            // An ended connection is reported once its frames are taken.
            let Some(c) = self.conns[slot]
                .as_ref()
                .filter(|c| !matches!(c.state, State::Ended(_)))
            else {
                continue;
            };
            let (id, up) = (c.id, c.state == State::Up);
            if now.saturating_duration_since(c.heard) >= live.timeout {
                let reason = if up {
                    DisconnectReason::PeerSilent
                } else {
                    DisconnectReason::ConnectFailed(Status(sys::UCS_ERR_TIMED_OUT).cause())
                };
                self.fail(id, reason);
            } else if up && now.saturating_duration_since(c.said) >= live.interval {
                self.heartbeat(id);
            }
        }
    }

    /// Sends an empty heartbeat message to the peer of `id`.
    pub(super) fn heartbeat(&mut self, id: ConnId) {
        // A connection whose sends do not complete sends no heartbeats
        // either (its peer is not reading).
        if self.send_blocked(id, 0) {
            return;
        }
        let buf = self.buffer(0);
        self.send_message(id, buf, KIND_HEARTBEAT);
    }

    /// How soon [`poll`](Transport::poll) must run again to send
    /// heartbeats and notice a silent peer, while there are connections:
    /// an application that sleeps on [`event_fd`](Self::event_fd) wakes
    /// within it.
    ///
    /// While a connection is opening, or has received anything in the
    /// last 20 ms, or a closed one's endpoint is flushing (see
    /// [`LINGER`]), it is at most 1 ms: UCX does not
    /// signal everything on the event fd. UCX 1.13.1 schedules an accepted
    /// endpoint's accept callback without waking it, and its tcp transport
    /// arms nothing (`iface_event_arm` is a no-op): bytes that reached a
    /// socket while the worker was being armed wake nobody, so a waiter
    /// that trusted the fd alone would sleep through them until its next
    /// timer (measured through the async API: a stream stalled 40–60 ms
    /// at a time). A connection quiet for longer sleeps until its
    /// heartbeat.
    pub fn poll_delay(&self) -> Option<Duration> {
        let any = self.conns.iter().any(Option::is_some);
        let beat = (any && self.config.liveness.is_some())
            .then(|| self.next_beat.saturating_duration_since(Clock::now()));
        let now = Clock::now();
        let moving =
            !self.flushing.is_empty()
                || self.conns.iter().flatten().any(|c| {
                    c.state != State::Up || now.saturating_duration_since(c.heard) < RECENT
                });
        match beat {
            Some(b) if moving => Some(b.min(PROGRESS_GAP)),
            None if moving => Some(PROGRESS_GAP),
            beat => beat,
        }
    }
}
