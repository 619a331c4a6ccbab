//! The core's `Transport` over UCX tag matching, in both roles.
//!
//! # Connections and tags
//!
//! A connection is a UCP endpoint, made from a socket address (client) or
//! a connection request (server), with `UCP_ERR_HANDLING_MODE_PEER` and an
//! error handler that turns into `Disconnected(PeerFailed)`.
//!
//! Each end of a connection picks a 32-bit *key*, unique on its worker,
//! and sends it to the other end over the endpoint's stream (per endpoint,
//! so it cannot be taken for another connection's, unlike a tagged
//! message). The connection is up once both keys went: the client then
//! reports `Connected`, the server `Accepted`. No frame travels before
//! that, so none can arrive for a connection the receiver does not know.
//!
//! Frames are tagged messages whose tag is the *receiver's* key in the
//! upper 32 bits and the message kind in the lower 32 bits:
//!
//! ```text
//!   63            32 31             0
//!  +----------------+----------------+
//!  |  receiver key  |      kind      |   kind 0: one frame
//!  +----------------+----------------+   kind 1: a heartbeat (empty)
//!                                        kind 2: a batch of frames
//! ```
//!
//! A batch carries several frames of one connection in one message, each
//! after its length (`u32`, little-endian): frames of up to
//! [`COALESCE_MAX_FRAME`] bytes that the driver emits between two polls go
//! out together (`UcxConfig::coalesce`), larger ones alone. A length that
//! runs past the message's end makes the rest one frame, which the
//! driver then rejects as malformed.
//!
//! The receiver probes any tag, sizes its buffer from the probe, receives
//! the message, and finds the connection from the key. A message whose
//! key names no open connection (a closed one's late frame) is received
//! and dropped. Keys are not reused while the worker lives.
//!
//! # Liveness
//!
//! A peer that vanishes without its socket being reset (a link cut for
//! good, a host lost) is not reported by UCX in bounded time: with bytes
//! unacknowledged on the tcp socket, TCP's retransmission timeout decides
//! (many minutes), and keepalive does not run. So each end sends an empty
//! heartbeat message on a connection that sent nothing for
//! [`Liveness::interval`], and a connection from which nothing at all (a
//! frame or a heartbeat) arrived for [`Liveness::timeout`] is closed and
//! reported as `Disconnected(PeerSilent)`. Both ends must have it on.
//!
//! # Buffers and requests
//!
//! A transmit buffer is lent from a pool; the frame is emitted into it and
//! `ucp_tag_send_nbx` sends from it: the buffer stays with its request
//! until UCX's completion callback, then returns to the pool. A received
//! frame is lent where it was received. A request is never freed while
//! UCX may touch its buffer: a closing transport cancels what is pending
//! and waits for each completion first.

use core::ffi::c_void;
use core::mem;
use core::ptr;
use core::time::Duration;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Instant as Clock;

use iomsg_core::transport::{
    Capabilities, ConnId, Connector, DisconnectReason, Event, Listener, Readiness, RxToken,
    SendError, Transport, TxToken,
};
use iomsg_core::wire::MAX_FRAME_LEN;
use iomsg_core::Instant;
use ucx1_sys as sys;

use crate::sockaddr::SockAddr;
use crate::status::{Pending, Status};
use crate::worker::{self, ErrArg, ReqArg, WaitMode, Worker};

mod config;
mod handshake;
mod liveness;
mod rx;
mod tx;

pub use config::{Liveness, UcxConfig};
pub use rx::UcxRx;
pub use tx::UcxTx;

/// Transmit buffers in flight at most: past it `transmit` is backpressure.
const MAX_IN_FLIGHT: usize = 1024;

/// The longest worker address a peer may announce.
const MAX_WORKER_ADDRESS: u64 = 64 * 1024;

/// The tag's lower half: what a tagged message is.
const KIND_MASK: u64 = 0xffff_ffff;
const KIND_FRAME: u64 = 0;
const KIND_HEARTBEAT: u64 = 1;
const KIND_BATCH: u64 = 2;

