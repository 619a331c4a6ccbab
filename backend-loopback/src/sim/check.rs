//! The invariants a run must keep, and the violations found against the
//! ground truth.

use core::fmt;
use core::ops::Range;
use std::collections::BTreeMap;

/// A rule the protocol must keep, checked against the ground truth (what
/// the network carried, what server instances delivered, what clients
/// released), never against the protocol's own claims alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// The run ended (or hit its cap) with submitted sns neither delivered
    /// nor reported lost; sns never sent count too.
    Pending,
    /// The run did not finish within its virtual time or step cap, or
    /// left the network with frames in flight.
    NotFinished,
    /// Replay on, yet a submitted sn was never delivered (an sn of a client
    /// that failed and said so is reported, not lost).
    LostWithReplay,
    /// A client released as acknowledged an sn that no server instance
    /// delivered.
    AckedUndelivered,
    /// A client released as acknowledged an sn that was delivered only from
    /// another peer's frames (a shared session id, a stray peer).
    AckedFromOthersFrames,
    /// One server instance delivered an sn of a session twice.
    DeliveredTwiceByOneInstance,
    /// An sn was delivered again by a later instance without the client
    /// announcing it (`ServerRestarted.unconfirmed`) first.
    UnannouncedDuplicate,
    /// Replay off: a client gave the same sn up more than once.
    ReportedTwice,
    /// Replay off: an sn was delivered after its client gave it up.
    DeliveredAfterGivenUp,
    /// Replay off: an undelivered sn was given up with the wrong loss class
    /// (the network lost it on a live connection, the protocol says in
    /// flight at a disconnect, or the other way round).
    WrongLossClass,
    /// An sn a server reported as a live loss was later reported lost in
    /// flight at a disconnect.
    LiveReclassified,
    /// The network lost a frame on a live connection (a later frame of the
    /// connection got through, or the client gave up on the connection by
    /// its reply timeout while it was up) and no server ever reported the
    /// sn as a live loss.
    LiveLossUndetected,
    /// A read's data is not what the server's application wrote, though a
    /// CRC would have caught any corruption on the way.
    ReadMismatch,
    /// A delivered message's bytes differ from what its client submitted,
    /// though a CRC would have caught any corruption on the way.
    PayloadMismatch,
    /// A client dropped events, or released sns that no event explains.
    ClientEventsLost,
    /// A server delivered an sn that no frame it received carried.
    UntracedDelivery,
    /// A client released a read (its cumulative ack or its `base_sn`
    /// passed it, or the run ended) whose data never reached its
    /// application, and no client event named it: it was not inside a
    /// `NotReplayed` range and the client did not fail.
    ReadUnanswered,
    /// `submit` refused a message with `BufferFull` while the client had
    /// nothing outstanding: the storage holds nothing, yet refuses a
    /// message no larger than itself.
    BufferFullWhileIdle,
    /// Servers with a journal: an sn of a client is in the committed
    /// records of the server applications twice (two instances, or one
    /// instance twice), a crash of either side in between or not.
    DeliveredTwiceAcrossCrashes,
    /// Crash-proof state on: an sn a client's `submit` returned is, at the
    /// end of the run, in no server instance's committed record, and no
    /// event of the client gave it up (nor did the client fail).
    LostAcrossCrashes,
    /// A new server instance refused a journal record its predecessors
    /// wrote and committed, for another reason than want of room.
    JournalRefused,
    /// Servers with a journal: right after its restore, a new instance
    /// does not answer a session's `Hello` as the dead instance would
    /// have: the record it holds of the session (or, for a session it does
    /// not hold, what the journal's recall gives back) is not the
    /// session's latest committed record, or it holds a session no
    /// committed record names.
    RestoreDiffers,
    /// An sn a client released as acknowledged was delivered only in
    /// commits its server's journal lost (a tail loss), was never
    /// delivered again, and the client, established again after the loss,
    /// never named it (`ClientEvent::StateLost`): a silent loss. (A client
    /// that left before the loss can be told nothing: counted, not a
    /// violation.)
    StateLostUnnamed,
    /// Crash-proof state on: a client ended the run neither closed nor
    /// able to get in, its last connection attempts refused for a reason
    /// retrying cannot change (`BadHandshake`, `Rewound`).
    LockedOut,
}

impl Invariant {
    /// Every invariant.
    pub const ALL: [Invariant; 24] = [
        Invariant::Pending,
        Invariant::NotFinished,
        Invariant::LostWithReplay,
        Invariant::AckedUndelivered,
        Invariant::AckedFromOthersFrames,
        Invariant::DeliveredTwiceByOneInstance,
        Invariant::UnannouncedDuplicate,
        Invariant::ReportedTwice,
        Invariant::DeliveredAfterGivenUp,
        Invariant::WrongLossClass,
        Invariant::LiveReclassified,
        Invariant::LiveLossUndetected,
        Invariant::ReadMismatch,
        Invariant::PayloadMismatch,
        Invariant::ClientEventsLost,
        Invariant::UntracedDelivery,
        Invariant::ReadUnanswered,
        Invariant::BufferFullWhileIdle,
        Invariant::DeliveredTwiceAcrossCrashes,
        Invariant::LostAcrossCrashes,
        Invariant::JournalRefused,
        Invariant::RestoreDiffers,
        Invariant::StateLostUnnamed,
        Invariant::LockedOut,
    ];

