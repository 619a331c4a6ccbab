//! The ground truth, kept apart from the protocol.
//!
//! Three independent records, and the protocol's claims beside them:
//!
//! * **what the network carried**: every frame a server endpoint really
//!   received (after faults), with its connection and the client endpoint
//!   that owns it ([`Truth::carried`]), and every frame it silently dropped
//!   on a connection that stayed up ([`Truth::silently_dropped`]);
//! * **what each server instance handed to its application**: every
//!   `Delivered`, per instance (generation), attributed to the peer whose
//!   connection carried the frame ([`Truth::delivered`]);
//! * **what each client released**: the acknowledged sns as the client
//!   application sees them (`Acked`, a known session's `resume_from`), the
//!   sns it gave up (`NotReplayed`), and its final `base_sn`
//!   ([`Truth::client_event`], [`Truth::client_final`]);
//! * **what each client application submitted and was handed**: every
//!   sn's bytes ([`Truth::submitted`]), which sns were reads
//!   ([`Truth::read_submitted`]) and which reads' data reached it
//!   ([`Truth::read_answered`]), and every `submit` refused for want of
//!   storage while nothing was outstanding ([`Truth::refused_for_storage`]).
//!
//! With crash-proof state, a delivery counts once its instance commits
//! it: a crash takes back what was not committed, and a journal that
//! loses its last commits (a tail loss) what they had committed
//! ([`Truth::journal_cut`]).
//!
//! The claims (`LiveLoss`, `LostLive`, `LostInFlight`, open holes,
//! `ServerRestarted`, `StateLost`) are kept as flags next to the truth and
//! never replace it. [`Truth::verdict`] compares them and lists every
//! [`Violation`](super::Violation).
//!
//! The recording methods are public so that tests can build a truth by
//! hand and check that each invariant can fail.

use core::ops::Range;
use std::collections::{HashMap, HashSet, VecDeque};

use iomsg_core::session::{ClientEvent, DisconnectCause, ServerEvent};
use iomsg_core::transport::ConnId;
use iomsg_core::wire::{Op, RejectReason};

use super::check::{Findings, Invariant};

mod claims;
mod crash;
mod reads;
mod records;
mod released;
mod verdict;
pub use records::{ClientSpec, FrameInfo, Owner, Taken};
pub use verdict::{Verdict, MAX_LISTED_LOST};

/// The network carried a frame of the sn to a server at least once.
const CARRIED: u16 = 1;
/// Claim: the client announced the sn as a possible duplicate (consumed by
/// the next delivery: an announcement covers a duplicate of what was
/// delivered before it).
const ANNOUNCED: u16 = 1 << 1;
/// Claim: the client gave the sn up (`NotReplayed`).
const GIVEN_UP: u16 = 1 << 2;
/// Claim: a server saw a frame jump over the sn on a live connection.
const LIVE_CLAIM: u16 = 1 << 3;
/// Claim: a server gave a live hole up (`LostLive`).
const LOST_LIVE_CLAIM: u16 = 1 << 4;
/// Claim: a server gave the sn up as in flight at a disconnect.
const LOST_IN_FLIGHT_CLAIM: u16 = 1 << 5;
/// Claim: a live hole still open in a running server at the end.
const OPEN_HOLE: u16 = 1 << 6;
/// Truth: delivered while a live-loss claim stood.
const RECOVERED: u16 = 1 << 7;
/// Truth: after the connection's `Hello`, a later frame (or a probe) of
/// the connection that should have carried this sn reached the server
/// before any frame of this sn reached that instance: the network lost it
/// on a live connection.
const TRUTH_LIVE: u16 = 1 << 8;
/// Truth: the network silently dropped the sn's frame, and the client gave
/// up on the connection by its reply timeout while it was still up (a
/// trailing loss).
const TRUTH_TRAILING: u16 = 1 << 9;
/// Truth: the client submitted the sn as a read.
const READ: u16 = 1 << 10;
/// Truth: the read's data reached the client's application.
const ANSWERED: u16 = 1 << 11;
/// Truth: a delivery of the sn was committed in a commit that a journal
/// lost (a tail loss), and taken back.
const TAIL_LOST: u16 = 1 << 12;
/// Claim: the client named the sn lost with its server's state
/// (`StateLost`).
const STATE_LOST: u16 = 1 << 13;
/// Truth: after the tail loss that took the sn's delivery back, the
/// client was established again: the instance it reached could tell it.
const TAIL_DUE: u16 = 1 << 14;

