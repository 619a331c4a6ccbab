//! The records file the journal's last batch names, brought back to its
//! commit point at start: what is past it was handed over but never
//! committed, and is kept aside, never erased; and the check that every
//! batch's records are there at all.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::durable::{next_frame, sync_file, SyncPolicy};

use super::{Batch, BATCH_MAGIC};

/// What was done to the records file the last batch names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rollback {
    /// Nothing named, or the file is at its commit point.
    Nothing,
    /// Cut back from `from` to `to` bytes, the records past the commit
    /// point moved to the end of `aside`: deliveries the journal never
    /// committed (never acknowledged, unless the journal lost commits).
    Cut {
        /// The file.
        path: PathBuf,
        /// Its length before.
        from: u64,
        /// Its length now, the commit point.
        to: u64,
        /// Where the records past it are kept ([`uncommitted_file`]).
        aside: PathBuf,
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

/// Where [`roll_back`] keeps the records it takes off `records`:
/// `records` with `.uncommitted` appended.
pub fn uncommitted_file(records: &Path) -> PathBuf {
    let mut name = records.as_os_str().to_owned();
    name.push(".uncommitted");
    PathBuf::from(name)
}

/// Cuts the records file of `commit` back to its commit point: the
/// deliveries past it were not committed with the journal, so their
/// clients send them again. Nothing is erased: the records taken off are
/// first appended to [`uncommitted_file`] (both synced unless `policy`
/// is none), where they stay as evidence — a journal that lost its last
/// commits (a power cut, an older copy) names an earlier commit point,
/// and some of them may have been acknowledged.
///
/// # Errors
///
/// The file cannot be read, kept aside or cut; the error names it.
pub fn roll_back(commit: Option<&(PathBuf, u64)>, policy: SyncPolicy) -> Result<Rollback, String> {
    let Some((path, committed)) = commit else {
        return Ok(Rollback::Nothing);
    };
    let (path, committed) = (path.clone(), *committed);
    if path.as_os_str().is_empty() {
        return Ok(Rollback::Nothing);
    }
    let len = file_len(&path)?;
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
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let aside = uncommitted_file(&path);
    keep_aside(&mut f, &path, committed, &aside, policy)?;
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
        aside,
    })
}

/// Appends the bytes of `f` (at `path`) from `from` on to `aside`.
fn keep_aside(
    f: &mut File,
    path: &Path,
    from: u64,
    aside: &Path,
    policy: SyncPolicy,
) -> Result<(), String> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(from))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(aside)
        .map_err(|e| format!("cannot open {}: {e}", aside.display()))?;
    std::io::copy(f, &mut out).map_err(|e| {
        format!(
            "cannot keep the records of {} past {from} bytes in {}: {e}",
            path.display(),
            aside.display()
        )
    })?;
    if policy != SyncPolicy::None {
        sync_file(&out, aside)?;
    }
    Ok(())
}

/// A batch whose records file is shorter than the commit point it names:
/// the records it commits are not there (a power cut that took the
/// records' last writes but not the journal's, or a records file cut or
/// removed by hand). The journal cannot vouch for it or anything after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unvouched {
    /// The batch's offset in the journal.
    pub offset: u64,
    /// The records file it names.
    pub records: PathBuf,
    /// That file's length.
    pub len: u64,
    /// The commit point the batch names.
    pub committed: u64,
}

/// The first batch of `bytes` (a journal's good batches) whose records
/// file is shorter than its commit point, if one is. A records file that
/// is not there at all is not judged (an operator may remove old audit
/// files; a missing file tells nothing of where its writes stopped).
///
/// # Errors
///
/// A records file's length could not be read (other than its absence).
pub fn first_unvouched(bytes: &[u8]) -> Result<Option<Unvouched>, String> {
    let mut lens: HashMap<&[u8], Option<u64>> = HashMap::new();
    let mut at = 0;
    while let Some((payload, next)) = next_frame(BATCH_MAGIC, bytes, at) {
        if let Some(b) = Batch::parse(payload) {
            if !b.records_path.is_empty() {
                let len = match lens.get(b.records_path) {
                    Some(&len) => len,
                    None => {
                        let path = Path::new(std::ffi::OsStr::from_bytes(b.records_path));
                        let len = existing_len(path)?;
                        lens.insert(b.records_path, len);
                        len
                    }
                };
                if let Some(len) = len.filter(|&len| len < b.committed) {
                    return Ok(Some(Unvouched {
                        offset: at as u64,
                        records: PathBuf::from(std::ffi::OsStr::from_bytes(b.records_path)),
                        len,
                        committed: b.committed,
                    }));
                }
            }
        }
        at = next;
    }
    Ok(None)
}

/// The length of `path`; `None` when it is not there.
fn existing_len(path: &Path) -> Result<Option<u64>, String> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The length of `path`; 0 when it is not there.
fn file_len(path: &Path) -> Result<u64, String> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}
