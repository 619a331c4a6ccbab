//! Tests of the receive tracker's edges. Its runs against the reference
//! model are with the model, in `iomsg-fuzz-bodies`.

// A one-range Vec is a list of lost ranges that holds one range.
#![allow(clippy::single_range_in_vec_init)]

use super::*;
use std::vec;
use std::vec::Vec;

/// A 64-sn window (two words).
type Tiny = RecvTracker<2>;

fn commit_all<const W: usize>(t: &mut RecvTracker<W>, sn: u64) -> (Arrival, Vec<Range<u64>>) {
    let mut lost = Vec::new();
    let verdict = t.commit(sn, |r| lost.push(r));
    (verdict, lost)
}

fn give_up<const W: usize>(t: &mut RecvTracker<W>, end: u64) -> Vec<Range<u64>> {
    let mut lost = Vec::new();
    t.give_up_to(end, |r| lost.push(r))
        .unwrap_or_else(|e| panic!("give_up_to({end}): {e}"));
    lost
}

fn holes<const W: usize>(t: &RecvTracker<W>) -> Vec<Range<u64>> {
    t.holes().collect()
}

/// splitmix64, for seeded test input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn open_holes_to_opens_exactly_the_probed_tail() {
    let mut t = Tiny::default();
    assert_eq!(commit_all(&mut t, 0).0, Arrival::InOrder);
    assert_eq!(t.open_holes_to(4), Ok(1..4));
    assert_eq!((t.cumulative(), t.top(), t.missing()), (1, 4, 3));
    assert_eq!(holes(&t), [1..4]);
    // Already behind top: nothing more opens.
    assert_eq!(t.open_holes_to(3), Ok(4..4));
    assert_eq!(t.check(3), Arrival::FillsGap);
    assert_eq!(commit_all(&mut t, 4).0, Arrival::InOrder);
    assert_eq!(commit_all(&mut t, 1).0, Arrival::FillsGap);
    assert_eq!(holes(&t), [2..4]);
}

#[test]
fn open_holes_to_refuses_past_the_window_and_changes_nothing() {
    let mut t = Tiny::default();
    // cum 0: a window of 64 sns allows ends up to 64.
    assert_eq!(
        t.open_holes_to(65),
        Err(SeqError::TooFar { sn: 65, cum: 0 })
    );
    assert_eq!(t, Tiny::default());
    assert_eq!(t.open_holes_to(64), Ok(0..64));
    assert_eq!((t.cumulative(), t.top(), t.missing()), (0, 64, 64));
    // Every sn in the window is still deliverable once.
    for sn in 0..64 {
        assert_eq!(
            commit_all(&mut t, sn),
            (Arrival::FillsGap, vec![]),
            "sn {sn}"
        );
    }
    assert_eq!((t.cumulative(), t.missing()), (64, 0));
    let near_max = RecvTracker::<2>::try_new(SN_MAX).unwrap();
    let mut m = near_max.clone();
    assert_eq!(
        m.open_holes_to(SN_MAX + 2),
        Err(SeqError::OutOfRange { sn: SN_MAX + 2 })
    );
    assert_eq!(m, near_max);
    assert_eq!(m.open_holes_to(SN_MAX + 1), Ok(SN_MAX..SN_MAX + 1));
}

#[test]
fn open_holes_to_matches_a_model_over_random_runs() {
    for seed in 0..20u64 {
        let mut rng = Rng(seed);
        let mut t = RecvTracker::<3>::default();
        // The model: which sns arrived, and the top.
        let mut seen = vec![false; 4096];
        let mut top = 0u64;
        for _ in 0..2000 {
            let cum = t.cumulative();
            if rng.below(4) == 0 {
                let end = cum + rng.below(140);
                let r = t.open_holes_to(end);
                if end - cum > 128 {
                    assert!(r.is_err(), "seed {seed}: end {end} cum {cum}");
                } else {
                    assert_eq!(r, Ok(top..end.max(top)), "seed {seed}");
                    top = top.max(end);
                }
            } else {
                let sn = cum + rng.below(128);
                if sn as usize >= seen.len() {
                    break;
                }
                let (v, lost) = commit_all(&mut t, sn);
                // Within a window of cum nothing slides out, and an sn
                // at or past cum is new unless it arrived before.
                assert_eq!(lost, vec![], "seed {seed}");
                assert_eq!(v.delivers(), !seen[sn as usize], "seed {seed}: sn {sn}");
                if v.delivers() {
                    seen[sn as usize] = true;
                    top = top.max(sn + 1);
                }
            }
            let model_missing = (t.cumulative()..top).filter(|&s| !seen[s as usize]).count();
            assert_eq!(t.top(), top, "seed {seed}");
            assert_eq!(t.missing(), model_missing as u64, "seed {seed}");
            assert!(
                t.cumulative() == top || !seen[t.cumulative() as usize],
                "seed {seed}: cum must sit on a hole"
            );
        }
    }
}