/// What the sim's workload checker found, apart from the protocol.
const CORRUPT_FOUND: &str = "bytes differ from what the client submitted";

/// A connection of a client that carried data, as far as the network saw.
#[derive(Clone, Debug)]
struct ConnTrack {
    conn: ConnId,
    /// One past the highest sn it carried (none yet: `None`).
    hi: Option<u64>,
    /// The lowest sn it carried (a reordered `Hello` may come after it).
    lo: Option<u64>,
    /// A server bound it to its session (`SessionOpened`): from then on
    /// the server judges its frames.
    hello: bool,
    /// Jumps seen before that: judged once it happens. (A data frame
    /// before its connection's `Hello` makes the server refuse the
    /// connection, `NotBound`: such jumps stay unjudged with it.)
    unjudged: Vec<(Range<u64>, u32)>,
}

/// A frame the network silently dropped on an open connection.
#[derive(Clone, Copy, Debug)]
struct DropRecord {
    conn: ConnId,
    epoch: u32,
    sn: u64,
}

#[derive(Debug)]
struct ClientTruth {
    spec: ClientSpec,
    /// Another client has the same session id.
    shared: bool,
    /// Sns `0..submitted` were submitted.
    submitted: u64,
    /// Deliveries of each sn from this client's own frames, all instances.
    deliveries: Vec<u32>,
    /// Generation of the last instance that delivered each sn.
    last_gen: Vec<u32>,
    flags: Vec<u16>,
    /// Every sn below it was released as acknowledged (or given up).
    acked_upto: u64,
    /// The latest epoch it started (`Connecting`).
    epoch: u32,
    /// The epoch whose handshake completed, while it is the latest.
    established: Option<u32>,
    handshakes: u64,
    failed: bool,
    /// Payloads the workload's checker found corrupt (writes delivered,
    /// reads answered) where no CRC could catch it.
    corrupt: u64,
    /// What the client submitted for each sn: [`workload::hash`] of the
    /// write's payload or the read's request.
    hashes: Vec<u64>,
    given_up: u64,
    /// Recent connections whose frames were delivered.
    conns: Vec<ConnTrack>,
    drops: Vec<DropRecord>,
    final_base: Option<u64>,
    /// `submit` refused a message with nothing outstanding (reported once).
    refused_idle: bool,
    /// `Connecting`, `Established` and `Disconnected` events seen.
    seen: [u64; 3],
    /// The servers keep a journal: what one instance committed, the
    /// instances after it have ([`Truth::set_journal`]).
    journaled: bool,
    /// The client's own counts of the same: what the events must match.
    counted: [u64; 3],
    /// Sns it named lost with its server's state (`StateLost`).
    state_lost: u64,
    /// Its connection attempts refused in a row, for a reason retrying
    /// cannot change (`BadHandshake`, `Rewound`), since it was last
    /// established: the last refusal, and how many.
    refused: Option<(RejectReason, u64, u32)>,
    /// It closed (`Closed`).
    closed: bool,
    /// Sns whose delivery a tail loss took back since it was last
    /// established.
    cut_unseen: Vec<u64>,
}

impl ClientTruth {
    /// The network lost these sns while their connection was up (unless
    /// instance `generation` had them already).
    fn mark_live(&mut self, range: Range<u64>, generation: u32) {
        if range.is_empty() {
            return;
        }
        self.grow(range.end - 1);
        for sn in range {
            if !self.has(sn, generation) {
                self.flags[sn as usize] |= TRUTH_LIVE;
            }
        }
    }

    fn grow(&mut self, sn: u64) -> usize {
        let i = usize::try_from(sn).unwrap_or(usize::MAX - 1);
        if i >= self.deliveries.len() {
            let n = (i + 1).max(self.deliveries.len() * 2).max(1024);
            self.deliveries.resize(n, 0);
            self.last_gen.resize(n, 0);
            self.flags.resize(n, 0);
            self.hashes.resize(n, 0);
        }
        i
    }

