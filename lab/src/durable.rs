//! What the server's journal and the client's outbox share: checksummed
//! frames appended to a file and read back (a torn tail cut, damage
//! refused), a directory lock (one process per directory), the sync
//! policy, and the atomic replacement that compaction uses.
//!
//! A frame is:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic (`IOJB` a journal batch, `IOOB` an outbox entry) |
//! | 4..8 | payload length `n`, little-endian |
//! | 8..12 | CRC32C of the payload |
//! | 12..12+n | payload |
//!
//! # Reading a file back: torn tail or damage
//!
//! A file is read frame by frame from its start ([`read_frames`]). At the
//! first frame that is not good, [`scan`] decides what the rest is:
//!
//! - **Torn tail** — the process died while appending (SIGKILL, or a power
//!   cut under a lazy sync policy). A write that dies leaves a *prefix* of
//!   what it wrote, so a tear shows as exactly one of:
//!   - the last frame is *incomplete*: fewer than a header's 12 bytes
//!     remain (and they begin like the magic), or the header claims more
//!     bytes than the file holds ([`Flaw::Incomplete`]);
//!   - bytes that do not begin a frame (garbage or zeros appended)
//!     ([`Flaw::BadMagic`]);
//!
//!   *and* no valid frame (its magic, a length that fits, its CRC) starts
//!   at any later offset. The tail is then cut off, after its bytes were
//!   copied to `FILE.torn-OFFSET` beside the file (`journal.torn-1234`,
//!   `outbox.torn-88`; when that name is taken, `FILE.torn-OFFSET-2`,
//!   `-3`, …: an evidence file is never overwritten). What was cut is
//!   named in [`Frames::torn`], for the caller to print.
//! - **Damage** — anything else; the file is refused and left as it is,
//!   the error naming it, the offset of the first bad frame, what is wrong
//!   with it and what valid frames follow ([`Damage`]). That is:
//!   - a bad frame followed by any valid frame, at any offset: a tear only
//!     ever affects the end, so this is a changed byte, a cut in the
//!     middle, or a splice;
//!   - a *complete* frame whose CRC fails ([`Flaw::Checksum`]), even the
//!     last one. A kill leaves a prefix of the write, so a frame it cut
//!     is incomplete; a complete frame with a wrong CRC was changed after
//!     it was written (a bad disk, a stray write, an edit), and what it
//!     held may have been acknowledged: cutting it could erase
//!     acknowledged deliveries. (A power cut under a lazy sync policy on
//!     a file system that grows a file before writing its data can leave
//!     zeros inside the last frame; that is refused too. Refusing an
//!     honest tear costs the operator one command, which the error
//!     gives; cutting a changed frame costs deliveries, silently.)
//!   - a frame whose header was changed in a way its CRC still shows: a
//!     wrong magic before a length and CRC that hold
//!     ([`Flaw::MagicChanged`]); a length claiming more than the file
//!     holds while the bytes to the end of the file match the CRC
//!     ([`Flaw::LengthChanged`]); a length over any frame's
//!     ([`Flaw::TooLong`]);
//!   - a frame whose CRC holds but whose payload does not parse
//!     ([`Flaw::Malformed`]; the journal's batch, an outbox entry).
//!
//! A file cut short in its middle (a truncation) ends in an incomplete
//! frame with nothing after it: that cannot be told from a tear and is
//! cut as one. A power cut under `--sync none` or `batch` that writes the
//! last pages back out of order can leave zeros before a valid frame: that
//! is refused as damage, the safe side, and the error says how to cut the
//! file by hand. Bad input never panics: a length is checked against the
//! file before it is used, and the search for valid frames after a bad
//! one spends a bounded amount of checksumming (past it, the file is
//! refused).
//!
//! # The lock
//!
//! [`lock_dir`] takes an exclusive `flock` on the directory itself (an fd
//! opened `O_RDONLY | O_DIRECTORY`), not on a file in it: removing or
//! renaming any file (compaction renames over the journal and the outbox)
//! cannot release it or admit a second process. A `DIR/lock` file left by
//! older versions may stay; nothing reads it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant as Wall};

use iomsg_core::wire::Crc32c;
use nix::fcntl::{Flock, FlockArg, OFlag};

