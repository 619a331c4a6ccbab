//! What the server's journal and the client's outbox share: checksummed
//! frames appended to a file and read back up to the first torn one, a
//! directory lock (one process per directory), the sync policy, and the
//! atomic replacement that compaction uses.
//!
//! A frame is:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic (`IOJB` a journal batch, `IOOB` an outbox entry) |
//! | 4..8 | payload length `n`, little-endian |
//! | 8..12 | CRC32C of the payload |
//! | 12..12+n | payload |

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant as Wall};

use iomsg_core::wire::Crc32c;
use nix::fcntl::{Flock, FlockArg};

/// Bytes of a frame before its payload: magic, length, CRC.
pub const FRAME_HEADER: usize = 12;
/// The journal (or outbox) is compacted once it grows past this; a server
/// or client reads it whole when it starts, so this bounds that memory too.
pub const COMPACT_OVER: u64 = 16 << 20;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_policies_parse_and_print() {
        for p in [SyncPolicy::None, SyncPolicy::Batch, SyncPolicy::Always] {
            assert_eq!(p.to_string().parse::<SyncPolicy>(), Ok(p));
        }
        assert!("sometimes".parse::<SyncPolicy>().is_err());
    }

    #[test]
    fn a_frame_reads_back_and_any_changed_byte_refuses_it() {
        let mut f = Vec::new();
        frame(*b"TEST", b"payload", &mut f);
        assert_eq!(
            next_frame(*b"TEST", &f, 0),
            Some((&b"payload"[..], f.len()))
        );
        assert_eq!(next_frame(*b"OTHR", &f, 0), None);
        for at in 0..f.len() {
            let mut g = f.clone();
            g[at] ^= 1;
            assert_eq!(next_frame(*b"TEST", &g, 0), None, "byte {at}");
            assert_eq!(next_frame(*b"TEST", &f[..at], 0), None, "cut at {at}");
        }
    }
}
