//! The read path's rules, byte by byte: torn tails cut, damage refused,
//! evidence kept, the directory lock.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use super::scan::valid_after;
use super::*;

const MAGIC: [u8; 4] = *b"TEST";

/// Three frames; the offsets of the second and the third.
fn three() -> (Vec<u8>, usize, usize) {
    let mut f = Vec::new();
    frame(MAGIC, b"first payload", &mut f);
    let mid = f.len();
    frame(MAGIC, b"the middle frame's payload", &mut f);
    let last = f.len();
    frame(MAGIC, b"the last frame, its payload", &mut f);
    (f, mid, last)
}

fn any(_: &[u8]) -> Result<(), String> {
    Ok(())
}

/// The offset and flaw of damage, or a panic naming what `s` is.
fn damaged(s: &Scan) -> (usize, &Flaw, &After) {
    match &s.tail {
        Tail::Damaged { flaw, after } => (s.end, flaw, after),
        other => panic!("not damage: {other:?}"),
    }
}

/// A seeded xorshift: the same bytes every run.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("iomsg-durable-unit-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_last_frame_cut_at_every_byte_is_a_torn_tail() {
    let (f, _, last) = three();
    assert_eq!(scan(MAGIC, &f, any).tail, Tail::Clean);
    assert_eq!(scan(MAGIC, &f[..last], any).tail, Tail::Clean);
    for cut in last + 1..f.len() {
        let s = scan(MAGIC, &f[..cut], any);
        assert_eq!((s.end, s.frames), (last, 2), "cut at {cut}");
        let have = (cut - last) as u64;
        let need = if have < 12 {
            12
        } else {
            (f.len() - last) as u64
        };
        assert_eq!(
            s.tail,
            Tail::Torn(Flaw::Incomplete { have, need }),
            "cut at {cut}"
        );
    }
}

#[test]
fn a_byte_changed_anywhere_in_a_middle_frame_is_damage_naming_its_offset() {
    let (f, mid, last) = three();
    for at in mid..last {
        for mask in [0x01, 0x80, 0xff] {
            let mut g = f.clone();
            g[at] ^= mask;
            let s = scan(MAGIC, &g, any);
            let (end, _, after) = damaged(&s);
            assert_eq!((end, s.frames), (mid, 1), "byte {at} ^ {mask:#x}");
            let want = After {
                frames: 1,
                bytes: (f.len() - last) as u64,
                first: Some(last as u64),
                gave_up: false,
            };
            assert_eq!(after, &want, "byte {at} ^ {mask:#x}");
        }
    }
}

#[test]
fn a_byte_changed_anywhere_in_the_complete_last_frame_is_damage() {
    let (f, _, last) = three();
    for at in last..f.len() {
        for mask in [0x01, 0x80, 0xff] {
            let mut g = f.clone();
            g[at] ^= mask;
            let s = scan(MAGIC, &g, any);
            let (end, flaw, after) = damaged(&s);
            assert_eq!(end, last, "byte {at} ^ {mask:#x}");
            assert!(flaw.is_change(), "byte {at} ^ {mask:#x}: {flaw}");
            assert_eq!(after.frames, 0);
            let payload = at >= last + FRAME_HEADER;
            assert!(
                !payload || matches!(flaw, Flaw::Checksum { .. }),
                "byte {at}: {flaw}"
            );
        }
    }
}

#[test]
fn zeros_or_garbage_appended_are_a_torn_tail() {
    let (f, _, _) = three();
    for n in 1..64 {
        for tail in [vec![0u8; n], noise(n as u64, n)] {
            let mut g = f.clone();
            g.extend_from_slice(&tail);
            let s = scan(MAGIC, &g, any);
            assert_eq!((s.end, s.frames), (f.len(), 3), "{tail:?}");
            assert!(
                matches!(s.tail, Tail::Torn(Flaw::BadMagic { .. })),
                "{tail:?}: {:?}",
                s.tail
            );
        }
    }
    // A header that begins garbage: torn whatever it claims.
    let mut g = f.clone();
    g.extend_from_slice(b"TEST\xff\xff\xff\xff\0\0\0\0");
    assert!(matches!(
        scan(MAGIC, &g, any).tail,
        Tail::Damaged {
            flaw: Flaw::TooLong { claimed: u32::MAX },
            ..
        }
    ));
    g[f.len() + 7] = 0;
    let s = scan(MAGIC, &g, any);
    let need = (FRAME_HEADER + 0xff_ffff) as u64;
    assert_eq!(s.tail, Tail::Torn(Flaw::Incomplete { have: 12, need }));
}

#[test]
fn a_cut_frame_at_the_end_is_torn_but_before_valid_frames_is_damage() {
    let (f, mid, last) = three();
    for k in 1..last - mid {
        // A truncation: the middle frame cut, nothing after it.
        let s = scan(MAGIC, &f[..mid + k], any);
        assert_eq!(s.end, mid);
        assert!(matches!(s.tail, Tail::Torn(Flaw::Incomplete { .. })), "{k}");
        // A splice: the cut frame followed by the last one.
        let mut g = f[..mid + k].to_vec();
        g.extend_from_slice(&f[last..]);
        let s = scan(MAGIC, &g, any);
        let (end, _, after) = damaged(&s);
        assert_eq!((end, after.frames), (mid, 1), "{k}");
        assert_eq!(after.first, Some((mid + k) as u64), "{k}");
    }
}

