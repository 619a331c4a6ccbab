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

use ucx1_sys as sys;

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
pub(crate) unsafe extern "C" fn on_stream_recv(
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
    /// A context with tag matching and streams (and wakeup in blocking
    /// mode), configured from the `UCX_*` environment as usual, and a
    /// single-threaded worker.
    ///
    /// `settings` are context variables (without the `UCX_` prefix),
    /// applied with `ucp_config_modify` unless the environment sets them.
    pub(crate) fn new(
        mode: WaitMode,
        settings: &[(&str, &str)],
        async_events: usize,
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
        let mut features = u64::from(sys::UCP_FEATURE_TAG) | u64::from(sys::UCP_FEATURE_STREAM);
        if mode == WaitMode::Blocking {
            features |= u64::from(sys::UCP_FEATURE_WAKEUP);
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
        wparams.thread_mode = sys::UCS_THREAD_MODE_SINGLE;
        let mut worker: sys::ucp_worker_h = ptr::null_mut();
        // SAFETY: context is live; worker is an out-pointer to a local.
        let status = Status(unsafe { sys::ucp_worker_create(context, &wparams, &mut worker) });
        if let Err(e) = status.check() {
            // SAFETY: context was initialised above and has no workers.
            unsafe { sys::ucp_cleanup(context) };
            return Err(e);
        }
        Ok(Worker {
            context,
            worker,
            shared: Box::new(Shared::default()),
            mode,
        })
    }

    /// The shared state's address, for UCX's `arg` and `user_data`.
    pub(crate) fn shared_ptr(&self) -> *const SharedCell {
        &*self.shared
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

    /// Frees a completed request.
    pub(crate) fn free(&self, request: *mut c_void) {
        // SAFETY: `request` came from an *_nbx call of this worker and is
        // complete (its callback ran or its status is no longer
        // in-progress); it is freed once.
        unsafe { sys::ucp_request_free(request) };
    }

    /// Waits (progressing) until `request` is complete, then frees it;
    /// after `rounds` progress rounds it cancels it and waits as long
    /// again. Returns `false` if it is still in progress then: the caller
    /// must leave the request and its buffer alone for good (leak them)
    /// rather than free what UCX may still touch.
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
        false
    }
}

/// Raises UCX's asynchronous event table (`ASYNC_MAX_EVENTS`, one event
/// per watched socket, 1,024 by default) to `want`, unless the
/// environment sets it (`UCX_ASYNC_MAX_EVENTS` wins): UCX reads the
/// global option when a handler is added, so it is set through
/// `ucs_global_opts_set_value`, not the environment. Never lowers it.
fn raise_async_events(want: usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SET: AtomicUsize = AtomicUsize::new(1024);
    if std::env::var_os("UCX_ASYNC_MAX_EVENTS").is_some() {
        return;
    }
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
