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

/// What is wrong with the first bad frame of a file (see the module's
/// docs for which flaws are a torn tail).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flaw {
    /// The file ends inside the frame: fewer than [`FRAME_HEADER`] bytes
    /// remain (beginning like the magic), or its header claims more bytes
    /// than the file holds.
    Incomplete {
        /// Bytes from the frame's start to the end of the file.
        have: u64,
        /// Bytes it needs: a header's, or the header's claim.
        need: u64,
    },
    /// Its first bytes are not the magic (garbage or zeros).
    BadMagic {
        /// Its first bytes (up to four).
        found: Vec<u8>,
    },
    /// Its magic is wrong, but its length and CRC hold: the magic was
    /// changed.
    MagicChanged {
        /// Its first four bytes.
        found: [u8; 4],
    },
    /// Its length claims more than any frame holds ([`MAX_PAYLOAD`]).
    TooLong {
        /// The length claimed.
        claimed: u32,
    },
    /// Its length claims more than the file holds, but the bytes to the
    /// end of the file match its CRC: the length was changed.
    LengthChanged {
        /// The length claimed.
        claimed: u32,
        /// The payload's bytes to the end of the file.
        actual: u64,
    },
    /// Complete, but the CRC32C of its payload is not the one its header
    /// holds: changed after it was written.
    Checksum {
        /// The CRC its header holds.
        stored: u32,
        /// The CRC of its payload.
        computed: u32,
    },
    /// Its CRC holds but its payload does not parse.
    Malformed {
        /// What the reader found wrong.
        why: String,
    },
}

impl Flaw {
    /// Whether the frame was changed after it was written: no tear leaves
    /// such a frame, wherever it is.
    pub fn is_change(&self) -> bool {
        !matches!(self, Flaw::Incomplete { .. } | Flaw::BadMagic { .. })
    }
}

impl core::fmt::Display for Flaw {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Flaw::Incomplete { have, need } => {
                write!(f, "an incomplete frame ({have} of its {need} bytes)")
            }
            Flaw::BadMagic { found } => {
                write!(f, "bad magic (\"{}\")", found.escape_ascii())
            }
            Flaw::MagicChanged { found } => write!(
                f,
                "a changed magic (\"{}\", while its length and checksum hold)",
                found.escape_ascii()
            ),
            Flaw::TooLong { claimed } => write!(
                f,
                "a length of {claimed} bytes, more than any frame's {MAX_PAYLOAD}"
            ),
            Flaw::LengthChanged { claimed, actual } => write!(
                f,
                "a changed length ({claimed} bytes claimed; the {actual} to the end of the file \
                 match its checksum)"
            ),
            Flaw::Checksum { stored, computed } => write!(
                f,
                "a checksum mismatch in a complete frame (CRC32C {computed:08x}, its header \
                 holds {stored:08x}): changed after it was written"
            ),
            Flaw::Malformed { why } => {
                write!(f, "a frame whose checksum holds but {why}")
            }
        }
    }
}

/// The valid frames found after a bad one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct After {
    /// Valid frames (magic, a length that fits, CRC).
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The offset of the first.
    pub first: Option<u64>,
    /// The search ran out of work before the end of the file.
    pub gave_up: bool,
}

impl core::fmt::Display for After {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.first {
            Some(first) => write!(
                f,
                "{} ({} bytes) {} it, the first at offset {first}",
                frames(self.frames, "valid"),
                self.bytes,
                if self.frames == 1 {
                    "follows"
                } else {
                    "follow"
                }
            )?,
            None => f.write_str("no valid frame follows it")?,
        }
        if self.gave_up {
            f.write_str(" (the search for more stopped: too many frame-like bytes to check)")?;
        }
        Ok(())
    }
}

/// How a file's bytes end, as [`scan`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to a good frame.
    Clean,
    /// A torn tail from the first bad frame on: cut it.
    Torn(Flaw),
    /// Damage at the first bad frame: refuse the file.
    Damaged {
        /// What is wrong with it.
        flaw: Flaw,
        /// The valid frames after it.
        after: After,
    },
}

/// The good frames of a file and how it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    /// The length of the good frames: the offset of the first bad one.
    pub end: usize,
    /// Good frames.
    pub frames: u64,
    /// How the rest is taken.
    pub tail: Tail,
}