    /// Its stable name (reports, repro lines, `--shrink`).
    pub fn name(self) -> &'static str {
        match self {
            Invariant::Pending => "pending",
            Invariant::NotFinished => "not-finished",
            Invariant::LostWithReplay => "lost-with-replay",
            Invariant::AckedUndelivered => "acked-undelivered",
            Invariant::AckedFromOthersFrames => "acked-from-others-frames",
            Invariant::DeliveredTwiceByOneInstance => "delivered-twice-by-one-instance",
            Invariant::UnannouncedDuplicate => "unannounced-duplicate",
            Invariant::ReportedTwice => "reported-twice",
            Invariant::DeliveredAfterGivenUp => "delivered-after-given-up",
            Invariant::WrongLossClass => "wrong-loss-class",
            Invariant::LiveReclassified => "live-reclassified",
            Invariant::LiveLossUndetected => "live-loss-undetected",
            Invariant::ReadMismatch => "read-mismatch",
            Invariant::PayloadMismatch => "payload-mismatch",
            Invariant::ClientEventsLost => "client-events-lost",
            Invariant::UntracedDelivery => "untraced-delivery",
            Invariant::ReadUnanswered => "read-unanswered",
            Invariant::BufferFullWhileIdle => "buffer-full-while-idle",
            Invariant::DeliveredTwiceAcrossCrashes => "delivered-twice-across-crashes",
            Invariant::LostAcrossCrashes => "lost-across-crashes",
            Invariant::JournalRefused => "journal-refused",
            Invariant::RestoreDiffers => "restore-differs",
            Invariant::StateLostUnnamed => "state-lost-unnamed",
            Invariant::LockedOut => "locked-out",
        }
    }

    /// The invariant called `name`.
    pub fn from_name(name: &str) -> Option<Invariant> {
        Invariant::ALL.into_iter().find(|i| i.name() == name)
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One violation: an invariant, where, and what the truth shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant.
    pub invariant: Invariant,
    /// The client (index in the scenario), if one is concerned.
    pub client: Option<usize>,
    /// The session, if one is concerned (0 otherwise).
    pub session: u64,
    /// The sns concerned (empty when the violation is about no sn).
    pub sns: Range<u64>,
    /// What the truth shows.
    pub note: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.invariant)?;
        if let Some(c) = self.client {
            write!(f, ": client {c}")?;
        }
        if self.session != 0 {
            write!(f, " session {:#x}", self.session)?;
        }
        match self.sns.end - self.sns.start {
            0 => {}
            1 => write!(f, " sn {}", self.sns.start)?,
            _ => write!(f, " sns {}..{}", self.sns.start, self.sns.end)?,
        }
        write!(f, ": {}", self.note)
    }
}

/// Most violations a report lists (all are counted).
pub const MAX_LISTED_VIOLATIONS: usize = 100;

/// Violations found so far: exact counts per invariant (sns, or
/// occurrences for violations about no sn), and the first ones listed,
/// consecutive sns of one kind merged into one range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Count per invariant.
    pub counts: BTreeMap<Invariant, u64>,
    /// The first [`MAX_LISTED_VIOLATIONS`] violations.
    pub listed: Vec<Violation>,
    /// Violations (ranges) that did not fit the list.
    pub unlisted: u64,
}

impl Findings {
    /// Records a violation about one sn (or none: `sn` `None`).
    pub fn add(
        &mut self,
        invariant: Invariant,
        client: Option<usize>,
        session: u64,
        sn: Option<u64>,
        note: impl FnOnce() -> String,
    ) {
        *self.counts.entry(invariant).or_default() += 1;
        if let (Some(sn), Some(last)) = (sn, self.listed.last_mut()) {
            if last.invariant == invariant
                && last.client == client
                && last.session == session
                && last.sns.end == sn
                && !last.sns.is_empty()
            {
                last.sns.end += 1;
                return;
            }
        }
        if self.listed.len() < MAX_LISTED_VIOLATIONS {
            self.listed.push(Violation {
                invariant,
                client,
                session,
                sns: sn.map_or(0..0, |s| s..s + 1),
                note: note(),
            });
        } else {
            self.unlisted += 1;
        }
    }

    /// Whether nothing was violated.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Sum of the counts.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// The count for one invariant.
    pub fn count(&self, invariant: Invariant) -> u64 {
        self.counts.get(&invariant).copied().unwrap_or(0)
    }

    /// The invariants violated, in [`Invariant::ALL`] order.
    pub fn violated(&self) -> Vec<Invariant> {
        self.counts.keys().copied().collect()
    }
}
