//! Which server connection each of an io_demo client's connections was,
//! from what both sides logged: a tag client logs the server's id for
//! the connection ("Remote id is …", the OURS of `iodemo_open`); an `-A`
//! client logs its endpoint's address ("created endpoint 0x…", the
//! THEIRS of `iodemo_open`, which the server reads from its io
//! messages). UCX hands endpoint addresses out again, so an `-A`
//! connection is matched to the server connection with its address that
//! opened while it was open ([`SLACK_US`] of clock difference allowed).
//! No address is needed: clients on one host, or behind one address,
//! are told apart.

use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The tag of a tag-API link (the server's id for the connection); an
/// `-A` link is the client's endpoint address, below it.
pub const TAG_LINK: u64 = 1 << 62;

/// Clocks of the client's and the server's hosts may differ this much
/// (and the server may take this long to read a connection's first
/// message); io_demo's retries come 200 ms apart in a soak.
pub const SLACK_US: u64 = 50_000;

/// One connection as io_demo's client log tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConn {
    /// io_demo's connection number (`#N`).
    pub number: u32,
    /// [`TAG_LINK`] | the server's id (tag API), or the endpoint's
    /// address (`-A`).
    pub link: Option<u64>,
    /// When io_demo made it and when it logged its disconnect (µs since
    /// the epoch, its clock; `u64::MAX`: no disconnect line).
    pub span_us: (u64, u64),
}

/// The connections an io_demo client's log (its stdout and stderr)
/// names, in the order it made them.
///
/// # Errors
///
/// The file could not be read.
pub fn read_client_conns(path: &Path) -> Result<Vec<ClientConn>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut conns: Vec<ClientConn> = Vec::new();
    let mut am = false;
    for line in text.lines() {
        if line.contains("created context") {
            am = line.trim_end().ends_with("with AM");
        }
        let Some(number) = conn_number(line) else {
            continue;
        };
        let at = match conns.iter().position(|c| c.number == number) {
            Some(i) => i,
            None => {
                conns.push(ClientConn {
                    number,
                    link: None,
                    span_us: (line_us(line), u64::MAX),
                });
                conns.len() - 1
            }
        };
        let c = &mut conns[at];
        if let Some(r) = word_after(line, "Remote id is ") {
            if let Ok(id) = r.trim_end_matches(',').parse::<u64>() {
                c.link = Some(TAG_LINK | id);
            }
        } else if let (true, Some(ep)) = (am, word_after(line, "created endpoint ")) {
            let ep = ep.trim_end_matches(',').trim_start_matches("0x");
            c.link = u64::from_str_radix(ep, 16).ok();
        }
        if line.contains("[DEMO] disconnecting ") {
            c.span_us.1 = line_us(line);
        }
    }
    Ok(conns)
}

/// The time an io_demo log line starts with, `[SECONDS.MICROS]`, in µs
/// (0 when it has none).
fn line_us(line: &str) -> u64 {
    let Some(t) = line.strip_prefix('[').and_then(|l| l.split(']').next()) else {
        return 0;
    };
    let (s, us) = t.split_once('.').unwrap_or((t, "0"));
    let us = format!("{us:0<6}");
    match (s.parse::<u64>(), us[..6].parse::<u64>()) {
        (Ok(s), Ok(us)) => s * 1_000_000 + us,
        _ => 0,
    }
}

/// `#N` of a `[UCX-connection 0x…: #N …]` prefix.
fn conn_number(line: &str) -> Option<u32> {
    let rest = line.split("[UCX-connection ").nth(1)?;
    let n = rest.split('#').nth(1)?;
    n.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn word_after<'a>(line: &'a str, what: &str) -> Option<&'a str> {
    line.split(what).nth(1)?.split_whitespace().next()
}

/// A server connection: its key and when it opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The connection's key in the audit.
    pub key: u64,
    /// When the server saw which API it speaks (µs since the epoch).
    pub at_us: u64,
}

/// The server instances' connections by link, oldest first.
#[derive(Clone, Debug, Default)]
pub struct ServerLinks {
    by_link: HashMap<u64, Vec<Opened>>,
}