/// A batch is sent once it would grow past this.
const BATCH_CAP: usize = 32 * 1024;
/// Connections whose received frames [`UcxTransport::next_frame`] passes
/// over at most in one search, because a frame of theirs ahead in the
/// queue is still being received: past that it waits.
const HELD_KEYS: usize = 16;

/// Frames up to this size are coalesced into batches; larger ones go alone
/// (sent from the buffer they were emitted into).
pub const COALESCE_MAX_FRAME: usize = 8 * 1024 + 64;

/// A connection's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Keys being exchanged: whether ours went and theirs came.
    Opening {
        sent: bool,
        got: bool,
    },
    /// Worker addresses being exchanged (`shared_memory`): whether ours
    /// went and the endpoint to theirs exists.
    Addressing {
        sent: bool,
        got: bool,
    },
    Up,
}

struct Conn {
    id: ConnId,
    ep: sys::ucp_ep_h,
    local_key: u32,
    remote_key: u32,
    state: State,
    /// The error handler's argument: lives until the endpoint is closed.
    err_arg: Box<ErrArg>,
    /// With `shared_memory`: the endpoint made from the peer's worker
    /// address, which carries the frames, and its handler's argument.
    data: Option<(sys::ucp_ep_h, Box<ErrArg>)>,
    /// When anything last arrived from the peer (or the connection began).
    heard: Clock,
    /// When anything last went to the peer.
    said: Clock,
    /// Frames waiting to go out together: each a `u32` length and bytes.
    batch: Vec<u8>,
}

impl Conn {
    /// The endpoint frames go on.
    fn frame_ep(&self) -> sys::ucp_ep_h {
        self.data.as_ref().map_or(self.ep, |d| d.0)
    }
}

/// An operation in flight and what it holds until its completion.
enum Op {
    Send {
        buf: Vec<u8>,
    },
    Recv {
        buf: Vec<u8>,
        key: u32,
        /// A heartbeat, not a frame: dropped once received.
        heartbeat: bool,
        /// A batch of length-prefixed frames.
        batch: bool,
        /// Where the next frame of a batch starts.
        offset: usize,
    },
    KeySend {
        conn: ConnId,
        buf: Box<[u8; 8]>,
    },
    KeyRecv {
        conn: ConnId,
        buf: Box<[u8; 8]>,
    },
    /// Our worker address: its length (8 bytes, LE), then its bytes.
    AddrSend {
        conn: ConnId,
        buf: Vec<u8>,
    },
    AddrLenRecv {
        conn: ConnId,
        buf: Box<[u8; 8]>,
    },
    AddrRecv {
        conn: ConnId,
        buf: Vec<u8>,
    },
    Close {
        _err_arg: Box<ErrArg>,
    },
}

struct Slot {
    op: Op,
    request: *mut c_void,
    status: Option<Status>,
}

/// Which end a transport is.
pub trait Role {
    /// The listener, for the server.
    #[doc(hidden)]
    fn listener(&self) -> Option<sys::ucp_listener_h>;
}

/// The client's end: connects to one server address.
pub struct Dial {
    server: SockAddr,
}

impl Role for Dial {
    fn listener(&self) -> Option<sys::ucp_listener_h> {
        None
    }
}

/// The server's end: a UCX listener on a socket address.
pub struct Accept {
    listener: sys::ucp_listener_h,
    addr: SocketAddr,
}

impl Role for Accept {
    fn listener(&self) -> Option<sys::ucp_listener_h> {
        Some(self.listener)
    }
}

/// Events without a frame, until the driver polls.
#[derive(Clone, Copy, Debug)]
enum Notice {
    Connected(ConnId),
    Accepted(ConnId),
    Disconnected(ConnId, DisconnectReason),
}

