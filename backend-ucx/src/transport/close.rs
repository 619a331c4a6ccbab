//! The end of a connection, so that a frame written before it reaches
//! the peer before the peer learns of it, at both ends.
//!
//! **The closing end lingers.** A connection the driver closes (a server
//! that sent a `Reject` or a `Bye`) flushes its frame endpoint first
//! (`ucp_ep_flush_nbx`): over tcp UCX 1.13.1 completes a flush only once
//! the peer's UCX acknowledged every byte sent before it (`tcp_ep.c`,
//! `uct_tcp_ep_flush`: a zero-length PUT and its ACK), so the frames are
//! in the peer's UCX before the close can reach it. Then its endpoints
//! close at once (`UCP_EP_CLOSE_FLAG_FORCE`). A force close alone
//! discards what UCX still holds (`ucp_ep_close_nbx` → `uct_ep_flush`
//! with `UCT_FLUSH_FLAG_CANCEL` purges the tcp endpoint's send buffer),
//! and a UCX flush close (`ucp_ep_close_nbx` without the flag) then waits
//! for the peer's disconnect without bound. A flush that takes longer
//! than [`LINGER`] (a peer that does not read, or is gone) is cut short:
//! the endpoints close then (which completes the flush, cancelled), and
//! a line is logged. At most [`MAX_LINGERING`] endpoints linger; past
//! that a closed connection's endpoints close at once.
//!
//! **The other end hands over what arrived.** The close reaches the peer
//! on the connection manager's socket, the frames on the data lane's: UCX
//! may run the endpoint's error handler in the same progress call that
//! received the last frames. The transport takes arrivals before failures
//! ([`drive`](UcxTransport::drive)), and an open connection whose endpoint
//! failed is [`State::Ended`]: it hands over the frames it holds, complete
//! and in order, and is reported `Disconnected` after the last.

use super::*;

/// A connection's endpoints, taken out of the table to be closed.
pub(crate) struct Ends {
    pub(super) ep: sys::ucp_ep_h,
    /// The error handler's argument: lives until the close completes.
    pub(super) err_arg: Box<ErrArg>,
    /// With `shared_memory`: the endpoint that carries the frames.
    pub(super) data: Option<(sys::ucp_ep_h, Box<ErrArg>)>,
    /// The peer, for a log line.
    pub(super) peer: Option<SocketAddr>,
}

impl Ends {
    /// The endpoint frames go on.
    fn frame_ep(&self) -> sys::ucp_ep_h {
        self.data.as_ref().map_or(self.ep, |d| d.0)
    }
}

impl<R: Role> UcxTransport<R> {
    /// The endpoint of open connection `id` failed: the frames it received
    /// before (those complete, in order) are handed over first, and its
    /// `Disconnected(reason)` comes after the last of them. A receive not
    /// complete is cancelled (its message cannot complete any more).
    pub(super) fn end(&mut self, id: ConnId, reason: DisconnectReason) {
        let Some(c) = self.conn(id) else { return };
        match c.state {
            State::Up => {}
            State::Ended(_) => return,
            State::Opening { .. } | State::Addressing { .. } => return self.fail(id, reason),
        }
        let complete =
            c.rx.iter()
                .take_while(|&&slot| {
                    matches!(
                        self.slots.get(slot).and_then(Option::as_ref),
                        Some(Slot { status: Some(s), .. }) if s.is_ok()
                    )
                })
                .count();
        let Some(c) = self.conn_mut(id) else { return };
        c.state = State::Ended(reason);
        c.batch_len = 0;
        let cut: Vec<usize> = c.rx.drain(complete..).collect();
        let kept = !c.rx.is_empty();
        self.batched.retain(|&b| b != id);
        for slot in cut {
            let charge = self
                .slots
                .get(slot)
                .and_then(Option::as_ref)
                .map_or(0, |s| s.op.charge());
            if let Some(c) = self.conn_mut(id) {
                c.rx_bytes = c.rx_bytes.saturating_sub(charge);
            }
            self.rx_held = self.rx_held.saturating_sub(charge);
            self.discard_rx(slot);
        }
        if kept {
            self.mark_ready(id);
        } else {
            self.fail(id, reason);
        }
    }

