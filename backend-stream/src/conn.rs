//! One connection: its socket, its receive buffer cut into frames, its
//! bounded send buffer, and what the poller last said of it.
//!
//! Its end never overtakes a frame: the frames that arrived before an end
//! of file or an error are handed out first (a failed write stops the
//! writing, not the reading), and a connection the driver closes writes
//! what it holds, then shuts its writing side (a FIN after the last byte)
//! and reads, discarding, until its peer closes too ([`Conn::linger`]).

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::time::Instant as Wall;

use iomsg_core::transport::{Cause, ConnId, DisconnectReason};
use iomsg_core::wire::{frame_len_with, Crc32c, WireError, HEADER_LEN};

use crate::socket::{cause, Stream};

/// Bytes read from a socket at once.
const READ_CHUNK: usize = 64 * 1024;

/// The [`Cause::name`] of a connection dropped because its peer sent bytes
/// that are not io_msg frames (a bad header, a length over the limit).
pub const CORRUPT_STREAM: &str = "corrupt stream";

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A client's connection, not established yet.
    Connecting,
    /// Carrying frames.
    Up,
    /// Closed by the driver (then): its last frames (a `Reject`, a `Bye`)
    /// still go out, and nothing is reported of it any more (see
    /// [`Conn::linger`]).
    Closing(Wall),
}

/// One stream and its two byte buffers.
pub(crate) struct Conn {
    pub(crate) id: ConnId,
    pub(crate) stream: Stream,
    pub(crate) phase: Phase,
    /// Bytes received; `rx[rx_start..]` is not handed out yet.
    rx: Vec<u8>,
    rx_start: usize,
    /// Frames to send; `tx[tx_start..]` is not written yet.
    pub(crate) tx: Vec<u8>,
    tx_start: usize,
    /// The poller said readable (or this is new), and no read has since
    /// found the socket empty.
    pub(crate) readable: bool,
    /// The poller said the peer's side ended (its FIN, a reset, an
    /// error): the socket is read until a read says so, short reads or
    /// not (edge-triggered, no later event would come for it).
    pub(crate) read_closed: bool,
    /// The poller said writable (or this is new), and no write has since
    /// found the socket full.
    pub(crate) writable: bool,
    /// In the transport's queue of connections with something to report.
    pub(crate) queued: bool,
    /// Set at EOF or on an error; reported once the frames received
    /// before it are handed out.
    pub(crate) gone: Option<DisconnectReason>,
    /// A write failed (the peer reset the connection, or is gone): nothing
    /// more is written, and the socket is read to its end, so that the
    /// frames that arrived before are handed out; then this is `gone`'s
    /// reason if the read side has none of its own.
    broken: Option<DisconnectReason>,
    /// The writing side is shut down (closing: after the last frame).
    shut: bool,
    /// A connection refused (table full), lingering until its `Reject` is
    /// out: not counted as a connection.
    pub(crate) refusal: bool,
    /// Frames taken from this connection so far.
    pub(crate) frames: u64,
}

impl Conn {
    pub(crate) fn new(id: ConnId, stream: Stream, phase: Phase) -> Conn {
        Conn {
            id,
            stream,
            phase,
            rx: Vec::new(),
            rx_start: 0,
            tx: Vec::new(),
            tx_start: 0,
            readable: true,
            read_closed: false,
            writable: true,
            queued: false,
            gone: None,
            broken: None,
            shut: false,
            refusal: false,
            frames: 0,
        }
    }

    /// The length of the whole frame at the front of the receive buffer,
    /// once all of it is there. An error means the stream is corrupt.
    pub(crate) fn next_frame(&self, crc: &Crc32c) -> Result<Option<usize>, WireError> {
        let avail = &self.rx[self.rx_start..];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let len = frame_len_with(&avail[..HEADER_LEN], crc)?;
        Ok((avail.len() >= len).then_some(len))
    }

    /// Takes the frame of `len` bytes at the front: where it starts.
    pub(crate) fn take(&mut self, len: usize) -> usize {
        let start = self.rx_start;
        self.rx_start += len;
        self.frames += 1;
        start
    }

    /// The received bytes at `start..start + len`.
    pub(crate) fn frame(&self, start: usize, len: usize) -> &[u8] {
        &self.rx[start..start + len]
    }

