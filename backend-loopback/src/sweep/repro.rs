//! The one-line reproduction of a scenario: space-separated `key=value`
//! pairs for every field that differs from `Scenario::default()`, which
//! [`decode`] turns back into the same scenario.
//!
//! ```text
//! seed=7 clients=12 servers=2 msgs=300 size=900 spread=600 store=1200
//!   silent=20000 crash=2ms/500us/4 kill=opened:1:0us dur=20ms cwin=4096
//!   swin=256 tombs=4 stray=3:2ms:1000000:3:0
//! ```
//!
//! Durations carry a unit (`ns`, `us`, `ms`, `s`); `msgs=inf` is an
//! unbounded workload.

use core::fmt::{self, Write as _};
use core::time::Duration;

use crate::fault::{Direction, FaultConfig, FrameFault, ScheduledFault};
use crate::sim::{
    CrashPlan, Durability, KillEvent, KillOn, RestoreDefect, Scenario, StrayPeer, TailLoss,
};

/// Why a repro line does not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReproError {
    /// The offending `key=value` token.
    pub token: String,
    /// What is wrong with it.
    pub why: String,
}

impl fmt::Display for ReproError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "repro token {:?}: {}; a repro line is space-separated key=value pairs as the sweep prints them",
            self.token, self.why
        )
    }
}

impl std::error::Error for ReproError {}

fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns % 1_000_000_000 == 0 && ns > 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns % 1_000_000 == 0 && ns > 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1000 == 0 {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

fn parse_duration(v: &str) -> Result<Duration, String> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|e| format!("{v:?} is not a duration: {e}"))?;
    let d = match unit {
        "ns" => Duration::from_nanos(n),
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return Err(format!("{v:?}: a duration needs a unit: ns, us, ms or s")),
    };
    Ok(d)
}

fn fault_name(f: FrameFault) -> &'static str {
    match f {
        FrameFault::Drop => "drop",
        FrameFault::SilentDrop => "silent",
        FrameFault::Duplicate => "dup",
        FrameFault::Reorder => "reorder",
        FrameFault::Corrupt => "corrupt",
        FrameFault::Delay => "delay",
        FrameFault::Disconnect => "disconnect",
    }
}

/// The fault-rate fields, for the shrinker: `(name, get, set)`.
pub(crate) fn rate_count() -> usize {
    FrameFault::ALL.len()
}

pub(crate) fn get_rate(f: &FaultConfig, k: usize) -> u32 {
    f.rates()[k]
}

pub(crate) fn set_rate(f: &mut FaultConfig, k: usize, v: u32) {
    *f.rate_mut(FrameFault::ALL[k]) = v;
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::ToServer => "s",
        Direction::ToClient => "c",
        Direction::Any => "a",
    }
}

fn crash_plan(c: &CrashPlan) -> String {
    format!(
        "{}/{}/{}",
        duration(c.every),
        duration(c.down_for),
        c.max_kills
    )
}

fn parse_crash_plan(v: &str) -> Result<CrashPlan, String> {
    let [every, down, kills] = parts::<3>(v, '/')?;
    Ok(CrashPlan {
        every: parse_duration(every)?,
        down_for: parse_duration(down)?,
        max_kills: num(kills)?,
    })
}

/// The scenario as one line.
pub fn encode(s: &Scenario) -> String {
    let d = Scenario::default();
    let mut l = Line::default();
    l.put("seed", s.seed.to_string());
    if s.clients != d.clients {
        l.put("clients", s.clients.to_string());
    }
    if s.servers != d.servers {
        l.put("servers", s.servers.to_string());
    }
    encode_workload(&mut l, &s.workload, &d.workload);
    encode_faults(&mut l, &s.faults, &d.faults);
    encode_kills(&mut l, s);
    encode_knobs(&mut l, s, &d);
    if let Some(x) = s.durable {
        encode_durability(&mut l, &x);
    }
    l.0
}

