//! The receive side: probing tagged messages, receiving them (bounded)
//! into slots, and handing their frames over in order per connection,
//! connections in turn.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Starts receiving every tagged message UCX has matched-ready.
    pub(super) fn probe(&mut self) {
        // Bounded: each round takes one message out of UCX.
        for _ in 0..4096 {
            // SAFETY: all-zero is a valid info value to fill.
            let mut info: sys::ucp_tag_recv_info_t = unsafe { mem::zeroed() };
            // SAFETY: the worker is live; tag and mask 0 match any tag;
            // remove=1 takes the message for ucp_tag_msg_recv_nbx below.
            let msg = unsafe { sys::ucp_tag_probe_nb(self.worker.worker, 0, 0, 1, &mut info) };
            if msg.is_null() {
                return;
            }
            let (key, kind) = untag(info.sender_tag);
            let len = info.length;
            let now = self.now;
            let conn = self
                .by_key
                .get(&key)
                .and_then(|&c| self.conns[c].as_mut())
                .map(|c| {
                    // Anything from the peer shows it alive.
                    c.heard = now;
                    (c.id, c.peer, c.rx_bytes)
                });
            let limit = match kind {
                KIND_FRAME => Some(self.config.max_frame),
                KIND_BATCH => Some(BATCH_CAP),
                KIND_HEARTBEAT => Some(0),
                _ => None,
            };
            // What to receive it as: the connection's (a frame or batch),
            // or nothing (discarded: a heartbeat, a stray, a fault).
            let mut fault = None;
            let keep = match (conn, limit) {
                (Some(_), Some(limit)) if len > limit => {
                    fault = Some(OVERSIZED);
                    None
                }
                (Some((id, _, queued)), Some(_)) if kind != KIND_HEARTBEAT => {
                    if queued.saturating_add(len) > self.config.conn_recv_bytes {
                        fault = Some(FLOODED);
                        None
                    } else {
                        Some(id)
                    }
                }
                _ => None,
            };
            let keep = match keep {
                Some(id) => self.make_room(id, len).then_some(id),
                None => None,
            };
            if keep.is_none() && fault.is_none() && conn.is_some() && kind != KIND_HEARTBEAT {
                fault = Some(RECV_MEMORY_FULL);
            }
            let stray = conn.is_none() || limit.is_none();
            let buf = if keep.is_some() {
                self.buffer(len)
            } else {
                Vec::new()
            };
            let size = buf.len();
            let worker = self.worker.worker;
            let op = Op::Recv {
                buf,
                conn: keep,
                stray,
                batch: kind == KIND_BATCH,
                offset: 0,
            };
            let (done, slot) = self.start(op, |buf, param| {
                // SAFETY: msg came from the probe above and is consumed
                // once; buf has `size` bytes and stays in its slot until
                // the request completes (a larger message is truncated by
                // UCX, never written past `size`).
                unsafe { sys::ucp_tag_msg_recv_nbx(worker, buf, size, msg, param) }
            });
            if let Some(id) = keep {
                if let Some(c) = self.conn_mut(id) {
                    c.rx.push_back(slot);
                    c.rx_bytes += size;
                    self.rx_held += size;
                }
            }
            if let Some(status) = done {
                self.finish(slot, status, size);
            }
            if let (Some(cause), Some((id, peer, _))) = (fault, conn) {
                log(&format!(
                    "closing the connection of {}: {}: a {len}-byte message of kind {kind}",
                    show(peer),
                    cause.text
                ));
                self.fail(id, DisconnectReason::Other(cause));
            }
        }
    }

    /// Whether `len` more received bytes for `id` fit the transport's
    /// receive memory (`UcxConfig::recv_bytes`). While they do not, the
    /// connection holding the most gives way: closed, its buffers
    /// released. When that is `id` itself (counting the new message), the
    /// answer is no and the caller closes it. Another connection's
    /// incomplete message therefore never makes a peer wait; it costs its
    /// own connection.
    pub(super) fn make_room(&mut self, id: ConnId, len: usize) -> bool {
        // Bounded: each round closes a connection.
        for _ in 0..=self.conns.len() {
            if self.rx_held.saturating_add(len) <= self.config.recv_bytes {
                return true;
            }
            let mut most = (id, self.conn(id).map_or(0, |c| c.rx_bytes) + len);
            for c in self.conns.iter().flatten() {
                if c.rx_bytes > most.1 {
                    most = (c.id, c.rx_bytes);
                }
            }
            self.rx_evicted += 1;
            if most.0 == id {
                return false;
            }
            let peer = self.conn(most.0).and_then(|c| c.peer);
            log(&format!(
                "closing the connection of {}: {}: it held {} received bytes",
                show(peer),
                RECV_MEMORY_FULL.text,
                most.1
            ));
            self.fail(most.0, DisconnectReason::Other(RECV_MEMORY_FULL));
        }
        false
    }

    /// The next received frame: of the first connection in turn whose
    /// first message is complete (and which is up), in order per
    /// connection: its connection, slot and place in the slot's buffer.
    /// A receive still in progress (a message whose sender stopped or died
    /// halfway) holds back the frames of its own connection only. The slot
    /// stays first in its connection's queue until its last frame is taken
    /// ([`UcxRx`]'s drop).
    pub(super) fn next_frame(&mut self) -> Option<(ConnId, usize, Range<usize>)> {
        // Bounded: each round hands over a frame or drops a connection
        // from the turn or a message from a queue.
        let mut rounds = self.ready.len() * 2 + 1024;
        while let Some(&id) = self.ready.front() {
            rounds = rounds.checked_sub(1)?;
            let head = self.conn(id).and_then(|c| {
                (c.state == State::Up)
                    .then(|| c.rx.front().copied())
                    .flatten()
            });
            let complete = head.and_then(|slot| {
                let s = self.slots.get(slot)?.as_ref()?;
                s.status.map(|st| (slot, st))
            });
            let Some((slot, status)) = complete else {
                self.ready.pop_front();
                if let Some(c) = self.conn_mut(id) {
                    c.in_ready = false;
                }
                continue;
            };
            if !status.is_ok() {
                let peer = self.conn(id).and_then(|c| c.peer);
                log(&format!(
                    "closing the connection of {}: a receive failed: {status}",
                    show(peer)
                ));
                self.fail(id, DisconnectReason::PeerFailed(status.cause()));
                continue;
            }
            let Some(Slot {
                op:
                    Op::Recv {
                        batch,
                        offset,
                        ref buf,
                        ..
                    },
                ..
            }) = self.slots[slot]
            else {
                self.pop_rx(id, slot);
                continue;
            };
            let len = buf.len();
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
            match frame {
                Some(frame) => return Some((id, slot, frame)),
                None => self.pop_rx(id, slot),
            }
        }
        None
    }

    /// Takes `slot` (first) out of the queue of `id` and releases it.
    fn pop_rx(&mut self, id: ConnId, slot: usize) {
        let size = match self.slots.get(slot).and_then(Option::as_ref) {
            Some(Slot {
                op: Op::Recv { buf, .. },
                ..
            }) => buf.len(),
            _ => 0,
        };
        if let Some(c) = self.conn_mut(id) {
            if let Some(at) = c.rx.iter().position(|&s| s == slot) {
                c.rx.remove(at);
                c.rx_bytes = c.rx_bytes.saturating_sub(size);
                self.rx_held = self.rx_held.saturating_sub(size);
            }
        }
        self.drop_frame(slot);
    }

    /// The frame ending at `end` of `slot` was taken: the slot is
    /// released once nothing of it is left, and the connection's turn
    /// passes.
    pub(super) fn frame_taken(&mut self, slot: usize, end: usize) {
        let (done, conn) = match self.slots.get_mut(slot).and_then(Option::as_mut) {
            Some(Slot {
                op:
                    Op::Recv {
                        batch,
                        offset,
                        buf,
                        conn,
                        ..
                    },
                ..
            }) => {
                *offset = end;
                (!*batch || end >= buf.len(), *conn)
            }
            _ => (true, None),
        };
        let Some(id) = conn else {
            if done {
                self.drop_frame(slot);
            }
            return;
        };
        if done {
            self.pop_rx(id, slot);
        }
        // Connections in turn: the next frame comes from the next one.
        if self.ready.front() == Some(&id) && self.ready.len() > 1 {
            self.ready.pop_front();
            self.ready.push_back(id);
        }
    }

    /// Releases a receive's slot and keeps its buffer.
    pub(super) fn drop_frame(&mut self, slot: usize) {
        let done = matches!(
            self.slots.get(slot).and_then(Option::as_ref),
            Some(Slot {
                op: Op::Recv { .. },
                status: Some(_),
                ..
            })
        );
        if !done {
            // Still in progress (cancelled): released when it completes.
            return;
        }
        if let Some(Slot {
            op: Op::Recv { buf, stray, .. },
            ..
        }) = self.slots.get_mut(slot).and_then(Option::take)
        {
            if stray {
                self.stray_frames += 1;
            }
            self.orphans.retain(|&(s, _)| s != slot);
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
