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
//! At start the batches are read up to the first torn or changed one (the
//! file is cut there), their records restored in order, the records file
//! named by the last batch cut back to its commit point, and a batch
//! naming the new instance's records file appended. `DIR/lock` is held
//! (`flock`) while the server runs: one server per journal.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::durable::{
    frame, lock_dir, next_frame, open_append, read_frames, replace, sync_file, u32_at, u64_at,
    DirLock, SyncPolicy, Syncer,
};

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
        let mut at = 0;
        let all = self.records;
        core::iter::from_fn(move || {
            let n = u32_at(all, at)? as usize;
            let r = all.get(at + 4..(at + 4).checked_add(n)?)?;
            at += 4 + n;
            Some(r)
        })
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
    /// Bytes of a torn or changed tail dropped.
    pub dropped: u64,
    /// The last batch's records file and commit point.
    pub last_commit: Option<(PathBuf, u64)>,
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
}

/// What was done to the records file the last batch names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollback {
    /// Nothing named, or the file is at its commit point.
    Nothing,
    /// Cut back from `from` to `to` bytes: deliveries never acknowledged.
    Cut {
        /// The file.
        path: PathBuf,
        /// Its length before.
        from: u64,
        /// Its length now, the commit point.
        to: u64,
    },
    /// Shorter than its commit point: records written but never synced
    /// were lost (a power cut with `--sync none` or `batch`).
    Short {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The commit point.
        committed: u64,
    },
}

/// Cuts the records file of `commit` back to its commit point (synced
/// unless `policy` is none): the deliveries past it were never
/// acknowledged, their clients send them again.
///
/// # Errors
///
/// The file cannot be read or cut; the error names it.
pub fn roll_back(commit: Option<&(PathBuf, u64)>, policy: SyncPolicy) -> Result<Rollback, String> {
    let Some((path, committed)) = commit else {
        return Ok(Rollback::Nothing);
    };
    let (path, committed) = (path.clone(), *committed);
    if path.as_os_str().is_empty() {
        return Ok(Rollback::Nothing);
    }
    let len = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if len < committed {
        return Ok(Rollback::Short {
            path,
            len,
            committed,
        });
    }
    if len == committed {
        return Ok(Rollback::Nothing);
    }
    let f = OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    f.set_len(committed).map_err(|e| {
        format!(
            "cannot roll {} back to {committed} bytes: {e}",
            path.display()
        )
    })?;
    if policy != SyncPolicy::None {
        sync_file(&f, &path)?;
    }
    Ok(Rollback::Cut {
        path,
        from: len,
        to: committed,
    })
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
}

