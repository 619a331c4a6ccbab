//! The server journal: what a server keeps of each session so that an
//! instance started after a crash recognises its own past.
//!
//! With [`ServerConfig::journal`] on, every session whose state changed
//! (a message delivered, a `Hello`, a `Bye`) is handed to the application
//! as one [journal record](JournalRecord) through
//! [`ServerHandler::journal`], just before [`ServerHandler::flush`]: that
//! is, before any acknowledgement of it leaves. The application keeps the
//! records (the last one per session is the session's state) together
//! with what `deliver` took, and hands them back to the next instance
//! through [`ServerCore::restore`] before it serves. A client that then
//! reconnects is told its session is known, resumes where the journal
//! says, and its replays of sns the journal covers are acknowledged, not
//! delivered again.
//!
//! A record is a byte string with a checksum; its layout (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `IOJR` |
//! | 4 | version (2; version 1 records, without bytes 72..80, are read too) |
//! | 5 | flags: bit 0 `given_up_from` present, bit 1 `lost_from` present |
//! | 6..8 | `n`: words of the received bitmap |
//! | 8..16 | session id |
//! | 16..24 | the owner's token |
//! | 24..32 | the record's incarnation (its lineage) |
//! | 32..36 | epoch |
//! | 36..40 | zero |
//! | 40..48 | cumulative point: every sn below it is done |
//! | 48..56 | top: one past the highest sn received |
//! | 56..64 | one past the highest sn the client ever announced |
//! | 64..72 | the lowest given-up sn the client may not know of |
//! | 72..80 | where the record's knowledge begins, when it is younger than what its client saw acknowledged (see [`JournalRecord::lost_from`]) |
//! | 80..80+8n | bit `i`: sn `cumulative + i` received (`i < top - cumulative`) |
//! | 80+8n.. | CRC32C of everything before |
//!
//! The open holes are the clear bits below `top`.
//!
//! [`ServerConfig::journal`]: super::ServerConfig::journal
//! [`ServerHandler::journal`]: super::ServerHandler::journal
//! [`ServerHandler::flush`]: super::ServerHandler::flush
//! [`ServerCore::restore`]: super::ServerCore::restore

use core::fmt;
use core::ops::Range;

use super::{
    Delivery, ReadRequest, RecvTracker, ServerCore, ServerEvent, ServerHandler, Session, Tomb,
};
use crate::time::Instant;
use crate::wire::{Crc32c, RejectReason, SN_MAX};

/// The first bytes of every record.
pub const JOURNAL_MAGIC: [u8; 4] = *b"IOJR";
/// The record layout's version.
pub const JOURNAL_VERSION: u8 = 2;
/// Bytes of a record without its bitmap (header and CRC).
pub const JOURNAL_FIXED: usize = HEADER + 4;
/// The widest bitmap a record carries: a receive window of 65,536 sns
/// (`WORDS` up to 1,025).
pub const JOURNAL_MAX_WORDS: usize = 1024;
/// The longest record.
pub const JOURNAL_MAX_RECORD: usize = JOURNAL_FIXED + 8 * JOURNAL_MAX_WORDS;

const HEADER: usize = 80;
/// The header of a version 1 record (no `lost_from`).
const HEADER_V1: usize = 72;
const GIVEN_UP: u8 = 1;
const LOST: u8 = 2;

