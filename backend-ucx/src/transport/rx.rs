//! The receive side: probing tagged messages, receiving them (bounded)
//! into slots, and handing their frames over in order per connection,
//! connections in turn.

use super::*;

/// What [`UcxTransport::admit`] decided about a message.
struct Admission {
    /// The connection it is kept for.
    keep: Option<ConnId>,
    /// A batch of frames.
    batch: bool,
    /// Nobody's: counted as a stray once disposed of.
    stray: bool,
    /// The connection to close for it, its peer, the cause and what came.
    close: Option<(ConnId, Option<SocketAddr>, Cause, String)>,
}

impl<R: Role> UcxTransport<R> {
    /// Decides what a message of `kind` and `len` bytes to the connection
    /// whose key is `key` becomes, counting `charge` bytes against the
    /// receive bounds when kept: the connection it is kept for, or `None`
    /// (discarded: a heartbeat, a stray, a fault). A fault closes the
    /// connection (after the caller disposed of the message, see
    /// [`Admission::close`]). Anything from a connection shows it alive.
    fn admit(&mut self, key: u64, kind: u64, len: usize, charge: usize) -> Admission {
        let now = self.now;
        // An ended connection takes nothing more: its endpoint failed.
        let conn = self
            .by_key
            .get(&key)
            .and_then(|&c| self.conns[c].as_mut())
            .filter(|c| !matches!(c.state, State::Ended(_)))
            .map(|c| {
                c.heard = now;
                (c.id, c.peer, c.rx_bytes)
            });
        let limit = match kind {
            KIND_FRAME => Some(self.config.max_frame),
            KIND_BATCH => Some(BATCH_CAP),
            KIND_HEARTBEAT => Some(0),
            _ => None,
        };
        let mut fault = None;
        let keep = match (conn, limit) {
            (Some(_), Some(limit)) if len > limit => {
                fault = Some(OVERSIZED);
                None
            }
            (Some((id, _, queued)), Some(_)) if kind != KIND_HEARTBEAT => {
                if queued.saturating_add(charge) > self.config.conn_recv_bytes {
                    fault = Some(FLOODED);
                    None
                } else {
                    Some(id)
                }
            }
            _ => None,
        };
        let keep = match keep {
            Some(id) => self.make_room(id, charge).then_some(id),
            None => None,
        };
        if keep.is_none() && fault.is_none() && conn.is_some() && kind != KIND_HEARTBEAT {
            fault = Some(RECV_MEMORY_FULL);
        }
        Admission {
            keep,
            batch: kind == KIND_BATCH,
            stray: conn.is_none() || limit.is_none(),
            close: fault.zip(conn).map(|(cause, (id, peer, _))| {
                let what = format!("a {len}-byte message of kind {kind}");
                (id, peer, cause, what)
            }),
        }
    }

    /// Closes the connection an [`Admission`] found at fault.
    fn close_faulty(&mut self, close: Option<(ConnId, Option<SocketAddr>, Cause, String)>) {
        if let Some((id, peer, cause, what)) = close {
            log(&format!(
                "closing the connection of {}: {}: {what}",
                show(peer),
                cause.text
            ));
            self.fail(id, DisconnectReason::Other(cause));
        }
    }

