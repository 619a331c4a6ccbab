//! [`StreamTransport`]: io_msg frames over TCP or Unix domain stream
//! sockets, for the core's sans-IO drivers.
//!
//! Each connection has a receive buffer cut into frames with
//! [`frame_len`](iomsg_core::wire::frame_len) (which checks a header
//! before it trusts its length: a peer that sends anything else is
//! dropped, see [`CORRUPT_STREAM`](crate::CORRUPT_STREAM)), and a send
//! buffer that the lent `TxToken` appends to, bounded by
//! [`StreamConfig::send_buffer`]: past it `transmit` answers `WouldBlock`.
//! Send buffers are written by `poll` and `arm`; the server driver has its
//! application flush what it took before it builds the acknowledgements,
//! so no ack is even written before what it acknowledges is kept.
//!
//! A server whose table is full ([`StreamConfig::max_connections`])
//! accepts the connection, writes a `Reject` (`SessionTableFull`, the
//! table's size) addressed to no session, and closes it lingering, so that
//! the client learns why; past 256 such connections at once it closes the
//! newest without a word.
//!
//! EOF and socket errors (a failed write too) become `Disconnected` once
//! the frames received before them are handed out. A connection the
//! driver closes lingers, at most [`LINGER`]: its last frames are written,
//! its writing side shut down, and what arrives is discarded until the
//! peer closes too, so that no reset overtakes them. A connection slot
//! reused gets a new generation (`ConnId::new(slot, generation)`).
//!
//! Readiness comes from the sockets themselves through one `mio::Poll`:
//! [`arm`](Transport::arm) answers `Armed` only when nothing is pending,
//! and [`sleep`](StreamTransport::sleep) then blocks on the sockets until
//! one of them has something or the timeout passes.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant as Wall};

use iomsg_core::transport::{
    Capabilities, ConnId, Connector, DisconnectReason, Event, Listener, Readiness, RxToken,
    SendError, Transport, TxToken,
};
use iomsg_core::wire::{Body, Crc32c, IoMsg, RejectReason, MAX_FRAME_LEN};
use iomsg_core::Instant;
use mio::{Events, Interest, Poll, Token};

use crate::conn::{corrupt, Conn, Phase};
use crate::socket::{cause, Listen, Stream};
use crate::Addr;

/// The poller's token for the listening socket; connections use their slot.
const LISTENER: Token = Token(usize::MAX);
/// Connections accepted at most per poll, so that a flood of them does
/// not starve the connections already there.
const ACCEPT_BATCH: usize = 64;
/// How long a closed connection lingers at most: its last frames written,
/// then its peer's end awaited (a peer that does not read, or does not
/// close, holds its slot no longer than this).
pub const LINGER: Duration = Duration::from_secs(1);
/// Refused connections lingering at most (each until its `Reject` is out
/// and its peer closed, at most [`LINGER`]): past it one is closed
/// without a word, and its client retries as after any close.
const MAX_REFUSING: usize = 256;

/// A line on standard error, the crate's only log.
pub(crate) fn log(line: &str) {
    eprintln!("iomsg-stream: {line}");
}

/// What a [`StreamTransport`] is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamConfig {
    /// Connections at once (server): one past it is accepted, told
    /// `Reject(SessionTableFull)` and closed. Default 1024.
    pub max_connections: usize,
    /// Bytes a connection's send buffer holds before `transmit` answers
    /// `WouldBlock` (a frame that starts below it is always taken whole).
    /// Default 256 KiB.
    pub send_buffer: usize,
}

impl Default for StreamConfig {
    fn default() -> StreamConfig {
        StreamConfig {
            max_connections: 1024,
            send_buffer: 256 * 1024,
        }
    }
}

mod sealed {
    /// Only this crate's roles.
    pub trait Sealed {}
}

/// Which end a [`StreamTransport`] is: [`Dial`] or [`Accept`].
pub trait Role: sealed::Sealed + Send {
    /// The listener of a server.
    #[doc(hidden)]
    fn accept(&mut self) -> Option<&mut Accept>;
}

/// The client's end: dials its server.
#[derive(Debug)]
pub struct Dial {
    addr: Addr,
}

/// The server's end: accepts clients.
#[derive(Debug)]
pub struct Accept {
    listener: Listen,
    /// The poller said a connection waits, and no accept has since found
    /// none.
    ready: bool,
    /// Connections refused because the table was full.
    refused: u64,
}