/// The core's `Transport` over a UCX worker; a [`Connector`] as a client
/// (`UcxTransport<Dial>`), a [`Listener`] as a server
/// (`UcxTransport<Accept>`).
pub struct UcxTransport<R: Role> {
    role: R,
    config: UcxConfig,
    conns: Vec<Option<Conn>>,
    generations: Vec<u32>,
    by_key: HashMap<u32, usize>,
    next_key: u32,
    slots: Vec<Option<Slot>>,
    free_slots: Vec<usize>,
    in_flight_sends: usize,
    /// Receives in probe order: delivered in that order once complete.
    rx: VecDeque<usize>,
    notices: VecDeque<Notice>,
    pool: Vec<Vec<u8>>,
    /// Frames dropped because their key named no open connection.
    stray_frames: u64,
    /// Connections whose batch holds frames.
    batched: Vec<ConnId>,
    /// The time as of the last progress call. Liveness runs on its own
    /// clock, not the driver's: a driver may pass one `now` to a long run
    /// of calls, which would make a busy peer look silent.
    now: Clock,
    /// When the connections' liveness is next looked at.
    next_beat: Clock,
    /// Declared after the state UCX refers to: dropped after it.
    worker: Worker,
    /// Each request slot's callback argument (`user_data`), by slot.
    /// Declared after the worker: a request the teardown had to leave to
    /// UCX may still call back while the worker is destroyed. Boxed: UCX
    /// holds their addresses, which a growing `Vec<ReqArg>` would move.
    #[allow(clippy::vec_box)]
    args: Vec<Box<ReqArg>>,
}

/// A UCX failure while building a transport.
#[derive(Debug)]
pub struct UcxError {
    /// What was being done.
    pub what: &'static str,
    /// UCX's status.
    pub status: Status,
}

impl core::fmt::Display for UcxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.what, self.status)
    }
}

impl std::error::Error for UcxError {}

/// The variable that lets a restarted server listen on its port again at
/// once, and its value: UCX's tcp connection manager then binds with
/// `SO_REUSEADDR`. It is a transport variable that `ucp_config_modify`
/// does not reach (UCX 1.13.1 warns "invalid configuration" and the bind
/// fails with "Address already in use"), and this library never changes
/// the process environment: a server binary sets it first thing in
/// `main`, before any thread, unless the environment already has it.
///
/// ```
/// let (name, value) = iomsg_ucx::REUSE_ADDRESS;
/// if std::env::var_os(name).is_none() {
///     std::env::set_var(name, value);
/// }
/// ```
pub const REUSE_ADDRESS: (&str, &str) = ("UCX_TCP_CM_REUSEADDR", "y");

fn err(what: &'static str) -> impl FnOnce(Status) -> UcxError {
    move |status| UcxError { what, status }
}

impl UcxTransport<Dial> {
    /// A client transport whose connections go to `server`.
    ///
    /// # Errors
    ///
    /// The context or worker could not be created.
    pub fn client(server: SocketAddr, config: UcxConfig) -> Result<Self, UcxError> {
        let worker = new_worker(&config)?;
        Ok(UcxTransport::with(
            Dial {
                server: SockAddr::from(server),
            },
            config,
            worker,
        ))
    }
}

impl UcxTransport<Accept> {
    /// A server transport listening on `addr` (port 0: any free port; see
    /// [`local_addr`](Self::local_addr)).
    ///
    /// # Errors
    ///
    /// The context, worker or listener could not be created (a port in
    /// use: `UCS_ERR_BUSY`).
    pub fn server(addr: SocketAddr, config: UcxConfig) -> Result<Self, UcxError> {
        let worker = new_worker(&config)?;
        let sockaddr = SockAddr::from(addr);
        // SAFETY: all-zero is a valid "no fields" listener params value.
        let mut params: sys::ucp_listener_params_t = unsafe { mem::zeroed() };
        params.field_mask = u64::from(sys::UCP_LISTENER_PARAM_FIELD_SOCK_ADDR)
            | u64::from(sys::UCP_LISTENER_PARAM_FIELD_CONN_HANDLER);
        params.sockaddr = sockaddr.as_ucs();
        params.conn_handler.cb = Some(worker::on_conn_request);
        params.conn_handler.arg = worker.shared_ptr() as *mut c_void;
        let mut listener: sys::ucp_listener_h = ptr::null_mut();
        // SAFETY: the worker is live; params points to a socket address
        // that outlives the call; the handler's arg is the worker's shared
        // state, which outlives the listener (destroyed first in Drop).
        Status(unsafe { sys::ucp_listener_create(worker.worker, &params, &mut listener) })
            .check()
            .map_err(|status| {
                let reuse = std::env::var_os(REUSE_ADDRESS.0).is_some();
                err(if status.0 == sys::UCS_ERR_BUSY && !reuse {
                    "listening (a restarted server listens on its port again at once only \
                     with UCX_TCP_CM_REUSEADDR=y in its environment: see \
                     iomsg_ucx::REUSE_ADDRESS)"
                } else {
                    "listening"
                })(status)
            })?;
        let local = query_listener(listener).unwrap_or(addr);
        Ok(UcxTransport::with(
            Accept {
                listener,
                addr: local,
            },
            config,
            worker,
        ))
    }

