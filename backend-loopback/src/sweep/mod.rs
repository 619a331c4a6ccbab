//! The adversarial sweep: random scenarios across every knob of the
//! simulation, each run checked against the ground truth, and a shrinker
//! that reduces a failing scenario to a small one that still breaks the
//! same [`Invariant`].
//!
//! * [`generate`] draws a scenario from a seed under a [`Profile`]:
//!   [`Profile::Full`] turns every knob (1 to 40 clients, past the session
//!   table; 1 to 3 servers; client and server windows of different sizes;
//!   every fault kind alone and mixed at up to 10 %; planned kills and
//!   kills right after accept, `SessionOpened`, a delivery or a live loss;
//!   zero and long downtimes; replay and rebuild on and off; payloads from
//!   0 bytes to [`MAX_SIZE`]; reads and streamed writes; paced and unpaced
//!   workloads; small and large latencies; clients sharing a session id;
//!   a stray peer; writes of mixed sizes in a storage barely larger than
//!   the largest; 4 tombstones per server), and draws the [`Shape`]s
//!   that provoke known defects on purpose ([`SHAPE_PER_MILLE`]).
//!   [`Profile::Clean`] stays inside what today's core handles;
//!   [`Profile::Durable`] crashes servers with a journal and clients with
//!   an outbox, with small server tables and journals that lose their
//!   last commits.
//! * [`check`] runs one scenario and names the invariants it violates.
//! * [`repro::encode`] / [`repro::decode`] turn a scenario into the
//!   one-line reproduction a failing run prints, and back.
//! * [`shrink`] reduces a failing scenario.
//!
//! Every run is bounded in virtual time and steps (the scenarios carry
//! `max_steps`); a sweep is bounded by its run count and time budget.

mod durable;
pub mod repro;
mod shapes;

use core::time::Duration;
use std::time::Instant as WallClock;

use iomsg_core::rng::{mix64, SplitMix64};

use crate::fault::{Direction, FaultConfig, FrameFault, ScheduledFault};
use crate::sim::{
    self, CrashPlan, Durability, Invariant, KillEvent, KillOn, Report, Scenario, StrayPeer,
    TailLoss, Workload, MAX_SIZE, SERVER_WINDOWS,
};
pub use shapes::{Shape, SHAPE_PER_MILLE};

/// Session tables the full and clean profiles draw (the durable profile
/// draws smaller ones).
const FULL_SESSIONS: [usize; 3] = [4, 16, 64];

/// Step cap of a generated scenario: generous for the largest ones (40
/// clients, a few thousand requests each), small enough that no run takes
/// more than seconds.
pub const SWEEP_MAX_STEPS: u64 = 3_000_000;

/// Which knobs [`generate`] turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Every knob.
    Full,
    /// Only what today's core handles (each exclusion is a bug the full
    /// profile finds): client windows of at most 8 and never above the
    /// server's (a larger burst of completions overflows the client's
    /// event queue; a client window past the server's loses sns); no
    /// silent drops or reordering (trailing losses go undetected); frames
    /// delayed less than the reply timeout (a frame that outlives its
    /// connection re-creates a closed session); no session-table eviction
    /// (an evicted session is re-created and its sns delivered again); no
    /// kills right after `SessionOpened`, and no drop, corrupt or
    /// disconnect faults together with kills (a lost `Welcome`, then a
    /// restart: unannounced duplicates); no shared session ids and no
    /// stray peer (no session token yet); payload CRCs when reads meet
    /// corruption (a read completion carries no CRC of its own); replay on.
    Clean,
    /// Exactly once across crashes: servers with a journal and clients
    /// with an outbox, both crashed and restarted, under faults that leave
    /// holes in the servers' windows, with small session and tombstone
    /// tables (evictions, forgotten tombstones, recalls) and journals that
    /// lose their last commits at a power cut (see `sweep::durable`);
    /// within the clean profile's limits otherwise (session-table
    /// eviction included: the journal's recall makes up for it). Checks
    /// the invariants of the applications' records
    /// (`delivered-twice-across-crashes`, `lost-across-crashes`), the
    /// restore property (`restore-differs`), lost state named
    /// (`state-lost-unnamed`) and no lock-out (`locked-out`) with all the
    /// others.
    Durable,
}