/// A repro line, a `key=value` at a time.
#[derive(Default)]
struct Line(String);

impl Line {
    fn put(&mut self, k: &str, v: String) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        let _ = write!(self.0, "{k}={v}");
    }
}

/// The workload's keys that differ from the default's (`dw`).
fn encode_workload(l: &mut Line, w: &crate::sim::Workload, dw: &crate::sim::Workload) {
    if w.messages != dw.messages {
        l.put(
            "msgs",
            if w.messages == u64::MAX {
                "inf".into()
            } else {
                w.messages.to_string()
            },
        );
    }
    if w.size != dw.size {
        l.put("size", w.size.to_string());
    }
    if w.size_spread != dw.size_spread {
        l.put("spread", w.size_spread.to_string());
    }
    if w.storage != dw.storage {
        l.put("store", w.storage.to_string());
    }
    if w.read_per_mille != dw.read_per_mille {
        l.put("reads", w.read_per_mille.to_string());
    }
    if w.stream_per_mille != dw.stream_per_mille {
        l.put("streams", w.stream_per_mille.to_string());
    }
    if w.validate != dw.validate {
        l.put("validate", u8::from(w.validate).to_string());
    }
    if w.interval != dw.interval {
        l.put("interval", duration(w.interval));
    }
}

/// The fault rates, reorder depth, delay and schedule that differ from
/// the default's (`df`).
fn encode_faults(l: &mut Line, f: &FaultConfig, df: &FaultConfig) {
    let (rates, default_rates) = (f.rates(), df.rates());
    for (k, fault) in FrameFault::ALL.iter().enumerate() {
        if rates[k] != default_rates[k] {
            l.put(fault_name(*fault), rates[k].to_string());
        }
    }
    if f.reorder_depth != df.reorder_depth {
        l.put("depth", f.reorder_depth.to_string());
    }
    if f.delay != df.delay {
        l.put("delay_by", duration(f.delay));
    }
    if !f.schedule.is_empty() {
        let items: Vec<String> = f
            .schedule
            .iter()
            .map(|x| {
                format!(
                    "{}:{}:{}:{}",
                    x.nth,
                    direction_name(x.direction),
                    u8::from(x.data_only),
                    fault_name(x.fault)
                )
            })
            .collect();
        l.put("sched", items.join(","));
    }
}

/// The crash plan and the kills on events.
fn encode_kills(l: &mut Line, s: &Scenario) {
    if let Some(c) = s.crash {
        l.put("crash", crash_plan(&c));
    }
    if !s.kill_on.is_empty() {
        let items: Vec<String> = s
            .kill_on
            .iter()
            .map(|k| format!("{}:{}:{}", k.event.name(), k.nth, duration(k.down_for)))
            .collect();
        l.put("kill", items.join(","));
    }
}

/// The run's other knobs that differ from the default's (`d`).
fn encode_knobs(l: &mut Line, s: &Scenario, d: &Scenario) {
    if s.duration != d.duration {
        l.put("dur", duration(s.duration));
    }
    if s.drain != d.drain {
        l.put("drain", duration(s.drain));
    }
    if s.replay != d.replay {
        l.put("replay", u8::from(s.replay).to_string());
    }
    if s.rebuild_transport != d.rebuild_transport {
        l.put("rebuild", u8::from(s.rebuild_transport).to_string());
    }
    if s.latency != d.latency {
        l.put("lat", duration(s.latency));
    }
    if s.detect_delay != d.detect_delay {
        l.put("detect", duration(s.detect_delay));
    }
    if s.client_window != d.client_window {
        l.put("cwin", s.client_window.to_string());
    }
    if s.server_window != d.server_window {
        l.put("swin", s.server_window.to_string());
    }
    if s.server_sessions != d.server_sessions {
        l.put("ssess", s.server_sessions.to_string());
    }
    if s.server_tombs != d.server_tombs {
        l.put("tombs", s.server_tombs.to_string());
    }
    if s.shared_session_pairs != d.shared_session_pairs {
        l.put("shared", s.shared_session_pairs.to_string());
    }
    if let Some(p) = s.stray {
        l.put(
            "stray",
            format!(
                "{}:{}:{}:{}:{}",
                p.victim,
                duration(p.at),
                p.ahead,
                p.writes,
                u8::from(p.bye)
            ),
        );
    }
    if s.max_steps != d.max_steps {
        l.put("steps", s.max_steps.to_string());
    }
}