/// Bytes of a frame before its payload: magic, length, CRC.
pub const FRAME_HEADER: usize = 12;
/// The journal (or outbox) is compacted once it grows past this; a server
/// or client reads it whole when it starts, so this bounds that memory too.
pub const COMPACT_OVER: u64 = 16 << 20;
/// With `--sync batch`, the longest a written batch waits for its sync.
pub const SYNC_EVERY: Duration = Duration::from_millis(10);
/// The longest payload a frame may claim (a larger claim is damage).
pub const MAX_PAYLOAD: usize = 1 << 30;
/// The search for valid frames after a bad one checksums at most this
/// many times the file's bytes (plus [`SCAN_SLACK`]); past it, the file
/// is refused (see the module's docs).
const SCAN_WORK: usize = 16;
/// Bytes the search may checksum beyond [`SCAN_WORK`] times the file's.
const SCAN_SLACK: usize = 1 << 20;
/// Evidence files of one offset at most (`FILE.torn-OFFSET-1000`).
const EVIDENCE_NAMES: u32 = 1000;

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

/// A directory, locked (`flock` on the directory itself) while the
/// process runs.
#[derive(Debug)]
pub struct DirLock {
    _lock: Flock<File>,
}

/// Locks `dir` itself (making it): one process per directory, whatever
/// becomes of the files in it (see the module's docs).
///
/// # Errors
///
/// The directory cannot be made or opened, or another process holds it
/// (the error says so: stop it, or use another directory).
pub fn lock_dir(dir: &Path, what: &str) -> Result<DirLock, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the {what} {}: {e}", dir.display()))?;
    let fd = OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_DIRECTORY.bits())
        .open(dir)
        .map_err(|e| format!("cannot open the {what} {}: {e}", dir.display()))?;
    match Flock::lock(fd, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(DirLock { _lock: lock }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(format!(
            "the {what} {} is in use: another process holds its lock (a flock on the directory \
             itself; removing {} or any other file does not release it): stop that process, or \
             give another directory",
            dir.display(),
            dir.join("lock").display()
        )),
        Err((_, e)) => Err(format!("cannot lock the {what} {}: {e}", dir.display())),
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
        sync_parent(path)?;
    }
    open_append(path)
}

/// `fsync` of the directory holding `path` (a name made or renamed there
/// survives a power cut).
fn sync_parent(path: &Path) -> Result<(), String> {
    let Some(dir) = path.parent() else {
        return Ok(());
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("cannot sync the directory {}: {e}", dir.display()))
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

/// A file's bad frame, refused: nothing on disk was changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The file.
    pub path: PathBuf,
    /// The offset of its first bad frame.
    pub offset: u64,
    /// What is wrong with it.
    pub flaw: Flaw,
    /// Good frames before it.
    pub before: u64,
    /// Valid frames after it.
    pub after: After,
}

impl core::fmt::Display for Damage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} is damaged at offset {}: {}; {} before it, {}",
            self.path.display(),
            self.offset,
            self.flaw,
            frames(self.before, "good"),
            self.after
        )
    }
}

/// A torn tail, cut off a file after its bytes were kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torn {
    /// Where it began: the file's length now.
    pub offset: u64,
    /// Its bytes.
    pub len: u64,
    /// What was wrong with its first frame.
    pub flaw: Flaw,
    /// The file its bytes were copied to (`FILE.torn-OFFSET`).
    pub evidence: PathBuf,
}

impl core::fmt::Display for Torn {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} bytes of torn tail cut at offset {} ({}; nothing valid after it), kept in {}",
            self.len,
            self.offset,
            self.flaw,
            self.evidence.display()
        )
    }
}

/// Why [`read_frames`] failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The file could not be read, or its torn tail kept or cut; the text
    /// names the file.
    Io(String),
    /// The file is damaged; it was left as it is.
    Damaged(Damage),
}

impl core::fmt::Display for ReadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReadError::Io(e) => f.write_str(e),
            ReadError::Damaged(d) => write!(f, "{d}; the file was left as it is"),
        }
    }
}

/// A file's good frames, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frames {
    /// Their bytes.
    pub bytes: Vec<u8>,
    /// How many.
    pub frames: u64,
    /// The torn tail cut, if there was one.
    pub torn: Option<Torn>,
}

