//! A UCP context and worker, and the bookkeeping every UCX callback feeds.
//!
//! UCX calls back only from inside `ucp_worker_progress` (and the other
//! calls that may progress the worker). The callbacks do one thing: push
//! what happened onto [`Shared`]'s queues. Each queue is a `Cell` that is
//! taken, pushed to and put back with no UCX call in between, so a
//! callback can always record its event: nothing is ever borrowed across
//! a UCX call, and there is no borrow that could fail. A callback never
//! unwinds: it catches a panic and records it.

use core::cell::Cell;
use core::ffi::c_void;
use core::ptr;
use std::collections::VecDeque;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};

use iomsg_ucx_sys as sys;

use crate::status::{Pending, Status};

/// What callbacks report, taken by the transport between UCX calls.
#[derive(Default)]
pub(crate) struct Shared {
    /// Connection requests a listener received.
    pub(crate) conn_requests: Cell<VecDeque<sys::ucp_conn_request_h>>,
    /// Endpoints whose error handler ran: the connection's local key and
    /// the status.
    pub(crate) failed: Cell<Vec<(u64, Status)>>,
    /// Requests that completed: their slot and status (and, for stream
    /// receives, the bytes received).
    pub(crate) done: Cell<Vec<(usize, Status, usize)>>,
    /// Active messages that arrived, in order.
    pub(crate) arrivals: Cell<Vec<Arrival>>,
    /// Active messages that arrived on an id nobody here serves (see
    /// [`Worker::guard_am_ids`]): dropped in the callback, counted.
    pub(crate) stray_ams: Cell<u64>,
    /// Events recorded by the callbacks, in all (a debug figure: every one
    /// of them is taken by the transport).
    pub(crate) recorded: Cell<u64>,
    /// A callback panicked (a bug): recorded instead of unwinding into C.
    pub(crate) panicked: Cell<bool>,
}

/// Appends `item` to the queue in `cell`. Never fails, never loses the
/// item: the queue is out of the cell only between two statements here.
pub(crate) fn push<T, Q: Default + Extend<T>>(cell: &Cell<Q>, item: T) {
    let mut q = cell.take();
    q.extend(core::iter::once(item));
    cell.set(q);
}

/// The callbacks' view of [`Shared`]: a pointer handed to UCX as `arg`.
pub(crate) type SharedCell = Shared;

/// Runs `f` on the shared state from inside a callback, never unwinding.
///
/// # Safety
///
/// `arg` must be the `*const SharedCell` this worker handed to UCX, alive
/// for as long as UCX may call back (the worker owns it and outlives every
/// endpoint, listener and request).
unsafe fn with_shared(arg: *mut c_void, f: impl FnOnce(&Shared)) {
    // SAFETY: by this function's contract, `arg` points to a live
    // Shared; only shared references to it are made (its fields are
    // cells).
    let shared = unsafe { &*(arg as *const SharedCell) };
    let result = catch_unwind(AssertUnwindSafe(|| {
        f(shared);
        shared.recorded.set(shared.recorded.get().wrapping_add(1));
    }));
    if result.is_err() {
        shared.panicked.set(true);
    }
}

/// `ucp_listener_conn_callback_t`: a client asks to connect.
pub(crate) unsafe extern "C" fn on_conn_request(req: sys::ucp_conn_request_h, arg: *mut c_void) {
    // SAFETY: the listener was created with this worker's SharedCell as
    // `arg`, and the worker outlives its listener.
    unsafe { with_shared(arg, |s| push(&s.conn_requests, req)) };
}

/// Packs the shared pointer and a connection key into an error handler's
/// argument: the key is looked up in a table the worker keeps.
pub(crate) struct ErrArg {
    pub(crate) shared: *const SharedCell,
    pub(crate) key: u64,
}

/// `ucp_err_handler_cb_t`: the endpoint failed (peer gone, keepalive).
pub(crate) unsafe extern "C" fn on_ep_error(
    arg: *mut c_void,
    _ep: sys::ucp_ep_h,
    status: sys::ucs_status_t,
) {
    // SAFETY: `arg` is the boxed ErrArg of a connection, kept alive by the
    // transport until the endpoint is closed and its close completed.
    let err = unsafe { &*(arg as *const ErrArg) };
    let key = err.key;
    // SAFETY: ErrArg.shared is the worker's SharedCell, alive as above.
    unsafe {
        with_shared(err.shared as *mut c_void, |s| {
            push(&s.failed, (key, Status(status)));
        });
    }
}

