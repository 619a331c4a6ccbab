//! The soak's supervision while it runs: the server killed on its
//! schedule and replaced when it dies, the planned faults started and
//! ended (client kills, pauses, link cuts, the hostile peer), clients that
//! end by themselves noted, and at the end every process stopped.

use std::collections::VecDeque;
use std::time::{Duration, Instant as Wall};

use iomsg_core::rng::SplitMix64;

use super::faults::{self, Fault};
use super::journal_faults::{self as jf, JournalFault, Outcome};
use super::lab::{journal_dir, Ended, HostileRun, Runner, World};
use super::verdict::{ClientEnd, Event, Exit, Kind, ServerEnd};
use super::{SoakJob, CLIENT_KILL_AFTER};
use crate::common::epoch_us;

/// Sends `sig` to process `pid` (one the soak started).
fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// A host lost during the run (`--launcher`).
#[derive(Clone, Debug)]
pub(super) struct LostHost {
    pub(super) host: String,
    /// What was seen.
    pub(super) why: String,
    pub(super) at_us: u64,
}

/// A fault under way.
#[derive(Clone, Copy)]
struct Active {
    fault: Fault,
    client: usize,
    pid: u32,
    from_us: u64,
    until: Wall,
    /// The hostile run's index in `World::hostiles`.
    hostile: Option<usize>,
}

/// The running soak: its processes, its plan, what happened so far.
pub(super) struct Supervisor<'a> {
    /// Dropped first (fields drop in order): the processes are killed
    /// before the lab's namespaces are deleted.
    pub(super) world: World,
    pub(super) job: &'a SoakJob,
    pub(super) runner: Runner<'a>,
    pub(super) plan: Vec<faults::Planned>,
    pub(super) started: Wall,
    /// Server kills done, and when.
    pub(super) kills: u32,
    pub(super) kills_us: Vec<u64>,
    /// Server kills and deaths, and faults over.
    pub(super) events: Vec<Event>,
    /// Client kills done for `--exactly-once` (besides the planned
    /// client-kill faults).
    pub(super) once_client_kills: u32,
    /// Those still to do, in order: when, and which slot (one waits
    /// while its client is paused or cut off, and the next server kill
    /// may come first).
    client_kills_due: VecDeque<(Wall, usize)>,
    /// Draws their times and slots (a stream apart from the server
    /// kills', which do not move).
    client_kill_rng: SplitMix64,
    rng: SplitMix64,
    gens: Vec<u32>,
    next_kill: Wall,
    last_kill_at: Wall,
    last_fault_end: Wall,
    active: Vec<Active>,
    next_planned: usize,
    last_rss: Wall,
    /// Hosts lost (`--launcher`): the run ends at the first.
    pub(super) lost: Vec<LostHost>,
    /// The journal faults' order (`--journal-faults`).
    journal_plan: Option<jf::Plan>,
    /// The journal faults done, and their outcomes.
    pub(super) journal_faults: Vec<jf::Done>,
}