/// Why a journal record could not be read or restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalError {
    /// Shorter than its own length says (a torn write).
    Truncated {
        /// Bytes there.
        len: usize,
        /// Bytes the record needs.
        need: usize,
    },
    /// Longer than its own length says.
    TrailingBytes {
        /// Bytes there.
        len: usize,
        /// Bytes the record has.
        need: usize,
    },
    /// Not a journal record.
    BadMagic,
    /// A layout this build does not read.
    UnsupportedVersion(u8),
    /// Its bytes changed since it was written.
    Checksum,
    /// Its fields contradict each other (the name says which).
    Inconsistent(&'static str),
    /// Its bitmap is wider than this server's receive window: it was
    /// written by a server with a larger `WORDS`.
    TooWide {
        /// Words in the record.
        words: usize,
        /// Words this server's window holds.
        capacity: usize,
    },
    /// The record has open holes and every place in the session table
    /// holds a session with open holes: the session cannot be restored
    /// (see [`ServerCore::restore`](super::ServerCore::restore)).
    TableFull {
        /// The session.
        session: u64,
    },
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Truncated { len, need } => {
                write!(f, "journal record torn: {len} of {need} bytes")
            }
            JournalError::TrailingBytes { len, need } => {
                write!(f, "journal record of {need} bytes followed by {} more", len - need)
            }
            JournalError::BadMagic => f.write_str("not a journal record (bad magic)"),
            JournalError::UnsupportedVersion(v) => {
                write!(f, "journal record version {v}; this build reads 1 to {JOURNAL_VERSION}")
            }
            JournalError::Checksum => f.write_str("journal record checksum mismatch"),
            JournalError::Inconsistent(what) => write!(f, "journal record inconsistent: {what}"),
            JournalError::TooWide { words, capacity } => write!(
                f,
                "journal record has {words} bitmap words; this server's window holds {capacity}"
            ),
            JournalError::TableFull { session } => write!(
                f,
                "no room to restore session {session:016x}: every place in the session table holds a \
                 session with sns missing"
            ),
        }
    }
}

impl core::error::Error for JournalError {}

/// One session's state as a journal record: what
/// [`ServerHandler::journal`](super::ServerHandler::journal) hands over
/// (encoded) and [`ServerCore::restore`](super::ServerCore::restore)
/// takes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalRecord<'a> {
    /// The session id.
    pub session: u64,
    /// The owner's token.
    pub token: u64,
    /// The record's incarnation: a client that trusted it before the
    /// crash trusts the restored session.
    pub incarnation: u64,
    /// The epoch of its latest `Hello`.
    pub epoch: u32,
    /// Every sn below it is done (delivered or given up).
    pub cumulative: u64,
    /// One past the highest sn delivered.
    pub top: u64,
    /// One past the highest sn the client announced in a `Hello`.
    pub announced: u64,
    /// The lowest sn given up that the client may not know about.
    pub given_up_from: Option<u64>,
    /// Where the record's knowledge begins, when it is younger than what
    /// its client saw acknowledged (its journal lost commits, or lost the
    /// session): the client names `[lost_from, its base)` as state lost
    /// the first time it meets this incarnation.
    pub lost_from: Option<u64>,
    /// `words` little-endian `u64`s: bit `i` set when sn
    /// `cumulative + i` was delivered.
    bitmap: &'a [u8],
}