/// The `user_data` of a request: the shared state and the request's slot.
pub(crate) struct ReqArg {
    pub(crate) shared: *const SharedCell,
    pub(crate) slot: usize,
    /// An active-message send's header: UCX 1.13.1 may read it until the
    /// send completes, so it lives here, beside the request.
    pub(crate) header: Cell<[u8; 8]>,
}

/// The active-message id frames travel on.
pub(crate) const AM_ID: u32 = 0;

/// An active message, as its callback saw it.
pub(crate) struct Arrival {
    /// Its 8-byte header (little-endian), or `None` when it had another
    /// length (nobody's: a stray).
    pub(crate) header: Option<u64>,
    /// Its bytes.
    pub(crate) data: AmData,
}

/// Where an active message's bytes are.
pub(crate) enum AmData {
    /// UCX's own buffer, kept for the transport (the callback returned
    /// `UCS_INPROGRESS`): readable until `ucp_am_data_release`.
    Held { data: *mut c_void, len: usize },
    /// A rendezvous: nothing arrived yet; `ucp_am_data_release` declines
    /// it (the transport never fetches one).
    Rndv { desc: *mut c_void, len: usize },
    /// Copied in the callback (UCX could not let the transport keep it).
    Copied(Vec<u8>),
}

impl AmData {
    /// The message's length.
    pub(crate) fn len(&self) -> usize {
        match self {
            AmData::Held { len, .. } | AmData::Rndv { len, .. } => *len,
            AmData::Copied(v) => v.len(),
        }
    }
}

/// `ucp_am_recv_callback_t`: a frame, batch or heartbeat arrived.
pub(crate) unsafe extern "C" fn on_am(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    let header = (header_length == 8 && !header.is_null()).then(|| {
        let mut b = [0u8; 8];
        // SAFETY: UCX passes `header_length` (8) readable bytes at
        // `header`, valid during the callback; copied out here.
        unsafe { ptr::copy_nonoverlapping(header.cast::<u8>(), b.as_mut_ptr(), 8) };
        u64::from_le_bytes(b)
    });
    let attr = if param.is_null() {
        0
    } else {
        // SAFETY: UCX passes a valid parameter struct for the callback's
        // duration (null checked just above).
        unsafe { (*param).recv_attr }
    };
    let rndv = attr & u64::from(sys::UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    let held = attr & u64::from(sys::UCP_AM_RECV_ATTR_FLAG_DATA) != 0;
    let (data, status) = if rndv {
        (
            AmData::Rndv {
                desc: data,
                len: length,
            },
            sys::UCS_INPROGRESS,
        )
    } else if held {
        (AmData::Held { data, len: length }, sys::UCS_INPROGRESS)
    } else {
        let bytes = if data.is_null() || length == 0 {
            Vec::new()
        } else {
            // SAFETY: UCX passes `length` readable bytes at `data`, valid
            // during the callback; copied out here.
            unsafe { core::slice::from_raw_parts(data.cast::<u8>(), length) }.to_vec()
        };
        (AmData::Copied(bytes), sys::UCS_OK)
    };
    // SAFETY: the handler was registered with this worker's SharedCell as
    // `arg`, and the worker outlives its handler.
    unsafe { with_shared(arg, |s| push(&s.arrivals, Arrival { header, data })) };
    status
}

/// An active-message callback (`ucp_am_recv_callback_t`).
pub(crate) type AmCallback = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    usize,
    *mut c_void,
    usize,
    *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t;

/// `ucp_am_recv_callback_t` of every id nobody serves: counts the message
/// and drops it (`UCS_OK`: UCX frees an eager message's bytes, and
/// declines a rendezvous one, whose sender then completes).
pub(crate) unsafe extern "C" fn on_stray_am(
    arg: *mut c_void,
    _header: *const c_void,
    _header_length: usize,
    _data: *mut c_void,
    _length: usize,
    _param: *const sys::ucp_am_recv_param_t,
) -> sys::ucs_status_t {
    // SAFETY: registered with this worker's SharedCell as `arg`, which
    // outlives the worker's handlers.
    unsafe {
        with_shared(arg, |s| {
            s.stray_ams.set(s.stray_ams.get().saturating_add(1))
        })
    };
    sys::UCS_OK
}

/// `ucp_send_nbx_callback_t`.
pub(crate) unsafe extern "C" fn on_send(
    _request: *mut c_void,
    status: sys::ucs_status_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the request's ReqArg, boxed in its slot until
    // the request completed and was freed.
    unsafe { done(user_data, status, 0) };
}

/// `ucp_tag_recv_nbx_callback_t`.
pub(crate) unsafe extern "C" fn on_tag_recv(
    _request: *mut c_void,
    status: sys::ucs_status_t,
    _info: *const sys::ucp_tag_recv_info_t,
    user_data: *mut c_void,
) {
    // SAFETY: as for on_send.
    unsafe { done(user_data, status, 0) };
}

/// `ucp_stream_recv_nbx_callback_t`.
pub(crate) unsafe extern "C" fn on_recv_length(
    _request: *mut c_void,
    status: sys::ucs_status_t,
    length: usize,
    user_data: *mut c_void,
) {
    // SAFETY: as for on_send.
    unsafe { done(user_data, status, length) };
}

/// Records a completion.
///
/// # Safety
///
/// `user_data` must point to a live [`ReqArg`].
unsafe fn done(user_data: *mut c_void, status: sys::ucs_status_t, length: usize) {
    // SAFETY: by the contract.
    let arg = unsafe { &*(user_data as *const ReqArg) };
    let slot = arg.slot;
    // SAFETY: ReqArg.shared is the worker's SharedCell, alive while any
    // request is.
    unsafe {
        with_shared(arg.shared as *mut c_void, |s| {
            push(&s.done, (slot, Status(status), length));
        });
    }
}

/// How a worker waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitMode {
    /// The application polls (the default): lowest latency.
    BusyPoll,
    /// The worker has an event fd ([`crate::UcxTransport::event_fd`]) and
    /// [`arm`](iomsg_core::transport::Transport::arm) arms it, so a quiet
    /// application can sleep.
    Blocking,
}