#[test]
fn window_is_words_minus_one_times_64() {
    assert_eq!(DefaultTracker::WINDOW, 2048);
    assert_eq!(Tiny::WINDOW, 64);
    assert_eq!(RecvTracker::<3>::WINDOW, 128);
}

#[test]
fn in_order_run_moves_cum_and_top_together() {
    let mut t = DefaultTracker::try_new(5).unwrap();
    for sn in 5..5 + 10_000 {
        assert_eq!(commit_all(&mut t, sn), (Arrival::InOrder, vec![]));
    }
    assert_eq!(
        (t.cumulative(), t.top(), t.missing(), t.lost()),
        (10_005, 10_005, 0, 0)
    );
    assert_eq!(holes(&t), vec![]);
    assert_eq!(t.check(10_004), Arrival::Duplicate);
}

#[test]
fn in_order_fast_path_clears_the_word_it_enters() {
    // Three words (a 192-sn ring): after 0..192 in order the ring slot
    // of 192..256 last held 0..64, all received. Entering it must clear
    // it, or 192 and 193 would read as received.
    let mut t = RecvTracker::<3>::default();
    for sn in 0..192 {
        assert_eq!(commit_all(&mut t, sn).0, Arrival::InOrder);
    }
    assert_eq!(
        commit_all(&mut t, 194).0,
        Arrival::Gap { missing: 192..194 }
    );
    assert_eq!(holes(&t), vec![192..194]);
    assert_eq!(t.check(192), Arrival::FillsGap);
    assert_eq!(t.check(193), Arrival::FillsGap);
}

#[test]
fn gap_opens_holes_that_late_arrivals_fill() {
    let mut t = DefaultTracker::default();
    assert_eq!(commit_all(&mut t, 0).0, Arrival::InOrder);
    assert_eq!(commit_all(&mut t, 5).0, Arrival::Gap { missing: 1..5 });
    assert_eq!((t.cumulative(), t.top(), t.missing()), (1, 6, 4));
    assert_eq!(holes(&t), vec![1..5]);
    assert_eq!(commit_all(&mut t, 3).0, Arrival::FillsGap);
    assert_eq!(holes(&t), vec![1..3, 4..5]);
    assert_eq!(commit_all(&mut t, 3).0, Arrival::Duplicate);
    assert_eq!(commit_all(&mut t, 1).0, Arrival::FillsGap);
    assert_eq!((t.cumulative(), t.missing()), (2, 2));
    assert_eq!(commit_all(&mut t, 2).0, Arrival::FillsGap);
    assert_eq!((t.cumulative(), t.missing()), (4, 1));
    assert_eq!(commit_all(&mut t, 4).0, Arrival::FillsGap);
    assert_eq!(
        (t.cumulative(), t.top(), t.missing(), t.lost()),
        (6, 6, 0, 0)
    );
}

#[test]
fn edges_w_minus_1_w_w_plus_1_relative_to_top() {
    for start in [0, 37, 64, 1_000_003, SN_MAX - 5000] {
        let t = DefaultTracker::try_new(start).unwrap();
        let w = DefaultTracker::WINDOW;
        assert_eq!(
            t.check(start + w - 1),
            Arrival::Gap {
                missing: start..start + w - 1
            }
        );
        assert_eq!(
            t.check(start + w),
            Arrival::TooFar {
                sn: start + w,
                top: start
            }
        );
        assert_eq!(
            t.check(start + w + 1),
            Arrival::TooFar {
                sn: start + w + 1,
                top: start
            }
        );
        // The furthest accepted sn slides nothing out and leaves W-1 holes.
        let mut t2 = t.clone();
        let (verdict, lost) = commit_all(&mut t2, start + w - 1);
        assert!(verdict.delivers() && lost.is_empty());
        assert_eq!(
            (t2.cumulative(), t2.top(), t2.missing()),
            (start, start + w, w - 1)
        );
    }
}

#[test]
fn holes_slide_out_as_lost_once_in_maximal_ranges() {
    let mut t = Tiny::default();
    commit_all(&mut t, 0);
    assert_eq!(
        commit_all(&mut t, 3),
        (Arrival::Gap { missing: 1..3 }, vec![])
    );
    assert_eq!(
        commit_all(&mut t, 65),
        (Arrival::Gap { missing: 4..65 }, vec![1..2])
    );
    assert_eq!((t.cumulative(), t.top(), t.lost()), (2, 66, 1));
    // Floor 67: 2 slides out, 3 arrived, cum stops at the hole 4.
    assert_eq!(commit_all(&mut t, 66), (Arrival::InOrder, vec![2..3]));
    assert_eq!((t.cumulative(), t.lost(), t.missing()), (4, 2, 61));
    // Floor 67: the holes 4..65 slide out as one range; 65 and 66 arrived.
    assert_eq!(
        commit_all(&mut t, 130),
        (Arrival::Gap { missing: 67..130 }, vec![4..65])
    );
    assert_eq!((t.cumulative(), t.top(), t.lost()), (67, 131, 63));
    // A lost sn that arrives later is a duplicate.
    assert_eq!(t.check(2), Arrival::Duplicate);
    assert_eq!(t.check(64), Arrival::Duplicate);
}

