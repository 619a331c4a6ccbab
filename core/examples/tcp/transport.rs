//! The TCP backend: io_msg frames over non-blocking `std::net` streams.
//!
//! [`TcpTransport`] is the whole backend: a receive buffer per connection
//! cut into frames with [`frame_len`](iomsg_core::wire::frame_len), a send
//! buffer per connection that the lent [`TxToken`] appends to. Sockets are
//! written only by [`TcpTransport::flush`].

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use iomsg_core::transport::{
    Capabilities, ConnId, Connector, DisconnectReason, Event, Listener, RxToken, SendError,
    Transport, TxToken,
};
use iomsg_core::wire::{frame_len, WireError, HEADER_LEN, MAX_FRAME_LEN};
use iomsg_core::Instant;

/// Bytes read from a socket at once.
const READ_CHUNK: usize = 64 * 1024;
/// Bytes a connection's send buffer may hold before `transmit` answers
/// `WouldBlock`.
const TX_BOUND: usize = 256 * 1024;
/// How long the client's `connect` may block (std has no non-blocking
/// connect; on loopback it answers at once).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
// ---------------------------------------------------------------------------
// The backend.

/// One TCP connection: the stream and its two byte buffers.
struct Conn {
    id: ConnId,
    stream: TcpStream,
    /// Bytes received; `rx[rx_start..]` is not handed out yet.
    rx: Vec<u8>,
    rx_start: usize,
    /// Frames to send; `tx[tx_start..]` is not written yet.
    tx: Vec<u8>,
    tx_start: usize,
    /// Set at EOF or on an error; the driver hears of it once the frames
    /// received before it are handed out.
    gone: Option<DisconnectReason>,
}