impl<'a> JournalRecord<'a> {
    /// Reads a record, checking its checksum and its fields.
    ///
    /// # Errors
    ///
    /// [`JournalError`]: torn, changed or not a record.
    pub fn decode(bytes: &'a [u8], crc: &Crc32c) -> Result<JournalRecord<'a>, JournalError> {
        if bytes.len() < HEADER_V1 + 4 {
            return Err(JournalError::Truncated {
                len: bytes.len(),
                need: JOURNAL_FIXED,
            });
        }
        if bytes[0..4] != JOURNAL_MAGIC {
            return Err(JournalError::BadMagic);
        }
        let header = match bytes[4] {
            1 => HEADER_V1,
            JOURNAL_VERSION => HEADER,
            v => return Err(JournalError::UnsupportedVersion(v)),
        };
        let words = usize::from(u16::from_le_bytes([bytes[6], bytes[7]]));
        let need = header + 4 + 8 * words;
        if bytes.len() < need {
            let len = bytes.len();
            return Err(JournalError::Truncated { len, need });
        }
        if bytes.len() > need {
            let len = bytes.len();
            return Err(JournalError::TrailingBytes { len, need });
        }
        let body = &bytes[..need - 4];
        if crc.checksum(body).to_le_bytes() != bytes[need - 4..] {
            return Err(JournalError::Checksum);
        }
        let flags = bytes[5];
        let known = if header == HEADER {
            GIVEN_UP | LOST
        } else {
            GIVEN_UP
        };
        if flags & !known != 0 {
            return Err(JournalError::Inconsistent("unknown flags"));
        }
        let u64_at = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut epoch = [0; 4];
        epoch.copy_from_slice(&bytes[32..36]);
        let record = JournalRecord {
            session: u64_at(8),
            token: u64_at(16),
            incarnation: u64_at(24),
            epoch: u32::from_le_bytes(epoch),
            cumulative: u64_at(40),
            top: u64_at(48),
            announced: u64_at(56),
            given_up_from: (flags & GIVEN_UP != 0).then(|| u64_at(64)),
            lost_from: (flags & LOST != 0).then(|| u64_at(72)),
            bitmap: &bytes[header..need - 4],
        };
        record.check()?;
        Ok(record)
    }

    fn check(&self) -> Result<(), JournalError> {
        let span = self.top.checked_sub(self.cumulative);
        let Some(span) = span else {
            return Err(JournalError::Inconsistent("top below the cumulative point"));
        };
        if self.top > SN_MAX + 1 || self.announced > SN_MAX + 1 {
            return Err(JournalError::Inconsistent("sn past the wire's range"));
        }
        if self.lost_from.is_some_and(|l| l > self.cumulative) {
            return Err(JournalError::Inconsistent(
                "lost state past the cumulative point",
            ));
        }
        if span.div_ceil(64) != self.words() as u64 {
            return Err(JournalError::Inconsistent("bitmap length and span differ"));
        }
        // Below `top` the bitmap says; at and past it nothing arrived.
        if self.words() > 0 {
            let last = self.word(self.words() - 1);
            let used = span - 64 * (self.words() as u64 - 1);
            if used < 64 && last >> used != 0 {
                return Err(JournalError::Inconsistent("bits set at or past top"));
            }
            if self.word(0) & 1 != 0 {
                return Err(JournalError::Inconsistent("the cumulative point received"));
            }
        }
        Ok(())
    }

    /// Words of the received bitmap.
    pub fn words(&self) -> usize {
        self.bitmap.len() / 8
    }

    fn word(&self, i: usize) -> u64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.bitmap[8 * i..8 * i + 8]);
        u64::from_le_bytes(b)
    }

    /// Whether sn `cumulative + i` (below `top`) was delivered.
    pub fn received(&self, sn: u64) -> bool {
        if sn < self.cumulative {
            return true;
        }
        if sn >= self.top {
            return false;
        }
        let i = sn - self.cumulative;
        self.word((i / 64) as usize) >> (i % 64) & 1 == 1
    }

    /// Sns in `[cumulative, top)` not delivered: the open holes.
    pub fn missing(&self) -> u64 {
        let received: u64 = (0..self.words())
            .map(|i| u64::from(self.word(i).count_ones()))
            .sum();
        self.top - self.cumulative - received
    }
}

