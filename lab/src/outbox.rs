//! `iomsg client --outbox DIR`: what a client keeps so that a new process
//! goes on with its session after a crash, every message it submitted
//! delivered once.
//!
//! `DIR/outbox` is a sequence of entries, each a frame (magic `IOOB`,
//! `u32` length, `u32` CRC32C of the body, the body; see
//! [`crate::durable`]). The body's first byte says what it is, the
//! rest (little-endian):
//!
//! | kind | body |
//! |---|---|
//! | 1 identity | session id `u64`, token `u64` |
//! | 2 point | base sn `u64`, epoch reservation `u32`, flags `u8` (bit 0 instance, bit 1 incarnation), instance `u64`, incarnation `u64` |
//! | 3 message | sn `u64`, op `u8` (0 write, 1 stream write, 2 read), read length `u32`, the bytes (a write's data, a read's request) |
//! | 4 released | base sn `u64`: every message below it is done |
//! | 5 answered | sn `u64`: the read's answer was handed over |
//! | 6 finished | (nothing): the session closed, everything acknowledged |
//!
//! A message is appended before the poll that could send it and before
//! the client's audit record of it; releases, answers and points after
//! the poll. A read whose answer was handed over stays held until an
//! older message is released (the session's base is its oldest unreleased
//! message); a client started again on the outbox sends it again with the
//! rest and does not hand its answer over a second time. An answer
//! handed over after the last write before a crash is handed over again.
//! A session that finished (closed with everything acknowledged) is not
//! resumed: the next run starts a new one in the same directory.
//! The epoch kept is a reservation 4,096 above the session's epoch,
//! renewed when the epoch comes within 2,048 of it, so that a restarted
//! client's epochs are above every one its predecessor used without a
//! write before each connection attempt. The first entry is the identity.
//!
//! At start a torn tail is cut (its bytes kept in `DIR/outbox.torn-OFFSET`)
//! and a damaged outbox refused and left as it is (see [`crate::durable`]),
//! never replaced by a new session. The directory itself is locked
//! (`flock`) while the client runs.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iomsg_core::session::{Message, RequestOp, ResumePoint, SubmitError};

use crate::durable::{
    self, frame, next_frame, u32_at, u64_at, Damage, DirLock, ReadError, SyncPolicy, Syncer, Torn,
};

/// The first bytes of every outbox entry.
pub const OUTBOX_MAGIC: [u8; 4] = *b"IOOB";
/// How far above the session's epoch the kept reservation is set.
pub const EPOCH_RESERVE: u32 = 4096;
/// The reservation is renewed when the epoch comes this close.
pub const RENEW_WITHIN: u32 = 2048;

const IDENTITY: u8 = 1;
const POINT: u8 = 2;
const MESSAGE: u8 = 3;
const RELEASED: u8 = 4;
const ANSWERED: u8 = 5;
const FINISHED: u8 = 6;

/// What `--outbox DIR` asks of a client.
#[derive(Clone, Debug)]
pub struct OutboxJob {
    /// The outbox's directory.
    pub dir: PathBuf,
    /// When to sync.
    pub sync: SyncPolicy,
    /// Compact past this many bytes ([`durable::COMPACT_OVER`] unless a
    /// test lowers it).
    pub compact_over: u64,
}

impl OutboxJob {
    /// The outbox of the session to server `addr`, one of `servers`:
    /// with one server `dir` itself, with several a directory of its own
    /// in it, named after the server (`DIR/server-127.0.0.1-13337`).
    ///
    /// # Errors
    ///
    /// Several servers, and `dir` holds a one-server outbox: its session
    /// belongs to one server, and which is not known.
    pub fn for_server(
        &self,
        servers: usize,
        place: &crate::transport::Place,
    ) -> Result<OutboxJob, String> {
        if servers <= 1 {
            return Ok(self.clone());
        }
        if self.dir.join("outbox").exists() {
            return Err(format!(
                "{} holds the outbox of a client of one server ({}): with several servers each \
                 session keeps an outbox of its own in a directory named after its server; give \
                 another directory, or run again with that one server",
                self.dir.display(),
                self.dir.join("outbox").display()
            ));
        }
        let name = match place {
            crate::transport::Place::Ucx(addr)
            | crate::transport::Place::Stream(iomsg_stream::Addr::Tcp(addr)) => {
                format!("server-{}-{}", addr.ip(), addr.port()).replace(':', "_")
            }
            crate::transport::Place::Stream(iomsg_stream::Addr::Unix(path)) => {
                format!("server-unix-{}", path.display()).replace(['/', ':'], "_")
            }
        };
        Ok(OutboxJob {
            dir: self.dir.join(name),
            ..self.clone()
        })
    }
}

