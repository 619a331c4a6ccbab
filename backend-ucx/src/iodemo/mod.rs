//! A server for unmodified UCX io_demo clients, with loss tracking.
//!
//! [`IoDemoServer`] speaks io_demo's own protocol (UCX 1.12 and 1.13,
//! [`iomsg_core::iodemo`]): it accepts io_demo clients of either API (tag
//! matching, or active messages with io_demo's `-A`; each connection's API
//! is recognised from what it sends), answers their reads and writes as
//! io_demo's server does, with data in io_demo's pattern so that a client
//! started with `-q` checks it and passes, and checks the pattern of
//! written data when the client fills it. Every request's sn goes through
//! a [`RecvTracker`](iomsg_core::seq::RecvTracker) per connection, and what it finds comes out as
//! [`IoDemoEvent`]s: sns skipped on a live connection, duplicates,
//! requests addressed to a connection that is gone, and, when a
//! connection ends, the requests it leaves unanswered.
//!
//! io_demo has no session: a client that reconnects is a new connection
//! whose sns go on from where the old one stopped. Linking the two is the
//! application's (by the peer's address and the sn, as `iomsg soak`
//! does).
//!
//! Bad input never stops the server: a malformed io message, an unknown
//! op, a data size past [`IoDemoOptions::max_data`] or a connection past
//! its share is refused with an [`IoDemoEvent::Refused`] that names it,
//! and the connection that sent it is closed; the others go on.
//!
//! ```no_run
//! use iomsg_ucx::iodemo::{IoDemoEvent, IoDemoOptions, IoDemoServer};
//! # fn main() -> Result<(), iomsg_ucx::UcxError> {
//! let mut server = IoDemoServer::bind("0.0.0.0:1337".parse().unwrap(), IoDemoOptions::default())?;
//! loop {
//!     server.wait(std::time::Duration::from_millis(100));
//!     while let Some(event) = server.next_event() {
//!         if let IoDemoEvent::Closed { conn, in_flight, .. } = event {
//!             println!("connection {conn:x} left {} operations unanswered", in_flight.len());
//!         }
//!     }
//! }
//! # }
//! ```

mod client;
mod io;
mod ops;
mod serve;
mod track;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use iomsg_core::iodemo::Op;
use iomsg_ucx_sys as sys;

pub use client::{IoDemoClient, IoDemoClientEvent};
pub use iomsg_core::iodemo::AM_ID;

use crate::worker::{ErrArg, Worker};
use crate::UcxError;
use io::{Inbox, Slots};

/// Limits of an [`IoDemoServer`]; every one bounds memory a peer can make
/// the server hold.
#[derive(Clone, Debug)]
pub struct IoDemoOptions {
    /// Connections open at once; more are refused (1,024).
    pub max_connections: usize,
    /// Largest data size of one operation (16 MiB).
    pub max_data: u64,
    /// io_demo's chunk size (`-k`): a tag write's data arrives, and a tag
    /// read's is sent, in chunks of this size (unlimited: one chunk, as
    /// io_demo does unless `-k` is given).
    pub chunk: u64,
    /// Largest io message (io_demo's `-r`, 256 by default): 64 KiB.
    pub max_msg: usize,
    /// Operations of one connection in flight at once (io_demo's `-a` is
    /// 16 by default): 1,024.
    pub max_ops_per_conn: usize,
    /// Data bytes held in flight over all connections (512 MiB).
    pub max_bytes_in_flight: u64,
    /// Data bytes one connection may hold in flight (128 MiB): a client
    /// that stops taking its answers is refused past it, before it can
    /// take the others' room.
    pub max_bytes_per_conn: u64,
    /// A planted defect, to show that a loss is found: with `n > 0` the
    /// server silently drops the `n`-th request of every connection (no
    /// answer, no event). 0 (the default): off.
    #[doc(hidden)]
    pub plant_drop: u64,
    /// Report each request as it is taken ([`IoDemoEvent::Arrived`]); off
    /// by default (one more event per operation). An audit needs it:
    /// answers may leave out of order (a write waits for its data while
    /// later reads are answered), so only an arrival record tells a
    /// request the server took and never answered (it was stopped first)
    /// from one that never reached it.
    pub report_arrivals: bool,
}

