//! Crash-proof state in the event loop (see
//! [`Durability`](crate::sim::Durability)): each server slot's journal
//! ([`Journal`]) given back to the next instance, and cut back when the
//! scenario's tail loss is due; each client's outbox, written as the
//! scenario documents, and a client process crashed and restarted from
//! it.

use std::collections::VecDeque;

use iomsg_core::session::{ClientSession, JournalError, RequestOp, ResumePoint};
use iomsg_core::transport::Client;
use iomsg_core::{workload, Instant};

use super::{ClientSlot, EpOwner, Recorder, ServerSlot};
use crate::faulty::{Faults, Faulty};
use crate::network::Network;
use crate::sim::check::Invariant;
use crate::sim::journal::Journal;
use crate::sim::report::Report;
use crate::sim::scenario::{configs, Scenario, TailLoss, EPOCH_RESERVE, READ_REQUEST_LEN};
use crate::sim::server::SimServer;

/// Restores a new instance `d` (generation `generation`) from the records
/// `journal` gives back, in the order they were written; then checks the
/// restore property ([`Journal::compare_restored`]). A record refused for
/// another reason than want of room is a violation; a session refused for
/// want of room stays in the journal, and its `Hello` recalls it. An empty
/// journal (the first start) restores nothing.
pub(super) fn restore(
    journal: &Journal,
    d: &mut dyn SimServer,
    generation: u32,
    now: Instant,
    (rec, report): (&mut Recorder, &mut Report),
) {
    let sessions = journal.sessions();
    if sessions.is_empty() {
        return;
    }
    for session in sessions {
        let Some(record) = journal.given_back(session) else {
            continue;
        };
        match d.restore(now, &record) {
            Ok(_) => report.durable.restored += 1,
            Err(JournalError::TableFull { .. }) => report.durable.refused_for_room += 1,
            Err(e) => {
                rec.truth
                    .findings_mut()
                    .add(Invariant::JournalRefused, None, session, None, || {
                        format!("a new instance refused a committed record: {e}")
                    })
            }
        }
    }
    report.durable.forgotten_at_restore += d.stats().tombs_forgotten;
    let held = d.journal_all();
    let findings = rec.truth.findings_mut();
    report.durable.restore_compared += journal.compare_restored(generation, &held, findings);
    report.durable.restores += 1;
}

/// A message the outbox holds: enough to submit the same bytes again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Held {
    pub(super) sn: u64,
    pub(super) op: RequestOp,
    pub(super) len: usize,
    pub(super) read_len: Option<u32>,
}

/// A client's outbox, as of its last write (see `Durability`).
pub(super) struct Outbox {
    /// The resume point written, its epoch the reservation.
    point: ResumePoint,
    /// The messages from `point.base_sn` on, in sn order.
    held: VecDeque<Held>,
    lag: u64,
}

impl Outbox {
    fn new(lag: u64) -> Outbox {
        Outbox {
            point: ResumePoint::new(0, EPOCH_RESERVE),
            held: VecDeque::new(),
            lag,
        }
    }

    /// `submit` returned `held.sn`: the message is written at once.
    pub(super) fn submitted<const N: usize>(
        &mut self,
        held: Held,
        session: &ClientSession<N, Box<[u8]>>,
    ) {
        self.held.push_back(held);
        self.write(session);
    }

    /// After a poll: written when the client released `lag` sns or more
    /// since the last write, trusts another server record, or its epoch
    /// comes near the reservation.
    pub(super) fn polled<const N: usize>(&mut self, session: &ClientSession<N, Box<[u8]>>) {
        let p = session.resume_point();
        let due = p.base_sn >= self.point.base_sn + self.lag
            || (p.instance, p.incarnation) != (self.point.instance, self.point.incarnation)
            || p.epoch + EPOCH_RESERVE / 2 > self.point.epoch;
        if due {
            self.write(session);
        }
    }

    fn write<const N: usize>(&mut self, session: &ClientSession<N, Box<[u8]>>) {
        let mut p = session.resume_point();
        p.epoch = if p.epoch + EPOCH_RESERVE / 2 > self.point.epoch {
            p.epoch + EPOCH_RESERVE
        } else {
            self.point.epoch
        };
        while self.held.front().is_some_and(|h| h.sn < p.base_sn) {
            self.held.pop_front();
        }
        self.point = p;
    }
}

/// What a client keeps across its crashes.
pub(super) struct ClientLife {
    pub(super) outbox: Outbox,
    /// Down (crashed) until then; restarted from the outbox at it.
    pub(super) down_until: Option<Instant>,
    /// `Connecting`, `Established` and `Disconnected` counted by its
    /// crashed processes.
    pub(super) past: [u64; 3],
}

