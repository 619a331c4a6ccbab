//! The event loop of one run.

use core::cell::RefCell;
use core::time::Duration;
use std::rc::Rc;

use iomsg_core::rng::{mix64, SplitMix64};
use iomsg_core::session::{ClientEvent, ClientSession, DisconnectCause, ReadData, ServerEvent};
use iomsg_core::transport::{Client, ClientHandler, ConnId};
use iomsg_core::{workload, Instant};

use super::journal::Journal;
use super::ledger::Ledger;
use super::report::Report;
use super::scenario::{
    configs, KillEvent, Scenario, ScenarioError, CLIENT_WINDOW_MAX, MAX_ROUNDS_PER_INSTANT,
};
use super::server::{self, Notice, SimServer};
use super::stray::Stray;
use super::truth::{ClientSpec, FrameInfo, Taken, Truth};
use crate::fault::FaultConfig;
use crate::faulty::{Faults, Faulty};
use crate::network::{ClientPort, ConnStatus, Network, NetworkConfig, Tap, TapKind};

type SimClient = Client<Faulty<ClientPort>, CLIENT_WINDOW_MAX, Box<[u8]>>;

/// A client's application in the simulation: events and read data go to
/// two closures.
struct SimApp<E, R> {
    event: E,
    read: R,
}

impl<E: FnMut(ClientEvent), R: FnMut(ReadData<'_>)> ClientHandler for SimApp<E, R> {
    fn event(&mut self, event: ClientEvent) {
        (self.event)(event);
    }
    fn read_data(&mut self, data: ReadData<'_>) {
        (self.read)(data);
    }
}

struct ClientSlot {
    driver: Box<SimClient>,
    addr: u16,
    next_submit: Instant,
    closing: bool,
    disconnected_at: Option<Instant>,
    /// Established since the last disconnect.
    connected: bool,
    /// The outbox and crashes (crash-proof state on).
    life: Option<durable::ClientLife>,
}

struct ServerSlot {
    driver: Option<Box<dyn SimServer>>,
    addr: u16,
    next_kill: Option<Instant>,
    restart_at: Option<Instant>,
    generation: u32,
    /// The journal of its instances (journal on).
    journal: Journal,
}

/// Counts protocol events for `Scenario::kill_on`.
struct Triggers {
    seen: [u64; 4],
    fired: Vec<bool>,
    armed: bool,
}

impl Triggers {
    /// Counts `event`; returns the downtime of a kill it triggers.
    fn hit(&mut self, s: &Scenario, event: KillEvent) -> Option<Duration> {
        let k = KillEvent::ALL.iter().position(|&e| e == event)?;
        self.seen[k] += 1;
        if !self.armed {
            return None;
        }
        let n = self.seen[k];
        for (j, on) in s.kill_on.iter().enumerate() {
            if on.event == event && on.nth == n && !self.fired[j] {
                self.fired[j] = true;
                return Some(on.down_for);
            }
        }
        None
    }
}

