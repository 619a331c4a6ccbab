//! The core's `Transport` over UCX tag matching, in both roles.
//!
//! # Connections and tags
//!
//! A connection is a UCP endpoint, made from a socket address (client) or
//! a connection request (server), with `UCP_ERR_HANDLING_MODE_PEER` and an
//! error handler that turns into `Disconnected(PeerFailed)`.
//!
//! Each end of a connection picks a 56-bit *key*, drawn from the
//! operating system's random source (`getrandom(2)`), non-zero and unique
//! on its worker, and sends it to the other end over the endpoint's
//! stream (per endpoint, so it cannot be taken for another connection's,
//! unlike a tagged message) as 8 bytes, little-endian. The connection is
//! up once both keys went: the client then reports `Connected`, the
//! server `Accepted`. A key cannot be guessed: a frame whose key names no
//! connection is a stray, dropped and counted
//! ([`stray_frames`](UcxTransport::stray_frames)), and never closes or
//! blames any connection.
//!
//! A server whose table is full ([`UcxConfig::max_connections`]) accepts
//! the endpoint, sends [`FULL_MARK`]` | max_connections` instead of a key
//! (its top byte is `0xff`, which no key has) and closes it once that is
//! out: the client's connect fails with `TableFull { size: N }`. A key
//! also says its end's API ([`AM_MARK`] in the top byte: active
//! messages; none: tag matching). Ends on different APIs refuse each
//! other: each reports `Refused` naming the API mismatch, and lingers
//! until its own key is out, so that the other end learns why too
//! (rather than a reset, which a client would retry). Any other value
//! with a non-zero top byte, a zero, or fewer than 8 bytes is a bad key
//! exchange: logged with the peer's address and closed.
//!
//! Frames are tagged messages whose tag is the *receiver's* key in the
//! upper 56 bits and the message kind in the lower 8 bits:
//!
//! ```text
//!   63                          8 7      0
//!  +-----------------------------+--------+
//!  |        receiver key         |  kind  |   kind 0: one frame
//!  +-----------------------------+--------+   kind 1: a heartbeat (empty)
//!                                             kind 2: a batch of frames
//! ```
//!
//! A batch carries several frames of one connection in one message, each
//! after its length (`u32`, little-endian): frames of up to
//! [`COALESCE_MAX_FRAME`] bytes that the driver emits between two polls go
//! out together (`UcxConfig::coalesce`), larger ones alone. A length that
//! runs past the message's end makes the rest one frame, which the
//! driver then rejects as malformed.
//!
//! The receiver probes any tag, finds the connection from the key, and
//! receives the message into a buffer sized from the probe but never
//! larger than the kind allows (`max_frame` for a frame, the batch cap
//! for a batch, nothing for a heartbeat). A larger message is received
//! into nothing (UCX discards it) and closes its connection as the peer's
//! fault; one whose key names no open connection (a closed one's late
//! frame, a guess) is discarded the same way and counted as a stray.
//! Received messages wait in their own connection's queue: one connection
//! whose message is still arriving, or which is still opening, holds back
//! only its own frames. A closing connection cancels its receives and
//! releases their buffers.
//!
//! After the handshake a connection keeps a receive posted on its
//! endpoint's stream: stream bytes from the peer after the key exchange
//! close the connection (UCX would buffer them without bound).
//!
//! # Closing
//!
//! A frame written before a close reaches the peer before the close does.
//! A connection the driver closes lingers: its frame endpoint is flushed
//! (over tcp, until the peer's UCX has every byte), then closed, at most
//! [`LINGER`] after the close. An open connection whose endpoint fails
//! hands over the frames that arrived before it, then reports
//! `Disconnected`. (The `close` module says why UCX needs both.)
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
//! and waits for each completion first. One kind of receive UCX 1.13.1
//! cannot cancel: a message partly received when its connection ended.
//! Its buffer stays allocated (UCX holds its address) but its pages are
//! given back to the system ([`UcxTransport::orphaned`]).

use core::cell::Cell;
use core::ffi::c_void;
use core::mem;
use core::ptr;
use core::time::Duration;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::Range;

use iomsg_core::transport::{
    Capabilities, Cause, ConnId, Connector, DisconnectReason, Event, Listener, Readiness, RxToken,
    SendError, Transport, TxToken,
};
use iomsg_core::wire::MAX_FRAME_LEN;
use iomsg_core::Instant;
use iomsg_ucx_sys as sys;

