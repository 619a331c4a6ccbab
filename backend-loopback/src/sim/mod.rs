//! The simulation driver: whole scenarios in virtual time.
//!
//! [`run`] builds a loopback [`Network`], `clients` client drivers and
//! `servers` server drivers, feeds the clients a workload, injects the
//! scenario's faults and server crash-restarts during `duration`, then
//! turns faults off and lets everything drain. Time jumps from event to
//! event, so a run of many virtual seconds takes milliseconds.
//!
//! The [`Report`] holds what the protocol said (client and server counters
//! and events) next to a ground truth the driver keeps by itself: every sn
//! each server instance handed to its application. [`Report::discrepancies`]
//! lists every place where the two disagree.

mod report;
pub(crate) mod truth;

use core::time::Duration;

use iomsg_core::session::{
    mix64, ClientConfig, ClientEvent, ClientSession, RequestOp, ServerConfig, ServerEvent,
    SplitMix64, SubmitError,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::Instant;

use crate::fault::FaultConfig;
use crate::network::{Addr, ClientPort, Network, NetworkConfig, ServerPort};

pub use report::{Latency, LossClass, LostRange, Report};
use truth::Truth;

/// Client send window (frames) in the simulation.
pub const WINDOW: usize = 64;

type SimClient = Client<ClientPort, WINDOW>;
type SimServer = Server<ServerPort, 16, 16, 16>;

/// What each client sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Requests per client.
    pub messages: u64,
    /// Payload of a write, requested length of a read.
    pub size: u32,
    /// Share of reads, per mille.
    pub read_per_mille: u16,
    /// Share of streamed writes (no completion), per mille.
    pub stream_per_mille: u16,
    /// Payload CRCs on every frame.
    pub validate: bool,
    /// Least virtual time between two requests of one client (zero: as
    /// fast as the window allows).
    pub interval: Duration,
}

impl Default for Workload {
    /// 10 000 writes of 64 bytes per client.
    fn default() -> Self {
        Workload {
            messages: 10_000,
            size: 64,
            read_per_mille: 0,
            stream_per_mille: 0,
            validate: false,
            interval: Duration::ZERO,
        }
    }
}

/// Server crash-restarts: all server state is lost, a new instance listens
/// again after `down_for`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPlan {
    /// Uptime between crashes.
    pub every: Duration,
    /// Downtime before the new instance listens.
    pub down_for: Duration,
    /// Stop after this many crashes (across all servers).
    pub max_kills: u64,
}

/// One simulated run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// Seeds everything: session ids, instance ids, op choice, faults, jitter.
    pub seed: u64,
    /// Number of clients.
    pub clients: usize,
    /// Number of servers; client `i` talks to server `i % servers`.
    pub servers: usize,
    /// What each client sends.
    pub workload: Workload,
    /// Per-frame faults during the faulty phase.
    pub faults: FaultConfig,
    /// Server crash-restarts during the faulty phase.
    pub crash: Option<CrashPlan>,
    /// Length of the faulty phase (virtual time).
    pub duration: Duration,
    /// Time allowed after it to finish without faults (virtual time).
    pub drain: Duration,
    /// Clients replay unacknowledged frames after reconnecting.
    pub replay: bool,
    /// Clients rebuild their whole transport after every disconnect.
    pub rebuild_transport: bool,
    /// One-way network latency.
    pub latency: Duration,
    /// Time to notice a crashed peer.
    pub detect_delay: Duration,
}

impl Scenario {
    /// The field reproduction: one server crashed and restarted every 2 ms
    /// of uptime (down 500 µs), two clients reconnecting, replay on.
    pub fn field_repro(seed: u64, kills: u64) -> Scenario {
        let every = Duration::from_millis(2);
        let down_for = Duration::from_micros(500);
        let cycle = every + down_for;
        Scenario {
            seed,
            clients: 2,
            servers: 1,
            workload: Workload {
                messages: u64::MAX,
                ..Workload::default()
            },
            faults: FaultConfig::default(),
            crash: Some(CrashPlan {
                every,
                down_for,
                max_kills: kills,
            }),
            duration: cycle * (kills.min(u64::from(u32::MAX)) as u32) + every,
            drain: Duration::from_secs(1),
            replay: true,
            rebuild_transport: false,
            latency: Duration::from_micros(5),
            detect_delay: Duration::from_micros(50),
        }
    }
}