impl ClientLife {
    pub(super) fn new(lag: u64) -> ClientLife {
        ClientLife {
            outbox: Outbox::new(lag),
            down_until: None,
            past: [0; 3],
        }
    }
}

/// Whether client slot `c` is down (crashed, not restarted yet).
pub(super) fn is_down(c: &ClientSlot) -> bool {
    c.life.as_ref().is_some_and(|l| l.down_until.is_some())
}

/// What a client crash needs of the run.
pub(super) struct Crasher<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) net: &'a Network,
    pub(super) faults: &'a Faults,
    pub(super) rec: &'a mut Recorder,
    pub(super) report: &'a mut Report,
}

impl Crasher<'_> {
    /// Client `i`'s process crashes at `now`: its transport is gone (the
    /// network resets its connections), and a new process, built from the
    /// outbox as of its last write, waits `down_for` before it starts.
    /// It submits the held messages again at once (before `start`); they
    /// must get their old sns.
    ///
    /// Never inlined: a client session is large, and a caller that built
    /// one in its own frame would probe that stack at every call.
    #[inline(never)]
    pub(super) fn crash(
        &mut self,
        i: usize,
        c: &mut ClientSlot,
        now: Instant,
        down_for: core::time::Duration,
    ) {
        let Some(life) = c.life.as_mut() else {
            return;
        };
        let old = c.driver.session();
        self.report.absorb_client(old);
        let st = old.stats();
        for (p, n) in life
            .past
            .iter_mut()
            .zip([st.connects, st.established, st.disconnects])
        {
            *p += n;
        }
        let (cfg, _) = configs(self.scenario, i, 0);
        let port = self.net.client(c.addr);
        self.rec.register(port.endpoint(), EpOwner::Client(i));
        let port = Faulty::new(port, self.faults.clone(), true);
        let storage = vec![0u8; self.scenario.client_storage()].into_boxed_slice();
        let point = life.outbox.point;
        let session = ClientSession::resume(cfg, now, storage, point);
        let Ok(fresh) = Client::new(port, session) else {
            return;
        };
        // The old process dies here: its transport with it.
        drop(core::mem::replace(&mut c.driver, Box::new(fresh)));
        c.connected = false;
        c.disconnected_at = None;
        life.down_until = Some(now + down_for);
        self.report.durable.client_kills += 1;
        let id = c.driver.session().session();
        for h in life.outbox.held.iter().copied() {
            let got = c.driver.submit_with(h.op, h.len, h.read_len, |buf| {
                if h.op == RequestOp::Read {
                    buf[..READ_REQUEST_LEN].copy_from_slice(&h.sn.to_le_bytes());
                } else {
                    workload::fill(id, h.sn, buf);
                }
            });
            self.report.durable.resubmitted += 1;
            if got != Ok(h.sn) {
                let session = id;
                self.rec.truth.findings_mut().add(
                    Invariant::LostAcrossCrashes,
                    Some(i),
                    session,
                    Some(h.sn),
                    || format!("held in the outbox, submitted again after a crash: {got:?}"),
                );
            }
        }
    }
}

/// Server slot `k`'s running instance crashed, the run's `crashes`-th
/// server crash (see [`kill`]); when the scenario's tail loss is due, its
/// journal loses its last commits too.
pub(super) fn server_crashed(
    s: &Scenario,
    (k, sl): (usize, &mut ServerSlot),
    crashes: u64,
    rec: &mut Recorder,
    report: &mut Report,
) {
    kill((k, &mut *sl), rec, report);
    if let Some(t) = tail_loss(s).filter(|t| t.every > 0 && crashes % t.every == 0) {
        cut_tail((k, sl), t, rec, report);
    }
}

/// Server slot `k`'s running instance dies (returns whether one ran): its
/// counters go to the report, and its application's uncommitted
/// deliveries and journal records are lost, in the truth too.
fn kill((k, sl): (usize, &mut ServerSlot), rec: &mut Recorder, report: &mut Report) -> bool {
    let Some(dead) = sl.driver.take() else {
        return false;
    };
    report.absorb_server(dead.stats());
    rec.rx[k].clear();
    sl.journal.crashed();
    rec.ledger.crashed(k);
    rec.truth.crashed(sl.generation);
    true
}

/// The scenario's tail loss, with a journal.
fn tail_loss(s: &Scenario) -> Option<TailLoss> {
    s.durable.and_then(|d| d.tail_loss.filter(|_| d.journal))
}