use crate::sockaddr::SockAddr;
use crate::status::{Pending, Status};
use crate::worker::{self, AmData, ErrArg, ReqArg, WaitMode, Worker, AM_ID};

mod clock;
mod close;
mod config;
mod conns;
mod counters;
mod driven;
mod handshake;
mod liveness;
mod progress;
mod requests;
mod rx;
mod tx;
mod wait;
mod wire;

use clock::Clock;
use close::Ends;
pub use config::{raise_open_files, Api, Liveness, UcxConfig, ASYNC_MAX_EVENTS};
pub(crate) use conns::query_conn_request;
pub use rx::UcxRx;
pub use tx::UcxTx;
pub use wait::sleep_any;
pub(crate) use wire::*;
pub use wire::{AM_MARK, FULL_MARK};

/// Transmit buffers in flight at most over all connections (a memory
/// bound; each connection has its own, smaller caps in [`UcxConfig`]).
const MAX_IN_FLIGHT: usize = 16 * 1024;

/// Refused connections whose endpoints are still closing at most: past it
/// a connection request is rejected at the listener, without a reason.
pub(crate) const MAX_REFUSING: usize = 256;

/// How long a connection the driver closed may take to flush what was
/// sent on it (until the peer's UCX has all of it) before its endpoint is
/// closed anyway: a peer that does not read, or is gone, holds an
/// endpoint no longer than this. (The stream backend lingers as long.)
pub const LINGER: Duration = Duration::from_secs(1);

/// Endpoints flushing before their close ([`LINGER`]) at most: past it a
/// closed connection's endpoint is closed at once.
pub(crate) const MAX_LINGERING: usize = 256;

/// The largest buffer the pool keeps, and how many it keeps.
const POOL_BUF_CAP: usize = 64 * 1024;
const POOL_LEN: usize = 256;
/// Buffers larger than that (up to `max_frame`) the pool keeps too, so
/// that a stream of large frames allocates nothing per frame either.
const POOL_LARGE_LEN: usize = 8;

/// The longest worker address a peer may announce.
const MAX_WORKER_ADDRESS: u64 = 64 * 1024;

/// A batch is sent once it would grow past this (on the tag API; the most
/// any receiver takes).
const BATCH_CAP: usize = 32 * 1024;

/// On the active-message API over shared memory, a batch is sent once it
/// would grow past this: UCX then sends it as one fragment (its segments
/// are 8 KiB, less its headers), which the receiver's callback gets in
/// UCX's own receive buffer. A larger one is assembled by UCX from
/// fragments into a buffer it allocates, a copy more. Over tcp the larger
/// batches win all the same (fewer messages, fewer system calls:
/// `ci/bench-compare`, 4 KiB frames), so they keep [`BATCH_CAP`].
const AM_BATCH_CAP: usize = 8 * 1024 - 128;

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
    /// The endpoint failed (UCX's error handler ran): the frames that
    /// arrived before are still handed over, then `Disconnected` with the
    /// reason (see [`UcxTransport::end`]).
    Ended(DisconnectReason),
}

impl State {
    /// Whether its received frames are handed to the driver.
    fn hands_over(self) -> bool {
        matches!(self, State::Up | State::Ended(_))
    }
}

