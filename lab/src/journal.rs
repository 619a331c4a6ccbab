//! `iomsg server --journal DIR`: the server's journal, kept in step with
//! its audit records so that a restarted instance neither loses nor
//! repeats a delivery.
//!
//! `DIR/journal` is a sequence of batches, one per flush of the server,
//! each a frame (magic `IOJB`, length, CRC32C, payload: see
//! [`crate::durable`]). The payload: a `u32` length and the bytes of the path of the audit
//! records file of the instance that wrote it (empty without an audit), the
//! `u64` length of that file after the flush (the commit point: records
//! past it were never acknowledged), then the session records the core
//! handed over since the last batch, each a `u32` length and its bytes
//! (see `iomsg_core::session::JournalRecord`). Everything little-endian.
//!
//! At start the batches are read back: a torn tail is cut (its bytes kept
//! in `DIR/journal.torn-OFFSET`), a damaged journal refused and left as it
//! is (see [`crate::durable`]). A batch whose records file is shorter than
//! the commit point it names (a power cut took the records' last writes
//! and not the journal's) cannot be vouched for: the journal is cut back
//! to before it, its bytes kept in `DIR/journal.unvouched-OFFSET`, and the
//! clients whose acknowledged sns that forgets are told by the protocol
//! (`StateLost`). Then the latest record of each session is restored, in
//! the order written ([`index`]); the records file named by the last batch
//! is brought back to its commit point, what was past it kept aside
//! ([`roll_back`]); and a batch naming the new instance's records file is
//! appended. The directory itself is locked (`flock`) while the server
//! runs: one server per journal.
//!
//! The journal keeps the latest record of every session it ever held, not
//! only those the server's tables hold: compaction rewrites them all, and
//! a session the server forgot is read back from the file when its client
//! comes ([`Journal::recall`]). Memory: about 30 bytes per session held
//! ([`index`]), and the file is read whole at start.
//!
//! Under `--sync batch` the records and the journal are synced by a
//! thread of their own ([`crate::durable::background`]), so the serving
//! loop never waits for the disk.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::durable::background::Background;
use crate::durable::{
    cut_keeping, frame, lock_dir, next_frame, open_append, read_frames, replace, sync_file, u32_at,
    u64_at, Damage, DirLock, ReadError, SyncPolicy, Syncer, Torn,
};

pub mod index;
mod rollback;

use index::Index;
pub use rollback::{roll_back, uncommitted_file, Rollback, Unvouched};

/// The first bytes of every journal batch.
pub const BATCH_MAGIC: [u8; 4] = *b"IOJB";

/// One batch, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch<'a> {
    /// The audit records file it commits (empty: none).
    pub records_path: &'a [u8],
    /// The file's length after the flush.
    pub committed: u64,
    /// The session records, each length-prefixed.
    records: &'a [u8],
}

impl<'a> Batch<'a> {
    /// Reads a batch's payload; `None` when it is malformed.
    pub fn parse(payload: &'a [u8]) -> Option<Batch<'a>> {
        let n = u32_at(payload, 0)? as usize;
        let records_path = payload.get(4..4usize.checked_add(n)?)?;
        let committed = u64_at(payload, 4 + n)?;
        let records = &payload[12 + n..];
        let b = Batch {
            records_path,
            committed,
            records,
        };
        b.records_well_formed().then_some(b)
    }

    /// The session records, in the order they were handed over.
    pub fn records(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        index::records(self.records)
    }

    fn records_well_formed(&self) -> bool {
        let used: usize = self.records().map(|r| 4 + r.len()).sum();
        used == self.records.len()
    }

    /// Encodes a batch payload.
    pub fn encode(records_path: &[u8], committed: u64, records: &[u8], out: &mut Vec<u8>) {
        let mut payload = Vec::with_capacity(12 + records_path.len() + records.len());
        let n = u32::try_from(records_path.len()).unwrap_or(u32::MAX);
        payload.extend_from_slice(&n.to_le_bytes());
        payload.extend_from_slice(records_path);
        payload.extend_from_slice(&committed.to_le_bytes());
        payload.extend_from_slice(records);
        frame(BATCH_MAGIC, &payload, out);
    }
}

/// Appends one session record, length-prefixed, to `out`.
pub fn push_record(record: &[u8], out: &mut Vec<u8>) {
    let n = u32::try_from(record.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(record);
}

/// What a journal held when it was opened.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The good batches' bytes.
    pub bytes: Vec<u8>,
    /// Good batches.
    pub batches: u64,
    /// Bytes of a torn tail cut off (those of [`torn`](Self::torn)).
    pub dropped: u64,
    /// The torn tail cut off, and where its bytes were kept.
    pub torn: Option<Torn>,
    /// The last batch's records file and commit point.
    pub last_commit: Option<(PathBuf, u64)>,
    /// Batches cut off because their records were not there, and where
    /// their bytes were kept.
    pub unvouched: Option<(Unvouched, u64, PathBuf)>,
    /// Where the latest record of each session is in `bytes`, in the
    /// order written.
    latest: Vec<Range<usize>>,
}

impl Recovered {
    /// Every session record, in the order written.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut at = 0;
        core::iter::from_fn(move || {
            let (payload, next) = next_frame(BATCH_MAGIC, &self.bytes, at)?;
            at = next;
            Batch::parse(payload)
        })
        .flat_map(|b| b.records().collect::<Vec<_>>())
    }