struct Dice(SplitMix64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n.max(1))
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    fn us(&mut self, items: &[u64]) -> Duration {
        Duration::from_micros(self.pick(items))
    }
    /// A rate up to 10 %: often small, sometimes large.
    fn ppm(&mut self) -> u32 {
        let top = self.pick(&[1_000u64, 10_000, 50_000, 100_000]);
        (1 + self.below(top)) as u32
    }
}

fn fault_kind(i: u64) -> FrameFault {
    FrameFault::ALL[(i % FrameFault::ALL.len() as u64) as usize]
}

fn set_rate(f: &mut FaultConfig, kind: FrameFault, ppm: u32) {
    match kind {
        FrameFault::Drop => f.drop_ppm = ppm,
        FrameFault::SilentDrop => f.silent_drop_ppm = ppm,
        FrameFault::Duplicate => f.duplicate_ppm = ppm,
        FrameFault::Reorder => f.reorder_ppm = ppm,
        FrameFault::Corrupt => f.corrupt_ppm = ppm,
        FrameFault::Delay => f.delay_ppm = ppm,
        FrameFault::Disconnect => f.disconnect_ppm = ppm,
    }
}

/// A random scenario: the same `seed` and `profile` give the same one.
pub fn generate(seed: u64, profile: Profile) -> Scenario {
    let full = profile == Profile::Full;
    let mut d = Dice(SplitMix64::new(mix64(seed ^ 0x5EE9)));
    if profile == Profile::Durable {
        return durable::draw(&mut d, mix64(seed)).fixed();
    }
    let (servers, server_sessions, clients, server_window, client_window) = topology(&mut d, full);
    let (interval, latency, messages) =
        pace(&mut d, (servers, server_sessions, clients), client_window);
    let (size, read_per_mille, stream_per_mille, mut validate) = mix(&mut d);
    let mut faults = frame_faults(&mut d, full, read_per_mille, &mut validate);
    let duration = d.us(&[0, 1000, 5000, 20_000, 50_000]);
    let (crash, kill_on) = kills(&mut d, full);
    if !full && (crash.is_some() || !kill_on.is_empty()) {
        // Kills with faults that can lose a Welcome: the client then meets
        // an instance it never completed a handshake with, which says it
        // knows the session, and the instance it killed had delivered
        // frames: unannounced duplicates.
        for k in [
            FrameFault::Drop,
            FrameFault::Corrupt,
            FrameFault::Disconnect,
        ] {
            set_rate(&mut faults, k, 0);
        }
        faults
            .schedule
            .retain(|x| matches!(x.fault, FrameFault::Duplicate | FrameFault::Delay));
    }
    let shared_session_pairs = if full && clients >= 2 && d.chance(150) {
        1 + d.below((clients / 2) as u64) as usize
    } else {
        0
    };
    let stray = (full && d.chance(120)).then(|| StrayPeer {
        victim: d.below(clients as u64) as usize,
        at: Duration::from_micros(d.below(duration.as_micros().max(1) as u64)),
        ahead: d.pick(&[1u64, 1000, 1 << 20]),
        writes: 1 + d.below(5) as u32,
        bye: d.chance(300),
    });
    let mut s = Scenario {
        seed: mix64(seed),
        clients,
        servers,
        workload: Workload {
            messages,
            size,
            size_spread: 0,
            storage: 0,
            read_per_mille,
            stream_per_mille,
            validate,
            interval,
        },
        faults,
        crash,
        kill_on,
        duration,
        drain: Duration::from_secs(3),
        replay: !full || d.chance(500),
        rebuild_transport: d.chance(300),
        latency,
        detect_delay: d.us(&[0, 10, 50, 500, 3000]),
        client_window,
        server_window,
        server_sessions,
        server_tombs: Scenario::default().server_tombs,
        shared_session_pairs,
        stray,
        max_steps: SWEEP_MAX_STEPS,
        durable: None,
    };
    if full {
        shapes::draw(&mut d, &mut s);
    }
    s.fixed()
}

