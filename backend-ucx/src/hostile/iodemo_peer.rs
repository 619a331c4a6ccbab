//! A raw io_demo client side, for tests of an io_demo server: one UCP
//! endpoint to the server, and io_demo's own moves made one at a time and
//! wrongly on purpose where a test wants it (an id exchange left half
//! done, io messages on any tag, active messages with any header, a
//! connection dropped in the middle of an operation).
//!
//! It speaks as io_demo's client does (UCX's `test/apps/iodemo`): with
//! the tag API its context has tag matching and streams, and each side
//! sends its 4-byte connection id over the endpoint's stream; with active
//! messages (`-A`) the context has active messages only and sends with
//! the reply flag, so the server answers on the endpoint UCX hands it.
//!
//! Every wait is bounded by the caller's limit; dropping the peer closes
//! its endpoint by force and destroys its worker, as a client that dies
//! would.

use core::ffi::c_void;
use core::mem;
use core::ptr;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iomsg_ucx_sys as sys;

use crate::sockaddr::SockAddr;
use crate::status::{Pending, Status};
use crate::worker::{AmData, ErrArg, WaitMode, Worker};

/// A request in flight and the buffers UCX may use until it completes.
struct Req {
    h: *mut c_void,
    _bufs: (Vec<u8>, Vec<u8>),
}

/// One raw connection to an io_demo server; see the [module](self).
pub struct IoDemoPeer {
    /// Dropped after the endpoint is closed (see Drop).
    worker: Worker,
    /// Null once closed.
    ep: sys::ucp_ep_h,
    /// The endpoint's error handler argument: lives as long as the worker.
    _err: Box<ErrArg>,
    sends: Vec<Req>,
    /// The endpoint's failure, once UCX reported it.
    failure: Option<Status>,
    /// Active messages the server sent.
    am_replies: usize,
}

impl IoDemoPeer {
    /// Opens an endpoint to an io_demo server at `server`: with the tag
    /// API (`am` false: tag matching and streams) or with active messages
    /// (`am` true, io_demo's `-A`). Nothing is sent yet.
    ///
    /// # Errors
    ///
    /// The UCX context, worker or endpoint could not be made, with UCX's
    /// status.
    pub fn connect(server: SocketAddr, am: bool) -> Result<IoDemoPeer, String> {
        let settings = crate::UcxConfig::default().settings;
        // UCX's own keepalive, as io_demo's client has: a raw peer is
        // progressed only while a test waits on it, and the transport's
        // 200 ms would time its endpoint out between two of its moves.
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .filter(|(n, _)| !n.starts_with("KEEPALIVE"))
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let worker = Worker::new(WaitMode::BusyPoll, &settings, 64, am)
            .map_err(|s| format!("creating a UCX context and worker: {s}"))?;
        let err = Box::new(ErrArg {
            shared: worker.shared_ptr(),
            key: 0,
        });
        let addr = SockAddr::from(server);
        let p = crate::transport::dial_mode(&err, addr.as_ucs());
        let mut ep: sys::ucp_ep_h = ptr::null_mut();
        // SAFETY: the worker is live; the address outlives the call; `err`
        // is boxed in the peer and outlives the endpoint (the peer closes
        // the endpoint before its worker and `err` go).
        Status(unsafe { sys::ucp_ep_create(worker.worker, &p, &mut ep) })
            .check()
            .map_err(|s| format!("connecting to {server}: {s}"))?;
        Ok(IoDemoPeer {
            worker,
            ep,
            _err: err,
            sends: Vec::new(),
            failure: None,
            am_replies: 0,
        })
    }

    /// The endpoint's address: what an io_demo `-A` client puts in its
    /// io messages' connection id field.
    pub fn endpoint_id(&self) -> u64 {
        self.ep as u64
    }