impl Default for Scenario {
    /// Two clients, one server, no faults, 100 ms.
    fn default() -> Self {
        Scenario {
            seed: 1,
            clients: 2,
            servers: 1,
            workload: Workload::default(),
            faults: FaultConfig::default(),
            crash: None,
            duration: Duration::from_millis(100),
            drain: Duration::from_secs(1),
            replay: true,
            rebuild_transport: false,
            latency: Duration::from_micros(5),
            detect_delay: Duration::from_micros(50),
        }
    }
}

struct SimClientSlot {
    driver: SimClient,
    addr: Addr,
    submitted: u64,
    next_submit: Instant,
    closing: bool,
    disconnected_at: Option<Instant>,
    /// Established since the last disconnect.
    connected: bool,
}

struct SimServerSlot {
    /// Boxed: a restart builds a new server, and moving it is not free.
    driver: Option<Box<SimServer>>,
    addr: Addr,
    next_kill: Option<Instant>,
    restart_at: Option<Instant>,
    generation: u32,
}

/// Client configuration used by the simulation: timers scaled to a
/// network with microsecond latency.
pub fn sim_client_config(session: u64, replay: bool, validate: bool, size: u32) -> ClientConfig {
    let mut c = ClientConfig::new(session, mix64(session ^ 0x70CE));
    c.connect_timeout = Duration::from_millis(1);
    c.reply_timeout = Duration::from_millis(2);
    c.backoff.initial = Duration::from_micros(50);
    c.backoff.max = Duration::from_millis(1);
    c.max_retries = 100_000;
    c.replay = replay;
    c.validate = validate;
    c.max_payload = size.max(64);
    c.seed = mix64(session);
    c
}

