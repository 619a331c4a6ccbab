//! Heartbeats on quiet connections and the silence timeout.

use super::*;

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
            let Some(c) = self.conns[slot].as_ref() else {
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
    pub fn poll_delay(&self) -> Option<Duration> {
        let any = self.conns.iter().any(Option::is_some);
        (any && self.config.liveness.is_some())
            .then(|| self.next_beat.saturating_duration_since(Clock::now()))
    }
}