/// Where the session stands, as kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Point {
    /// Every message below it is released.
    pub base: u64,
    /// No epoch above it was used.
    pub reservation: u32,
    /// The server instance of the last `Welcome`.
    pub instance: Option<u64>,
    /// The server record trusted.
    pub incarnation: Option<u64>,
}

/// A message kept until it is released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its kind.
    pub op: RequestOp,
    /// A read's length (0 otherwise).
    pub read_len: u32,
    /// A write's data or a read's request.
    pub bytes: Vec<u8>,
}

impl StoredMessage {
    /// The message to submit again.
    pub fn message(&self) -> Message<'_> {
        match self.op {
            RequestOp::Write => Message::Write(&self.bytes),
            RequestOp::StreamWrite => Message::StreamWrite(&self.bytes),
            RequestOp::Read => Message::Read {
                len: self.read_len,
                request: &self.bytes,
            },
        }
    }
}

/// What an outbox held when it was opened.
#[derive(Clone, Debug, Default)]
pub struct Stored {
    /// The session id and token, once written.
    pub identity: Option<(u64, u64)>,
    /// The latest point.
    pub point: Point,
    /// The messages not released, by sn.
    pub messages: BTreeMap<u64, StoredMessage>,
    /// The reads among them whose answer was handed over.
    pub answered: std::collections::BTreeSet<u64>,
    /// The session finished in an earlier run: it is not resumed.
    pub finished: bool,
    /// Good entries read.
    pub entries: u64,
    /// Bytes of a torn tail cut off (those of [`torn`](Self::torn)).
    pub dropped: u64,
    /// The torn tail cut off, and where its bytes were kept.
    pub torn: Option<Torn>,
}

impl Stored {
    /// The point to resume the session from.
    pub fn resume_point(&self) -> ResumePoint {
        let p = ResumePoint::new(self.point.base, self.point.reservation);
        match (self.point.instance, self.point.incarnation) {
            (Some(i), Some(n)) => p.trusting(i, n),
            _ => p,
        }
    }

    /// Takes one entry's body; false when it is malformed.
    fn apply(&mut self, body: &[u8]) -> bool {
        let Some((&kind, rest)) = body.split_first() else {
            return false;
        };
        let ok = match kind {
            IDENTITY if rest.len() == 16 => {
                self.identity = u64_at(rest, 0).zip(u64_at(rest, 8));
                true
            }
            POINT => decode_point(rest).is_some_and(|p| {
                self.release(p.base);
                self.point.reservation = self.point.reservation.max(p.reservation);
                self.point.instance = p.instance;
                self.point.incarnation = p.incarnation;
                true
            }),
            MESSAGE if rest.len() >= 13 => match (u64_at(rest, 0), op_of(rest[8]), u32_at(rest, 9))
            {
                (Some(sn), Some(op), Some(read_len)) => {
                    let bytes = rest[13..].to_vec();
                    let m = StoredMessage {
                        op,
                        read_len,
                        bytes,
                    };
                    if sn >= self.point.base {
                        self.messages.insert(sn, m);
                    }
                    true
                }
                _ => false,
            },
            RELEASED if rest.len() == 8 => u64_at(rest, 0).is_some_and(|b| {
                self.release(b);
                true
            }),
            ANSWERED if rest.len() == 8 => u64_at(rest, 0).is_some_and(|sn| {
                if self
                    .messages
                    .get(&sn)
                    .is_some_and(|m| m.op == RequestOp::Read)
                {
                    self.answered.insert(sn);
                }
                true
            }),
            FINISHED if rest.is_empty() => {
                self.finished = true;
                true
            }
            _ => false,
        };
        self.entries += u64::from(ok);
        ok
    }

