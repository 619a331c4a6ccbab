//! One io_demo client's operations across its connections and the server
//! instances that saw them: which it forgot at each disconnect, and why.
//!
//! io_demo's client numbers its operations with one counter (one server:
//! the sns of a connection follow the previous connection's), and at each
//! disconnect logs how many it forgets, `(Y-X)+(B-A)` of its `read X/Y
//! write A/B` line (counted since its last status report, when nothing
//! was in flight). The server's audit holds what each connection's
//! requests became: answered (records, in the order the answers were
//! posted), unanswered at the close (`iodemo_inflight`), or taken after
//! the close (`iodemo_late`). Between the last sn a connection's server
//! saw and the first the next connection's saw lie the sns that never
//! reached a server: the old connection's last ones and those of
//! connections that never reached one (io_demo's `-A` client sends on a
//! connection before a server took it; those are forgotten whole).
//!
//! Per disconnect this gives the operations certainly forgotten (never
//! arrived, unanswered, taken late) and, when io_demo's count is larger,
//! the answers that did not reach it: a connection delivers a prefix of
//! what was sent, so they are the last ones posted. The judge fails when
//! io_demo's count is below what is certain (it completed what no server
//! answered) or above what was even answered, when an sn is missing
//! inside the stretch a connection's server saw (lost on a live
//! connection), or when the sns between two connections are fewer than
//! the connections between them forgot.

use std::ops::Range;

use iomsg_core::iodemo::unwrap_sn;
use serde::Serialize;

/// One connection as io_demo's client log tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConn {
    /// io_demo's connection number (`#N`).
    pub number: u32,
    /// Its link to a server connection: the server's id for it (tag API,
    /// "Remote id is …") or its endpoint's address (`-A`, "created
    /// endpoint 0x…").
    pub link: Option<u64>,
    /// Its disconnect line: completed and sent reads and writes since the
    /// last report, and the reason.
    pub disconnect: Option<Disconnect>,
    /// When io_demo made it and when it logged its disconnect (µs since
    /// the epoch, its own clock).
    pub span_us: (u64, u64),
}

/// io_demo's `disconnecting … read X/Y write A/B due to "…"` line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Disconnect {
    /// Reads completed (X).
    pub reads_done: u64,
    /// Reads sent (Y).
    pub reads_sent: u64,
    /// Writes completed (A).
    pub writes_done: u64,
    /// Writes sent (B).
    pub writes_sent: u64,
    /// Why, as io_demo says.
    pub reason: String,
}

impl Disconnect {
    /// Operations io_demo forgets at this disconnect.
    pub fn forgotten(&self) -> u64 {
        self.reads_sent.saturating_sub(self.reads_done)
            + self.writes_sent.saturating_sub(self.writes_done)
    }
}

/// What the server instances saw of one connection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerConn {
    /// The connection's key in the audit.
    pub key: u64,
    /// When the server saw which API it speaks (µs since the epoch).
    pub opened_us: u64,
    /// Answered sns, in the order the answers were posted.
    pub answered: Vec<u32>,
    /// Requests unanswered when it closed.
    pub unanswered: Vec<u32>,
    /// Requests taken after it closed.
    pub late: Vec<u32>,
}

/// What one disconnect forgot, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Forgotten {
    /// io_demo's connection number.
    pub number: u32,
    /// The server connection's key (hex), if it reached a server.
    pub conn: Option<String>,
    /// io_demo's count.
    pub io_demo: u64,
    /// Sns that never reached a server (unwrapped: the low 32 bits are
    /// io_demo's).
    pub never_arrived: Option<Range<u64>>,
    /// Sns a server took and did not answer (at the close, or after it).
    pub unanswered: Vec<u32>,
    /// Answers posted that io_demo did not get: the last ones posted.
    pub answer_lost: Vec<u32>,
    /// The disconnect's reason.
    pub reason: String,
}