/// The durability: `journal` alone marks crash-proof state on.
fn encode_durability(l: &mut Line, x: &Durability) {
    l.put("journal", u8::from(x.journal).to_string());
    if let Some(c) = x.client_crash {
        l.put("ccrash", crash_plan(&c));
    }
    if x.outbox_lag != Durability::default().outbox_lag {
        l.put("lag", x.outbox_lag.to_string());
    }
    if let Some(t) = x.tail_loss {
        let mut how = String::new();
        if t.at_end {
            how.push('e');
        }
        if t.synced_openings {
            how.push('s');
        }
        if how.is_empty() {
            how.push('-');
        }
        l.put("tail", format!("{}/{}/{how}", t.every, t.batches));
    }
    if let Some(defect) = x.restore_defect {
        l.put("defect", defect.name().to_string());
    }
}

fn num<T: core::str::FromStr>(v: &str) -> Result<T, String>
where
    T::Err: fmt::Display,
{
    v.parse().map_err(|e| format!("{v:?} is not a number: {e}"))
}

fn flag(v: &str) -> Result<bool, String> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{v:?}: use 0 or 1")),
    }
}

fn fault_by_name(v: &str) -> Result<FrameFault, String> {
    FrameFault::ALL
        .into_iter()
        .find(|f| fault_name(*f) == v)
        .ok_or_else(|| {
            format!("{v:?} is not a fault: drop, silent, dup, reorder, corrupt, delay, disconnect")
        })
}

fn parts<const N: usize>(v: &str, sep: char) -> Result<[&str; N], String> {
    let items: Vec<&str> = v.split(sep).collect();
    items
        .try_into()
        .map_err(|_| format!("{v:?}: expected {N} parts separated by {sep:?}"))
}

/// Parses a line that [`encode`] wrote; keys not given keep their
/// `Scenario::default()` value.
pub fn decode(line: &str) -> Result<Scenario, ReproError> {
    let mut s = Scenario::default();
    for token in line.split_whitespace() {
        let err = |why: String| ReproError {
            token: token.to_string(),
            why,
        };
        let (k, v) = token
            .split_once('=')
            .ok_or_else(|| err("not key=value".into()))?;
        apply(&mut s, k, v).map_err(err)?;
    }
    Ok(s)
}

