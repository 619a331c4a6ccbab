//! What the client sends: the frame `poll_transmit` offers next and how
//! `write_transmit` writes it (the `Hello`, data, reads asked again,
//! probes, `Bye`).

use super::{Action, ClientEvent, ClientSession, ClientState, Frame, RequestOp, Transmit};
use crate::session::server::MIN_WINDOW;
use crate::time::Instant;
use crate::wire::{Body, IoMsg, HEADER_LEN};

impl<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>> ClientSession<N, S> {
    /// The next frame to send, if any: its length, for the transport's
    /// transmit buffer. Nothing changes until
    /// [`write_transmit`](Self::write_transmit) writes it; a frame not
    /// written (the transport had no buffer) is offered again.
    #[must_use]
    #[inline]
    pub fn poll_transmit(&self, now: Instant) -> Option<Transmit> {
        let frame = match self.state {
            ClientState::Handshaking { .. } if self.hello_pending => Frame::Hello,
            ClientState::Handshaking { .. } if self.may_send_early() => self.data_frame()?,
            ClientState::Established { .. } => {
                let limit = self.acked.saturating_add(self.agreed);
                let stalled = self.sent_hw > self.window.base()
                    && now >= self.last_progress + self.config.reply_timeout;
                if self.probe_pending {
                    Frame::Probe
                } else if let Some(sn) = self.next_reask() {
                    Frame::Reask { sn }
                } else if self.tx_cursor < self.window.next() && self.tx_cursor < limit && !stalled
                {
                    self.data_frame()?
                } else if self.bye_pending {
                    Frame::Bye
                } else {
                    return None;
                }
            }
            _ => return None,
        };
        let payload = match frame {
            Frame::Hello => crate::wire::HELLO_BODY_LEN,
            Frame::Data { sn } | Frame::Reask { sn } => {
                let entry = self.window.get(sn)?;
                match entry.op {
                    RequestOp::Read => crate::wire::READ_BODY_LEN + entry.bytes as usize,
                    _ => entry.bytes as usize,
                }
            }
            Frame::Probe | Frame::Bye => 0,
        };
        Some(Transmit {
            len: HEADER_LEN + payload,
            frame,
        })
    }

    /// Writes the frame [`poll_transmit`](Self::poll_transmit) offered into
    /// `out` (exactly [`Transmit::len`] bytes, the transport's buffer) and
    /// counts it as sent. A write's payload is copied from the session's
    /// storage: the only copy on the sending side.
    ///
    /// # Panics
    ///
    /// In debug builds, if `t` is not what `poll_transmit` offers now or
    /// `out` is shorter than `t.len()`.
    pub fn write_transmit(&mut self, now: Instant, t: Transmit, out: &mut [u8]) -> usize {
        debug_assert_eq!(self.poll_transmit(now), Some(t), "stale Transmit");
        let session = self.config.session;
        let mut msg = IoMsg {
            session,
            epoch: self.epoch,
            sn: 0,
            ack: 0,
            validate: false,
            stream: false,
            body: Body::Bye,
        };
        match t.frame {
            Frame::Hello => {
                let (base_sn, next_sn) = (self.acked, self.sent_hw);
                // A control body is protocol state: always checksummed.
                msg.validate = true;
                msg.body = Body::Hello {
                    base_sn,
                    next_sn,
                    token: self.config.token,
                    window: u32::try_from(self.own_window()).unwrap_or(u32::MAX),
                    replay: self.config.replay,
                };
                self.hello_pending = false;
                self.hello = (base_sn, next_sn);
                self.tx_cursor = next_sn;
                self.conn_start = self.frames_out;
            }
            Frame::Probe => {
                self.frames_out += 1;
                msg.sn = self.tx_cursor;
                msg.body = Body::Probe;
                self.probe_pending = false;
                self.probed_upto = self.tx_cursor;
                self.stats.probes += 1;
            }
            Frame::Bye => {
                self.bye_pending = false;
                self.state = ClientState::Closed;
                self.action = Some(Action::Close);
                self.push_event(ClientEvent::Closed);
            }
            Frame::Data { sn } => return self.write_data(now, sn, out),
            Frame::Reask { sn } => return self.write_reask(sn, out),
        }
        let written = msg.emit_with(out, &self.config.crc);
        debug_assert_eq!(written, Ok(t.len));
        written.unwrap_or(0)
    }

    /// With `eager` on, new frames may follow the `Hello` before the
    /// `Welcome` when nothing is unacknowledged: whatever the server answers,
    /// `resume_from` is then `next_sn`, so they are in order either way.
    ///
    /// At most [`MIN_WINDOW`] of them (and not past the window agreed last
    /// time): every server agrees to at least that many.
    fn may_send_early(&self) -> bool {
        let limit = self.agreed.min(u64::from(MIN_WINDOW));
        self.config.eager
            && !self.hello_pending
            && self.hello.0 == self.hello.1
            && self.tx_cursor < self.window.next()
            && self.tx_cursor < self.hello.1.saturating_add(limit)
    }

    /// The window this client offers: its configuration within `N`.
    pub(super) fn own_window(&self) -> u64 {
        u64::from(self.config.window).min(N as u64).max(1)
    }

    fn data_frame(&self) -> Option<Frame> {
        let sn = self.tx_cursor;
        self.window.get(sn)?;
        Some(Frame::Data { sn })
    }

    fn write_data(&mut self, now: Instant, sn: u64, out: &mut [u8]) -> usize {
        let written = self.emit_request(sn, out);
        if self.sent_hw == self.acked || self.tx_cursor == self.acked {
            // Nothing was outstanding: the reply timer starts now.
            self.last_progress = now;
        }
        self.tx_cursor += 1;
        if sn >= self.sent_hw {
            self.sent_hw = sn + 1;
            self.stats.sent += 1;
        } else {
            self.stats.replayed += 1;
        }
        written
    }

    /// Emits the request `sn` of the window into `out` and numbers it as
    /// the next frame sent.
    pub(super) fn emit_request(&mut self, sn: u64, out: &mut [u8]) -> usize {
        self.frames_out += 1;
        let asked = self.frames_out;
        let Some(entry) = self.window.get_mut(sn) else {
            debug_assert!(false, "data frame of an sn outside the window");
            return 0;
        };
        entry.asked = asked;
        let entry = *entry;
        let bytes = self.payloads.get(entry.pos, entry.bytes as usize);
        let body = match entry.op {
            RequestOp::Read => Body::Read {
                len: entry.len,
                request: bytes,
            },
            RequestOp::Write | RequestOp::StreamWrite => Body::Write { data: bytes },
        };
        let msg = IoMsg {
            session: self.config.session,
            epoch: self.epoch,
            sn,
            ack: 0,
            // A read's body is protocol state for the server: checksummed.
            validate: self.config.validate || entry.op == RequestOp::Read,
            stream: entry.op == RequestOp::StreamWrite,
            body,
        };
        let written = msg.emit_with(out, &self.config.crc);
        debug_assert!(written.is_ok(), "{written:?}");
        written.unwrap_or(0)
    }
}