impl Forgotten {
    /// Operations named.
    pub fn named(&self) -> u64 {
        let never = self.never_arrived.as_ref().map_or(0, |r| r.end - r.start);
        never + self.unanswered.len() as u64 + self.answer_lost.len() as u64
    }
}

/// One client's verdict material.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Chain {
    /// Per disconnect with operations forgotten (and the last one).
    pub forgotten: Vec<Forgotten>,
    /// Operations answered by a server over the run.
    pub answered: u64,
    /// Why the chain does not add up, if it does not.
    pub failures: Vec<String>,
}

/// Follows a client's connections; `server[i]` is what the servers saw
/// of `conns[i]` (see [`ServerAudit::resolve`]).
pub fn follow(conns: &[ClientConn], server: &[Option<&ServerConn>]) -> Chain {
    let mut chain = Chain::default();
    // The connections a server saw, each with its sns unwrapped on one
    // line, and the unlinked ones between them.
    let mut near: Option<u64> = None;
    let mut seen: Vec<(usize, Vec<u64>)> = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        let Some(s) = server.get(i).copied().flatten() else {
            continue;
        };
        let _ = c;
        let raw = s.answered.iter().chain(&s.unanswered).chain(&s.late);
        let mut sns: Vec<u64> = Vec::new();
        for &sn in raw {
            let u = unwrap_sn(near.unwrap_or((1 << 32) | u64::from(sn)), sn);
            sns.push(u);
        }
        sns.sort_unstable();
        sns.dedup();
        if let Some(&last) = sns.last() {
            near = Some(last);
            chain.answered += s.answered.len() as u64;
            seen.push((i, sns));
        }
    }
    for (k, (i, sns)) in seen.iter().enumerate() {
        let next = seen.get(k + 1);
        let between = next.map_or(&conns[i + 1..], |(j, _)| &conns[i + 1..*j]);
        let gap_end = next.map(|(_, n)| n[0]);
        let s = server[*i].expect("seen connections have a server side");
        judge_conn(&mut chain, &conns[*i], s, sns, between, gap_end);
    }
    chain
}

