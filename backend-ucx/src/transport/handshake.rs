//! A connection's handshake: keys over the endpoint's stream, then (for
//! shared memory) worker addresses and the endpoints made from them.

use super::*;

impl<R: Role> UcxTransport<R> {
    /// Starts sending our key and receiving theirs over the stream.
    pub(super) fn exchange_keys(&mut self, id: ConnId) {
        let Some(c) = self.conn(id) else { return };
        let (ep, key) = (c.ep, c.local_key);
        let send = Box::new(key_bytes(key, self.config.api));
        let recv = Box::new([0u8; 8]);
        let sent = self.start(
            Op::KeySend {
                conn: id,
                buf: send,
            },
            |buf, param| {
                // SAFETY: ep is live; buf (8 bytes, boxed in the slot) stays
                // until the request completes; param is valid.
                unsafe { sys::ucp_stream_send_nbx(ep, buf.cast(), 8, param) }
            },
        );
        let got = self.start(
            Op::KeyRecv {
                conn: id,
                buf: recv,
            },
            |buf, param| {
                let mut length = 0usize;
                // SAFETY: as above; `length` is written only on immediate
                // completion, before the call returns.
                unsafe { sys::ucp_stream_recv_nbx(ep, buf, 8, &mut length, param) }
            },
        );
        for (done, slot) in [sent, got] {
            if let Some(result) = done {
                self.finish(slot, result, 8);
            }
        }
    }

    /// Sends our worker address to the peer of `id` and starts receiving
    /// theirs.
    pub(super) fn exchange_addresses(&mut self, id: ConnId) {
        let Some(ep) = self.conn(id).map(|c| c.ep) else {
            return;
        };
        let mut addr: *mut sys::ucp_address_t = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: the worker is live; addr and len are out-pointers.
        let got =
            Status(unsafe { sys::ucp_worker_get_address(self.worker.worker, &mut addr, &mut len) });
        if got.check().is_err() {
            return self.fail(id, DisconnectReason::ConnectFailed(got.cause()));
        }
        let mut msg = (len as u64).to_le_bytes().to_vec();
        // SAFETY: UCX returned `len` readable bytes at `addr`, copied out
        // before the address is released just below, once.
        unsafe {
            msg.extend_from_slice(core::slice::from_raw_parts(addr.cast::<u8>(), len));
            sys::ucp_worker_release_address(self.worker.worker, addr);
        }
        let total = msg.len();
        let sent = self.start(Op::AddrSend { conn: id, buf: msg }, |buf, param| {
            // SAFETY: ep is live; buf holds `total` bytes and stays in its
            // slot until the request completes.
            unsafe { sys::ucp_stream_send_nbx(ep, buf.cast(), total, param) }
        });
        let got = self.start(
            Op::AddrLenRecv {
                conn: id,
                buf: Box::new([0; 8]),
            },
            |buf, param| {
                let mut length = 0usize;
                // SAFETY: ep is live; buf holds 8 bytes and stays in its
                // slot until the request completes.
                unsafe { sys::ucp_stream_recv_nbx(ep, buf, 8, &mut length, param) }
            },
        );
        if let (Some(status), slot) = sent {
            self.finish(slot, status, total);
        }
        if let (Some(status), slot) = got {
            self.finish(slot, status, 8);
        }
    }

    /// Receives the `len`-byte worker address the peer of `id` announced.
    pub(super) fn recv_address(&mut self, id: ConnId, len: usize) {
        let Some(ep) = self.conn(id).map(|c| c.ep) else {
            return;
        };
        let buf = vec![0u8; len];
        let got = self.start(Op::AddrRecv { conn: id, buf }, |buf, param| {
            let mut length = 0usize;
            // SAFETY: ep is live; buf holds `len` bytes and stays in its
            // slot until the request completes.
            unsafe { sys::ucp_stream_recv_nbx(ep, buf, len, &mut length, param) }
        });
        if let (Some(status), slot) = got {
            self.finish(slot, status, len);
        }
    }

