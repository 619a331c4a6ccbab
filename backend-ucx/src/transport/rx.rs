//! The receive side: probing tagged messages, receiving them into slots,
//! and handing their frames over in order per connection.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Starts receiving every tagged message UCX has matched-ready.
    pub(super) fn probe(&mut self) {
        loop {
            // SAFETY: all-zero is a valid info value to fill.
            let mut info: sys::ucp_tag_recv_info_t = unsafe { mem::zeroed() };
            // SAFETY: the worker is live; tag and mask 0 match any tag;
            // remove=1 takes the message for ucp_tag_msg_recv_nbx below.
            let msg = unsafe { sys::ucp_tag_probe_nb(self.worker.worker, 0, 0, 1, &mut info) };
            if msg.is_null() {
                return;
            }
            let key = (info.sender_tag >> 32) as u32;
            let kind = info.sender_tag & KIND_MASK;
            // Anything from the peer shows it alive, a frame or not.
            let now = self.now;
            if let Some(c) = self.by_key.get(&key).and_then(|&c| self.conns[c].as_mut()) {
                c.heard = now;
            }
            let buf = self.buffer(info.length);
            let worker = self.worker.worker;
            let len = info.length;
            // A kind this version does not know is received and dropped
            // as a stray (key 0 names no connection).
            let (key, heartbeat, batch) = match kind {
                KIND_FRAME => (key, false, false),
                KIND_HEARTBEAT => (key, true, false),
                KIND_BATCH => (key, false, true),
                _ => (0, false, false),
            };
            let op = Op::Recv {
                buf,
                key,
                heartbeat,
                batch,
                offset: 0,
            };
            let (done, slot) = self.start(op, |buf, param| {
                // SAFETY: msg came from the probe above and is consumed
                // once; buf has `len` bytes and stays in its slot until the
                // request completes.
                unsafe { sys::ucp_tag_msg_recv_nbx(worker, buf, len, msg, param) }
            });
            self.rx.push_back(slot);
            if let Some(status) = done {
                self.finish(slot, status, len);
            }
        }
    }

    /// The next received frame whose receive completed, in order per
    /// connection: its connection, slot and place in the slot's buffer.
    /// A receive still in progress (a message whose sender stopped or died
    /// halfway) holds back the frames of its own connection only. The slot
    /// stays in the queue until its last frame is taken ([`UcxRx`]'s
    /// drop). Frames of no open connection are dropped.
    pub(super) fn next_frame(&mut self) -> Option<(ConnId, usize, Range<usize>)> {
        // Keys with a frame waiting ahead in the queue: their later frames
        // wait behind it. A full list stops the search (order is kept).
        let mut held = [0u32; HELD_KEYS];
        let mut n_held = 0;
        let mut i = 0;
        while let Some(&slot) = self.rx.get(i) {
            let Some(s) = self.slots[slot].as_ref() else {
                self.rx.remove(i);
                continue;
            };
            let Op::Recv {
                key,
                heartbeat,
                batch,
                offset,
                ref buf,
            } = s.op
            else {
                self.rx.remove(i);
                continue;
            };
            let known = self.by_key.get(&key).and_then(|&c| self.conns[c].as_ref());
            // The peer's first frames can overtake the end of this side's
            // handshake (the address exchange, its key's completion): they
            // wait for it, and the frames behind them too, rather than be
            // dropped. A handshake that never ends fails (liveness
            // timeout) and they go as strays.
            let waits = s.status.is_none() || known.is_some_and(|c| c.state != State::Up);
            let behind = held[..n_held].contains(&key);
            if waits && !behind {
                if n_held == HELD_KEYS {
                    return None;
                }
                held[n_held] = key;
                n_held += 1;
            }
            if waits || behind {
                i += 1;
                continue;
            }
            let ok = s.status.is_some_and(|st| st.is_ok());
            let len = buf.len();
            let conn = known.map(|c| c.id);
            let frame = if !batch {
                Some(0..len)
            } else if offset >= len {
                None
            } else if offset + 4 > len {
                Some(offset..len)
            } else {
                let mut n = [0u8; 4];
                n.copy_from_slice(&buf[offset..offset + 4]);
                let start = offset + 4;
                Some(
                    start
                        ..start
                            .saturating_add(u32::from_le_bytes(n) as usize)
                            .min(len),
                )
            };
            match (heartbeat, ok, conn, frame) {
                (false, true, Some(conn), Some(frame)) => return Some((conn, slot, frame)),
                (false, true, Some(_), None) => {}
                (true, ..) => {}
                _ => self.stray_frames += 1,
            }
            self.rx.remove(i);
            self.drop_frame(slot);
        }
        None
    }

    /// The frame ending at `end` of `slot` was taken: the slot is
    /// released once nothing of it is left.
    pub(super) fn frame_taken(&mut self, slot: usize, end: usize) {
        let done = match self.slots.get_mut(slot).and_then(Option::as_mut) {
            Some(Slot {
                op:
                    Op::Recv {
                        batch: true,
                        offset,
                        buf,
                        ..
                    },
                ..
            }) => {
                *offset = end;
                end >= buf.len()
            }
            _ => true,
        };
        if done {
            if let Some(at) = self.rx.iter().position(|&s| s == slot) {
                self.rx.remove(at);
            }
            self.drop_frame(slot);
        }
    }

    pub(super) fn drop_frame(&mut self, slot: usize) {
        if let Some(Slot {
            op: Op::Recv { buf, .. },
            ..
        }) = self.slots.get_mut(slot).and_then(Option::take)
        {
            self.free_slots.push(slot);
            self.recycle(buf);
        }
    }
}

/// A received frame, lent where it was received (one of a batch's, or a
/// whole message).
pub struct UcxRx<'a, R: Role> {
    pub(super) transport: &'a mut UcxTransport<R>,
    pub(super) slot: usize,
    pub(super) frame: Range<usize>,
}

impl<R: Role> RxToken for UcxRx<'_, R> {
    fn consume<T>(self, read: impl FnOnce(&[u8]) -> T) -> T {
        let bytes: &[u8] = match self.transport.slots.get(self.slot).and_then(Option::as_ref) {
            Some(Slot {
                op: Op::Recv { buf, .. },
                ..
            }) => buf.get(self.frame.clone()).unwrap_or(&[]),
            _ => &[],
        };
        read(bytes)
    }
}

impl<R: Role> Drop for UcxRx<'_, R> {
    fn drop(&mut self) {
        self.transport.frame_taken(self.slot, self.frame.end);
    }
}