impl Conn {
    fn new(id: ConnId, stream: TcpStream) -> io::Result<Conn> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            id,
            stream,
            rx: Vec::new(),
            rx_start: 0,
            tx: Vec::new(),
            tx_start: 0,
            gone: None,
        })
    }

    /// The length of the whole frame at the front of the receive buffer,
    /// once all of it is there. An error means the stream is corrupt.
    fn next_frame(&self) -> Result<Option<usize>, WireError> {
        let avail = &self.rx[self.rx_start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = frame_len(&avail[..HEADER_LEN])?;
        Ok((avail.len() >= len).then_some(len))
    }

    /// One read from the socket into the receive buffer.
    fn fill(&mut self) {
        self.rx.drain(..self.rx_start);
        self.rx_start = 0;
        let old = self.rx.len();
        self.rx.resize(old + READ_CHUNK, 0);
        let result = self.stream.read(&mut self.rx[old..]);
        let got = match result {
            Ok(0) => {
                self.gone = Some(DisconnectReason::PeerClosed);
                0
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => 0,
            Err(_) => {
                self.gone = Some(DisconnectReason::PeerFailed(
                    iomsg_core::transport::Cause::UNKNOWN,
                ));
                0
            }
        };
        self.rx.truncate(old + got);
    }

    /// Bytes waiting in the send buffer.
    fn unsent(&self) -> usize {
        self.tx.len() - self.tx_start
    }

    /// Writes what the socket takes now; returns whether it took anything.
    /// A broken connection drops its unsent bytes: the protocol replays.
    pub(crate) fn flush(&mut self) -> bool {
        let mut wrote = false;
        while self.gone.is_none() && self.unsent() > 0 {
            match self.stream.write(&self.tx[self.tx_start..]) {
                Ok(0) => {
                    self.gone = Some(DisconnectReason::PeerFailed(
                        iomsg_core::transport::Cause::UNKNOWN,
                    ))
                }
                Ok(n) => {
                    self.tx_start += n;
                    wrote = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.gone = Some(DisconnectReason::PeerFailed(
                        iomsg_core::transport::Cause::UNKNOWN,
                    ))
                }
            }
        }
        if self.gone.is_some() || self.tx_start == self.tx.len() {
            self.tx.clear();
            self.tx_start = 0;
        } else if self.tx_start >= READ_CHUNK {
            self.tx.drain(..self.tx_start);
            self.tx_start = 0;
        }
        wrote
    }
}

/// Which end a [`TcpTransport`] is.
pub(crate) trait Role {
    /// A new incoming connection, if one waits.
    fn accept(&mut self) -> io::Result<Option<TcpStream>>;
}

/// The client's end: dials its server.
pub(crate) struct Dial {
    pub(crate) server: SocketAddr,
}

impl Role for Dial {
    fn accept(&mut self) -> io::Result<Option<TcpStream>> {
        Ok(None)
    }
}

/// The server's end: accepts clients.
pub(crate) struct Accept {
    pub(crate) listener: TcpListener,
}

impl Role for Accept {
    fn accept(&mut self) -> io::Result<Option<TcpStream>> {
        match self.listener.accept() {
            Ok((stream, _)) => Ok(Some(stream)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// io_msg frames over TCP streams: a [`Transport`], and a [`Connector`] or
/// [`Listener`] by its role.
///
/// `poll` reads; nothing is written to a socket until [`flush`](Self::flush),
/// which the application calls once what it was handed is on record, so
/// no ack leaves before the message it acknowledges is kept.
pub(crate) struct TcpTransport<R> {
    role: R,
    /// Connections by slot.
    slots: Vec<Option<Conn>>,
    /// Each slot's generation: a reused slot gets a new `ConnId`.
    generations: Vec<u32>,
    /// Connected / accepted / disconnected, waiting to be reported.
    notices: VecDeque<Notice>,
    /// Where the next search for a received frame starts (fairness).
    cursor: usize,
    /// Closed connections whose last frames (a `Bye`) still go out at the
    /// next `flush`.
    closing: Vec<Conn>,
}

/// A lent stretch of a connection's send buffer.
pub(crate) struct TcpTx<'a> {
    tx: &'a mut Vec<u8>,
    len: usize,
}

impl TxToken for TcpTx<'_> {
    fn consume<R>(self, emit: impl FnOnce(&mut [u8]) -> R) -> R {
        let start = self.tx.len();
        self.tx.resize(start + self.len, 0);
        emit(&mut self.tx[start..])
    }
}

/// A received frame, lent where the receive buffer holds it.
pub(crate) struct TcpRx<'a>(&'a [u8]);

impl RxToken for TcpRx<'_> {
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

impl<R: Role> TcpTransport<R> {
    pub(crate) fn new(role: R) -> Self {
        TcpTransport {
            role,
            slots: Vec::new(),
            generations: Vec::new(),
            notices: VecDeque::new(),
            cursor: 0,
            closing: Vec::new(),
        }
    }

    /// Gives `stream` a slot and a fresh `ConnId`.
    fn insert(&mut self, stream: TcpStream) -> io::Result<ConnId> {
        let slot = match self.slots.iter().position(Option::is_none) {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.generations.push(0);
                self.slots.len() - 1
            }
        };
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        let id = ConnId::new(slot as u32, self.generations[slot]);
        self.slots[slot] = Some(Conn::new(id, stream)?);
        Ok(id)
    }

    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        let conn = self.slots.get_mut(id.slot() as usize)?.as_mut()?;
        (conn.id == id).then_some(conn)
    }

    /// Writes every connection's send buffer as far as its socket takes
    /// it; returns whether anything was written.
    pub(crate) fn flush(&mut self) -> bool {
        let mut wrote = false;
        for conn in self.slots.iter_mut().flatten() {
            wrote |= conn.flush();
        }
        for conn in &mut self.closing {
            wrote |= conn.flush();
        }
        self.closing.retain(|c| c.gone.is_none() && c.unsent() > 0);
        wrote
    }

    /// Takes the connections waiting to be accepted.
    fn accept_all(&mut self) {
        loop {
            match self.role.accept() {
                Ok(Some(stream)) => match self.insert(stream) {
                    Ok(conn) => self.notices.push_back(Notice::Accepted(conn)),
                    Err(e) => eprintln!("tcp: cannot set up an accepted connection: {e}"),
                },
                Ok(None) => return,
                Err(e) => {
                    eprintln!("tcp: accept failed: {e}; trying again on the next poll");
                    return;
                }
            }
        }
    }

    /// The length of a whole frame received on `slot`; with `read`, reads
    /// the socket once if none is buffered. A connection that is gone with
    /// nothing left to hand out, or whose stream is corrupt, is dropped and
    /// reported.
    fn ready(&mut self, slot: usize, read: bool) -> Option<usize> {
        let conn = self.slots[slot].as_mut()?;
        let mut next = conn.next_frame();
        if read && matches!(next, Ok(None)) && conn.gone.is_none() {
            conn.fill();
            next = conn.next_frame();
        }
        let reason = match next {
            Ok(Some(len)) => return Some(len),
            Ok(None) => conn.gone?,
            Err(e) => {
                eprintln!("tcp: {}: corrupt stream ({e}); dropping it", conn.id);
                DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN)
            }
        };
        let conn = conn.id;
        self.slots[slot] = None;
        self.notices.push_back(Notice::Disconnected(conn, reason));
        None
    }
}