impl ServerLinks {
    /// Reads the `iodemo_open` lines of `dir/NAME.log` for each of
    /// `names`.
    ///
    /// # Errors
    ///
    /// A file could not be read.
    pub fn read(dir: &Path, names: &[String]) -> Result<ServerLinks, String> {
        let mut s = ServerLinks::default();
        for name in names {
            super::super::each_line(&dir.join(format!("{name}.log")), |l| {
                if l.kind != "iodemo_open" {
                    return;
                }
                let w = &l.words;
                let hex = |i: usize| w.get(i).and_then(|x| u64::from_str_radix(x, 16).ok());
                let ours = w.get(3).and_then(|x| x.parse::<u64>().ok());
                let (Some(key), Some(ours), Some(theirs)) = (hex(0), ours, hex(4)) else {
                    return;
                };
                s.add(w.get(2).map(String::as_str), key, ours, theirs, l.at_us);
            })?;
        }
        for v in s.by_link.values_mut() {
            v.sort_by_key(|o| o.at_us);
        }
        Ok(s)
    }

    /// Adds a connection of API `api` (`tag`, `am` or `none`).
    pub fn add(&mut self, api: Option<&str>, key: u64, ours: u64, theirs: u64, at_us: u64) {
        let link = if api == Some("am") {
            theirs
        } else {
            TAG_LINK | ours
        };
        self.by_link
            .entry(link)
            .or_default()
            .push(Opened { key, at_us });
    }

    /// The server connection of each of `conns` (one client's, in
    /// order), each taken once.
    pub fn resolve(&self, conns: &[ClientConn], used: &mut HashSet<u64>) -> Vec<Option<u64>> {
        conns
            .iter()
            .map(|c| {
                let (from, to) = c.span_us;
                let link = c.link?;
                // A tag id is drawn at random per connection: it names
                // one; an endpoint address needs the time as well.
                let timed = link & TAG_LINK == 0;
                let found = self.by_link.get(&link)?.iter().find(|o| {
                    !used.contains(&o.key)
                        && (!timed
                            || (o.at_us + SLACK_US >= from
                                && o.at_us <= to.saturating_add(SLACK_US)))
                })?;
                used.insert(found.key);
                Some(found.key)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_endpoint_addresses_are_told_apart_by_time_and_tag_ids_by_value() {
        let dir = std::env::temp_dir().join(format!("iomsg-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("c.log");
        std::fs::write(
            &log,
            "[10.000000] [UCX] created context 0x1 with AM\n\
             [10.000001] [UCX-connection 0x9: #1 127.0.0.1:1] created endpoint 0x7f00, connection id 1\n\
             [12.000000] [DEMO] disconnecting [UCX-connection 0x9: #1 127.0.0.1:1] read 1/2 write 0/0 due to \"x\"\n\
             [12.100000] [UCX-connection 0x9: #2 127.0.0.1:1] created endpoint 0x7f00, connection id 2\n\
             [12.150000] [DEMO] disconnecting [UCX-connection 0x9: #2 127.0.0.1:1] read 0/3 write 0/0 due to \"y\"\n\
             [12.300000] [UCX-connection 0x9: #3 127.0.0.1:1] created endpoint 0x7f00, connection id 3\n",
        )
        .unwrap();
        let conns = read_client_conns(&log).unwrap();
        assert_eq!(conns.len(), 3);
        let mut s = ServerLinks::default();
        // Instance 0 saw #1; instance 1 saw #3 (#2 never reached one).
        s.add(Some("am"), 0xa, 0, 0x7f00, 10_000_500);
        s.add(Some("am"), 0xb, 0, 0x7f00, 12_400_000);
        s.add(Some("tag"), 0xc, 77, 5, 1);
        let mut used = HashSet::new();
        assert_eq!(
            s.resolve(&conns, &mut used),
            vec![Some(0xa), None, Some(0xb)]
        );
        let tag = [ClientConn {
            number: 1,
            link: Some(TAG_LINK | 77),
            span_us: (0, u64::MAX),
        }];
        assert_eq!(s.resolve(&tag, &mut used), vec![Some(0xc)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