    /// The address the listener listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.role.addr
    }
}

fn new_worker(config: &UcxConfig) -> Result<Worker, UcxError> {
    let settings: Vec<(&str, &str)> = config
        .settings
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    Worker::new(config.mode, &settings).map_err(err("creating the UCX context and worker"))
}

fn query_listener(listener: sys::ucp_listener_h) -> Option<SocketAddr> {
    // SAFETY: all-zero is a valid attribute struct to fill.
    let mut attr: sys::ucp_listener_attr_t = unsafe { mem::zeroed() };
    attr.field_mask = u64::from(sys::UCP_LISTENER_ATTR_FIELD_SOCKADDR);
    // SAFETY: listener is live; attr is a local out-struct.
    let status = Status(unsafe { sys::ucp_listener_query(listener, &mut attr) });
    status.check().ok()?;
    SockAddr::from_storage(&attr.sockaddr)
}

impl<R: Role> UcxTransport<R> {
    fn with(role: R, config: UcxConfig, worker: Worker) -> Self {
        UcxTransport {
            role,
            config,
            conns: Vec::new(),
            generations: Vec::new(),
            by_key: HashMap::new(),
            next_key: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            in_flight_sends: 0,
            rx: VecDeque::new(),
            notices: VecDeque::new(),
            pool: Vec::new(),
            stray_frames: 0,
            batched: Vec::new(),
            now: Clock::now(),
            next_beat: Clock::now(),
            worker,
            args: Vec::new(),
        }
    }

    /// Frames that arrived for no open connection (late frames of closed
    /// ones), received and dropped.
    pub fn stray_frames(&self) -> u64 {
        self.stray_frames
    }

    /// The worker's event fd, in blocking mode: readable when
    /// [`arm`](Transport::arm) said `Armed` and work has come.
    ///
    /// # Errors
    ///
    /// Busy-poll mode has none.
    pub fn event_fd(&self) -> Result<i32, Status> {
        self.worker.event_fd()
    }

    /// In blocking mode, after [`arm`](Transport::arm) said `Armed`:
    /// sleeps until the worker's event fd is readable or `timeout`
    /// passed. Returns whether it woke for work.
    ///
    /// # Errors
    ///
    /// Busy-poll mode (no event fd), or `poll(2)` failed other than by a
    /// signal.
    pub fn sleep(&self, timeout: Duration) -> Result<bool, Status> {
        sleep_any(&[self.event_fd()?], timeout)
    }