/// Servers, their session tables and windows, clients and their
/// windows.
fn topology(d: &mut Dice, full: bool) -> (usize, usize, usize, u64, usize) {
    let servers = 1 + d.below(3) as usize;
    let server_sessions = d.pick(&FULL_SESSIONS);
    let mut clients = if d.chance(300) {
        1 + d.below(40) as usize
    } else {
        d.pick(&[1usize, 2, 3, 5, 8])
    };
    if !full {
        // No eviction: every session fits its server's table.
        clients = clients.min(servers * server_sessions);
    }
    let server_window = d.pick(&SERVER_WINDOWS);
    let client_window = if full {
        d.pick(&[1usize, 4, 8, 16, 64, 256, 1024, 4096])
    } else {
        (d.pick(&[1usize, 2, 4, 8]) as u64).min(server_window) as usize
    };
    (
        servers,
        server_sessions,
        clients,
        server_window,
        client_window,
    )
}

/// The pacing, the latency and each client's message count: paced or
/// not, unbounded only when paced.
fn pace(
    d: &mut Dice,
    (servers, server_sessions, clients): (usize, usize, usize),
    client_window: usize,
) -> (Duration, Duration, u64) {
    // Clients beyond a server's session table wait for a slot, so a paced workload must
    // leave them time to take turns within the drain.
    let interval = if d.chance(500) {
        Duration::ZERO
    } else {
        d.us(&[10, 100, 1000, 3000])
    };
    let turns = clients.div_ceil(servers).div_ceil(server_sessions).max(1) as u64;
    // Below 500 µs: the sim's connect timeout (1 ms) must cover a
    // connection's two latencies, or no client ever connects.
    let latency = d.us(&[0, 1, 5, 50, 200, 450]);
    // A client's time per request: its pacing, or a round trip shared by
    // its window; all turns together within 1 s of the 3 s drain.
    let round_trip = 2 * latency.as_micros() as u64 + 10;
    let per_request = (interval.as_micros() as u64).max(round_trip / client_window as u64);
    let per_client_budget = (1_000_000 / per_request.max(1) / turns).max(1);
    let messages = if !interval.is_zero()
        && interval >= Duration::from_micros(100)
        && turns == 1
        && d.chance(150)
    {
        u64::MAX
    } else {
        d.pick(&[0u64, 1, 10, 100, 500, 2000])
            .min(per_client_budget)
    };
    (interval, latency, messages)
}

/// The message size, the shares of reads and of streams, and whether
/// payloads are checked.
fn mix(d: &mut Dice) -> (u32, u16, u16, bool) {
    let size = match d.below(5) {
        0 => 0,
        1 => 1,
        2 => MAX_SIZE,
        3 => 64,
        _ => d.below(u64::from(MAX_SIZE) + 1) as u32,
    };
    let read_per_mille = if d.chance(400) {
        d.below(1001) as u16
    } else {
        0
    };
    let stream_per_mille = if d.chance(400) {
        d.below(1001 - u64::from(read_per_mille)) as u16
    } else {
        0
    };
    let validate = d.chance(300);
    (size, read_per_mille, stream_per_mille, validate)
}

/// The frame faults: none, one kind, or a mix, and a schedule; reads
/// with corruption are checked (`validate`) outside the full profile.
fn frame_faults(d: &mut Dice, full: bool, read_per_mille: u16, validate: &mut bool) -> FaultConfig {
    let mut faults = FaultConfig::default();
    let allowed: Vec<FrameFault> = (0..7)
        .map(fault_kind)
        .filter(|k| full || !matches!(k, FrameFault::SilentDrop | FrameFault::Reorder))
        .collect();
    match d.below(10) {
        0 | 1 => {}
        2..=5 => {
            let k = d.pick(&allowed);
            set_rate(&mut faults, k, d.ppm());
        }
        _ => {
            for &k in &allowed {
                if d.chance(500) {
                    set_rate(&mut faults, k, d.ppm() / 3 + 1);
                }
            }
        }
    }
    faults.reorder_depth = 1 + d.below(6) as u8;
    faults.delay = if full {
        d.us(&[10, 500, 3000, 20_000])
    } else {
        // Shorter than the reply timeout: a frame delayed past it outlives
        // its connection and, arriving after the client's Bye, re-creates
        // the closed session.
        d.us(&[10, 500])
    };
    if d.chance(200) {
        for _ in 0..1 + d.below(3) {
            let fault = d.pick(&allowed);
            faults.schedule.push(ScheduledFault {
                nth: d.below(300),
                direction: d.pick(&[Direction::ToServer, Direction::ToClient, Direction::Any]),
                data_only: d.chance(500),
                fault,
            });
        }
    }
    if read_per_mille > 0
        && (faults.corrupt_ppm > 0
            || faults
                .schedule
                .iter()
                .any(|x| x.fault == FrameFault::Corrupt))
        && !full
    {
        *validate = true;
    }
    faults
}