#[test]
fn refused_calls_leave_state_unchanged() {
    let mut t = DefaultTracker::try_new(100).unwrap();
    commit_all(&mut t, 100);
    commit_all(&mut t, 140);
    commit_all(&mut t, 120);
    let before = t.clone();
    for sn in [
        99,
        100,
        120,
        140,
        141 + 2048,
        141 + 4096,
        SN_MAX,
        SN_MAX + 1,
        u64::MAX,
    ] {
        let (verdict, lost) = commit_all(&mut t, sn);
        assert!(!verdict.delivers(), "{sn}: {verdict:?}");
        assert!(lost.is_empty());
        assert_eq!(t, before, "refused {sn} changed the tracker");
    }
    let mut lost = Vec::new();
    assert_eq!(
        t.give_up_to(SN_MAX + 1, |r| lost.push(r)),
        Err(SeqError::OutOfRange { sn: SN_MAX + 1 })
    );
    assert_eq!(t.give_up_to(101, |r| lost.push(r)), Ok(()));
    assert!(lost.is_empty());
    assert_eq!(t, before);
}

#[test]
fn huge_jumps_near_sn_max_are_refused_not_wrapped() {
    let mut t = DefaultTracker::default();
    assert_eq!(
        commit_all(&mut t, u64::MAX).0,
        Arrival::OutOfRange { sn: u64::MAX }
    );
    assert_eq!(
        commit_all(&mut t, SN_MAX).0,
        Arrival::TooFar { sn: SN_MAX, top: 0 }
    );
    assert_eq!(t, DefaultTracker::default());

    let mut t = DefaultTracker::try_new(SN_MAX - 5).unwrap();
    assert_eq!(
        commit_all(&mut t, SN_MAX).0,
        Arrival::Gap {
            missing: SN_MAX - 5..SN_MAX
        }
    );
    assert_eq!(t.top(), SN_MAX + 1);
    assert_eq!(
        commit_all(&mut t, SN_MAX + 1).0,
        Arrival::OutOfRange { sn: SN_MAX + 1 }
    );
    assert_eq!(commit_all(&mut t, SN_MAX - 1).0, Arrival::FillsGap);
    assert_eq!(give_up(&mut t, SN_MAX), vec![SN_MAX - 5..SN_MAX - 1]);
    assert_eq!(
        (t.cumulative(), t.top(), t.missing(), t.lost()),
        (SN_MAX + 1, SN_MAX + 1, 0, 4)
    );
}

#[test]
fn try_new_refuses_a_start_above_sn_max() {
    assert_eq!(
        DefaultTracker::try_new(SN_MAX + 1),
        Err(SeqError::OutOfRange { sn: SN_MAX + 1 })
    );
    let t = DefaultTracker::try_new(SN_MAX).unwrap();
    assert_eq!(t.check(SN_MAX), Arrival::InOrder);
    let message = std::format!("{}", SeqError::OutOfRange { sn: 7 });
    assert!(
        message.contains("sn 7") && message.contains("new session"),
        "{message}"
    );
}

#[test]
fn give_up_to_reports_holes_and_tail_as_maximal_ranges() {
    let mut t = Tiny::try_new(10).unwrap();
    commit_all(&mut t, 12);
    commit_all(&mut t, 15);
    assert_eq!(holes(&t), vec![10..12, 13..15]);
    // Inside the window: gives up 10..12 and 13, keeps 14 open.
    assert_eq!(give_up(&mut t, 14), vec![10..12, 13..14]);
    assert_eq!(
        (t.cumulative(), t.top(), t.missing(), t.lost()),
        (14, 16, 1, 3)
    );
    // Beyond top: the hole 14 merges with nothing (15 arrived); tail 16..1000.
    assert_eq!(give_up(&mut t, 1000), vec![14..15, 16..1000]);
    assert_eq!(
        (t.cumulative(), t.top(), t.missing(), t.lost()),
        (1000, 1000, 0, 3 + 1 + 984)
    );
    // Given-up sns are duplicates; the stream goes on at the give-up point.
    assert_eq!(t.check(999), Arrival::Duplicate);
    assert_eq!(commit_all(&mut t, 1000).0, Arrival::InOrder);
    assert_eq!(
        commit_all(&mut t, 1003).0,
        Arrival::Gap {
            missing: 1001..1003
        }
    );
    // A hole ending at top merges with the tail.
    assert_eq!(give_up(&mut t, 1010), vec![1001..1003, 1004..1010]);
    assert_eq!((t.cumulative(), t.top(), t.missing()), (1010, 1010, 0));
    // Below cum: a no-op.
    assert_eq!(give_up(&mut t, 5), vec![]);
    assert_eq!(t.cumulative(), 1010);
}