/// Server slot `k`'s journal loses its last commits, and the
/// applications' records and the truth the deliveries committed with
/// them.
fn cut_tail(
    (k, sl): (usize, &mut ServerSlot),
    t: TailLoss,
    rec: &mut Recorder,
    report: &mut Report,
) {
    let lost = sl.journal.cut(t.batches as usize, t.synced_openings);
    if lost == 0 {
        return;
    }
    let d = &mut report.durable;
    d.tail_cuts += 1;
    d.commits_lost += lost as u64;
    d.deliveries_lost += rec.ledger.cut(k, lost);
    rec.truth.journal_cut(sl.addr, lost);
}

/// When the faults end: with a power cut near the end of the faulty phase
/// ([`TailLoss::at_end`]), a quarter of the phase before its end (the
/// workload goes on to the end, so that clients come back to the servers
/// that lost power); at its end otherwise.
pub(super) fn calm_after(s: &Scenario) -> core::time::Duration {
    if tail_loss(s).is_some_and(|t| t.at_end) {
        s.duration - s.duration / 4
    } else {
        s.duration
    }
}

/// The faults ended at `now`: with a tail loss `at_end`, every server
/// loses power. A running one crashes (and starts again after the crash
/// plan's downtime), and every journal loses its last commits. Returns
/// the servers crashed.
pub(super) fn power_cut(
    s: &Scenario,
    servers: &mut [ServerSlot],
    now: Instant,
    rec: &mut Recorder,
    report: &mut Report,
) -> u64 {
    let Some(t) = tail_loss(s).filter(|t| t.at_end) else {
        return 0;
    };
    let down_for = s.crash.map_or(POWER_CUT_DOWN, |c| c.down_for);
    let mut crashed = 0;
    for (k, sl) in servers.iter_mut().enumerate() {
        if kill((k, &mut *sl), rec, report) {
            sl.restart_at = Some(now + down_for);
            sl.next_kill = None;
            crashed += 1;
        }
        cut_tail((k, sl), t, rec, report);
    }
    crashed
}

/// A power cut's downtime when the scenario plans no crashes.
const POWER_CUT_DOWN: core::time::Duration = core::time::Duration::from_micros(100);

/// The scenario's client crash-restarts: one client at a time, in turn.
pub(super) struct ClientCrashes {
    plan: Option<crate::sim::CrashPlan>,
    next_at: Option<Instant>,
    turn: usize,
    done: u64,
}

impl ClientCrashes {
    pub(super) fn new(s: &Scenario, now: Instant) -> ClientCrashes {
        let plan = s.durable.and_then(|d| d.client_crash);
        ClientCrashes {
            plan,
            next_at: plan.map(|p| now + p.every),
            turn: 0,
            done: 0,
        }
    }

    /// Restarts the clients whose downtime is over, then crashes the next
    /// client in turn if a crash is due (only during the faulty phase, and
    /// never a client that is down or done).
    pub(super) fn step(
        &mut self,
        now: Instant,
        faults_on: bool,
        clients: &mut [ClientSlot],
        crasher: &mut Crasher<'_>,
    ) {
        if self.plan.is_none() {
            return;
        }
        for c in clients.iter_mut() {
            let Some(life) = c.life.as_mut() else {
                continue;
            };
            if life.down_until.is_some_and(|t| now >= t) {
                life.down_until = None;
                c.driver.start(now);
            }
        }
        let (Some(plan), Some(at)) = (self.plan, self.next_at) else {
            return;
        };
        if !faults_on || now < at || self.done >= plan.max_kills {
            return;
        }
        self.next_at = Some(now + plan.every);
        let n = clients.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            let c = &mut clients[i];
            if is_down(c) || c.driver.session().is_terminal() || c.closing {
                continue;
            }
            crasher.crash(i, c, now, plan.down_for);
            self.turn = i + 1;
            self.done += 1;
            return;
        }
    }

    /// When a crash or a restart is due next.
    pub(super) fn next_event(&self, faults_on: bool, clients: &[ClientSlot]) -> Option<Instant> {
        let crash = self
            .next_at
            .filter(|_| faults_on && self.plan.is_some_and(|p| self.done < p.max_kills));
        clients
            .iter()
            .filter_map(|c| c.life.as_ref()?.down_until)
            .chain(crash)
            .min()
    }
}

/// The end of the run: every live server flushes once more (as a clean
/// stop does), so that what it took is committed with its journal.
pub(super) fn last_flush(servers: &mut [ServerSlot], rec: &mut Recorder) {
    for (k, sl) in servers.iter_mut().enumerate() {
        let (addr, generation) = (sl.addr, sl.generation);
        let Some(d) = sl.driver.as_mut() else {
            continue;
        };
        d.flush(&mut sl.journal, &mut |n| {
            if let crate::sim::server::Notice::Flush = n {
                rec.ledger.commit(k);
                rec.truth.committed(addr, generation);
            }
            false
        });
    }
}