/// A UCP context and one worker on it, with the callbacks' shared state.
pub(crate) struct Worker {
    pub(crate) context: sys::ucp_context_h,
    pub(crate) worker: sys::ucp_worker_h,
    /// Boxed so its address is stable: UCX holds pointers to it.
    pub(crate) shared: Box<SharedCell>,
    pub(crate) mode: WaitMode,
}

impl Worker {
    /// A context with tag matching, active messages and streams (and
    /// wakeup in blocking mode), configured from the `UCX_*` environment
    /// as usual, and a single-threaded worker whose frames come as active
    /// messages (`am`) or tagged.
    ///
    /// `settings` are context variables (without the `UCX_` prefix),
    /// applied with `ucp_config_modify` unless the environment sets them.
    pub(crate) fn new(
        mode: WaitMode,
        settings: &[(&str, &str)],
        async_events: usize,
        am: bool,
    ) -> Result<Worker, Status> {
        // Both APIs, whichever carries the frames: a peer may send on
        // either, and a worker without the other API's feature leaves it
        // to UCX, which logs every such message with a backtrace (tagged
        // messages to an active-message worker) or crashes (a rendezvous
        // active message to a tag worker, UCX 1.13.1). With both, a tag
        // transport's active messages reach [`on_stray_am`], and an
        // active-message transport takes tagged messages out as strays.
        let mut features = u64::from(sys::UCP_FEATURE_STREAM)
            | u64::from(sys::UCP_FEATURE_TAG)
            | u64::from(sys::UCP_FEATURE_AM);
        if mode == WaitMode::Blocking {
            features |= u64::from(sys::UCP_FEATURE_WAKEUP);
        }
        let made = Worker::with_features(mode, settings, async_events, features)?;
        if am {
            made.take_ams()?;
        } else {
            made.guard_am_ids()?;
        }
        Ok(made)
    }