    /// Receives the server's 4-byte connection id from the stream (the
    /// first half of io_demo's id exchange).
    ///
    /// # Errors
    ///
    /// The endpoint is closed or failed, the receive failed, or nothing
    /// came within `limit`.
    pub fn recv_id(&mut self, limit: Duration) -> Result<u32, String> {
        let ep = self.live()?;
        let mut buf = vec![0u8; 4];
        let mut length = 0usize;
        // SAFETY: all-zero is a valid request-param value.
        let mut p: sys::ucp_request_param_t = unsafe { mem::zeroed() };
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = sys::UCP_STREAM_RECV_FLAG_WAITALL;
        // SAFETY: the endpoint is live; `buf` stays in place until the
        // request completed or was leaked below; `length` is written only
        // on immediate completion, before the call returns.
        let ptr =
            unsafe { sys::ucp_stream_recv_nbx(ep, buf.as_mut_ptr().cast(), 4, &mut length, &p) };
        match Pending::from_ptr(ptr) {
            Pending::Done => {}
            Pending::Failed(s) => return Err(format!("receiving the server's id: {s}")),
            Pending::Request(h) => {
                let status = self.wait_request(h, limit);
                if status == Status::IN_PROGRESS {
                    self.keep(h, buf, Vec::new());
                    return Err(format!("no connection id from the server within {limit:?}"));
                }
                // SAFETY: a completed stream receive of this worker, not
                // yet freed; `length` is a local out-pointer.
                let _ = unsafe { sys::ucp_stream_recv_request_test(h, &mut length) };
                self.worker.free(h);
                status
                    .check()
                    .map_err(|s| format!("receiving the server's id: {s}"))?;
            }
        }
        Ok(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]))
    }

    /// Sends our 4-byte connection id on the stream (the second half of
    /// io_demo's id exchange).
    ///
    /// # Errors
    ///
    /// The endpoint is closed or failed, or the send failed at once.
    pub fn send_id(&mut self, id: u32) -> Result<(), String> {
        let ep = self.live()?;
        let buf = id.to_le_bytes().to_vec();
        let p = no_params();
        // SAFETY: the endpoint is live; `buf` moves into the request kept
        // until it completes (its heap bytes do not move).
        let ptr = unsafe { sys::ucp_stream_send_nbx(ep, buf.as_ptr().cast(), 4, &p) };
        self.sent(ptr, buf, Vec::new(), "sending our id")
    }

    /// Sends `bytes` on the endpoint's stream (where io_demo sends only
    /// its 4-byte id).
    ///
    /// # Errors
    ///
    /// The endpoint is closed or failed, or the send failed at once.
    pub fn send_stream(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        let ep = self.live()?;
        let p = no_params();
        // SAFETY: the endpoint is live; `bytes` moves into the request
        // kept until it completes (its heap bytes do not move).
        let ptr = unsafe { sys::ucp_stream_send_nbx(ep, bytes.as_ptr().cast(), bytes.len(), &p) };
        self.sent(ptr, bytes, Vec::new(), "a stream send")
    }

    /// Sends an active message on id `id` with `flags`
    /// (`UCP_AM_SEND_FLAG_*`), `header` and `payload`.
    ///
    /// # Errors
    ///
    /// The endpoint is closed or failed, or the send failed at once.
    pub fn send_am_raw(
        &mut self,
        id: u32,
        flags: u32,
        header: Vec<u8>,
        payload: Vec<u8>,
    ) -> Result<(), String> {
        let ep = self.live()?;
        let mut p = no_params();
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = flags;
        let (h, hn) = (header.as_ptr().cast::<c_void>(), header.len());
        let (d, dn) = (payload.as_ptr().cast::<c_void>(), payload.len());
        // SAFETY: the endpoint is live; header and payload move into the
        // request kept until it completes.
        let ptr = unsafe { sys::ucp_am_send_nbx(ep, id, h, hn, d, dn, &p) };
        self.sent(ptr, payload, header, "an active message")
    }

    /// Sends `bytes` as one tagged message on `tag`.
    ///
    /// # Errors
    ///
    /// The endpoint is closed or failed, or the send failed at once.
    pub fn send_tag(&mut self, tag: u64, bytes: Vec<u8>) -> Result<(), String> {
        let ep = self.live()?;
        let p = no_params();
        // SAFETY: the endpoint is live; `bytes` moves into the request
        // kept until it completes (its heap bytes do not move).
        let ptr = unsafe { sys::ucp_tag_send_nbx(ep, bytes.as_ptr().cast(), bytes.len(), tag, &p) };
        self.sent(ptr, bytes, Vec::new(), "a tag send")
    }

    /// Sends an active message of io_demo's id with `header` and
    /// `payload`, asking for replies on this endpoint as io_demo does.
    ///
    /// # Errors
    ///
    /// The endpoint is closed or failed, or the send failed at once.
    pub fn send_am(&mut self, header: Vec<u8>, payload: Vec<u8>) -> Result<(), String> {
        let ep = self.live()?;
        let mut p = no_params();
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = sys::UCP_AM_SEND_FLAG_REPLY;
        let (h, hn) = (header.as_ptr().cast::<c_void>(), header.len());
        let (d, dn) = (payload.as_ptr().cast::<c_void>(), payload.len());
        // SAFETY: the endpoint is live; header and payload move into the
        // request kept until it completes (UCX 1.13.1 may read the header
        // until then).
        let ptr = unsafe { sys::ucp_am_send_nbx(ep, crate::worker::AM_ID, h, hn, d, dn, &p) };
        self.sent(ptr, payload, header, "an active message")
    }

    /// Receives one tagged message matching `tag` under `mask`, of up to
    /// `max` bytes: its sender tag and bytes.
    ///
    /// # Errors
    ///
    /// Nothing matched within `limit`, or the receive failed.
    pub fn recv_tag(
        &mut self,
        tag: u64,
        mask: u64,
        max: usize,
        limit: Duration,
    ) -> Result<(u64, Vec<u8>), String> {
        let end = Instant::now() + limit;
        loop {
            // SAFETY: all-zero is a valid info value to fill.
            let mut info: sys::ucp_tag_recv_info_t = unsafe { mem::zeroed() };
            // SAFETY: the worker is live; remove=1 takes the message for
            // ucp_tag_msg_recv_nbx below.
            let msg = unsafe { sys::ucp_tag_probe_nb(self.worker.worker, tag, mask, 1, &mut info) };
            if !msg.is_null() {
                return self.take_message(msg, &info, max, end);
            }
            if Instant::now() >= end {
                return Err(format!("no message on tag {tag:#x} within {limit:?}"));
            }
            self.progress();
        }
    }

    fn take_message(
        &mut self,
        msg: sys::ucp_tag_message_h,
        info: &sys::ucp_tag_recv_info_t,
        max: usize,
        end: Instant,
    ) -> Result<(u64, Vec<u8>), String> {
        // The whole message is received (UCX holds it otherwise), then
        // judged against `max`.
        let mut buf = vec![0u8; info.length];
        let p = no_params();
        // SAFETY: msg came from the probe and is consumed once; `buf` has
        // `info.length` bytes and stays in place until the request
        // completed or was leaked below.
        let ptr = unsafe {
            sys::ucp_tag_msg_recv_nbx(
                self.worker.worker,
                buf.as_mut_ptr().cast(),
                info.length,
                msg,
                &p,
            )
        };
        match Pending::from_ptr(ptr) {
            Pending::Done => {}
            Pending::Failed(s) => return Err(format!("receiving a tagged message: {s}")),
            Pending::Request(h) => {
                let status = self.wait_request(h, end.saturating_duration_since(Instant::now()));
                if status == Status::IN_PROGRESS {
                    self.keep(h, buf, Vec::new());
                    return Err("a tagged message did not finish arriving in time".into());
                }
                self.worker.free(h);
                status
                    .check()
                    .map_err(|s| format!("receiving a tagged message: {s}"))?;
            }
        }
        if buf.len() > max {
            return Err(format!("a message of {} bytes, more than {max}", buf.len()));
        }
        Ok((info.sender_tag, buf))
    }

    /// Progresses the worker for `d`.
    pub fn progress_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if !self.progress() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Progresses until every send completed or `limit` passed; returns
    /// whether they all completed.
    pub fn flush(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while !self.sends.is_empty() && Instant::now() < end {
            self.progress();
        }
        self.sends.is_empty()
    }

    /// The endpoint's failure, once UCX reported one (the server closed
    /// the connection, or is gone).
    pub fn failure(&mut self) -> Option<Status> {
        self.progress();
        self.failure
    }

    /// Active messages the server sent us (their data is given back to
    /// UCX at once).
    pub fn am_replies(&mut self) -> usize {
        self.progress();
        self.am_replies
    }

    /// Dies: closes the endpoint by force (the server sees its peer
    /// gone, not a goodbye) and destroys the worker.
    pub fn close_abruptly(self) {
        drop(self);
    }

    fn live(&self) -> Result<sys::ucp_ep_h, String> {
        if self.ep.is_null() {
            return Err("the endpoint is closed".into());
        }
        match self.failure {
            Some(s) => Err(format!("the endpoint failed: {s}")),
            None => Ok(self.ep),
        }
    }

    /// Keeps a send's request (or takes its immediate result).
    fn sent(
        &mut self,
        ptr: sys::ucs_status_ptr_t,
        a: Vec<u8>,
        b: Vec<u8>,
        what: &str,
    ) -> Result<(), String> {
        match Pending::from_ptr(ptr) {
            Pending::Done => Ok(()),
            Pending::Failed(s) => Err(format!("{what}: {s}")),
            Pending::Request(h) => {
                self.keep(h, a, b);
                Ok(())
            }
        }
    }

    fn keep(&mut self, h: *mut c_void, a: Vec<u8>, b: Vec<u8>) {
        self.sends.push(Req { h, _bufs: (a, b) });
    }

    /// Progresses until `h` completes or `limit` passes: its status
    /// (`IN_PROGRESS` if it did not complete; the caller keeps it).
    fn wait_request(&mut self, h: *mut c_void, limit: Duration) -> Status {
        let end = Instant::now() + limit;
        loop {
            // SAFETY: h is a live request of this worker, not yet freed.
            let status = Status(unsafe { sys::ucp_request_check_status(h) });
            if status != Status::IN_PROGRESS || Instant::now() >= end {
                return status;
            }
            self.progress();
        }
    }

    /// One progress round: frees completed sends, notes a failure and
    /// gives back the active messages that arrived.
    fn progress(&mut self) -> bool {
        let any = self.worker.progress();
        self.sends.retain(|r| {
            // SAFETY: r.h is a live request of this worker, not yet freed.
            let status = Status(unsafe { sys::ucp_request_check_status(r.h) });
            if status == Status::IN_PROGRESS {
                return true;
            }
            // SAFETY: completed, freed once (the request leaves the list).
            unsafe { sys::ucp_request_free(r.h) };
            false
        });
        if let Some((_, s)) = self.worker.shared.failed.take().into_iter().next() {
            self.failure.get_or_insert(s);
        }
        for a in self.worker.shared.arrivals.take() {
            self.am_replies += 1;
            match a.data {
                AmData::Held { data: p, .. } | AmData::Rndv { desc: p, .. } => {
                    // SAFETY: a message UCX let the handler keep (or a
                    // rendezvous not fetched), released once.
                    unsafe { sys::ucp_am_data_release(self.worker.worker, p) };
                }
                AmData::Copied(_) => {}
            }
        }
        any
    }
}