struct Conn {
    id: ConnId,
    ep: sys::ucp_ep_h,
    local_key: u64,
    remote_key: u64,
    /// The peer's address, when known.
    peer: Option<SocketAddr>,
    /// Its received messages, in order: their slots.
    rx: VecDeque<usize>,
    /// Bytes of the buffers in `rx`.
    rx_bytes: usize,
    /// Whether it is in the transport's `ready` queue.
    in_ready: bool,
    /// Its sends in flight and their bytes.
    sends: usize,
    send_bytes: usize,
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
    /// The bytes of `batch` in use: it keeps its length from earlier
    /// batches (initialised bytes that the next frames overwrite), so that
    /// a frame is emitted into it without zeroing its room first.
    batch_len: usize,
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
        conn: ConnId,
        len: usize,
        /// An active message's send flags (`UCP_AM_SEND_FLAG_*`).
        am_flags: u32,
    },
    Recv {
        buf: Vec<u8>,
        /// The connection whose frames these are; `None`: discarded once
        /// received (a heartbeat, a stray, an oversized message, a closed
        /// connection's).
        conn: Option<ConnId>,
        /// Counted as a stray once received.
        stray: bool,
        /// A batch of length-prefixed frames.
        batch: bool,
        /// Where the next frame of a batch starts.
        offset: usize,
        /// An active message kept where UCX received it (`buf` is then
        /// empty): its bytes, until `ucp_am_data_release`.
        held: Option<(*mut c_void, usize)>,
    },
    /// The receive kept posted on an Up connection's stream.
    StreamDrain {
        conn: ConnId,
        buf: Box<[u8; 64]>,
    },
    /// A refused connection's "table full" message; then its endpoint
    /// closes.
    Refuse {
        ep: sys::ucp_ep_h,
        err_arg: Box<ErrArg>,
        buf: Box<[u8; 8]>,
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
    /// A closed connection's frame endpoint flushing: once what was sent
    /// on it is out (or at the [`LINGER`] deadline, when `ends` are taken
    /// out and closed), its endpoints close.
    Flush {
        ends: Option<Ends>,
        /// A refused connection's ("table full").
        refused: bool,
    },
    Close {
        _err_arg: Box<ErrArg>,
        /// Release at once (`UCP_EP_CLOSE_FLAG_FORCE`); else flush first
        /// (an endpoint without peer-failure mode, which UCX does not
        /// force-close).
        force: bool,
        /// A refused connection's endpoint.
        refused: bool,
    },
}

struct Slot {
    op: Op,
    request: *mut c_void,
    status: Option<Status>,
}

/// What a held active message is counted as against the receive bounds
/// at least: UCX keeps it in a receive descriptor of about its segment
/// size (8 KiB by default), whatever the message's length.
pub(crate) const HELD_MIN: usize = 8 * 1024 + 256;

impl Op {
    /// A receive's bytes: what was received into its buffer, or the held
    /// active message's.
    fn received(&self) -> &[u8] {
        match self {
            Op::Recv {
                held: Some((data, len)),
                ..
            } if !data.is_null() && *len > 0 => {
                // SAFETY: UCX keeps a held message's `len` bytes at `data`
                // readable until `ucp_am_data_release`, which only
                // `drop_frame` calls, after taking this op out of its slot.
                unsafe { core::slice::from_raw_parts(data.cast::<u8>(), *len) }
            }
            Op::Recv { buf, .. } => buf,
            _ => &[],
        }
    }

    /// What a receive counts against the receive bounds.
    fn charge(&self) -> usize {
        match self {
            Op::Recv {
                held: Some((_, len)),
                ..
            } => (*len).max(HELD_MIN),
            Op::Recv { buf, .. } => buf.len(),
            _ => 0,
        }
    }
}

/// Which end a transport is: [`Dial`] or [`Accept`] (sealed: no others).
pub trait Role: sealed::Role {}

mod sealed {
    use super::sys;

    /// What the transport asks of its role; private, so that no UCX type
    /// is part of the crate's API.
    pub trait Role {
        /// The listener, for the server.
        fn listener(&self) -> Option<sys::ucp_listener_h>;
    }
}

impl Role for Dial {}
impl Role for Accept {}

/// The client's end: connects to one server address.
pub struct Dial {
    server: SockAddr,
    addr: SocketAddr,
}

impl sealed::Role for Dial {
    fn listener(&self) -> Option<sys::ucp_listener_h> {
        None
    }
}

/// The server's end: a UCX listener on a socket address.
pub struct Accept {
    listener: sys::ucp_listener_h,
    addr: SocketAddr,
}