/// Writes a record into `out` (at least [`JOURNAL_FIXED`] + 8 × the
/// bitmap's words long); returns its length. `holes` are the open holes,
/// each within `[cumulative, top)`.
pub(super) fn encode(
    r: &JournalRecord<'_>,
    holes: impl Iterator<Item = Range<u64>>,
    out: &mut [u8],
    crc: &Crc32c,
) -> usize {
    let span = r.top - r.cumulative;
    let words = span.div_ceil(64) as usize;
    let len = JOURNAL_FIXED + 8 * words;
    let out = &mut out[..len];
    out[0..4].copy_from_slice(&JOURNAL_MAGIC);
    out[4] = JOURNAL_VERSION;
    out[5] = if r.given_up_from.is_some() {
        GIVEN_UP
    } else {
        0
    } | if r.lost_from.is_some() { LOST } else { 0 };
    out[6..8].copy_from_slice(&(words as u16).to_le_bytes());
    out[8..16].copy_from_slice(&r.session.to_le_bytes());
    out[16..24].copy_from_slice(&r.token.to_le_bytes());
    out[24..32].copy_from_slice(&r.incarnation.to_le_bytes());
    out[32..36].copy_from_slice(&r.epoch.to_le_bytes());
    out[36..40].fill(0);
    out[40..48].copy_from_slice(&r.cumulative.to_le_bytes());
    out[48..56].copy_from_slice(&r.top.to_le_bytes());
    out[56..64].copy_from_slice(&r.announced.to_le_bytes());
    out[64..72].copy_from_slice(&r.given_up_from.unwrap_or(0).to_le_bytes());
    out[72..80].copy_from_slice(&r.lost_from.unwrap_or(0).to_le_bytes());
    let bitmap = &mut out[HEADER..len - 4];
    // Everything below top received, then each hole cleared.
    for (w, chunk) in bitmap.chunks_exact_mut(8).enumerate() {
        let used = span - 64 * w as u64;
        let word = if used >= 64 { !0 } else { (1u64 << used) - 1 };
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    for hole in holes {
        for i in hole.start - r.cumulative..hole.end - r.cumulative {
            bitmap[(i / 8) as usize] &= !(1 << (i % 8));
        }
    }
    let sum = crc.checksum(&out[..len - 4]);
    out[len - 4..].copy_from_slice(&sum.to_le_bytes());
    len
}

/// The sessions changed since the journal last took them.
#[derive(Debug)]
pub(super) struct Dirty<const N: usize> {
    ids: heapless::Vec<u64, N>,
    /// `ids` overflowed: the next journal round takes every session.
    all: bool,
}

impl<const N: usize> Dirty<N> {
    pub(super) const fn new() -> Self {
        Dirty {
            ids: heapless::Vec::new(),
            all: false,
        }
    }

    /// Lists session `id` unless its own `mark` says it is listed.
    #[inline]
    pub(super) fn mark(&mut self, id: u64, mark: &mut bool) {
        if *mark {
            return;
        }
        *mark = true;
        if self.ids.push(id).is_err() {
            self.all = true;
        }
    }

    pub(super) fn clear(&mut self) {
        self.ids.clear();
        self.all = false;
    }
}

/// A record over no bitmap yet: the fields to [`encode`].
pub(super) fn header(
    session: u64,
    token: u64,
    incarnation: u64,
    epoch: u32,
    span: (u64, u64),
    announced: u64,
    (given_up_from, lost_from): (Option<u64>, Option<u64>),
) -> JournalRecord<'static> {
    JournalRecord {
        session,
        token,
        incarnation,
        epoch,
        cumulative: span.0,
        top: span.1,
        announced,
        given_up_from,
        lost_from,
        bitmap: &[],
    }
}

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    /// Marks session `id` for the next journal round (journal on only).
    pub(super) fn mark_dirty(&mut self, id: u64) {
        if !self.config.journal {
            return;
        }
        // A tombstone has no mark of its own: it is listed each time.
        let mut buried = false;
        let mark = self
            .sessions
            .get_mut(&id)
            .map_or(&mut buried, |s| &mut s.dirty);
        self.dirty.mark(id, mark);
    }

    /// Whether sessions changed since the journal last took them.
    pub fn journal_pending(&self) -> bool {
        self.dirty.all || !self.dirty.ids.is_empty()
    }

    /// Hands the journal record of every session changed since the last
    /// call to `keep` (with [`ServerConfig::journal`](super::ServerConfig::journal) on; nothing
    /// otherwise). The [`Server`](crate::transport::Server) driver calls
    /// it, passing each record to [`ServerHandler::journal`], right before
    /// [`ServerHandler::flush`]; a bare `ServerCore` user does the same
    /// before taking its transmits.
    pub fn drain_journal(&mut self, mut keep: impl FnMut(&[u8])) {
        if !self.journal_pending() {
            return;
        }
        if self.dirty.all {
            self.dirty.clear();
            for s in self.sessions.values_mut() {
                s.dirty = false;
            }
            return self.journal_all(keep);
        }
        let mut buf = [0u8; JOURNAL_MAX_RECORD];
        while let Some(id) = self.dirty.ids.pop() {
            if let Some(n) = self.encode_session(id, &mut buf) {
                keep(&buf[..n]);
            }
            if let Some(s) = self.sessions.get_mut(&id) {
                s.dirty = false;
            }
        }
    }

    /// Hands `keep` a journal record of every session and tombstone this
    /// instance holds: a snapshot that replaces every record before it
    /// (for compacting a journal).
    pub fn journal_all(&self, mut keep: impl FnMut(&[u8])) {
        let mut buf = [0u8; JOURNAL_MAX_RECORD];
        for &id in self.sessions.keys().chain(self.tombs.keys()) {
            if let Some(n) = self.encode_session(id, &mut buf) {
                keep(&buf[..n]);
            }
        }
    }

    /// A tombstone about to be forgotten goes to the journal at once.
    pub(super) fn journal_tomb(&self, id: u64, sink: &mut impl ServerHandler) {
        if !self.config.journal {
            return;
        }
        let mut buf = [0u8; JOURNAL_MAX_RECORD];
        if let Some(n) = self.encode_session(id, &mut buf) {
            sink.journal(&buf[..n]);
        }
    }

    /// Session `id`'s record, from the table or its tombstone.
    fn encode_session(&self, id: u64, buf: &mut [u8; JOURNAL_MAX_RECORD]) -> Option<usize> {
        const {
            assert!(
                WORDS - 1 <= JOURNAL_MAX_WORDS,
                "the journal holds windows up to 65,536 sns"
            )
        };
        let crc = &self.config.crc;
        if let Some(s) = self.sessions.get(&id) {
            let (cum, top) = (s.tracker.cumulative(), s.tracker.top());
            let r = header(
                id,
                s.token,
                s.incarnation,
                s.epoch,
                (cum, top),
                s.hello_next.max(top),
                (s.given_up_from, s.lost_from),
            );
            return Some(encode(&r, s.tracker.holes(), buf, crc));
        }
        let t = self.tombs.get(&id)?;
        let r = header(
            id,
            t.token,
            t.incarnation,
            t.epoch,
            (t.cum, t.cum),
            t.hello_next.max(t.cum),
            (t.given_up_from, t.lost_from),
        );
        Some(encode(&r, core::iter::empty(), buf, crc))
    }

    /// Takes back one journal record before this instance serves: the
    /// session is known again, with its token, epoch, incarnation, every
    /// sn it delivered and its open holes. Returns the session id.
    ///
    /// A record replaces whatever this instance held of its session, so
    /// give every session's *latest* record (a journal read in the order it
    /// was written and reduced to the last record of each session; the
    /// whole journal in order also works, each later record replacing the
    /// earlier). Room is made as a running server makes it: a session
    /// without open holes becomes a tombstone, and when the tombstones are
    /// full the oldest is forgotten (its record is in the journal already:
    /// [`ServerHandler::recall`] gives it back when its client comes); a
    /// session with holes takes a place in the table, evicting an idle one
    /// without holes to a tombstone if it must. So the restored instance
    /// answers every session's `Hello` as the one that wrote the records
    /// would have.
    ///
    /// # Errors
    ///
    /// The record is torn, changed, inconsistent or wider than this
    /// server's window (nothing changed then), or it has open holes and
    /// every place in the table holds a session with open holes
    /// ([`JournalError::TableFull`]: a table smaller than the one that
    /// wrote the journal). Then whatever this instance held of the session
    /// is dropped too, so that no older state of it stays: its `Hello`
    /// asks [`ServerHandler::recall`] again, and is refused
    /// (`SessionTableFull`) while there is no room.
    pub fn restore(&mut self, now: Instant, record: &[u8]) -> Result<u64, JournalError> {
        let id = self.take_back(now, record, &mut Restoring)?;
        self.stats.restored += 1;
        Ok(id)
    }

    /// Puts the session of `record` in the table or the tombstones,
    /// replacing what this instance held of it; room is made as for a
    /// `Hello` (evictions and forgotten tombstones go to `sink`).
    pub(super) fn take_back(
        &mut self,
        now: Instant,
        record: &[u8],
        sink: &mut impl ServerHandler,
    ) -> Result<u64, JournalError> {
        let r = JournalRecord::decode(record, &self.config.crc)?;
        let capacity = WORDS - 1;
        if r.words() > capacity || r.top - r.cumulative > Self::WINDOW {
            let words = r.words();
            return Err(JournalError::TooWide { words, capacity });
        }
        let Ok(mut tracker) = RecvTracker::<WORDS>::try_new(r.cumulative) else {
            return Err(JournalError::Inconsistent(
                "cumulative point past the wire's range",
            ));
        };
        for sn in r.cumulative..r.top {
            if r.received(sn) {
                tracker.commit(sn, |_| {});
            }
        }
        if tracker.top() < r.top && tracker.open_holes_to(r.top).is_err() {
            return Err(JournalError::Inconsistent("holes past the window"));
        }
        let id = r.session;
        // The record replaces what was held: an older state never stays.
        let conn = self.sessions.remove(&id).and_then(|s| s.conn);
        self.tombs.remove(&id);
        if tracker.missing() == 0 && conn.is_none() {
            let tomb = Tomb {
                epoch: r.epoch,
                token: r.token,
                incarnation: r.incarnation,
                cum: r.cumulative,
                given_up_from: r.given_up_from,
                conn_seq: 0,
                hello_next: r.announced,
                lost_from: r.lost_from,
                at: now,
            };
            self.entomb(id, tomb, sink);
            return Ok(id);
        }
        if self.sessions.len() >= self.max_sessions() && !self.evict_one(sink) {
            return Err(JournalError::TableFull { session: id });
        }
        let session = Session {
            epoch: r.epoch,
            token: r.token,
            incarnation: r.incarnation,
            window: self.window(),
            conn,
            tracker,
            stream_unacked: 0,
            ack_due: None,
            last_active: now,
            delivered: 0,
            conn_seq: 0,
            hello_next: r.announced,
            given_up_from: r.given_up_from,
            lost_from: r.lost_from,
            dirty: false,
        };
        // Room was made above, so this cannot fail.
        let _ = self.sessions.insert(id, session);
        Ok(id)
    }

    /// A `Hello` names session `id`, which this instance does not hold:
    /// with the journal on, the application's journal may (a session
    /// forgotten to make room, or not restored for want of it). Its record
    /// is taken back, so the `Hello` finds the session where the journal
    /// left it. `Err` carries the refusal for the `Hello`: no room for a
    /// session with holes, or a record that does not read.
    pub(super) fn recall(
        &mut self,
        now: Instant,
        id: u64,
        sink: &mut impl ServerHandler,
    ) -> Result<(), (RejectReason, u64)> {
        if !self.config.journal || self.sessions.contains_key(&id) || self.tombs.contains_key(&id) {
            return Ok(());
        }
        let mut buf = [0u8; JOURNAL_MAX_RECORD];
        let Some(n) = sink.recall(id, &mut buf) else {
            return Ok(());
        };
        let taken = match buf.get(..n) {
            Some(record) => match JournalRecord::decode(record, &self.config.crc) {
                Ok(r) if r.session != id => Err(JournalError::Inconsistent(
                    "recalled record of another session",
                )),
                Ok(_) => self.take_back(now, record, sink),
                Err(e) => Err(e),
            },
            None => Err(JournalError::Truncated {
                len: buf.len(),
                need: n,
            }),
        };
        match taken {
            Ok(_) => {
                self.stats.recalled += 1;
                Ok(())
            }
            Err(JournalError::TableFull { .. }) => {
                Err((RejectReason::SessionTableFull, self.max_sessions() as u64))
            }
            Err(error) => {
                sink.event(ServerEvent::RecallRefused { session: id, error });
                Err((RejectReason::BadHandshake, 0))
            }
        }
    }
}

/// The handler a restore runs with: nothing it does reaches the
/// application (a tombstone forgotten to make room is in the
/// application's journal already).
struct Restoring;

impl ServerHandler for Restoring {
    fn deliver(&mut self, _: Delivery<'_>) {}
    fn respond(&mut self, _: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
}
