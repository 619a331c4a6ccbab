//! The applications' records across crashes: what each server
//! application committed, and what each client application was told it
//! submitted, kept apart from the protocol and from [`Truth`](super::Truth).
//!
//! A server application takes deliveries as they come and commits them
//! (with the journal's records) at each flush, right before replies
//! leave; a crash loses what it took since its last flush
//! ([`Ledger::took`], [`Ledger::commit`], [`Ledger::crashed`]). A client
//! application counts an sn as submitted once `submit` returned it
//! ([`Ledger::submitted`]), whatever happens to the client process after.
//!
//! A journal that loses its last commits (a tail loss, [`Ledger::cut`])
//! loses the application's record of the deliveries committed with them:
//! they count as never committed.
//!
//! [`Ledger::judge`] checks, over the committed records of every server
//! instance:
//!
//! * [`Invariant::DeliveredTwiceAcrossCrashes`] (servers with a journal):
//!   no sn of a client is in the committed records twice, whichever
//!   instances took it (unless an instance at or before the one that took
//!   it again lost the session's past: it forgot its tombstone, or had no
//!   room to restore it; the protocol's documented fallback, where the
//!   client announces what may come again);
//! * [`Invariant::LostAcrossCrashes`]: every sn a client's `submit`
//!   returned is in some committed record by the end of the run, unless
//!   the client gave it up (`NotReplayed`), named it lost with its
//!   server's state (`StateLost`), or failed, and said so; or a tail loss
//!   took it back after the client was last established (nobody could
//!   tell it).
//!
//! The recording methods are public so that tests can build a ledger by
//! hand and check that each invariant can fail.

use core::ops::Range;
use std::collections::{HashMap, VecDeque};

use iomsg_core::session::ClientEvent;

use super::check::{Findings, Invariant};

/// One delivery a server application took and has not committed yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Took {
    /// The client whose frame carried it.
    pub client: usize,
    /// The session.
    pub session: u64,
    /// Its sn.
    pub sn: u64,
    /// The server instance that took it.
    pub generation: u32,
}

#[derive(Clone, Debug, Default)]
struct ClientRecord {
    /// One past the highest sn `submit` returned.
    submitted: u64,
    /// Committed deliveries of each sn, with the first instance that
    /// committed it.
    committed: HashMap<u64, (u32, u32)>,
    /// Sns the client gave up (`NotReplayed`).
    given_up: Vec<Range<u64>>,
    /// Sns the client named lost with its server's state (`StateLost`).
    state_lost: Vec<Range<u64>>,
    /// Sns whose committed deliveries a tail loss took back since the
    /// client was last established (it could not be told yet).
    cut_unseen: Vec<u64>,
    /// The client failed (`Failed`).
    failed: bool,
}

/// The applications' records; see the module documentation.
#[derive(Clone, Debug)]
pub struct Ledger {
    clients: Vec<ClientRecord>,
    /// Deliveries taken and not committed, per server slot.
    pending: Vec<Vec<Took>>,
    /// Per server slot, the deliveries of its last `tail_depth` commits
    /// (oldest first), for a tail loss to take back.
    kept: Vec<VecDeque<Vec<Took>>>,
    tail_depth: usize,
    /// Per session, the first instance that lost its past: it forgot the
    /// session's tombstone (`ServerEvent::Forgotten`) or had no room to
    /// restore it from the journal. From then on the session's journal
    /// record starts over with a new incarnation (it replaces the one that
    /// knew the past), so that instance and every later one may take its
    /// sns again, announced by the client.
    lost_past: HashMap<u64, u32>,
    /// Whether the servers keep a journal (duplicates across instances are
    /// then violations).
    journal: bool,
    /// Deliveries committed.
    pub committed: u64,
    /// Deliveries lost with a crashed server's uncommitted record.
    pub rolled_back: u64,
    /// Committed deliveries lost with the commits a tail loss cut.
    pub cut_back: u64,
}

impl Ledger {
    /// A ledger for `clients` clients and `servers` server slots; `journal`:
    /// the servers keep a journal.
    pub fn new(clients: usize, servers: usize, journal: bool) -> Ledger {
        Ledger {
            clients: vec![ClientRecord::default(); clients],
            pending: vec![Vec::new(); servers],
            kept: vec![VecDeque::new(); servers],
            tail_depth: 0,
            lost_past: HashMap::new(),
            journal,
            committed: 0,
            rolled_back: 0,
            cut_back: 0,
        }
    }

    /// Keeps the deliveries of each server's last `depth` commits, for
    /// [`cut`](Self::cut) (0, the default: none).
    pub fn set_tail_depth(&mut self, depth: usize) {
        self.tail_depth = depth;
    }

