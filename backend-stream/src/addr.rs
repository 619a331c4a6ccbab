//! [`Addr`]: where a server listens and a client connects, TCP or a Unix
//! domain socket.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;

use iomsg_endpoint::{AddrError, ParseAddr, ToAddr};

/// A stream address: a TCP socket address or the path of a Unix domain
/// socket.
///
/// Parsed from `"127.0.0.1:7000"`, `"[::1]:7000"`, `"localhost:7000"` (the
/// first address the name resolves to) or `"unix:/run/app.sock"`, and
/// printed the same way.
///
/// ```
/// use iomsg_stream::Addr;
/// let tcp: Addr = "127.0.0.1:7000".parse()?;
/// let unix: Addr = "unix:/tmp/app.sock".parse()?;
/// assert_eq!(unix.to_string(), "unix:/tmp/app.sock");
/// # let _ = tcp;
/// # Ok::<(), iomsg_stream::AddrError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix domain socket's path.
    Unix(PathBuf),
}

/// The prefix that marks a Unix socket's path.
const UNIX_PREFIX: &str = "unix:";

/// The forms an [`Addr`] is written in, for errors.
const FORMS: &str = "HOST:PORT (127.0.0.1:7000) or unix:PATH";

impl FromStr for Addr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<Addr, AddrError> {
        let fail = |reason: String| AddrError {
            input: s.to_owned(),
            reason,
            expected: FORMS,
        };
        if let Some(path) = s.strip_prefix(UNIX_PREFIX) {
            if path.is_empty() {
                return Err(fail("the socket path is empty".into()));
            }
            return Ok(Addr::Unix(PathBuf::from(path)));
        }
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Addr::Tcp(addr));
        }
        let mut resolved = s.to_socket_addrs().map_err(|e| fail(e.to_string()))?;
        resolved
            .next()
            .map(Addr::Tcp)
            .ok_or_else(|| fail("the name resolved to no address".into()))
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp(a) => write!(f, "{a}"),
            Addr::Unix(p) => write!(f, "{UNIX_PREFIX}{}", p.display()),
        }
    }
}

impl From<SocketAddr> for Addr {
    fn from(a: SocketAddr) -> Addr {
        Addr::Tcp(a)
    }
}

impl ParseAddr for Addr {
    const FORMS: &'static str = FORMS;

    fn parse_addr(text: &str) -> Result<Addr, AddrError> {
        text.parse()
    }
}

impl ToAddr<Addr> for Addr {
    fn to_addr(&self) -> Result<Addr, AddrError> {
        Ok(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_both_kinds() {
        let tcp: Addr = "127.0.0.1:7000".parse().expect("tcp");
        assert_eq!(tcp, Addr::Tcp("127.0.0.1:7000".parse().expect("addr")));
        assert_eq!(tcp.to_string(), "127.0.0.1:7000");
        let unix: Addr = "unix:/tmp/x.sock".parse().expect("unix");
        assert_eq!(unix, Addr::Unix(PathBuf::from("/tmp/x.sock")));
        assert_eq!(unix.to_string(), "unix:/tmp/x.sock");
    }

    #[test]
    fn refuses_an_empty_path_and_garbage() {
        let e = "unix:".parse::<Addr>().expect_err("empty path");
        assert!(e.to_string().contains("empty"), "{e}");
        assert!(e.to_string().contains("unix:PATH"), "{e}");
        assert!("no port here".parse::<Addr>().is_err());
    }
}