    /// The latest record of each session, in the order written: what a
    /// new instance restores.
    pub fn latest(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.latest.iter().filter_map(|r| self.bytes.get(r.clone()))
    }
}

/// The server's journal, open and locked (see the module's docs).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    len: u64,
    _lock: DirLock,
    sync: Syncer,
    compact_over: u64,
    /// Session records handed over since the last batch.
    pending: Vec<u8>,
    /// This instance's records file, as batches name it.
    own: Vec<u8>,
    last_committed: Option<u64>,
    scratch: Vec<u8>,
    /// The latest record of each session in the file.
    index: Index,
    /// The length of the last compaction's file: the next one waits
    /// until the journal is twice that (or `compact_over`).
    compacted: u64,
    /// `--sync batch`: the thread that syncs the records and the journal.
    background: Option<Background>,
}

impl Journal {
    /// Locks `dir`, reads `dir/journal` (cutting a torn tail, its bytes
    /// kept beside it) and returns it with what it held.
    ///
    /// # Errors
    ///
    /// Another server holds the directory; the journal is damaged (the
    /// error names it, the offset and what to do; nothing was changed); or
    /// a file cannot be read, made or cut (the error names it).
    pub fn open(
        dir: &Path,
        policy: SyncPolicy,
        compact_over: u64,
    ) -> Result<(Journal, Recovered), String> {
        let lock = lock_dir(dir, "journal directory")?;
        let path = dir.join("journal");
        let mut file = open_append(&path)?;
        let mut rec = Recovered::default();
        let frames = read_frames(&mut file, &path, policy, BATCH_MAGIC, |payload| {
            let b = Batch::parse(payload).ok_or("its payload is not a batch")?;
            rec.batches += 1;
            let named = PathBuf::from(std::ffi::OsStr::from_bytes(b.records_path));
            rec.last_commit = Some((named, b.committed));
            Ok(())
        })
        .map_err(|e| match e {
            ReadError::Io(e) => e,
            ReadError::Damaged(d) => refusal(&d),
        })?;
        // A compaction cut short: the journal itself is whole.
        let _ = std::fs::remove_file(path.with_extension("tmp"));
        rec.bytes = frames.bytes;
        rec.dropped = frames.torn.as_ref().map_or(0, |t| t.len);
        rec.torn = frames.torn;
        if let Some(u) = rollback::first_unvouched(&rec.bytes)? {
            let at = u.offset as usize;
            let kept = cut_keeping(&file, &path, policy, (&rec.bytes, at), "unvouched")?;
            let cut = (rec.bytes.len() - at) as u64;
            rec.bytes.truncate(at);
            rec.batches = 0;
            rec.last_commit = None;
            let mut at = 0;
            while let Some((payload, next)) = next_frame(BATCH_MAGIC, &rec.bytes, at) {
                if let Some(b) = Batch::parse(payload) {
                    rec.batches += 1;
                    let named = PathBuf::from(std::ffi::OsStr::from_bytes(b.records_path));
                    rec.last_commit = Some((named, b.committed));
                }
                at = next;
            }
            rec.unvouched = Some((u, cut, kept));
        }
        let index = Index::of(&rec.bytes);
        rec.latest = index.latest_ranges(&rec.bytes);
        let journal = Journal {
            len: rec.bytes.len() as u64,
            path,
            file,
            _lock: lock,
            sync: Syncer::new(policy),
            compact_over,
            pending: Vec::new(),
            own: Vec::new(),
            last_committed: None,
            scratch: Vec::new(),
            index,
            compacted: 0,
            background: None,
        };
        Ok((journal, rec))
    }

