//! Where the latest record of each session is in the journal file: what
//! a restore takes back (one record per session, in the order they were
//! written) and what [`recall`](iomsg_core::session::ServerHandler::recall)
//! reads back for a session the server no longer holds.
//!
//! Memory: one entry per session the journal holds, 16 bytes of key and
//! place plus the hash table's own (about 30 bytes in all); the records
//! stay in the file, read back (`pread`) when recalled.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::durable::{next_frame, u32_at, FRAME_HEADER};

use super::{Batch, BATCH_MAGIC};

/// The session id of a journal record (bytes 8..16), if it has one.
pub fn session_of(record: &[u8]) -> Option<u64> {
    crate::durable::u64_at(record, 8)
}

/// A record's place: its offset in the file and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    at: u64,
    len: u32,
}

/// The latest record of each session in a journal file.
#[derive(Debug, Default)]
pub struct Index {
    latest: HashMap<u64, Place>,
}

impl Index {
    /// The index of the batches in `bytes` (a journal file's good
    /// batches, from its start).
    pub fn of(bytes: &[u8]) -> Index {
        let mut index = Index::default();
        let mut at = 0;
        while let Some((payload, next)) = next_frame(BATCH_MAGIC, bytes, at) {
            index.add_batch(at as u64, payload);
            at = next;
        }
        index
    }

    /// Notes the records of the batch whose payload is `payload`, its
    /// frame at offset `at` of the file.
    pub fn add_batch(&mut self, at: u64, payload: &[u8]) {
        let Some(b) = Batch::parse(payload) else {
            return;
        };
        self.add_records(records_at(at, b.records_path.len()), b.records());
    }

    /// Notes `records` (in the order written), the first of whose length
    /// prefixes is at offset `at` of the file.
    pub fn add_records<'a>(&mut self, at: u64, records: impl Iterator<Item = &'a [u8]>) {
        let mut offset = at;
        for r in records {
            offset += 4;
            if let (Some(session), Ok(len)) = (session_of(r), u32::try_from(r.len())) {
                self.latest.insert(session, Place { at: offset, len });
            }
            offset += r.len() as u64;
        }
    }

    /// Sessions indexed.
    pub fn len(&self) -> usize {
        self.latest.len()
    }

    /// Whether no session is indexed.
    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }

    /// The latest record of every session, in the order they were
    /// written, as slices of `bytes` (the file the index was made of).
    pub fn latest<'a>(&self, bytes: &'a [u8]) -> Vec<&'a [u8]> {
        self.latest_ranges(bytes)
            .into_iter()
            .filter_map(|r| bytes.get(r))
            .collect()
    }

    /// Where [`latest`](Self::latest)'s records are in `bytes`.
    pub fn latest_ranges(&self, bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
        let mut places: Vec<Place> = self.latest.values().copied().collect();
        places.sort_unstable_by_key(|p| p.at);
        places
            .into_iter()
            .map(|p| p.at as usize..p.at as usize + p.len as usize)
            .filter(|r| r.end <= bytes.len())
            .collect()
    }

    /// The latest record of `session`, read from `file`.
    pub fn read(&self, file: &File, session: u64) -> Option<Vec<u8>> {
        let p = self.latest.get(&session)?;
        let mut out = vec![0u8; p.len as usize];
        file.read_exact_at(&mut out, p.at).ok()?;
        // A place always holds the record it was made for; checked anyway.
        (session_of(&out) == Some(session)).then_some(out)
    }
}

/// Where the records of a batch framed at offset `at`, naming a records
/// path of `path_len` bytes, begin: after the frame header, the path's
/// length and the path, and the commit point.
pub fn records_at(at: u64, path_len: usize) -> u64 {
    at + FRAME_HEADER as u64 + 4 + path_len as u64 + 8
}

/// The records of `pending` (length-prefixed, as a batch holds them),
/// in order.
pub fn records(pending: &[u8]) -> impl Iterator<Item = &[u8]> + '_ {
    let mut at = 0;
    core::iter::from_fn(move || {
        let n = u32_at(pending, at)? as usize;
        let r = pending.get(at + 4..(at + 4).checked_add(n)?)?;
        at += 4 + n;
        Some(r)
    })
}

/// The records of `pending` (length-prefixed, as a batch holds them),
/// the latest for `session` if there is one.
pub fn pending_record(pending: &[u8], session: u64) -> Option<&[u8]> {
    records(pending)
        .filter(|r| session_of(r) == Some(session))
        .last()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::journal::push_record;

    fn record(session: u64, tag: u8) -> Vec<u8> {
        let mut r = vec![tag; 30];
        r[8..16].copy_from_slice(&session.to_le_bytes());
        r
    }

    fn batch(path: &str, records: &[Vec<u8>]) -> Vec<u8> {
        let mut recs = Vec::new();
        for r in records {
            push_record(r, &mut recs);
        }
        let mut out = Vec::new();
        Batch::encode(path.as_bytes(), 0, &recs, &mut out);
        out
    }

    #[test]
    fn the_index_finds_the_latest_record_of_each_session_in_write_order() {
        let mut bytes = batch("/a", &[record(1, 1), record(2, 1)]);
        bytes.extend(batch("/bb", &[record(1, 2), record(3, 1)]));
        bytes.extend(batch("", &[record(2, 3)]));
        let index = Index::of(&bytes);
        assert_eq!(index.len(), 3);
        let latest = index.latest(&bytes);
        assert_eq!(
            latest,
            vec![&record(1, 2)[..], &record(3, 1), &record(2, 3)],
            "one per session, in the order written"
        );
        let path = std::env::temp_dir().join(format!("iomsg-index-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        assert_eq!(index.read(&file, 1), Some(record(1, 2)));
        assert_eq!(index.read(&file, 4), None);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_pending_record_is_found_newest_first() {
        let mut pending = Vec::new();
        push_record(&record(5, 1), &mut pending);
        push_record(&record(6, 1), &mut pending);
        push_record(&record(5, 2), &mut pending);
        assert_eq!(pending_record(&pending, 5), Some(&record(5, 2)[..]));
        assert_eq!(pending_record(&pending, 7), None);
    }
}