fn no_params() -> sys::ucp_request_param_t {
    // SAFETY: all-zero is a valid request-param value (no fields).
    unsafe { mem::zeroed() }
}

impl Drop for IoDemoPeer {
    fn drop(&mut self) {
        if !self.ep.is_null() {
            // SAFETY: all-zero is a valid request-param value.
            let mut p: sys::ucp_request_param_t = unsafe { mem::zeroed() };
            p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
            p.flags = sys::UCP_EP_CLOSE_FLAG_FORCE;
            // SAFETY: the endpoint is live and closed once (set to null
            // just below).
            let ptr = unsafe { sys::ucp_ep_close_nbx(self.ep, &p) };
            self.ep = ptr::null_mut();
            // A close UCX did not finish is released to it all the same
            // (`Worker::wait`); a close has no buffer to keep.
            let _ = self.worker.wait(Pending::from_ptr(ptr), 10_000);
        }
        for r in mem::take(&mut self.sends) {
            // SAFETY: a live request of this worker; cancelled, it
            // completes on a later progress.
            unsafe { sys::ucp_request_cancel(self.worker.worker, r.h) };
            if !self.worker.wait(Pending::Request(r.h), 1_000) {
                // Still in UCX's hands: its buffers stay, leaked.
                mem::forget(r);
            }
        }
    }
}