/// Reads `file` whole as `magic` frames, each payload handed to `good`
/// (see [`scan`]). A torn tail is copied to its evidence file and cut off
/// (both synced unless `policy` is none); damage is refused, nothing
/// changed.
///
/// # Errors
///
/// [`ReadError::Damaged`], or the file cannot be read, its tail kept or
/// cut ([`ReadError::Io`], naming the file).
pub fn read_frames(
    file: &mut File,
    path: &Path,
    policy: SyncPolicy,
    magic: [u8; 4],
    good: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<Frames, ReadError> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ReadError::Io(format!("cannot read {}: {e}", path.display())))?;
    let scan = scan(magic, &bytes, good);
    let torn = match scan.tail {
        Tail::Clean => None,
        Tail::Damaged { flaw, after } => {
            return Err(ReadError::Damaged(Damage {
                path: path.to_path_buf(),
                offset: scan.end as u64,
                flaw,
                before: scan.frames,
                after,
            }))
        }
        Tail::Torn(flaw) => {
            let torn =
                cut_tail(file, path, policy, &bytes, scan.end, flaw).map_err(ReadError::Io)?;
            bytes.truncate(scan.end);
            Some(torn)
        }
    };
    Ok(Frames {
        bytes,
        frames: scan.frames,
        torn,
    })
}

/// Copies `bytes[at..]` to the evidence file, then cuts `file` at `at`.
fn cut_tail(
    file: &File,
    path: &Path,
    policy: SyncPolicy,
    bytes: &[u8],
    at: usize,
    flaw: Flaw,
) -> Result<Torn, String> {
    let tail = bytes.get(at..).unwrap_or_default();
    let evidence = keep_evidence(path, "torn", at as u64, tail, policy)?;
    file.set_len(at as u64).map_err(|e| {
        format!(
            "cannot cut the torn tail of {} at offset {at} (kept in {}): {e}",
            path.display(),
            evidence.display()
        )
    })?;
    if policy != SyncPolicy::None {
        sync_file(file, path)?;
    }
    Ok(Torn {
        offset: at as u64,
        len: tail.len() as u64,
        flaw,
        evidence,
    })
}

/// Copies `bytes[at..]` to a new `FILE.KIND-OFFSET` beside `path` (see
/// `keep_evidence`), then cuts `file` at `at` (both synced unless
/// `policy` is none). Returns the evidence file.
///
/// # Errors
///
/// The evidence could not be kept or the file cut; the error names it.
pub fn cut_keeping(
    file: &File,
    path: &Path,
    policy: SyncPolicy,
    (bytes, at): (&[u8], usize),
    kind: &str,
) -> Result<PathBuf, String> {
    let tail = bytes.get(at..).unwrap_or_default();
    let evidence = keep_evidence(path, kind, at as u64, tail, policy)?;
    file.set_len(at as u64).map_err(|e| {
        format!(
            "cannot cut {} at offset {at} (its tail kept in {}): {e}",
            path.display(),
            evidence.display()
        )
    })?;
    if policy != SyncPolicy::None {
        sync_file(file, path)?;
    }
    Ok(evidence)
}

/// Writes `tail` to a new `FILE.KIND-OFFSET` beside `path` (or
/// `FILE.KIND-OFFSET-K` when taken; never over an existing file).
fn keep_evidence(
    path: &Path,
    kind: &str,
    offset: u64,
    tail: &[u8],
    policy: SyncPolicy,
) -> Result<PathBuf, String> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let not_cut = |e: String| format!("{e} (the {kind} tail of {} was not cut)", path.display());
    for k in 1..=EVIDENCE_NAMES {
        let file_name = match k {
            1 => format!("{name}.{kind}-{offset}"),
            _ => format!("{name}.{kind}-{offset}-{k}"),
        };
        let p = path.with_file_name(file_name);
        let mut f = match OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(not_cut(format!("cannot create {}: {e}", p.display()))),
        };
        f.write_all(tail)
            .map_err(|e| not_cut(format!("cannot write {}: {e}", p.display())))?;
        if policy != SyncPolicy::None {
            sync_file(&f, &p).map_err(not_cut)?;
            sync_parent(&p).map_err(not_cut)?;
        }
        return Ok(p);
    }
    Err(not_cut(format!(
        "{EVIDENCE_NAMES} evidence files {name}.{kind}-{offset}* are there already: move them away"
    )))
}

pub mod background;
mod scan;

use scan::frames;
pub use scan::{scan, After, Flaw, Scan, Tail};

#[cfg(test)]
mod tests;
