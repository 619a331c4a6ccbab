//! What the transport holds and has counted, for tests, status lines and
//! operators: strays, refusals, evictions, sends in flight, buffers held,
//! orphaned receives, callback events, peers' addresses.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Frames that arrived for no open connection (late frames of closed
    /// ones, guessed keys), received and dropped.
    pub fn stray_frames(&self) -> u64 {
        self.stray_frames
    }

    /// Rendezvous active messages declined, each closing its sender's
    /// connection (this transport sends every message eagerly; see the
    /// module's "Active messages").
    pub fn rendezvous_refused(&self) -> u64 {
        self.rndv_refused
    }

    /// Connection requests refused because the table was full.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Connections closed because the transport's receive memory
    /// ([`UcxConfig::recv_bytes`]) was full and they held the most of it
    /// (with the message that found it full, for its receiver).
    pub fn receive_evictions(&self) -> u64 {
        self.rx_evicted
    }

    /// Sends in flight (frames, batches, heartbeats) and their bytes.
    pub fn in_flight(&self) -> (usize, usize) {
        (self.in_flight_sends, self.in_flight_bytes)
    }

    /// Open connections (any state).
    pub fn connections(&self) -> usize {
        self.by_key.len()
    }

    /// Request slots in use and the bytes of buffers they hold, and the
    /// pool's buffers and bytes: what the transport holds for receives
    /// and sends.
    pub fn held(&self) -> (usize, usize, usize, usize) {
        let (mut n, mut bytes) = (0, 0);
        for s in self.slots.iter().flatten() {
            n += 1;
            bytes += match &s.op {
                Op::Recv {
                    held: Some((_, len)),
                    ..
                } => *len,
                Op::Send { buf, .. } | Op::Recv { buf, .. } => buf.capacity(),
                Op::AddrSend { buf, .. } | Op::AddrRecv { buf, .. } => buf.capacity(),
                _ => 0,
            };
        }
        // Pages given back (orphaned receives) are not held.
        bytes = bytes.saturating_sub(self.orphaned().1);
        let pools = self.pool.iter().chain(&self.pool_large);
        let pooled = pools.clone().map(Vec::capacity).sum();
        (n, bytes, pools.count(), pooled)
    }

    /// Receives of closed connections still in progress (messages cut
    /// mid-way, which UCX 1.13.1 cannot cancel) and the bytes of their
    /// buffers given back to the system (`MADV_DONTNEED`: the buffer stays
    /// mapped for UCX, without memory behind it until written again).
    pub fn orphaned(&self) -> (usize, usize) {
        let live = self
            .orphans
            .iter()
            .filter(|(slot, _)| {
                matches!(
                    self.slots.get(*slot).and_then(Option::as_ref),
                    Some(Slot {
                        op: Op::Recv { conn: None, .. },
                        status: None,
                        ..
                    })
                )
            })
            .fold((0, 0), |(n, b), (_, r)| (n + 1, b + r));
        live
    }

    /// Events the UCX callbacks recorded, and those the transport took:
    /// equal after every progress call (no event is ever lost).
    pub fn callback_events(&self) -> (u64, u64) {
        (self.worker.shared.recorded.get(), self.taken)
    }

    /// The peer's address of `conn`: the connecting client's (server), the
    /// server's (client).
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.conn(conn)?.peer
    }
}