impl sealed::Role for Accept {
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
///
/// `Send` (it may be built on one thread and driven on another: the
/// worker runs in UCX's serialized thread mode) and not `Sync`: one thread
/// at a time drives it.
pub struct UcxTransport<R: Role> {
    role: R,
    config: UcxConfig,
    conns: Vec<Option<Conn>>,
    generations: Vec<u32>,
    by_key: HashMap<u64, usize>,
    slots: Vec<Option<Slot>>,
    free_slots: Vec<usize>,
    in_flight_sends: usize,
    in_flight_bytes: usize,
    /// Connections whose first received message may be complete, in turn.
    ready: VecDeque<ConnId>,
    notices: VecDeque<Notice>,
    pool: Vec<Vec<u8>>,
    /// The pool's buffers larger than `POOL_BUF_CAP`.
    pool_large: Vec<Vec<u8>>,
    /// Frames dropped because their key named no open connection.
    stray_frames: u64,
    /// Connections refused (table full), and those still closing.
    refused: u64,
    refusing: usize,
    /// Callback events taken from the worker.
    taken: u64,
    /// Receives of closed connections still in progress (a message cut
    /// mid-way, which UCX cannot cancel), and the bytes of their buffers
    /// given back to the system.
    orphans: Vec<(usize, usize)>,
    /// Bytes of received messages queued over all connections (the sum of
    /// their `rx_bytes`): held under `UcxConfig::recv_bytes`.
    rx_held: usize,
    /// Connections closed because the transport's receive memory was full.
    rx_evicted: u64,
    /// Rendezvous active messages declined (their connections closed).
    rndv_refused: u64,
    /// The callbacks' queues of completions and arrivals, swapped with
    /// theirs when taken (kept empty, with their capacity).
    spare_done: Vec<(usize, Status, usize)>,
    spare_arrivals: Vec<worker::Arrival>,
    /// Connections whose batch holds frames.
    batched: Vec<ConnId>,
    /// Flushes of closed connections' endpoints ([`Op::Flush`]) not past
    /// their deadline yet: their slots and deadlines.
    flushing: Vec<(usize, Clock)>,
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

// SAFETY: what keeps UcxTransport from being Send is its raw UCX handles
// (context, worker, endpoints, listener, requests) and the callbacks'
// state those handles point to. The worker is created in
// UCS_THREAD_MODE_SERIALIZED ("multiple threads can access, but only one
// at a time"), and every call into UCX goes through `&mut self` or
// `&self` of this one owner, so moving the owner moves every user of the
// handles with it; UCX runs the callbacks (completions, arrivals,
// connection requests, endpoint errors) only inside the progress and
// close calls this owner makes, on the calling thread. It is not Sync:
// `&self` methods call UCX too (`event_fd`, `sleep`).
unsafe impl<R: Role> Send for UcxTransport<R> {}

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
                addr: server,
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
    Worker::new(
        config.mode,
        &settings,
        config.async_max_events(),
        config.api == Api::Am,
    )
    .map_err(err("creating the UCX context and worker"))
}

pub(crate) fn query_listener(listener: sys::ucp_listener_h) -> Option<SocketAddr> {
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
            slots: Vec::new(),
            free_slots: Vec::new(),
            in_flight_sends: 0,
            in_flight_bytes: 0,
            ready: VecDeque::new(),
            notices: VecDeque::new(),
            pool: Vec::new(),
            pool_large: Vec::new(),
            stray_frames: 0,
            refused: 0,
            refusing: 0,
            taken: 0,
            orphans: Vec::new(),
            rx_held: 0,
            rx_evicted: 0,
            rndv_refused: 0,
            spare_done: Vec::new(),
            spare_arrivals: Vec::new(),
            batched: Vec::new(),
            flushing: Vec::new(),
            now: Clock::now(),
            next_beat: Clock::now(),
            worker,
            args: Vec::new(),
        }
    }
}

/// Endpoint parameters in peer error mode, whose failures reach
/// `on_ep_error` with `err_arg` (which must outlive the endpoint).
pub(crate) fn peer_mode(err_arg: &ErrArg) -> sys::ucp_ep_params_t {
    // SAFETY: all-zero is a valid endpoint-params value.
    let mut params: sys::ucp_ep_params_t = unsafe { mem::zeroed() };
    params.field_mask = u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE)
        | u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLER);
    params.err_mode = sys::UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = Some(worker::on_ep_error);
    params.err_handler.arg = (err_arg as *const ErrArg).cast_mut().cast();
    params
}

/// [`peer_mode`] endpoint parameters for a client-server connection to
/// `addr` (its storage must outlive the `ucp_ep_create` call).
pub(crate) fn dial_mode(err_arg: &ErrArg, addr: sys::ucs_sock_addr_t) -> sys::ucp_ep_params_t {
    let mut params = peer_mode(err_arg);
    params.field_mask |=
        u64::from(sys::UCP_EP_PARAM_FIELD_FLAGS) | u64::from(sys::UCP_EP_PARAM_FIELD_SOCK_ADDR);
    params.flags = sys::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr = addr;
    params
}

#[cfg(test)]
mod tests;
