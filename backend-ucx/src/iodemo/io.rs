//! The io_demo server's UCX calls: requests in slots, their callbacks, and
//! the active-message handler. Callbacks only record what happened in an
//! [`Inbox`]; the server reads it between UCX calls.

use core::cell::Cell;
use core::ffi::c_void;
use core::{mem, ptr};

use iomsg_ucx_sys as sys;

use crate::status::{Pending, Status};
use crate::worker::{push, ErrArg};

/// What the callbacks record.
#[derive(Default)]
pub(super) struct Inbox {
    /// Completed requests: slot, status, bytes, sender tag (tag receives).
    pub(super) done: Cell<Vec<(usize, Status, usize, u64)>>,
    /// Active messages, in order.
    pub(super) am: Cell<Vec<AmIn>>,
    /// A callback panicked (a bug): recorded instead of unwinding into C.
    pub(super) panicked: Cell<bool>,
}

/// An active message as its callback saw it.
pub(super) struct AmIn {
    /// The header (io_demo's io message), copied.
    pub(super) header: Vec<u8>,
    /// The endpoint UCX offers for the reply (io_demo's connection key).
    pub(super) reply_ep: usize,
    /// The payload.
    pub(super) data: AmPayload,
}

/// Where an active message's payload is.
pub(super) enum AmPayload {
    /// Copied in the callback.
    Copied(Vec<u8>),
    /// A rendezvous descriptor: fetched with `ucp_am_recv_data_nbx` or
    /// released with `ucp_am_data_release`.
    Rndv { desc: usize, len: usize },
}

impl AmPayload {
    /// Its bytes.
    pub(super) fn len(&self) -> usize {
        match self {
            AmPayload::Copied(v) => v.len(),
            AmPayload::Rndv { len, .. } => *len,
        }
    }
}

/// A request's callback argument: the inbox and the request's slot.
pub(super) struct Arg {
    pub(super) inbox: *const Inbox,
    pub(super) slot: usize,
}

fn record(inbox: *const Inbox, f: impl FnOnce(&Inbox)) {
    // SAFETY: every `inbox` handed to UCX is the server's boxed Inbox,
    // which outlives the worker's requests and handlers (see Drop).
    let inbox = unsafe { &*inbox };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(inbox)));
    if r.is_err() {
        inbox.panicked.set(true);
    }
}

/// # Safety
///
/// `user_data` must point to a live [`Arg`].
unsafe fn finished(user_data: *mut c_void, status: sys::ucs_status_t, len: usize, tag: u64) {
    // SAFETY: by the contract.
    let arg = unsafe { &*(user_data as *const Arg) };
    let slot = arg.slot;
    record(arg.inbox, |i| {
        push(&i.done, (slot, Status(status), len, tag))
    });
}

/// `ucp_send_nbx_callback_t`.
unsafe extern "C" fn on_send(_r: *mut c_void, status: sys::ucs_status_t, user_data: *mut c_void) {
    // SAFETY: user_data is the slot's Arg, alive until the slot is freed.
    unsafe { finished(user_data, status, 0, 0) };
}

/// `ucp_tag_recv_nbx_callback_t`: keeps the sender's tag and the length.
unsafe extern "C" fn on_tag_recv(
    _r: *mut c_void,
    status: sys::ucs_status_t,
    info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    let (tag, len) = if info.is_null() {
        (0, 0)
    } else {
        // SAFETY: UCX passes a valid info struct for the callback.
        unsafe { ((*info).sender_tag, (*info).length) }
    };
    // SAFETY: as for on_send.
    unsafe { finished(user_data, status, len, tag) };
}

/// `ucp_stream_recv_nbx_callback_t` and `ucp_am_recv_data_nbx_callback_t`.
unsafe extern "C" fn on_len(
    _r: *mut c_void,
    status: sys::ucs_status_t,
    len: usize,
    user_data: *mut c_void,
) {
    // SAFETY: as for on_send.
    unsafe { finished(user_data, status, len, 0) };
}