impl sealed::Sealed for Dial {}
impl sealed::Sealed for Accept {}
impl Role for Dial {
    fn accept(&mut self) -> Option<&mut Accept> {
        None
    }
}
impl Role for Accept {
    fn accept(&mut self) -> Option<&mut Accept> {
        Some(self)
    }
}

/// io_msg frames over TCP or Unix domain stream sockets: the core's
/// [`Transport`], and a [`Connector`] ([`client`](Self::client)) or a
/// [`Listener`] ([`server`](Self::server)).
pub struct StreamTransport<R> {
    role: R,
    poll: Poll,
    events: Events,
    /// Connections by slot.
    slots: Vec<Option<Conn>>,
    /// Each slot's generation: a reused slot gets a new `ConnId`.
    generations: Vec<u32>,
    /// Connections in slots, closing ones too (refused ones are counted
    /// in `refusing`).
    live: usize,
    /// Slots of refused connections, lingering.
    refusing: usize,
    /// Connected / accepted / disconnected, waiting to be reported.
    notices: VecDeque<Notice>,
    /// Slots with a whole frame or a disconnect to report, in turn.
    ready: VecDeque<usize>,
    config: StreamConfig,
}

/// A lent stretch of a connection's send buffer.
pub struct StreamTx<'a> {
    tx: &'a mut Vec<u8>,
    len: usize,
}

impl TxToken for StreamTx<'_> {
    fn consume<R>(self, emit: impl FnOnce(&mut [u8]) -> R) -> R {
        let start = self.tx.len();
        self.tx.resize(start + self.len, 0);
        emit(&mut self.tx[start..])
    }
}

/// A received frame, lent where the receive buffer holds it.
pub struct StreamRx<'a>(&'a [u8]);

impl RxToken for StreamRx<'_> {
    fn consume<R>(self, read: impl FnOnce(&[u8]) -> R) -> R {
        read(self.0)
    }
}

/// An event without a frame, queued until the driver polls.
#[derive(Clone, Copy, Debug)]
enum Notice {
    Connected(ConnId),
    Accepted(ConnId),
    Disconnected(ConnId, DisconnectReason),
}

impl Notice {
    fn conn(self) -> ConnId {
        match self {
            Notice::Connected(c) | Notice::Accepted(c) | Notice::Disconnected(c, _) => c,
        }
    }
}

/// A notice as the trait's event.
fn lift<Rx>(notice: Notice) -> Event<Rx> {
    match notice {
        Notice::Connected(conn) => Event::Connected { conn },
        Notice::Accepted(conn) => Event::Accepted { conn },
        Notice::Disconnected(conn, reason) => Event::Disconnected { conn, reason },
    }
}

/// What a slot in the ready queue had.
enum Next {
    /// A frame at `start..start + len` of its receive buffer.
    Frame(usize, usize),
    /// The connection is gone (and its slot free).
    Gone(ConnId, DisconnectReason),
    /// Nothing (any more).
    Nothing,
}

impl StreamTransport<Dial> {
    /// A client's transport: each `connect` opens a stream to `addr`.
    ///
    /// # Errors
    ///
    /// The poller could not be created (out of file descriptors).
    pub fn client(addr: Addr, config: StreamConfig) -> io::Result<Self> {
        Self::new(Dial { addr }, config)
    }

    /// The server's address.
    #[must_use]
    pub fn server_addr(&self) -> &Addr {
        &self.role.addr
    }
}

impl StreamTransport<Accept> {
    /// A server's transport listening on `addr` (TCP port 0: any free
    /// port, see [`local_addr`](Self::local_addr)). A Unix socket file
    /// left by a server that died is replaced; the file is removed when
    /// the transport is dropped.
    ///
    /// # Errors
    ///
    /// The address cannot be listened on (in use, no permission), or the
    /// poller could not be created.
    pub fn server(addr: &Addr, config: StreamConfig) -> io::Result<Self> {
        let mut listener = Listen::bind(addr)?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let role = Accept {
            listener,
            ready: true,
            refused: 0,
        };
        Ok(Self::with_poll(role, poll, config))
    }

    /// The address it listens on (with the port chosen, for port 0).
    ///
    /// # Errors
    ///
    /// The socket cannot tell (a system error).
    pub fn local_addr(&self) -> io::Result<Addr> {
        self.role.listener.local_addr()
    }

