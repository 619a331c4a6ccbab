//! Progress: the worker driven, and what its callbacks recorded taken in
//! an order that lets no end of a connection overtake its frames.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Progresses the worker and takes what the callbacks recorded:
    /// completions, then arrivals, then endpoint failures. UCX may run a
    /// message's arrival and its endpoint's error handler in one progress
    /// call (a peer that sent a frame and closed: the frame on the data
    /// lane, the close on the connection manager's): what arrived is
    /// queued on its connection before the failure ends it, and handed
    /// over before its `Disconnected` ([`end`](Self::end)).
    pub(super) fn drive(&mut self) {
        self.worker.progress();
        self.now = Clock::now();
        self.accept_requests();
        self.take_done();
        // Both: a peer may send on the API this end does not use (its
        // messages are strays).
        self.probe();
        if self.config.api == Api::Am {
            self.arrived();
        }
        let strays = self.worker.shared.stray_ams.take();
        self.stray_frames += strays;
        if self.take_failed() {
            // Closing endpoints may have completed requests at once.
            self.take_done();
        }
        self.expire_lingering();
    }

    /// Acts on the completions the callbacks recorded.
    fn take_done(&mut self) {
        // Taken in rounds: acting on one completion may complete others at
        // once (their callbacks push to the emptied queue).
        for _ in 0..64 {
            // The callbacks go on in the spare queue: no allocation per
            // round once both have grown.
            let spare = mem::take(&mut self.spare_done);
            let mut done = self.worker.shared.done.replace(spare);
            if done.is_empty() {
                self.spare_done = self.worker.shared.done.replace(done);
                return;
            }
            self.taken += done.len() as u64;
            for (slot, status, length) in done.drain(..) {
                self.finish(slot, status, length);
            }
            self.spare_done = done;
        }
    }

    /// Acts on the endpoint failures the error handlers recorded: an
    /// opening connection failed to connect, an open one ended. Returns
    /// whether there were any.
    fn take_failed(&mut self) -> bool {
        let failed = self.worker.shared.failed.take();
        self.taken += failed.len() as u64;
        let any = !failed.is_empty();
        for (key, status) in failed {
            let Some(id) = self
                .by_key
                .get(&key)
                .and_then(|&slot| self.conns[slot].as_ref())
                .map(|c| c.id)
            else {
                continue;
            };
            let opening = self.conn(id).is_some_and(|c| {
                matches!(c.state, State::Opening { .. } | State::Addressing { .. })
            });
            if opening {
                self.fail(id, DisconnectReason::ConnectFailed(status.cause()));
            } else {
                self.end(id, DisconnectReason::PeerFailed(status.cause()));
            }
        }
        any
    }
}