impl Default for IoDemoOptions {
    fn default() -> IoDemoOptions {
        IoDemoOptions {
            max_connections: 1024,
            max_data: 16 << 20,
            chunk: u64::MAX,
            max_msg: 64 << 10,
            max_ops_per_conn: 1024,
            max_bytes_in_flight: 512 << 20,
            max_bytes_per_conn: 128 << 20,
            plant_drop: 0,
            report_arrivals: false,
        }
    }
}

impl IoDemoOptions {
    /// The most memory the server's own buffers hold, in bytes: the data
    /// and answers in flight (every receive and send buffer counts
    /// against [`max_bytes_in_flight`](Self::max_bytes_in_flight)), plus
    /// per connection its io messages waiting for its id and its table
    /// entries, plus the active-message handler table (every id has a
    /// handler: 1.5 MiB). What UCX holds for a moment (a message it
    /// assembles, tagged messages nobody will receive until the server
    /// takes them out on its next poll) is not in it; the program's own
    /// code and UCX's libraries neither.
    pub fn memory_bound(&self) -> u64 {
        let per_conn =
            BACKLOG as u64 * self.max_msg as u64 + self.max_ops_per_conn as u64 * PER_OP + PER_CONN;
        self.max_bytes_in_flight + self.max_connections as u64 * per_conn + AM_TABLE
    }
}

/// A pending operation's table entry, with the map's overhead (bytes).
const PER_OP: u64 = 128;

/// A connection's own state, its tracker and its stream receive among it
/// (bytes).
const PER_CONN: u64 = 2048;

/// UCX's active-message handler table with all 65,536 ids set (24 bytes
/// each; see the worker's `guard_am_ids`).
const AM_TABLE: u64 = 65_536 * 24;

/// The largest connection id: io_demo puts the receiver's id in tag bits
/// 32..64 of data too, and an id with bit 31 set would make its data look
/// like io messages (bit 63) to the wildcard receive.
const MAX_ID: u32 = 0x7fff_ffff;

/// Closed connections remembered, to name the connection of a late io
/// message.
const CLOSED: usize = 4096;

/// How long data of an open tag connection may wait in UCX for its io
/// message before it is taken out and dropped (io_demo sends an io
/// message before its data).
const STRAY_AGE: Duration = Duration::from_secs(2);

/// Receives of io messages posted at once at most: each holds a buffer
/// of the largest io message (64 KiB by default: 16 MiB in all), and only
/// messages that stopped halfway keep more than one posted.
const MAX_IOMSG_RECVS: usize = 256;

/// How long the receive of io messages may make no progress while io
/// messages wait before it is taken as held by a message that stopped
/// halfway.
const STUCK_AFTER: Duration = Duration::from_millis(50);

/// How long a connection may stay without showing its API (its id on the
/// stream, or an active message) before it is closed.
pub const ID_DEADLINE: Duration = Duration::from_secs(2);

/// Io messages a tag connection may send before its id arrives. io_demo
/// sends none (it needs the server's id for their tags, and the server
/// sends it once the client's came); only a peer that guessed an id can.
const BACKLOG: usize = 16;

