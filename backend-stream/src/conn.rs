//! One connection: its socket, its receive buffer cut into frames, its
//! bounded send buffer, and what the poller last said of it.

use std::io::{ErrorKind, Read, Write};
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
    /// Closed by the driver; its last frames (a `Bye`) still go out, and
    /// nothing is reported of it any more.
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
    /// The poller said writable (or this is new), and no write has since
    /// found the socket full.
    pub(crate) writable: bool,
    /// In the transport's queue of connections with something to report.
    pub(crate) queued: bool,
    /// Set at EOF or on an error; reported once the frames received
    /// before it are handed out.
    pub(crate) gone: Option<DisconnectReason>,
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
            writable: true,
            queued: false,
            gone: None,
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
                self.gone = Some(DisconnectReason::PeerClosed);
                0
            }
            Ok(n) => {
                // A short read emptied the socket: bytes that come later
                // raise a new edge, so no read is needed to find it empty.
                if n < READ_CHUNK {
                    self.readable = false;
                }
                n
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                self.readable = false;
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

    /// Writes what the socket takes now; returns whether it took anything.
    /// A broken connection drops its unsent bytes: the protocol replays.
    pub(crate) fn flush(&mut self) -> bool {
        let mut wrote = false;
        while self.gone.is_none() && self.writable && self.unsent() > 0 {
            match self.stream.write(&self.tx[self.tx_start..]) {
                Ok(0) => self.gone = Some(DisconnectReason::PeerFailed(Cause::UNKNOWN)),
                Ok(n) => {
                    self.tx_start += n;
                    wrote = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => self.writable = false,
                Err(e) => self.gone = Some(DisconnectReason::PeerFailed(cause(&e))),
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