fn apply(s: &mut Scenario, k: &str, v: &str) -> Result<(), String> {
    let w = &mut s.workload;
    match k {
        "seed" => s.seed = num(v)?,
        "clients" => s.clients = num(v)?,
        "servers" => s.servers = num(v)?,
        "msgs" => {
            w.messages = if v == "inf" { u64::MAX } else { num(v)? };
        }
        "size" => w.size = num(v)?,
        "spread" => w.size_spread = num(v)?,
        "store" => w.storage = num(v)?,
        "reads" => w.read_per_mille = num(v)?,
        "streams" => w.stream_per_mille = num(v)?,
        "validate" => w.validate = flag(v)?,
        "interval" => w.interval = parse_duration(v)?,
        "depth" => s.faults.reorder_depth = num(v)?,
        "delay_by" => s.faults.delay = parse_duration(v)?,
        "sched" => s.faults.schedule = parse_schedule(v)?,
        "crash" => s.crash = Some(parse_crash_plan(v)?),
        "journal" => s.durable.get_or_insert_with(Durability::default).journal = flag(v)?,
        "ccrash" => {
            s.durable
                .get_or_insert_with(Durability::default)
                .client_crash = Some(parse_crash_plan(v)?);
        }
        "lag" => s.durable.get_or_insert_with(Durability::default).outbox_lag = num(v)?,
        "defect" => {
            s.durable
                .get_or_insert_with(Durability::default)
                .restore_defect = Some(RestoreDefect::from_name(v).ok_or_else(|| {
                format!("{v:?} is not a planted defect: {}", RestoreDefect::names())
            })?);
        }
        "tail" => {
            s.durable.get_or_insert_with(Durability::default).tail_loss = Some(parse_tail(v)?);
        }
        "kill" => s.kill_on = parse_kills(v)?,
        "dur" => s.duration = parse_duration(v)?,
        "drain" => s.drain = parse_duration(v)?,
        "replay" => s.replay = flag(v)?,
        "rebuild" => s.rebuild_transport = flag(v)?,
        "lat" => s.latency = parse_duration(v)?,
        "detect" => s.detect_delay = parse_duration(v)?,
        "cwin" => s.client_window = num(v)?,
        "swin" => s.server_window = num(v)?,
        "ssess" => s.server_sessions = num(v)?,
        "tombs" => s.server_tombs = num(v)?,
        "shared" => s.shared_session_pairs = num(v)?,
        "stray" => s.stray = Some(parse_stray(v)?),
        "steps" => s.max_steps = num(v)?,
        _ => match FrameFault::ALL.iter().position(|f| fault_name(*f) == k) {
            Some(i) => set_rate(&mut s.faults, i, num(v)?),
            None => return Err(format!("unknown key {k:?}")),
        },
    }
    Ok(())
}

/// `sched=NTH:DIR:DATA:FAULT,...`.
fn parse_schedule(v: &str) -> Result<Vec<ScheduledFault>, String> {
    v.split(',')
        .map(|item| {
            let [nth, dir, data, fault] = parts::<4>(item, ':')?;
            Ok(ScheduledFault {
                nth: num(nth)?,
                direction: match dir {
                    "s" => Direction::ToServer,
                    "c" => Direction::ToClient,
                    "a" => Direction::Any,
                    _ => return Err(format!("{dir:?}: direction s, c or a")),
                },
                data_only: flag(data)?,
                fault: fault_by_name(fault)?,
            })
        })
        .collect()
}

/// `tail=EVERY/BATCHES/HOW`.
fn parse_tail(v: &str) -> Result<TailLoss, String> {
    let [every, batches, how] = parts::<3>(v, '/')?;
    if how.chars().any(|c| !"es-".contains(c)) {
        return Err(format!(
            "{how:?}: e (a power cut near the end of the faulty phase), s (sessions' \
             first commits synced) or - (neither)"
        ));
    }
    Ok(TailLoss {
        every: num(every)?,
        batches: num(batches)?,
        at_end: how.contains('e'),
        synced_openings: how.contains('s'),
    })
}

/// `kill=EVENT:NTH:DOWN,...`.
fn parse_kills(v: &str) -> Result<Vec<KillOn>, String> {
    v.split(',')
        .map(|item| {
            let [event, nth, down] = parts::<3>(item, ':')?;
            Ok(KillOn {
                event: KillEvent::from_name(event).ok_or_else(|| {
                    format!("{event:?}: event accept, opened, delivered or liveloss")
                })?,
                nth: num(nth)?,
                down_for: parse_duration(down)?,
            })
        })
        .collect()
}

/// `stray=VICTIM:AT:AHEAD:WRITES:BYE`.
fn parse_stray(v: &str) -> Result<StrayPeer, String> {
    let [victim, at, ahead, writes, bye] = parts::<5>(v, ':')?;
    Ok(StrayPeer {
        victim: num(victim)?,
        at: parse_duration(at)?,
        ahead: num(ahead)?,
        writes: num(writes)?,
        bye: flag(bye)?,
    })
}