/// What the server saw; take them with [`IoDemoServer::next_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoDemoEvent {
    /// A connection showed which API it speaks (or closed before it did:
    /// `tag` is then `None`).
    Opened {
        /// The connection's key, unique across server processes (random).
        conn: u64,
        /// The client's address.
        peer: Option<SocketAddr>,
        /// `Some(true)` for the tag API, `Some(false)` for active messages.
        tag: Option<bool>,
        /// Our id for it (tag API; 0 with active messages): io_demo's
        /// client logs it as "Remote id is …".
        ours: u32,
        /// The client's id for it, from its io messages: its connection
        /// number (tag API) or its endpoint's address (active messages,
        /// which io_demo's client logs as "created endpoint 0x…").
        theirs: u64,
    },
    /// A request was taken, before it is served (only with
    /// [`IoDemoOptions::report_arrivals`]): a new sn of an open
    /// connection, within every limit.
    Arrived {
        /// The connection.
        conn: u64,
        /// [`Op::Read`] or [`Op::Write`].
        op: Op,
        /// Its sn.
        sn: u32,
    },
    /// An operation was answered: a write's data arrived (and, where the
    /// client fills it, matched the pattern) and its answer was posted, or
    /// a read's data and answer were posted. In the order answers went.
    Answered {
        /// The connection.
        conn: u64,
        /// [`Op::Read`] or [`Op::Write`].
        op: Op,
        /// Its sn.
        sn: u32,
        /// Its data size.
        size: u64,
    },
    /// Sns `[first, end)` (wrapping) were skipped on a live connection:
    /// with one server per client, io_msgs lost on the way.
    Gap {
        /// The connection.
        conn: u64,
        /// The first sn skipped.
        first: u32,
        /// One past the last.
        end: u32,
    },
    /// An sn that already arrived on this connection came again (not
    /// answered twice).
    Duplicate {
        /// The connection.
        conn: u64,
        /// The sn.
        sn: u32,
    },
    /// An io message addressed to a connection that is not open: one
    /// that arrived before its connection ended but was taken after (it
    /// was not answered), an old connection's, or a guess.
    Late {
        /// The connection id the tag named (0: an active message whose
        /// endpoint is not open).
        id: u32,
        /// The connection it was for, if it closed lately.
        conn: Option<u64>,
        /// The message's sn, if it had a header.
        sn: Option<u32>,
    },
    /// A write's data did not match io_demo's pattern.
    Corrupt {
        /// The connection.
        conn: u64,
        /// The write's sn.
        sn: u32,
        /// The first byte that differs.
        offset: usize,
    },
    /// Input refused; the connection (if one is known) is closed.
    Refused {
        /// The connection.
        conn: Option<u64>,
        /// What was wrong, with the values.
        reason: String,
    },
    /// A connection ended.
    Closed {
        /// The connection.
        conn: u64,
        /// Why.
        reason: String,
        /// Requests that arrived and were not answered: io_demo forgets
        /// them (and everything it sent that never arrived).
        in_flight: Vec<(Op, u32)>,
    },
}

/// An operation being served.
struct Pending {
    op: Op,
    size: u64,
    /// Data chunks still to arrive.
    left: usize,
    /// The io message's length (answers have the same).
    msg_len: usize,
    /// The client's connection id from the header (the pattern's).
    their_id: u64,
    /// Check the data against the pattern.
    check: bool,
    /// First mismatch seen.
    bad: Option<usize>,
}

/// One connection.
struct Conn {
    ep: sys::ucp_ep_h,
    err: Option<Box<ErrArg>>,
    peer: Option<SocketAddr>,
    /// Our id (tag API: in the tags the client sends to us).
    id: u32,
    /// The client's id (tag API), once the stream carried it.
    their_id: Option<u32>,
    /// Which API it speaks, once known (`true`: tag).
    tag: Option<bool>,
    ops: HashMap<u32, Pending>,
    track: Option<track::Track>,
    /// The client's id in its io messages (see [`IoDemoEvent::Opened`]).
    theirs: u64,
    /// Requests admitted (for [`IoDemoOptions::plant_drop`]).
    requests: u64,
    /// Bytes its requests hold.
    held: u64,
    /// Io messages that came before the client's id.
    backlog: Vec<Vec<u8>>,
    /// When it was accepted (see [`ID_DEADLINE`]).
    opened: std::time::Instant,
}

/// A server for io_demo clients; see the [module](self).
pub struct IoDemoServer {
    opts: IoDemoOptions,
    slots: Slots,
    conns: HashMap<u64, Conn>,
    by_id: HashMap<u32, u64>,
    by_ep: HashMap<usize, u64>,
    /// Connections closed lately, by id and by endpoint, oldest first.
    closed: VecDeque<(u32, usize, u64)>,
    /// The oldest unexpected message's tag, while it is an open
    /// connection's data, and since when (see `drain_strays`).
    oldest: Option<(u64, std::time::Instant)>,
    /// Tagged messages nobody would receive, taken out of UCX.
    strays: u64,
    /// Receives of io messages posted (see `post_iomsg_recvs`).
    iomsg_recvs: usize,
    /// When one completed or was posted last.
    iomsg_progress: std::time::Instant,
    /// When `expire_silent` looks next.
    next_expiry: std::time::Instant,
    next_id: u32,
    events: VecDeque<IoDemoEvent>,
    queued: Vec<ops::Queued>,
    held: u64,
    addr: SocketAddr,
    listener: sys::ucp_listener_h,
    stopping: bool,
    /// Dropped before the inbox its callbacks write to.
    worker: Worker,
    inbox: Box<Inbox>,
}

