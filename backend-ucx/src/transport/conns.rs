//! The connection table: adding, finding, failing and releasing
//! connections (their receives cancelled, their endpoints closed), and
//! accepting or refusing connection requests; and the transport's
//! teardown.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// A new connection slot for endpoint `ep`, with a fresh key.
    pub(super) fn add_conn(
        &mut self,
        peer: Option<SocketAddr>,
        ep_for: impl FnOnce(&ErrArg) -> Result<sys::ucp_ep_h, Status>,
    ) -> Result<ConnId, Status> {
        let mut key = 0;
        for _ in 0..16 {
            match random_key() {
                Some(k) if !self.by_key.contains_key(&k) => {
                    key = k;
                    break;
                }
                Some(_) => {}
                None => return Err(Status(sys::UCS_ERR_IO_ERROR)),
            }
        }
        if key == 0 {
            return Err(Status(sys::UCS_ERR_ALREADY_EXISTS));
        }
        let err_arg = Box::new(ErrArg {
            shared: self.worker.shared_ptr(),
            key,
        });
        let ep = ep_for(&err_arg)?;
        let slot = match self.conns.iter().position(Option::is_none) {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.generations.push(0);
                self.conns.len() - 1
            }
        };
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        let id = ConnId::new(slot as u32, self.generations[slot]);
        self.conns[slot] = Some(Conn {
            id,
            ep,
            local_key: key,
            remote_key: 0,
            peer,
            rx: VecDeque::new(),
            rx_bytes: 0,
            in_ready: false,
            sends: 0,
            send_bytes: 0,
            state: State::Opening {
                sent: false,
                got: false,
            },
            err_arg,
            data: None,
            heard: Clock::now(),
            said: Clock::now(),
            batch: Vec::new(),
            batch_len: 0,
        });
        self.by_key.insert(key, slot);
        self.exchange_keys(id);
        Ok(id)
    }

    pub(super) fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.conns
            .get(id.slot() as usize)?
            .as_ref()
            .filter(|c| c.id == id)
    }

    pub(super) fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.conns
            .get_mut(id.slot() as usize)?
            .as_mut()
            .filter(|c| c.id == id)
    }

    /// The connection failed: close its endpoint and tell the driver. An
    /// ended connection (see [`end`](Self::end)) is told as it ended,
    /// whatever failed since.
    pub(super) fn fail(&mut self, id: ConnId, reason: DisconnectReason) {
        let Some(c) = self.conn(id) else { return };
        let reason = match c.state {
            State::Ended(first) => first,
            _ => reason,
        };
        self.release(id);
        self.notices.push_back(Notice::Disconnected(id, reason));
    }

    /// Closes the endpoints of `id` at once and forgets the connection.
    pub(super) fn release(&mut self, id: ConnId) {
        if let Some(ends) = self.forget(id) {
            self.close_ends(ends, false);
        }
    }

    /// Takes `id` out of the table (its key, its received messages) and
    /// returns its endpoints, still open.
    pub(super) fn forget(&mut self, id: ConnId) -> Option<Ends> {
        let c = self
            .conns
            .get_mut(id.slot() as usize)?
            .take_if(|c| c.id == id)?;
        self.by_key.remove(&c.local_key);
        self.rx_held = self.rx_held.saturating_sub(c.rx_bytes);
        self.batched.retain(|&b| b != id);
        for slot in c.rx {
            self.discard_rx(slot);
        }
        Some(Ends {
            ep: c.ep,
            err_arg: c.err_arg,
            data: c.data,
            peer: c.peer,
        })
    }

    /// Discards a receive taken off its connection's queue: released if
    /// complete; else cancelled, and released when it completes.
    pub(super) fn discard_rx(&mut self, slot: usize) {
        let pending = match self.slots.get_mut(slot).and_then(Option::as_mut) {
            Some(Slot {
                op: Op::Recv { conn, buf, .. },
                request,
                status,
            }) => {
                *conn = None;
                status.is_none().then(|| (*request, release_pages(buf)))
            }
            _ => None,
        };
        match pending {
            Some((req, released)) => {
                if !req.is_null() {
                    // SAFETY: req is a live receive request of this worker;
                    // cancelling completes it through its callback (UCX
                    // 1.13.1 cannot cancel a message already partly
                    // received: that one stays until it completes, its
                    // pages given back).
                    unsafe { sys::ucp_request_cancel(self.worker.worker, req) };
                }
                self.orphans.push((slot, released));
            }
            None => self.drop_frame(slot),
        }
    }

    /// Server: endpoints for the connection requests the listener got;
    /// past the table's size, each is refused with a reason.
    pub(super) fn accept_requests(&mut self) {
        let reqs = self.worker.shared.conn_requests.take();
        self.taken += reqs.len() as u64;
        let listener = self.role.listener().unwrap_or(ptr::null_mut());
        for req in reqs {
            let peer = query_conn_request(req);
            let worker = self.worker.worker;
            let accept = |err_arg: &ErrArg| {
                let mut params = peer_mode(err_arg);
                params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_CONN_REQUEST);
                params.conn_request = req;
                let mut ep: sys::ucp_ep_h = ptr::null_mut();
                // SAFETY: worker is live; req came from its listener and is
                // consumed here once (on failure UCX has released it: UCX
                // 1.13.1's ucp_ep_create_server_accept rejects and frees
                // the request on its error paths, so it is never touched
                // again); err_arg outlives the endpoint.
                Status(unsafe { sys::ucp_ep_create(worker, &params, &mut ep) }).check()?;
                Ok(ep)
            };
            if self.by_key.len() < self.config.max_connections {
                if let Err(status) = self.add_conn(peer, accept) {
                    log(&format!("accepting {}: {status}", show(peer)));
                }
                continue;
            }
            self.refused += 1;
            if self.refusing >= MAX_REFUSING {
                // SAFETY: the request came from this listener and was not
                // consumed (no endpoint was made from it); rejecting
                // releases it, once.
                unsafe { sys::ucp_listener_reject(listener, req) };
                continue;
            }
            let err_arg = Box::new(ErrArg {
                shared: self.worker.shared_ptr(),
                key: 0,
            });
            let Ok(ep) = accept(&err_arg) else { continue };
            self.refusing += 1;
            let msg = Box::new((FULL_MARK | self.config.max_connections as u64).to_le_bytes());
            let (done, slot) = self.start(
                Op::Refuse {
                    ep,
                    err_arg,
                    buf: msg,
                },
                |buf, param| {
                    // SAFETY: ep is live; buf (8 bytes, boxed in the slot)
                    // stays until the request completes.
                    unsafe { sys::ucp_stream_send_nbx(ep, buf.cast(), 8, param) }
                },
            );
            if let Some(status) = done {
                self.finish(slot, status, 8);
            }
        }
    }
}