/// Runs a scenario to the end and reports.
///
/// # Panics
/// If `clients` or `servers` is zero or the workload's size does not fit
/// the drivers' 4 KiB frames (a caller's error, not a run's outcome).
pub fn run(scenario: &Scenario) -> Report {
    assert!(
        scenario.clients > 0 && scenario.servers > 0,
        "need clients and servers"
    );
    let mut rng = SplitMix64::new(scenario.seed);
    let net = Network::new(NetworkConfig {
        latency: scenario.latency,
        detect_delay: scenario.detect_delay,
        seed: mix64(scenario.seed ^ 0xFA17),
        faults: scenario.faults.clone(),
    });
    let mut truth = Truth::new(scenario.clients);
    let mut report = Report::new(scenario);
    let mut now = Instant::ZERO;
    let fault_end = Instant::ZERO + scenario.duration;
    let end = fault_end + scenario.drain;

    let mut servers: Vec<SimServerSlot> = (0..scenario.servers)
        .map(|i| {
            let addr = i as Addr;
            let offset = scenario
                .crash
                .map(|c| c.every / scenario.servers as u32 * i as u32);
            SimServerSlot {
                driver: None,
                addr,
                next_kill: scenario
                    .crash
                    .map(|c| now + c.every + offset.unwrap_or_default()),
                restart_at: Some(now),
                generation: 0,
            }
        })
        .collect();
    let mut clients: Vec<SimClientSlot> = (0..scenario.clients)
        .map(|i| {
            let session = mix64(scenario.seed.wrapping_add(i as u64 + 1)) | 1;
            let w = &scenario.workload;
            let cfg = sim_client_config(session, scenario.replay, w.validate, w.size);
            let addr = (i % scenario.servers) as Addr;
            let driver = Client::new(net.client(addr), ClientSession::new(cfg, now))
                .expect("workload size fits the simulation's 4 KiB frames");
            truth.register(i, session);
            SimClientSlot {
                driver,
                addr,
                submitted: 0,
                next_submit: now,
                closing: false,
                disconnected_at: None,
                connected: false,
            }
        })
        .collect();
    for c in &mut clients {
        c.driver.start(now);
    }

    let mut kills = 0u64;
    let mut faults_on = true;
    let mut steps = 0u64;
    loop {
        steps += 1;
        if faults_on && now >= fault_end {
            faults_on = false;
            net.set_faults(FaultConfig::default());
        }
        // Server crashes and restarts.
        for s in &mut servers {
            if let (Some(plan), Some(kill)) = (scenario.crash, s.next_kill) {
                if s.driver.is_some() && now >= kill && faults_on && kills < plan.max_kills {
                    let dead = s.driver.take();
                    if let Some(d) = &dead {
                        report.absorb_server(d.core().stats());
                    }
                    drop(dead); // the process is gone: connections reset
                    kills += 1;
                    truth.server_killed(now);
                    s.restart_at = Some(now + plan.down_for);
                    s.next_kill = None;
                }
            }
            if s.driver.is_none() && s.restart_at.is_some_and(|t| now >= t) {
                let port = net
                    .listen(s.addr, now)
                    .expect("the crashed server freed its address");
                let instance = mix64(rng.next_u64());
                let mut cfg = ServerConfig::new(instance);
                cfg.validate = scenario.workload.validate;
                s.driver = Some(Box::new(Server::new(port, cfg)));
                s.generation = truth.server_started(s.addr, instance);
                s.restart_at = None;
                s.next_kill = scenario.crash.map(|c| now + c.every);
                report.listens.push(now);
            }
        }
        // Submit and exchange until nothing more can happen at `now`.
        loop {
            let mut submitted_any = false;
            // Workload.
            let w = &scenario.workload;
            for (i, c) in clients.iter_mut().enumerate() {
                let unbounded = w.messages == u64::MAX;
                while c.submitted < w.messages
                    && !c.closing
                    && now >= c.next_submit
                    && !c.driver.session().is_terminal()
                    && (faults_on || !unbounded)
                {
                    let roll = rng.below(1000) as u16;
                    let op = if roll < w.read_per_mille {
                        RequestOp::Read
                    } else if roll < w.read_per_mille + w.stream_per_mille {
                        RequestOp::StreamWrite
                    } else {
                        RequestOp::Write
                    };
                    match c.driver.submit(op, w.size) {
                        Ok(sn) => {
                            submitted_any = true;
                            truth.submitted(i, sn);
                            c.submitted += 1;
                            c.next_submit = now + w.interval;
                        }
                        Err(SubmitError::Full) => {
                            report.backpressure += 1;
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let done_submitting = c.submitted >= w.messages || (!faults_on && unbounded);
                if done_submitting && !c.closing && !faults_on {
                    c.closing = true;
                    c.driver.close(now);
                }
            }
            // Progress until quiet.
            let mut any_progress = false;
            loop {
                let mut progress = false;
                for (i, c) in clients.iter_mut().enumerate() {
                    let mut rebuild = false;
                    let mut lost_connection = false;
                    let disconnected_at = &mut c.disconnected_at;
                    let connected = &mut c.connected;
                    progress |= c.driver.poll(now, &mut |e| {
                        match &e {
                            ClientEvent::Disconnected { .. } => {
                                rebuild = true;
                                disconnected_at.get_or_insert(now);
                                lost_connection |= core::mem::take(connected);
                            }
                            ClientEvent::Established { .. } => {
                                *connected = true;
                                if let Some(t) = disconnected_at.take() {
                                    report.reconnect_latency.record(now - t);
                                }
                            }
                            _ => {}
                        }
                        report.client_event(i, &e, &mut truth);
                    });
                    if lost_connection {
                        // What the client cannot know was delivered: what a
                        // broken connection can have lost.
                        let session = c.driver.session();
                        report.unacked_at_disconnects += session.sent_sn() - session.base_sn();
                    }
                    if rebuild && scenario.rebuild_transport && !c.driver.session().is_terminal() {
                        let _old = c.driver.replace_transport(now, net.client(c.addr));
                        report.transport_rebuilds += 1;
                    }
                }
                for s in &mut servers {
                    let generation = s.generation;
                    if let Some(d) = s.driver.as_mut() {
                        progress |= d.poll(now, &mut |e: ServerEvent| {
                            report.server_event(&e, &mut truth, generation, now);
                        });
                    }
                }
                if !progress {
                    break;
                }
                any_progress = true;
            }
            if !submitted_any && !any_progress {
                break;
            }
        }
        if clients.iter().all(|c| c.driver.session().is_terminal()) && !faults_on {
            break;
        }
        // Next event.
        let mut next: Option<Instant> = net.next_event();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for c in &clients {
            consider(c.driver.poll_timeout());
            let wants = c.submitted < scenario.workload.messages && !c.closing;
            if wants && c.next_submit > now && c.driver.session().can_submit() {
                consider(Some(c.next_submit));
            }
        }
        for s in &servers {
            consider(s.driver.as_ref().and_then(|d| d.poll_timeout()));
            consider(s.restart_at);
            if faults_on {
                consider(s.next_kill);
            }
        }
        if faults_on {
            consider(Some(fault_end));
        }
        let Some(next) = next else { break };
        if next > end {
            now = end;
            break;
        }
        // Never stand still: a due timer that did nothing moves time on.
        now = if next > now {
            next
        } else {
            now + Duration::from_micros(1)
        };
    }
    for s in &servers {
        if let Some(d) = &s.driver {
            report.absorb_server(d.core().stats());
            // Holes still open in a live server: claimed lost on a live
            // connection (no replay will come for them any more).
            for (i, c) in clients.iter().enumerate() {
                for hole in d.core().holes(c.driver.session().session()) {
                    truth.flag(i, hole, truth::OPEN_HOLE);
                }
            }
        }
    }
    for (i, c) in clients.iter().enumerate() {
        report.absorb_client(c.driver.session());
        truth.clients[i].sent = c.driver.session().sent_sn();
        truth.clients[i].final_base = c.driver.session().base_sn();
    }
    report.kills = kills;
    report.virtual_time = now - Instant::ZERO;
    report.steps = steps;
    report.faults = net.fault_counts();
    report.finish(&truth);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_run_delivers_and_acknowledges_everything_exactly_once() {
        let scenario = Scenario {
            workload: Workload {
                messages: 500,
                ..Workload::default()
            },
            ..Scenario::default()
        };
        let r = run(&scenario);
        std::println!("{r}");
        assert_eq!(r.discrepancies, Vec::<String>::new());
        assert_eq!(r.submitted, 1000);
        assert_eq!(r.delivered_unique, 1000);
        assert_eq!(r.acknowledged, 1000);
        assert_eq!(r.deliveries, 1000, "no duplicates without faults");
        assert_eq!(r.lost_total(), 0);
    }

    #[test]
    fn same_seed_gives_the_same_report() {
        let scenario = Scenario {
            seed: 11,
            faults: FaultConfig {
                corrupt_ppm: 2000,
                duplicate_ppm: 2000,
                ..FaultConfig::default()
            },
            crash: Some(CrashPlan {
                every: Duration::from_millis(3),
                down_for: Duration::from_micros(300),
                max_kills: 5,
            }),
            ..Scenario::default()
        };
        let a = run(&scenario);
        let b = run(&scenario);
        assert_eq!(a, b);
        assert!(
            a.kills > 0 && a.faults.corrupted > 0,
            "the faults did happen: {a:?}"
        );
    }
}