    /// Submits the messages kept again through `submit`, in sn order:
    /// each must get its old sn. `each` is told every sn and the bytes its
    /// audit record hashes (a write's data; nothing for a read).
    ///
    /// # Errors
    ///
    /// A message was refused, or given another sn (the outbox is not this
    /// session's).
    pub fn resubmit(
        &self,
        mut submit: impl FnMut(Message<'_>) -> Result<u64, SubmitError>,
        mut each: impl FnMut(u64, &[u8]),
    ) -> Result<(), String> {
        for (&sn, m) in &self.messages {
            let got = submit(m.message()).map_err(|e| {
                format!(
                    "cannot submit the outbox's sn {sn} again: {e} (were --data-size or \
                     --conn-window lowered since it was written?)"
                )
            })?;
            if got != sn {
                return Err(format!(
                    "the outbox's message sn {sn} was given sn {got}: the outbox does not hold \
                     this session's messages in order"
                ));
            }
            each(
                sn,
                if m.op == RequestOp::Read {
                    &[]
                } else {
                    &m.bytes
                },
            );
        }
        Ok(())
    }

    /// The status line of a session resumed from `path`.
    pub fn describe(&self, path: &Path, session: u64) -> String {
        format!(
            "outbox {}: resumed session {session:016x} (its id and token, not new ones) at sn {} \
             with {} messages, epochs above {}; {} entries read, {}",
            path.display(),
            self.point.base,
            self.messages.len(),
            self.point.reservation,
            self.entries,
            self.torn
                .as_ref()
                .map_or_else(|| "no torn tail".to_string(), Torn::to_string)
        )
    }

    fn release(&mut self, base: u64) {
        if base > self.point.base {
            self.point.base = base;
            self.messages = self.messages.split_off(&base);
            self.answered = self.answered.split_off(&base);
        }
    }

    /// Whether there is a session to resume: an identity, and not
    /// finished.
    pub fn resumes(&self) -> bool {
        self.identity.is_some() && !self.finished
    }
}

fn op_of(b: u8) -> Option<RequestOp> {
    match b {
        0 => Some(RequestOp::Write),
        1 => Some(RequestOp::StreamWrite),
        2 => Some(RequestOp::Read),
        _ => None,
    }
}

fn op_byte(op: RequestOp) -> u8 {
    match op {
        RequestOp::Write => 0,
        RequestOp::StreamWrite => 1,
        RequestOp::Read => 2,
    }
}

fn decode_point(b: &[u8]) -> Option<Point> {
    if b.len() != 29 {
        return None;
    }
    let flags = b[12];
    Some(Point {
        base: u64_at(b, 0)?,
        reservation: u32_at(b, 8)?,
        instance: (flags & 1 != 0).then_some(u64_at(b, 13)?),
        incarnation: (flags & 2 != 0).then_some(u64_at(b, 21)?),
    })
}

fn encode_point(p: &Point, out: &mut Vec<u8>) {
    let mut body = vec![POINT];
    body.extend_from_slice(&p.base.to_le_bytes());
    body.extend_from_slice(&p.reservation.to_le_bytes());
    let flags = u8::from(p.instance.is_some()) | (u8::from(p.incarnation.is_some()) << 1);
    body.push(flags);
    body.extend_from_slice(&p.instance.unwrap_or(0).to_le_bytes());
    body.extend_from_slice(&p.incarnation.unwrap_or(0).to_le_bytes());
    frame(OUTBOX_MAGIC, &body, out);
}

fn encode_identity(session: u64, token: u64, out: &mut Vec<u8>) {
    let mut body = vec![IDENTITY];
    body.extend_from_slice(&session.to_le_bytes());
    body.extend_from_slice(&token.to_le_bytes());
    frame(OUTBOX_MAGIC, &body, out);
}

fn encode_message(sn: u64, m: &StoredMessageRef<'_>, out: &mut Vec<u8>) {
    let mut body = Vec::with_capacity(14 + m.bytes.len());
    body.push(MESSAGE);
    body.extend_from_slice(&sn.to_le_bytes());
    body.push(op_byte(m.op));
    body.extend_from_slice(&m.read_len.to_le_bytes());
    body.extend_from_slice(m.bytes);
    frame(OUTBOX_MAGIC, &body, out);
}

fn encode_released(base: u64, out: &mut Vec<u8>) {
    let mut body = vec![RELEASED];
    body.extend_from_slice(&base.to_le_bytes());
    frame(OUTBOX_MAGIC, &body, out);
}

fn encode_answered(sn: u64, out: &mut Vec<u8>) {
    let mut body = vec![ANSWERED];
    body.extend_from_slice(&sn.to_le_bytes());
    frame(OUTBOX_MAGIC, &body, out);
}

/// A message as submitted, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct StoredMessageRef<'a> {
    /// Its kind.
    pub op: RequestOp,
    /// A read's length (0 otherwise).
    pub read_len: u32,
    /// A write's data or a read's request.
    pub bytes: &'a [u8],
}

