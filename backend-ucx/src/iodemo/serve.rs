//! Serving: connections accepted and closed, io messages received (tag)
//! or arrived (AM), reads and writes answered as io_demo's server does.

use core::ffi::c_void;
use core::ptr;
use std::net::SocketAddr;
use std::time::Duration;

use iomsg_core::iodemo::{self as wire, IoDemoMsg, Op};
use iomsg_ucx_sys as sys;

use super::io::{AmIn, AmPayload, Call, Inbox, What};
use super::track::{Placed, Track};
use super::{Conn, IoDemoEvent, IoDemoServer, Pending, BACKLOG};
use crate::sockaddr::SockAddr;
use crate::status::Status;
use crate::worker::{ErrArg, WaitMode, Worker};
use crate::UcxError;

/// A context with tag matching, streams and active messages (io_demo's
/// tag clients use the first two, its `-A` clients the third) and wakeup.
pub(super) fn new_worker() -> Result<Worker, UcxError> {
    let settings = crate::UcxConfig::default().settings;
    let settings: Vec<(&str, &str)> = settings
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let features = u64::from(sys::UCP_FEATURE_TAG)
        | u64::from(sys::UCP_FEATURE_STREAM)
        | u64::from(sys::UCP_FEATURE_AM)
        | u64::from(sys::UCP_FEATURE_WAKEUP);
    Worker::with_features(WaitMode::Blocking, &settings, 4096, features).map_err(|s| UcxError {
        what: "creating the io_demo server's UCX context and worker",
        status: s,
    })
}

/// Registers io_demo's active-message handler (id 0) on `inbox`, and
/// ours on every other id (see [`Worker::guard_am_ids`]).
pub(super) fn set_am_handler(worker: &Worker, inbox: &Inbox) -> Result<(), UcxError> {
    let registering = |status| UcxError {
        what: "registering io_demo's active-message handler",
        status,
    };
    worker.guard_am_ids().map_err(registering)?;
    // SAFETY: the worker is live; the handler's arg is the owner's boxed
    // inbox, which outlives the worker (dropped after it).
    unsafe {
        worker.set_am_handler(
            wire::AM_ID,
            sys::UCP_AM_FLAG_WHOLE_MSG,
            super::io::on_am,
            (inbox as *const Inbox).cast_mut().cast(),
        )
    }
    .map_err(registering)
}

/// The listener, and the active-message handler on `inbox`.
pub(super) fn listen(
    worker: &Worker,
    inbox: &Inbox,
    addr: SocketAddr,
) -> Result<sys::ucp_listener_h, UcxError> {
    set_am_handler(worker, inbox)?;
    let sockaddr = SockAddr::from(addr);
    // SAFETY: all-zero is a valid "no fields" listener params value.
    let mut params: sys::ucp_listener_params_t = unsafe { core::mem::zeroed() };
    params.field_mask = u64::from(sys::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR)
        | u64::from(sys::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER);
    params.sockaddr = sockaddr.as_ucs();
    params.conn_handler.cb = Some(crate::worker::on_conn_request);
    params.conn_handler.arg = worker.shared_ptr() as *mut c_void;
    let mut listener: sys::ucp_listener_h = ptr::null_mut();
    // SAFETY: the worker is live; the address outlives the call; the
    // handler's arg is the worker's shared state, which outlives the
    // listener (destroyed first).
    Status(unsafe { sys::ucp_listener_create(worker.worker, &params, &mut listener) })
        .check()
        .map_err(|s| UcxError {
            what: "listening for io_demo clients",
            status: s,
        })?;
    Ok(listener)
}

/// Sleeps on the worker's event fd until UCX has something or `max`
/// passes; returns at once when events are pending (the arm fails).
pub(super) fn sleep_on(worker: &Worker, max: Duration) {
    if let (Ok(true), Ok(fd)) = (worker.arm(), worker.event_fd()) {
        wait_fd(fd, max);
    }
}