/// One connection a server saw, the unlinked ones after it, and the
/// first sn of the next one a server saw (`None`: the last).
fn judge_conn(
    chain: &mut Chain,
    c: &ClientConn,
    s: &ServerConn,
    sns: &[u64],
    between: &[ClientConn],
    gap_end: Option<u64>,
) {
    let (lo, hi) = (sns[0], sns[sns.len() - 1]);
    let holes = (hi - lo + 1) - sns.len() as u64;
    if holes > 0 {
        chain.failures.push(format!(
            "connection #{}: {holes} sns in {lo}..={hi} never reached the server although later ones did (lost on a live connection)",
            c.number
        ));
    }
    let others: u64 = between
        .iter()
        .filter_map(|b| b.disconnect.as_ref())
        .map(Disconnect::forgotten)
        .sum();
    let gap = gap_end.map_or(0, |e| e.saturating_sub(hi + 1));
    if gap < others {
        chain.failures.push(format!(
            "after connection #{}: {gap} sns never reached a server, but the {} connections that never reached one forgot {others}",
            c.number,
            between.len()
        ));
    }
    let own = gap.saturating_sub(others);
    let mut f = Forgotten {
        number: c.number,
        conn: Some(format!("{:016x}", s.key)),
        io_demo: c.disconnect.as_ref().map_or(0, Disconnect::forgotten),
        reason: c
            .disconnect
            .as_ref()
            .map_or_else(String::new, |d| d.reason.clone()),
        ..Default::default()
    };
    if own > 0 {
        f.never_arrived = Some(hi + 1..hi + 1 + own);
    }
    f.unanswered = s.unanswered.iter().chain(&s.late).copied().collect();
    let certain = own + f.unanswered.len() as u64;
    let lost = f.io_demo.checked_sub(certain);
    match lost {
        None => chain.failures.push(format!(
            "connection #{}: io_demo forgot {} operations but {certain} were never answered",
            c.number, f.io_demo
        )),
        Some(n) if n as usize > s.answered.len() => chain.failures.push(format!(
            "connection #{}: io_demo forgot {} operations; only {certain} were not answered and {} were",
            c.number,
            f.io_demo,
            s.answered.len()
        )),
        Some(n) => {
            let from = s.answered.len() - n as usize;
            f.answer_lost = s.answered[from..].to_vec();
        }
    }
    if f.io_demo > 0 || certain > 0 {
        chain.forgotten.push(f);
    }
    let mut next = hi + 1 + own;
    for b in between {
        let n = b.disconnect.as_ref().map_or(0, Disconnect::forgotten);
        if n == 0 {
            continue;
        }
        chain.forgotten.push(Forgotten {
            number: b.number,
            conn: None,
            io_demo: n,
            never_arrived: Some(next..next + n),
            reason: b
                .disconnect
                .as_ref()
                .map_or_else(String::new, |d| d.reason.clone()),
            ..Default::default()
        });
        next += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn conn(number: u32, link: Option<u64>, done_sent: (u64, u64)) -> ClientConn {
        ClientConn {
            number,
            link,
            span_us: (0, 0),
            disconnect: Some(Disconnect {
                reads_done: 0,
                reads_sent: 0,
                writes_done: done_sent.0,
                writes_sent: done_sent.1,
                reason: "x".into(),
            }),
        }
    }

    fn server(key: u64, answered: Range<u32>, unanswered: &[u32]) -> ServerConn {
        ServerConn {
            key,
            opened_us: 0,
            answered: answered.collect(),
            unanswered: unanswered.to_vec(),
            late: Vec::new(),
        }
    }

    #[test]
    fn a_kill_forgets_the_unanswered_the_never_arrived_and_the_last_answers() {
        // #1 answered 100..110, left 110 unanswered; 111..113 never
        // arrived; io_demo forgot 6: so the last 3 answers were lost.
        // #2 never reached a server and forgot 4 (113..117); #3 goes on.
        let conns = vec![
            conn(1, Some(7), (10, 16)),
            conn(2, None, (0, 4)),
            conn(3, Some(8), (3, 3)),
        ];
        let mut s = HashMap::new();
        s.insert(7, server(0xa, 100..110, &[110]));
        s.insert(8, server(0xb, 117..120, &[]));
        let resolved: Vec<Option<&ServerConn>> = conns
            .iter()
            .map(|c| c.link.and_then(|l| s.get(&l)))
            .collect();
        let chain = follow(&conns, &resolved);
        assert!(chain.failures.is_empty(), "{:?}", chain.failures);
        let f = &chain.forgotten[0];
        assert_eq!(f.never_arrived, Some((1 << 32) + 111..(1 << 32) + 113));
        assert_eq!(f.unanswered, vec![110]);
        assert_eq!(f.answer_lost, vec![107, 108, 109]);
        assert_eq!(f.named(), 6);
        assert_eq!(
            chain.forgotten[1].never_arrived,
            Some((1 << 32) + 113..(1 << 32) + 117)
        );
        assert_eq!(chain.answered, 13);
    }

    #[test]
    fn a_hole_on_a_live_connection_fails_and_so_do_counts_out_of_bounds() {
        let conns = vec![conn(1, Some(7), (9, 10)), conn(2, Some(8), (0, 0))];
        let mut s = HashMap::new();
        // 104 missing inside 100..=109.
        let mut a = server(0xa, 100..110, &[]);
        a.answered.retain(|&x| x != 104);
        s.insert(7, a);
        s.insert(8, server(0xb, 110..112, &[]));
        let resolved: Vec<Option<&ServerConn>> = conns
            .iter()
            .map(|c| c.link.and_then(|l| s.get(&l)))
            .collect();
        let chain = follow(&conns, &resolved);
        assert!(chain
            .failures
            .iter()
            .any(|f| f.contains("lost on a live connection")));
        // io_demo says it forgot 1 though nothing was unanswered and 9
        // answers exist: within bounds (the last answer lost).
        assert!(!chain.failures.iter().any(|f| f.contains("only")));

        let conns = vec![conn(1, Some(7), (10, 10)), conn(2, Some(8), (0, 0))];
        let mut s = HashMap::new();
        s.insert(7, server(0xa, 100..110, &[110]));
        s.insert(8, server(0xb, 111..112, &[]));
        let resolved: Vec<Option<&ServerConn>> = conns
            .iter()
            .map(|c| c.link.and_then(|l| s.get(&l)))
            .collect();
        let chain = follow(&conns, &resolved);
        assert!(
            chain.failures.iter().any(|f| f.contains("never answered")),
            "{:?}",
            chain.failures
        );
    }
}

/// The tag of a tag-API link (the server's id for the connection); an
/// `-A` link is the client's endpoint address, below it.
pub const TAG_LINK: u64 = 1 << 62;

/// What an io_demo client's log says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientLog {
    /// Its connections, in the order it made them.
    pub conns: Vec<ClientConn>,
    /// Its `Client exit with status '…'`, if it got there.
    pub exit: Option<String>,
    /// Lines that say `ERROR` or `Assertion` (its `-q` checks among them).
    pub errors: Vec<String>,
}

