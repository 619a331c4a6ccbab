//! The journal's batches read back, cut, refused, compacted, and the
//! records file brought back to its commit point.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::durable::COMPACT_OVER;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iomsg-journal-unit-{}-{name}", std::process::id()));
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
        assert_eq!(on_disk, good.len() as u64, "the torn tail is cut");
        if let Some(t) = rec.torn {
            assert_eq!(t.offset, good.len() as u64);
            assert_eq!(std::fs::read(&t.evidence).unwrap(), &last[..cut]);
            let name = t.evidence.file_name().unwrap().to_string_lossy();
            assert!(
                name.starts_with(&format!("journal.torn-{}", good.len())),
                "{name}"
            );
        }
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
fn a_changed_byte_anywhere_in_the_last_batch_is_refused_and_nothing_changes() {
    let dir = scratch("flip");
    let first = batch("/a.records", 24, &[b"one"]);
    let second = batch("/a.records", 48, &[b"two", b"three"]);
    for at in 0..second.len() {
        let mut bytes = first.clone();
        let mut changed = second.clone();
        changed[at] ^= 0x40;
        bytes.extend_from_slice(&changed);
        std::fs::write(dir.join("journal"), &bytes).unwrap();
        let err = Journal::open(&dir, SyncPolicy::None, COMPACT_OVER).unwrap_err();
        let path = dir.join("journal");
        let named = format!(
            "the journal {} is damaged at offset {}",
            path.display(),
            first.len()
        );
        assert!(err.contains(&named), "byte {at} changed: {err}");
        assert!(err.contains("left as it is"), "{err}");
        assert!(
            err.contains(&format!("truncate -s {}", first.len())),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "byte {at} changed");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no evidence file"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_batch_whose_checksum_holds_but_does_not_parse_is_refused() {
    let dir = scratch("parse");
    let mut bytes = batch("/a.records", 24, &[b"one"]);
    // A path length past the payload's end.
    frame(BATCH_MAGIC, &[0xff, 0, 0, 0, 1, 2, 3], &mut bytes);
    std::fs::write(dir.join("journal"), &bytes).unwrap();
    let err = Journal::open(&dir, SyncPolicy::None, COMPACT_OVER).unwrap_err();
    assert!(err.contains("its payload is not a batch"), "{err}");
    assert_eq!(std::fs::read(dir.join("journal")).unwrap(), bytes);
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

/// A journal record of `session` (its id at bytes 8..16), told apart by
/// `tag`.
fn rec(session: u64, tag: u8) -> Vec<u8> {
    let mut r = vec![tag; 30];
    r[8..16].copy_from_slice(&session.to_le_bytes());
    r
}

#[test]
fn compaction_keeps_the_latest_record_of_every_session_and_recall_reads_them_back() {
    let dir = scratch("compact");
    let records = dir.join("s.records");
    std::fs::write(&records, [7u8; 600]).unwrap();
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
        j.keep(&rec(u64::from(i % 5), i));
        assert!(j.commit(48 + 24 * u64::from(i), sync).unwrap());
    }
    assert!(
        synced.get() >= 21,
        "--sync always syncs the records each batch"
    );
    assert_eq!(j.recall(3), Some(rec(3, 18)), "from the file");
    j.keep(&rec(3, 99));
    assert_eq!(j.recall(3), Some(rec(3, 99)), "kept since the last batch");
    assert!(j.over_limit());
    j.compact(500, sync).unwrap();
    assert!(!j.over_limit());
    assert_eq!(j.sessions(), 5);
    assert_eq!(j.recall(3), Some(rec(3, 99)), "from the compacted file");
    assert_eq!(j.recall(0), Some(rec(0, 15)));
    assert_eq!(j.recall(7), None);
    drop(j);
    let (_j, rec_) = open(&dir);
    assert_eq!(rec_.batches, 1);
    let latest: Vec<Vec<u8>> = rec_.latest().map(<[u8]>::to_vec).collect();
    assert_eq!(
        latest,
        vec![rec(0, 15), rec(1, 16), rec(2, 17), rec(4, 19), rec(3, 99)],
        "one per session, in the order written"
    );
    assert_eq!(
        rec_.last_commit,
        Some((std::path::absolute(&records).unwrap(), 500))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn batches_whose_records_are_not_there_are_cut_off_and_kept() {
    let dir = scratch("unvouched");
    let records = dir.join("s.records");
    std::fs::write(&records, [7u8; 96]).unwrap();
    let mut bytes = Vec::new();
    let path = std::path::absolute(&records).unwrap();
    let p = path.to_str().unwrap();
    bytes.extend(batch(p, 48, &[&rec(1, 1)]));
    let vouched = bytes.len();
    // The records a power cut took: the file holds 96 bytes, these
    // batches commit 120 and 144.
    bytes.extend(batch(p, 120, &[&rec(1, 2)]));
    bytes.extend(batch(p, 144, &[&rec(2, 1)]));
    std::fs::write(dir.join("journal"), &bytes).unwrap();
    let (j, r) = open(&dir);
    let (u, cut, kept) = r.unvouched.clone().expect("cut back");
    assert_eq!(u.offset, vouched as u64);
    assert_eq!((u.len, u.committed), (96, 120));
    assert_eq!(cut, (bytes.len() - vouched) as u64);
    assert_eq!(std::fs::read(&kept).unwrap(), bytes[vouched..]);
    assert_eq!(j.len(), vouched as u64);
    assert_eq!(r.batches, 1);
    assert_eq!(r.last_commit, Some((path, 48)));
    assert_eq!(r.latest().collect::<Vec<_>>(), vec![&rec(1, 1)[..]]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn under_sync_batch_a_thread_syncs_and_the_commit_never_does() {
    let dir = scratch("background");
    let records = dir.join("s.records");
    std::fs::write(&records, [7u8; 48]).unwrap();
    let (mut j, _) = Journal::open(&dir, SyncPolicy::Batch, COMPACT_OVER).unwrap();
    j.name(&records).unwrap();
    let f = std::fs::File::open(&records).unwrap();
    j.sync_in_background(Some((f, records.clone()))).unwrap();
    let synced = std::cell::Cell::new(0);
    let sync = || {
        synced.set(synced.get() + 1);
        Ok(())
    };
    for i in 0..50u8 {
        j.keep(&rec(1, i));
        assert!(j.commit(48, sync).unwrap());
        j.tick(sync).unwrap();
    }
    assert_eq!(synced.get(), 0, "the serving loop never syncs");
    assert_eq!(j.sync_wait(), None);
    j.sync_now(sync).unwrap();
    assert_eq!(synced.get(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn roll_back_cuts_the_named_file_to_its_commit_point_and_no_further() {
    let dir = scratch("rollback");
    let f = dir.join("s.records");
    std::fs::write(&f, [1u8; 120]).unwrap();
    let commit = (f.clone(), 72);
    std::fs::write(&f, (0..120u8).collect::<Vec<u8>>()).unwrap();
    assert_eq!(
        roll_back(Some(&commit), SyncPolicy::Always).unwrap(),
        Rollback::Cut {
            path: f.clone(),
            from: 120,
            to: 72,
            aside: uncommitted_file(&f),
        }
    );
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 72);
    assert_eq!(
        std::fs::read(uncommitted_file(&f)).unwrap(),
        (72..120u8).collect::<Vec<u8>>(),
        "nothing erased: the records past the commit point are kept aside"
    );
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