impl Journal {
    /// Locks `dir`, reads `dir/journal` up to its first bad batch (cutting
    /// the file there) and returns it with what it held.
    ///
    /// # Errors
    ///
    /// Another server holds the directory, or a file cannot be read, made
    /// or cut; the error names it.
    pub fn open(
        dir: &Path,
        policy: SyncPolicy,
        compact_over: u64,
    ) -> Result<(Journal, Recovered), String> {
        let lock = lock_dir(dir, "journal directory")?;
        let path = dir.join("journal");
        // A compaction cut short: the journal itself is whole.
        let _ = std::fs::remove_file(path.with_extension("tmp"));
        let mut file = open_append(&path)?;
        let mut rec = Recovered::default();
        let (bytes, dropped) = read_frames(&mut file, &path, policy, BATCH_MAGIC, |payload| {
            let Some(b) = Batch::parse(payload) else {
                return false;
            };
            rec.batches += 1;
            let named = PathBuf::from(std::ffi::OsStr::from_bytes(b.records_path));
            rec.last_commit = Some((named, b.committed));
            true
        })?;
        rec.bytes = bytes;
        rec.dropped = dropped;
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
        };
        Ok((journal, rec))
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
        self.scratch.clear();
        Batch::encode(&self.own, committed, &self.pending, &mut self.scratch);
        self.file
            .write_all(&self.scratch)
            .map_err(|e| format!("cannot write the journal {}: {e}", self.path.display()))?;
        self.len += self.scratch.len() as u64;
        self.pending.clear();
        self.last_committed = Some(committed);
        if self.sync.written() {
            self.sync_now(sync_records)?;
        }
        Ok(true)
    }

    /// Syncs what `--sync batch` left waiting once it is due.
    ///
    /// # Errors
    ///
    /// A sync failed; the error names the file.
    pub fn tick(&mut self, sync_records: impl Fn() -> Result<(), String>) -> Result<(), String> {
        if self.sync.due() {
            self.sync_now(sync_records)?;
        }
        Ok(())
    }

    /// How long until a waiting sync is due.
    pub fn sync_wait(&self) -> Option<Duration> {
        self.sync.wait()
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
        if self.sync.policy() == SyncPolicy::None {
            return Ok(());
        }
        sync_records()?;
        sync_file(&self.file, &self.path)?;
        self.sync.synced();
        Ok(())
    }

    /// Whether the journal grew past its compaction threshold.
    pub fn over_limit(&self) -> bool {
        self.len > self.compact_over
    }

    /// Replaces the journal by one batch: `snapshot` (every session's
    /// record, length-prefixed, as [`push_record`] writes them; taken right
    /// after a flush) at the commit point `committed`.
    ///
    /// # Errors
    ///
    /// A write, sync or rename failed; the error names the file.
    pub fn compact(
        &mut self,
        committed: u64,
        snapshot: &[u8],
        sync_records: impl Fn() -> Result<(), String>,
    ) -> Result<(), String> {
        if self.sync.policy() != SyncPolicy::None {
            sync_records()?;
        }
        let mut records = std::mem::take(&mut self.pending);
        records.extend_from_slice(snapshot);
        self.scratch.clear();
        Batch::encode(&self.own, committed, &records, &mut self.scratch);
        self.file = replace(&self.path, &self.scratch, self.sync.policy())?;
        self.len = self.scratch.len() as u64;
        self.last_committed = Some(committed);
        self.sync.synced();
        Ok(())
    }
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
mod tests {
    // Test setup that fails should stop the test where it failed.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::durable::COMPACT_OVER;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("iomsg-journal-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A batch committing `path` at `committed` with `records`.
    fn batch(path: &str, committed: u64, records: &[&[u8]]) -> Vec<u8> {
        let mut recs = Vec::new();
        for r in records {
            push_record(r, &mut recs);
        }
        let mut out = Vec::new();
        Batch::encode(path.as_bytes(), committed, &recs, &mut out);
        out
    }

    fn open(dir: &Path) -> (Journal, Recovered) {
        Journal::open(dir, SyncPolicy::None, COMPACT_OVER).unwrap()
    }

