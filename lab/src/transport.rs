//! Which backend carries a server's or client's frames: `--transport
//! ucx|tcp|unix` ([`Transport`]), and the address it takes ([`Place`]).

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

#[cfg(feature = "ucx")]
pub use iomsg_ucx::Api;

/// The UCX API (`--api am|tag`), named where this build has no UCX: the
/// flag is taken and ignored by tcp and unix.
#[cfg(not(feature = "ucx"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// Active messages.
    Am,
    /// Tag matching.
    #[default]
    Tag,
}

#[cfg(not(feature = "ucx"))]
impl Api {
    /// Its name on a command line: `am` or `tag`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Api::Am => "am",
            Api::Tag => "tag",
        }
    }
}

#[cfg(not(feature = "ucx"))]
impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(not(feature = "ucx"))]
impl FromStr for Api {
    type Err = String;

    fn from_str(s: &str) -> Result<Api, String> {
        match s {
            "am" => Ok(Api::Am),
            "tag" => Ok(Api::Tag),
            _ => Err(format!("unknown UCX API '{s}': expected am or tag")),
        }
    }
}

/// The backend the command speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UCX tag matching or active messages (`--api`), over tcp or shared
    /// memory: the default where the command was built with UCX.
    Ucx,
    /// Plain TCP (`iomsg-stream`).
    Tcp,
    /// A Unix domain socket (`iomsg-stream`); addresses are `unix:PATH`.
    Unix,
}

impl Default for Transport {
    /// UCX where this build has it (feature `ucx`), TCP otherwise.
    fn default() -> Transport {
        if cfg!(feature = "ucx") {
            Transport::Ucx
        } else {
            Transport::Tcp
        }
    }
}

impl Transport {
    /// Its name on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Transport::Ucx => "ucx",
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
        }
    }

    /// Whether it is UCX.
    #[must_use]
    pub fn is_ucx(self) -> bool {
        self == Transport::Ucx
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Transport, String> {
        match s {
            "ucx" => Ok(Transport::Ucx),
            "tcp" => Ok(Transport::Tcp),
            "unix" => Ok(Transport::Unix),
            _ => Err(format!("unknown transport {s:?}: write ucx, tcp or unix")),
        }
    }
}

/// Where a server listens or a client connects, for its transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A UCX listener's or peer's socket address.
    Ucx(SocketAddr),
    /// A TCP or Unix socket (`iomsg-stream`'s address).
    Stream(iomsg_stream::Addr),
}

impl Place {
    /// `text` (`HOST:PORT`, or `unix:PATH` for `unix`) for `transport`;
    /// `port` is used when `text` has none.
    ///
    /// # Errors
    ///
    /// The text does not name an address of that transport; the error
    /// says which forms it takes.
    pub fn parse(transport: Transport, text: &str, port: u16) -> Result<Place, String> {
        match transport {
            Transport::Unix => {
                if !text.starts_with("unix:") {
                    return Err(format!(
                        "bad address {text:?} for --transport unix: write unix:PATH"
                    ));
                }
                text.parse().map(Place::Stream).map_err(|e| e.to_string())
            }
            Transport::Ucx | Transport::Tcp => {
                let addr = crate::args::server_addr(text, port)?;
                Ok(match transport {
                    Transport::Ucx => Place::Ucx(addr),
                    _ => Place::Stream(iomsg_stream::Addr::Tcp(addr)),
                })
            }
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Ucx(a) => write!(f, "{a}"),
            Place::Stream(a) => write!(f, "{a}"),
        }
    }
}

/// The error of a command asked for UCX in a build without it.
pub const NO_UCX: &str = "this iomsg was built without UCX (cargo feature `ucx`): use \
                          --transport tcp or --transport unix, or build with the default features";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_addresses_follow_the_transport() {
        assert_eq!(Transport::default().is_ucx(), cfg!(feature = "ucx"));
        for t in [Transport::Ucx, Transport::Tcp, Transport::Unix] {
            assert_eq!(t.name().parse::<Transport>(), Ok(t));
        }
        assert!("rdma"
            .parse::<Transport>()
            .unwrap_err()
            .contains("ucx, tcp or unix"));
        let ucx = Place::parse(Transport::Ucx, "127.0.0.1", 7000).unwrap();
        assert_eq!(ucx.to_string(), "127.0.0.1:7000");
        assert!(matches!(ucx, Place::Ucx(_)));
        let tcp = Place::parse(Transport::Tcp, "127.0.0.1:7001", 1).unwrap();
        assert_eq!(tcp.to_string(), "127.0.0.1:7001");
        assert!(matches!(tcp, Place::Stream(_)));
        let unix = Place::parse(Transport::Unix, "unix:/tmp/x.sock", 1).unwrap();
        assert_eq!(unix.to_string(), "unix:/tmp/x.sock");
        let e = Place::parse(Transport::Unix, "127.0.0.1:1", 1).unwrap_err();
        assert!(e.contains("unix:PATH"), "{e}");
    }
}
