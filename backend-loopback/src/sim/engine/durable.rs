//! Crash-proof state in the event loop (see
//! [`Durability`](crate::sim::Durability)): each server slot's journal,
//! committed at every flush and given back to the next instance; each
//! client's outbox, written as the scenario documents, and a client
//! process crashed and restarted from it.

use std::collections::VecDeque;

use iomsg_core::session::{ClientSession, JournalError, RequestOp, ResumePoint};
use iomsg_core::transport::Client;
use iomsg_core::wire::Crc32c;
use iomsg_core::{workload, Instant};

use super::{ClientSlot, EpOwner, Recorder};
use crate::faulty::{Faults, Faulty};
use crate::network::Network;
use crate::sim::check::Invariant;
use crate::sim::report::Report;
use crate::sim::scenario::{configs, RestoreDefect, Scenario, EPOCH_RESERVE, READ_REQUEST_LEN};
use crate::sim::server::SimServer;

/// Bytes of a journal record before its bitmap.
const RECORD_HEADER: usize = 72;

/// A server slot's journal: the records handed over since the last
/// flush, and the committed ones. Only the last committed record of each
/// session is kept (a later record of a session replaces the earlier
/// ones), in the order they were written.
#[derive(Default)]
pub(super) struct Journal {
    pending: Vec<Vec<u8>>,
    committed: Vec<(u64, Vec<u8>)>,
}

impl Journal {
    /// A record handed over (`ServerHandler::journal`).
    pub(super) fn keep(&mut self, record: &[u8]) {
        self.pending.push(record.to_vec());
    }

    /// The flush: what was handed over since the last one is committed.
    pub(super) fn commit(&mut self) {
        for r in self.pending.drain(..) {
            let session = r
                .get(8..16)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes);
            self.committed.retain(|(s, _)| *s != session);
            self.committed.push((session, r));
        }
    }

    /// The server crashed: what was not committed is lost.
    pub(super) fn crashed(&mut self) {
        self.pending.clear();
    }

    /// Restores a new instance `d` of generation `generation` from the
    /// committed records, each rewritten by `defect` when one is planted.
    /// A record refused for another reason than want of room is a
    /// violation; a session refused for want of room is new to the
    /// instance (its client announces what may come again).
    pub(super) fn restore(
        &self,
        d: &mut dyn SimServer,
        generation: u32,
        now: Instant,
        defect: Option<RestoreDefect>,
        (rec, report): (&mut Recorder, &mut Report),
    ) {
        for (session, r) in &self.committed {
            let planted = defect.map(|x| x.apply(r));
            match d.restore(now, planted.as_deref().unwrap_or(r)) {
                Ok(_) => report.durable.restored += 1,
                Err(JournalError::TableFull { session }) => {
                    report.durable.refused_for_room += 1;
                    rec.ledger.new_to(generation, session);
                }
                Err(e) => rec.truth.findings_mut().add(
                    Invariant::JournalRefused,
                    None,
                    *session,
                    None,
                    || format!("a new instance refused a committed record: {e}"),
                ),
            }
        }
    }
}

impl RestoreDefect {
    /// `record` with the defect planted, its checksum recomputed (from the
    /// documented layout; a record too short to be one is left alone).
    pub fn apply(self, record: &[u8]) -> Vec<u8> {
        match self {
            RestoreDefect::DropHoles => drop_holes(record),
            RestoreDefect::Torn => record[..record.len().saturating_sub(1)].to_vec(),
        }
    }
}

/// The record with every sn in `[cumulative, top)` received: its
/// cumulative point moved to its top, no bitmap.
fn drop_holes(record: &[u8]) -> Vec<u8> {
    if record.len() < RECORD_HEADER + 4 {
        return record.to_vec();
    }
    let mut out = record[..RECORD_HEADER].to_vec();
    out[6..8].copy_from_slice(&0u16.to_le_bytes());
    out.copy_within(48..56, 40);
    let sum = Crc32c::BUILTIN.checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
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

/// Server slot `k`'s instance `generation` crashed: its application's
/// uncommitted deliveries and journal records are lost, in the truth too.
pub(super) fn server_crashed(k: usize, generation: u32, journal: &mut Journal, rec: &mut Recorder) {
    journal.crashed();
    rec.ledger.crashed(k);
    rec.truth.crashed(generation);
}

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
pub(super) fn last_flush(servers: &mut [super::ServerSlot], rec: &mut Recorder) {
    for (k, sl) in servers.iter_mut().enumerate() {
        let (journal, generation) = (&mut sl.journal, sl.generation);
        let Some(d) = sl.driver.as_mut() else {
            continue;
        };
        d.flush(&mut |n| {
            match n {
                crate::sim::server::Notice::Journal(r) => journal.keep(r),
                crate::sim::server::Notice::Flush => {
                    journal.commit();
                    rec.ledger.commit(k);
                    rec.truth.committed(generation);
                }
                _ => {}
            }
            false
        });
    }
}