    /// A new connection slot for endpoint `ep`, with a fresh key.
    fn add_conn(
        &mut self,
        ep_for: impl FnOnce(&ErrArg) -> Result<sys::ucp_ep_h, Status>,
    ) -> Result<ConnId, Status> {
        self.next_key = self.next_key.wrapping_add(1).max(1);
        let key = self.next_key;
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
            state: State::Opening {
                sent: false,
                got: false,
            },
            err_arg,
            data: None,
            heard: Clock::now(),
            said: Clock::now(),
            batch: Vec::new(),
        });
        self.by_key.insert(key, slot);
        self.exchange_keys(id);
        Ok(id)
    }

    fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.conns
            .get(id.slot() as usize)?
            .as_ref()
            .filter(|c| c.id == id)
    }

    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.conns
            .get_mut(id.slot() as usize)?
            .as_mut()
            .filter(|c| c.id == id)
    }

    /// Starts an operation in a new slot. `call` gets the slot's buffer
    /// and the request parameters. Returns `Some(status)` when it
    /// completed (or failed) at once: the caller finishes the slot.
    fn start(
        &mut self,
        op: Op,
        call: impl FnOnce(*mut c_void, *const sys::ucp_request_param_t) -> sys::ucs_status_ptr_t,
    ) -> (Option<Status>, usize) {
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        // The callback's argument of each slot is made once and kept (it
        // never changes): no allocation per operation.
        while self.args.len() <= slot {
            self.args.push(Box::new(ReqArg {
                shared: self.worker.shared_ptr(),
                slot: self.args.len(),
            }));
        }
        let arg: *const ReqArg = &*self.args[slot];
        let mut op = op;
        let (buf, flags): (*mut c_void, u32) = match &mut op {
            Op::Send { buf } | Op::Recv { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::KeySend { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::AddrSend { buf, .. } => (buf.as_mut_ptr().cast(), 0),
            Op::KeyRecv { buf, .. } | Op::AddrLenRecv { buf, .. } => {
                (buf.as_mut_ptr().cast(), sys::UCP_STREAM_RECV_FLAG_WAITALL)
            }
            Op::AddrRecv { buf, .. } => {
                (buf.as_mut_ptr().cast(), sys::UCP_STREAM_RECV_FLAG_WAITALL)
            }
            Op::Close { .. } => (ptr::null_mut(), sys::UCP_EP_CLOSE_FLAG_FORCE),
        };
        // SAFETY: all-zero is a valid request-param value.
        let mut param: sys::ucp_request_param_t = unsafe { mem::zeroed() };
        param.op_attr_mask = sys::UCP_OP_ATTR_FIELD_CALLBACK
            | sys::UCP_OP_ATTR_FIELD_USER_DATA
            | sys::UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = flags;
        param.user_data = arg.cast_mut().cast();
        match &op {
            Op::Recv { .. } => param.cb.recv = Some(worker::on_tag_recv),
            Op::KeyRecv { .. } | Op::AddrLenRecv { .. } | Op::AddrRecv { .. } => {
                param.cb.recv_stream = Some(worker::on_stream_recv)
            }
            _ => param.cb.send = Some(worker::on_send),
        }
        let ptr = call(buf, &param);
        let (request, now) = match Pending::from_ptr(ptr) {
            Pending::Request(r) => (r, None),
            Pending::Done => (ptr::null_mut(), Some(Status::OK)),
            Pending::Failed(s) => (ptr::null_mut(), Some(s)),
        };
        self.slots[slot] = Some(Slot {
            op,
            request,
            status: None,
        });
        (now, slot)
    }

    /// An operation completed with `status`: acts on it and frees its
    /// slot (a received frame's slot stays until the driver takes it).
    fn finish(&mut self, slot: usize, status: Status, length: usize) {
        let Some(s) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        s.status = Some(status);
        if !s.request.is_null() {
            self.worker.free(s.request);
            s.request = ptr::null_mut();
        }
        if matches!(s.op, Op::Recv { .. }) {
            // Handed to the driver in order by `poll`.
            return;
        }
        let Some(s) = self.slots[slot].take() else {
            return;
        };
        self.free_slots.push(slot);
        match s.op {
            Op::Send { buf } => {
                self.in_flight_sends -= 1;
                self.recycle(buf);
            }
            Op::KeySend { conn, .. } => self.key_step(conn, status, true, 0),
            Op::KeyRecv { conn, buf } => {
                let key = if length == 8 {
                    u64::from_le_bytes(*buf) as u32
                } else {
                    0
                };
                self.key_step(conn, status, false, key);
            }
            Op::AddrSend { conn, .. } => self.addr_step(conn, status, true),
            Op::AddrLenRecv { conn, buf } => {
                let len = u64::from_le_bytes(*buf);
                if !status.is_ok() || length != 8 || len == 0 || len > MAX_WORKER_ADDRESS {
                    self.fail(
                        conn,
                        DisconnectReason::ConnectFailed(iomsg_core::transport::Cause::UNKNOWN),
                    );
                } else {
                    self.recv_address(conn, len as usize);
                }
            }
            Op::AddrRecv { conn, buf } => {
                if status.is_ok() && length == buf.len() {
                    self.connect_data(conn, &buf);
                } else {
                    self.fail(
                        conn,
                        DisconnectReason::ConnectFailed(iomsg_core::transport::Cause::UNKNOWN),
                    );
                }
            }
            Op::Recv { .. } | Op::Close { .. } => {}
        }
    }

    /// The connection failed: close its endpoint and tell the driver.
    fn fail(&mut self, id: ConnId, reason: DisconnectReason) {
        if self.conn(id).is_none() {
            return;
        }
        self.release(id);
        self.notices.push_back(Notice::Disconnected(id, reason));
    }

    /// Closes the endpoint of `id` (force) and forgets the connection.
    fn release(&mut self, id: ConnId) {
        let Some(c) = self
            .conns
            .get_mut(id.slot() as usize)
            .and_then(Option::take)
        else {
            return;
        };
        self.by_key.remove(&c.local_key);
        if let Some((ep, err_arg)) = c.data {
            let (done, slot) = self.start(Op::Close { _err_arg: err_arg }, |_, param| {
                // SAFETY: the data endpoint is live and closed once.
                unsafe { sys::ucp_ep_close_nbx(ep, param) }
            });
            if let Some(status) = done {
                self.finish(slot, status, 0);
            }
        }
        let ep = c.ep;
        // The error handler's argument lives until the close completes.
        let (done, slot) = self.start(
            Op::Close {
                _err_arg: c.err_arg,
            },
            |_, param| {
                // SAFETY: ep is live and closed once; FORCE releases it
                // without waiting for the peer; its pending sends complete
                // with errors through their callbacks.
                unsafe { sys::ucp_ep_close_nbx(ep, param) }
            },
        );
        if let Some(status) = done {
            self.finish(slot, status, 0);
        }
    }

    fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.pool.len() < 256 {
            buf.clear();
            self.pool.push(buf);
        }
    }

    fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        b.resize(len, 0);
        b
    }

    /// Progresses the worker and takes what the callbacks recorded.
    fn drive(&mut self) {
        self.worker.progress();
        self.now = Clock::now();
        self.accept_requests();
        let (failed, done) = {
            let mut shared = self.worker.shared.borrow_mut();
            (mem::take(&mut shared.failed), mem::take(&mut shared.done))
        };
        for (slot, status, length) in done {
            self.finish(slot, status, length);
        }
        for (key, _status) in failed {
            if let Some(&slot) = self.by_key.get(&key) {
                if let Some(id) = self.conns[slot].as_ref().map(|c| c.id) {
                    self.fail(
                        id,
                        DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN),
                    );
                }
            }
        }
        self.probe();
    }

    /// Server: endpoints for the connection requests the listener got.
    fn accept_requests(&mut self) {
        loop {
            let req = self.worker.shared.borrow_mut().conn_requests.pop_front();
            let Some(req) = req else { return };
            let worker = self.worker.worker;
            let made = self.add_conn(|err_arg| {
                let mut params = peer_mode(err_arg);
                params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_CONN_REQUEST);
                params.conn_request = req;
                let mut ep: sys::ucp_ep_h = ptr::null_mut();
                // SAFETY: worker is live; req came from its listener and is
                // consumed here once; err_arg is boxed in the connection
                // and outlives the endpoint.
                Status(unsafe { sys::ucp_ep_create(worker, &params, &mut ep) }).check()?;
                Ok(ep)
            });
            if made.is_err() {
                // SAFETY: the request was not consumed by ucp_ep_create
                // (it failed); rejecting releases it.
                unsafe {
                    sys::ucp_listener_reject(self.role.listener().unwrap_or(ptr::null_mut()), req)
                };
            }
        }
    }
}

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
        if self.in_flight_sends >= MAX_IN_FLIGHT {
            self.drive();
            if self.in_flight_sends >= MAX_IN_FLIGHT {
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
        // What the driver emitted before closing (a `Bye`) goes first.
        self.flush_batch(conn);
        self.batched.retain(|&c| c != conn);
        self.notices.retain(|n| match *n {
            Notice::Connected(c) | Notice::Accepted(c) | Notice::Disconnected(c, _) => c != conn,
        });
        self.release(conn);
    }

    fn arm(&mut self) -> Readiness {
        self.flush_batches();
        if self.worker.mode != WaitMode::Blocking {
            return Readiness::Unsupported;
        }
        // Sends in flight need progress calls to complete (UCX's tcp
        // transport does not wake the event fd for them).
        if !self.notices.is_empty() || self.rx.front().is_some() || self.in_flight_sends > 0 {
            return Readiness::Pending;
        }
        match self.worker.arm() {
            Ok(true) => Readiness::Armed,
            _ => Readiness::Pending,
        }
    }
}