    fn flags(&self, sn: u64) -> u16 {
        usize::try_from(sn)
            .ok()
            .and_then(|i| self.flags.get(i))
            .copied()
            .unwrap_or(0)
    }

    fn delivered(&self, sn: u64) -> u32 {
        usize::try_from(sn)
            .ok()
            .and_then(|i| self.deliveries.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Whether instance `generation` has the sn already: it delivered
    /// it, or (servers with a journal) an instance before it did and
    /// committed it, so the journal it was restored from holds it.
    fn has(&self, sn: u64, generation: u32) -> bool {
        self.delivered_by(sn, generation) || (self.journaled && self.delivered(sn) > 0)
    }

    fn delivered_by(&self, sn: u64, generation: u32) -> bool {
        self.delivered(sn) > 0 && self.last_gen.get(sn as usize) == Some(&generation)
    }

    fn flag(&mut self, range: Range<u64>, flag: u16) {
        if range.is_empty() {
            return;
        }
        self.grow(range.end - 1);
        for sn in range {
            self.flags[sn as usize] |= flag;
        }
    }
}

/// The ground truth of one run; see the module documentation.
#[derive(Debug)]
pub struct Truth {
    clients: Vec<ClientTruth>,
    by_session: HashMap<u64, Vec<usize>>,
    /// The client that owns each `(server, session)` there, as the server
    /// last bound one of its connections.
    owners: HashMap<(u16, u64), usize>,
    /// `(generation, session, sn)` delivered from a stray peer's frames.
    stray_deliveries: HashSet<(u32, u64, u64)>,
    /// `(generation, session)`: that instance forgot the session's
    /// tombstone (`ServerEvent::Forgotten`), so it may deliver the
    /// session's sns again, as a new instance would.
    forgotten: HashSet<(u32, u64)>,
    findings: Findings,
    unparsable: u64,
    carried_frames: u64,
    deliveries_by_stray: u64,
    undetectable_corruption: bool,
    /// Crash-proof state on: deliveries are undone when their instance
    /// crashes before committing them ([`Truth::set_crash_proof`]).
    rollback: bool,
    /// What each uncommitted delivery changed, to undo it.
    uncommitted: Vec<crash::Undo>,
    /// Per server, what its last `tail_depth` commits changed, oldest
    /// first ([`Truth::journal_cut`]).
    kept: HashMap<u16, VecDeque<Vec<crash::Undo>>>,
    tail_depth: usize,
}

impl Truth {
    /// A truth for these clients (index = client).
    pub fn new(clients: &[ClientSpec]) -> Truth {
        let mut by_session: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, c) in clients.iter().enumerate() {
            by_session.entry(c.session).or_default().push(i);
        }
        Truth {
            clients: clients
                .iter()
                .map(|&spec| ClientTruth {
                    spec,
                    shared: by_session.get(&spec.session).is_some_and(|v| v.len() > 1),
                    submitted: 0,
                    deliveries: Vec::new(),
                    last_gen: Vec::new(),
                    flags: Vec::new(),
                    acked_upto: 0,
                    epoch: 0,
                    established: None,
                    handshakes: 0,
                    failed: false,
                    corrupt: 0,
                    hashes: Vec::new(),
                    given_up: 0,
                    conns: Vec::new(),
                    drops: Vec::new(),
                    final_base: None,
                    refused_idle: false,
                    seen: [0; 3],
                    counted: [0; 3],
                    journaled: false,
                    state_lost: 0,
                    refused: None,
                    closed: false,
                    cut_unseen: Vec::new(),
                })
                .collect(),
            by_session,
            owners: HashMap::new(),
            stray_deliveries: HashSet::new(),
            forgotten: HashSet::new(),
            findings: Findings::default(),
            unparsable: 0,
            carried_frames: 0,
            deliveries_by_stray: 0,
            undetectable_corruption: false,
            rollback: false,
            uncommitted: Vec::new(),
            kept: HashMap::new(),
            tail_depth: 0,
        }
    }

    /// The violations found while recording (the end-of-run checks are
    /// added by [`verdict`](Self::verdict)).
    pub fn findings(&self) -> &Findings {
        &self.findings
    }

    /// Client `client`'s `submit` returned `sn` for bytes of hash `hash`.
    pub fn submitted(&mut self, client: usize, sn: u64, hash: u64) {
        let c = &mut self.clients[client];
        let idx = c.grow(sn);
        c.hashes[idx] = hash;
        c.submitted = c.submitted.max(sn + 1);
    }

    /// Frames may be corrupted where no CRC covers them (payload CRCs off
    /// and corruption faults on): the checker's findings are then
    /// reported, not violations.
    pub fn set_undetectable_corruption(&mut self, possible: bool) {
        self.undetectable_corruption = possible;
    }

    /// The network handed a frame to a server endpoint whose instance is
    /// `generation`; `owner` owns the connection `conn`. `frame` is `None`
    /// when it did not parse.
    pub fn carried(
        &mut self,
        owner: Owner,
        conn: ConnId,
        generation: u32,
        frame: Option<&FrameInfo>,
    ) {
        self.carried_frames += 1;
        let Some(f) = frame else {
            self.unparsable += 1;
            return;
        };
        let Owner::Client(i) = owner else {
            return;
        };
        // A probe says every sn below its own was sent on this connection:
        // like a later frame, it jumps over what the connection lost.
        let probe = f.op == Op::Probe;
        let hello = f.op == Op::Hello;
        if !f.is_data() && !probe && !hello {
            return;
        }
        let c = &mut self.clients[i];
        if f.is_data() {
            let idx = c.grow(f.sn);
            c.flags[idx] |= CARRIED;
        }
        if f.op == Op::Read && f.sn < c.acked_upto {
            // A read asked again because its answer was lost: its sn is
            // one the client acknowledged, not where the connection is.
            return;
        }
        let k = match c.conns.iter().rposition(|t| t.conn == conn) {
            Some(k) => k,
            None => {
                if c.conns.len() >= 8 {
                    c.conns.remove(0);
                }
                c.conns.push(ConnTrack {
                    conn,
                    hi: None,
                    lo: None,
                    hello: false,
                    unjudged: Vec::new(),
                });
                c.conns.len() - 1
            }
        };
        let track = &mut c.conns[k];
        if let Some((base_sn, next_sn, replay)) = f.hello {
            // What the connection carries starts at next_sn when nothing
            // before it will be sent again (replay off, or nothing
            // unacknowledged); with a replay it starts at the Welcome's
            // resume_from, which only the client sees.
            if !replay || base_sn == next_sn {
                match track.lo {
                    None => track.hi = Some(next_sn),
                    // Frames that overtook the Hello jumped over these.
                    Some(lo) if lo > next_sn => {
                        let range = next_sn..lo;
                        if track.hello {
                            c.mark_live(range, generation);
                        } else {
                            track.unjudged.push((range, generation));
                        }
                    }
                    Some(_) => {}
                }
            }
            return;
        }
        // Frames of one connection arrive in order or not at all, so a jump
        // within a connection is a loss while it was up, whatever the
        // client's handshake state (eager frames precede the Welcome).
        let end = if probe { f.sn } else { f.sn + 1 };
        if !probe {
            track.lo = Some(track.lo.map_or(f.sn, |lo| lo.min(f.sn)));
        }
        let jumped = track.hi.filter(|&hi| f.sn > hi).map(|hi| hi..f.sn);
        track.hi = Some(track.hi.map_or(end, |hi| hi.max(end)));
        if let Some(range) = jumped {
            if track.hello {
                c.mark_live(range, generation);
            } else {
                track.unjudged.push((range, generation));
            }
        }
    }

    /// The network silently dropped a frame on its way to a server whose
    /// instance is `generation`, on the open connection `conn` of `owner`.
    pub fn silently_dropped(
        &mut self,
        owner: Owner,
        conn: ConnId,
        generation: u32,
        frame: Option<&FrameInfo>,
    ) {
        let (Owner::Client(i), Some(f)) = (owner, frame) else {
            return;
        };
        if f.op == Op::Probe {
            // The probe that would have found the drops before it is lost
            // too: the protocol looked, the network hid them (a probe that
            // does arrive later finds them as a jump).
            self.clients[i]
                .drops
                .retain(|d| d.conn != conn || d.sn >= f.sn);
            return;
        }
        if !f.is_data() {
            return;
        }
        let c = &mut self.clients[i];
        c.grow(f.sn);
        if f.op == Op::Read && f.sn < c.acked_upto {
            // A read asked again: delivered before, so no server can find
            // it missing; the client asks once more on its next connection.
            return;
        }
        if !c.has(f.sn, generation) {
            c.drops.push(DropRecord {
                conn,
                epoch: f.epoch,
                sn: f.sn,
            });
        }
    }

    /// The server at `server` bound connection `conn` to `session`: the
    /// jumps its frames made before are judged now, and later ones as
    /// they come. The client that owns the
    /// connection owns the session there now: the server's claims about
    /// the session are about its sns.
    pub fn conn_bound(&mut self, server: u16, session: u64, conn: ConnId) {
        for (i, c) in self.clients.iter_mut().enumerate() {
            let Some(k) = c.conns.iter().rposition(|t| t.conn == conn) else {
                continue;
            };
            self.owners.insert((server, session), i);
            c.conns[k].hello = true;
            let unjudged = core::mem::take(&mut c.conns[k].unjudged);
            for (range, generation) in unjudged {
                c.mark_live(range, generation);
            }
            return;
        }
        // A connection of none of the clients (a stray peer's): the
        // session's claims there are about nobody's sns now.
        self.owners.insert((server, session), usize::MAX);
    }

    /// Client `client` gave its connection of `epoch` up by its reply
    /// timeout; `still_up(conn)` says whether the network still had that
    /// connection up then with nothing of it on the way to the server. A
    /// frame silently dropped on it was lost on a live connection: a
    /// trailing loss the protocol should have found (its probes had
    /// arrived). Frames still on the way when the client gives up (held
    /// by a delay longer than the reply timeout) may never arrive: the
    /// client's reconnect closes that connection.
    pub fn reply_timeout(&mut self, client: usize, epoch: u32, still_up: impl Fn(ConnId) -> bool) {
        let c = &mut self.clients[client];
        if c.established != Some(epoch) {
            return;
        }
        let live: Vec<u64> = c
            .drops
            .iter()
            .filter(|d| d.epoch == epoch && still_up(d.conn))
            .map(|d| d.sn)
            .collect();
        for sn in live {
            c.flag(sn..sn + 1, TRUTH_TRAILING);
        }
        c.drops.retain(|d| d.epoch != epoch);
    }

    /// Server instance `generation` (at address `server`) handed `taken`
    /// to its application from a frame that `owner`'s connection `conn`
    /// carried (`None`: no frame the server received carried it).
    pub fn delivered(
        &mut self,
        generation: u32,
        server: u16,
        owner: Owner,
        conn: Option<ConnId>,
        taken: Taken,
    ) {
        let Taken { session, sn, .. } = taken;
        // An instance that forgot the session is new to it: what it
        // delivered before may come again, announced by the client.
        let forgot = self.forgotten.contains(&(generation, session));
        let _ = conn;
        match owner {
            Owner::Client(i) if self.clients[i].spec.session == session => {
                self.delivered_from_client(i, (generation, server), taken, forgot);
            }
            Owner::Stray => self.delivered_from_stray((generation, server), session, sn, forgot),
            _ => {
                self.findings
                    .add(Invariant::UntracedDelivery, None, session, Some(sn), || {
                        format!(
                            "instance {generation} delivered it, but no frame it received carried it from a known peer"
                        )
                    });
            }
        }
    }

    /// A stray peer's frame delivered by instance `generation` of
    /// `server`: counted, and a finding if that instance delivered it
    /// before.
    fn delivered_from_stray(
        &mut self,
        (generation, server): (u32, u16),
        session: u64,
        sn: u64,
        forgot: bool,
    ) {
        self.deliveries_by_stray += 1;
        if !forgot && self.delivered_by_another(None, generation, server, session, sn) {
            self.findings.add(
                Invariant::DeliveredTwiceByOneInstance,
                None,
                session,
                Some(sn),
                || format!("instance {generation} delivered it again, from a stray peer's frame"),
            );
        }
        let fresh = self.stray_deliveries.insert((generation, session, sn));
        if self.rollback {
            self.uncommitted.push(crash::Undo::Stray {
                generation,
                session,
                sn,
                fresh,
            });
        }
        if !fresh && !forgot {
            self.findings.add(
                Invariant::DeliveredTwiceByOneInstance,
                None,
                session,
                Some(sn),
                || format!("instance {generation} delivered a stray peer's frame twice"),
            );
        }
    }

    /// Client `i`'s sn delivered by instance `generation` of `server`:
    /// a finding for a delivery twice by one instance, an unannounced
    /// duplicate, changed bytes or a delivery after a give-up; the
    /// delivery counted.
    fn delivered_from_client(
        &mut self,
        i: usize,
        (generation, server): (u32, u16),
        taken: Taken,
        forgot: bool,
    ) {
        let Taken { session, sn, hash } = taken;
        if !forgot && self.delivered_by_another(Some(i), generation, server, session, sn) {
            self.findings.add(
                Invariant::DeliveredTwiceByOneInstance,
                Some(i),
                session,
                Some(sn),
                || format!("instance {generation} had delivered it from another peer's frame"),
            );
        }
        let Truth {
            clients,
            findings,
            rollback,
            uncommitted,
            ..
        } = self;
        let c = &mut clients[i];
        let idx = c.grow(sn);
        let flags = c.flags[idx];
        if *rollback {
            uncommitted.push(crash::Undo::Client {
                generation,
                client: i,
                idx,
                deliveries: c.deliveries[idx],
                last_gen: c.last_gen[idx],
                flags,
            });
        }
        if c.deliveries[idx] > 0 {
            if c.last_gen[idx] == generation && !forgot {
                findings.add(
                    Invariant::DeliveredTwiceByOneInstance,
                    Some(i),
                    session,
                    Some(sn),
                    || format!("instance {generation} delivered it twice"),
                );
            } else if flags & ANNOUNCED == 0 {
                let first = c.last_gen[idx];
                findings.add(
                    Invariant::UnannouncedDuplicate,
                    Some(i),
                    session,
                    Some(sn),
                    || format!("delivered by instance {first}, then again by instance {generation}, never announced"),
                );
            }
        }
        // An announcement covers one delivery after it: made before the
        // sn's first delivery, it announced nothing that delivery repeats.
        c.flags[idx] &= !ANNOUNCED;
        if c.hashes[idx] != hash {
            if self.undetectable_corruption {
                c.corrupt += 1;
            } else {
                findings.add(
                    Invariant::PayloadMismatch,
                    Some(i),
                    session,
                    Some(sn),
                    || format!("instance {generation} delivered it, but its {CORRUPT_FOUND}"),
                );
            }
        }
        if flags & GIVEN_UP != 0 && !c.spec.replay {
            findings.add(
                Invariant::DeliveredAfterGivenUp,
                Some(i),
                session,
                Some(sn),
                || format!("instance {generation} delivered it after the client gave it up"),
            );
        }
        if flags & LIVE_CLAIM != 0 {
            c.flags[idx] |= RECOVERED;
        }
        c.deliveries[idx] = c.deliveries[idx].saturating_add(1);
        c.last_gen[idx] = generation;
    }

    /// Whether instance `generation` of `server` delivered `(session, sn)`
    /// from the frames of a peer other than `me`.
    fn delivered_by_another(
        &self,
        me: Option<usize>,
        generation: u32,
        server: u16,
        session: u64,
        sn: u64,
    ) -> bool {
        if me.is_some_and(|i| !self.clients[i].shared) && self.stray_deliveries.is_empty() {
            return false;
        }
        let siblings = self.by_session.get(&session).map_or(&[][..], |v| v);
        siblings.iter().any(|&j| {
            Some(j) != me
                && self.clients[j].spec.server == server
                && self.clients[j].delivered_by(sn, generation)
        }) || (me.is_some() && self.stray_deliveries.contains(&(generation, session, sn)))
    }

    /// Whether anyone but client `i` had `(session, sn)` delivered.
    fn delivered_to_others(&self, i: usize, session: u64, sn: u64) -> bool {
        let siblings = self.by_session.get(&session).map_or(&[][..], |v| v);
        siblings
            .iter()
            .any(|&j| j != i && self.clients[j].delivered(sn) > 0)
            || self
                .stray_deliveries
                .iter()
                .any(|&(_, s, n)| s == session && n == sn)
    }
}