    /// Connections refused because [`StreamConfig::max_connections`] were
    /// open.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.role.refused
    }
}

impl<R: Role> StreamTransport<R> {
    fn new(role: R, config: StreamConfig) -> io::Result<Self> {
        Ok(Self::with_poll(role, Poll::new()?, config))
    }

    fn with_poll(role: R, poll: Poll, config: StreamConfig) -> Self {
        StreamTransport {
            role,
            poll,
            events: Events::with_capacity(256),
            slots: Vec::new(),
            generations: Vec::new(),
            live: 0,
            refusing: 0,
            notices: VecDeque::new(),
            ready: VecDeque::new(),
            config,
        }
    }

    /// Connections open (or closing) now; refused ones are not counted.
    #[must_use]
    pub fn connections(&self) -> usize {
        self.live
    }

    /// Sleeps until a socket has something (after [`arm`](Transport::arm)
    /// said `Armed`) or `timeout` passed. Returns whether it woke for a
    /// socket.
    ///
    /// # Errors
    ///
    /// Waiting on the poller failed other than by a signal.
    pub fn sleep(&mut self, timeout: Duration) -> io::Result<bool> {
        self.harvest(Some(timeout))
    }

    /// The socket poller, whose fd is readable when a socket has
    /// something: for an async runtime to wait on.
    pub(crate) fn poller(&self) -> &mio::Registry {
        self.poll.registry()
    }

    /// Gives `stream` a slot, a fresh `ConnId` and the poller's eye.
    fn insert(&mut self, stream: Stream, phase: Phase) -> io::Result<ConnId> {
        let id = self.place(stream, phase)?;
        self.live += 1;
        Ok(id)
    }

    /// Keeps refused `stream` until `reject` is written to it and its
    /// peer closed ([`Conn::linger`]), without counting it as a
    /// connection.
    fn refuse(&mut self, stream: Stream, reject: Vec<u8>) -> io::Result<()> {
        let id = self.place(stream, Phase::Closing(Wall::now()))?;
        if let Some(conn) = self.slots[id.slot() as usize].as_mut() {
            conn.tx = reject;
            conn.refusal = true;
        }
        self.refusing += 1;
        Ok(())
    }