#[test]
fn a_frame_whose_payload_does_not_parse_is_damage_even_last() {
    let (f, mid, last) = three();
    let refuse = |at: &'static [u8]| {
        move |p: &[u8]| match p.starts_with(at) {
            true => Err("it is refused".to_string()),
            false => Ok(()),
        }
    };
    let s = scan(MAGIC, &f, refuse(b"the middle"));
    let (end, flaw, after) = damaged(&s);
    assert_eq!((end, after.frames), (mid, 1));
    assert_eq!(
        flaw.to_string(),
        "a frame whose checksum holds but it is refused"
    );
    let s = scan(MAGIC, &f, refuse(b"the last"));
    let (end, flaw, after) = damaged(&s);
    assert_eq!((end, after.frames), (last, 0));
    assert!(matches!(flaw, Flaw::Malformed { .. }));
}

#[test]
fn bad_bytes_never_panic_and_every_good_frame_is_kept() {
    let (f, _, _) = three();
    for seed in 1..3000u64 {
        let n = (seed % 97) as usize;
        let mut g = f[..(seed as usize * 7) % f.len()].to_vec();
        let mut junk = noise(seed, n);
        if seed % 3 == 0 && n >= 4 {
            junk[..4].copy_from_slice(&MAGIC);
        }
        g.extend_from_slice(&junk);
        let s = scan(MAGIC, &g, any);
        assert!(s.end <= g.len());
        let (clean, _, _) = three();
        let whole = scan(MAGIC, &clean, any);
        assert!(s.frames <= whole.frames);
    }
    let mut huge = Vec::from(MAGIC);
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    huge.extend_from_slice(&[0; 4]);
    assert!(matches!(
        scan(MAGIC, &huge, any).tail,
        Tail::Damaged {
            flaw: Flaw::TooLong { .. },
            ..
        }
    ));
    assert!(valid_after(MAGIC, &huge, usize::MAX).frames == 0);
}

#[test]
fn the_search_after_a_bad_frame_stops_within_its_budget_and_refuses() {
    // Frame-like bytes everywhere, each claiming the rest of the file.
    let n = 4096;
    let mut g = vec![0u8; n];
    for q in (0..n - FRAME_HEADER).step_by(FRAME_HEADER) {
        let claim = (n - q - FRAME_HEADER) as u32;
        g[q..q + 4].copy_from_slice(&MAGIC);
        g[q + 4..q + 8].copy_from_slice(&claim.to_le_bytes());
    }
    let after = valid_after(MAGIC, &g, 1);
    assert_eq!(after.frames, 0);
    assert!(!after.gave_up, "4 KiB is within the slack");
    let big = g.repeat(256);
    let after = valid_after(MAGIC, &big, 1);
    assert!(after.gave_up, "a quadratic search is cut short");
    assert!(matches!(scan(MAGIC, &big, any).tail, Tail::Damaged { .. }));
}

#[test]
fn a_torn_tail_is_kept_beside_the_file_before_the_cut_and_evidence_never_overwritten() {
    let dir = scratch("evidence");
    let path = dir.join("log");
    let (f, _, last) = three();
    let names = [format!("log.torn-{last}"), format!("log.torn-{last}-2")];
    for (round, name) in [(1, &names[0]), (2, &names[1])] {
        let torn = &f[last..f.len() - round];
        let mut bytes = f[..last].to_vec();
        bytes.extend_from_slice(torn);
        std::fs::write(&path, &bytes).unwrap();
        let mut file = open_append(&path).unwrap();
        let got = read_frames(&mut file, &path, SyncPolicy::Always, MAGIC, any).unwrap();
        assert_eq!((got.bytes.as_slice(), got.frames), (&f[..last], 2));
        let t = got.torn.unwrap();
        assert_eq!((t.offset, t.len), (last as u64, torn.len() as u64));
        assert_eq!(t.evidence, dir.join(name));
        assert_eq!(std::fs::read(&t.evidence).unwrap(), torn);
        assert_eq!(std::fs::read(&path).unwrap(), &f[..last]);
        assert!(
            t.to_string().contains(&format!("cut at offset {last}")),
            "{t}"
        );
    }
    let first = std::fs::read(dir.join(&names[0])).unwrap();
    assert_eq!(first, &f[last..f.len() - 1], "never overwritten");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damage_is_refused_naming_the_file_and_offset_and_nothing_changes() {
    let dir = scratch("damage");
    let path = dir.join("log");
    let (mut f, mid, last) = three();
    f[mid + 20] ^= 4;
    std::fs::write(&path, &f).unwrap();
    let mut file = open_append(&path).unwrap();
    let err = read_frames(&mut file, &path, SyncPolicy::Always, MAGIC, any).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ReadError::Damaged(Damage { offset, before: 1, .. }) if offset == mid as u64)
    );
    for part in [
        format!(
            "{} is damaged at offset {mid}: a checksum mismatch",
            path.display()
        ),
        format!(
            "1 good frame before it, 1 valid frame ({} bytes) follows it, the first at \
             offset {last}",
            f.len() - last
        ),
        "the file was left as it is".to_string(),
    ] {
        assert!(text.contains(&part), "{part:?} not in {text}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), f);
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["log"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_locked_directory_stays_locked_whatever_becomes_of_its_files() {
    let dir = scratch("lock");
    std::fs::write(dir.join("lock"), b"").unwrap();
    std::fs::write(dir.join("journal"), b"").unwrap();
    let held = lock_dir(&dir, "test directory").unwrap();
    std::fs::remove_file(dir.join("lock")).unwrap();
    std::fs::write(dir.join("journal.tmp"), b"x").unwrap();
    std::fs::rename(dir.join("journal.tmp"), dir.join("journal")).unwrap();
    std::fs::remove_file(dir.join("journal")).unwrap();
    let err = lock_dir(&dir, "test directory").unwrap_err();
    assert!(
        err.contains("is in use: another process holds its lock"),
        "{err}"
    );
    drop(held);
    assert!(lock_dir(&dir, "test directory").is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

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