pub(crate) fn run(s: &Scenario) -> Result<Report, ScenarioError> {
    s.validate()?;
    let mut rng = SplitMix64::new(s.seed);
    let net = Network::new(NetworkConfig {
        latency: s.latency,
        detect_delay: s.detect_delay,
    });
    // One decision engine for every wrapper: one schedule, one count.
    let faults = Faults::new(s.faults.clone(), mix64(s.seed ^ 0xFA17));
    let specs: Vec<ClientSpec> = (0..s.clients)
        .map(|i| ClientSpec {
            session: s.session_of(i),
            server: s.server_of(i),
            replay: s.replay,
        })
        .collect();
    let log: Rc<RefCell<Vec<TapRecord>>> = Rc::default();
    let tap_log = log.clone();
    net.set_tap(Some(Box::new(move |t: &Tap<'_>| {
        tap_log.borrow_mut().push(TapRecord {
            kind: t.kind,
            conn: t.conn,
            client: t.client,
            server: t.server,
            frame: FrameInfo::parse(t.frame),
        });
    })));
    // A silently dropped frame never reaches the network: the wrapper that
    // dropped it reports it, and the network names the connection's ends.
    let drop_log = log.clone();
    let drop_net = net.clone();
    faults.set_drop_tap(Some(Box::new(move |conn, frame: &[u8]| {
        if let Some((client, server)) = drop_net.conn_endpoints(conn) {
            drop_log.borrow_mut().push(TapRecord {
                kind: TapKind::SilentlyDropped,
                conn,
                client,
                server,
                frame: FrameInfo::parse(frame),
            });
        }
    })));
    let mut rec = Recorder {
        log,
        spare: Vec::new(),
        endpoints: Vec::new(),
        rx: (0..s.servers).map(|_| RxIndex::default()).collect(),
        truth: Truth::new(&specs),
        ledger: Ledger::new(s.clients, s.servers, s.durable.is_some_and(|d| d.journal)),
        durable: s.durable.is_some(),
        client_endpoints: std::collections::HashSet::new(),
    };
    let corrupting = s.faults.corrupt_ppm > 0
        || s.faults
            .schedule
            .iter()
            .any(|f| f.fault == crate::fault::FrameFault::Corrupt);
    rec.truth
        .set_undetectable_corruption(corrupting && !s.workload.validate);
    rec.truth.set_journal(s.durable.is_some_and(|d| d.journal));
    rec.truth.set_crash_proof(s.durable.is_some());
    let mut report = Report::new(s);
    let mut now = Instant::ZERO;
    let fault_end = Instant::ZERO + s.duration;
    let end = Instant::ZERO + s.end();

    // What a tail loss may cut back: the journals, the applications'
    // records and the truth keep that many commits to undo.
    let tail_depth = s
        .durable
        .and_then(|d| d.tail_loss.filter(|_| d.journal))
        .map_or(0, |t| t.batches as usize);
    rec.ledger.set_tail_depth(tail_depth);
    rec.truth.set_tail_depth(tail_depth);
    let defect = s.durable.and_then(|d| d.restore_defect);
    let mut servers: Vec<ServerSlot> = (0..s.servers)
        .map(|i| {
            let offset = s.crash.map(|c| c.every / s.servers as u32 * i as u32);
            ServerSlot {
                driver: None,
                addr: i as u16,
                next_kill: s.crash.map(|c| now + c.every + offset.unwrap_or_default()),
                restart_at: Some(now),
                generation: 0,
                journal: Journal::new(tail_depth, defect),
            }
        })
        .collect();
    let mut clients: Vec<ClientSlot> = Vec::with_capacity(s.clients);
    for (i, spec) in specs.iter().enumerate() {
        let (cfg, _) = configs(s, i, 0);
        let port = net.client(spec.server);
        rec.register(port.endpoint(), EpOwner::Client(i));
        let port = Faulty::new(port, faults.clone(), true);
        let storage = vec![0u8; s.client_storage()].into_boxed_slice();
        let driver = Client::new(port, ClientSession::new(cfg, now, storage))
            .map_err(|_| ScenarioError::Size(s.workload.size))?;
        clients.push(ClientSlot {
            driver: Box::new(driver),
            addr: spec.server,
            next_submit: now,
            closing: false,
            disconnected_at: None,
            connected: false,
            life: s.durable.map(|d| durable::ClientLife::new(d.outbox_lag)),
        });
    }
    for c in &mut clients {
        c.driver.start(now);
    }
    let mut stray = s.stray.map(|p| Stray::new(p, s.session_of(p.victim)));
    let mut client_crashes = durable::ClientCrashes::new(s, now);
    let mut triggers = Triggers {
        seen: [0; 4],
        fired: vec![false; s.kill_on.len()],
        armed: true,
    };

    let mut generations = 0u32;
    let mut planned_kills = 0u64;
    let mut kills = 0u64;
    let mut faults_on = true;
    let mut steps = 0u64;
    let mut rounds_here = 0u64;
    let mut last_now = now;
    let w = &s.workload;
    let unbounded = w.messages == u64::MAX;
    let journaled = s.durable.is_some_and(|d| d.journal);
    // Faults (and kills) end at `calm`, the workload at `fault_end`: the
    // same instant but after a power cut (see `durable::calm_after`).
    let calm = Instant::ZERO + durable::calm_after(s);
    let mut submitting = true;
    'run: loop {
        steps += 1;
        if submitting && now >= fault_end {
            submitting = false;
        }
        if faults_on && now >= calm {
            faults_on = false;
            triggers.armed = false;
            faults.set_config(FaultConfig::default());
            if let Some(st) = stray.as_mut() {
                st.stop(now);
            }
            kills += durable::power_cut(s, &mut servers, now, &mut rec, &mut report);
        }
        // Planned crashes and restarts.
        for (k, sl) in servers.iter_mut().enumerate() {
            if let (Some(plan), Some(kill)) = (s.crash, sl.next_kill) {
                if sl.driver.is_some() && now >= kill && faults_on && planned_kills < plan.max_kills
                {
                    kills += 1;
                    durable::server_crashed(s, (k, &mut *sl), kills, &mut rec, &mut report);
                    planned_kills += 1;
                    sl.restart_at = Some(now + plan.down_for);
                    sl.next_kill = None;
                }
            }
            if sl.driver.is_none() && sl.restart_at.is_some_and(|t| now >= t) {
                let Ok(port) = net.listen(sl.addr, now) else {
                    continue;
                };
                let instance = mix64(rng.next_u64());
                let (_, cfg) = configs(s, 0, instance);
                let port = Faulty::new(port, faults.clone(), false);
                let mut d = server::build(
                    port,
                    cfg,
                    s.server_window,
                    s.server_sessions,
                    s.server_tombs,
                );
                generations += 1;
                sl.generation = generations;
                d.flushing(s.durable.is_some());
                if s.durable.is_some_and(|d| d.journal) {
                    let into = (&mut rec, &mut report);
                    durable::restore(&sl.journal, &mut *d, generations, now, into);
                }
                rec.register(
                    d.endpoint(),
                    EpOwner::Server {
                        slot: k,
                        generation: generations,
                    },
                );
                sl.driver = Some(d);
                sl.restart_at = None;
                sl.next_kill = s.crash.map(|c| now + c.every);
                report.listens.push(now);
            }
        }
        // Client crash-restarts.
        client_crashes.step(
            now,
            faults_on,
            &mut clients,
            &mut durable::Crasher {
                scenario: s,
                net: &net,
                faults: &faults,
                rec: &mut rec,
                report: &mut report,
            },
        );
        // The stray peer.
        if let Some(st) = stray.as_mut() {
            if st.due(now) && faults_on {
                let port = net.client(s.server_of(st.victim()));
                rec.register(port.endpoint(), EpOwner::Stray);
                st.start(now, port);
            }
        }
        // Submit and exchange until nothing more can happen at `now`.
        loop {
            steps += 1;
            rounds_here += 1;
            if steps >= s.max_steps {
                rec.truth.not_finished(format!(
                    "stopped at the step cap ({} steps) at {now}",
                    s.max_steps
                ));
                break 'run;
            }
            if rounds_here > MAX_ROUNDS_PER_INSTANT {
                rec.truth.not_finished(format!(
                    "livelock: {MAX_ROUNDS_PER_INSTANT} event-loop rounds at {now} without time passing"
                ));
                break 'run;
            }
            let mut submitted_any = false;
            for (i, c) in clients.iter_mut().enumerate() {
                if durable::is_down(c) {
                    continue;
                }
                let mut workload = submit::Workload {
                    scenario: s,
                    rng: &mut rng,
                    truth: &mut rec.truth,
                    ledger: &mut rec.ledger,
                    backpressure: &mut report.backpressure,
                };
                submitted_any |= workload.submit_due(i, c, now, submitting);
                let done_submitting =
                    c.driver.session().next_sn() >= w.messages || (!submitting && unbounded);
                if done_submitting && !c.closing && !submitting && !durable::is_down(c) {
                    c.closing = true;
                    c.driver.close(now);
                }
            }
            // Progress until quiet.
            let mut any_progress = false;
            loop {
                let mut progress = false;
                for (i, c) in clients.iter_mut().enumerate() {
                    if durable::is_down(c) {
                        continue;
                    }
                    let mut rebuild = false;
                    let mut lost_connection = false;
                    let disconnected_at = &mut c.disconnected_at;
                    let connected = &mut c.connected;
                    let latency = &mut report.reconnect_latency;
                    let rec = &mut rec;
                    let net = &net;
                    let id = c.driver.session().session();
                    // What the fault wrapper holds for the current
                    // connection: in flight, though not in the network.
                    let held: Vec<(ConnId, usize)> = c
                        .driver
                        .connection()
                        .map(|conn| (conn, c.driver.transport().held(conn)))
                        .into_iter()
                        .collect();
                    let mut reads: Vec<(u64, workload::Check)> = Vec::new();
                    let read =
                        |d: ReadData<'_>| reads.push((d.sn, workload::check(id, d.sn, d.data)));
                    let event = |e: ClientEvent| {
                        rec.drain();
                        match &e {
                            ClientEvent::Disconnected { epoch, cause } => {
                                rebuild = true;
                                disconnected_at.get_or_insert(now);
                                lost_connection |= core::mem::take(connected);
                                if *cause == DisconnectCause::ReplyTimeout {
                                    // Up, with nothing of it still on the
                                    // way: a probe would have had to come.
                                    rec.truth.reply_timeout(i, *epoch, |conn| {
                                        matches!(
                                            net.conn_status(conn),
                                            Some(ConnStatus::Open | ConnStatus::Closing)
                                        ) && net.frames_to_server(conn) == 0
                                            && !held.iter().any(|&(h, n)| h == conn && n > 0)
                                    });
                                }
                            }
                            ClientEvent::Established { .. } => {
                                *connected = true;
                                if let Some(t) = disconnected_at.take() {
                                    latency.record(now - t);
                                }
                            }
                            _ => {}
                        }
                        rec.truth.client_event(i, &e);
                        rec.ledger.client_event(i, &e);
                    };
                    progress |= c.driver.poll(now, &mut SimApp { event, read });
                    rec.drain();
                    if let Some(life) = c.life.as_mut() {
                        life.outbox.polled(c.driver.session());
                    }
                    for (sn, check) in reads {
                        rec.truth.read_answered(i, sn, check);
                    }
                    if lost_connection {
                        // What the client cannot know was delivered: what a
                        // broken connection can have lost.
                        let session = c.driver.session();
                        report.unacked_at_disconnects += session.sent_sn() - session.base_sn();
                    }
                    if rebuild && s.rebuild_transport && !c.driver.session().is_terminal() {
                        // A fresh endpoint; the old one is closed (dropped),
                        // so late events of its connections go nowhere.
                        let fresh = net.client(c.addr);
                        rec.register(fresh.endpoint(), EpOwner::Client(i));
                        let fresh = Faulty::new(fresh, faults.clone(), true);
                        drop(c.driver.replace_transport(now, fresh));
                        report.transport_rebuilds += 1;
                    }
                }
                if let Some(st) = stray.as_mut() {
                    let victim = clients[st.victim()].driver.session();
                    let (epoch, next) = (victim.epoch(), victim.next_sn());
                    progress |= st.poll(now, epoch, next);
                    rec.drain();
                }
                for (k, sl) in servers.iter_mut().enumerate() {
                    let (addr, generation) = (sl.addr, sl.generation);
                    let Some(d) = sl.driver.as_mut() else {
                        continue;
                    };
                    let mut kill: Option<Duration> = None;
                    let (p, stop) = d.poll(now, &mut sl.journal, &mut |n: Notice<'_>| {
                        rec.drain();
                        let trigger = match n {
                            Notice::Accepted => Some(KillEvent::Accept),
                            Notice::Delivered {
                                session,
                                sn,
                                conn,
                                hash,
                            } => {
                                let owner = rec.rx[k].owner(Some(conn));
                                rec.took(k, generation, owner, session, sn);
                                let taken = Taken { session, sn, hash };
                                rec.truth
                                    .delivered(generation, addr, owner, Some(conn), taken);
                                Some(KillEvent::Delivered)
                            }
                            Notice::Event(e) => {
                                match e {
                                    ServerEvent::LiveLoss {
                                        session, missing, ..
                                    } => {
                                        report.live_loss(now, *session, missing.clone());
                                        rec.truth.server_event(addr, e);
                                    }
                                    // With a journal the instance recalls
                                    // what it forgot: it lost nothing.
                                    ServerEvent::Forgotten { session } if !journaled => {
                                        rec.truth.forgotten(generation, *session);
                                        rec.ledger.forgotten(generation, *session);
                                    }
                                    ServerEvent::SessionOpened { session, conn, .. } => {
                                        rec.truth.conn_bound(addr, *session, *conn);
                                        rec.truth.server_event(addr, e);
                                    }
                                    _ => rec.truth.server_event(addr, e),
                                }
                                match e {
                                    ServerEvent::LiveLoss { .. } => Some(KillEvent::LiveLoss),
                                    ServerEvent::SessionOpened { .. } => {
                                        Some(KillEvent::SessionOpened)
                                    }
                                    _ => None,
                                }
                            }
                            Notice::Flush => {
                                rec.ledger.commit(k);
                                rec.truth.committed(addr, generation);
                                None
                            }
                        };
                        let hit = trigger.and_then(|t| triggers.hit(s, t));
                        if hit.is_some() {
                            kill = kill.or(hit);
                        }
                        kill.is_some()
                    });
                    rec.drain();
                    progress |= p;
                    if let (true, Some(down_for)) = (stop, kill) {
                        kills += 1;
                        durable::server_crashed(s, (k, &mut *sl), kills, &mut rec, &mut report);
                        sl.restart_at = Some(now + down_for);
                        sl.next_kill = None;
                        progress = true;
                    }
                }
                if !progress {
                    break;
                }
                any_progress = true;
                steps += 1;
                rounds_here += 1;
                if rounds_here > MAX_ROUNDS_PER_INSTANT || steps >= s.max_steps {
                    break;
                }
            }
            if !submitted_any && !any_progress {
                break;
            }
        }
        let clients_done = clients.iter().all(|c| c.driver.session().is_terminal());
        let stray_done = stray.as_ref().is_none_or(Stray::is_done);
        // Frames the fault wrappers hold back are in flight too.
        let held_next = clients
            .iter()
            .filter_map(|c| c.driver.transport().next_release())
            .chain(
                servers
                    .iter()
                    .filter_map(|sl| sl.driver.as_ref()?.next_release()),
            )
            .min();
        let net_next = match (net.next_event(), held_next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !submitting && clients_done && stray_done && net_next.is_none() {
            break;
        }
        // Next event.
        let mut next: Option<Instant> = net_next;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for c in clients.iter().filter(|c| !durable::is_down(c)) {
            consider(c.driver.poll_timeout());
            let session = c.driver.session();
            let wants = session.next_sn() < w.messages && !c.closing;
            if wants && c.next_submit > now && session.can_submit() {
                consider(Some(c.next_submit));
            }
        }
        consider(client_crashes.next_event(faults_on, &clients));
        for sl in &servers {
            consider(sl.driver.as_ref().and_then(|d| d.poll_timeout()));
            consider(sl.restart_at);
            if faults_on {
                consider(sl.next_kill);
            }
        }
        if let Some(st) = &stray {
            consider(st.poll_timeout());
        }
        if faults_on {
            consider(Some(calm));
        }
        if submitting {
            consider(Some(fault_end));
        }
        let Some(next) = next else {
            let stuck: Vec<String> = clients
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.driver.session().is_terminal())
                .map(|(i, c)| {
                    let session = c.driver.session();
                    format!(
                        "client {i} {:?} sns {}..{} sent {}",
                        session.state(),
                        session.base_sn(),
                        session.next_sn(),
                        session.sent_sn()
                    )
                })
                .collect();
            rec.truth.not_finished(format!(
                "nothing left to happen at {now}, yet {} of {} clients are not done: {}",
                stuck.len(),
                clients.len(),
                stuck.join("; ")
            ));
            break;
        };
        if next > end {
            let open = clients
                .iter()
                .filter(|c| !c.driver.session().is_terminal())
                .count();
            rec.truth.not_finished(format!(
                "the drain ended at {end} with {open} clients not done and {}",
                if net_next.is_some() {
                    "frames still in flight"
                } else {
                    "an empty network"
                }
            ));
            now = end;
            break;
        }
        // Never stand still: a due timer that did nothing moves time on.
        now = if next > now {
            next
        } else {
            now + Duration::from_micros(1)
        };
        if now != last_now {
            last_now = now;
            rounds_here = 0;
        }
    }
    rec.drain();
    if rec.durable {
        durable::last_flush(&mut servers, &mut rec);
    }
    for sl in &servers {
        if let Some(d) = &sl.driver {
            report.absorb_server(d.stats());
            // Holes still open in a live server: claimed lost on a live
            // connection (no replay will come for them any more).
            for (i, spec) in specs.iter().enumerate() {
                if spec.server == sl.addr {
                    rec.truth.open_holes(i, &d.holes(spec.session));
                }
            }
        }
    }
    for (i, c) in clients.iter().enumerate() {
        let session = c.driver.session();
        report.absorb_client(session);
        let s = session.stats();
        let past = c.life.as_ref().map_or([0; 3], |l| l.past);
        rec.truth.client_final(
            i,
            session.base_sn(),
            [
                s.connects + past[0],
                s.established + past[1],
                s.disconnects + past[2],
            ],
        );
    }
    report.kills = kills;
    report.client_endpoints = rec.client_endpoints.len() as u64;
    report.virtual_time = now - Instant::ZERO;
    report.steps = steps;
    report.faults = faults.counts();
    report.network = net.counts();
    net.set_tap(None);
    faults.set_drop_tap(None);
    if rec.durable {
        report.durable.committed = rec.ledger.committed;
        report.durable.rolled_back = rec.ledger.rolled_back;
        let Recorder { ledger, truth, .. } = &mut rec;
        ledger.judge(|i| s.session_of(i), truth.findings_mut());
    }
    report.absorb_verdict(rec.truth.verdict());
    Ok(report)
}

mod durable;
mod recorder;
mod submit;

use recorder::{EpOwner, Recorder, RxIndex, TapRecord};
