//! The core's sequence tracker and send window against their reference
//! models (`iomsg_fuzz_bodies::seq`): every short sequence of calls around
//! the edges, and seeded random runs.

#![allow(clippy::unwrap_used)]

use iomsg_core::rng::SplitMix64;
use iomsg_core::seq::{Arrival, RecvTracker};
use iomsg_core::wire::SN_MAX;
use iomsg_fuzz_bodies::seq::TrackerPair;

/// The core's SplitMix64 with a modulo draw: the random runs' own
/// generator.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every sequence of up to `depth` calls, each chosen relative to the
/// state among the edges, against the model.
fn explore<const W: usize>(pair: &TrackerPair<W>, depth: u32, seen: &mut [u64; 8]) {
    if depth == 0 {
        return;
    }
    let (cum, top, w) = (
        pair.tracker.cumulative(),
        pair.tracker.top(),
        RecvTracker::<W>::WINDOW,
    );
    let sns = [
        cum.saturating_sub(1),
        cum,
        cum + 1,
        top.saturating_sub(1),
        top,
        top + 1,
        top + 2,
        top + w - 2,
        top + w - 1,
        top + w,
        top + w + 1,
    ];
    for sn in sns {
        let mut next = pair.clone();
        let lost_before = next.tracker.lost();
        let verdict = next.observe(sn, true);
        let kind = match verdict {
            Arrival::InOrder => 0,
            Arrival::Gap { .. } => 1,
            Arrival::FillsGap => 2,
            Arrival::Duplicate => 3,
            Arrival::TooFar { .. } => 4,
            Arrival::OutOfRange { .. } => 5,
        };
        seen[kind] += 1;
        if next.tracker.lost() > lost_before {
            seen[6] += 1;
        }
        explore(&next, depth - 1, seen);
    }
    for end in [cum + 1, top + 1, top + w + 1] {
        let mut next = pair.clone();
        if next.give_up_to(end, true).is_ok() {
            seen[7] += 1;
        }
        explore(&next, depth - 1, seen);
    }
}

#[test]
fn exhaustive_small_window_matches_model() {
    for (start, depth) in [(64 * 5 + 37, 5), (0, 4), (SN_MAX - 130, 4)] {
        let pair = TrackerPair::<2>::new(start, 64).unwrap();
        let mut seen = [0u64; 8];
        explore(&pair, depth, &mut seen);
        // Every verdict, a slide-out loss and a give-up were exercised
        // (OutOfRange only near SN_MAX).
        for (i, n) in seen.iter().enumerate() {
            assert!(
                *n > 0 || (i == 5 && start < SN_MAX - 1000),
                "start {start}: kind {i} never seen: {seen:?}"
            );
        }
    }
}

#[test]
fn exhaustive_three_word_window_matches_model() {
    let pair = TrackerPair::<3>::new(1, 128).unwrap();
    let mut seen = [0u64; 8];
    explore(&pair, 4, &mut seen);
    assert!(seen[4] > 0 && seen[6] > 0, "{seen:?}");
}

/// A long seeded mix of in-order, reordered, duplicate, jumping, huge and
/// give-up calls against the model.
fn random_run<const W: usize>(seed: u64, ops: u32, start: u64) -> [u64; 4] {
    let mut rng = Rng(SplitMix64::new(seed));
    let w = RecvTracker::<W>::WINDOW;
    let mut pair = TrackerPair::<W>::new(start, w).unwrap();
    let mut counts = [0u64; 4];
    for i in 0..ops {
        let (cum, top) = (pair.tracker.cumulative(), pair.tracker.top());
        let full = i % 256 == 0;
        let roll = rng.below(100);
        let sn = match roll {
            0..=59 => top,
            60..=71 => cum + rng.below(top - cum + 1),
            72..=79 => top + 1 + rng.below(16),
            80..=84 => top.saturating_sub(1 + rng.below(100)),
            85..=89 => top + rng.below(w + 10),
            90..=91 => [SN_MAX, SN_MAX + 1, u64::MAX, rng.next()][rng.below(4) as usize],
            92..=93 => {
                let end = if rng.below(2) == 0 {
                    cum + rng.below(top - cum + 5)
                } else {
                    top + rng.below(300)
                };
                pair.give_up_to(end, full).unwrap();
                counts[3] += 1;
                continue;
            }
            _ => {
                pair.check(top + rng.below(w + 2));
                continue;
            }
        };
        match pair.observe(sn, full) {
            Arrival::FillsGap => counts[0] += 1,
            Arrival::Gap { .. } => counts[1] += 1,
            Arrival::TooFar { .. } => counts[2] += 1,
            _ => {}
        }
    }
    pair.compare(true);
    counts
}

#[test]
fn random_runs_default_window_match_model() {
    for seed in 1..=4 {
        let counts = random_run::<33>(seed, 100_000, seed * 1_000_003);
        assert!(counts.iter().all(|&n| n > 100), "seed {seed}: {counts:?}");
    }
}

#[test]
fn random_runs_small_window_near_sn_max_match_model() {
    for seed in 10..=12 {
        random_run::<3>(seed, 20_000, SN_MAX - 400_000);
    }
}

#[test]
fn random_ops_match_vecdeque_model() {
    // splitmix64-seeded byte strings through the fuzz body, which
    // compares every call with a VecDeque model.
    let mut state = 0x5EED_u64;
    for len in [16usize, 200, 2_000, 20_000] {
        let mut bytes = Vec::with_capacity(len);
        for _ in 0..len {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (state ^ (state >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            bytes.push((z >> 56) as u8);
        }
        for first in 0..3 {
            bytes[0] = first;
            iomsg_fuzz_bodies::seq::send_window(&bytes);
        }
    }
}
