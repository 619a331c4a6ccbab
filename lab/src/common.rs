//! What every process of a soak shares: the audit files' record format
//! and writer, the wall clock they agree on, stopping on a signal.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A flag that SIGINT or SIGTERM raises: the loops stop, flush what they
/// hold and report, instead of dying mid-write.
///
/// # Errors
///
/// The handlers could not be installed.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    Ok(stop)
}

/// Microseconds since the Unix epoch: the clock every process of a soak
/// shares.
pub fn epoch_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// One audit record: a message handed to the server's application, or
/// submitted by a client: its session, sn and payload hash
/// (`workload::hash`), 24 bytes little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// The session.
    pub session: u64,
    /// The sn.
    pub sn: u64,
    /// The hash of the message's bytes.
    pub hash: u64,
}

/// The size of a [`Record`] on disk.
pub const RECORD_LEN: usize = 24;

impl Record {
    /// Appends the record's bytes to `out`.
    pub fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.session.to_le_bytes());
        out.extend_from_slice(&self.sn.to_le_bytes());
        out.extend_from_slice(&self.hash.to_le_bytes());
    }

    /// The records in `bytes`; a torn last record (a write cut by a
    /// SIGKILL) is ignored.
    pub fn all(bytes: &[u8]) -> impl Iterator<Item = Record> + '_ {
        bytes.chunks_exact(RECORD_LEN).map(|c| {
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&c[i * 8..i * 8 + 8]);
                u64::from_le_bytes(w)
            };
            Record {
                session: word(0),
                sn: word(1),
                hash: word(2),
            }
        })
    }
}

/// An audit file pair in `dir`: `NAME.records` (binary [`Record`]s) and
/// `NAME.log` (text events), both appended to, each batch in one
/// `write(2)` so that a SIGKILL keeps everything that reached the kernel.
pub struct Audit {
    records: File,
    records_path: PathBuf,
    records_len: u64,
    log: File,
    batch: Vec<u8>,
    lines: String,
}

impl Audit {
    /// Creates (or appends to) `dir/NAME.records` and `dir/NAME.log`.
    ///
    /// # Errors
    ///
    /// The directory or files could not be made.
    pub fn create(dir: &Path, name: &str) -> Result<Audit, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the audit directory {}: {e}", dir.display()))?;
        let open = |ext: &str| -> Result<File, String> {
            let path: PathBuf = dir.join(format!("{name}.{ext}"));
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))
        };
        let records = open("records")?;
        let records_path = dir.join(format!("{name}.records"));
        let records_len = records
            .metadata()
            .map_err(|e| format!("cannot read {}: {e}", records_path.display()))?
            .len();
        Ok(Audit {
            records,
            records_path,
            records_len,
            log: open("log")?,
            batch: Vec::with_capacity(64 * 1024),
            lines: String::new(),
        })
    }

    /// Adds a record to the current batch.
    pub fn record(&mut self, r: Record) {
        r.put(&mut self.batch);
    }

    /// Adds a line (`epoch_us` first) to the current batch of events.
    pub fn event(&mut self, what: core::fmt::Arguments<'_>) {
        use core::fmt::Write as _;
        let _ = writeln!(self.lines, "{} {what}", epoch_us());
    }

    /// Writes the batches: records first, then events.
    ///
    /// # Errors
    ///
    /// A write failed.
    pub fn flush(&mut self) -> Result<(), String> {
        if !self.batch.is_empty() {
            self.records.write_all(&self.batch).map_err(|e| {
                format!(
                    "cannot write the audit records {}: {e}",
                    self.records_path.display()
                )
            })?;
            self.records_len += self.batch.len() as u64;
            self.batch.clear();
        }
        if !self.lines.is_empty() {
            self.log
                .write_all(self.lines.as_bytes())
                .map_err(|e| format!("cannot write the audit log: {e}"))?;
            self.lines.clear();
        }
        Ok(())
    }
}

impl Audit {
    /// The records file.
    pub fn records_path(&self) -> &Path {
        &self.records_path
    }

    /// The records file's length: what it held when opened and every
    /// batch written since.
    pub fn records_len(&self) -> u64 {
        self.records_len
    }

    /// Another handle on the records file (for a thread that syncs it).
    ///
    /// # Errors
    ///
    /// The descriptor could not be duplicated; the error names the file.
    pub fn records_file(&self) -> Result<File, String> {
        self.records
            .try_clone()
            .map_err(|e| format!("cannot reopen {}: {e}", self.records_path.display()))
    }

    /// `fdatasync` of the records file.
    ///
    /// # Errors
    ///
    /// The sync failed; the error names the file.
    pub fn sync_records(&self) -> Result<(), String> {
        self.records
            .sync_data()
            .map_err(|e| format!("cannot sync {}: {e}", self.records_path.display()))
    }
}

/// Rounds `d` for people: `1.25 s`, `340 ms`.
pub fn human(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}
