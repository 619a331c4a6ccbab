//! One run of the simulation as a [`World`]: its setup, one instant at a
//! time, and its report.

use super::*;

/// Everything one run holds: the network and its fault engine, the
/// servers and clients, the stray peer, the ground truth and the report,
/// and virtual time. One [`step`](World::step) is one instant: what is
/// due happens, frames are exchanged until nothing more can happen, and
/// time moves to the next event.
pub(super) struct World<'s> {
    s: &'s Scenario,
    rng: SplitMix64,
    net: Network,
    faults: Faults,
    specs: Vec<ClientSpec>,
    rec: Recorder,
    report: Report,
    servers: Vec<ServerSlot>,
    clients: Vec<ClientSlot>,
    stray: Option<Stray>,
    client_crashes: durable::ClientCrashes,
    triggers: Triggers,
    /// Server instances started so far.
    generations: u32,
    /// Kills of the scenario's crash plan so far.
    planned_kills: u64,
    /// Server kills of every kind so far.
    kills: u64,
    /// Faults and kills still happen (until `calm`).
    faults_on: bool,
    /// Clients still submit (until `fault_end`).
    submitting: bool,
    steps: u64,
    /// Event-loop rounds at `now` (a livelock guard).
    rounds_here: u64,
    last_now: Instant,
    now: Instant,
    /// The workload ends here.
    fault_end: Instant,
    /// The drain ends here.
    end: Instant,
    /// Faults (and kills) end here: the same instant as `fault_end` but
    /// after a power cut (see `durable::calm_after`).
    calm: Instant,
    journaled: bool,
    /// The workload has no message count.
    unbounded: bool,
}