    /// Makes the endpoint that carries the frames of `id`, from the
    /// peer's worker address.
    pub(super) fn connect_data(&mut self, id: ConnId, address: &[u8]) {
        let worker = self.worker.worker;
        let Some(c) = self.conn_mut(id) else { return };
        let err_arg = Box::new(ErrArg {
            shared: c.err_arg.shared,
            key: c.local_key,
        });
        // SAFETY: all-zero is a valid endpoint-params value.
        let mut params: sys::ucp_ep_params_t = unsafe { mem::zeroed() };
        // No peer-failure mode here: UCX then offers only transports that
        // detect a peer's failure, which shared memory does not. The
        // socket-address endpoint keeps that mode (and its keepalive): its
        // error ends the connection, both endpoints closed.
        params.field_mask = u64::from(sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS)
            | u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
        params.address = address.as_ptr().cast();
        params.err_mode = sys::UCP_ERR_HANDLING_MODE_NONE;
        let mut ep: sys::ucp_ep_h = ptr::null_mut();
        // SAFETY: worker is live; the address bytes are the peer's worker
        // address, valid for the call; err_arg is boxed in the connection
        // and outlives the endpoint.
        let made = Status(unsafe { sys::ucp_ep_create(worker, &params, &mut ep) });
        if made.check().is_err() {
            return self.fail(id, DisconnectReason::ConnectFailed(made.cause()));
        }
        c.data = Some((ep, err_arg));
        self.addr_step(id, Status::OK, false);
    }

    /// Our address went (`sent_ours`) or the endpoint to theirs exists.
    pub(super) fn addr_step(&mut self, id: ConnId, status: Status, sent_ours: bool) {
        let client = self.role.listener().is_none();
        let Some(c) = self.conn_mut(id) else { return };
        let State::Addressing { mut sent, mut got } = c.state else {
            return;
        };
        if !status.is_ok() {
            return self.fail(id, DisconnectReason::ConnectFailed(status.cause()));
        }
        if sent_ours {
            sent = true;
        } else {
            got = true;
        }
        c.state = if sent && got {
            State::Up
        } else {
            State::Addressing { sent, got }
        };
        if c.state == State::Up {
            self.notices.push_back(if client {
                Notice::Connected(id)
            } else {
                Notice::Accepted(id)
            });
            self.now_up(id);
        }
    }

    /// `id` is up: frames that came early may go, and its stream is
    /// watched from now on.
    pub(super) fn now_up(&mut self, id: ConnId) {
        self.mark_ready(id);
        let Some(ep) = self.conn(id).map(|c| c.ep) else {
            return;
        };
        let drain = Op::StreamDrain {
            conn: id,
            buf: Box::new([0; 64]),
        };
        let (done, slot) = self.start(drain, |buf, param| {
            let mut length = 0usize;
            // SAFETY: ep is live; buf holds 64 bytes and stays in its slot
            // until the request completes (the endpoint's close completes
            // it, cancelled).
            unsafe { sys::ucp_stream_recv_nbx(ep, buf, 64, &mut length, param) }
        });
        if let Some(status) = done {
            self.finish(slot, status, 1);
        }
    }

    /// One half of the key exchange of `id` completed: ours went
    /// (`sent_ours`), or `theirs` came.
    pub(super) fn key_step(
        &mut self,
        id: ConnId,
        status: Status,
        sent_ours: bool,
        theirs: KeyMessage,
    ) {
        let client = self.role.listener().is_none();
        let shm = self.config.shared_memory;
        let api = self.config.api;
        let Some(c) = self.conn_mut(id) else { return };
        let State::Opening { mut sent, mut got } = c.state else {
            return;
        };
        let peer = c.peer;
        if !status.is_ok() {
            return self.fail(id, DisconnectReason::ConnectFailed(status.cause()));
        }
        if sent_ours {
            sent = true;
        } else {
            match theirs {
                KeyMessage::Key(k, theirs) if theirs == api => {
                    got = true;
                    c.remote_key = k;
                }
                KeyMessage::Key(_, theirs) => {
                    log(&format!(
                        "{} uses the {} API, this end {}: closed",
                        show(peer),
                        theirs.name(),
                        api.name()
                    ));
                    return self.refuse(id, DisconnectReason::Refused(API_MISMATCH));
                }
                KeyMessage::Full(size) => {
                    return self.fail(id, DisconnectReason::TableFull { size });
                }
                KeyMessage::Bad => {
                    log(&format!("bad key exchange from {}: closed", show(peer)));
                    return self.fail(id, DisconnectReason::ConnectFailed(BAD_KEY));
                }
            }
        }
        let Some(c) = self.conn_mut(id) else { return };
        c.state = match (sent && got, shm) {
            (false, _) => State::Opening { sent, got },
            (true, false) => State::Up,
            (true, true) => State::Addressing {
                sent: false,
                got: false,
            },
        };
        match c.state {
            State::Up => {
                self.notices.push_back(if client {
                    Notice::Connected(id)
                } else {
                    Notice::Accepted(id)
                });
                self.now_up(id);
            }
            State::Addressing { .. } => self.exchange_addresses(id),
            State::Opening { .. } | State::Ended(_) => {}
        }
    }
}
