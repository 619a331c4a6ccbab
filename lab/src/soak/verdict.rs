//! The fault soak's own checks, beside the audit's loss checks: how every
//! server instance ended, how long each client's acknowledgements stalled
//! after each fault, the server's peak memory, and whether every client
//! finished.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

/// What caused an outage or a stall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The soak SIGKILLed the server (until the next instance listens).
    ServerKill,
    /// A server instance died by itself (until the next one listens).
    ServerDied,
    /// The soak SIGSTOPped the server (until SIGCONT).
    ServerPause,
    /// The soak SIGKILLed a client and started a new one (as a stall's
    /// kind: another client's).
    ClientKill,
    /// The soak SIGSTOPped a client until SIGCONT (as a stall's kind:
    /// another client).
    ClientPause,
    /// A client's link was down (as a stall's kind: another client's).
    LinkCut,
    /// As a stall's kind: the client's own pause.
    OwnPause,
    /// As a stall's kind: the client's own link cut.
    OwnLinkCut,
    /// The hostile peer ran.
    Hostile,
    /// A client process's first acknowledgement after the soak started
    /// it at the beginning of the run.
    Start,
    /// A client process's first acknowledgement after the soak started
    /// it in a killed client's place.
    Restart,
    /// No fault near it.
    None,
}

impl Kind {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ServerKill => "server-kill",
            Kind::ServerDied => "server-died",
            Kind::ServerPause => "server-pause",
            Kind::ClientKill => "client-kill",
            Kind::ClientPause => "client-pause",
            Kind::LinkCut => "link-cut",
            Kind::OwnPause => "own-pause",
            Kind::OwnLinkCut => "own-link-cut",
            Kind::Hostile => "hostile",
            Kind::Start => "start",
            Kind::Restart => "restart",
            Kind::None => "none",
        }
    }

    fn on_server(self) -> bool {
        matches!(
            self,
            Kind::ServerKill | Kind::ServerDied | Kind::ServerPause
        )
    }
}

/// One fault as it happened: what, to which client (none: the server or
/// the hostile peer), from when to when (microseconds since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// What.
    pub kind: Kind,
    /// The client slot it was done to.
    pub client: Option<usize>,
    /// When it began.
    pub from_us: u64,
    /// When it ended (a kill: when the new process was started or, for
    /// the server, listened).
    pub to_us: u64,
}

impl Event {
    /// Whether no client can make progress through it: the server was
    /// down or stopped. A client's own pause and link cut are outages of
    /// that client alone ([`Event::outage_of`]).
    fn outage_of(&self, slot: usize) -> bool {
        self.kind.on_server()
            || (matches!(self.kind, Kind::ClientPause | Kind::LinkCut) && self.client == Some(slot))
    }
}

/// One client process's life as the stall check sees it.
#[derive(Clone, Debug)]
pub struct Life {
    /// Its audit name.
    pub name: String,
    /// Its client slot.
    pub slot: usize,
    /// When the soak started it.
    pub from_us: u64,
    /// When it stops counting: the soak killed it, or began to stop the
    /// run.
    pub to_us: u64,
    /// Whether it took the place of a killed client.
    pub restarted: bool,
    /// Its `sample` lines: (time, acknowledged so far).
    pub samples: Vec<(u64, u64)>,
}

/// How long acknowledgements may stall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// After the server was paused, killed or died, after the client's
    /// own pause or link cut, and for a client's first acknowledgement:
    /// the silence timeout plus the reconnect budget, counted once the
    /// outage itself is over.
    #[serde(rename = "recovery_ms", serialize_with = "ms")]
    pub recovery: Duration,
    /// Otherwise (another client killed, paused or cut, the hostile peer,
    /// or no fault at all).
    #[serde(rename = "isolation_ms", serialize_with = "ms")]
    pub isolation: Duration,
}

fn ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

/// One span without acknowledgement progress.
#[derive(Clone, Debug, Serialize)]
pub struct Stall {
    /// The client process.
    pub client: String,
    /// From the last progress seen (microseconds since the epoch).
    pub from_us: u64,
    /// To the next.
    pub to_us: u64,
    /// Its length less the outages it spans (the server down or stopped,
    /// the client's own pause or cut), in milliseconds.
    pub stalled_ms: f64,
    /// The outages taken off, in milliseconds.
    pub excused_ms: f64,
    /// The fault it is put down to.
    pub kind: Kind,
    /// The bound it is held to, in milliseconds.
    pub bound_ms: f64,
}