/// The client's address of a connection request.
pub(crate) fn query_conn_request(req: sys::ucp_conn_request_h) -> Option<SocketAddr> {
    // SAFETY: all-zero is a valid attribute struct to fill.
    let mut attr: sys::ucp_conn_request_attr_t = unsafe { mem::zeroed() };
    attr.field_mask = u64::from(sys::UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR);
    // SAFETY: req is a live connection request, not yet consumed; attr is
    // a local out-struct.
    let status = Status(unsafe { sys::ucp_conn_request_query(req, &mut attr) });
    status.check().ok()?;
    SockAddr::from_storage(&attr.client_address)
}

/// Gives the whole pages inside `buf` back to the system
/// (`MADV_DONTNEED`): they stay mapped (anything UCX writes there later
/// lands in fresh zero pages) but hold no memory. Returns their bytes.
pub(super) fn release_pages(buf: &mut [u8]) -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = buf.as_mut_ptr() as usize;
    let first = start.div_ceil(page) * page;
    let end = (start + buf.len()) / page * page;
    if page == 0 || end <= first {
        return 0;
    }
    // SAFETY: [first, end) lies inside `buf`, which this transport owns
    // and keeps allocated (it is only ever written by UCX from now on, and
    // never read): zeroing its pages breaks nothing.
    let r = unsafe { libc::madvise(first as *mut c_void, end - first, libc::MADV_DONTNEED) };
    if r == 0 {
        end - first
    } else {
        0
    }
}

impl<R: Role> Drop for UcxTransport<R> {
    fn drop(&mut self) {
        let ids: Vec<ConnId> = self.conns.iter().flatten().map(|c| c.id).collect();
        for id in ids {
            self.release(id);
        }
        // Endpoints still flushing close now: their flushes complete,
        // cancelled.
        for (slot, _) in mem::take(&mut self.flushing) {
            if let Some((ends, refused)) = self.take_ends(slot) {
                self.close_ends(ends, refused);
            }
        }
        // Every request completes (pending ones are cancelled) before the
        // buffers they use are freed and the worker goes.
        let pending: Vec<(usize, *mut c_void)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i, s.request)))
            .filter(|(_, r)| !r.is_null())
            .collect();
        for (i, req) in pending {
            if self.orphans.iter().any(|&(s, _)| s == i) {
                // A receive UCX cannot cancel (see `orphaned`): waiting
                // for it is in vain; its buffer outlives the worker.
                if let Some(s) = self.slots[i].take() {
                    mem::forget(s);
                }
                continue;
            }
            if self.worker.wait(Pending::Request(req), 10_000) {
                if let Some(s) = self.slots[i].as_mut() {
                    s.request = ptr::null_mut();
                }
            } else if let Some(s) = self.slots[i].take() {
                // UCX would not let it go: the request is released to it
                // (`Worker::wait`), and its buffer must outlive the worker,
                // so it is never freed (leaked on purpose).
                mem::forget(s);
            }
        }
        if let Some(listener) = self.role.listener() {
            // SAFETY: the listener is live, this worker's, and destroyed
            // once, before the worker; its requests are the only ones.
            unsafe { self.worker.destroy_listener(listener) };
        }
        // Active messages that arrived while closing go back to UCX
        // before its worker goes.
        for a in self.worker.shared.arrivals.take() {
            self.release_am(a.data);
        }
        self.slots.clear();
    }
}
