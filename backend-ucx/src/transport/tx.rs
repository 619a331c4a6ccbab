//! The transmit side: lent buffers and batches of small frames.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Sends `buf` to the peer of `id` as one message of `kind`, on the
    /// configured API: tagged with the peer's key and the kind, or an
    /// active message whose 8-byte header is that value. The buffer stays
    /// in its slot until the send completes.
    pub(super) fn send_message(&mut self, id: ConnId, buf: Vec<u8>, kind: u64) {
        let now = self.now;
        let am = self.config.api == Api::Am;
        // An ended connection's endpoint failed: nothing goes on it.
        let Some(c) = self
            .conn_mut(id)
            .filter(|c| !matches!(c.state, State::Ended(_)))
        else {
            self.recycle(buf);
            return;
        };
        c.said = now;
        let (ep, tag) = (c.frame_ep(), tag(c.remote_key, kind));
        let len = buf.len();
        self.sending(id, len);
        // Eager always, whatever the environment's thresholds: a
        // rendezvous makes the receiver read the sender's memory (`cma`
        // over shared memory, a tcp PUT over tcp), and UCX 1.13.1 aborts
        // the process when that peer dies mid-transfer (`cma_ep.c:81`;
        // `tcp_ep.c:939`). Receivers refuse rendezvous (`arrived`).
        let op = Op::Send {
            buf,
            conn: id,
            len,
            am_flags: if am { sys::UCP_AM_SEND_FLAG_EAGER } else { 0 },
        };
        let (done, slot) = self.start_with(op, tag.to_le_bytes(), |buf, param, header| {
            if am {
                // SAFETY: ep is live (the connection is open); buf holds
                // `len` bytes and the 8-byte header lives beside the
                // request; both stay until the send's callback (or the
                // immediate completion, handled right below).
                unsafe { sys::ucp_am_send_nbx(ep, AM_ID, header, 8, buf, len, param) }
            } else {
                // SAFETY: as above (the tag travels by value).
                unsafe { sys::ucp_tag_send_nbx(ep, buf, len, tag, param) }
            }
        });
        if let Some(status) = done {
            self.finish(slot, status, 0);
            if !status.is_ok() {
                self.fail(id, DisconnectReason::PeerFailed(status.cause()));
            }
        }
    }

    /// Sends the frames batched for `id`, as one message.
    pub(super) fn flush_batch(&mut self, id: ConnId) {
        if self.conn(id).is_none_or(|c| c.batch_len == 0) {
            return;
        }
        // A pooled buffer as it is: its bytes get overwritten.
        let fresh = self.pool.pop().unwrap_or_default();
        let Some(c) = self.conn_mut(id) else { return };
        let mut buf = mem::replace(&mut c.batch, fresh);
        buf.truncate(mem::take(&mut c.batch_len));
        self.send_message(id, buf, KIND_BATCH);
    }

    /// How large a batch of `c` grows at most before it is sent: one UCX
    /// segment for active messages over shared memory (its frames travel
    /// on the endpoint made from the peer's worker address), else 32 KiB.
    pub(super) fn batch_cap(&self, c: &Conn) -> usize {
        match (self.config.api, c.data.is_some()) {
            (Api::Am, true) => AM_BATCH_CAP,
            _ => BATCH_CAP,
        }
    }

    /// Sends every connection's batch.
    pub(super) fn flush_batches(&mut self) {
        while let Some(id) = self.batched.pop() {
            self.flush_batch(id);
        }
    }
}

/// A lent transmit buffer.
pub struct UcxTx<'a, R: Role> {
    pub(super) transport: &'a mut UcxTransport<R>,
    pub(super) conn: ConnId,
    pub(super) buf: Vec<u8>,
    /// Emit into the connection's batch (`buf` is unused), this long.
    pub(super) batched: Option<usize>,
}

impl<R: Role> TxToken for UcxTx<'_, R> {
    fn consume<T>(mut self, emit: impl FnOnce(&mut [u8]) -> T) -> T {
        if let Some(len) = self.batched {
            let t = self.transport;
            let now = t.now;
            let full = t
                .conn(self.conn)
                .is_some_and(|c| c.batch_len + 4 + len > t.batch_cap(c));
            if full {
                t.flush_batch(self.conn);
            }
            let Some(c) = t.conn_mut(self.conn) else {
                let mut scratch = vec![0u8; len];
                return emit(&mut scratch);
            };
            let first = c.batch_len == 0;
            let start = c.batch_len + 4;
            let end = start + len;
            // Zeroed only where the buffer never was this long.
            if c.batch.len() < end {
                c.batch.resize(end, 0);
            }
            c.batch[start - 4..start].copy_from_slice(&(len as u32).to_le_bytes());
            c.batch_len = end;
            c.said = now;
            let r = emit(&mut c.batch[start..end]);
            if first {
                t.batched.push(self.conn);
            }
            return r;
        }
        let r = emit(&mut self.buf);
        let buf = mem::take(&mut self.buf);
        self.transport.send_message(self.conn, buf, KIND_FRAME);
        r
    }
}
