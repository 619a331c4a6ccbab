//! The sockets under the transport: a TCP or Unix stream, a TCP or Unix
//! listener, all non-blocking (mio's), and what an `io::Error` means to
//! the core.

use std::io::{self, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use iomsg_core::transport::Cause;
use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use crate::Addr;

/// A connected (or connecting) stream.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Starts connecting to `addr` without waiting.
    pub(crate) fn connect(addr: &Addr) -> io::Result<Stream> {
        match addr {
            Addr::Tcp(a) => TcpStream::connect(*a).map(Stream::Tcp),
            Addr::Unix(p) => UnixStream::connect(p).map(Stream::Unix),
        }
    }

    /// `Ok(true)` once connected, `Ok(false)` while connecting, the
    /// connection's error if it failed.
    pub(crate) fn connected(&self) -> io::Result<bool> {
        let (error, peer) = match self {
            Stream::Tcp(s) => (s.take_error(), s.peer_addr().map(drop)),
            Stream::Unix(s) => (s.take_error(), s.peer_addr().map(drop)),
        };
        if let Some(e) = error? {
            return Err(e);
        }
        match peer {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sends each frame as soon as it is written (TCP); nothing to do for
    /// a Unix socket.
    pub(crate) fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nodelay(true),
            Stream::Unix(_) => Ok(()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

/// A listening socket. A Unix one removes its socket file when dropped.
#[derive(Debug)]
pub(crate) enum Listen {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listen {
    /// Listens on `addr`. A Unix socket file that nothing listens on any
    /// more (left by a server that was killed) is replaced; one that a
    /// live server holds is not.
    pub(crate) fn bind(addr: &Addr) -> io::Result<Listen> {
        match addr {
            Addr::Tcp(a) => TcpListener::bind(*a).map(Listen::Tcp),
            Addr::Unix(p) => {
                match UnixListener::bind(p) {
                    Err(e) if e.kind() == ErrorKind::AddrInUse && stale(p) => {
                        std::fs::remove_file(p)?;
                    }
                    other => return other.map(|l| Listen::Unix(l, p.clone())),
                }
                UnixListener::bind(p).map(|l| Listen::Unix(l, p.clone()))
            }
        }
    }

    /// The address it listens on (the port chosen, for port 0).
    pub(crate) fn local_addr(&self) -> io::Result<Addr> {
        match self {
            Listen::Tcp(l) => l.local_addr().map(Addr::Tcp),
            Listen::Unix(_, p) => Ok(Addr::Unix(p.clone())),
        }
    }

    /// The next connection waiting, `Ok(None)` when none is.
    pub(crate) fn accept(&self) -> io::Result<Option<Stream>> {
        let accepted = match self {
            Listen::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
            Listen::Unix(l, _) => l.accept().map(|(s, _)| Stream::Unix(s)),
        };
        match accepted {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Listen {
    fn drop(&mut self) {
        if let Listen::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Source for Listen {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listen::Tcp(l) => l.register(r, t, i),
            Listen::Unix(l, _) => l.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Listen::Tcp(l) => l.reregister(r, t, i),
            Listen::Unix(l, _) => l.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Listen::Tcp(l) => l.deregister(r),
            Listen::Unix(l, _) => l.deregister(r),
        }
    }
}

/// Whether the Unix socket at `path` is a leftover: a socket file that
/// refuses connections.
fn stale(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    is_socket
        && matches!(
            std::os::unix::net::UnixStream::connect(path),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused
        )
}

/// An `io::Error` as the core's [`Cause`]: the OS error number, its name
/// and what it means, for the common ones.
pub(crate) fn cause(e: &io::Error) -> Cause {
    let (name, text) = match e.kind() {
        ErrorKind::ConnectionRefused => ("ECONNREFUSED", "connection refused"),
        ErrorKind::ConnectionReset => ("ECONNRESET", "connection reset by peer"),
        ErrorKind::ConnectionAborted => ("ECONNABORTED", "connection aborted"),
        ErrorKind::BrokenPipe => ("EPIPE", "broken pipe"),
        ErrorKind::NotFound => ("ENOENT", "no such socket file"),
        ErrorKind::TimedOut => ("ETIMEDOUT", "timed out"),
        ErrorKind::HostUnreachable => ("EHOSTUNREACH", "host unreachable"),
        ErrorKind::NetworkUnreachable => ("ENETUNREACH", "network unreachable"),
        ErrorKind::AddrNotAvailable => ("EADDRNOTAVAIL", "address not available"),
        ErrorKind::PermissionDenied => ("EACCES", "permission denied"),
        ErrorKind::WouldBlock => ("EAGAIN", "the listener's backlog is full"),
        _ => ("", "socket error"),
    };
    Cause {
        code: e.raw_os_error().unwrap_or(0),
        name,
        text,
    }
}
