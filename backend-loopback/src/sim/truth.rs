//! Ground truth, kept apart from the protocol: what every server instance
//! handed to its application, and what each side claimed about each sn.

use core::ops::Range;
use std::collections::HashMap;

/// The client announced the sn as possibly processed by a dead instance.
pub(crate) const UNCONFIRMED: u8 = 1;
/// The client gave the sn up (replay off).
pub(crate) const NOT_REPLAYED: u8 = 2;
/// A server saw a frame jump over the sn on a live connection.
pub(crate) const LIVE_GAP: u8 = 4;
/// A server later received the sn (the hole filled).
pub(crate) const RECOVERED: u8 = 8;
/// A server gave the sn up as in flight at a disconnect.
pub(crate) const LOST_IN_FLIGHT: u8 = 16;
/// A server confirmed a live hole lost.
pub(crate) const LOST_LIVE: u8 = 32;
/// A live hole still open in a running server when the run ended.
pub(crate) const OPEN_HOLE: u8 = 64;

#[derive(Default)]
pub(crate) struct ClientTruth {
    pub(crate) session: u64,
    /// Deliveries per sn (saturating).
    pub(crate) delivered: Vec<u8>,
    /// Server generation of the last delivery of each sn.
    pub(crate) last_gen: Vec<u32>,
    /// Claims about each sn (the flags above).
    pub(crate) flags: Vec<u8>,
    pub(crate) submitted: u64,
    /// One past the highest sn the client transmitted (set at the end).
    pub(crate) sent: u64,
    /// The client's oldest unacknowledged sn at the end.
    pub(crate) final_base: u64,
    pub(crate) dup_same_instance: Vec<u64>,
    pub(crate) dup_unexplained: Vec<u64>,
    pub(crate) dup_after_restart: u64,
}

impl ClientTruth {
    fn grow(&mut self, sn: u64) -> usize {
        let i = usize::try_from(sn).unwrap_or(usize::MAX);
        if i >= self.delivered.len() {
            let n = (i + 1).max(self.delivered.len() * 2).max(1024);
            self.delivered.resize(n, 0);
            self.last_gen.resize(n, 0);
            self.flags.resize(n, 0);
        }
        i
    }
}

pub(crate) struct Truth {
    pub(crate) clients: Vec<ClientTruth>,
    by_session: HashMap<u64, usize>,
    generation: u32,
    pub(crate) kills: Vec<iomsg_core::Instant>,
}

impl Truth {
    pub(crate) fn new(clients: usize) -> Truth {
        Truth {
            clients: (0..clients).map(|_| ClientTruth::default()).collect(),
            by_session: HashMap::new(),
            generation: 0,
            kills: Vec::new(),
        }
    }

    pub(crate) fn register(&mut self, client: usize, session: u64) {
        self.clients[client].session = session;
        self.by_session.insert(session, client);
    }

    /// A new server instance starts; returns its generation (1, 2, ...).
    pub(crate) fn server_started(&mut self, _addr: u16, _instance: u64) -> u32 {
        self.generation += 1;
        self.generation
    }

    pub(crate) fn server_killed(&mut self, at: iomsg_core::Instant) {
        self.kills.push(at);
    }

    pub(crate) fn submitted(&mut self, client: usize, sn: u64) {
        let c = &mut self.clients[client];
        c.grow(sn);
        c.submitted += 1;
    }

    pub(crate) fn delivered(&mut self, session: u64, sn: u64, generation: u32) {
        let Some(&ci) = self.by_session.get(&session) else {
            return;
        };
        let c = &mut self.clients[ci];
        let i = c.grow(sn);
        if c.delivered[i] > 0 {
            if c.last_gen[i] == generation {
                c.dup_same_instance.push(sn);
            } else if c.flags[i] & UNCONFIRMED == 0 {
                c.dup_unexplained.push(sn);
            } else {
                c.dup_after_restart += 1;
            }
        }
        c.delivered[i] = c.delivered[i].saturating_add(1);
        c.last_gen[i] = generation;
    }

    pub(crate) fn flag(&mut self, client: usize, range: Range<u64>, flag: u8) {
        let c = &mut self.clients[client];
        if range.is_empty() {
            return;
        }
        c.grow(range.end - 1);
        for sn in range {
            c.flags[sn as usize] |= flag;
        }
    }

    pub(crate) fn flag_session(&mut self, session: u64, range: Range<u64>, flag: u8) {
        if let Some(&ci) = self.by_session.get(&session) {
            self.flag(ci, range, flag);
        }
    }
}