impl Stall {
    /// Whether it is past its bound.
    pub fn over(&self) -> bool {
        self.stalled_ms > self.bound_ms
    }
}

/// The length of `[from, to)` covered by `spans` (which may overlap).
fn covered(from: u64, to: u64, spans: &mut [(u64, u64)]) -> u64 {
    spans.sort_unstable();
    let mut total = 0;
    let mut reach = from;
    for &(a, b) in spans.iter() {
        let (a, b) = (a.max(reach), b.min(to));
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

/// The stalls of every life: each span between two samples where its
/// acknowledgements grew (its start and its end count as such points),
/// less the outages it spans, put down to the nearest fault by priority
/// (the server's faults, then the client's own, then others').
pub fn stalls(lives: &[Life], events: &[Event], b: &Bounds) -> Vec<Stall> {
    let recovery_us = b.recovery.as_micros() as u64;
    let isolation_us = b.isolation.as_micros() as u64;
    let mut out = Vec::new();
    for life in lives {
        let mut points = vec![life.from_us];
        let mut prev: Option<u64> = None;
        for &(t, acked) in &life.samples {
            if t <= life.from_us || t > life.to_us {
                prev = Some(acked);
                continue;
            }
            if prev.map_or(acked > 0, |p| acked > p) {
                points.push(t);
            }
            prev = Some(acked);
        }
        points.push(life.to_us);
        let first = life.from_us;
        for w in points.windows(2) {
            let (from, to) = (w[0], w[1]);
            if to <= from {
                continue;
            }
            let mut spans: Vec<(u64, u64)> = events
                .iter()
                .filter(|e| e.outage_of(life.slot) && e.from_us < to && e.to_us > from)
                .map(|e| (e.from_us, e.to_us))
                .collect();
            let excused = covered(from, to, &mut spans);
            let near = |e: &&Event, slack: u64| e.from_us <= to && e.to_us + slack >= from;
            // The client's own faults: those done to this process.
            let own = |e: &&Event| {
                e.client == Some(life.slot) && e.to_us > life.from_us && e.from_us < life.to_us
            };
            let pick = |want: &dyn Fn(&&Event) -> bool, slack: u64| {
                events.iter().filter(|e| near(e, slack) && want(e)).count() > 0
            };
            // The server's faults first, then the client's own, then its
            // start, then others' faults; the first three get the recovery
            // bound.
            let (kind, lenient) = if let Some(k) =
                [Kind::ServerDied, Kind::ServerPause, Kind::ServerKill]
                    .into_iter()
                    .find(|&k| pick(&|e| e.kind == k, recovery_us))
            {
                (k, true)
            } else if let Some((_, k)) = [
                (Kind::LinkCut, Kind::OwnLinkCut),
                (Kind::ClientPause, Kind::OwnPause),
            ]
            .into_iter()
            .find(|&(k, _)| pick(&|e| e.kind == k && own(e), recovery_us))
            {
                (k, true)
            } else if from == first {
                (
                    if life.restarted {
                        Kind::Restart
                    } else {
                        Kind::Start
                    },
                    true,
                )
            } else if let Some(k) = [
                Kind::ClientKill,
                Kind::ClientPause,
                Kind::LinkCut,
                Kind::Hostile,
            ]
            .into_iter()
            .find(|&k| {
                pick(
                    &|e| e.kind == k && e.client != Some(life.slot),
                    isolation_us,
                )
            }) {
                (k, false)
            } else {
                (Kind::None, false)
            };
            let bound = if lenient { b.recovery } else { b.isolation };
            out.push(Stall {
                client: life.name.clone(),
                from_us: from,
                to_us: to,
                stalled_ms: (to - from).saturating_sub(excused) as f64 / 1e3,
                excused_ms: excused as f64 / 1e3,
                kind,
                bound_ms: bound.as_secs_f64() * 1e3,
            });
        }
    }
    out
}

/// The longest stall of one kind.
#[derive(Clone, Debug, Serialize)]
pub struct Longest {
    /// The kind (`server-kill`, `client-pause`, ..., `none`).
    pub kind: Kind,
    /// Its longest stall, in milliseconds.
    pub longest_ms: f64,
    /// Its bound, in milliseconds.
    pub bound_ms: f64,
    /// Which client process.
    pub client: String,
    /// When it began (microseconds since the epoch).
    pub at_us: u64,
    /// Stalls past their bound, of this kind.
    pub over_bound: u64,
}

/// The longest stall of each kind that occurred.
pub fn longest(stalls: &[Stall]) -> Vec<Longest> {
    let mut by: BTreeMap<Kind, Longest> = BTreeMap::new();
    for s in stalls {
        let e = by.entry(s.kind).or_insert_with(|| Longest {
            kind: s.kind,
            longest_ms: -1.0,
            bound_ms: s.bound_ms,
            client: String::new(),
            at_us: 0,
            over_bound: 0,
        });
        e.over_bound += u64::from(s.over());
        if s.stalled_ms > e.longest_ms {
            e.longest_ms = s.stalled_ms;
            e.bound_ms = s.bound_ms;
            e.client = s.client.clone();
            e.at_us = s.from_us;
        }
    }
    by.into_values().collect()
}

/// How a process ended: its exit code or the signal that ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal, when one ended it.
    pub signal: Option<i32>,
    /// Whether it dumped core.
    pub core_dumped: bool,
}

impl Exit {
    /// From a child's status.
    pub fn of(status: std::process::ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt as _;
        Exit {
            code: status.code(),
            signal: status.signal(),
            core_dumped: status.core_dumped(),
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit status {c}"),
            (None, Some(s)) => {
                let name = nix::sys::signal::Signal::try_from(s).map_or("?", |s| s.as_str());
                write!(f, "signal {s} ({name})")?;
                if self.core_dumped {
                    write!(f, ", core dumped")?;
                }
                Ok(())
            }
            (None, None) => write!(f, "an unknown status"),
        }
    }
}

const SIGKILL: i32 = 9;

/// How a server instance ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerEnd {
    /// The soak sent it SIGKILL; this is how it ended.
    Killed(Exit),
    /// The soak saw it end by itself during the run.
    Died(Exit),
    /// The soak sent it SIGTERM at the end; this is how it ended.
    Stopped(Exit),
    /// It did not end within the time given after SIGTERM (the soak then
    /// killed it).
    Hung,
    /// Still running when the soak gave up on it (a failure to set up).
    Unknown,
    /// Its host stopped answering (`--launcher`): how it ended is not
    /// known.
    HostLost,
}