    /// Client `client`'s `submit` returned `sn`.
    pub fn submitted(&mut self, client: usize, sn: u64) {
        let c = &mut self.clients[client];
        c.submitted = c.submitted.max(sn + 1);
    }

    /// What client `client`'s application was told: sns given up, or the
    /// client failed.
    pub fn client_event(&mut self, client: usize, e: &ClientEvent) {
        match e {
            ClientEvent::NotReplayed { range } => {
                self.clients[client].given_up.push(range.clone());
            }
            ClientEvent::StateLost { unknown, .. } => {
                self.clients[client].state_lost.push(unknown.clone());
            }
            ClientEvent::Established { .. } => self.clients[client].cut_unseen.clear(),
            ClientEvent::Failed(_) => self.clients[client].failed = true,
            _ => {}
        }
    }

    /// The application of the server in slot `slot` took `took`.
    pub fn took(&mut self, slot: usize, took: Took) {
        self.pending[slot].push(took);
    }

    /// Instance `generation` forgot `session`'s tombstone.
    pub fn forgotten(&mut self, generation: u32, session: u64) {
        self.new_to(generation, session);
    }

    /// Instance `generation` had no room to restore `session` from the
    /// journal: the session is new to it, as to an instance without a
    /// journal, and its client announces what may come again.
    pub fn new_to(&mut self, generation: u32, session: u64) {
        let first = self.lost_past.entry(session).or_insert(generation);
        *first = (*first).min(generation);
    }

    /// The server in slot `slot` flushed: what it took is committed, as
    /// one commit.
    pub fn commit(&mut self, slot: usize) {
        let batch = core::mem::take(&mut self.pending[slot]);
        for &t in &batch {
            let c = &mut self.clients[t.client];
            let e = c.committed.entry(t.sn).or_insert((0, t.generation));
            e.0 += 1;
            let lost = self.lost_past.get(&t.session);
            if e.0 > 1 && lost.is_some_and(|&g| t.generation >= g) {
                // Taken again after an instance lost the session's past:
                // its client announced what may come again (the truth
                // checks the announcement).
                e.0 = 1;
            }
            self.committed += 1;
        }
        if self.tail_depth > 0 {
            let kept = &mut self.kept[slot];
            if kept.len() == self.tail_depth {
                kept.pop_front();
            }
            kept.push_back(batch);
        }
    }

    /// The journal of the server in slot `slot` lost its last `commits`
    /// commits (a tail loss): the deliveries committed with them count as
    /// never committed. Returns how many.
    pub fn cut(&mut self, slot: usize, commits: usize) -> u64 {
        let mut undone = 0;
        for _ in 0..commits {
            let Some(batch) = self.kept[slot].pop_back() else {
                break;
            };
            for t in batch.into_iter().rev() {
                let c = &mut self.clients[t.client];
                if let Some(e) = c.committed.get_mut(&t.sn) {
                    e.0 -= 1;
                    if e.0 == 0 {
                        c.committed.remove(&t.sn);
                    }
                }
                c.cut_unseen.push(t.sn);
                undone += 1;
            }
        }
        self.cut_back += undone;
        undone
    }

    /// The server in slot `slot` crashed: what it took since its last
    /// flush is lost; returns it (the truth forgets it too).
    pub fn crashed(&mut self, slot: usize) -> Vec<Took> {
        let lost = core::mem::take(&mut self.pending[slot]);
        self.rolled_back += lost.len() as u64;
        lost
    }

    /// Checks the invariants of the module documentation into `findings`
    /// (at the end of the run, after every live server's last flush).
    pub fn judge(&self, sessions: impl Fn(usize) -> u64, findings: &mut Findings) {
        for (i, c) in self.clients.iter().enumerate() {
            let session = sessions(i);
            if self.journal {
                let mut twice: Vec<(u64, (u32, u32))> = c
                    .committed
                    .iter()
                    .filter(|(_, &(n, _))| n > 1)
                    .map(|(&sn, &v)| (sn, v))
                    .collect();
                twice.sort_unstable();
                for (sn, (n, first)) in twice {
                    findings.add(
                        Invariant::DeliveredTwiceAcrossCrashes,
                        Some(i),
                        session,
                        Some(sn),
                        || format!("in the committed records {n} times, first by instance {first}"),
                    );
                }
            }
            if c.failed {
                continue;
            }
            for sn in 0..c.submitted {
                let named = |r: &Range<u64>| r.contains(&sn);
                if c.committed.contains_key(&sn)
                    || c.given_up.iter().any(named)
                    || c.state_lost.iter().any(named)
                    || c.cut_unseen.contains(&sn)
                {
                    continue;
                }
                findings.add(
                    Invariant::LostAcrossCrashes,
                    Some(i),
                    session,
                    Some(sn),
                    || "submit returned it, yet no server instance's committed record holds it, and no event gave it up or named it lost".into(),
                );
            }
        }
    }
}