impl IoDemoServer {
    /// Listens on `addr` (port 0: any free port, see
    /// [`local_addr`](Self::local_addr)).
    ///
    /// # Errors
    ///
    /// The UCX context, worker or listener could not be made (a port in
    /// use: `UCS_ERR_BUSY`; a restarted server needs
    /// `UCX_TCP_CM_REUSEADDR=y` to listen on its port again at once).
    pub fn bind(addr: SocketAddr, opts: IoDemoOptions) -> Result<IoDemoServer, UcxError> {
        let worker = serve::new_worker()?;
        let inbox = Box::new(Inbox::default());
        let listener = serve::listen(&worker, &inbox, addr)?;
        let local = crate::transport::query_listener(listener).unwrap_or(addr);
        let s = IoDemoServer {
            opts,
            slots: Slots::new(&*inbox),
            conns: HashMap::new(),
            by_id: HashMap::new(),
            by_ep: HashMap::new(),
            closed: VecDeque::new(),
            oldest: None,
            strays: 0,
            iomsg_recvs: 0,
            iomsg_progress: std::time::Instant::now(),
            next_expiry: std::time::Instant::now(),
            next_id: ((crate::random_u64().unwrap_or(1) as u32) & MAX_ID).max(1),
            events: VecDeque::new(),
            queued: Vec::new(),
            held: 0,
            addr: local,
            listener,
            stopping: false,
            inbox,
            worker,
        };
        let mut s = s;
        s.post_iomsg_recvs();
        Ok(s)
    }

    /// The address the listener listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Does the work that is ready: accepts connections, serves requests,
    /// closes failed connections. Returns whether anything happened.
    ///
    /// The answers of the operations that events report go out at the
    /// start of the next call: take the events (and record them) in
    /// between, and nothing a client sees answered is missing from the
    /// record.
    pub fn poll(&mut self) -> bool {
        let mut any = self.send_answers();
        any |= self.worker.progress();
        any |= self.accept();
        any |= self.failures();
        any |= self.completions();
        any |= self.arrivals();
        any |= self.post_iomsg_recvs();
        any |= self.drain_strays();
        any |= self.expire_silent();
        any
    }

    /// Polls until something happens or `max` passes, sleeping on UCX's
    /// event fd when nothing is ready.
    pub fn wait(&mut self, max: Duration) {
        if !self.poll() {
            serve::sleep_on(&self.worker, max);
            self.poll();
        }
    }

    /// The next event, oldest first.
    pub fn next_event(&mut self) -> Option<IoDemoEvent> {
        self.events.pop_front()
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Data bytes held in requests in flight.
    pub fn bytes_in_flight(&self) -> u64 {
        self.held
    }

    /// Closes every connection (each reported [`IoDemoEvent::Closed`]
    /// with its unanswered requests) and waits up to `limit` for UCX to
    /// finish with them.
    pub fn shutdown(&mut self, limit: Duration) {
        self.stopping = true;
        self.send_answers();
        let keys: Vec<u64> = self.conns.keys().copied().collect();
        for k in keys {
            self.close(k, "the server is shutting down".into());
        }
        self.cancel_all();
        let end = std::time::Instant::now() + limit;
        while self.slots.busy() > 0 && std::time::Instant::now() < end {
            self.poll();
        }
    }
}

impl Drop for IoDemoServer {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(2));
        // Requests UCX would not finish keep their buffers for good
        // (leaked on purpose): UCX may still write there.
        for s in self.slots.slots.drain(..).flatten() {
            if !s.req.is_null() {
                core::mem::forget(s);
            }
        }
        serve::release_arrivals(&self.worker, &self.inbox);
        // SAFETY: the listener is live, the worker's, and destroyed once,
        // before the worker (dropped after this); its requests are the
        // only ones.
        unsafe { self.worker.destroy_listener(self.listener) };
    }
}