    /// `id`, still opening, is refused for good (its peer is on the other
    /// API): the driver hears `reason` now, and the endpoint lingers until
    /// our key, which names this end's API, is out. Closed at once, it
    /// would cancel the key or overtake it, and the peer would see only a
    /// reset, which it retries.
    pub(super) fn refuse(&mut self, id: ConnId, reason: DisconnectReason) {
        if let Some(ends) = self.forget(id) {
            self.linger(ends, false);
            self.notices.push_back(Notice::Disconnected(id, reason));
        }
    }

    /// The driver closes `id`: an open connection's endpoints linger until
    /// what was sent on them is out; any other's close at once.
    pub(super) fn retire(&mut self, id: ConnId) {
        let open = self.conn(id).is_some_and(|c| c.state == State::Up);
        if let Some(ends) = self.forget(id) {
            if open {
                self.linger(ends, false);
            } else {
                self.close_ends(ends, false);
            }
        }
    }

    /// Flushes the frame endpoint of `ends`, then closes them (at the
    /// latest after [`LINGER`]).
    pub(super) fn linger(&mut self, ends: Ends, refused: bool) {
        if self.flushing.len() >= MAX_LINGERING {
            return self.close_ends(ends, refused);
        }
        let ep = ends.frame_ep();
        let flush = Op::Flush {
            ends: Some(ends),
            refused,
        };
        let (done, slot) = self.start(flush, |_, param| {
            // SAFETY: ep is live (closed only once this flush completed or
            // was cut short); a flush has no buffer.
            unsafe { sys::ucp_ep_flush_nbx(ep, param) }
        });
        match done {
            Some(status) => self.finish(slot, status, 0),
            None => self.flushing.push((slot, Clock::now() + LINGER)),
        }
    }

    /// Takes the endpoints out of flush `slot`, if they are still there.
    pub(super) fn take_ends(&mut self, slot: usize) -> Option<(Ends, bool)> {
        match self.slots.get_mut(slot).and_then(Option::as_mut) {
            Some(Slot {
                op: Op::Flush { ends, refused },
                ..
            }) => ends.take().map(|e| (e, *refused)),
            _ => None,
        }
    }

    /// Closes the endpoints whose flush outlived [`LINGER`]; their
    /// flushes then complete, cancelled.
    pub(super) fn expire_lingering(&mut self) {
        let now = self.now;
        let mut i = 0;
        while let Some(&(slot, deadline)) = self.flushing.get(i) {
            if deadline > now {
                i += 1;
                continue;
            }
            self.flushing.swap_remove(i);
            if let Some((ends, refused)) = self.take_ends(slot) {
                log(&format!(
                    "closing the connection of {} before its last frames were confirmed: \
                     its flush took longer than {LINGER:?} (the peer does not read, or is gone)",
                    show(ends.peer)
                ));
                self.close_ends(ends, refused);
            }
        }
    }

    /// Closes `ends` now: the data endpoint (no peer-failure mode, which
    /// UCX does not force-close) by flushing, the socket-address endpoint
    /// by force; their pending operations complete through their
    /// callbacks.
    pub(super) fn close_ends(&mut self, ends: Ends, refused: bool) {
        let Ends {
            ep, err_arg, data, ..
        } = ends;
        if let Some((data, err_arg)) = data {
            let close = Op::Close {
                _err_arg: err_arg,
                force: false,
                refused: false,
            };
            let (done, slot) = self.start(close, |_, param| {
                // SAFETY: the data endpoint is live and closed once.
                unsafe { sys::ucp_ep_close_nbx(data, param) }
            });
            if let Some(status) = done {
                self.finish(slot, status, 0);
            }
        }
        let close = Op::Close {
            _err_arg: err_arg,
            force: true,
            refused,
        };
        let (done, slot) = self.start(close, |_, param| {
            // SAFETY: ep is live and closed once; FORCE releases it without
            // waiting for the peer; its pending operations complete with
            // errors through their callbacks.
            unsafe { sys::ucp_ep_close_nbx(ep, param) }
        });
        if let Some(status) = done {
            self.finish(slot, status, 0);
        }
    }
}