/// Reads `bytes` as `magic` frames, each payload handed to `good` (which
/// says why it does not parse, if it does not), and decides what follows
/// the last good frame (see the module's docs). Never panics.
pub fn scan(
    magic: [u8; 4],
    bytes: &[u8],
    mut good: impl FnMut(&[u8]) -> Result<(), String>,
) -> Scan {
    let (mut at, mut frames) = (0, 0);
    while at < bytes.len() {
        let flaw = match check(magic, bytes, at) {
            Ok((payload, next)) => match good(payload) {
                Ok(()) => {
                    (at, frames) = (next, frames + 1);
                    continue;
                }
                Err(why) => Flaw::Malformed { why },
            },
            Err(flaw) => flaw,
        };
        let after = valid_after(magic, bytes, at + 1);
        let tail = if flaw.is_change() || after.frames > 0 || after.gave_up {
            Tail::Damaged { flaw, after }
        } else {
            Tail::Torn(flaw)
        };
        return Scan {
            end: at,
            frames,
            tail,
        };
    }
    Scan {
        end: at,
        frames,
        tail: Tail::Clean,
    }
}

/// The frame at `bytes[at..]` (`at < bytes.len()`): its payload and where
/// the next one starts, or what is wrong with it.
fn check(magic: [u8; 4], bytes: &[u8], at: usize) -> Result<(&[u8], usize), Flaw> {
    let rest = bytes.get(at..).unwrap_or_default();
    let Some(head) = rest.get(..FRAME_HEADER) else {
        let n = rest.len().min(4);
        return Err(if rest[..n] == magic[..n] {
            Flaw::Incomplete {
                have: rest.len() as u64,
                need: FRAME_HEADER as u64,
            }
        } else {
            Flaw::BadMagic {
                found: rest[..n].to_vec(),
            }
        });
    };
    let claimed = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let stored = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    let body = &rest[FRAME_HEADER..];
    let len = claimed as usize;
    if head[..4] != magic {
        let found = [head[0], head[1], head[2], head[3]];
        // An empty payload's CRC is 0: zeros would pass for a frame.
        let holds =
            len > 0 && len <= MAX_PAYLOAD && body.get(..len).is_some_and(|p| crc(p) == stored);
        return Err(if holds {
            Flaw::MagicChanged { found }
        } else {
            Flaw::BadMagic {
                found: found.to_vec(),
            }
        });
    }
    if len > MAX_PAYLOAD {
        return Err(Flaw::TooLong { claimed });
    }
    let Some(payload) = body.get(..len) else {
        return Err(if !body.is_empty() && crc(body) == stored {
            Flaw::LengthChanged {
                claimed,
                actual: body.len() as u64,
            }
        } else {
            Flaw::Incomplete {
                have: rest.len() as u64,
                need: (FRAME_HEADER + len) as u64,
            }
        });
    };
    let computed = crc(payload);
    if computed != stored {
        return Err(Flaw::Checksum { stored, computed });
    }
    Ok((payload, at + FRAME_HEADER + len))
}

/// The valid frames that start at `from` or later: every offset tried,
/// a frame found skipped whole; at most [`SCAN_WORK`] times the file's
/// bytes checksummed.
fn valid_after(magic: [u8; 4], bytes: &[u8], from: usize) -> After {
    let mut budget = bytes
        .len()
        .saturating_mul(SCAN_WORK)
        .saturating_add(SCAN_SLACK);
    let mut after = After::default();
    let mut q = from;
    while q.saturating_add(FRAME_HEADER) <= bytes.len() {
        if bytes[q..q + 4] != magic {
            q += 1;
            continue;
        }
        let len = u32_at(bytes, q + 4).map_or(0, |n| n as usize);
        if len <= bytes.len() - q - FRAME_HEADER {
            if len > budget {
                after.gave_up = true;
                break;
            }
            budget -= len;
        }
        match next_frame(magic, bytes, q) {
            Some((_, next)) => {
                after.frames += 1;
                after.bytes += (next - q) as u64;
                after.first.get_or_insert(q as u64);
                q = next;
            }
            None => q += 1,
        }
    }
    after
}

/// "1 good frame", "2 good frames".
fn frames(n: u64, what: &str) -> String {
    format!("{n} {what} frame{}", if n == 1 { "" } else { "s" })
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

#[cfg(test)]
mod tests;