impl<'a> StoredMessageRef<'a> {
    /// The kept form of `msg`.
    pub fn of(msg: &Message<'a>) -> StoredMessageRef<'a> {
        match *msg {
            Message::Write(b) => StoredMessageRef {
                op: RequestOp::Write,
                read_len: 0,
                bytes: b,
            },
            Message::StreamWrite(b) => StoredMessageRef {
                op: RequestOp::StreamWrite,
                read_len: 0,
                bytes: b,
            },
            Message::Read { len, request } => StoredMessageRef {
                op: RequestOp::Read,
                read_len: len,
                bytes: request,
            },
        }
    }
}

/// A client's outbox, open and locked (see the module's docs).
#[derive(Debug)]
pub struct Outbox {
    path: PathBuf,
    file: File,
    len: u64,
    _lock: DirLock,
    sync: Syncer,
    compact_over: u64,
    /// Entries not yet written.
    pending: Vec<u8>,
    identity: Option<(u64, u64)>,
    point: Point,
}

impl Outbox {
    /// Locks `job.dir`, reads `dir/outbox` (cutting a torn tail, its
    /// bytes kept beside it) and returns it with what it held.
    ///
    /// # Errors
    ///
    /// Another client holds the directory; the outbox is damaged, its
    /// identity included (the error names it, the offset and what to do;
    /// nothing was changed); or a file cannot be read, made or cut (the
    /// error names it).
    pub fn open(job: &OutboxJob) -> Result<(Outbox, Stored), String> {
        let lock = durable::lock_dir(&job.dir, "outbox directory")?;
        let path = job.dir.join("outbox");
        let mut file = durable::open_append(&path)?;
        let mut stored = Stored::default();
        let frames = durable::read_frames(&mut file, &path, job.sync, OUTBOX_MAGIC, |b| {
            let kind = b.first().copied().unwrap_or(0);
            if stored.entries == 0 && kind != IDENTITY {
                return Err(format!(
                    "the first entry is of kind {kind}, not the identity"
                ));
            }
            match stored.apply(b) {
                true => Ok(()),
                false => Err(format!("its body is not an outbox entry (kind {kind})")),
            }
        })
        .map_err(|e| match e {
            ReadError::Io(e) => e,
            ReadError::Damaged(d) => refusal(&d),
        })?;
        let _ = std::fs::remove_file(path.with_extension("tmp"));
        let bytes = frames.bytes;
        stored.dropped = frames.torn.as_ref().map_or(0, |t| t.len);
        stored.torn = frames.torn;
        let outbox = Outbox {
            path,
            file,
            len: bytes.len() as u64,
            _lock: lock,
            sync: Syncer::new(job.sync),
            compact_over: job.compact_over,
            pending: Vec::new(),
            identity: stored.identity,
            point: stored.point,
        };
        Ok((outbox, stored))
    }

    /// The outbox file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.pending.is_empty()
    }

    /// Keeps the session's id and token (first, for a new session).
    pub fn identity(&mut self, session: u64, token: u64) {
        self.identity = Some((session, token));
        encode_identity(session, token, &mut self.pending);
    }

    /// Keeps a submitted message (written by the next [`write`](Self::write)).
    pub fn message(&mut self, sn: u64, msg: &Message<'_>) {
        encode_message(sn, &StoredMessageRef::of(msg), &mut self.pending);
    }

    /// Keeps that read `sn`'s answer was handed over.
    pub fn answered(&mut self, sn: u64) {
        encode_answered(sn, &mut self.pending);
    }

    /// The session closed with everything acknowledged: kept (and synced
    /// unless the policy is none), so that the next run starts a new
    /// session instead of resuming this one.
    ///
    /// # Errors
    ///
    /// The write or sync failed; the error names the file.
    pub fn finished(&mut self) -> Result<(), String> {
        frame(OUTBOX_MAGIC, &[FINISHED], &mut self.pending);
        self.write()?;
        if self.sync.policy() != SyncPolicy::None {
            durable::sync_file(&self.file, &self.path)?;
        }
        Ok(())
    }

    /// Starts the outbox over for a new session (the one it held
    /// finished): its file replaced by the new identity alone.
    ///
    /// # Errors
    ///
    /// The file could not be replaced; the error names it.
    pub fn start_over(&mut self, session: u64, token: u64) -> Result<(), String> {
        let mut out = Vec::new();
        encode_identity(session, token, &mut out);
        self.file = durable::replace(&self.path, &out, self.sync.policy())?;
        self.len = out.len() as u64;
        self.pending.clear();
        self.identity = Some((session, token));
        self.point = Point::default();
        self.sync.synced();
        Ok(())
    }