/// `ucp_am_recv_callback_t` for io_demo's active messages (id 0).
pub(super) unsafe extern "C" fn on_am(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    let header = if header.is_null() || header_length == 0 {
        Vec::new()
    } else {
        // SAFETY: UCX passes `header_length` readable bytes at `header`
        // for the callback's duration; copied out here.
        unsafe { core::slice::from_raw_parts(header.cast::<u8>(), header_length) }.to_vec()
    };
    let (attr, reply_ep) = if param.is_null() {
        (0, 0)
    } else {
        // SAFETY: UCX passes a valid parameter struct (null checked).
        unsafe { ((*param).recv_attr, (*param).reply_ep as usize) }
    };
    let rndv = attr & u64::from(sys::UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    let (data, status) = if rndv {
        (
            AmPayload::Rndv {
                desc: data as usize,
                len: length,
            },
            sys::UCS_INPROGRESS,
        )
    } else if data.is_null() || length == 0 {
        (AmPayload::Copied(Vec::new()), sys::UCS_OK)
    } else {
        // SAFETY: UCX passes `length` readable bytes at `data` for the
        // callback's duration; copied out here.
        let bytes = unsafe { core::slice::from_raw_parts(data.cast::<u8>(), length) }.to_vec();
        (AmPayload::Copied(bytes), sys::UCS_OK)
    };
    let am = AmIn {
        header,
        reply_ep,
        data,
    };
    record(arg as *const Inbox, |i| push(&i.am, am));
    status
}

/// What a slot's request is for.
pub(super) enum What {
    /// A receive of io messages, any connection's (tag API).
    IoMsg,
    /// The peer's 4-byte connection id over the stream (an AM client's
    /// first flush, which says the endpoint is up, is reported the same
    /// way).
    IdRecv { conn: u64 },
    /// The receive kept posted on a tag connection's stream once its id
    /// came: io_demo sends nothing more there, and whatever comes is
    /// refused (UCX would keep it, unread, for as long as the connection
    /// lives).
    Extra { conn: u64 },
    /// Our id, or an answer, sent to `conn`.
    Send { conn: u64 },
    /// A chunk of operation `sn`'s data (tag) or a rendezvous payload
    /// (AM); `answer`: a tag read's answer, which travels on the data tag.
    Data { conn: u64, sn: u32, answer: bool },
    /// Data nobody will take (for a connection that closed), discarded.
    Discard,
    /// An endpoint's close; the error handler's argument lives until it
    /// completes.
    Close { _err: Box<ErrArg> },
}

impl What {
    /// The connection the request is for, if one.
    pub(super) fn conn(&self) -> Option<u64> {
        match *self {
            What::IdRecv { conn }
            | What::Extra { conn }
            | What::Send { conn }
            | What::Data { conn, .. } => Some(conn),
            _ => None,
        }
    }
}

/// A request in flight and what it owns.
pub(super) struct Slot {
    pub(super) what: What,
    pub(super) req: *mut c_void,
    /// The bytes UCX reads or writes until the request completes.
    pub(super) buf: Vec<u8>,
    /// A second buffer kept as long (an active message's header): only
    /// held, never read here.
    pub(super) _header: Vec<u8>,
}

/// The server's requests.
pub(super) struct Slots {
    pub(super) slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    /// Boxed: UCX holds each one's address while its request runs.
    #[allow(clippy::vec_box)]
    args: Vec<Box<Arg>>,
    inbox: *const Inbox,
}

/// How a request is started.
pub(super) enum Call {
    /// `ucp_tag_send_nbx(ep, buf, tag)`.
    TagSend { ep: sys::ucp_ep_h, tag: u64 },
    /// `ucp_tag_recv_nbx(worker, buf, tag, mask)`.
    TagRecv {
        worker: sys::ucp_worker_h,
        tag: u64,
        mask: u64,
    },
    /// `ucp_stream_send_nbx(ep, buf)`.
    StreamSend { ep: sys::ucp_ep_h },
    /// `ucp_stream_recv_nbx(ep, buf)`, all of it.
    StreamRecv { ep: sys::ucp_ep_h },
    /// `ucp_stream_recv_nbx(ep, buf)`, completing with whatever came.
    StreamSome { ep: sys::ucp_ep_h },
    /// `ucp_am_send_nbx(ep, AM_ID, header, buf)` with the reply flag.
    AmSend { ep: sys::ucp_ep_h },
    /// `ucp_am_recv_data_nbx(worker, desc, buf)`.
    AmData {
        worker: sys::ucp_worker_h,
        desc: usize,
    },
    /// `ucp_ep_close_nbx(ep)`, forced.
    Close { ep: sys::ucp_ep_h },
    /// `ucp_ep_flush_nbx(ep)`: completes once the endpoint is wired up
    /// and what it sent is out.
    Flush { ep: sys::ucp_ep_h },
    /// `ucp_tag_msg_recv_nbx(worker, buf, msg)`: takes a probed message.
    MsgRecv {
        worker: sys::ucp_worker_h,
        msg: sys::ucp_tag_message_h,
    },
}

impl Slots {
    pub(super) fn new(inbox: *const Inbox) -> Slots {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            args: Vec::new(),
            inbox,
        }
    }

    /// Starts `call` in a new slot owning `buf` (and `header`). Returns
    /// the slot and, when it finished at once, its status, length and
    /// sender tag (tag receives).
    pub(super) fn start(
        &mut self,
        what: What,
        mut buf: Vec<u8>,
        header: Vec<u8>,
        call: Call,
    ) -> (usize, Option<(Status, usize, u64)>) {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        while self.args.len() <= slot {
            self.args.push(Box::new(Arg {
                inbox: self.inbox,
                slot: self.args.len(),
            }));
        }
        let arg: *const Arg = &*self.args[slot];
        // SAFETY: all-zero is a valid request-param value.
        let mut p: sys::ucp_request_param_t = unsafe { mem::zeroed() };
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_CALLBACK
            | sys::UCP_OP_ATTR_FIELD_USER_DATA
            | sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.user_data = arg.cast_mut().cast();
        let b: *mut c_void = buf.as_mut_ptr().cast();
        let n = buf.len();
        let mut len = n;
        let ptr = match call {
            Call::TagSend { ep, tag } => {
                p.cb.send = Some(on_send);
                // SAFETY: ep is live; `buf` moves into the slot below and
                // stays (its heap bytes do not move) until completion.
                unsafe { sys::ucp_tag_send_nbx(ep, b, n, tag, &p) }
            }
            Call::TagRecv { worker, tag, mask } => {
                p.cb.recv = Some(on_tag_recv);
                // UCX 1.13.1 does not fill `recv_info` when a receive
                // completes at once: the callback, always called this
                // way, tells the sender's tag and the length.
                p.op_attr_mask |= sys::UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
                // SAFETY: as above, for the worker.
                unsafe { sys::ucp_tag_recv_nbx(worker, b, n, tag, mask, &p) }
            }
            Call::StreamSend { ep } => {
                p.cb.send = Some(on_send);
                // SAFETY: as above.
                unsafe { sys::ucp_stream_send_nbx(ep, b, n, &p) }
            }
            Call::StreamSome { ep } => {
                p.cb.recv_stream = Some(on_len);
                // SAFETY: as above; `len` is written only on immediate
                // completion, before the call returns.
                unsafe { sys::ucp_stream_recv_nbx(ep, b, n, &mut len, &p) }
            }
            Call::StreamRecv { ep } => {
                p.cb.recv_stream = Some(on_len);
                p.flags = sys::UCP_STREAM_RECV_FLAG_WAITALL;
                // SAFETY: as above; `len` is written only on immediate
                // completion, before the call returns.
                unsafe { sys::ucp_stream_recv_nbx(ep, b, n, &mut len, &p) }
            }
            Call::AmSend { ep } => {
                p.cb.send = Some(on_send);
                p.flags = sys::UCP_AM_SEND_FLAG_REPLY;
                let (h, hn) = (header.as_ptr().cast::<c_void>(), header.len());
                // SAFETY: as above; the header moves into the slot too
                // and stays until completion (UCX 1.13.1 may read it
                // until then).
                unsafe { sys::ucp_am_send_nbx(ep, crate::iodemo::AM_ID, h, hn, b, n, &p) }
            }
            Call::AmData { worker, desc } => {
                p.cb.recv_am = Some(on_len);
                // SAFETY: desc is a rendezvous descriptor UCX handed to
                // the AM callback (kept with UCS_INPROGRESS), used once.
                unsafe { sys::ucp_am_recv_data_nbx(worker, desc as *mut c_void, b, n, &p) }
            }
            Call::MsgRecv { worker, msg } => {
                p.cb.recv = Some(on_tag_recv);
                p.op_attr_mask |= sys::UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
                // SAFETY: msg came from ucp_tag_probe_nb with remove set
                // and is received once; the buffer is kept as above.
                unsafe { sys::ucp_tag_msg_recv_nbx(worker, b, n, msg, &p) }
            }
            Call::Flush { ep } => {
                p.cb.send = Some(on_send);
                // SAFETY: ep is live.
                unsafe { sys::ucp_ep_flush_nbx(ep, &p) }
            }
            Call::Close { ep } => {
                p.cb.send = Some(on_send);
                p.flags = sys::UCP_EP_CLOSE_FLAG_FORCE;
                // SAFETY: ep is live and closed once.
                unsafe { sys::ucp_ep_close_nbx(ep, &p) }
            }
        };
        let tag = 0;
        let (req, now) = match Pending::from_ptr(ptr) {
            Pending::Request(r) => (r, None),
            Pending::Done => (ptr::null_mut(), Some((Status::OK, len, tag))),
            Pending::Failed(s) => (ptr::null_mut(), Some((s, 0, tag))),
        };
        self.slots[slot] = Some(Slot {
            what,
            req,
            buf,
            _header: header,
        });
        (slot, now)
    }

    /// Takes a finished slot back; its request (if any) is freed.
    pub(super) fn take(&mut self, slot: usize) -> Option<Slot> {
        let s = self.slots.get_mut(slot)?.take()?;
        if !s.req.is_null() {
            // SAFETY: the request completed (its callback ran or it
            // finished at once) and is freed once.
            unsafe { sys::ucp_request_free(s.req) };
        }
        self.free.push(slot);
        Some(s)
    }

    /// Cancels every request of `conn` still in flight (they complete
    /// through their callbacks).
    pub(super) fn cancel_conn(&self, worker: sys::ucp_worker_h, conn: u64) {
        for s in self.slots.iter().flatten() {
            let mine = match s.what {
                What::IdRecv { conn: c }
                | What::Extra { conn: c }
                | What::Send { conn: c }
                | What::Data { conn: c, .. } => c == conn,
                _ => false,
            };
            if mine && !s.req.is_null() {
                // SAFETY: a live request of this worker; cancelling makes
                // it complete (UCS_ERR_CANCELED) on a later progress.
                unsafe { sys::ucp_request_cancel(worker, s.req) };
            }
        }
    }

    /// Cancels every request still in flight.
    pub(super) fn cancel_all(&self, worker: sys::ucp_worker_h) {
        for s in self.slots.iter().flatten() {
            if !s.req.is_null() && !matches!(s.what, What::Close { .. }) {
                // SAFETY: a live request of this worker; cancelling makes
                // it complete (UCS_ERR_CANCELED) on a later progress.
                unsafe { sys::ucp_request_cancel(worker, s.req) };
            }
        }
    }

    /// Requests in flight.
    pub(super) fn busy(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}

/// Takes the first unexpected message whose tag matches `tag` under
/// `mask` out of UCX's queue: its length, and the handle to receive it
/// with ([`Call::MsgRecv`]).
pub(super) fn probe(
    worker: sys::ucp_worker_h,
    tag: u64,
    mask: u64,
) -> Option<(usize, sys::ucp_tag_message_h)> {
    let mut info = sys::ucp_tag_recv_info_t {
        sender_tag: 0,
        length: 0,
    };
    // SAFETY: the worker is live; info is a local out-struct; remove = 1
    // hands the message to the caller, who receives it once.
    let msg = unsafe { sys::ucp_tag_probe_nb(worker, tag, mask, 1, &mut info) };
    (!msg.is_null()).then_some((info.length, msg))
}

/// The tag of the oldest message UCX holds unexpected (nobody posted a
/// receive that matches it) whose tag matches `tag` under `mask`, left
/// where it is.
pub(super) fn oldest_unexpected(worker: sys::ucp_worker_h, tag: u64, mask: u64) -> Option<u64> {
    let mut info = sys::ucp_tag_recv_info_t {
        sender_tag: 0,
        length: 0,
    };
    // SAFETY: the worker is live; info is a local out-struct; remove = 0
    // leaves the message in UCX's queue (no handle is returned to use).
    let msg = unsafe { sys::ucp_tag_probe_nb(worker, tag, mask, 0, &mut info) };
    (!msg.is_null()).then_some(info.sender_tag)
}