    /// One read from the socket into the receive buffer; returns whether
    /// it got bytes (or the end).
    pub(crate) fn fill(&mut self) -> bool {
        if self.rx_start > 0 {
            self.rx.drain(..self.rx_start);
            self.rx_start = 0;
        }
        let old = self.rx.len();
        self.rx.resize(old + READ_CHUNK, 0);
        let result = self.stream.read(&mut self.rx[old..]);
        let got = match result {
            Ok(0) => {
                // A failed write says more than the end that followed it.
                self.gone = Some(self.broken.unwrap_or(DisconnectReason::PeerClosed));
                0
            }
            Ok(n) => {
                // A short read emptied the socket: bytes that come later
                // raise a new edge, so no read is needed to find it empty;
                // but the end the poller already told of raises none.
                if n < READ_CHUNK && !self.read_closed {
                    self.readable = false;
                }
                n
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                self.readable = false;
                if self.broken.is_some() {
                    // Nothing more will come.
                    self.gone = self.broken;
                }
                0
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => 0,
            Err(e) => {
                self.gone = Some(DisconnectReason::PeerFailed(cause(&e)));
                0
            }
        };
        self.rx.truncate(old + got);
        got > 0 || self.gone.is_some()
    }

    /// Bytes waiting in the send buffer.
    pub(crate) fn unsent(&self) -> usize {
        self.tx.len() - self.tx_start
    }

    /// Whether a read may find something: bytes, the end, or (broken)
    /// that nothing more comes.
    pub(crate) fn wants_read(&self) -> bool {
        self.gone.is_none() && (self.readable || self.broken.is_some())
    }

    /// Writes what the socket takes now; returns whether it took anything.
    /// A broken connection drops its unsent bytes (the protocol replays)
    /// and is read to its end.
    pub(crate) fn flush(&mut self) -> bool {
        let mut wrote = false;
        while self.gone.is_none() && self.broken.is_none() && self.writable && self.unsent() > 0 {
            match self.stream.write(&self.tx[self.tx_start..]) {
                Ok(0) => self.broken = Some(DisconnectReason::PeerFailed(Cause::UNKNOWN)),
                Ok(n) => {
                    self.tx_start += n;
                    wrote = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.writable = false,
                Err(e) => self.broken = Some(DisconnectReason::PeerFailed(cause(&e))),
            }
        }
        if self.gone.is_some() || self.broken.is_some() || self.tx_start == self.tx.len() {
            self.tx.clear();
            self.tx_start = 0;
        } else if self.tx_start >= READ_CHUNK {
            self.tx.drain(..self.tx_start);
            self.tx_start = 0;
        }
        wrote
    }
}

impl Conn {
    /// One step of closing (the driver closed it): write what is left;
    /// once all of it is written, shut the writing side (the peer reads
    /// the last frame, then its end) and read, discarding, until the
    /// peer closes its side too. Returns whether the socket may close now.
    ///
    /// Closing a socket with bytes unread makes the kernel reset the
    /// connection and discard what it has not sent yet: the last frames,
    /// and in a peer that reads them after the reset, nothing is left.
    /// The caller bounds the whole by its `LINGER`.
    pub(crate) fn linger(&mut self) -> bool {
        self.flush();
        if self.gone.is_some() || self.broken.is_some() {
            return true;
        }
        if self.unsent() > 0 {
            return false;
        }
        if !self.shut {
            self.shut = true;
            let shut = match &self.stream {
                Stream::Tcp(s) => s.shutdown(Shutdown::Write),
                Stream::Unix(s) => s.shutdown(Shutdown::Write),
            };
            if shut.is_err() {
                return true;
            }
        }
        // Nothing of it is handed out any more.
        self.rx.clear();
        self.rx_start = 0;
        if self.readable {
            self.fill();
        }
        self.gone.is_some()
    }

    /// Whether a closing connection has work to do now.
    pub(crate) fn lingering_work(&self) -> bool {
        (self.writable && self.unsent() > 0) || (self.unsent() == 0 && !self.shut) || self.readable
    }
}

/// Why a stream is corrupt, as a [`Cause`] named [`CORRUPT_STREAM`].
pub(crate) fn corrupt(e: &WireError) -> Cause {
    let text = match e {
        WireError::BadMagic(_) => "the bytes are not an io_msg frame (bad magic)",
        WireError::UnsupportedVersion(_) => "a frame of an unsupported protocol version",
        WireError::HeaderChecksum { .. } => "a frame header whose checksum does not match",
        WireError::UnknownOp(_) => "a frame of an unknown op",
        WireError::BadFlags { .. } => "a frame with unknown flags",
        WireError::TooLong { .. } => "a frame longer than the 1 MiB limit",
        _ => "a malformed frame header",
    };
    Cause {
        code: 0,
        name: CORRUPT_STREAM,
        text,
    }
}