    /// Sessions the journal holds a record of.
    pub fn sessions(&self) -> usize {
        self.index.len()
    }

    /// `--sync batch`: syncs the records file (`records`, when there is
    /// one) and the journal on a thread of its own from now on, instead of
    /// in [`commit`](Self::commit) and [`tick`](Self::tick).
    ///
    /// # Errors
    ///
    /// The journal could not be reopened or no thread started.
    pub fn sync_in_background(&mut self, records: Option<(File, PathBuf)>) -> Result<(), String> {
        if self.sync.policy() != SyncPolicy::Batch {
            return Ok(());
        }
        let journal = self
            .file
            .try_clone()
            .map_err(|e| format!("cannot reopen {}: {e}", self.path.display()))?;
        let mut files: Vec<(File, PathBuf)> = records.into_iter().collect();
        files.push((journal, self.path.clone()));
        self.background = Some(Background::start(files)?);
        Ok(())
    }

    /// The latest record of `session`, kept since the last batch or read
    /// back from the file (see
    /// [`ServerHandler::recall`](iomsg_core::session::ServerHandler::recall)).
    pub fn recall(&self, session: u64) -> Option<Vec<u8>> {
        if let Some(r) = index::pending_record(&self.pending, session) {
            return Some(r.to_vec());
        }
        self.index.read(&self.file, session)
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no batch.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Batches from now on commit `records` (this instance's audit records
    /// file, made absolute).
    ///
    /// # Errors
    ///
    /// The path cannot be made absolute.
    pub fn name(&mut self, records: &Path) -> Result<(), String> {
        let abs = std::path::absolute(records)
            .map_err(|e| format!("cannot make {} absolute: {e}", records.display()))?;
        self.own = abs.as_os_str().as_bytes().to_vec();
        Ok(())
    }

    /// Keeps one session record for the next batch.
    pub fn keep(&mut self, record: &[u8]) {
        push_record(record, &mut self.pending);
    }

    /// Appends a batch: the records kept since the last one and the commit
    /// point `committed` (the records file's length now), synced as the
    /// policy says (`sync_records` first). Nothing is written when nothing
    /// changed. Returns whether a batch was written.
    ///
    /// # Errors
    ///
    /// A write or sync failed; the error names the file.
    pub fn commit(
        &mut self,
        committed: u64,
        sync_records: impl Fn() -> Result<(), String>,
    ) -> Result<bool, String> {
        if self.pending.is_empty() && self.last_committed == Some(committed) {
            return Ok(false);
        }
        if self.sync.policy() == SyncPolicy::Always {
            sync_records()?;
        }
        if let Some(b) = &self.background {
            // A sync that failed: stop here, before more is acknowledged.
            b.check()?;
        }
        self.scratch.clear();
        Batch::encode(&self.own, committed, &self.pending, &mut self.scratch);
        self.file
            .write_all(&self.scratch)
            .map_err(|e| format!("cannot write the journal {}: {e}", self.path.display()))?;
        let at = index::records_at(self.len, self.own.len());
        self.index.add_records(at, index::records(&self.pending));
        self.len += self.scratch.len() as u64;
        self.pending.clear();
        self.last_committed = Some(committed);
        match &self.background {
            Some(b) => b.written(),
            None if self.sync.written() => self.sync_now(sync_records)?,
            None => {}
        }
        Ok(true)
    }

    /// Syncs what `--sync batch` left waiting once it is due.
    ///
    /// # Errors
    ///
    /// A sync failed; the error names the file.
    pub fn tick(&mut self, sync_records: impl Fn() -> Result<(), String>) -> Result<(), String> {
        if let Some(b) = &self.background {
            return b.check();
        }
        if self.sync.due() {
            self.sync_now(sync_records)?;
        }
        Ok(())
    }

    /// How long until a waiting sync is due (none when a thread syncs).
    pub fn sync_wait(&self) -> Option<Duration> {
        match self.background {
            Some(_) => None,
            None => self.sync.wait(),
        }
    }

    /// Syncs the records file, then the journal (unless the policy is
    /// none).
    ///
    /// # Errors
    ///
    /// A sync failed; the error names the file.
    pub fn sync_now(
        &mut self,
        sync_records: impl Fn() -> Result<(), String>,
    ) -> Result<(), String> {
        if let Some(b) = &self.background {
            return b.sync_now();
        }
        if self.sync.policy() == SyncPolicy::None {
            return Ok(());
        }
        sync_records()?;
        sync_file(&self.file, &self.path)?;
        self.sync.synced();
        Ok(())
    }

    /// Whether the journal grew past its compaction threshold:
    /// `compact_over`, or twice what the last compaction left (the
    /// records of every session it holds can outgrow the threshold).
    pub fn over_limit(&self) -> bool {
        self.len > self.compact_over.max(2 * self.compacted)
    }

    /// Replaces the journal by one batch at the commit point `committed`:
    /// the latest record of every session it holds (those the server's
    /// tables hold and those it forgot), in the order written. Call it
    /// right after a flush.
    ///
    /// # Errors
    ///
    /// A read, write, sync or rename failed; the error names the file.
    pub fn compact(
        &mut self,
        committed: u64,
        sync_records: impl Fn() -> Result<(), String>,
    ) -> Result<(), String> {
        if self.sync.policy() != SyncPolicy::None {
            sync_records()?;
        }
        // Through the open file: it is the journal, whatever its name.
        let mut old = vec![0u8; usize::try_from(self.len).unwrap_or(usize::MAX)];
        std::os::unix::fs::FileExt::read_exact_at(&self.file, &mut old, 0)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let mut records = Vec::new();
        for r in self.index.latest(&old) {
            push_record(r, &mut records);
        }
        // Records kept since the last batch come last: they are newer.
        records.extend_from_slice(&std::mem::take(&mut self.pending));
        self.scratch.clear();
        Batch::encode(&self.own, committed, &records, &mut self.scratch);
        self.file = replace(&self.path, &self.scratch, self.sync.policy())?;
        self.index = Index::of(&self.scratch);
        self.len = self.scratch.len() as u64;
        self.compacted = self.len;
        self.last_committed = Some(committed);
        self.sync.synced();
        if let Some(b) = &self.background {
            let file = self
                .file
                .try_clone()
                .map_err(|e| format!("cannot reopen {}: {e}", self.path.display()))?;
            // The journal is the last file the thread syncs.
            b.replace(usize::MAX, file);
        }
        Ok(())
    }
}

/// The error of a damaged journal: what is wrong, and what the operator
/// can do.
fn refusal(d: &Damage) -> String {
    let (path, at) = (d.path.display(), d.offset);
    format!(
        "the journal {d} (each frame a batch). The journal was left as it is and the server \
         does not start. To start anyway, keep a copy of {path}, then either move it away (the \
         sessions it held are then new to this server: their clients are told so and announce \
         the messages that may be delivered again), or cut it at the damage with \
         `truncate -s {at} {path}` (the batches from offset {at} on are forgotten, with the \
         same effect for the sessions they held)"
    )
}

/// What `--journal DIR` asks of a server.
#[derive(Clone, Debug)]
pub struct JournalJob {
    /// The journal's directory.
    pub dir: PathBuf,
    /// When to sync.
    pub sync: SyncPolicy,
    /// Compact past this many bytes ([`COMPACT_OVER`](crate::durable::COMPACT_OVER) unless a test
    /// lowers it).
    pub compact_over: u64,
}

#[cfg(test)]
mod tests;