impl<R: Role> Transport for TcpTransport<R> {
    type TxToken<'a>
        = TcpTx<'a>
    where
        Self: 'a;
    type RxToken<'a>
        = TcpRx<'a>
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
    ) -> Result<TcpTx<'_>, SendError> {
        if len > MAX_FRAME_LEN {
            return Err(SendError::TooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        let conn = self.conn_mut(conn).ok_or(SendError::NotConnected)?;
        if conn.unsent() >= TX_BOUND {
            return Err(SendError::WouldBlock);
        }
        Ok(TcpTx {
            tx: &mut conn.tx,
            len,
        })
    }

    fn poll(&mut self, _now: Instant) -> Option<Event<TcpRx<'_>>> {
        // Frames already buffered first; the sockets only when none is.
        for read in [false, true] {
            if read {
                self.accept_all();
            }
            if let Some(event) = self.notices.pop_front() {
                return Some(lift(event));
            }
            let n = self.slots.len();
            for k in 0..n {
                let slot = (self.cursor + k) % n;
                if let Some(len) = self.ready(slot, read) {
                    self.cursor = (slot + 1) % n;
                    let conn = self.slots[slot].as_mut()?;
                    let start = conn.rx_start;
                    conn.rx_start += len;
                    return Some(Event::Received {
                        conn: conn.id,
                        frame: TcpRx(&conn.rx[start..start + len]),
                    });
                }
            }
        }
        self.notices.pop_front().map(lift)
    }

    fn close(&mut self, _now: Instant, conn: ConnId) {
        // No event is reported for it afterwards, not even a queued one.
        self.notices.retain(|notice| notice.conn() != conn);
        if self.conn_mut(conn).is_none() {
            return;
        }
        // Its last frames go out with the others, at the next flush.
        if let Some(c) = self.slots[conn.slot() as usize].take() {
            if c.gone.is_none() && c.unsent() > 0 {
                self.closing.push(c);
            }
        }
    }
}

impl Connector for TcpTransport<Dial> {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let server = self.role.server;
        let outcome = TcpStream::connect_timeout(&server, CONNECT_TIMEOUT)
            .and_then(|stream| self.insert(stream));
        match outcome {
            Ok(conn) => {
                self.notices.push_back(Notice::Connected(conn));
                Ok(conn)
            }
            Err(e) => {
                eprintln!("tcp: connect to {server}: {e}");
                Err(DisconnectReason::ConnectFailed(
                    iomsg_core::transport::Cause::UNKNOWN,
                ))
            }
        }
    }
}

impl Listener for TcpTransport<Accept> {}
