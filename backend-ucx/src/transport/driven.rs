//! The core's `Transport`, `Connector` and `Listener` over the UCX
//! transport: what the drivers call.

use super::*;

impl<R: Role> Transport for UcxTransport<R> {
    type TxToken<'a>
        = UcxTx<'a, R>
    where
        Self: 'a;
    type RxToken<'a>
        = UcxRx<'a, R>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_frame: self.config.max_frame,
            // One endpoint, tag matching: in order or not at all.
            in_order: true,
        }
    }

    fn transmit(
        &mut self,
        _now: Instant,
        conn: ConnId,
        len: usize,
    ) -> Result<UcxTx<'_, R>, SendError> {
        if len > self.config.max_frame {
            return Err(SendError::TooLarge {
                len,
                max: self.config.max_frame,
            });
        }
        match self.conn(conn) {
            Some(c) if c.state == State::Up => {}
            _ => return Err(SendError::NotConnected),
        }
        if self.send_blocked(conn, len) {
            self.drive();
            // Failed meanwhile (ended: its last frames still to be taken).
            if self.conn(conn).is_none_or(|c| c.state != State::Up) {
                return Err(SendError::NotConnected);
            }
            if self.send_blocked(conn, len) {
                return Err(SendError::WouldBlock);
            }
        }
        if self.config.coalesce && len <= COALESCE_MAX_FRAME {
            return Ok(UcxTx {
                transport: self,
                conn,
                buf: Vec::new(),
                batched: Some(len),
            });
        }
        // A large frame goes alone, after what is batched before it.
        self.flush_batch(conn);
        let buf = self.buffer(len);
        Ok(UcxTx {
            transport: self,
            conn,
            buf,
            batched: None,
        })
    }

    fn poll(&mut self, _now: Instant) -> Option<Event<UcxRx<'_, R>>> {
        // The driver polls after it emitted: what it batched goes now.
        self.flush_batches();
        if let Some(n) = self.notices.pop_front() {
            return Some(lift(n));
        }
        // A frame already received (the rest of a batch) is handed over
        // without a progress call: one `ucp_worker_progress` (an
        // `epoll_wait` on the tcp sockets among others) per frame was the
        // bound of small frames over shared memory.
        let ready = match self.next_frame() {
            Some(ready) => ready,
            None => {
                self.drive();
                self.keep_alive();
                if let Some(n) = self.notices.pop_front() {
                    return Some(lift(n));
                }
                self.next_frame()?
            }
        };
        let (conn, slot, frame) = ready;
        Some(Event::Received {
            conn,
            frame: UcxRx {
                transport: self,
                slot,
                frame,
            },
        })
    }

    fn close(&mut self, _now: Instant, conn: ConnId) {
        // What the driver emitted before closing (a `Reject`, a `Bye`)
        // goes first, and reaches the peer before the close does (the
        // endpoint lingers: see the `close` module).
        self.flush_batch(conn);
        self.batched.retain(|&c| c != conn);
        self.notices.retain(|n| match *n {
            Notice::Connected(c) | Notice::Accepted(c) | Notice::Disconnected(c, _) => c != conn,
        });
        self.retire(conn);
    }

    fn arm(&mut self) -> Readiness {
        self.flush_batches();
        if self.worker.mode != WaitMode::Blocking {
            return Readiness::Unsupported;
        }
        // Sends in flight need progress calls to complete (UCX's tcp
        // transport does not wake the event fd for them).
        if !self.notices.is_empty() || !self.ready.is_empty() || self.in_flight_sends > 0 {
            return Readiness::Pending;
        }
        // Active messages a callback recorded since the last drive.
        let arrivals = self.worker.shared.arrivals.take();
        let arrived = !arrivals.is_empty();
        self.worker.shared.arrivals.set(arrivals);
        if arrived {
            return Readiness::Pending;
        }
        match self.worker.arm() {
            Ok(true) => Readiness::Armed,
            _ => Readiness::Pending,
        }
    }
}

fn lift<Rx>(n: Notice) -> Event<Rx> {
    match n {
        Notice::Connected(conn) => Event::Connected { conn },
        Notice::Accepted(conn) => Event::Accepted { conn },
        Notice::Disconnected(conn, reason) => Event::Disconnected { conn, reason },
    }
}

impl Connector for UcxTransport<Dial> {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let worker = self.worker.worker;
        let addr = self.role.server.as_ucs();
        let peer = self.role.addr;
        self.add_conn(Some(peer), |err_arg| {
            let params = dial_mode(err_arg, addr);
            let mut ep: sys::ucp_ep_h = ptr::null_mut();
            // SAFETY: worker is live; the socket address lives in
            // self.role for the transport's lifetime; err_arg is boxed in
            // the connection and outlives the endpoint.
            Status(unsafe { sys::ucp_ep_create(worker, &params, &mut ep) }).check()?;
            Ok(ep)
        })
        .map_err(|status| DisconnectReason::ConnectFailed(status.cause()))
    }
}

impl Listener for UcxTransport<Accept> {}
