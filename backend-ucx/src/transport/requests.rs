//! An operation's life in its slot: started (with its buffer, and an
//! active message's header beside it), finished when UCX completes it,
//! and the send accounting and buffer pool around it.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Starts an operation in a new slot. `call` gets the slot's buffer
    /// and the request parameters. Returns `Some(status)` when it
    /// completed (or failed) at once: the caller finishes the slot.
    pub(super) fn start(
        &mut self,
        op: Op,
        call: impl FnOnce(*mut c_void, *const sys::ucp_request_param_t) -> sys::ucs_status_ptr_t,
    ) -> (Option<Status>, usize) {
        self.start_with(op, [0; 8], |buf, param, _| call(buf, param))
    }

    /// [`start`](Self::start), with an active-message header kept beside
    /// the request until it completes: `call` gets its address too.
    pub(super) fn start_with(
        &mut self,
        op: Op,
        header: [u8; 8],
        call: impl FnOnce(
            *mut c_void,
            *const sys::ucp_request_param_t,
            *const c_void,
        ) -> sys::ucs_status_ptr_t,
    ) -> (Option<Status>, usize) {
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        // The callback's argument of each slot is made once and kept (it
        // never changes): no allocation per operation.
        while self.args.len() <= slot {
            self.args.push(Box::new(ReqArg {
                shared: self.worker.shared_ptr(),
                slot: self.args.len(),
                header: Cell::new([0; 8]),
            }));
        }
        self.args[slot].header.set(header);
        let header: *const c_void = self.args[slot].header.as_ptr().cast_const().cast();
        let arg: *const ReqArg = &*self.args[slot];
        let mut op = op;
        let (buf, flags): (*mut c_void, u32) = match &mut op {
            Op::Send { buf, am_flags, .. } => (buf.as_mut_ptr().cast(), *am_flags),
            Op::Recv { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::KeySend { buf, .. } | Op::Refuse { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::StreamDrain { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::AddrSend { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::KeyRecv { buf, .. } | Op::AddrLenRecv { buf, .. } => {
                (buf.as_mut_ptr().cast(), sys::UCP_STREAM_RECV_FLAG_WAITALL)
            }
            Op::AddrRecv { buf, .. } => {
                (buf.as_mut_ptr().cast(), sys::UCP_STREAM_RECV_FLAG_WAITALL)
            }
            Op::Close { force: true, .. } => (ptr::null_mut(), sys::UCP_EP_CLOSE_FLAG_FORCE),
            Op::Close { .. } | Op::Flush { .. } => (ptr::null_mut(), 0),
        };
        // SAFETY: all-zero is a valid request-param value.
        let mut param: sys::ucp_request_param_t = unsafe { mem::zeroed() };
        param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_CALLBACK
            | sys::UCP_OP_ATTR_FIELD_USER_DATA
            | sys::UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = flags;
        param.user_data = arg.cast_mut().cast();
        match &op {
            Op::Recv { .. } => param.cb.recv = Some(worker::on_tag_recv),
            Op::KeyRecv { .. }
            | Op::AddrLenRecv { .. }
            | Op::AddrRecv { .. }
            | Op::StreamDrain { .. } => param.cb.recv_stream = Some(worker::on_recv_length),
            _ => param.cb.send = Some(worker::on_send),
        }
        let ptr = call(buf, &param, header);
        let (request, now) = match Pending::from_ptr(ptr) {
            Pending::Request(r) => (r, None),
            Pending::Done => (ptr::null_mut(), Some(Status::OK)),
            Pending::Failed(s) => (ptr::null_mut(), Some(s)),
        };
        self.slots[slot] = Some(Slot {
            op,
            request,
            status: None,
        });
        (now, slot)
    }

    /// An operation completed with `status`: acts on it and frees its
    /// slot (a received frame's slot stays until the driver takes it).
    pub(super) fn finish(&mut self, slot: usize, status: Status, length: usize) {
        let Some(s) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        s.status = Some(status);
        if !s.request.is_null() {
            self.worker.free(s.request);
            s.request = ptr::null_mut();
        }
        if let Op::Recv { conn, .. } = s.op {
            // Handed to the driver in order by `poll`, unless discarded.
            match conn {
                Some(id) => self.mark_ready(id),
                None => self.drop_frame(slot),
            }
            return;
        }
        let Some(s) = self.slots[slot].take() else {
            return;
        };
        self.free_slots.push(slot);
        match s.op {
            Op::Send { buf, conn, len, .. } => {
                self.in_flight_sends = self.in_flight_sends.saturating_sub(1);
                self.in_flight_bytes = self.in_flight_bytes.saturating_sub(len);
                if let Some(c) = self.conn_mut(conn) {
                    c.sends = c.sends.saturating_sub(1);
                    c.send_bytes = c.send_bytes.saturating_sub(len);
                }
                self.recycle(buf);
            }
            Op::KeySend { conn, .. } => self.key_step(conn, status, true, KeyMessage::Bad),
            Op::KeyRecv { conn, buf } => {
                let got = key_message(&buf[..length.min(8)]);
                self.key_step(conn, status, false, got);
            }
            Op::AddrSend { conn, .. } => self.addr_step(conn, status, true),
            Op::AddrLenRecv { conn, buf } => {
                let len = u64::from_le_bytes(*buf);
                if !status.is_ok() || length != 8 || len == 0 || len > MAX_WORKER_ADDRESS {
                    let cause = if status.is_ok() {
                        Status(sys::UCS_ERR_INVALID_ADDR).cause()
                    } else {
                        status.cause()
                    };
                    self.fail(conn, DisconnectReason::ConnectFailed(cause));
                } else {
                    self.recv_address(conn, len as usize);
                }
            }
            Op::AddrRecv { conn, buf } => {
                if status.is_ok() && length == buf.len() {
                    self.connect_data(conn, &buf);
                } else {
                    let cause = if status.is_ok() {
                        Status(sys::UCS_ERR_INVALID_ADDR).cause()
                    } else {
                        status.cause()
                    };
                    self.fail(conn, DisconnectReason::ConnectFailed(cause));
                }
            }
            Op::StreamDrain { conn, .. } => {
                if status.is_ok() {
                    let peer = self.conn(conn).and_then(|c| c.peer);
                    log(&format!(
                        "closing the connection of {}: {length} stream bytes after the key \
                         exchange",
                        show(peer)
                    ));
                    self.fail(conn, DisconnectReason::Other(STREAM_DATA));
                }
            }
            Op::Refuse { ep, err_arg, .. } => {
                let ends = Ends {
                    ep,
                    err_arg,
                    data: None,
                    peer: None,
                };
                self.linger(ends, true);
            }
            Op::Flush { ends, refused } => {
                self.flushing.retain(|&(s, _)| s != slot);
                if let Some(ends) = ends {
                    self.close_ends(ends, refused);
                }
            }
            Op::Close { refused: true, .. } => self.refusing = self.refusing.saturating_sub(1),
            Op::Recv { .. } | Op::Close { .. } => {}
        }
    }

    /// Whether a `len`-byte send on `id` must wait: its connection's caps
    /// or the transport's are reached. A connection with nothing in flight
    /// may always send one frame.
    pub(super) fn send_blocked(&self, id: ConnId, len: usize) -> bool {
        let Some(c) = self.conn(id) else { return true };
        let cfg = &self.config;
        c.sends >= cfg.conn_send_frames
            || (c.sends > 0 && c.send_bytes + len > cfg.conn_send_bytes)
            || self.in_flight_sends >= MAX_IN_FLIGHT
            || (self.in_flight_sends > 0 && self.in_flight_bytes + len > cfg.send_bytes)
    }

    /// Counts a send of `len` bytes on `id` as in flight.
    pub(super) fn sending(&mut self, id: ConnId, len: usize) {
        self.in_flight_sends += 1;
        self.in_flight_bytes += len;
        if let Some(c) = self.conn_mut(id) {
            c.sends += 1;
            c.send_bytes += len;
        }
    }

    /// `id` may have a complete received message first in its queue.
    pub(super) fn mark_ready(&mut self, id: ConnId) {
        if let Some(c) = self.conn_mut(id) {
            if !c.in_ready && c.state.hands_over() && !c.rx.is_empty() {
                c.in_ready = true;
                self.ready.push_back(id);
            }
        }
    }

    /// Keeps `buf` for reuse, its length too: its bytes are initialised,
    /// so a later [`buffer`](Self::buffer) of at most that length needs no
    /// zeroing (whatever it is used for overwrites them: an emitted frame,
    /// a received message).
    pub(super) fn recycle(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= POOL_BUF_CAP {
            if self.pool.len() < POOL_LEN {
                self.pool.push(buf);
            }
        } else if self.pool_large.len() < POOL_LARGE_LEN
            && buf.capacity() <= self.config.max_frame.max(BATCH_CAP)
        {
            self.pool_large.push(buf);
        }
    }

    pub(super) fn buffer(&mut self, len: usize) -> Vec<u8> {
        let pool = if len > POOL_BUF_CAP {
            &mut self.pool_large
        } else {
            &mut self.pool
        };
        let mut b = pool.pop().unwrap_or_default();
        if b.len() >= len {
            b.truncate(len);
        } else {
            b.resize(len, 0);
        }
        b
    }
}