/// Sleeps until `fd` is readable or `max` passes.
fn wait_fd(fd: i32, max: Duration) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(max.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd, for the call's duration.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// Gives UCX back the rendezvous descriptors of arrivals never served.
pub(super) fn release_arrivals(worker: &Worker, inbox: &Inbox) {
    for a in inbox.am.take() {
        if let AmPayload::Rndv { desc, .. } = a.data {
            // SAFETY: a descriptor UCX handed to the AM callback, kept
            // (UCS_INPROGRESS) and not yet fetched or released.
            unsafe { sys::ucp_am_data_release(worker.worker, desc as *mut c_void) };
        }
    }
}

impl IoDemoServer {
    /// Keeps one receive of io messages posted, any connection's, so
    /// that they are taken in the order they came. When that receive made
    /// no progress for [`STUCK_AFTER`](super::STUCK_AFTER) while io
    /// messages wait in UCX, it is held by a message that stopped halfway
    /// (its sender stalled or died mid-message): receives are added, up to
    /// [`MAX_IOMSG_RECVS`](super::MAX_IOMSG_RECVS), until none waits, so
    /// that such a message holds only its own receive and not every later
    /// io message, everyone's.
    pub(super) fn post_iomsg_recvs(&mut self) -> bool {
        let now = std::time::Instant::now();
        let worker = self.worker.worker;
        let waiting =
            || super::io::oldest_unexpected(worker, wire::IOMSG_TAG, wire::IOMSG_TAG).is_some();
        let stuck =
            self.iomsg_recvs > 0 && now - self.iomsg_progress > super::STUCK_AFTER && waiting();
        if self.stopping || (self.iomsg_recvs > 0 && !stuck) {
            return false;
        }
        self.iomsg_progress = now;
        // One receive unless stuck: each io message is taken after the
        // one before it was served, so a write's data receive is posted
        // before the next request is taken and answers leave in request
        // order (with several posted, writes waiting for their data were
        // answered after later reads).
        let most = if stuck { super::MAX_IOMSG_RECVS } else { 1 };
        for _ in 0..most {
            if self.iomsg_recvs >= most || (stuck && !waiting()) {
                break;
            }
            let call = Call::TagRecv {
                worker: self.worker.worker,
                tag: wire::IOMSG_TAG,
                mask: wire::IOMSG_TAG,
            };
            self.iomsg_recvs += 1;
            self.start(What::IoMsg, vec![0; self.opts.max_msg], Vec::new(), call);
        }
        true
    }

    pub(super) fn accept(&mut self) -> bool {
        let reqs = self.worker.shared.conn_requests.take();
        let any = !reqs.is_empty();
        for req in reqs {
            let peer = crate::transport::query_conn_request(req);
            if self.conns.len() >= self.opts.max_connections || self.stopping {
                // SAFETY: the request came from this listener and was not
                // consumed; rejecting releases it, once.
                unsafe { sys::ucp_listener_reject(self.listener, req) };
                self.events.push_back(IoDemoEvent::Refused {
                    conn: None,
                    reason: format!(
                        "a connection from {} past the limit of {} connections",
                        show(peer),
                        self.opts.max_connections
                    ),
                });
                continue;
            }
            if let Err(status) = self.open(req, peer) {
                self.events.push_back(IoDemoEvent::Refused {
                    conn: None,
                    reason: format!("accepting {}: {status}", show(peer)),
                });
            }
        }
        any
    }

    fn open(
        &mut self,
        req: sys::ucp_conn_request_h,
        peer: Option<SocketAddr>,
    ) -> Result<(), Status> {
        let key = loop {
            let k = crate::random_u64().map_err(|_| Status(sys::UCS_ERR_IO_ERROR))?;
            if k != 0 && !self.conns.contains_key(&k) {
                break k;
            }
        };
        let err = Box::new(ErrArg {
            shared: self.worker.shared_ptr(),
            key,
        });
        let mut params = crate::transport::peer_mode(&err);
        params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_CONN_REQUEST);
        params.conn_request = req;
        let mut ep: sys::ucp_ep_h = ptr::null_mut();
        // SAFETY: the worker is live; req came from its listener and is
        // consumed here once (UCX releases it on failure); err outlives
        // the endpoint (kept until its close completes).
        Status(unsafe { sys::ucp_ep_create(self.worker.worker, &params, &mut ep) }).check()?;
        let id = self.fresh_id();
        self.conns.insert(
            key,
            Conn {
                ep,
                err: Some(err),
                peer,
                id,
                their_id: None,
                tag: None,
                ops: Default::default(),
                track: None,
                theirs: 0,
                requests: 0,
                held: 0,
                backlog: Vec::new(),
                opened: std::time::Instant::now(),
            },
        );
        self.by_id.insert(id, key);
        self.by_ep.insert(ep as usize, key);
        // io_demo's tag clients send their id and wait for ours over the
        // stream (ours goes when theirs came: an AM client, which never
        // uses the stream, would log a warning for an unexpected stream
        // message); the receive is cancelled when the connection closes.
        let what = What::IdRecv { conn: key };
        self.start(what, vec![0; 4], Vec::new(), Call::StreamRecv { ep });
        Ok(())
    }

    /// A connection id no open connection has, drawn at random: the tag
    /// API carries no sender, so an id is all that ties an io message to
    /// its connection, and a guessable one would let a peer speak for
    /// another.
    fn fresh_id(&mut self) -> u32 {
        loop {
            let id =
                (crate::random_u64().unwrap_or(u64::from(self.next_id)) as u32) & super::MAX_ID;
            self.next_id = self.next_id.wrapping_add(1);
            if id != 0 && !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    pub(super) fn failures(&mut self) -> bool {
        let failed = self.worker.shared.failed.take();
        let any = !failed.is_empty();
        for (key, status) in failed {
            if self.conns.contains_key(&key) {
                self.close(key, format!("the endpoint failed: {status}"));
            }
        }
        any
    }

    /// Ends connection `key`: reports it with its unanswered requests,
    /// cancels its requests and closes its endpoint.
    pub(super) fn close(&mut self, key: u64, reason: String) {
        let Some(mut c) = self.conns.remove(&key) else {
            return;
        };
        self.by_id.remove(&c.id);
        self.by_ep.remove(&(c.ep as usize));
        if self.closed.len() >= super::CLOSED {
            self.closed.pop_front();
        }
        self.closed.push_back((c.id, c.ep as usize, key));
        if c.tag.is_none() {
            self.events.push_back(opened_event(key, &c));
        }
        let mut in_flight: Vec<(Op, u32)> = c.ops.iter().map(|(&sn, p)| (p.op, sn)).collect();
        if let Some(t) = &c.track {
            in_flight.sort_by_key(|&(_, sn)| t.order(sn));
            for r in t.holes() {
                self.events.push_back(gap(key, r));
            }
        }
        self.events.push_back(IoDemoEvent::Closed {
            conn: key,
            reason,
            in_flight,
        });
        self.slots.cancel_conn(self.worker.worker, key);
        let err = c
            .err
            .take()
            .expect("a connection's error argument lives until it closes");
        self.start(
            What::Close { _err: err },
            Vec::new(),
            Vec::new(),
            Call::Close { ep: c.ep },
        );
    }

    pub(super) fn cancel_all(&mut self) {
        self.slots.cancel_all(self.worker.worker);
    }

    /// Starts a request (its buffer counted as held until it finishes)
    /// and finishes it at once if UCX did.
    pub(super) fn start(&mut self, what: What, buf: Vec<u8>, header: Vec<u8>, call: Call) {
        self.charge(what.conn(), buf.len() as u64, true);
        let (slot, now) = self.slots.start(what, buf, header, call);
        if let Some((status, len, tag)) = now {
            self.finish(slot, status, len, tag);
        }
    }

    /// Counts `bytes` held (`on`) or given back, in all and against
    /// connection `conn`'s share.
    pub(super) fn charge(&mut self, conn: Option<u64>, bytes: u64, on: bool) {
        let c = conn.and_then(|k| self.conns.get_mut(&k));
        if on {
            self.held += bytes;
            if let Some(c) = c {
                c.held += bytes;
            }
        } else {
            self.held = self.held.saturating_sub(bytes);
            if let Some(c) = c {
                c.held = c.held.saturating_sub(bytes);
            }
        }
    }

    pub(super) fn completions(&mut self) -> bool {
        let done = self.inbox.done.take();
        let any = !done.is_empty();
        for (slot, status, len, tag) in done {
            self.finish(slot, status, len, tag);
        }
        any
    }

    /// A request finished: frees its slot and does what comes next.
    pub(super) fn finish(&mut self, slot: usize, status: Status, len: usize, tag: u64) {
        let Some(s) = self.slots.take(slot) else {
            return;
        };
        self.charge(s.what.conn(), s.buf.len() as u64, false);
        match s.what {
            What::IoMsg => {
                self.iomsg_recvs = self.iomsg_recvs.saturating_sub(1);
                self.iomsg_progress = std::time::Instant::now();
                self.iomsg_done(status, s.buf, len, tag);
                self.post_iomsg_recvs();
            }
            What::IdRecv { conn } if status.is_ok() => self.id_arrived(conn, &s.buf),
            What::Extra { conn } if status.is_ok() => {
                let reason = format!(
                    "{len} bytes on the stream after the connection id (io_demo sends none)"
                );
                self.refuse(Some(conn), reason);
            }
            What::Data { conn, sn, .. } => {
                self.data_arrived(conn, sn, status, &s.buf[..len.min(s.buf.len())])
            }
            What::Send { conn } if !status.is_ok() && status.0 != sys::UCS_ERR_CANCELED => {
                self.close(conn, format!("a send failed: {status}"));
            }
            _ => {}
        }
    }

    fn iomsg_done(&mut self, status: Status, mut buf: Vec<u8>, len: usize, tag: u64) {
        if status.0 == sys::UCS_ERR_CANCELED {
            return;
        }
        let id = wire::tag_conn(tag);
        let key = self.by_id.get(&id).copied();
        if !status.is_ok() {
            let reason = if status.0 == sys::UCS_ERR_MESSAGE_TRUNCATED {
                format!(
                    "an io message longer than the server's limit of {} bytes",
                    self.opts.max_msg
                )
            } else {
                format!("receiving an io message: {status}")
            };
            return self.refuse(key, reason);
        }
        buf.truncate(len);
        let Some(key) = key else {
            let sn = IoDemoMsg::decode(&buf).ok().map(|m| m.sn);
            let conn = self.closed.iter().rev().find(|c| c.0 == id).map(|c| c.2);
            self.events.push_back(IoDemoEvent::Late { id, conn, sn });
            return;
        };
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        if c.their_id.is_none() {
            if c.backlog.len() >= BACKLOG {
                let n = c.backlog.len();
                return self.refuse(
                    Some(key),
                    format!("{n} io messages before the client's connection id"),
                );
            }
            c.backlog.push(buf);
            return;
        }
        self.request(key, &buf, None);
    }

    fn id_arrived(&mut self, key: u64, buf: &[u8]) {
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        let id = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        c.their_id = Some(id);
        c.theirs = u64::from(id);
        if c.tag.is_some() {
            return self.refuse(Some(key), "a connection that spoke both APIs".into());
        }
        c.tag = Some(true);
        let (ep, ours) = (c.ep, c.id);
        let backlog = core::mem::take(&mut c.backlog);
        let opened = opened_event(key, c);
        self.events.push_back(opened);
        // Each start may end the connection at once (a send that failed,
        // stream bytes waiting): what follows is for an open one only.
        let what = What::Send { conn: key };
        self.start(
            what,
            ours.to_le_bytes().to_vec(),
            Vec::new(),
            Call::StreamSend { ep },
        );
        if self.conns.contains_key(&key) {
            let what = What::Extra { conn: key };
            self.start(what, vec![0; 64], Vec::new(), Call::StreamSome { ep });
        }
        for m in backlog {
            if !self.conns.contains_key(&key) {
                break;
            }
            self.request(key, &m, None);
        }
    }

    pub(super) fn arrivals(&mut self) -> bool {
        let am = self.inbox.am.take();
        let any = !am.is_empty();
        for a in am {
            self.am_arrived(a);
        }
        any
    }

    fn am_arrived(&mut self, a: AmIn) {
        let Some(&key) = self.by_ep.get(&a.reply_ep) else {
            self.drop_payload(a.data);
            let sn = IoDemoMsg::decode(&a.header).ok().map(|m| m.sn);
            let conn = self
                .closed
                .iter()
                .rev()
                .find(|c| c.1 == a.reply_ep)
                .map(|c| c.2);
            self.events.push_back(IoDemoEvent::Late { id: 0, conn, sn });
            return;
        };
        let c = self
            .conns
            .get_mut(&key)
            .expect("by_ep names open connections");
        match c.tag {
            Some(true) => {
                self.drop_payload(a.data);
                return self.refuse(Some(key), "a connection that spoke both APIs".into());
            }
            Some(false) => {}
            None => {
                c.tag = Some(false);
                c.theirs = IoDemoMsg::decode(&a.header).map_or(0, |m| m.conn_id);
                let opened = opened_event(key, &self.conns[&key]);
                self.events.push_back(opened);
            }
        }
        self.request(key, &a.header, Some(a.data));
    }

    pub(super) fn drop_payload(&self, data: AmPayload) {
        if let AmPayload::Rndv { desc, .. } = data {
            // SAFETY: a descriptor UCX handed to the AM callback, kept
            // and not yet fetched or released: released once.
            unsafe { sys::ucp_am_data_release(self.worker.worker, desc as *mut c_void) };
        }
    }

    pub(super) fn refuse(&mut self, key: Option<u64>, reason: String) {
        // A connection refused before it showed its API is reported
        // opened first (API unknown), so that its lines come in order.
        if let Some(c) = key.and_then(|k| self.conns.get_mut(&k)) {
            if c.tag.is_none() {
                let opened = opened_event(key.unwrap_or(0), c);
                c.tag = Some(false);
                self.events.push_back(opened);
            }
        }
        self.events.push_back(IoDemoEvent::Refused {
            conn: key,
            reason: reason.clone(),
        });
        if let Some(k) = key {
            self.close(k, format!("refused: {reason}"));
        }
    }

    /// An io message of connection `key` (with its active message's
    /// payload, for `-A` clients).
    fn request(&mut self, key: u64, bytes: &[u8], payload: Option<AmPayload>) {
        match self.admit(key, bytes) {
            Ok(Some((msg, _)))
                if msg.op == Op::Write
                    && payload
                        .as_ref()
                        .is_some_and(|p| p.len() as u64 != msg.data_size) =>
            {
                let len = payload.as_ref().map_or(0, AmPayload::len);
                if let Some(p) = payload {
                    self.drop_payload(p);
                }
                let reason = format!(
                    "write sn {} says {} bytes and its active message carries {len}",
                    msg.sn, msg.data_size
                );
                self.refuse(Some(key), reason);
            }
            Ok(Some((msg, check))) => self.serve(key, msg, bytes.len(), check, payload),
            Ok(None) => {
                if let Some(p) = payload {
                    self.drop_payload(p);
                }
            }
            Err(reason) => {
                if let Some(p) = payload {
                    self.drop_payload(p);
                }
                self.refuse(Some(key), reason);
            }
        }
    }

    /// Decodes and checks a request against the limits and the tracker:
    /// `Ok(None)` for a duplicate (reported, not served).
    fn admit(&mut self, key: u64, bytes: &[u8]) -> Result<Option<(IoDemoMsg, bool)>, String> {
        let msg = IoDemoMsg::decode(bytes).map_err(|e| e.to_string())?;
        let c = &self.conns[&key];
        if c.tag == Some(true) && c.their_id.map(u64::from) != Some(msg.conn_id) {
            return Err(format!(
                "an io message with connection id {} on the connection whose client said it is {}",
                msg.conn_id,
                c.their_id.unwrap_or(0)
            ));
        }
        if !matches!(msg.op, Op::Read | Op::Write) {
            return Err(format!(
                "a client sent op {} (a server's answer)",
                msg.op.name()
            ));
        }
        let opts = &self.opts;
        if msg.data_size > opts.max_data {
            return Err(format!(
                "{} sn {} of {} bytes: past the server's limit of {} bytes per operation",
                msg.op.name(),
                msg.sn,
                msg.data_size,
                opts.max_data
            ));
        }
        if self.held + msg.data_size > opts.max_bytes_in_flight {
            return Err(format!(
                "{} sn {} of {} bytes: the server holds {} of its {} bytes in flight",
                msg.op.name(),
                msg.sn,
                msg.data_size,
                self.held,
                opts.max_bytes_in_flight
            ));
        }
        let c = self
            .conns
            .get_mut(&key)
            .expect("requests come from open connections");
        if c.held + msg.data_size > opts.max_bytes_per_conn {
            return Err(format!(
                "{} sn {} of {} bytes: the connection holds {} of its share of {} bytes in \
                 flight (a client that does not take its answers)",
                msg.op.name(),
                msg.sn,
                msg.data_size,
                c.held,
                opts.max_bytes_per_conn
            ));
        }
        if c.ops.len() >= opts.max_ops_per_conn {
            return Err(format!(
                "{} operations in flight on one connection (the limit)",
                c.ops.len()
            ));
        }
        let track = match &mut c.track {
            Some(t) => t,
            None => c.track.insert(Track::new(msg.sn)?),
        };
        let mut lost = Vec::new();
        let placed = track.place(msg.sn, &mut lost)?;
        for r in lost {
            self.events.push_back(gap(key, r));
        }
        if placed == Placed::Duplicate {
            self.events.push_back(IoDemoEvent::Duplicate {
                conn: key,
                sn: msg.sn,
            });
            return Ok(None);
        }
        c.requests += 1;
        if opts.plant_drop != 0 && c.requests == opts.plant_drop {
            return Ok(None);
        }
        if opts.report_arrivals {
            self.events.push_back(IoDemoEvent::Arrived {
                conn: key,
                op: msg.op,
                sn: msg.sn,
            });
        }
        let check = bytes.len() >= wire::HEADER_LEN + 8 && msg.check_padding(bytes).is_ok();
        Ok(Some((msg, check)))
    }
}

pub(super) fn show(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "an unknown address".into(), |p| p.to_string())
}

impl Pending {
    pub(super) fn new(op: Op, msg: &IoDemoMsg, msg_len: usize, check: bool) -> Pending {
        Pending {
            op,
            size: msg.data_size,
            left: 0,
            msg_len,
            their_id: msg.conn_id,
            check,
            bad: None,
        }
    }
}

fn opened_event(key: u64, c: &Conn) -> IoDemoEvent {
    IoDemoEvent::Opened {
        conn: key,
        peer: c.peer,
        tag: c.tag,
        ours: if c.tag == Some(false) { 0 } else { c.id },
        theirs: c.theirs,
    }
}

fn gap(conn: u64, r: core::ops::Range<u64>) -> IoDemoEvent {
    IoDemoEvent::Gap {
        conn,
        first: r.start as u32,
        end: r.end as u32,
    }
}

impl IoDemoServer {
    /// Takes out of UCX, and drops, the tagged messages nobody will
    /// receive, oldest first: data for a connection that is not open (one
    /// that closed, or a guess), anything on a tag io_demo never uses,
    /// and data for an open connection that waited past [`STRAY_AGE`]
    /// for its io message. UCX would hold them for good. Data whose io
    /// message is on its way stops the sweep until the next poll.
    pub(super) fn drain_strays(&mut self) -> bool {
        let now = std::time::Instant::now();
        let mut any = false;
        for _ in 0..256 {
            let Some(tag) = super::io::oldest_unexpected(self.worker.worker, 0, 0) else {
                self.oldest = None;
                break;
            };
            if tag & wire::IOMSG_TAG != 0 {
                // An io message: the wildcard receive, posted again after
                // each, takes it.
                break;
            }
            let id = wire::tag_conn(tag);
            if id != 0 && self.by_id.contains_key(&id) {
                // Early data of an open connection, or a stray on its tags.
                match self.oldest {
                    Some((t, since)) if t == tag && now - since > super::STRAY_AGE => {}
                    Some((t, _)) if t == tag => break,
                    _ => {
                        self.oldest = Some((tag, now));
                        break;
                    }
                }
            }
            let Some((len, msg)) = super::io::probe(self.worker.worker, tag, u64::MAX) else {
                break;
            };
            let call = Call::MsgRecv {
                worker: self.worker.worker,
                msg,
            };
            // Received into at most a small buffer (UCX truncates the rest
            // away): its bytes are not wanted.
            let n = len.min(4096);
            self.strays += 1;
            self.start(What::Discard, vec![0; n], Vec::new(), call);
            any = true;
        }
        any
    }

    /// Closes the connections that showed no API within
    /// [`ID_DEADLINE`](super::ID_DEADLINE): no connection id on the
    /// stream, no active message. io_demo's clients send theirs at once.
    pub(super) fn expire_silent(&mut self) -> bool {
        let now = std::time::Instant::now();
        if now < self.next_expiry {
            return false;
        }
        self.next_expiry = now + super::ID_DEADLINE / 8;
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.tag.is_none() && now - c.opened > super::ID_DEADLINE)
            .map(|(&k, _)| k)
            .collect();
        for &k in &late {
            let reason = format!(
                "no connection id and no active message within {} s",
                super::ID_DEADLINE.as_secs()
            );
            self.refuse(Some(k), reason);
        }
        !late.is_empty()
    }
}