impl<'s> World<'s> {
    /// The network with its taps, the recorder, the server slots (each
    /// to listen at once) and the clients, started.
    pub(super) fn new(s: &'s Scenario) -> Result<World<'s>, ScenarioError> {
        s.validate()?;
        let rng = SplitMix64::new(s.seed);
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
        let rec = Self::recorder(s, &net, &faults, &specs);
        let now = Instant::ZERO;
        let mut world = World {
            s,
            rng,
            net,
            faults,
            specs,
            rec,
            report: Report::new(s),
            servers: Vec::new(),
            clients: Vec::with_capacity(s.clients),
            stray: s.stray.map(|p| Stray::new(p, s.session_of(p.victim))),
            client_crashes: durable::ClientCrashes::new(s, now),
            triggers: Triggers {
                seen: [0; 4],
                fired: vec![false; s.kill_on.len()],
                armed: true,
            },
            generations: 0,
            planned_kills: 0,
            kills: 0,
            faults_on: true,
            submitting: true,
            steps: 0,
            rounds_here: 0,
            last_now: now,
            now,
            fault_end: Instant::ZERO + s.duration,
            end: Instant::ZERO + s.end(),
            calm: Instant::ZERO + durable::calm_after(s),
            journaled: s.durable.is_some_and(|d| d.journal),
            unbounded: s.workload.messages == u64::MAX,
        };
        world.place_servers();
        world.start_clients()?;
        Ok(world)
    }

    /// The recorder: the network's tap and the fault engine's drop tap
    /// feed its log, and the truth knows what the scenario allows.
    fn recorder(s: &Scenario, net: &Network, faults: &Faults, specs: &[ClientSpec]) -> Recorder {
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
        // A silently dropped frame never reaches the network: the wrapper
        // that dropped it reports it, and the network names the
        // connection's ends.
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
            truth: Truth::new(specs),
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
        rec
    }

    /// One slot per server, each to listen at once, its kills staggered;
    /// what a tail loss may cut back (the journals, the applications'
    /// records and the truth keep that many commits to undo).
    fn place_servers(&mut self) {
        let (s, now) = (self.s, self.now);
        let tail_depth = s
            .durable
            .and_then(|d| d.tail_loss.filter(|_| d.journal))
            .map_or(0, |t| t.batches as usize);
        self.rec.ledger.set_tail_depth(tail_depth);
        self.rec.truth.set_tail_depth(tail_depth);
        let defect = s.durable.and_then(|d| d.restore_defect);
        self.servers = (0..s.servers)
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
    }

    /// A client per spec, each on its own faulty port, all started.
    fn start_clients(&mut self) -> Result<(), ScenarioError> {
        let (s, now) = (self.s, self.now);
        for (i, spec) in self.specs.iter().enumerate() {
            let (cfg, _) = configs(s, i, 0);
            let port = self.net.client(spec.server);
            self.rec.register(port.endpoint(), EpOwner::Client(i));
            let port = Faulty::new(port, self.faults.clone(), true);
            let storage = vec![0u8; s.client_storage()].into_boxed_slice();
            let driver = Client::new(port, ClientSession::new(cfg, now, storage))
                .map_err(|_| ScenarioError::Size(s.workload.size))?;
            self.clients.push(ClientSlot {
                driver: Box::new(driver),
                addr: spec.server,
                next_submit: now,
                closing: false,
                disconnected_at: None,
                connected: false,
                life: s.durable.map(|d| durable::ClientLife::new(d.outbox_lag)),
            });
        }
        for c in &mut self.clients {
            c.driver.start(now);
        }
        Ok(())
    }

    /// One instant; whether the run goes on.
    pub(super) fn step(&mut self) -> bool {
        self.steps += 1;
        self.seasons();
        self.crash_and_restart_servers();
        self.crash_clients();
        self.start_stray();
        self.exchange() && self.advance()
    }

    /// The workload ends at `fault_end`; at `calm` the faults, the kills
    /// and the stray peer stop, after a power cut if the scenario has one.
    fn seasons(&mut self) {
        let now = self.now;
        if self.submitting && now >= self.fault_end {
            self.submitting = false;
        }
        if self.faults_on && now >= self.calm {
            self.faults_on = false;
            self.triggers.armed = false;
            self.faults.set_config(FaultConfig::default());
            if let Some(st) = self.stray.as_mut() {
                st.stop(now);
            }
            self.kills += durable::power_cut(
                self.s,
                &mut self.servers,
                now,
                &mut self.rec,
                &mut self.report,
            );
        }
    }

    /// The crash plan's kills that are due, and the restarts.
    fn crash_and_restart_servers(&mut self) {
        let (s, now) = (self.s, self.now);
        for k in 0..self.servers.len() {
            let sl = &mut self.servers[k];
            if let (Some(plan), Some(kill)) = (s.crash, sl.next_kill) {
                if sl.driver.is_some()
                    && now >= kill
                    && self.faults_on
                    && self.planned_kills < plan.max_kills
                {
                    self.kills += 1;
                    let at = (k, &mut *sl);
                    durable::server_crashed(s, at, self.kills, &mut self.rec, &mut self.report);
                    self.planned_kills += 1;
                    sl.restart_at = Some(now + plan.down_for);
                    sl.next_kill = None;
                }
            }
            if sl.driver.is_none() && sl.restart_at.is_some_and(|t| now >= t) {
                self.restart_server(k);
            }
        }
    }

    /// A new instance of server `k` listens on its address (if it can
    /// yet), restored from its journal when the scenario keeps one.
    fn restart_server(&mut self, k: usize) {
        let (s, now) = (self.s, self.now);
        let sl = &mut self.servers[k];
        let Ok(port) = self.net.listen(sl.addr, now) else {
            return;
        };
        let instance = mix64(self.rng.next_u64());
        let (_, cfg) = configs(s, 0, instance);
        let port = Faulty::new(port, self.faults.clone(), false);
        let mut d = server::build(
            port,
            cfg,
            s.server_window,
            s.server_sessions,
            s.server_tombs,
        );
        self.generations += 1;
        let generations = self.generations;
        sl.generation = generations;
        d.flushing(s.durable.is_some());
        if self.journaled {
            let into = (&mut self.rec, &mut self.report);
            durable::restore(&sl.journal, &mut *d, generations, now, into);
        }
        self.rec.register(
            d.endpoint(),
            EpOwner::Server {
                slot: k,
                generation: generations,
            },
        );
        sl.driver = Some(d);
        sl.restart_at = None;
        sl.next_kill = s.crash.map(|c| now + c.every);
        self.report.listens.push(now);
    }

    /// The clients' crash-restarts that are due.
    fn crash_clients(&mut self) {
        self.client_crashes.step(
            self.now,
            self.faults_on,
            &mut self.clients,
            &mut durable::Crasher {
                scenario: self.s,
                net: &self.net,
                faults: &self.faults,
                rec: &mut self.rec,
                report: &mut self.report,
            },
        );
    }

    /// The stray peer, once it is due.
    fn start_stray(&mut self) {
        let now = self.now;
        if let Some(st) = self.stray.as_mut() {
            if st.due(now) && self.faults_on {
                let port = self.net.client(self.s.server_of(st.victim()));
                self.rec.register(port.endpoint(), EpOwner::Stray);
                st.start(now, port);
            }
        }
    }

    /// Submits and exchanges until nothing more can happen at `now`;
    /// `false` when the run must stop (the step cap, or a livelock).
    fn exchange(&mut self) -> bool {
        let (s, now) = (self.s, self.now);
        loop {
            self.steps += 1;
            self.rounds_here += 1;
            if self.steps >= s.max_steps {
                self.rec.truth.not_finished(format!(
                    "stopped at the step cap ({} steps) at {now}",
                    s.max_steps
                ));
                return false;
            }
            if self.rounds_here > MAX_ROUNDS_PER_INSTANT {
                self.rec.truth.not_finished(format!(
                    "livelock: {MAX_ROUNDS_PER_INSTANT} event-loop rounds at {now} without time passing"
                ));
                return false;
            }
            let submitted_any = self.submit_due();
            let any_progress = self.progress_until_quiet();
            if !submitted_any && !any_progress {
                return true;
            }
        }
    }

    /// Each client submits what is due; one whose workload is done and
    /// the submitting time over closes. Whether any submitted.
    fn submit_due(&mut self) -> bool {
        let (s, now) = (self.s, self.now);
        let w = &s.workload;
        let mut submitted_any = false;
        for (i, c) in self.clients.iter_mut().enumerate() {
            if durable::is_down(c) {
                continue;
            }
            let mut workload = submit::Workload {
                scenario: s,
                rng: &mut self.rng,
                truth: &mut self.rec.truth,
                ledger: &mut self.rec.ledger,
                backpressure: &mut self.report.backpressure,
            };
            submitted_any |= workload.submit_due(i, c, now, self.submitting);
            let done_submitting =
                c.driver.session().next_sn() >= w.messages || (!self.submitting && self.unbounded);
            if done_submitting && !c.closing && !self.submitting && !durable::is_down(c) {
                c.closing = true;
                c.driver.close(now);
            }
        }
        submitted_any
    }

    /// Polls the clients, the stray peer and the servers in turn until a
    /// round does nothing (or the round or step cap is reached); whether
    /// any round did something.
    fn progress_until_quiet(&mut self) -> bool {
        let mut any_progress = false;
        loop {
            let mut progress = false;
            for i in 0..self.clients.len() {
                progress |= self.poll_client(i);
            }
            progress |= self.poll_stray();
            for k in 0..self.servers.len() {
                progress |= self.poll_server(k);
            }
            if !progress {
                break;
            }
            any_progress = true;
            self.steps += 1;
            self.rounds_here += 1;
            if self.rounds_here > MAX_ROUNDS_PER_INSTANT || self.steps >= self.s.max_steps {
                break;
            }
        }
        any_progress
    }

    /// Polls client `i` (unless it is down), records what it hears, and
    /// rebuilds its transport after a disconnect when the scenario says
    /// so; whether it did anything.
    fn poll_client(&mut self, i: usize) -> bool {
        let (s, now) = (self.s, self.now);
        let World {
            clients,
            rec,
            net,
            report,
            faults,
            ..
        } = self;
        let c = &mut clients[i];
        if durable::is_down(c) {
            return false;
        }
        let mut rebuild = false;
        let mut lost_connection = false;
        let disconnected_at = &mut c.disconnected_at;
        let connected = &mut c.connected;
        let latency = &mut report.reconnect_latency;
        let id = c.driver.session().session();
        // What the fault wrapper holds for the current connection: in
        // flight, though not in the network.
        let held: Vec<(ConnId, usize)> = c
            .driver
            .connection()
            .map(|conn| (conn, c.driver.transport().held(conn)))
            .into_iter()
            .collect();
        let mut reads: Vec<(u64, workload::Check)> = Vec::new();
        let read = |d: ReadData<'_>| reads.push((d.sn, workload::check(id, d.sn, d.data)));
        let net_ref = &*net;
        let rec_ref = &mut *rec;
        let event = |e: ClientEvent| {
            rec_ref.drain();
            match &e {
                ClientEvent::Disconnected { epoch, cause } => {
                    rebuild = true;
                    disconnected_at.get_or_insert(now);
                    lost_connection |= core::mem::take(connected);
                    if *cause == DisconnectCause::ReplyTimeout {
                        // Up, with nothing of it still on the way: a
                        // probe would have had to come.
                        rec_ref.truth.reply_timeout(i, *epoch, |conn| {
                            matches!(
                                net_ref.conn_status(conn),
                                Some(ConnStatus::Open | ConnStatus::Closing)
                            ) && net_ref.frames_to_server(conn) == 0
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
            rec_ref.truth.client_event(i, &e);
            rec_ref.ledger.client_event(i, &e);
        };
        let progress = c.driver.poll(now, &mut SimApp { event, read });
        rec.drain();
        if let Some(life) = c.life.as_mut() {
            life.outbox.polled(c.driver.session());
        }
        for (sn, check) in reads {
            rec.truth.read_answered(i, sn, check);
        }
        if lost_connection {
            // What the client cannot know was delivered: what a broken
            // connection can have lost.
            let session = c.driver.session();
            report.unacked_at_disconnects += session.sent_sn() - session.base_sn();
        }
        if rebuild && s.rebuild_transport && !c.driver.session().is_terminal() {
            // A fresh endpoint; the old one is closed (dropped), so late
            // events of its connections go nowhere.
            let fresh = net.client(c.addr);
            rec.register(fresh.endpoint(), EpOwner::Client(i));
            let fresh = Faulty::new(fresh, faults.clone(), true);
            drop(c.driver.replace_transport(now, fresh));
            report.transport_rebuilds += 1;
        }
        progress
    }

    /// Polls the stray peer, if there is one; whether it did anything.
    fn poll_stray(&mut self) -> bool {
        let Some(st) = self.stray.as_mut() else {
            return false;
        };
        let victim = self.clients[st.victim()].driver.session();
        let (epoch, next) = (victim.epoch(), victim.next_sn());
        let progress = st.poll(self.now, epoch, next);
        self.rec.drain();
        progress
    }

    /// Polls server `k` (if it is up), records what it hands over and
    /// says, and kills it when a kill trigger fired; whether it did
    /// anything.
    fn poll_server(&mut self, k: usize) -> bool {
        let (s, now, journaled) = (self.s, self.now, self.journaled);
        let World {
            servers,
            rec,
            report,
            triggers,
            kills,
            ..
        } = self;
        let sl = &mut servers[k];
        let (addr, generation) = (sl.addr, sl.generation);
        let Some(d) = sl.driver.as_mut() else {
            return false;
        };
        let mut kill: Option<Duration> = None;
        let (mut progress, stop) = d.poll(now, &mut sl.journal, &mut |n: Notice<'_>| {
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
                    recorder::server_event(e, (addr, generation, journaled), now, rec, report)
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
        if let (true, Some(down_for)) = (stop, kill) {
            *kills += 1;
            durable::server_crashed(s, (k, &mut *sl), *kills, rec, report);
            sl.restart_at = Some(now + down_for);
            sl.next_kill = None;
            progress = true;
        }
        progress
    }

    /// Moves time to the next event; `false` when the run is over: all
    /// done, nothing left to happen, or the drain over.
    fn advance(&mut self) -> bool {
        let now = self.now;
        let clients_done = self
            .clients
            .iter()
            .all(|c| c.driver.session().is_terminal());
        let stray_done = self.stray.as_ref().is_none_or(Stray::is_done);
        // Frames the fault wrappers hold back are in flight too.
        let held_next = self
            .clients
            .iter()
            .filter_map(|c| c.driver.transport().next_release())
            .chain(
                self.servers
                    .iter()
                    .filter_map(|sl| sl.driver.as_ref()?.next_release()),
            )
            .min();
        let net_next = match (self.net.next_event(), held_next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if !self.submitting && clients_done && stray_done && net_next.is_none() {
            return false;
        }
        let Some(next) = self.next_event(net_next) else {
            self.stuck();
            return false;
        };
        if next > self.end {
            let open = self
                .clients
                .iter()
                .filter(|c| !c.driver.session().is_terminal())
                .count();
            self.rec.truth.not_finished(format!(
                "the drain ended at {} with {open} clients not done and {}",
                self.end,
                if net_next.is_some() {
                    "frames still in flight"
                } else {
                    "an empty network"
                }
            ));
            self.now = self.end;
            return false;
        }
        // Never stand still: a due timer that did nothing moves time on.
        self.now = if next > now {
            next
        } else {
            now + Duration::from_micros(1)
        };
        if self.now != self.last_now {
            self.last_now = self.now;
            self.rounds_here = 0;
        }
        true
    }

    /// The earliest of the network's next event (`net_next`), the
    /// clients', servers' and stray peer's timers, the due submissions,
    /// kills, restarts and crash-restarts, and the workload's and faults'
    /// ends.
    fn next_event(&self, net_next: Option<Instant>) -> Option<Instant> {
        let now = self.now;
        let w = &self.s.workload;
        let mut next: Option<Instant> = net_next;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for c in self.clients.iter().filter(|c| !durable::is_down(c)) {
            consider(c.driver.poll_timeout());
            let session = c.driver.session();
            let wants = session.next_sn() < w.messages && !c.closing;
            if wants && c.next_submit > now && session.can_submit() {
                consider(Some(c.next_submit));
            }
        }
        consider(
            self.client_crashes
                .next_event(self.faults_on, &self.clients),
        );
        for sl in &self.servers {
            consider(sl.driver.as_ref().and_then(|d| d.poll_timeout()));
            consider(sl.restart_at);
            if self.faults_on {
                consider(sl.next_kill);
            }
        }
        if let Some(st) = &self.stray {
            consider(st.poll_timeout());
        }
        if self.faults_on {
            consider(Some(self.calm));
        }
        if self.submitting {
            consider(Some(self.fault_end));
        }
        next
    }

    /// Nothing is left to happen, yet clients are not done: the truth
    /// says which and where they stand.
    fn stuck(&mut self) {
        let stuck: Vec<String> = self
            .clients
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
        self.rec.truth.not_finished(format!(
            "nothing left to happen at {}, yet {} of {} clients are not done: {}",
            self.now,
            stuck.len(),
            self.clients.len(),
            stuck.join("; ")
        ));
    }

    /// The last flush, the holes live servers still hold, the clients'
    /// final figures, and the verdict: the report.
    pub(super) fn finish(mut self) -> Report {
        let s = self.s;
        let rec = &mut self.rec;
        let report = &mut self.report;
        rec.drain();
        if rec.durable {
            durable::last_flush(&mut self.servers, rec);
        }
        for sl in &self.servers {
            if let Some(d) = &sl.driver {
                report.absorb_server(d.stats());
                // Holes still open in a live server: claimed lost on a
                // live connection (no replay will come for them any more).
                for (i, spec) in self.specs.iter().enumerate() {
                    if spec.server == sl.addr {
                        rec.truth.open_holes(i, &d.holes(spec.session));
                    }
                }
            }
        }
        for (i, c) in self.clients.iter().enumerate() {
            let session = c.driver.session();
            report.absorb_client(session);
            let st = session.stats();
            let past = c.life.as_ref().map_or([0; 3], |l| l.past);
            rec.truth.client_final(
                i,
                session.base_sn(),
                [
                    st.connects + past[0],
                    st.established + past[1],
                    st.disconnects + past[2],
                ],
            );
        }
        report.kills = self.kills;
        report.client_endpoints = rec.client_endpoints.len() as u64;
        report.virtual_time = self.now - Instant::ZERO;
        report.steps = self.steps;
        report.faults = self.faults.counts();
        report.network = self.net.counts();
        self.net.set_tap(None);
        self.faults.set_drop_tap(None);
        if rec.durable {
            report.durable.committed = rec.ledger.committed;
            report.durable.rolled_back = rec.ledger.rolled_back;
            let Recorder { ledger, truth, .. } = &mut *rec;
            ledger.judge(|i| s.session_of(i), truth.findings_mut());
        }
        report.absorb_verdict(rec.truth.verdict());
        self.report
    }
}