    /// Puts `stream` in a free slot under a new generation.
    fn place(&mut self, mut stream: Stream, phase: Phase) -> io::Result<ConnId> {
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.generations.push(0);
                self.slots.len() - 1
            }
        };
        self.poll.registry().register(
            &mut stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        let id = ConnId::new(slot as u32, self.generations[slot]);
        self.slots[slot] = Some(Conn::new(id, stream, phase));
        Ok(id)
    }

    /// Frees `slot`, closing its socket.
    fn remove(&mut self, slot: usize) {
        if let Some(mut conn) = self.slots[slot].take() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if conn.refusal {
                self.refusing -= 1;
            } else {
                self.live -= 1;
            }
        }
    }

    /// The open connection `id`, if it still is.
    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        let conn = self.slots.get_mut(id.slot() as usize)?.as_mut()?;
        (conn.id == id && !matches!(conn.phase, Phase::Closing(_))).then_some(conn)
    }

    /// Takes what the poller has seen (waiting at most `timeout`) into the
    /// connections' flags; returns whether it saw anything.
    fn harvest(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(true),
            Err(e) => return Err(e),
        }
        let mut any = false;
        for event in &self.events {
            any = true;
            if event.token() == LISTENER {
                if let Some(accept) = self.role.accept() {
                    accept.ready = true;
                }
                continue;
            }
            let Some(Some(conn)) = self.slots.get_mut(event.token().0) else {
                continue;
            };
            let error = event.is_error();
            conn.readable |= event.is_readable() || event.is_read_closed() || error;
            conn.read_closed |= event.is_read_closed() || error;
            conn.writable |= event.is_writable() || event.is_write_closed() || error;
        }
        Ok(any)
    }

    /// Takes the connections waiting to be accepted, refusing those past
    /// the bound.
    fn accept_all(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            let Some(accept) = self.role.accept().filter(|a| a.ready) else {
                return;
            };
            let stream = match accept.listener.accept() {
                Ok(Some(stream)) => stream,
                Ok(None) => {
                    accept.ready = false;
                    return;
                }
                Err(e) => {
                    accept.ready = false;
                    log(&format!(
                        "accept failed: {e}; trying again when the next client comes"
                    ));
                    return;
                }
            };
            if self.live >= self.config.max_connections {
                accept.refused += 1;
                log(&format!(
                    "refused a connection: {} connections are open, the most allowed \
                     (raise max_connections to take more)",
                    self.live
                ));
                if self.refusing < MAX_REFUSING {
                    let reject = refusal(self.config.max_connections);
                    if let Err(e) = self.refuse(stream, reject) {
                        log(&format!("cannot watch a refused connection: {e}"));
                    }
                }
                continue;
            }
            let _ = stream.set_nodelay();
            match self.insert(stream, Phase::Up) {
                Ok(conn) => self.notices.push_back(Notice::Accepted(conn)),
                Err(e) => log(&format!("cannot watch an accepted connection: {e}")),
            }
        }
    }

    /// One pass over the sockets: what the poller saw, new connections,
    /// connects completed, send buffers written, receive buffers filled.
    fn io(&mut self) {
        if let Err(e) = self.harvest(Some(Duration::ZERO)) {
            log(&format!("cannot poll the sockets: {e}"));
        }
        self.accept_all();
        for slot in 0..self.slots.len() {
            let Some(conn) = self.slots[slot].as_mut() else {
                continue;
            };
            match conn.phase {
                Phase::Connecting => self.check_connect(slot),
                Phase::Up => {
                    conn.flush();
                    if !conn.queued && conn.wants_read() {
                        conn.fill();
                    }
                    let report = conn.gone.is_some()
                        || !matches!(conn.next_frame(&Crc32c::BUILTIN), Ok(None));
                    if report && !conn.queued {
                        conn.queued = true;
                        self.ready.push_back(slot);
                    }
                }
                Phase::Closing(since) => {
                    if conn.linger() || since.elapsed() > LINGER {
                        self.remove(slot);
                    }
                }
            }
        }
    }

    /// Whether the connection in `slot`, still connecting, came up or
    /// failed.
    fn check_connect(&mut self, slot: usize) {
        let Some(conn) = self.slots[slot].as_mut() else {
            return;
        };
        if !(conn.readable || conn.writable) {
            return;
        }
        conn.readable = false;
        conn.writable = false;
        match conn.stream.connected() {
            Ok(false) => {}
            Ok(true) => {
                conn.phase = Phase::Up;
                conn.readable = true;
                conn.writable = true;
                self.notices.push_back(Notice::Connected(conn.id));
            }
            Err(e) => {
                let id = conn.id;
                self.remove(slot);
                let reason = DisconnectReason::ConnectFailed(cause(&e));
                self.notices.push_back(Notice::Disconnected(id, reason));
            }
        }
    }

    /// What the queued `slot` has to report.
    fn next_in(&mut self, slot: usize) -> Next {
        let Some(conn) = self.slots[slot].as_mut() else {
            return Next::Nothing;
        };
        if conn.phase != Phase::Up {
            conn.queued = false;
            return Next::Nothing;
        }
        let reason = match conn.next_frame(&Crc32c::BUILTIN) {
            Ok(Some(len)) => {
                let start = conn.take(len);
                // Its next frame, if any, after the other connections'.
                self.ready.push_back(slot);
                return Next::Frame(start, len);
            }
            Ok(None) => match conn.gone {
                Some(reason) => reason,
                None => {
                    conn.queued = false;
                    return Next::Nothing;
                }
            },
            Err(e) => {
                // Not even a first frame: a peer of another protocol (a
                // UCX client's connection request, say).
                let first =
                    if conn.frames == 0 && matches!(e, iomsg_core::wire::WireError::BadMagic(_)) {
                        ": the peer does not speak iomsg's stream framing (a UCX client, or \
                     another protocol)"
                    } else {
                        ""
                    };
                log(&format!(
                    "{}: the peer sent bytes that are not an io_msg frame ({e}){first}; \
                     dropping the connection",
                    conn.id
                ));
                DisconnectReason::Other(corrupt(&e))
            }
        };
        let id = conn.id;
        self.remove(slot);
        Next::Gone(id, reason)
    }

    /// Whether a poll would find something to do now.
    fn pending(&mut self) -> bool {
        if !self.notices.is_empty() || !self.ready.is_empty() {
            return true;
        }
        if self.role.accept().is_some_and(|a| a.ready) {
            return true;
        }
        self.slots.iter().flatten().any(|c| match c.phase {
            Phase::Connecting => c.readable || c.writable,
            Phase::Up => c.wants_read() || c.gone.is_some() || (c.writable && c.unsent() > 0),
            Phase::Closing(_) => c.lingering_work(),
        })
    }
}