/// The crash plan and the kills on events.
fn kills(d: &mut Dice, full: bool) -> (Option<CrashPlan>, Vec<KillOn>) {
    let crash = d.chance(350).then(|| CrashPlan {
        every: d.us(&[50, 500, 2000, 10_000]),
        down_for: d.us(&[0, 20, 500, 5000]),
        max_kills: 1 + d.below(20),
    });
    let mut kill_on = Vec::new();
    if d.chance(350) {
        for _ in 0..1 + d.below(3) {
            let events: &[KillEvent] = if full {
                &KillEvent::ALL
            } else {
                &[KillEvent::Accept, KillEvent::Delivered, KillEvent::LiveLoss]
            };
            let event = d.pick(events);
            let nth = if event == KillEvent::Delivered {
                1 + d.below(300)
            } else {
                1 + d.below(5)
            };
            kill_on.push(KillOn {
                event,
                nth,
                down_for: d.us(&[0, 100, 2000]),
            });
        }
    }
    (crash, kill_on)
}

trait Fixed {
    fn fixed(self) -> Self;
}

impl Fixed for Scenario {
    /// Keeps a drawn scenario valid: an unbounded workload needs time to
    /// pass.
    fn fixed(mut self) -> Self {
        if self.workload.messages == u64::MAX
            && self.workload.interval.is_zero()
            && self.latency.is_zero()
        {
            self.latency = Duration::from_micros(1);
        }
        self
    }
}

/// One run's outcome.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The scenario.
    pub scenario: Scenario,
    /// Its report (`None` when the scenario did not validate).
    pub report: Option<Report>,
    /// The invariants it violated.
    pub violated: Vec<Invariant>,
    /// Wall time the run took.
    pub wall: Duration,
}

impl Outcome {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.violated.is_empty() && self.report.is_some()
    }
}

/// Runs one scenario and names the invariants it violated. A scenario
/// that does not validate violates nothing and has no report.
pub fn check(scenario: &Scenario) -> Outcome {
    let started = WallClock::now();
    let report = sim::run(scenario).ok();
    Outcome {
        scenario: scenario.clone(),
        violated: report.as_ref().map(Report::violated).unwrap_or_default(),
        report,
        wall: started.elapsed(),
    }
}

/// Whether the scenario violates `invariant`.
pub fn violates(scenario: &Scenario, invariant: Invariant) -> bool {
    sim::run(scenario).is_ok_and(|r| r.violations_of(invariant) > 0)
}

/// How far [`shrink`] may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShrinkBudget {
    /// Candidate scenarios tried at most.
    pub attempts: u32,
    /// Wall time at most.
    pub time: Duration,
}

impl Default for ShrinkBudget {
    /// 400 attempts, 60 s.
    fn default() -> Self {
        ShrinkBudget {
            attempts: 400,
            time: Duration::from_secs(60),
        }
    }
}

/// Greedily reduces `failing` while `still_fails` holds: fewer clients,
/// servers and messages, no stray peer or shared sessions, fewer kills,
/// fault kinds dropped and rates lowered, shorter duration, smaller
/// payloads, defaults for the rest. Returns the smallest scenario found
/// (`failing` itself when nothing smaller fails).
pub fn shrink(
    failing: &Scenario,
    mut still_fails: impl FnMut(&Scenario) -> bool,
    budget: ShrinkBudget,
) -> Scenario {
    let started = WallClock::now();
    let mut best = failing.clone();
    let mut attempts = 0u32;
    'outer: loop {
        for cand in candidates(&best) {
            if attempts >= budget.attempts || started.elapsed() >= budget.time {
                break 'outer;
            }
            if cand == best || cand.validate().is_err() {
                continue;
            }
            attempts += 1;
            if still_fails(&cand) {
                best = cand;
                continue 'outer;
            }
        }
        break;
    }
    best
}

/// Half of `d`, in whole microseconds.
fn half_us(d: Duration) -> Duration {
    Duration::from_micros((d.as_micros() / 2) as u64)
}

