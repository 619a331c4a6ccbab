//! Every audit record of a soak in (session, sn, source) order, with
//! bounded memory: an external merge sort. Records are sorted in chunks of
//! at most `chunk` in memory; a full chunk is written to a scratch file (a
//! run); runs are merged `fan_in` at a time until `fan_in` at most are
//! left, and those are merged as they are read. Memory: `chunk` records of
//! [`TAGGED_LEN`] bytes (32 in memory) plus `fan_in` read buffers of
//! [`RUN_BUFFER`] bytes, whatever the number of records; disk: the runs,
//! as large as the records, in a scratch directory removed on drop.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::common::{Record, RECORD_LEN};

/// Records sorted in memory at once by the soak's verdict (32 MiB).
pub const CHUNK: usize = 1 << 20;
/// Runs merged at once.
pub const FAN_IN: usize = 64;
/// Each run's read buffer, in bytes.
pub const RUN_BUFFER: usize = 64 * 1024;
/// A [`Tagged`] record's size in a run file.
pub const TAGGED_LEN: usize = 28;

/// A record and where it came from. The order is (session, sn, source):
/// a message's client record (source 0) first, then what server instance
/// k handed over (source k + 1), in the order the instances ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tagged {
    /// The session.
    pub session: u64,
    /// The sn.
    pub sn: u64,
    /// 0: the client's record; k + 1: server instance k's.
    pub source: u32,
    /// The hash of the message's bytes.
    pub hash: u64,
}

impl Tagged {
    fn put(&self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(&self.session.to_le_bytes())?;
        out.write_all(&self.sn.to_le_bytes())?;
        out.write_all(&self.source.to_le_bytes())?;
        out.write_all(&self.hash.to_le_bytes())
    }

    fn get(b: &[u8; TAGGED_LEN]) -> Tagged {
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        let mut s = [0u8; 4];
        s.copy_from_slice(&b[16..20]);
        Tagged {
            session: word(0),
            sn: word(8),
            source: u32::from_le_bytes(s),
            hash: word(20),
        }
    }
}

/// The records of an audit file, read as a stream; a torn last record (a
/// write cut by a SIGKILL) ends it.
pub struct Records {
    path: PathBuf,
    file: BufReader<File>,
}

impl Records {
    /// Opens `path`.
    ///
    /// # Errors
    ///
    /// It could not be opened.
    pub fn open(path: &Path) -> Result<Records, String> {
        let file = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(Records {
            path: path.to_path_buf(),
            file: BufReader::with_capacity(RUN_BUFFER, file),
        })
    }
}

impl Iterator for Records {
    type Item = Result<Record, String>;
    fn next(&mut self) -> Option<Self::Item> {
        let mut b = [0u8; RECORD_LEN];
        match read_full(&mut self.file, &mut b) {
            Ok(true) => Record::all(&b).next().map(Ok),
            Ok(false) => None,
            Err(e) => Some(Err(format!("cannot read {}: {e}", self.path.display()))),
        }
    }
}