impl<R: Role> Transport for StreamTransport<R> {
    type TxToken<'a>
        = StreamTx<'a>
    where
        Self: 'a;
    type RxToken<'a>
        = StreamRx<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        // A stream carries any frame, and in order.
        Capabilities {
            max_frame: MAX_FRAME_LEN,
            in_order: true,
        }
    }

    fn transmit(
        &mut self,
        _now: Instant,
        conn: ConnId,
        len: usize,
    ) -> Result<StreamTx<'_>, SendError> {
        if len > MAX_FRAME_LEN {
            return Err(SendError::TooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        let bound = self.config.send_buffer;
        let conn = self.conn_mut(conn).ok_or(SendError::NotConnected)?;
        if conn.unsent() >= bound {
            return Err(SendError::WouldBlock);
        }
        Ok(StreamTx {
            tx: &mut conn.tx,
            len,
        })
    }

    fn poll(&mut self, _now: Instant) -> Option<Event<StreamRx<'_>>> {
        if let Some(notice) = self.notices.pop_front() {
            return Some(lift(notice));
        }
        if self.ready.is_empty() {
            self.io();
            if let Some(notice) = self.notices.pop_front() {
                return Some(lift(notice));
            }
        }
        while let Some(slot) = self.ready.pop_front() {
            match self.next_in(slot) {
                Next::Frame(start, len) => {
                    let conn = self.slots[slot].as_ref()?;
                    return Some(Event::Received {
                        conn: conn.id,
                        frame: StreamRx(conn.frame(start, len)),
                    });
                }
                Next::Gone(conn, reason) => return Some(Event::Disconnected { conn, reason }),
                Next::Nothing => {}
            }
        }
        None
    }

    fn close(&mut self, _now: Instant, conn: ConnId) {
        // No event is reported for it afterwards, not even a queued one.
        self.notices.retain(|notice| notice.conn() != conn);
        let Some(c) = self.conn_mut(conn) else {
            return;
        };
        if c.phase == Phase::Up && c.gone.is_none() {
            // Its last frames go out at the next polls, then the peer's
            // end is awaited: closing the socket with bytes unread would
            // reset the connection, and the reset discards them.
            c.phase = Phase::Closing(Wall::now());
            if !c.linger() {
                return;
            }
        }
        self.remove(conn.slot() as usize);
    }

    fn arm(&mut self) -> Readiness {
        if self.harvest(Some(Duration::ZERO)).is_err() {
            return Readiness::Pending;
        }
        let mut wrote = false;
        for conn in self.slots.iter_mut().flatten() {
            if conn.phase != Phase::Connecting {
                wrote |= conn.flush();
            }
        }
        if wrote || self.pending() {
            Readiness::Pending
        } else {
            Readiness::Armed
        }
    }
}

impl Connector for StreamTransport<Dial> {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let stream = Stream::connect(&self.role.addr)
            .map_err(|e| DisconnectReason::ConnectFailed(cause(&e)))?;
        let _ = stream.set_nodelay();
        self.insert(stream, Phase::Connecting)
            .map_err(|e| DisconnectReason::ConnectFailed(cause(&e)))
    }
}

impl Listener for StreamTransport<Accept> {}

/// What a server whose table of `size` connections is full writes to one
/// more: the `Reject` (`SessionTableFull`) that the core's server sends
/// when its own connection table is full, addressed to no session (no
/// `Hello` was read), which a client takes as its connection's. A client
/// the server never let in fails on it at once, unless told to wait for
/// room (`ClientConfig::retry_full_table`); one let in before retries.
fn refusal(size: usize) -> Vec<u8> {
    let msg = IoMsg {
        session: 0,
        epoch: 0,
        sn: 0,
        ack: 0,
        validate: true,
        stream: false,
        body: Body::Reject {
            reason: RejectReason::SessionTableFull,
            detail: size as u64,
        },
    };
    let mut frame = vec![0; msg.buffer_len()];
    // A control frame always fits a buffer of its own `buffer_len`.
    let _ = msg.emit(&mut frame);
    frame
}

#[cfg(test)]
mod tests;