/// Whether a scenario has peers that are not plain clients of their own
/// session: a stray peer, or clients sharing a session id.
pub fn has_foreign_peers(s: &Scenario) -> bool {
    s.stray.is_some() || s.shared_session_pairs > 0
}

/// Smaller variants of `s`, the boldest first.
fn candidates(s: &Scenario) -> Vec<Scenario> {
    let mut v = Variants { s, out: Vec::new() };
    fewer_peers(&mut v);
    fewer_kills(&mut v);
    fewer_client_crashes(&mut v);
    fewer_kills_on_events(&mut v);
    fewer_faults(&mut v);
    smaller_workload(&mut v);
    defaults(&mut v);
    v.out
}

/// Variants of one scenario, in the order they are made.
struct Variants<'a> {
    s: &'a Scenario,
    out: Vec<Scenario>,
}

impl Variants<'_> {
    /// `s` changed by `f`.
    fn with(&mut self, f: &dyn Fn(&mut Scenario)) {
        let mut c = self.s.clone();
        f(&mut c);
        self.out.push(c);
    }
}

/// Fewer clients, servers, shared sessions; no stray peer, or a milder
/// one (the stray peer's victim stays a client).
fn fewer_peers(v: &mut Variants<'_>) {
    let s = v.s;
    for n in [1, s.clients / 2, s.clients.saturating_sub(1)] {
        if n >= 1 && n < s.clients {
            v.with(&|c| {
                c.clients = n;
                c.shared_session_pairs = c.shared_session_pairs.min(n / 2);
                if let Some(p) = c.stray.as_mut() {
                    p.victim = p.victim.min(n - 1);
                }
            });
        }
    }
    if let Some(p) = s.stray.filter(|p| p.victim > 0) {
        v.with(&|c| c.stray = Some(StrayPeer { victim: 0, ..p }));
    }
    if s.servers > 1 {
        v.with(&|c| c.servers = 1);
        v.with(&|c| c.servers -= 1);
    }
    if s.stray.is_some() {
        v.with(&|c| c.stray = None);
    }
    if let Some(p) = s.stray {
        if p.writes > 1 {
            v.with(&|c| c.stray = Some(StrayPeer { writes: 1, ..p }));
        }
        if p.bye {
            v.with(&|c| c.stray = Some(StrayPeer { bye: false, ..p }));
        }
    }
    if s.shared_session_pairs > 0 {
        v.with(&|c| c.shared_session_pairs = 0);
        v.with(&|c| c.shared_session_pairs -= 1);
    }
}

/// No crash plan or fewer of its kills; no kills on events.
fn fewer_kills(v: &mut Variants<'_>) {
    let s = v.s;
    if s.crash.is_some() {
        v.with(&|c| c.crash = None);
    }
    if let Some(p) = s.crash {
        if p.max_kills > 1 {
            v.with(&|c| {
                c.crash = Some(CrashPlan {
                    max_kills: p.max_kills / 2,
                    ..p
                })
            });
        }
    }
    if !s.kill_on.is_empty() {
        v.with(&|c| c.kill_on.clear());
    }
}

/// Fewer client crashes, an outbox written at every release, no or
/// smaller tail losses (the planted defect and the journal itself stay:
/// they are what is tested).
fn fewer_client_crashes(v: &mut Variants<'_>) {
    let s = v.s;
    if let Some(x) = s.durable {
        if let Some(p) = x.client_crash {
            v.with(&|c| {
                c.durable = Some(Durability {
                    client_crash: None,
                    ..x
                })
            });
            if p.max_kills > 1 {
                let fewer = CrashPlan {
                    max_kills: p.max_kills / 2,
                    ..p
                };
                v.with(&|c| {
                    c.durable = Some(Durability {
                        client_crash: Some(fewer),
                        ..x
                    })
                });
            }
        }
        if x.outbox_lag > 1 {
            v.with(&|c| c.durable = Some(Durability { outbox_lag: 1, ..x }));
        }
        if let Some(t) = x.tail_loss {
            // No tail loss, fewer commits lost, a cut at every crash.
            v.with(&|c| {
                c.durable = Some(Durability {
                    tail_loss: None,
                    ..x
                })
            });
            if t.batches > 1 {
                let fewer = TailLoss {
                    batches: t.batches / 2,
                    ..t
                };
                v.with(&|c| {
                    c.durable = Some(Durability {
                        tail_loss: Some(fewer),
                        ..x
                    })
                });
            }
            if t.every > 1 {
                let each = TailLoss { every: 1, ..t };
                v.with(&|c| {
                    c.durable = Some(Durability {
                        tail_loss: Some(each),
                        ..x
                    })
                });
            }
        }
    }
}