/// Reads an io_demo client's log (its stdout and stderr).
///
/// # Errors
///
/// The file could not be read.
pub fn read_client_log(path: &std::path::Path) -> Result<ClientLog, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut log = ClientLog::default();
    let mut am = false;
    for line in text.lines() {
        if line.contains("created context") {
            am = line.trim_end().ends_with("with AM");
        }
        if line.contains("ERROR") || line.contains("Assertion") {
            log.errors.push(line.chars().take(300).collect());
        }
        if let Some(rest) = line.split("Client exit with status '").nth(1) {
            log.exit = Some(rest.trim_end_matches('\'').to_string());
        }
        let Some(number) = conn_number(line) else {
            continue;
        };
        let at = match log.conns.iter().position(|c| c.number == number) {
            Some(i) => i,
            None => {
                log.conns.push(ClientConn {
                    number,
                    link: None,
                    disconnect: None,
                    span_us: (line_us(line), u64::MAX),
                });
                log.conns.len() - 1
            }
        };
        let c = &mut log.conns[at];
        if let Some(r) = word_after(line, "Remote id is ") {
            if let Ok(id) = r.trim_end_matches(',').parse::<u64>() {
                c.link = Some(TAG_LINK | id);
            }
        } else if let (true, Some(ep)) = (am, word_after(line, "created endpoint ")) {
            let ep = ep.trim_end_matches(',').trim_start_matches("0x");
            c.link = u64::from_str_radix(ep, 16).ok();
        }
        if line.contains("[DEMO] disconnecting ") {
            c.disconnect = parse_disconnect(line);
            c.span_us.1 = line_us(line);
        }
    }
    Ok(log)
}