    #[test]
    fn a_last_batch_torn_at_every_byte_is_dropped_and_the_rest_restored() {
        let dir = scratch("torn");
        let mut good = batch("/a.records", 48, &[b"one", b"two"]);
        good.extend(batch("/b.records", 0, &[b"three"]));
        let last = batch("/b.records", 24, &[b"four", b"", b"five"]);
        for cut in 0..last.len() {
            let mut bytes = good.clone();
            bytes.extend_from_slice(&last[..cut]);
            std::fs::write(dir.join("journal"), &bytes).unwrap();
            let (j, rec) = open(&dir);
            assert_eq!(rec.batches, 2, "cut at {cut}");
            assert_eq!(rec.dropped, cut as u64, "cut at {cut}");
            let records: Vec<&[u8]> = rec.records().collect();
            assert_eq!(records, [&b"one"[..], b"two", b"three"], "cut at {cut}");
            assert_eq!(
                rec.last_commit,
                Some((PathBuf::from("/b.records"), 0)),
                "cut at {cut}"
            );
            assert_eq!(j.len(), good.len() as u64);
            drop(j);
            let on_disk = std::fs::metadata(dir.join("journal")).unwrap().len();
            assert_eq!(on_disk, good.len() as u64, "the torn tail stays on disk");
        }
        // Whole, it is taken.
        let mut bytes = good.clone();
        bytes.extend_from_slice(&last);
        std::fs::write(dir.join("journal"), &bytes).unwrap();
        let (_j, rec) = open(&dir);
        assert_eq!((rec.batches, rec.dropped), (3, 0));
        assert_eq!(rec.records().count(), 6);
        assert_eq!(rec.last_commit, Some((PathBuf::from("/b.records"), 24)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_changed_byte_anywhere_in_a_batch_ends_the_journal_there() {
        let dir = scratch("flip");
        let first = batch("/a.records", 24, &[b"one"]);
        let second = batch("/a.records", 48, &[b"two", b"three"]);
        for at in 0..second.len() {
            let mut bytes = first.clone();
            let mut changed = second.clone();
            changed[at] ^= 0x40;
            bytes.extend_from_slice(&changed);
            std::fs::write(dir.join("journal"), &bytes).unwrap();
            let (_j, rec) = open(&dir);
            assert_eq!(rec.batches, 1, "byte {at} changed");
            assert_eq!(rec.records().collect::<Vec<_>>(), [&b"one"[..]]);
            assert_eq!(rec.dropped, second.len() as u64);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_second_opener_of_one_directory_is_refused_until_the_first_is_gone() {
        let dir = scratch("lock");
        let first = open(&dir);
        let err = Journal::open(&dir, SyncPolicy::None, COMPACT_OVER).unwrap_err();
        assert!(err.contains("in use"), "{err}");
        assert!(err.contains("lock"), "{err}");
        drop(first);
        assert!(Journal::open(&dir, SyncPolicy::None, COMPACT_OVER).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn batches_commit_the_records_file_and_compaction_keeps_the_snapshot_alone() {
        let dir = scratch("compact");
        let records = dir.join("s.records");
        std::fs::write(&records, [7u8; 48]).unwrap();
        let (mut j, _) = Journal::open(&dir, SyncPolicy::Always, 200).unwrap();
        j.name(&records).unwrap();
        let synced = std::cell::Cell::new(0);
        let sync = || {
            synced.set(synced.get() + 1);
            Ok(())
        };
        assert!(j.commit(48, sync).unwrap());
        assert!(!j.commit(48, sync).unwrap(), "nothing changed: no batch");
        for i in 0..20u8 {
            j.keep(&[i; 10]);
            assert!(j.commit(48 + 24 * u64::from(i), sync).unwrap());
        }
        assert!(
            synced.get() >= 21,
            "--sync always syncs the records each batch"
        );
        assert!(j.over_limit());
        let mut snapshot = Vec::new();
        push_record(b"all", &mut snapshot);
        j.compact(500, &snapshot, sync).unwrap();
        assert!(!j.over_limit());
        drop(j);
        let (_j, rec) = open(&dir);
        assert_eq!(rec.batches, 1);
        assert_eq!(rec.records().collect::<Vec<_>>(), [&b"all"[..]]);
        assert_eq!(
            rec.last_commit,
            Some((std::path::absolute(&records).unwrap(), 500))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn roll_back_cuts_the_named_file_to_its_commit_point_and_no_further() {
        let dir = scratch("rollback");
        let f = dir.join("s.records");
        std::fs::write(&f, [1u8; 120]).unwrap();
        let commit = (f.clone(), 72);
        assert_eq!(
            roll_back(Some(&commit), SyncPolicy::Always).unwrap(),
            Rollback::Cut {
                path: f.clone(),
                from: 120,
                to: 72
            }
        );
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 72);
        assert_eq!(
            roll_back(Some(&commit), SyncPolicy::None).unwrap(),
            Rollback::Nothing
        );
        let beyond = (f.clone(), 96);
        assert!(matches!(
            roll_back(Some(&beyond), SyncPolicy::None).unwrap(),
            Rollback::Short { len: 72, .. }
        ));
        assert_eq!(std::fs::metadata(&f).unwrap().len(), 72, "never grown");
        assert_eq!(
            roll_back(Some(&(PathBuf::new(), 5)), SyncPolicy::None).unwrap(),
            Rollback::Nothing
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