/// Whether a server instance ended as the soak ended it: by the soak's
/// own SIGKILL, or with exit status 0 after the soak's SIGTERM.
///
/// # Errors
///
/// Anything else, naming the instance and how it ended.
pub fn judge_server(name: &str, end: ServerEnd) -> Result<(), String> {
    match end {
        ServerEnd::Killed(e) if e.signal == Some(SIGKILL) => Ok(()),
        ServerEnd::Killed(e) => Err(format!(
            "{name} had already died when the soak came to kill it: {e}"
        )),
        ServerEnd::Died(e) => Err(format!("{name} died during the run: {e}")),
        ServerEnd::Stopped(e) if e.code == Some(0) => Ok(()),
        ServerEnd::Stopped(e) => Err(format!("{name} did not stop cleanly on SIGTERM: {e}")),
        ServerEnd::Hung => Err(format!(
            "{name} did not stop within 10 s of SIGTERM and was killed"
        )),
        ServerEnd::Unknown => Err(format!("{name}: how it ended is unknown")),
        ServerEnd::HostLost => Err(format!("{name}: its host stopped answering")),
    }
}

/// How a client process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientEnd {
    /// The soak killed it (a client-kill fault).
    Killed,
    /// It ended after the soak's SIGTERM.
    Finished(Exit),
    /// It ended by itself before the soak stopped it.
    EndedEarly(Exit),
    /// It did not end within the drain time after SIGTERM.
    NeverFinished,
    /// Its host stopped answering (`--launcher`).
    HostLost,
}

/// Whether a client process ended well: killed by the soak, or finished
/// with exit status 0 (everything acknowledged, nothing corrupt, no
/// session failed) after the soak's SIGTERM.
///
/// # Errors
///
/// Anything else, naming the client.
pub fn judge_client(name: &str, end: ClientEnd) -> Result<(), String> {
    match end {
        ClientEnd::Killed => Ok(()),
        ClientEnd::Finished(e) if e.code == Some(0) => Ok(()),
        ClientEnd::Finished(e) => Err(format!(
            "{name} finished with {e} (not everything acknowledged, a read corrupt or a session failed)"
        )),
        ClientEnd::EndedEarly(e) => Err(format!(
            "{name} ended by itself before the soak stopped it: {e}"
        )),
        ClientEnd::NeverFinished => Err(format!(
            "{name} never finished: still running after the drain time, killed"
        )),
        ClientEnd::HostLost => Err(format!(
            "{name}: its host stopped answering; what it sent after the last file it wrote \
             there is not known"
        )),
    }
}