    /// Keeps what changed in the session's point: released messages, the
    /// server record trusted, a new epoch reservation when the epoch comes
    /// within [`RENEW_WITHIN`] of the last.
    pub fn note(&mut self, p: ResumePoint) {
        if p.base_sn > self.point.base {
            self.point.base = p.base_sn;
            encode_released(p.base_sn, &mut self.pending);
        }
        let renew = p.epoch.saturating_add(RENEW_WITHIN) > self.point.reservation;
        if renew || p.instance != self.point.instance || p.incarnation != self.point.incarnation {
            if renew {
                self.point.reservation = p.epoch.saturating_add(EPOCH_RESERVE);
            }
            self.point.instance = p.instance;
            self.point.incarnation = p.incarnation;
            encode_point(&self.point, &mut self.pending);
        }
    }

    /// The epoch reservation kept.
    pub fn reservation(&self) -> u32 {
        self.point.reservation
    }

    /// Writes what was kept since the last call in one `write(2)`, synced
    /// as the policy says.
    ///
    /// # Errors
    ///
    /// The write or sync failed; the error names the file.
    pub fn write(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(&self.pending)
            .map_err(|e| format!("cannot write the outbox {}: {e}", self.path.display()))?;
        self.len += self.pending.len() as u64;
        self.pending.clear();
        if self.sync.written() {
            self.sync_now()?;
        }
        Ok(())
    }

    /// Syncs what `--sync batch` left waiting once it is due.
    ///
    /// # Errors
    ///
    /// The sync failed; the error names the file.
    pub fn tick(&mut self) -> Result<(), String> {
        if self.sync.due() {
            self.sync_now()?;
        }
        Ok(())
    }

    /// How long until a waiting sync is due.
    pub fn sync_wait(&self) -> Option<Duration> {
        self.sync.wait()
    }

    /// Syncs the outbox (unless the policy is none).
    ///
    /// # Errors
    ///
    /// The sync failed; the error names the file.
    pub fn sync_now(&mut self) -> Result<(), String> {
        if self.sync.policy() != SyncPolicy::None {
            durable::sync_file(&self.file, &self.path)?;
            self.sync.synced();
        }
        Ok(())
    }

    /// Compacts the outbox once it grew past its threshold: the identity,
    /// the point and the messages not released, in a new file renamed over
    /// the old. Returns whether it did.
    ///
    /// # Errors
    ///
    /// A read, write, sync or rename failed; the error names the file.
    pub fn compact_if_large(&mut self) -> Result<bool, String> {
        if self.len <= self.compact_over {
            return Ok(false);
        }
        self.write()?;
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let mut stored = Stored::default();
        let mut at = 0;
        while let Some((body, next)) = next_frame(OUTBOX_MAGIC, &bytes, at) {
            if !stored.apply(body) {
                break;
            }
            at = next;
        }
        stored.release(self.point.base);
        let mut out = Vec::new();
        if let Some((session, token)) = self.identity {
            encode_identity(session, token, &mut out);
        }
        encode_point(&self.point, &mut out);
        for (&sn, m) in &stored.messages {
            let r = StoredMessageRef {
                op: m.op,
                read_len: m.read_len,
                bytes: &m.bytes,
            };
            encode_message(sn, &r, &mut out);
        }
        for &sn in &stored.answered {
            encode_answered(sn, &mut out);
        }
        self.file = durable::replace(&self.path, &out, self.sync.policy())?;
        self.len = out.len() as u64;
        self.sync.synced();
        Ok(true)
    }
}

/// The error of a damaged outbox: what is wrong, and what the operator
/// can do.
fn refusal(d: &Damage) -> String {
    let (path, at) = (d.path.display(), d.offset);
    format!(
        "the outbox {d} (each frame an entry; the first, the session's identity). The outbox \
         was left as it is and the client does not start: the messages it holds are still in \
         it, and can be read back from a copy of it. To start anyway, keep a copy of {path}, \
         then either move it away (the messages it holds are then never sent, and the client \
         starts a new session), or cut it at the damage with `truncate -s {at} {path}` (the \
         entries from offset {at} on are forgotten: messages among them are never sent, \
         messages they released may be sent again)"
    )
}

#[cfg(test)]
mod tests;