/// Sleeps until one of `fds` (transports' [`event_fd`](UcxTransport::event_fd)s,
/// each armed) is readable or `timeout` passed: one thread waiting on
/// several transports. Returns whether it woke for work.
///
/// # Errors
///
/// `poll(2)` failed other than by a signal.
pub fn sleep_any(fds: &[i32], timeout: Duration) -> Result<bool, Status> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis().max(1)).unwrap_or(i32::MAX);
    let n = pfds.len() as libc::nfds_t;
    // SAFETY: pfds is a live array of `n` pollfds for the call's duration.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), n, ms) };
    if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
        return Err(Status(sys::UCS_ERR_IO_ERROR));
    }
    Ok(r > 0)
}

/// Endpoint parameters in peer error mode, whose failures reach
/// `on_ep_error` with `err_arg` (which must outlive the endpoint).
fn peer_mode(err_arg: &ErrArg) -> sys::ucp_ep_params_t {
    // SAFETY: all-zero is a valid endpoint-params value.
    let mut params: sys::ucp_ep_params_t = unsafe { mem::zeroed() };
    params.field_mask = u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE)
        | u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLER);
    params.err_mode = sys::UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = Some(worker::on_ep_error);
    params.err_handler.arg = (err_arg as *const ErrArg).cast_mut().cast();
    params
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
        self.add_conn(|err_arg| {
            let mut params = peer_mode(err_arg);
            params.field_mask |= u64::from(sys::UCP_EP_PARAM_FIELD_FLAGS)
                | u64::from(sys::UCP_EP_PARAM_FIELD_SOCK_ADDR);
            params.flags = sys::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
            params.sockaddr = addr;
            let mut ep: sys::ucp_ep_h = ptr::null_mut();
            // SAFETY: worker is live; the socket address lives in
            // self.role for the transport's lifetime; err_arg is boxed in
            // the connection and outlives the endpoint.
            Status(unsafe { sys::ucp_ep_create(worker, &params, &mut ep) }).check()?;
            Ok(ep)
        })
        .map_err(|_| DisconnectReason::ConnectFailed(iomsg_core::transport::Cause::UNKNOWN))
    }
}

impl Listener for UcxTransport<Accept> {}

impl<R: Role> Drop for UcxTransport<R> {
    fn drop(&mut self) {
        let ids: Vec<ConnId> = self.conns.iter().flatten().map(|c| c.id).collect();
        for id in ids {
            self.release(id);
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
            if self.worker.wait(Pending::Request(req), 10_000) {
                if let Some(s) = self.slots[i].as_mut() {
                    s.request = ptr::null_mut();
                }
            } else if let Some(s) = self.slots[i].take() {
                // UCX would not let it go: its buffer must outlive the
                // worker, so it is never freed (leaked on purpose).
                mem::forget(s);
            }
        }
        if let Some(listener) = self.role.listener() {
            // SAFETY: the listener is live and destroyed once, before the
            // worker.
            unsafe { sys::ucp_listener_destroy(listener) };
        }
        self.slots.clear();
    }
}
