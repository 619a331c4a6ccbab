//! Parsers for the command line's values: sizes with K/M/G suffixes, size
//! ranges, durations, retry counts, operation lists, on/off.

use core::time::Duration;

/// A byte count: `512`, `4K`, `1.5M`, `2G` (binary multiples, any case).
///
/// # Errors
///
/// Not a non-negative number with an optional K, M or G suffix, or past
/// `u64`.
pub fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let bad = || format!("{s:?} is not a size (a number with an optional K, M or G suffix)");
    if num.is_empty() || num.starts_with(['-', '+']) {
        return Err(bad());
    }
    if let Ok(n) = num.parse::<u64>() {
        return n
            .checked_mul(mult)
            .ok_or_else(|| format!("{s:?} is too large"));
    }
    let f: f64 = num.parse().map_err(|_| bad())?;
    let bytes = f * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(format!("{s:?} is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// A range of sizes, `MIN:MAX` or one size for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeRange {
    /// Smallest, inclusive.
    pub min: u64,
    /// Largest, inclusive.
    pub max: u64,
}

impl core::str::FromStr for SizeRange {
    type Err = String;
    fn from_str(s: &str) -> Result<SizeRange, String> {
        let (min, max) = match s.split_once(':') {
            Some((a, b)) => (size(a)?, size(b)?),
            None => {
                let n = size(s)?;
                (n, n)
            }
        };
        if min > max {
            return Err(format!("{s:?}: the minimum is larger than the maximum"));
        }
        Ok(SizeRange { min, max })
    }
}

impl core::fmt::Display for SizeRange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}:{}", self.min, self.max)
    }
}

/// A duration: `17.5s`, `250ms`, `10m`, `1.5h`, `100us`; a bare number is
/// seconds.
///
/// # Errors
///
/// Not a non-negative number with an optional unit.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let per = match unit {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "{s:?} is not a duration (a number with s, ms, us, m or h)"
            ))
        }
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (a number with s, ms, us, m or h)"))?;
    let secs = n * per;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("{s:?} is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// How many times to retry: a count or `inf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retries {
    /// At most this many consecutive failed attempts.
    Count(u32),
    /// Never give up.
    Infinite,
}

impl Retries {
    /// As the client session's `max_retries`.
    pub fn max(self) -> u32 {
        match self {
            Retries::Count(n) => n,
            Retries::Infinite => u32::MAX,
        }
    }
}

impl core::str::FromStr for Retries {
    type Err = String;
    fn from_str(s: &str) -> Result<Retries, String> {
        if s.eq_ignore_ascii_case("inf") {
            return Ok(Retries::Infinite);
        }
        s.parse()
            .map(Retries::Count)
            .map_err(|_| format!("{s:?} is not a retry count (a number or `inf`)"))
    }
}

/// One kind of io_demo operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The client sends the data; the server takes it.
    Write,
    /// The client asks for data; the server answers with it.
    Read,
}

/// A list of operations, `read,write`; each message picks one at random.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ops(pub Vec<Op>);

impl core::str::FromStr for Ops {
    type Err = String;
    fn from_str(s: &str) -> Result<Ops, String> {
        let mut ops = Vec::new();
        for part in s.split(',') {
            let op = match part.trim() {
                "write" | "w" => Op::Write,
                "read" | "r" => Op::Read,
                other => {
                    return Err(format!(
                        "{other:?} is not an operation (read or write, comma-separated)"
                    ))
                }
            };
            if !ops.contains(&op) {
                ops.push(op);
            }
        }
        Ok(Ops(ops))
    }
}

/// `on` or `off`.
///
/// # Errors
///
/// Anything else.
pub fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "yes" | "true" => Ok(true),
        "off" | "no" | "false" => Ok(false),
        _ => Err(format!("{s:?} is neither on nor off")),
    }
}

/// A server's address, `HOST[:PORT]` (`port` when none is given); IPv6
/// in brackets, `[::1]:1337`.
///
/// # Errors
///
/// Not an address, or a host name that does not resolve.
pub fn server_addr(s: &str, port: u16) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse::<std::net::SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
        return Ok(std::net::SocketAddr::new(ip, port));
    }
    let with_port = if s.contains(':') {
        s.to_string()
    } else {
        format!("{s}:{port}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|e| format!("{s:?} is not a server address: {e}"))?
        .next()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_nonsense() {
        assert_eq!(size("512"), Ok(512));
        assert_eq!(size("4K"), Ok(4096));
        assert_eq!(size("4k"), Ok(4096));
        assert_eq!(size("1.5M"), Ok(1_572_864));
        assert_eq!(size("2G"), Ok(2 << 30));
        for bad in ["", "K", "-1", "1.3", "4X", "abc", "99999999999999999999G"] {
            assert!(size(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ranges_are_min_colon_max_or_one_size() {
        assert_eq!("64:4K".parse(), Ok(SizeRange { min: 64, max: 4096 }));
        assert_eq!(
            "1M".parse(),
            Ok(SizeRange {
                min: 1 << 20,
                max: 1 << 20
            })
        );
        assert!("4K:64".parse::<SizeRange>().is_err());
        assert!("1:2:3".parse::<SizeRange>().is_err());
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(duration("17.5s"), Ok(Duration::from_millis(17_500)));
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("3"), Ok(Duration::from_secs(3)));
        for bad in ["", "s", "-1s", "1d", "1e400", "fast"] {
            assert!(duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn retries_are_a_count_or_inf() {
        assert_eq!("inf".parse(), Ok(Retries::Infinite));
        assert_eq!("20".parse(), Ok(Retries::Count(20)));
        assert_eq!(Retries::Infinite.max(), u32::MAX);
        assert!("-1".parse::<Retries>().is_err());
        assert!("many".parse::<Retries>().is_err());
    }

    #[test]
    fn ops_are_a_comma_list_of_read_and_write() {
        assert_eq!("read,write".parse(), Ok(Ops(vec![Op::Read, Op::Write])));
        assert_eq!("write".parse(), Ok(Ops(vec![Op::Write])));
        assert!("write,erase".parse::<Ops>().is_err());
        assert!("".parse::<Ops>().is_err());
    }

    #[test]
    fn server_addresses_take_a_default_port() {
        assert_eq!(
            server_addr("127.0.0.1", 1337).map(|a| a.to_string()),
            Ok("127.0.0.1:1337".into())
        );
        assert_eq!(
            server_addr("127.0.0.1:9", 1337).map(|a| a.to_string()),
            Ok("127.0.0.1:9".into())
        );
        assert_eq!(
            server_addr("::1", 7).map(|a| a.to_string()),
            Ok("[::1]:7".into())
        );
        assert!(server_addr("no such host..", 1).is_err());
    }
}
