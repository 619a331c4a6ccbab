//! The outbox's entries written, read back, compacted; a torn tail cut,
//! damage refused; answered reads, a finished session, one outbox per
//! server.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use super::*;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iomsg-outbox-unit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn job(dir: &Path, compact_over: u64) -> OutboxJob {
    OutboxJob {
        dir: dir.to_path_buf(),
        sync: SyncPolicy::None,
        compact_over,
    }
}

fn data(sn: u64) -> Vec<u8> {
    vec![sn as u8; 100 + sn as usize]
}

#[test]
fn compaction_keeps_the_identity_the_point_and_the_unreleased_messages() {
    let dir = scratch("compact");
    let (mut o, stored) = Outbox::open(&job(&dir, 4000)).unwrap();
    assert!(stored.identity.is_none());
    o.identity(0xabc, 0xdef);
    o.note(ResumePoint::new(0, 0));
    for sn in 0..50 {
        let d = data(sn);
        if sn % 7 == 3 {
            o.message(
                sn,
                &Message::Read {
                    len: 77,
                    request: &d[..3],
                },
            );
        } else {
            o.message(sn, &Message::Write(&d));
        }
    }
    o.note(ResumePoint::new(30, 3000).trusting(11, 22));
    o.write().unwrap();
    let before = o.len();
    assert!(o.compact_if_large().unwrap());
    assert!(o.len() < before / 2, "{} of {before}", o.len());
    assert!(!o.compact_if_large().unwrap());
    o.message(50, &Message::Write(&data(50)));
    o.write().unwrap();
    drop(o);
    let (_o, s) = Outbox::open(&job(&dir, 4000)).unwrap();
    assert_eq!(s.identity, Some((0xabc, 0xdef)));
    assert_eq!(
        s.point,
        Point {
            base: 30,
            reservation: 3000 + EPOCH_RESERVE,
            instance: Some(11),
            incarnation: Some(22)
        }
    );
    assert_eq!(
        s.messages.keys().copied().collect::<Vec<_>>(),
        (30..51).collect::<Vec<_>>()
    );
    for (&sn, m) in &s.messages {
        if sn % 7 == 3 {
            assert_eq!(
                (m.op, m.read_len, &m.bytes[..]),
                (RequestOp::Read, 77, &data(sn)[..3])
            );
        } else {
            assert_eq!((m.op, &m.bytes), (RequestOp::Write, &data(sn)));
        }
    }
    assert_eq!(
        s.resume_point(),
        ResumePoint::new(30, 3000 + EPOCH_RESERVE).trusting(11, 22)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_epoch_reservation_is_renewed_only_near_its_end() {
    let dir = scratch("epoch");
    let (mut o, _) = Outbox::open(&job(&dir, u64::MAX)).unwrap();
    o.note(ResumePoint::new(0, 1));
    assert_eq!(o.reservation(), 1 + EPOCH_RESERVE);
    o.write().unwrap();
    let len = o.len();
    o.note(ResumePoint::new(0, 1 + EPOCH_RESERVE - RENEW_WITHIN));
    o.write().unwrap();
    assert_eq!(
        (o.reservation(), o.len()),
        (1 + EPOCH_RESERVE, len),
        "not yet"
    );
    o.note(ResumePoint::new(0, 2 + EPOCH_RESERVE - RENEW_WITHIN));
    assert_eq!(o.reservation(), 2 + 2 * EPOCH_RESERVE - RENEW_WITHIN);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_last_entry_is_dropped_and_the_rest_kept() {
    let dir = scratch("torn");
    let (mut o, _) = Outbox::open(&job(&dir, u64::MAX)).unwrap();
    o.identity(1, 2);
    o.message(0, &Message::Write(&data(0)));
    o.write().unwrap();
    let good = o.len();
    o.message(1, &Message::Write(&data(1)));
    o.write().unwrap();
    let whole = o.len();
    drop(o);
    for cut in good..whole {
        let f = dir.join("outbox");
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..cut as usize]).unwrap();
        let (o, s) = Outbox::open(&job(&dir, u64::MAX)).unwrap();
        assert_eq!(s.messages.len(), 1, "cut at {cut}");
        assert_eq!(s.dropped, cut - good);
        assert_eq!(o.len(), good);
        if let Some(t) = &s.torn {
            assert_eq!(t.offset, good);
            let kept = std::fs::read(&t.evidence).unwrap();
            assert_eq!(kept, &bytes[good as usize..cut as usize]);
        }
        assert_eq!(s.torn.is_some(), cut > good);
        drop(o);
        std::fs::write(&f, &bytes).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An outbox with an identity and three messages.
fn three_messages(dir: &Path) -> Vec<u8> {
    let (mut o, _) = Outbox::open(&job(dir, u64::MAX)).unwrap();
    o.identity(1, 2);
    o.note(ResumePoint::new(0, 0));
    for sn in 0..3 {
        o.message(sn, &Message::Write(&data(sn)));
    }
    o.write().unwrap();
    drop(o);
    std::fs::read(dir.join("outbox")).unwrap()
}

#[test]
fn a_damaged_identity_is_refused_never_replaced_by_a_new_session() {
    let dir = scratch("identity");
    let good = three_messages(&dir);
    let path = dir.join("outbox");
    for at in 0..durable::FRAME_HEADER + 17 {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let err = Outbox::open(&job(&dir, u64::MAX)).unwrap_err();
        let named = format!("the outbox {} is damaged at offset 0", path.display());
        assert!(err.contains(&named), "byte {at}: {err}");
        assert!(err.contains("never sent"), "{err}");
        assert!(err.contains("can be read back"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), bad, "byte {at}: changed");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_outbox_whose_first_entry_is_not_its_identity_is_refused() {
    let dir = scratch("first");
    let good = three_messages(&dir);
    // The identity entry (12 + 17 bytes) taken out: frames that hold.
    let rest = &good[durable::FRAME_HEADER + 17..];
    std::fs::write(dir.join("outbox"), rest).unwrap();
    let err = Outbox::open(&job(&dir, u64::MAX)).unwrap_err();
    assert!(err.contains("at offset 0"), "{err}");
    assert!(
        err.contains("the first entry is of kind 2, not the identity"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join("outbox")).unwrap(), rest);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn answered_reads_and_a_finished_session_are_kept_across_reopening_and_compaction() {
    let dir = scratch("answered");
    let (mut o, _) = Outbox::open(&job(&dir, 2000)).unwrap();
    o.identity(7, 8);
    o.note(ResumePoint::new(0, 0));
    for sn in 0..30 {
        let d = data(sn);
        if sn % 3 == 0 {
            o.message(
                sn,
                &Message::Read {
                    len: 64,
                    request: &d[..2],
                },
            );
        } else {
            o.message(sn, &Message::Write(&d));
        }
    }
    // Reads 3, 6 and 9 answered; 0 still waits: nothing is released.
    for sn in [3, 6, 9, 4] {
        o.answered(sn);
    }
    o.write().unwrap();
    drop(o);
    let (mut o, s) = Outbox::open(&job(&dir, 2000)).unwrap();
    assert_eq!(
        s.answered.iter().copied().collect::<Vec<_>>(),
        vec![3, 6, 9],
        "reads only"
    );
    assert!(s.resumes());
    // Released past 6: what is below goes, answers with it.
    o.note(ResumePoint::new(7, 0));
    o.write().unwrap();
    for sn in 30..60 {
        o.message(sn, &Message::Write(&data(sn)));
    }
    o.write().unwrap();
    assert!(o.compact_if_large().unwrap());
    drop(o);
    let (mut o, s) = Outbox::open(&job(&dir, 2000)).unwrap();
    assert_eq!(s.answered.iter().copied().collect::<Vec<_>>(), vec![9]);
    assert_eq!(s.messages.keys().next(), Some(&7));
    o.finished().unwrap();
    drop(o);
    let (mut o, s) = Outbox::open(&job(&dir, 2000)).unwrap();
    assert!(
        s.finished && !s.resumes(),
        "a finished session is not resumed"
    );
    o.start_over(9, 10).unwrap();
    drop(o);
    let (_o, s) = Outbox::open(&job(&dir, 2000)).unwrap();
    assert_eq!(s.identity, Some((9, 10)));
    assert!(s.resumes() && s.messages.is_empty() && s.answered.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn several_servers_keep_an_outbox_each_and_a_one_server_outbox_is_not_mixed_in() {
    let dir = scratch("servers");
    let j = job(&dir, u64::MAX);
    use crate::transport::{Place, Transport};
    let a = Place::parse(Transport::Ucx, "127.0.0.1:1000", 1).unwrap();
    let b = Place::parse(Transport::Ucx, "[::1]:2000", 1).unwrap();
    let c = Place::parse(Transport::Tcp, "[::1]:2000", 1).unwrap();
    let d = Place::parse(Transport::Unix, "unix:/run/x.sock", 1).unwrap();
    assert_eq!(j.for_server(1, &a).unwrap().dir, dir);
    assert_eq!(
        j.for_server(2, &a).unwrap().dir,
        dir.join("server-127.0.0.1-1000")
    );
    assert_eq!(
        j.for_server(2, &b).unwrap().dir,
        dir.join("server-__1-2000")
    );
    assert_eq!(
        j.for_server(2, &c).unwrap().dir,
        dir.join("server-__1-2000")
    );
    assert_eq!(
        j.for_server(2, &d).unwrap().dir,
        dir.join("server-unix-_run_x.sock")
    );
    let (o, _) = Outbox::open(&j).unwrap();
    drop(o);
    let e = j.for_server(2, &a).unwrap_err();
    assert!(
        e.contains("holds the outbox of a client of one server"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