/// Whether every instance's peak RSS is within `bound` bytes.
///
/// # Errors
///
/// The instances past it, with their peak.
pub fn judge_rss(peaks: &[(String, u64)], bound: u64) -> Result<(), String> {
    let over: Vec<String> = peaks
        .iter()
        .filter(|(_, p)| *p > bound)
        .map(|(n, p)| format!("{n} {:.1} MB", *p as f64 / 1e6))
        .collect();
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "peak server RSS past the bound of {:.1} MB: {}",
            bound as f64 / 1e6,
            over.join(", ")
        ))
    }
}

/// A process's resident memory from `/proc/PID/status`: (peak, now), in
/// bytes (`VmHWM`, `VmRSS`).
pub fn rss(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_rss(&text)
}

fn parse_rss(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn bounds() -> Bounds {
        Bounds {
            recovery: Duration::from_secs(5),
            isolation: Duration::from_millis(1500),
        }
    }

    /// A client that acknowledges steadily every 250 ms in `[from, to)`
    /// except in the `holes`.
    fn life(name: &str, slot: usize, from: u64, to: u64, holes: &[(u64, u64)]) -> Life {
        let mut samples = Vec::new();
        let mut acked = 0;
        let mut t = from + S / 4;
        while t < to {
            if !holes.iter().any(|&(a, b)| t >= a && t < b) {
                acked += 100;
            }
            samples.push((t, acked));
            t += S / 4;
        }
        Life {
            name: name.into(),
            slot,
            from_us: from,
            to_us: to,
            restarted: false,
            samples,
        }
    }

    fn worst(stalls: &[Stall]) -> &Stall {
        stalls
            .iter()
            .max_by(|a, b| a.stalled_ms.total_cmp(&b.stalled_ms))
            .unwrap_or_else(|| unreachable!("no stalls"))
    }

    #[test]
    fn steady_progress_passes_with_sample_sized_stalls() {
        let l = life("client-0", 0, 0, 60 * S, &[]);
        let s = stalls(&[l], &[], &bounds());
        assert!(s.iter().all(|s| !s.over()));
        assert!(worst(&s).stalled_ms <= 250.0 + 1e-9);
        assert!(s.iter().skip(1).all(|s| s.kind == Kind::None));
    }

    #[test]
    fn a_stall_past_the_isolation_bound_after_another_clients_pause_fails() {
        // Client 1 is paused 10..15 s; client 0 sees no ack for 4 s.
        let pause = Event {
            kind: Kind::ClientPause,
            client: Some(1),
            from_us: 10 * S,
            to_us: 15 * S,
        };
        let l = life("client-0", 0, 0, 30 * S, &[(10 * S, 14 * S)]);
        let s = stalls(&[l], &[pause], &bounds());
        let w = worst(&s);
        assert!(w.over(), "{w:?}");
        assert_eq!(w.kind, Kind::ClientPause);
        assert_eq!(w.bound_ms, 1500.0);
        assert!(w.stalled_ms >= 4000.0, "{w:?}");
        let l = longest(&s);
        assert!(l
            .iter()
            .any(|l| l.kind == Kind::ClientPause && l.over_bound == 1));
    }

    #[test]
    fn a_server_outage_is_taken_off_and_the_recovery_bound_applies() {
        // The server stopped 10..16 s; acks resume at 17 s: 1 s after
        // the resume is within the bound.
        let pause = Event {
            kind: Kind::ServerPause,
            client: None,
            from_us: 10 * S,
            to_us: 16 * S,
        };
        let s = stalls(
            &[life("client-0", 0, 0, 30 * S, &[(10 * S, 17 * S)])],
            &[pause],
            &bounds(),
        );
        let w = worst(&s);
        assert!(!w.over(), "{w:?}");
        assert_eq!(w.kind, Kind::ServerPause);
        assert!(w.excused_ms >= 6000.0 && w.stalled_ms <= 1250.0, "{w:?}");
        // Acks that resume 7 s after the resume: past the bound.
        let s = stalls(
            &[life("client-0", 0, 0, 40 * S, &[(10 * S, 23 * S)])],
            &[pause],
            &bounds(),
        );
        let w = worst(&s);
        assert!(w.over() && w.kind == Kind::ServerPause, "{w:?}");
    }

    #[test]
    fn a_client_stalled_until_the_end_fails() {
        // The last ack at 20 s, the run stops at 40 s: an open stall.
        let s = stalls(
            &[life("client-0", 0, 0, 40 * S, &[(20 * S, 40 * S)])],
            &[],
            &bounds(),
        );
        assert!(worst(&s).over());
        // A client that never got an ack at all.
        let mut l = life("client-1", 1, 0, 10 * S, &[(0, 10 * S)]);
        l.restarted = true;
        let s = stalls(&[l], &[], &bounds());
        assert!(worst(&s).over());
        assert_eq!(worst(&s).kind, Kind::Restart);
    }

    #[test]
    fn a_clients_own_pause_is_taken_off_its_stall() {
        let own = Event {
            kind: Kind::ClientPause,
            client: Some(0),
            from_us: 10 * S,
            to_us: 16 * S,
        };
        let s = stalls(
            &[life("client-0", 0, 0, 30 * S, &[(10 * S, 17 * S)])],
            &[own],
            &bounds(),
        );
        let w = worst(&s);
        assert!(!w.over(), "{w:?}");
        assert_eq!(w.kind, Kind::OwnPause);
    }

    #[test]
    fn covered_merges_overlapping_spans() {
        assert_eq!(covered(0, 100, &mut [(10, 20), (15, 30), (90, 200)]), 30);
        assert_eq!(covered(50, 60, &mut [(0, 10)]), 0);
    }

    fn killed_by(signal: i32) -> Exit {
        Exit {
            code: None,
            signal: Some(signal),
            core_dumped: false,
        }
    }

    #[test]
    fn only_the_soaks_own_sigkill_or_a_clean_stop_ends_a_server_well() {
        assert!(judge_server("server-1", ServerEnd::Killed(killed_by(9))).is_ok());
        let ok_stop = Exit {
            code: Some(0),
            signal: None,
            core_dumped: false,
        };
        assert!(judge_server("server-2", ServerEnd::Stopped(ok_stop)).is_ok());
        // A segfault the soak found when it came to kill.
        let segv = Exit {
            core_dumped: true,
            ..killed_by(11)
        };
        let e = judge_server("server-3", ServerEnd::Killed(segv)).unwrap_err();
        assert!(e.contains("server-3") && e.contains("SIGSEGV"), "{e}");
        // A death seen during the run, whatever the status.
        let e = judge_server("server-4", ServerEnd::Died(ok_stop)).unwrap_err();
        assert!(e.contains("server-4 died"), "{e}");
        let e = judge_server("server-5", ServerEnd::Died(killed_by(6))).unwrap_err();
        assert!(e.contains("SIGABRT"), "{e}");
        // A stop with a non-zero exit, or none at all.
        let bad = Exit {
            code: Some(1),
            ..ok_stop
        };
        assert!(judge_server("server-6", ServerEnd::Stopped(bad)).is_err());
        assert!(judge_server("server-7", ServerEnd::Hung).is_err());
        assert!(judge_server("server-8", ServerEnd::Unknown).is_err());
        let e = judge_server("server-9", ServerEnd::HostLost).unwrap_err();
        assert!(e.contains("server-9") && e.contains("host"), "{e}");
    }

    #[test]
    fn a_client_that_never_finished_or_failed_is_a_fail() {
        let ok = Exit {
            code: Some(0),
            signal: None,
            core_dumped: false,
        };
        assert!(judge_client("client-0", ClientEnd::Killed).is_ok());
        assert!(judge_client("client-0", ClientEnd::Finished(ok)).is_ok());
        let e = judge_client("client-1", ClientEnd::NeverFinished).unwrap_err();
        assert!(e.contains("client-1 never finished"), "{e}");
        let one = Exit {
            code: Some(1),
            ..ok
        };
        assert!(judge_client("client-1", ClientEnd::Finished(one)).is_err());
        assert!(judge_client("client-1", ClientEnd::EndedEarly(ok)).is_err());
        let e = judge_client("client-2", ClientEnd::HostLost).unwrap_err();
        assert!(e.contains("client-2") && e.contains("host"), "{e}");
    }

    #[test]
    fn rss_past_the_bound_fails_and_proc_status_parses() {
        let peaks = vec![
            ("server-0".to_string(), 20 << 20),
            ("server-1".into(), 300 << 20),
        ];
        assert!(judge_rss(&peaks, 400 << 20).is_ok());
        let e = judge_rss(&peaks, 100 << 20).unwrap_err();
        assert!(e.contains("server-1") && !e.contains("server-0"), "{e}");
        let text = "Name:\tiomsg\nVmPeak:\t  999 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(parse_rss(text), Some((20 << 20, 10 << 20)));
        assert_eq!(parse_rss("Name: x\n"), None);
        // This process has a status.
        assert!(rss(std::process::id()).is_some_and(|(hwm, now)| hwm >= now && now > 0));
    }
}