    /// Serves active messages: id [`AM_ID`] goes to the transport's
    /// queue ([`Shared::arrivals`]), every other id to
    /// [`guard_am_ids`](Self::guard_am_ids)'s counter.
    pub(crate) fn take_ams(&self) -> Result<(), Status> {
        self.guard_am_ids()?;
        // SAFETY: the worker is live; the handler's arg is its boxed
        // shared state, which lives as long as the worker (dropped after
        // `ucp_worker_destroy`).
        unsafe {
            self.set_am_handler(
                AM_ID,
                sys::UCP_AM_FLAG_WHOLE_MSG | sys::UCP_AM_FLAG_PERSISTENT_DATA,
                on_am,
                self.shared_ptr() as *mut c_void,
            )
        }
    }

    /// Gives every active-message id a handler of ours that drops what
    /// comes and counts it ([`Shared::stray_ams`]); the caller then
    /// registers its own id over it.
    ///
    /// A peer picks the id of each active message it sends (16 bits), and
    /// may send one before it has proved anything. UCX 1.13.1 reads the
    /// handler table at that id before it checks the id is registered
    /// (`ucp_am_handler_common`, `ucp_am_rndv_process_rts`): an id past
    /// the table reads memory past it, and ids 16,384 and up crash the
    /// process; when the table grows, the new entries between the old end
    /// and the new id are left uninitialised, so a handler registered at a
    /// high id alone would leave the ids below it pointing at garbage.
    /// UCX 1.22 checks the id first, and warns once per message. With a
    /// handler of ours at all 65,536 ids, every id a peer can send reaches
    /// code of ours on every version: the table costs 24 B per id,
    /// 1.5 MiB per worker.
    pub(crate) fn guard_am_ids(&self) -> Result<(), Status> {
        for id in 0..=u32::from(u16::MAX) {
            // SAFETY: the worker is live; the handler's arg is its boxed
            // shared state, alive as long as the worker.
            unsafe {
                self.set_am_handler(
                    id,
                    sys::UCP_AM_FLAG_WHOLE_MSG,
                    on_stray_am,
                    self.shared_ptr() as *mut c_void,
                )?;
            }
        }
        Ok(())
    }

    /// Registers `cb` for active-message id `id` with `flags`.
    ///
    /// # Safety
    ///
    /// `arg` must be what `cb` expects, alive for as long as the worker
    /// may call `cb` (until the worker is destroyed or the id registered
    /// again).
    pub(crate) unsafe fn set_am_handler(
        &self,
        id: u32,
        flags: u32,
        cb: AmCallback,
        arg: *mut c_void,
    ) -> Result<(), Status> {
        // SAFETY: all-zero is a valid "no fields" handler params value.
        let mut hp: sys::ucp_am_handler_param_t = unsafe { core::mem::zeroed() };
        hp.field_mask = u64::from(sys::UCP_AM_HANDLER_PARAM_FIELD_ID)
            | u64::from(sys::UCP_AM_HANDLER_PARAM_FIELD_FLAGS)
            | u64::from(sys::UCP_AM_HANDLER_PARAM_FIELD_CB)
            | u64::from(sys::UCP_AM_HANDLER_PARAM_FIELD_ARG);
        hp.id = id;
        hp.flags = flags;
        hp.cb = Some(cb);
        hp.arg = arg;
        // SAFETY: the worker is live; `arg` lives as the caller promised.
        Status(unsafe { sys::ucp_worker_set_am_recv_handler(self.worker, &hp) }).check()
    }