    /// Queues a receive's slot on its connection.
    fn queue_rx(&mut self, id: ConnId, slot: usize) {
        let charge = self
            .slots
            .get(slot)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.op.charge());
        if let Some(c) = self.conn_mut(id) {
            c.rx.push_back(slot);
            c.rx_bytes += charge;
            self.rx_held += charge;
        }
    }

    /// Starts receiving every tagged message UCX has matched-ready (with
    /// active messages, each is a stray, received into nothing).
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
            let admitted = if self.config.api == Api::Tag {
                self.admit(key, kind, len, len)
            } else {
                // Frames travel as active messages here: nobody's.
                Admission {
                    keep: None,
                    batch: false,
                    stray: true,
                    close: None,
                }
            };
            let buf = if admitted.keep.is_some() {
                self.buffer(len)
            } else {
                Vec::new()
            };
            let size = buf.len();
            let worker = self.worker.worker;
            let op = Op::Recv {
                buf,
                conn: admitted.keep,
                stray: admitted.stray,
                batch: admitted.batch,
                offset: 0,
                held: None,
            };
            let (done, slot) = self.start(op, |buf, param| {
                // SAFETY: msg came from the probe above and is consumed
                // once; buf has `size` bytes and stays in its slot until
                // the request completes (a larger message is truncated by
                // UCX, never written past `size`).
                unsafe { sys::ucp_tag_msg_recv_nbx(worker, buf, size, msg, param) }
            });
            if let Some(id) = admitted.keep {
                self.queue_rx(id, slot);
            }
            if let Some(status) = done {
                self.finish(slot, status, size);
            }
            self.close_faulty(admitted.close);
        }
    }

    /// Takes the active messages that arrived: each kept where UCX holds
    /// it and queued on its connection, or released at once (a heartbeat,
    /// a stray, a fault). A rendezvous is declined, never fetched, and
    /// closes its sender's connection: fetching reads the sender's memory,
    /// and UCX 1.13.1 aborts the process when the sender dies meanwhile
    /// (this transport sends every message eagerly).
    pub(super) fn arrived(&mut self) {
        let spare = mem::take(&mut self.spare_arrivals);
        let mut arrivals = self.worker.shared.arrivals.replace(spare);
        self.taken += arrivals.len() as u64;
        for a in arrivals.drain(..) {
            let (key, kind) = a.header.map_or((0, u64::MAX), untag);
            let len = a.data.len();
            if let AmData::Rndv { .. } = a.data {
                self.rndv_refused += 1;
                let conn = self
                    .by_key
                    .get(&key)
                    .and_then(|&c| self.conns[c].as_ref())
                    .map(|c| (c.id, c.peer));
                self.release_am(a.data);
                match conn {
                    Some((id, peer)) => {
                        let what = format!("a {len}-byte rendezvous message");
                        self.close_faulty(Some((id, peer, RENDEZVOUS, what)));
                    }
                    None => self.stray_frames += 1,
                }
                continue;
            }
            let charge = match a.data {
                AmData::Held { .. } => len.max(HELD_MIN),
                _ => len,
            };
            let admitted = self.admit(key, kind, len, charge);
            let Some(id) = admitted.keep else {
                if admitted.stray {
                    self.stray_frames += 1;
                }
                self.release_am(a.data);
                self.close_faulty(admitted.close);
                continue;
            };
            let recv = |buf: Vec<u8>, held| Op::Recv {
                buf,
                conn: Some(id),
                stray: false,
                batch: admitted.batch,
                offset: 0,
                held,
            };
            let slot = match a.data {
                AmData::Held { data, len } => self.complete(recv(Vec::new(), Some((data, len)))),
                AmData::Copied(bytes) => self.complete(recv(bytes, None)),
                // Declined above.
                AmData::Rndv { .. } => continue,
            };
            self.queue_rx(id, slot);
            self.finish(slot, Status::OK, len);
        }
        self.spare_arrivals = arrivals;
    }

    /// A receive that is complete already, in a new slot.
    fn complete(&mut self, op: Op) -> usize {
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        self.slots[slot] = Some(Slot {
            op,
            request: ptr::null_mut(),
            status: None,
        });
        slot
    }

    /// Gives an active message that is not kept back to UCX.
    pub(super) fn release_am(&mut self, data: AmData) {
        match data {
            AmData::Held { data, .. } | AmData::Rndv { desc: data, .. } => {
                // SAFETY: `data` is a held message or a rendezvous
                // descriptor UCX handed to the callback, not yet released
                // or received; released once, here.
                unsafe { sys::ucp_am_data_release(self.worker.worker, data) };
            }
            AmData::Copied(bytes) => self.recycle(bytes),
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
                c.state
                    .hands_over()
                    .then(|| c.rx.front().copied())
                    .flatten()
            });
            let complete = head.and_then(|slot| {
                let s = self.slots.get(slot)?.as_ref()?;
                s.status.map(|st| (slot, st))
            });
            let Some((slot, status)) = complete else {
                self.ready.pop_front();
                let state = self.conn_mut(id).map(|c| {
                    c.in_ready = false;
                    c.state
                });
                // An ended connection's last frame was taken: now it is
                // reported.
                if let Some(State::Ended(reason)) = state {
                    self.fail(id, reason);
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
                op: ref op @ Op::Recv { batch, offset, .. },
                ..
            }) = self.slots[slot]
            else {
                self.pop_rx(id, slot);
                continue;
            };
            let buf = op.received();
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
        let size = self
            .slots
            .get(slot)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.op.charge());
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
        let len = self
            .slots
            .get(slot)
            .and_then(Option::as_ref)
            .map_or(0, |s| s.op.received().len());
        let (done, conn) = match self.slots.get_mut(slot).and_then(Option::as_mut) {
            Some(Slot {
                op:
                    Op::Recv {
                        batch,
                        offset,
                        conn,
                        ..
                    },
                ..
            }) => {
                *offset = end;
                (!*batch || end >= len, *conn)
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
            op: Op::Recv {
                buf, stray, held, ..
            },
            ..
        }) = self.slots.get_mut(slot).and_then(Option::take)
        {
            if stray {
                self.stray_frames += 1;
            }
            self.orphans.retain(|&(s, _)| s != slot);
            self.free_slots.push(slot);
            match held {
                Some((data, len)) => self.release_am(AmData::Held { data, len }),
                None => self.recycle(buf),
            }
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
            Some(s) => s.op.received().get(self.frame.clone()).unwrap_or(&[]),
            None => &[],
        };
        read(bytes)
    }
}

impl<R: Role> Drop for UcxRx<'_, R> {
    fn drop(&mut self) {
        self.transport.frame_taken(self.slot, self.frame.end);
    }
}