/// Fills `b`; false at the end (a torn tail included).
fn read_full(r: &mut impl Read, b: &mut [u8]) -> std::io::Result<bool> {
    let mut got = 0;
    while got < b.len() {
        match r.read(&mut b[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Takes records in any order and gives them back sorted.
pub struct Sorter {
    scratch: PathBuf,
    chunk: usize,
    fan_in: usize,
    buf: Vec<Tagged>,
    runs: Vec<PathBuf>,
    made: u64,
}

impl Sorter {
    /// A sorter holding `chunk` records in memory at most (at least 1),
    /// merging `fan_in` runs at once (at least 2), its runs in `scratch`
    /// (made when the first run is written, removed with its runs when
    /// the sorted stream is dropped).
    pub fn new(scratch: &Path, chunk: usize, fan_in: usize) -> Sorter {
        Sorter {
            scratch: scratch.to_path_buf(),
            chunk: chunk.max(1),
            fan_in: fan_in.max(2),
            buf: Vec::new(),
            runs: Vec::new(),
            made: 0,
        }
    }

    /// Adds every record of the audit file `path`, as from `source`.
    ///
    /// # Errors
    ///
    /// The file could not be read, or a run not written.
    pub fn add_file(&mut self, path: &Path, source: u32) -> Result<(), String> {
        for r in Records::open(path)? {
            let r = r?;
            self.push(Tagged {
                session: r.session,
                sn: r.sn,
                source,
                hash: r.hash,
            })?;
        }
        Ok(())
    }

    /// Adds a record.
    ///
    /// # Errors
    ///
    /// A full chunk could not be written as a run.
    pub fn push(&mut self, t: Tagged) -> Result<(), String> {
        if self.buf.len() >= self.chunk {
            self.spill()?;
        }
        self.buf.push(t);
        Ok(())
    }

    fn new_run(&mut self) -> Result<(PathBuf, BufWriter<File>), String> {
        std::fs::create_dir_all(&self.scratch)
            .map_err(|e| format!("cannot create {}: {e}", self.scratch.display()))?;
        let path = self.scratch.join(format!("run-{}", self.made));
        self.made += 1;
        let f =
            File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok((path, BufWriter::with_capacity(RUN_BUFFER, f)))
    }

    /// Sorts the chunk in memory and writes it as a run.
    fn spill(&mut self) -> Result<(), String> {
        self.buf.sort_unstable();
        let (path, mut w) = self.new_run()?;
        let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
        for t in &self.buf {
            t.put(&mut w).map_err(fail)?;
        }
        w.flush().map_err(fail)?;
        self.buf.clear();
        self.runs.push(path);
        Ok(())
    }

    /// Merges runs into one until `fan_in` are left.
    fn narrow(&mut self) -> Result<(), String> {
        while self.runs.len() > self.fan_in {
            let group: Vec<PathBuf> = self.runs.drain(..self.fan_in).collect();
            let merged = Merge::of(&group)?;
            let (path, mut w) = self.new_run()?;
            let fail = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
            for t in merged {
                t?.put(&mut w).map_err(fail)?;
            }
            w.flush().map_err(fail)?;
            for p in group {
                let _ = std::fs::remove_file(p);
            }
            self.runs.push(path);
        }
        Ok(())
    }

    /// Every record added, sorted.
    ///
    /// # Errors
    ///
    /// A run could not be written or read.
    pub fn finish(mut self) -> Result<Sorted, String> {
        if self.runs.is_empty() {
            self.buf.sort_unstable();
            let buf = std::mem::take(&mut self.buf);
            return Ok(Sorted {
                inner: Inner::Memory(buf.into_iter()),
                scratch: None,
            });
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.narrow()?;
        let merge = Merge::of(&self.runs)?;
        // The sorted stream owns the runs from here on.
        self.runs.clear();
        Ok(Sorted {
            inner: Inner::Runs(merge),
            scratch: Some(self.scratch.clone()),
        })
    }
}

impl Drop for Sorter {
    fn drop(&mut self) {
        // Left unfinished (an error): its runs go.
        if !self.runs.is_empty() {
            let _ = std::fs::remove_dir_all(&self.scratch);
        }
    }
}

/// Runs merged as they are read.
struct Merge {
    runs: Vec<(PathBuf, BufReader<File>)>,
    heap: BinaryHeap<Reverse<(Tagged, usize)>>,
    failed: bool,
}

impl Merge {
    fn of(paths: &[PathBuf]) -> Result<Merge, String> {
        let mut m = Merge {
            runs: Vec::with_capacity(paths.len()),
            heap: BinaryHeap::with_capacity(paths.len()),
            failed: false,
        };
        for (i, p) in paths.iter().enumerate() {
            let f = File::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            m.runs
                .push((p.clone(), BufReader::with_capacity(RUN_BUFFER, f)));
            if let Some(t) = m.read(i)? {
                m.heap.push(Reverse((t, i)));
            }
        }
        Ok(m)
    }

    fn read(&mut self, i: usize) -> Result<Option<Tagged>, String> {
        let (path, r) = &mut self.runs[i];
        let mut b = [0u8; TAGGED_LEN];
        match read_full(r, &mut b) {
            Ok(true) => Ok(Some(Tagged::get(&b))),
            Ok(false) => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }
}

impl Iterator for Merge {
    type Item = Result<Tagged, String>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let Reverse((t, i)) = self.heap.pop()?;
        match self.read(i) {
            Ok(Some(n)) => self.heap.push(Reverse((n, i))),
            Ok(None) => {}
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        }
        Some(Ok(t))
    }
}

enum Inner {
    Memory(std::vec::IntoIter<Tagged>),
    Runs(Merge),
}

/// The records in (session, sn, source) order; the scratch directory is
/// removed on drop.
pub struct Sorted {
    inner: Inner,
    scratch: Option<PathBuf>,
}

impl Iterator for Sorted {
    type Item = Result<Tagged, String>;
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Memory(it) => it.next().map(Ok),
            Inner::Runs(m) => m.next(),
        }
    }
}

impl Drop for Sorted {
    fn drop(&mut self) {
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use iomsg_core::rng::SplitMix64;

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("iomsg-sort-test-{}-{name}", std::process::id()))
    }

    fn records(n: u64, seed: u64) -> Vec<Tagged> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| Tagged {
                session: rng.below(4),
                sn: rng.below(50),
                source: rng.below(3) as u32,
                hash: rng.below(1000),
            })
            .collect()
    }

    #[test]
    fn spilled_runs_merge_in_several_passes_into_the_sorted_order() {
        let dir = scratch("passes");
        let input = records(1000, 7);
        // 1000 records in runs of 7, merged 3 at a time: 143 runs, five
        // passes.
        let mut s = Sorter::new(&dir, 7, 3);
        for &t in &input {
            s.push(t).unwrap();
        }
        let sorted = s.finish().unwrap();
        assert!(dir.exists());
        let got: Vec<Tagged> = sorted.map(Result::unwrap).collect();
        let mut want = input;
        want.sort_unstable();
        assert_eq!(got, want);
        assert!(!dir.exists(), "scratch left behind");
    }

    #[test]
    fn what_fits_in_a_chunk_never_touches_the_disk() {
        let dir = scratch("memory");
        let input = records(100, 9);
        let mut s = Sorter::new(&dir, 100, 2);
        for &t in &input {
            s.push(t).unwrap();
        }
        let got: Vec<Tagged> = s.finish().unwrap().map(Result::unwrap).collect();
        assert!(!dir.exists());
        let mut want = input;
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn record_files_stream_and_a_torn_tail_ends_them() {
        let dir = scratch("files");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.records");
        let mut bytes = Vec::new();
        for sn in 0..10 {
            Record {
                session: 5,
                sn,
                hash: sn,
            }
            .put(&mut bytes);
        }
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&path, &bytes).unwrap();
        let got: Vec<Record> = Records::open(&path).unwrap().map(Result::unwrap).collect();
        assert_eq!(got.len(), 10);
        assert_eq!(got[9].sn, 9);
        let mut s = Sorter::new(&dir.join("scratch"), 4, 2);
        s.add_file(&path, 3).unwrap();
        let sorted: Vec<Tagged> = s.finish().unwrap().map(Result::unwrap).collect();
        assert_eq!(sorted.len(), 10);
        assert!(sorted.iter().all(|t| t.source == 3 && t.session == 5));
        assert!(!dir.join("scratch").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
