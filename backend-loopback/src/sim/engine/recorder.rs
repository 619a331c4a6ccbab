//! The recorder: what the network's tap saw, who each endpoint is, and
//! the truth and ledger they feed.

use core::cell::RefCell;
use core::hash::{BuildHasherDefault, Hasher};
use std::collections::HashMap;
use std::rc::Rc;

use iomsg_core::session::ServerEvent;
use iomsg_core::transport::ConnId;
use iomsg_core::Instant;

use crate::network::{EndpointId, TapKind};
use crate::sim::ledger::{Ledger, Took};
use crate::sim::report::Report;
use crate::sim::scenario::KillEvent;
use crate::sim::truth::{FrameInfo, Owner, Truth};

/// FxHash (rustc's): the recorder hashes a key per frame, SipHash is too
/// slow for the million-kill storm.
#[derive(Default)]
pub(super) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

pub(super) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// What a tap saw, parsed by the recorder.
pub(super) struct TapRecord {
    pub(super) kind: TapKind,
    pub(super) conn: ConnId,
    pub(super) client: EndpointId,
    pub(super) server: EndpointId,
    pub(super) frame: Option<FrameInfo>,
}

/// Who an endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EpOwner {
    None,
    Client(usize),
    Stray,
    Server { slot: usize, generation: u32 },
}

/// Who owns the connections one server instance received frames on.
#[derive(Default)]
pub(super) struct RxIndex {
    /// The owner of each connection.
    owners: FxMap<ConnId, Owner>,
    last_owned: Option<ConnId>,
}

impl RxIndex {
    pub(super) fn note(&mut self, conn: ConnId, owner: Owner) {
        if self.last_owned != Some(conn) {
            self.owners.insert(conn, owner);
            self.last_owned = Some(conn);
        }
    }

    pub(super) fn owner(&self, conn: Option<ConnId>) -> Owner {
        conn.and_then(|c| self.owners.get(&c).copied())
            .unwrap_or(Owner::Unknown)
    }

    pub(super) fn clear(&mut self) {
        self.owners.clear();
        self.last_owned = None;
    }
}

/// The recorder: the tap's log, who each endpoint is, what each server
/// received, and the truth they feed.
pub(super) struct Recorder {
    /// What the tap saw since the last drain.
    pub(super) log: Rc<RefCell<Vec<TapRecord>>>,
    /// The log's spare buffer.
    pub(super) spare: Vec<TapRecord>,
    /// Who each endpoint is.
    pub(super) endpoints: Vec<EpOwner>,
    /// Per server slot: who owns the connections it received frames on.
    pub(super) rx: Vec<RxIndex>,
    /// The ground truth.
    pub(super) truth: Truth,
    /// The applications' records (crash-proof state on).
    pub(super) ledger: Ledger,
    /// Crash-proof state is on: deliveries commit at flushes.
    pub(super) durable: bool,
    /// Client endpoints whose frames reached a server.
    pub(super) client_endpoints: std::collections::HashSet<EndpointId>,
}

impl Recorder {
    pub(super) fn register(&mut self, ep: EndpointId, who: EpOwner) {
        let i = usize::try_from(ep).unwrap_or(usize::MAX);
        if i >= self.endpoints.len() {
            self.endpoints.resize(i + 1, EpOwner::None);
        }
        self.endpoints[i] = who;
    }

    pub(super) fn who(&self, ep: EndpointId) -> EpOwner {
        usize::try_from(ep)
            .ok()
            .and_then(|i| self.endpoints.get(i))
            .copied()
            .unwrap_or(EpOwner::None)
    }

    /// Server slot `k`'s instance `generation` handed `(session, sn)` from
    /// `owner`'s frame to its application: with crash-proof state on, the
    /// application's record takes it, to commit at the next flush.
    pub(super) fn took(&mut self, k: usize, generation: u32, owner: Owner, session: u64, sn: u64) {
        if let (true, Owner::Client(client)) = (self.durable, owner) {
            let took = Took {
                client,
                session,
                sn,
                generation,
            };
            self.ledger.took(k, took);
        }
    }

    /// Feeds what the tap saw since the last drain to the truth, in order.
    pub(super) fn drain(&mut self) {
        if self.log.borrow().is_empty() {
            return;
        }
        core::mem::swap(&mut *self.log.borrow_mut(), &mut self.spare);
        let mut records = core::mem::take(&mut self.spare);
        for r in records.drain(..) {
            let owner = match self.who(r.client) {
                EpOwner::Client(i) => Owner::Client(i),
                EpOwner::Stray => Owner::Stray,
                _ => Owner::Unknown,
            };
            let EpOwner::Server { slot, generation } = self.who(r.server) else {
                continue;
            };
            match r.kind {
                TapKind::Received => {
                    if let Owner::Client(_) = owner {
                        self.client_endpoints.insert(r.client);
                    }
                    if let Some(rx) = self.rx.get_mut(slot) {
                        rx.note(r.conn, owner);
                    }
                    self.truth
                        .carried(owner, r.conn, generation, r.frame.as_ref());
                }
                TapKind::SilentlyDropped => {
                    self.truth
                        .silently_dropped(owner, r.conn, generation, r.frame.as_ref());
                }
            }
        }
        self.spare = records;
    }
}

/// What a server's event means for the truth, the ledger and the report,
/// and the kill trigger it is: `at` is the server's address, its
/// instance's generation and whether servers keep a journal.
pub(super) fn server_event(
    e: &ServerEvent,
    (addr, generation, journaled): (u16, u32, bool),
    now: Instant,
    rec: &mut Recorder,
    report: &mut Report,
) -> Option<KillEvent> {
    match e {
        ServerEvent::LiveLoss {
            session, missing, ..
        } => {
            report.live_loss(now, *session, missing.clone());
            rec.truth.server_event(addr, e);
        }
        // With a journal the instance recalls what it forgot: it lost
        // nothing.
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
        ServerEvent::SessionOpened { .. } => Some(KillEvent::SessionOpened),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_connection_keeps_the_owner_first_noted_until_cleared() {
        let mut rx = RxIndex::default();
        let (a, b) = (ConnId::new(1, 0), ConnId::new(2, 0));
        rx.note(a, Owner::Client(0));
        rx.note(b, Owner::Stray);
        assert_eq!(rx.owner(Some(a)), Owner::Client(0));
        assert_eq!(rx.owner(Some(b)), Owner::Stray);
        assert_eq!(rx.owner(Some(ConnId::new(99, 0))), Owner::Unknown);
        assert_eq!(rx.owner(None), Owner::Unknown);
        rx.clear();
        assert_eq!(rx.owner(Some(a)), Owner::Unknown);
    }
}