/// The time an io_demo log line starts with, `[SECONDS.MICROS]`, in µs
/// (0 when it has none).
fn line_us(line: &str) -> u64 {
    let Some(t) = line.strip_prefix('[').and_then(|l| l.split(']').next()) else {
        return 0;
    };
    let (s, us) = t.split_once('.').unwrap_or((t, "0"));
    let (Ok(s), Ok(us)) = (s.parse::<u64>(), format!("{us:0<6}")[..6].parse::<u64>()) else {
        return 0;
    };
    s * 1_000_000 + us
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

fn parse_disconnect(line: &str) -> Option<Disconnect> {
    let pair = |what: &str| -> Option<(u64, u64)> {
        let w = word_after(line, what)?;
        let (a, b) = w.split_once('/')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let (reads_done, reads_sent) = pair("] read ")?;
    let (writes_done, writes_sent) = pair(" write ")?;
    let reason = line
        .split("due to \"")
        .nth(1)?
        .trim_end_matches('"')
        .to_string();
    Some(Disconnect {
        reads_done,
        reads_sent,
        writes_done,
        writes_sent,
        reason,
    })
}

/// What every server instance's audit says, by link.
#[derive(Clone, Debug, Default)]
pub struct ServerAudit {
    /// Connections by link ([`TAG_LINK`] | the server's id, or the
    /// client's endpoint address, which UCX hands out again: several),
    /// oldest first.
    pub by_link: std::collections::HashMap<u64, Vec<ServerConn>>,
    /// Lines that are failures wherever they appear (`iodemo_gap`,
    /// `iodemo_dup`, `corrupt`, `iodemo_bad`), with their instance.
    pub bad_lines: Vec<String>,
}

/// Reads the audit files `dir/NAME.log` and `dir/NAME.records` of each
/// server instance in `names`.
///
/// # Errors
///
/// A file could not be read.
pub fn read_server_audit(dir: &std::path::Path, names: &[String]) -> Result<ServerAudit, String> {
    use std::collections::HashMap;
    let mut audit = ServerAudit::default();
    let mut link_of: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut conns: HashMap<u64, ServerConn> = HashMap::new();
    for name in names {
        super::each_line(&dir.join(format!("{name}.log")), |l| {
            let w = &l.words;
            let hex = |i: usize| w.get(i).and_then(|s| u64::from_str_radix(s, 16).ok());
            let num = |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok());
            match l.kind.as_str() {
                "iodemo_open" => {
                    let (Some(key), Some(ours), Some(theirs)) = (hex(0), num(3), hex(4)) else {
                        return;
                    };
                    let link = if w.get(2).map(String::as_str) == Some("am") {
                        theirs
                    } else {
                        TAG_LINK | ours
                    };
                    link_of.insert(key, (link, l.at_us));
                    conns.entry(key).or_default().key = key;
                }
                "iodemo_inflight" => {
                    if let (Some(key), Some(sn)) = (hex(0), num(2)) {
                        conns.entry(key).or_default().unanswered.push(sn as u32);
                    }
                }
                "iodemo_late" => {
                    if let (Some(sn), Some(key)) = (num(1), hex(2)) {
                        conns.entry(key).or_default().late.push(sn as u32);
                    }
                }
                "iodemo_gap" | "iodemo_dup" | "corrupt" | "iodemo_bad" => audit
                    .bad_lines
                    .push(format!("{name}: {} {}", l.kind, w.join(" "))),
                _ => {}
            }
        })?;
        let path = dir.join(format!("{name}.records"));
        let bytes = std::fs::read(&path).unwrap_or_default();
        for r in crate::common::Record::all(&bytes) {
            conns
                .entry(r.session)
                .or_default()
                .answered
                .push(r.sn as u32);
        }
    }
    for (key, mut c) in conns {
        c.key = key;
        if let Some(&(link, at)) = link_of.get(&key) {
            c.opened_us = at;
            audit.by_link.entry(link).or_default().push(c);
        }
    }
    for v in audit.by_link.values_mut() {
        v.sort_by_key(|c| c.opened_us);
    }
    Ok(audit)
}

/// Clocks of the client's and the server's hosts may differ this much
/// (and the server may take this long to read a connection's first
/// message): an `-A` client's connection is matched to the server
/// connection with its endpoint address that opened while it was open,
/// and io_demo's retries come 200 ms apart in a soak.
pub const SLACK_US: u64 = 50_000;

impl ServerAudit {
    /// What the servers saw of each of `conns`: the connection with its
    /// link opened while it was open (an `-A` client's endpoint addresses
    /// come back, so the link alone is not enough), each taken once.
    pub fn resolve(&self, conns: &[ClientConn]) -> Vec<Option<&ServerConn>> {
        let mut used: std::collections::HashSet<u64> = std::collections::HashSet::new();
        conns
            .iter()
            .map(|c| {
                let (from, to) = c.span_us;
                let found = self.by_link.get(&c.link?)?.iter().find(|s| {
                    !used.contains(&s.key)
                        && s.opened_us + SLACK_US >= from
                        && s.opened_us <= to.saturating_add(SLACK_US)
                })?;
                used.insert(found.key);
                Some(found)
            })
            .collect()
    }
}