impl<'a> Supervisor<'a> {
    /// Starts the first server instance and the clients.
    ///
    /// # Errors
    ///
    /// A process could not be started.
    pub(super) fn start(
        runner: Runner<'a>,
        plan: Vec<faults::Planned>,
        started: Wall,
    ) -> Result<Supervisor<'a>, String> {
        let job = runner.job;
        let mut world = World::default();
        world.remote = runner.remote.as_ref().map(|r| r.job.clone());
        world.audit_dir = job.audit_dir.clone();
        world.instances.push(runner.start_server(0)?);
        for k in 0..job.clients {
            world.clients.push(runner.start_client(k, 0)?);
        }
        let mut s = Supervisor {
            job,
            runner,
            world,
            plan,
            started,
            kills: 0,
            kills_us: Vec::new(),
            events: Vec::new(),
            once_client_kills: 0,
            client_kills_due: VecDeque::new(),
            client_kill_rng: SplitMix64::new(job.seed ^ 0x6f6e_6365_6b69_6c6c),
            rng: SplitMix64::new(job.seed),
            gens: vec![0u32; job.clients],
            next_kill: Wall::now(),
            last_kill_at: Wall::now(),
            last_fault_end: Wall::now(),
            active: Vec::new(),
            next_planned: 0,
            last_rss: Wall::now(),
            lost: Vec::new(),
            journal_plan: job.journal_faults.then(|| jf::Plan::new(job.seed)),
            journal_faults: Vec::new(),
        };
        s.next_kill = Wall::now() + s.jitter(job.kill_every);
        Ok(s)
    }

    /// `mean` jittered ±30 % by the seed.
    fn jitter(&mut self, mean: Duration) -> Duration {
        let f = 0.7 + 0.6 * (self.rng.below(1_000_000) as f64 / 1_000_000.0);
        mean.mul_f64(f)
    }

    /// Whether the kills are done: their number, or `--duration` passed.
    pub(super) fn kills_done(&self) -> bool {
        match self.job.duration {
            Some(d) => self.started.elapsed() >= d,
            None => self.kills >= self.job.kills,
        }
    }

    /// Whether the run is over: kills and faults done, then traffic after
    /// the last kill and the last fault, so that the last instance and the
    /// last recovery are seen to work.
    pub(super) fn over(&self, now: Wall, kills_done: bool) -> bool {
        if !self.lost.is_empty() {
            // Nothing more can be proved without the host.
            return true;
        }
        let faults_done = self.next_planned >= self.plan.len()
            && self.active.is_empty()
            && self.client_kills_due.is_empty();
        if !(kills_done && faults_done) {
            return false;
        }
        let job = self.job;
        let settled = now >= self.last_fault_end + job.kill_every.min(Duration::from_secs(5));
        settled && (job.duration.is_some() || now >= self.last_kill_at + job.kill_every)
    }

    /// A server instance that died by itself: noted, and replaced.
    ///
    /// # Errors
    ///
    /// The next instance could not be started.
    pub(super) fn replace_dead_server(&mut self) -> Result<(), String> {
        let died = self.world.server().and_then(|s| {
            let status = s.child.as_mut()?.try_wait().ok()??;
            Some((s.name.clone(), s.host.clone(), status))
        });
        let Some((name, host, status)) = died else {
            return Ok(());
        };
        let at = epoch_us();
        let Some(exit) = self.runner.ended(&name, status) else {
            let why = self.runner.lost_why(host.as_deref().unwrap_or("?"), status);
            if let Some(s) = self.world.server() {
                s.end = ServerEnd::HostLost;
                s.to_us = at;
                s.child = None;
            }
            self.lose(host, why, at);
            return Ok(());
        };
        if let Some(s) = self.world.server() {
            s.end = ServerEnd::Died(exit);
            s.to_us = at;
            s.child = None;
        }
        self.active.retain(|a| a.fault != Fault::ServerPause);
        self.runner.note(format_args!("died {name} {exit}"));
        eprintln!("soak: {name} died: {exit}; starting another");
        let n = self.world.instances.len();
        self.world.instances.push(self.runner.start_server(n)?);
        self.events.push(Event {
            kind: Kind::ServerDied,
            client: None,
            from_us: at,
            to_us: epoch_us(),
        });
        Ok(())
    }

    /// Samples the server's memory every 100 ms.
    pub(super) fn sample_rss(&mut self, now: Wall) {
        if now >= self.last_rss + Duration::from_millis(100) {
            if let Some(s) = self.world.server() {
                s.sample_rss();
            }
            self.last_rss = now;
        }
    }

    /// Kills the server (SIGKILL) and starts the next instance when the
    /// time has come, unless it is paused.
    ///
    /// # Errors
    ///
    /// The next instance could not be started.
    pub(super) fn kill_server_if_due(&mut self, now: Wall, kills_done: bool) -> Result<(), String> {
        let server_paused = self.active.iter().any(|a| a.fault == Fault::ServerPause);
        if kills_done || now < self.next_kill || server_paused {
            return Ok(());
        }
        let at = epoch_us();
        let mut lost = None;
        if let Some(s) = self.world.server() {
            s.sample_rss();
            if let Some(mut c) = s.child.take() {
                let host = s.host.clone();
                let sent = self.runner.signal(
                    &s.name,
                    s.pid,
                    host.as_deref(),
                    nix::sys::signal::Signal::SIGKILL,
                );
                if let Ok(Some(peak)) = sent {
                    s.peak_rss = s.peak_rss.max(peak);
                }
                s.end = match self.runner.end_of(
                    &s.name,
                    host.as_deref(),
                    &mut c,
                    Duration::from_secs(10),
                ) {
                    Ended::Exit(e) => ServerEnd::Killed(e),
                    Ended::TimedOut => ServerEnd::Unknown,
                    Ended::Lost(why) => {
                        lost = Some((host, why));
                        ServerEnd::HostLost
                    }
                };
            }
            s.to_us = at;
        }
        if let Some((host, why)) = lost {
            self.lose(host, why, at);
            return Ok(());
        }
        self.kills_us.push(at);
        self.kills += 1;
        self.last_kill_at = Wall::now();
        let n = self.world.instances.len();
        let next = match self.journal_plan.as_mut().map(jf::Plan::next_fault) {
            Some(fault) => self.start_after_journal_fault(n, fault)?,
            None => self.runner.start_server(n)?,
        };
        self.world.instances.push(next);
        self.events.push(Event {
            kind: Kind::ServerKill,
            client: None,
            from_us: at,
            to_us: epoch_us(),
        });
        self.next_kill = Wall::now() + self.jitter(self.job.kill_every);
        if self.job.exactly_once {
            self.plan_client_kill();
        }
        Ok(())
    }

    /// Does `fault` to the journal while no instance runs, then starts
    /// instance `n`. A fault the instance must refuse is tried first on an
    /// instance of its own (`server-N-refusal`, which must exit without
    /// listening, naming the journal and the offset); the journal is then
    /// put back as it was. The outcome is kept for the verdict.
    ///
    /// # Errors
    ///
    /// The journal could not be damaged or put back, or no instance
    /// started on the journal as it was.
    fn start_after_journal_fault(
        &mut self,
        n: usize,
        fault: JournalFault,
    ) -> Result<super::lab::Instance, String> {
        let dir = journal_dir(&self.job.audit_dir);
        let plan = self.journal_plan.as_mut().ok_or("no journal-fault plan")?;
        let (len_before, offset, len_after) = jf::apply(&dir, fault, plan)?;
        self.runner.note(format_args!(
            "journal_fault {} offset {offset} len {len_before} {len_after}",
            fault.name()
        ));
        let mut done = jf::Done {
            fault,
            after_kill: self.kills,
            len_before,
            offset,
            len_after,
            outcome: Outcome::Unnamed,
            said: String::new(),
        };
        let started = if fault.must_refuse() {
            let (refused, text) = self.runner.probe_server(&format!("server-{n}-refusal"))?;
            done.outcome = jf::judge(fault, refused, &text);
            done.said = jf::journal_lines(&text);
            jf::put_back(&dir)?;
            self.runner.start_server(n)?
        } else {
            match self.runner.start_server(n) {
                Ok(s) => {
                    let out = self.job.audit_dir.join(format!("{}.out", s.name));
                    let text = std::fs::read_to_string(&out).unwrap_or_default();
                    done.outcome = jf::judge(fault, false, &text);
                    done.said = jf::journal_lines(&text);
                    let _ = std::fs::remove_file(jf::backup_file(&dir));
                    s
                }
                Err(e) => {
                    // Refused where it had to start: unnamed; go on with
                    // the journal as it was.
                    done.said = e;
                    jf::put_back(&dir)?;
                    self.runner.start_server(n)?
                }
            }
        };
        eprintln!(
            "soak: journal fault {} after kill {}: {:?}",
            fault.name(),
            self.kills,
            done.outcome
        );
        self.journal_faults.push(done);
        Ok(started)
    }

    /// Draws the client kill that follows a server kill
    /// (`--exactly-once`): when ([`CLIENT_KILL_AFTER`] of `--kill-every`
    /// from now) and which slot.
    fn plan_client_kill(&mut self) {
        let (after, slot) = draw_client_kill(
            &mut self.client_kill_rng,
            self.job.kill_every,
            self.job.clients,
        );
        self.client_kills_due.push_back((Wall::now() + after, slot));
    }

    /// Kills the client whose time has come (`--exactly-once`) and starts
    /// its next generation on the same outbox, unless it is paused or its
    /// link is cut (then at once when that is over).
    ///
    /// # Errors
    ///
    /// The next generation could not be started.
    pub(super) fn kill_client_if_due(&mut self, now: Wall) -> Result<(), String> {
        let Some(&(at, k)) = self.client_kills_due.front() else {
            return Ok(());
        };
        let busy = self
            .active
            .iter()
            .any(|a| a.fault.on_client() && a.client == k);
        if now < at || busy {
            return Ok(());
        }
        self.client_kills_due.pop_front();
        if self.kill_client(k, epoch_us())? {
            self.once_client_kills += 1;
        }
        Ok(())
    }

    /// Starts the faults whose time has come, unless their target is
    /// still busy.
    ///
    /// # Errors
    ///
    /// A process could not be started or a link not cut.
    pub(super) fn start_due_faults(&mut self) -> Result<(), String> {
        while let Some(&p) = self.plan.get(self.next_planned) {
            if self.started.elapsed() < p.at {
                break;
            }
            let busy = self.active.iter().any(|a| {
                a.fault == p.fault && !p.fault.on_client()
                    || a.fault.on_client() && p.fault.on_client() && a.client == p.client
            });
            if busy || (p.fault == Fault::LinkCut && !self.client_up(p.client)) {
                break;
            }
            self.next_planned += 1;
            self.start_fault(&p)?;
        }
        Ok(())
    }

    /// Whether client slot `k`'s process is past making its transport
    /// (it said which session it runs): a link cut before that would stop
    /// it from starting at all (UCX lists no device whose link is down),
    /// which is no fault of the protocol's.
    fn client_up(&mut self, k: usize) -> bool {
        let dir = self.job.audit_dir.clone();
        self.world.client(k).is_none_or(|c| {
            std::fs::read_to_string(dir.join(format!("{}.out", c.name)))
                .is_ok_and(|t| t.contains("session "))
        })
    }

    /// Starts fault `p`.
    fn start_fault(&mut self, p: &faults::Planned) -> Result<(), String> {
        let at = epoch_us();
        let until = Wall::now() + p.hold;
        let k = p.client;
        let started = |client: usize, pid: u32, hostile: Option<usize>| Active {
            fault: p.fault,
            client,
            pid,
            from_us: at,
            until,
            hostile,
        };
        match p.fault {
            Fault::ClientKill => {
                self.kill_client(k, at)?;
            }
            Fault::ClientPause | Fault::ServerPause => {
                let target = if p.fault == Fault::ClientPause {
                    self.world.client(k).map(|c| (c.pid, c.name.clone(), k))
                } else {
                    self.world.server().map(|s| (s.pid, s.name.clone(), 0))
                };
                let Some((pid, name, client)) = target else {
                    return Ok(());
                };
                signal(pid, nix::sys::signal::Signal::SIGSTOP);
                self.runner.note(format_args!(
                    "{} {name} for {:.3}s",
                    p.fault.name(),
                    p.hold.as_secs_f64()
                ));
                self.active.push(started(client, pid, None));
            }
            Fault::LinkCut => {
                if let Some(lab) = self.runner.lab.as_ref() {
                    lab.link(k, false)?;
                }
                self.runner.note(format_args!(
                    "link-cut client-{k} for {:.3}s",
                    p.hold.as_secs_f64()
                ));
                self.active.push(started(k, 0, None));
            }
            Fault::Hostile => {
                let h = self
                    .runner
                    .start_hostile(self.world.hostiles.len(), p.hold)?;
                self.runner.note(format_args!(
                    "hostile {} for {:.3}s",
                    h.name,
                    p.hold.as_secs_f64()
                ));
                self.world.hostiles.push(h);
                let n = self.world.hostiles.len() - 1;
                self.active.push(started(0, 0, Some(n)));
            }
        }
        Ok(())
    }

    /// Kills client slot `k`'s process (SIGKILL) and starts a new one in
    /// its place: a new session, or with `--exactly-once` the same one,
    /// resumed from the slot's outbox. Whether there was one to kill.
    fn kill_client(&mut self, k: usize, at: u64) -> Result<bool, String> {
        let Some(c) = self.world.client(k) else {
            return Ok(false);
        };
        let name = c.name.clone();
        if let Some(mut child) = c.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        c.end = Some(ClientEnd::Killed);
        c.to_us = Some(at);
        self.gens[k] += 1;
        let fresh = self.runner.start_client(k, self.gens[k])?;
        self.runner
            .note(format_args!("client-kill {name} new {}", fresh.name));
        self.events.push(Event {
            kind: Kind::ClientKill,
            client: Some(k),
            from_us: at,
            to_us: fresh.from_us,
        });
        self.world.clients.push(fresh);
        Ok(true)
    }

    /// Ends the faults whose time is up.
    ///
    /// # Errors
    ///
    /// A cut link could not be restored.
    pub(super) fn end_due_faults(&mut self) -> Result<(), String> {
        let mut i = 0;
        while i < self.active.len() {
            if self.end_fault(i)? {
                self.active.swap_remove(i);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Ends active fault `i` if its time is up; whether it is over.
    fn end_fault(&mut self, i: usize) -> Result<bool, String> {
        let a = self.active[i];
        let now = Wall::now();
        if now < a.until {
            return Ok(false);
        }
        let (kind, client) = match a.fault {
            Fault::ClientPause => {
                signal(a.pid, nix::sys::signal::Signal::SIGCONT);
                (Kind::ClientPause, Some(a.client))
            }
            Fault::ServerPause => {
                signal(a.pid, nix::sys::signal::Signal::SIGCONT);
                (Kind::ServerPause, None)
            }
            Fault::LinkCut => {
                if let Some(lab) = self.runner.lab.as_ref() {
                    lab.link(a.client, true)?;
                }
                (Kind::LinkCut, Some(a.client))
            }
            Fault::Hostile => {
                let Some(h) = a.hostile.and_then(|n| self.world.hostiles.get_mut(n)) else {
                    return Ok(true);
                };
                if !hostile_over(h, now, a.until) {
                    return Ok(false);
                }
                (Kind::Hostile, None)
            }
            Fault::ClientKill => (Kind::ClientKill, Some(a.client)),
        };
        self.runner.note(format_args!("end {}", a.fault.name()));
        self.events.push(Event {
            kind,
            client,
            from_us: a.from_us,
            to_us: epoch_us(),
        });
        self.last_fault_end = Wall::now();
        Ok(true)
    }

    /// A client that ended by itself is a failure; it is not replaced.
    pub(super) fn note_clients_ended(&mut self) {
        let mut lost = Vec::new();
        for c in self.world.clients.iter_mut().filter(|c| c.end.is_none()) {
            let Some(child) = c.child.as_mut() else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                let at = epoch_us();
                c.end = Some(match self.runner.ended(&c.name, status) {
                    Some(exit) => {
                        eprintln!("soak: {} ended by itself: {exit}", c.name);
                        ClientEnd::EndedEarly(exit)
                    }
                    None => {
                        let host = c.host.clone();
                        let why = self.runner.lost_why(host.as_deref().unwrap_or("?"), status);
                        lost.push((host, why, at));
                        ClientEnd::HostLost
                    }
                });
                c.to_us = Some(at);
                c.child = None;
            }
        }
        for (host, why, at) in lost {
            self.lose(host, why, at);
        }
    }

    /// Notes host `host` lost (`why`): the run ends.
    fn lose(&mut self, host: Option<String>, why: String, at_us: u64) {
        let host = host.unwrap_or_else(|| "?".into());
        eprintln!("soak: lost {host}: {why}; stopping the run");
        self.runner.note(format_args!("lost {host}: {why}"));
        if !self.lost.iter().any(|l| l.host == host) {
            self.lost.push(LostHost { host, why, at_us });
        }
    }

    /// Stops the clients (they drain what is in flight and exit), then
    /// the server; notes how each ended.
    pub(super) fn stop_all(&mut self) {
        let stop_us = epoch_us();
        let world = &mut self.world;
        let runner = &self.runner;
        let mut lost = Vec::new();
        let term = nix::sys::signal::Signal::SIGTERM;
        for c in world.clients.iter().filter(|c| c.end.is_none()) {
            if let Err(e) = runner.signal(&c.name, c.pid, c.host.as_deref(), term) {
                eprintln!("soak: {}: {e}", c.name);
            }
        }
        for c in world.clients.iter_mut().filter(|c| c.end.is_none()) {
            c.to_us = Some(stop_us);
            let Some(child) = c.child.as_mut() else {
                continue;
            };
            let limit = self.job.drain + Duration::from_secs(10);
            c.end = Some(
                match runner.end_of(&c.name, c.host.as_deref(), child, limit) {
                    Ended::Exit(e) => ClientEnd::Finished(e),
                    Ended::TimedOut => {
                        eprintln!("soak: {} did not finish in time and was killed", c.name);
                        ClientEnd::NeverFinished
                    }
                    Ended::Lost(why) => {
                        lost.push((c.host.clone(), why, epoch_us()));
                        ClientEnd::HostLost
                    }
                },
            );
            c.child = None;
        }
        if let Some(s) = world.server() {
            s.sample_rss();
            match runner.signal(&s.name, s.pid, s.host.as_deref(), term) {
                Ok(Some(peak)) => s.peak_rss = s.peak_rss.max(peak),
                Ok(None) => {}
                Err(e) => eprintln!("soak: {}: {e}", s.name),
            }
            s.to_us = epoch_us();
            if let Some(mut child) = s.child.take() {
                let limit = Duration::from_secs(10);
                s.end = match runner.end_of(&s.name, s.host.as_deref(), &mut child, limit) {
                    Ended::Exit(e) => ServerEnd::Stopped(e),
                    Ended::TimedOut => ServerEnd::Hung,
                    Ended::Lost(why) => {
                        lost.push((s.host.clone(), why, epoch_us()));
                        ServerEnd::HostLost
                    }
                };
            }
        }
        for (host, why, at) in lost {
            self.lose(host, why, at);
        }
    }
}

/// The client kill after a server kill (`--exactly-once`): how long
/// after it ([`CLIENT_KILL_AFTER`] of `every`, uniformly), and which of
/// `clients` slots (uniformly).
pub(super) fn draw_client_kill(
    rng: &mut SplitMix64,
    every: Duration,
    clients: usize,
) -> (Duration, usize) {
    let (lo, hi) = CLIENT_KILL_AFTER;
    let share = lo + (hi - lo) * (rng.below(1_000_000) as f64 / 1_000_000.0);
    let slot = rng.below(clients.max(1) as u64) as usize;
    (every.mul_f64(share), slot)
}

/// Whether hostile run `h`, due to stop at `until`, is over: it stops by
/// itself after its --duration; it is given 15 s more, then killed.
fn hostile_over(h: &mut HostileRun, now: Wall, until: Wall) -> bool {
    let exited = h.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
    match exited {
        Some(st) => h.end = Some(Ok(Exit::of(st))),
        None if now >= until + Duration::from_secs(15) => {
            if let Some(mut c) = h.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            h.end = Some(Err("did not stop 15 s after its duration; killed"));
        }
        None => return false,
    }
    h.child = None;
    h.to_us = epoch_us();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_kills_fall_between_server_kills_at_varied_times_on_every_slot() {
        let every = Duration::from_millis(1500);
        let mut rng = SplitMix64::new(7);
        let draws: Vec<(Duration, usize)> = (0..100)
            .map(|_| draw_client_kill(&mut rng, every, 3))
            .collect();
        // Before the next server kill, which comes 0.7 of `every` at the
        // earliest.
        assert!(draws
            .iter()
            .all(|&(d, _)| d >= every.mul_f64(0.05) && d < every.mul_f64(0.7)));
        // Early (clients still reconnecting) and late both happen.
        assert!(draws.iter().any(|&(d, _)| d < every.mul_f64(0.2)));
        assert!(draws.iter().any(|&(d, _)| d > every.mul_f64(0.5)));
        for slot in 0..3 {
            assert!(draws.iter().any(|&(_, s)| s == slot), "slot {slot} never");
        }
        assert!(draws.iter().all(|&(_, s)| s < 3));
        let mut again = SplitMix64::new(7);
        assert_eq!(draw_client_kill(&mut again, every, 3), draws[0]);
    }
}