    /// A context with exactly `features` (`UCP_FEATURE_*`), configured as
    /// [`new`](Self::new) does, and its worker; no active-message handler.
    pub(crate) fn with_features(
        mode: WaitMode,
        settings: &[(&str, &str)],
        async_events: usize,
        features: u64,
    ) -> Result<Worker, Status> {
        raise_async_events(async_events);
        let mut config: *mut sys::ucp_config_t = ptr::null_mut();
        // SAFETY: NULL env prefix and filename mean "UCX_" and none;
        // `config` is an out-pointer to a local.
        Status(unsafe { sys::ucp_config_read(ptr::null(), ptr::null(), &mut config) }).check()?;
        let mut modified = Ok(());
        for (name, value) in settings {
            if std::env::var_os(format!("UCX_{name}")).is_some() {
                continue;
            }
            let (Ok(n), Ok(v)) = (CString::new(*name), CString::new(*value)) else {
                continue;
            };
            // SAFETY: config is the live configuration read above; both
            // strings are NUL-terminated and outlive the call.
            let status = Status(unsafe { sys::ucp_config_modify(config, n.as_ptr(), v.as_ptr()) });
            modified = modified.and(status.check());
        }
        // SAFETY: ucp_params_t is a plain C struct for which all-zero is a
        // valid "no fields set" value.
        let mut params: sys::ucp_params_t = unsafe { core::mem::zeroed() };
        params.field_mask = u64::from(sys::UCP_PARAM_FIELD_FEATURES);
        params.features = features;
        let mut context: sys::ucp_context_h = ptr::null_mut();
        let init = modified.and_then(|()| {
            // SAFETY: params and config are valid; context is an
            // out-pointer to a local.
            Status(unsafe { sys::ucp_init(&params, config, &mut context) }).check()
        });
        // SAFETY: config came from ucp_config_read and is released once.
        unsafe { sys::ucp_config_release(config) };
        init?;
        // SAFETY: as for ucp_params_t.
        let mut wparams: sys::ucp_worker_params_t = unsafe { core::mem::zeroed() };
        wparams.field_mask = u64::from(sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE);
        // Serialized, not single: the transport may move to another
        // thread (it is Send), and UCX's single mode allows only the
        // thread that made the worker. Neither mode locks in UCP.
        wparams.thread_mode = sys::UCS_THREAD_MODE_SERIALIZED;
        let mut worker: sys::ucp_worker_h = ptr::null_mut();
        // SAFETY: context is live; worker is an out-pointer to a local.
        let status = Status(unsafe { sys::ucp_worker_create(context, &wparams, &mut worker) });
        if let Err(e) = status.check() {
            // SAFETY: context was initialised above and has no workers.
            unsafe { sys::ucp_cleanup(context) };
            return Err(e);
        }
        let made = Worker {
            context,
            worker,
            shared: Box::new(Shared::default()),
            mode,
        };
        Ok(made)
    }

    /// The shared state's address, for UCX's `arg` and `user_data`.
    pub(crate) fn shared_ptr(&self) -> *const SharedCell {
        &*self.shared
    }

    /// Destroys `listener`, rejecting first every connection request it
    /// handed over that nobody took (one that came while the owner closed):
    /// UCX 1.13.1 asserts, and aborts, when it destroys the worker with
    /// such a request still open.
    ///
    /// # Safety
    ///
    /// `listener` must be a live listener of this worker, destroyed once
    /// (here), and every request in the queue must be one of its own.
    pub(crate) unsafe fn destroy_listener(&self, listener: sys::ucp_listener_h) {
        for req in self.shared.conn_requests.take() {
            // SAFETY: a request this listener handed to our callback,
            // neither accepted nor rejected: released here, once.
            unsafe { sys::ucp_listener_reject(listener, req) };
        }
        // SAFETY: by the contract.
        unsafe { sys::ucp_listener_destroy(listener) };
    }

    /// Makes progress once; returns whether anything happened. (One
    /// call: each may poll the tcp transport's sockets, a system call, and
    /// the transport calls it again on its next poll.)
    pub(crate) fn progress(&self) -> bool {
        // SAFETY: the worker is live; no borrow of `shared` is held.
        unsafe { sys::ucp_worker_progress(self.worker) != 0 }
    }

    /// Arms the worker's event fd: `Ok(true)` when armed, `Ok(false)` when
    /// events are pending (poll again).
    pub(crate) fn arm(&self) -> Result<bool, Status> {
        // SAFETY: the worker is live and has WAKEUP (checked by callers).
        let status = Status(unsafe { sys::ucp_worker_arm(self.worker) });
        if status.0 == sys::UCS_ERR_BUSY {
            Ok(false)
        } else {
            status.check().map(|()| true)
        }
    }

    /// The worker's event fd (blocking mode only).
    pub(crate) fn event_fd(&self) -> Result<i32, Status> {
        let mut fd = -1;
        // SAFETY: the worker is live; fd is an out-pointer to a local.
        Status(unsafe { sys::ucp_worker_get_efd(self.worker, &mut fd) }).check()?;
        Ok(fd)
    }

    /// Releases a request to UCX: a complete one is freed, one still in
    /// progress goes on inside UCX with no callback of ours any more.
    pub(crate) fn free(&self, request: *mut c_void) {
        // SAFETY: `request` came from an *_nbx call of this worker and is
        // released once; UCX takes it in any state (`ucp_request_free`:
        // "regardless of its current state"), and a caller that releases
        // one still in progress leaks the buffer it uses.
        unsafe { sys::ucp_request_free(request) };
    }

