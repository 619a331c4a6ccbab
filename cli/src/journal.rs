//! `iomsg server --journal DIR`: the server's journal, kept in step with
//! its audit records so that a restarted instance neither loses nor
//! repeats a delivery.
//!
//! `DIR/journal` is a sequence of batches, one per flush of the server:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `IOJB` |
//! | 4..8 | payload length `n`, little-endian |
//! | 8..12 | CRC32C of the payload |
//! | 12..12+n | payload |
//!
//! The payload: a `u32` length and the bytes of the path of the audit
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
//!
//! The frame (magic, length, CRC, payload), the directory lock and the
//! sync policy are shared with the client's outbox (`crate::outbox`).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant as Wall};

use iomsg_core::wire::Crc32c;
use nix::fcntl::{Flock, FlockArg};

/// The first bytes of every journal batch.
pub const BATCH_MAGIC: [u8; 4] = *b"IOJB";
/// Bytes of a frame before its payload: magic, length, CRC.
pub const FRAME_HEADER: usize = 12;
/// The journal (or outbox) is compacted once it grows past this.
pub const COMPACT_OVER: u64 = 64 << 20;
/// With `--sync batch`, the longest a written batch waits for its sync.
pub const SYNC_EVERY: Duration = Duration::from_millis(10);
/// The longest payload a frame may claim (a larger claim is damage).
const MAX_PAYLOAD: usize = 1 << 30;

/// When written batches are forced to the disk (`fdatasync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Never: `write(2)` alone, enough for a process killed (SIGKILL);
    /// the kernel writes back when it likes.
    None,
    /// At most every [`SYNC_EVERY`]: a power cut loses the last ~10 ms.
    Batch,
    /// Before every flush returns (acknowledgements wait for the disk).
    Always,
}

impl core::str::FromStr for SyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<SyncPolicy, String> {
        match s {
            "none" => Ok(SyncPolicy::None),
            "batch" => Ok(SyncPolicy::Batch),
            "always" => Ok(SyncPolicy::Always),
            _ => Err(format!(
                "{s:?} is not a sync policy (none, batch or always)"
            )),
        }
    }
}

impl core::fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            SyncPolicy::None => "none",
            SyncPolicy::Batch => "batch",
            SyncPolicy::Always => "always",
        })
    }
}

/// When to sync under a [`SyncPolicy`].
#[derive(Debug)]
pub struct Syncer {
    policy: SyncPolicy,
    last: Wall,
    unsynced: bool,
}

impl Syncer {
    /// A syncer for `policy`, nothing written yet.
    pub fn new(policy: SyncPolicy) -> Syncer {
        Syncer {
            policy,
            last: Wall::now(),
            unsynced: false,
        }
    }

    /// The policy.
    pub fn policy(&self) -> SyncPolicy {
        self.policy
    }

    /// Something was written: whether to sync it now.
    pub fn written(&mut self) -> bool {
        match self.policy {
            SyncPolicy::None => false,
            SyncPolicy::Always => true,
            SyncPolicy::Batch => {
                self.unsynced = true;
                self.due()
            }
        }
    }

    /// Whether written bytes wait for a sync that is due.
    pub fn due(&self) -> bool {
        self.unsynced && self.last.elapsed() >= SYNC_EVERY
    }

    /// How long until a sync is due, when one waits.
    pub fn wait(&self) -> Option<Duration> {
        self.unsynced
            .then(|| SYNC_EVERY.saturating_sub(self.last.elapsed()))
    }

    /// Everything written is on the disk.
    pub fn synced(&mut self) {
        self.unsynced = false;
        self.last = Wall::now();
    }
}

/// CRC32C of `bytes`.
pub fn crc(bytes: &[u8]) -> u32 {
    Crc32c::BUILTIN.checksum(bytes)
}

/// Appends a frame (`magic`, length, CRC32C, `payload`) to `out`.
pub fn frame(magic: [u8; 4], payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&magic);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The payload of the frame at `bytes[at..]` and where the next frame
/// starts; `None` when it is torn, changed or not a `magic` frame.
pub fn next_frame(magic: [u8; 4], bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let head = bytes.get(at..at.checked_add(FRAME_HEADER)?)?;
    if head[0..4] != magic {
        return None;
    }
    let len = u32_at(head, 4)? as usize;
    if len > MAX_PAYLOAD {
        return None;
    }
    let end = at + FRAME_HEADER + len;
    let payload = bytes.get(at + FRAME_HEADER..end)?;
    (crc(payload) == u32_at(head, 8)?).then_some((payload, end))
}

/// The little-endian `u32` at `bytes[at..]`.
pub fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The little-endian `u64` at `bytes[at..]`.
pub fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    Some(u64::from_le_bytes(w))
}

/// `DIR/lock`, held exclusively while the process runs.
#[derive(Debug)]
pub struct DirLock {
    _lock: Flock<File>,
}

/// Takes `dir/lock` (making `dir`): one process per directory.
///
/// # Errors
///
/// The directory cannot be made, or another process holds the lock (the
/// error says so: stop it, or use another directory).
pub fn lock_dir(dir: &Path, what: &str) -> Result<DirLock, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the {what} directory {}: {e}", dir.display()))?;
    let path = dir.join("lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(DirLock { _lock: lock }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(format!(
            "the {what} {} is in use: another process holds {} (stop it, or give another directory)",
            dir.display(),
            path.display()
        )),
        Err((_, e)) => Err(format!("cannot lock {}: {e}", path.display())),
    }
}

/// `fdatasync` of `file`, the error naming `path`.
pub fn sync_file(file: &File, path: &Path) -> Result<(), String> {
    file.sync_data()
        .map_err(|e| format!("cannot sync {}: {e}", path.display()))
}

/// Replaces `path` by `bytes` atomically: `path.tmp` written (and synced
/// unless `policy` is none), renamed over `path`, the directory synced.
/// Returns `path` opened for appending.
///
/// # Errors
///
/// A step failed; the error names the file.
pub fn replace(path: &Path, bytes: &[u8], policy: SyncPolicy) -> Result<File, String> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    if policy != SyncPolicy::None {
        sync_file(&f, &tmp)?;
    }
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), path.display()))?;
    if policy != SyncPolicy::None {
        if let Some(dir) = path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| format!("cannot sync the directory {}: {e}", dir.display()))?;
        }
    }
    open_append(path)
}

/// `path` opened for reading and appending (made if missing).
pub fn open_append(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Reads `file` whole and keeps its `magic` frames up to the first bad one; a torn
/// tail is cut off the file (synced unless `policy` is none). Returns the
/// good bytes and how many were dropped.
///
/// # Errors
///
/// The file cannot be read or cut; the error names `path`.
pub fn read_frames(
    file: &mut File,
    path: &Path,
    policy: SyncPolicy,
    magic: [u8; 4],
    mut good: impl FnMut(&[u8]) -> bool,
) -> Result<(Vec<u8>, u64), String> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut at = 0;
    while let Some((payload, next)) = next_frame(magic, &bytes, at) {
        if !good(payload) {
            break;
        }
        at = next;
    }
    let dropped = (bytes.len() - at) as u64;
    if dropped > 0 {
        file.set_len(at as u64)
            .map_err(|e| format!("cannot cut the torn tail of {}: {e}", path.display()))?;
        if policy != SyncPolicy::None {
            sync_file(file, path)?;
        }
        bytes.truncate(at);
    }
    Ok((bytes, dropped))
}

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
    /// Compact past this many bytes ([`COMPACT_OVER`] unless a test
    /// lowers it).
    pub compact_over: u64,
}