/// Each kill on an event left out, or sooner.
fn fewer_kills_on_events(v: &mut Variants<'_>) {
    let s = v.s;
    for i in 0..s.kill_on.len() {
        if s.kill_on.len() > 1 {
            v.with(&|c| {
                c.kill_on.remove(i);
            });
        }
        if s.kill_on[i].nth > 1 {
            v.with(&|c| c.kill_on[i].nth /= 2);
        }
    }
}

/// No faults, each rate off or halved, the schedule or each of its
/// entries left out.
fn fewer_faults(v: &mut Variants<'_>) {
    let s = v.s;
    if s.faults != FaultConfig::default() {
        v.with(&|c| c.faults = FaultConfig::default());
    }
    for k in 0..repro::rate_count() {
        let r = repro::get_rate(&s.faults, k);
        if r > 0 {
            v.with(&|c| repro::set_rate(&mut c.faults, k, 0));
            if r > 1 {
                v.with(&|c| repro::set_rate(&mut c.faults, k, r / 2));
            }
        }
    }
    if !s.faults.schedule.is_empty() {
        v.with(&|c| c.faults.schedule.clear());
    }
    for i in 0..s.faults.schedule.len() {
        v.with(&|c| {
            c.faults.schedule.remove(i);
        });
    }
}

/// Fewer and smaller messages, a shorter run, no reads, streams, checks
/// or pacing, no transport rebuilds.
fn smaller_workload(v: &mut Variants<'_>) {
    let s = v.s;
    let w = &s.workload;
    if w.messages == u64::MAX {
        v.with(&|c| c.workload.messages = 100);
    }
    for n in [0, 1, w.messages / 2, w.messages.saturating_sub(1)] {
        if n < w.messages && w.messages != u64::MAX {
            v.with(&|c| c.workload.messages = n);
        }
    }
    if s.duration > Duration::ZERO {
        v.with(&|c| c.duration = Duration::ZERO);
        v.with(&|c| c.duration = half_us(s.duration));
    }
    if w.size != 0 {
        v.with(&|c| c.workload.size = 0);
        v.with(&|c| c.workload.size = w.size / 2);
    }
    if w.size_spread != 0 {
        v.with(&|c| c.workload.size_spread = 0);
        v.with(&|c| c.workload.size_spread = w.size_spread / 2);
    }
    if w.storage != 0 {
        v.with(&|c| c.workload.storage = 0);
    }
    if w.read_per_mille > 0 {
        v.with(&|c| c.workload.read_per_mille = 0);
    }
    if w.stream_per_mille > 0 {
        v.with(&|c| c.workload.stream_per_mille = 0);
    }
    if w.validate {
        v.with(&|c| c.workload.validate = false);
    }
    if !w.interval.is_zero() {
        v.with(&|c| c.workload.interval = Duration::ZERO);
    }
    if s.rebuild_transport {
        v.with(&|c| c.rebuild_transport = false);
    }
}

/// The defaults for the windows, tables, latency and detection delay.
fn defaults(v: &mut Variants<'_>) {
    let s = v.s;
    let d = Scenario::default();
    if s.faults.reorder_depth > 1 {
        v.with(&|c| c.faults.reorder_depth = 1);
    }
    if s.client_window != d.client_window {
        v.with(&|c| c.client_window = d.client_window);
    }
    if s.client_window > 1 {
        v.with(&|c| c.client_window /= 2);
    }
    if s.server_window != d.server_window {
        v.with(&|c| c.server_window = d.server_window);
    }
    if s.server_sessions != d.server_sessions {
        v.with(&|c| c.server_sessions = d.server_sessions);
    }
    if s.server_tombs != d.server_tombs {
        v.with(&|c| c.server_tombs = d.server_tombs);
    }
    if s.latency != d.latency {
        v.with(&|c| c.latency = d.latency);
    }
    if s.detect_delay != d.detect_delay {
        v.with(&|c| c.detect_delay = d.detect_delay);
    }
}