    /// Waits (progressing) until `request` is complete, then frees it;
    /// after `rounds` progress rounds it cancels it and waits as long
    /// again. Returns `false` if it is still in progress then: the request
    /// is released to UCX all the same (`ucp_request_free` takes a request
    /// in any state; no callback of it runs afterwards), and the caller
    /// must leave its buffer alone for good (leak it) rather than free
    /// what UCX may still touch. Released, it no longer trips UCX 1.13.1's
    /// check at `ucp_worker_destroy` (`ucp_ep.c:382`, an endpoint close
    /// still in progress that its owner did not release: an abort).
    pub(crate) fn wait(&self, request: Pending, rounds: u32) -> bool {
        let Pending::Request(req) = request else {
            return true;
        };
        let done = |w: &Worker| {
            // SAFETY: req is a live request of this worker.
            let status = Status(unsafe { sys::ucp_request_check_status(req) });
            if status == Status::IN_PROGRESS {
                false
            } else {
                w.free(req);
                true
            }
        };
        for _ in 0..rounds {
            if done(self) {
                return true;
            }
            self.progress();
        }
        // SAFETY: req is a live request of this worker; cancelling makes
        // UCX complete it (with UCS_ERR_CANCELED) on a later progress.
        unsafe { sys::ucp_request_cancel(self.worker, req) };
        for _ in 0..rounds {
            if done(self) {
                return true;
            }
            self.progress();
        }
        self.free(req);
        false
    }
}

/// Raises UCX's asynchronous event table (`ASYNC_MAX_EVENTS`, one event
/// per watched socket, 1,024 by default) to `want`, and at least to the
/// open-file limit (and 256 more for UCX's timers), unless the
/// environment sets it (`UCX_ASYNC_MAX_EVENTS` wins). Every socket UCX
/// accepts takes an event before anyone can refuse it, so a table smaller
/// than the sockets a peer can open is a crash waiting: past it, UCX
/// 1.13.1's listener frees a connection it keeps on its list, and the
/// list's next use corrupts memory (sockets closed twice, then an abort).
/// UCX reads the global option when it adds a handler and sizes each
/// worker's queue of missed events by it when the worker is made, so it is
/// set here, before the worker, through `ucs_global_opts_set_value` (8
/// bytes of queue per event and worker). Never lowers it.
fn raise_async_events(want: usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SET: AtomicUsize = AtomicUsize::new(1024);
    if std::env::var_os("UCX_ASYNC_MAX_EVENTS").is_some() {
        return;
    }
    let want = want.max(open_files_limit().saturating_add(256));
    if SET.fetch_max(want, Ordering::SeqCst) >= want {
        return;
    }
    let Ok(value) = CString::new(want.to_string()) else {
        return;
    };
    // SAFETY: both strings are NUL-terminated and outlive the call; the
    // option is a plain unsigned that UCX reads when it adds a handler.
    let status =
        unsafe { sys::ucs_global_opts_set_value(c"ASYNC_MAX_EVENTS".as_ptr(), value.as_ptr()) };
    let _ = Status(status).check();
}

/// The most events UCX's table is sized for, whatever the open-file limit
/// (8 MiB of queue per worker).
const MAX_ASYNC_EVENTS: usize = 1 << 20;

/// The process's open-file limit (its soft limit), at most
/// [`MAX_ASYNC_EVENTS`] less UCX's timers; 1,024 if it cannot be read.
fn open_files_limit() -> usize {
    // SAFETY: all-zero is a valid rlimit to fill.
    let mut lim: libc::rlimit = unsafe { core::mem::zeroed() };
    // SAFETY: lim is a live out-struct for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    usize::try_from(lim.rlim_cur)
        .unwrap_or(usize::MAX)
        .min(MAX_ASYNC_EVENTS - 256)
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: the transport closed every endpoint and listener and
        // completed every request before dropping its worker (see
        // UcxTransport's Drop); the worker then the context are released
        // once, in that order.
        unsafe {
            sys::ucp_worker_destroy(self.worker);
            sys::ucp_cleanup(self.context);
        }
    }
}
