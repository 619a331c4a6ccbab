//! Fuzz bodies for [`crate::seq`]: the tracker and the send window, each run
//! against a slow model written the obvious way.
//!
//! The models and the [`TrackerPair`] driver are shared with the unit tests
//! in `seq/tracker.rs` and `seq/window.rs`.

use core::ops::Range;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::vec::Vec;

use crate::seq::{RecvTracker, SendWindow, SeqError, Verdict, WindowError};
use crate::wire::SN_MAX;

/// Reference model of a receiver tracker: the set of received sns, with
/// `cum` / `top` / lost bookkeeping done one sn at a time.
#[derive(Clone, Debug)]
pub struct TrackerModel {
    window: u64,
    start: u64,
    cum: u64,
    top: u64,
    /// Received sns at or above `cum` (everything below `cum` is done).
    received: BTreeSet<u64>,
    /// Every sn ever given up, as start -> end ranges.
    lost: BTreeMap<u64, u64>,
    lost_total: u64,
    delivered: u64,
}

/// Appends `range` to ascending `ranges`, merging with the last if adjacent.
fn push_range(ranges: &mut Vec<Range<u64>>, range: Range<u64>) {
    if let Some(last) = ranges.last_mut() {
        if last.end == range.start {
            last.end = range.end;
            return;
        }
    }
    ranges.push(range);
}

impl TrackerModel {
    /// A model expecting `start`, tracking `window` sns below its top; `None`
    /// when `start > SN_MAX`.
    pub fn new(start: u64, window: u64) -> Option<Self> {
        (start <= SN_MAX).then_some(Self {
            window,
            start,
            cum: start,
            top: start,
            received: BTreeSet::new(),
            lost: BTreeMap::new(),
            lost_total: 0,
            delivered: 0,
        })
    }

    /// The end of the lost range holding `sn`, if `sn` was given up.
    fn lost_end(&self, sn: u64) -> Option<u64> {
        let (_, &end) = self.lost.range(..=sn).next_back()?;
        (sn < end).then_some(end)
    }

    pub fn check(&self, sn: u64) -> Verdict {
        if sn > SN_MAX {
            Verdict::OutOfRange { sn }
        } else if sn < self.cum || self.received.contains(&sn) || self.lost_end(sn).is_some() {
            Verdict::Duplicate
        } else if sn < self.top {
            Verdict::FillsGap
        } else if sn == self.top {
            Verdict::InOrder
        } else if sn < self.top.saturating_add(self.window) {
            Verdict::Gap {
                missing: self.top..sn,
            }
        } else {
            Verdict::TooFar { sn, top: self.top }
        }
    }

    /// Applies `sn`: its verdict and the ranges that became lost.
    pub fn commit(&mut self, sn: u64) -> (Verdict, Vec<Range<u64>>) {
        let verdict = self.check(sn);
        let mut newly = Vec::new();
        if verdict.delivers() {
            self.delivered += 1;
            self.received.insert(sn);
            if sn >= self.top {
                self.top = sn + 1;
                let floor = self.top.saturating_sub(self.window);
                newly = self.not_received(self.cum, floor);
            }
            self.record_lost(&newly);
        }
        (verdict, newly)
    }

    /// Gives up every sn below `end` not yet received: the ranges lost.
    pub fn give_up_to(&mut self, end: u64) -> Result<Vec<Range<u64>>, SeqError> {
        if end > SN_MAX {
            return Err(SeqError::OutOfRange { sn: end });
        }
        let mut newly = self.not_received(self.cum, end.min(self.top));
        if end > self.top {
            push_range(&mut newly, self.top..end);
            self.top = end;
        }
        self.record_lost(&newly);
        Ok(newly)
    }

    fn record_lost(&mut self, newly: &[Range<u64>]) {
        for range in newly {
            self.lost_total += range.end - range.start;
            self.lost.insert(range.start, range.end);
        }
        // cum: the lowest sn that is neither below the start, received nor lost.
        while self.cum < self.top {
            if self.received.contains(&self.cum) {
                // Skip the run of consecutive received sns.
                let mut next = self.cum;
                for &sn in self.received.range(self.cum..) {
                    if sn != next {
                        break;
                    }
                    next = sn + 1;
                }
                self.cum = next;
            } else if let Some(end) = self.lost_end(self.cum) {
                self.cum = end;
            } else {
                break;
            }
        }
        self.received = self.received.split_off(&self.cum);
    }

    pub fn cumulative(&self) -> u64 {
        self.cum
    }

    pub fn top(&self) -> u64 {
        self.top
    }

    pub fn lost(&self) -> u64 {
        self.lost_total
    }

    pub fn start(&self) -> u64 {
        self.start
    }

    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Open holes in `[cum, top)`; O(top - cum).
    pub fn holes(&self) -> Vec<Range<u64>> {
        self.not_received(self.cum, self.top)
    }

    /// The sns in `[from, to)` (`from >= cum`) that have not arrived, as
    /// ascending maximal ranges: the gaps between received sns.
    fn not_received(&self, from: u64, to: u64) -> Vec<Range<u64>> {
        let mut gaps = Vec::new();
        let mut at = from;
        for &sn in self.received.range(from..to.max(from)) {
            if at < sn {
                gaps.push(at..sn);
            }
            at = sn + 1;
        }
        if at < to {
            gaps.push(at..to);
        }
        gaps
    }

    /// Open holes in `[cum, top)`: every received sn kept is in there.
    pub fn missing(&self) -> u64 {
        self.top - self.cum - self.received.len() as u64
    }
}

/// A tracker and its model, fed the same calls; every call compares them.
#[derive(Clone, Debug)]
pub struct TrackerPair<const WORDS: usize> {
    pub tracker: RecvTracker<WORDS>,
    pub model: TrackerModel,
    /// Every range the tracker reported lost, start -> end.
    reported: BTreeMap<u64, u64>,
    reported_total: u64,
}

impl<const WORDS: usize> TrackerPair<WORDS> {
    /// Both starting at `start`; `None` (after checking that both refuse)
    /// when `start > SN_MAX`. `window` is the model's window, given
    /// independently of `RecvTracker::WINDOW`.
    pub fn new(start: u64, window: u64) -> Option<Self> {
        assert_eq!(RecvTracker::<WORDS>::WINDOW, window, "WINDOW formula");
        let tracker = RecvTracker::<WORDS>::try_new(start);
        let Some(model) = TrackerModel::new(start, window) else {
            assert_eq!(tracker, Err(SeqError::OutOfRange { sn: start }));
            return None;
        };
        let tracker = tracker.unwrap_or_else(|e| panic!("try_new({start}): {e}"));
        let pair = Self {
            tracker,
            model,
            reported: BTreeMap::new(),
            reported_total: 0,
        };
        pair.compare(true);
        Some(pair)
    }

    /// `check(sn)` on both; nothing may change.
    pub fn check(&self, sn: u64) -> Verdict {
        let verdict = self.tracker.check(sn);
        assert_eq!(
            verdict,
            self.model.check(sn),
            "check({sn}) at {}",
            At(&self.tracker)
        );
        verdict
    }

    /// `commit(sn)` on both, comparing verdicts, lost ranges and state.
    pub fn observe(&mut self, sn: u64, full: bool) -> Verdict {
        let before = self.tracker.clone();
        let checked = self.tracker.check(sn);
        let mut ranges = Vec::new();
        let verdict = self.tracker.commit(sn, |r| ranges.push(r));
        let (expected, expected_ranges) = self.model.commit(sn);
        let at = At(&before);
        assert_eq!(verdict, expected, "commit({sn}) at {at}");
        assert_eq!(verdict, checked, "commit({sn}) vs check({sn}) at {at}");
        assert_eq!(
            ranges, expected_ranges,
            "lost ranges of commit({sn}) at {at}"
        );
        if !verdict.delivers() {
            assert_eq!(
                self.tracker, before,
                "refused commit({sn}) changed the tracker"
            );
        }
        self.note_reported(&ranges);
        self.compare(full);
        verdict
    }

    /// `give_up_to(end)` on both, comparing results, lost ranges and state.
    pub fn give_up_to(&mut self, end: u64, full: bool) -> Result<(), SeqError> {
        let before = self.tracker.clone();
        let mut ranges = Vec::new();
        let result = self.tracker.give_up_to(end, |r| ranges.push(r));
        let at = At(&before);
        match self.model.give_up_to(end) {
            Ok(expected) => {
                assert_eq!(result, Ok(()), "give_up_to({end}) at {at}");
                assert_eq!(ranges, expected, "lost ranges of give_up_to({end}) at {at}");
                assert!(self.tracker.cumulative() >= end && self.tracker.top() >= end);
                if end <= before.cumulative() {
                    assert_eq!(self.tracker, before, "no-op give_up_to({end}) changed it");
                }
            }
            Err(e) => {
                assert_eq!(result, Err(e), "give_up_to({end}) at {at}");
                assert!(ranges.is_empty());
                assert_eq!(self.tracker, before, "refused give_up_to({end}) changed it");
            }
        }
        self.note_reported(&ranges);
        self.compare(full);
        result
    }

    fn note_reported(&mut self, ranges: &[Range<u64>]) {
        for r in ranges {
            assert!(r.start < r.end, "empty lost range {r:?}");
            let overlaps = self
                .reported
                .range(..r.end)
                .next_back()
                .is_some_and(|(_, &end)| end > r.start);
            assert!(!overlaps, "lost range {r:?} overlaps an earlier report");
            self.reported.insert(r.start, r.end);
            self.reported_total += r.end - r.start;
        }
    }

    /// Compares the tracker with the model and checks its invariants;
    /// `full` also compares the holes (O(window)).
    pub fn compare(&self, full: bool) {
        let (t, m) = (&self.tracker, &self.model);
        let at = At(&self.tracker);
        assert_eq!(t.cumulative(), m.cumulative(), "cumulative at {at}");
        assert_eq!(t.top(), m.top(), "top at {at}");
        assert_eq!(t.missing(), m.missing(), "missing at {at}");
        assert_eq!(t.lost(), m.lost(), "lost at {at}");
        let window = RecvTracker::<WORDS>::WINDOW;
        assert!(
            t.top().saturating_sub(window) <= t.cumulative(),
            "window at {at}"
        );
        assert!(
            t.cumulative() <= t.top() && t.top() <= SN_MAX + 1,
            "order at {at}"
        );
        // Conservation: every sn in [start, top) is exactly one of received,
        // lost or an open hole.
        assert_eq!(
            m.start() + m.delivered() + t.lost() + t.missing(),
            t.top(),
            "conservation at {at}"
        );
        assert_eq!(
            self.reported_total,
            t.lost(),
            "sum of reported lost ranges at {at}"
        );
        if full {
            let holes: Vec<_> = t.holes().collect();
            assert_eq!(holes, m.holes(), "holes at {at}");
            let sum: u64 = holes.iter().map(|h| h.end - h.start).sum();
            assert_eq!(sum, t.missing(), "holes vs missing at {at}");
            if t.cumulative() < t.top() {
                assert_eq!(holes.first().map(|h| h.start), Some(t.cumulative()));
            }
        }
    }
}

/// Formats a tracker's state for assertion messages, only when one fails.
struct At<'a, const WORDS: usize>(&'a RecvTracker<WORDS>);

impl<const WORDS: usize> core::fmt::Display for At<'_, WORDS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let t = self.0;
        write!(
            f,
            "(cum {}, top {}, missing {}, lost {}, window {})",
            t.cumulative(),
            t.top(),
            t.missing(),
            t.lost(),
            RecvTracker::<WORDS>::WINDOW
        )
    }
}

/// Reads fuzz input; missing bytes read as zero.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u64 {
        u64::from(u16::from_le_bytes([self.u8(), self.u8()]))
    }

    fn u64(&mut self) -> u64 {
        let mut bytes = [0; 8];
        for b in &mut bytes {
            *b = self.u8();
        }
        u64::from_le_bytes(bytes)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An sn chosen relative to the tracker's state, edges included.
fn pick_sn<const WORDS: usize>(kind: u8, input: &mut Input<'_>, t: &RecvTracker<WORDS>) -> u64 {
    let (cum, top, w) = (t.cumulative(), t.top(), RecvTracker::<WORDS>::WINDOW);
    match kind % 6 {
        0 => top,
        1 => top.saturating_add(1 + u64::from(input.u8())),
        // The window edge: top + W - 3 ..= top + W + 3.
        2 => top.saturating_add(w - 3 + u64::from(input.u8() % 7)),
        3 => cum.saturating_add(u64::from(input.u8())),
        4 => top.saturating_sub(1 + u64::from(input.u8())),
        _ => match input.u8() % 6 {
            0 => SN_MAX - 1,
            1 => SN_MAX,
            2 => SN_MAX + 1,
            3 => u64::MAX,
            4 => top.saturating_add(input.u16() * 64),
            _ => input.u64(),
        },
    }
}

fn pick_end<const WORDS: usize>(input: &mut Input<'_>, t: &RecvTracker<WORDS>) -> u64 {
    let (cum, top, w) = (t.cumulative(), t.top(), RecvTracker::<WORDS>::WINDOW);
    match input.u8() % 8 {
        0 => cum.saturating_add(u64::from(input.u8())),
        1 => top,
        2 => top.saturating_add(u64::from(input.u8())),
        3 => top.saturating_add(w - 2 + u64::from(input.u8() % 5)),
        4 => top.saturating_sub(u64::from(input.u8())),
        5 => SN_MAX,
        6 => SN_MAX + 1,
        _ => input.u64(),
    }
}

fn run_tracker<const WORDS: usize>(data: &[u8], window: u64) {
    let mut input = Input(data);
    let start = match input.u8() % 4 {
        0 => 0,
        1 => input.u16(),
        2 => SN_MAX - input.u16(),
        _ => input.u64(),
    };
    let Some(mut pair) = TrackerPair::<WORDS>::new(start, window) else {
        return;
    };
    while !input.is_empty() {
        let op = input.u8();
        match op >> 5 {
            0..=5 => {
                let sn = pick_sn(op, &mut input, &pair.tracker);
                pair.observe(sn, true);
            }
            6 => {
                let end = pick_end(&mut input, &pair.tracker);
                let _ = pair.give_up_to(end, true);
            }
            _ => {
                let sn = pick_sn(op, &mut input, &pair.tracker);
                pair.check(sn);
            }
        }
        // A run of in-order sns, so that long inputs reach wrap-around of the
        // ring and words get cleared.
        if op & 0x10 != 0 {
            for _ in 0..(op & 0x0f) {
                let top = pair.tracker.top();
                pair.observe(top, false);
            }
            pair.compare(true);
        }
    }
}

/// Fuzz target `seq_tracker`: a 128-sn tracker and the default 2048-sn one
/// against [`TrackerModel`], on every verdict, lost range and state.
pub fn seq_tracker(data: &[u8]) {
    run_tracker::<3>(data, 128);
    run_tracker::<33>(data, 2048);
}

/// Fuzz body `send_window`: a [`SendWindow`] of capacity 4 and one of 64
/// against a `VecDeque` model.
pub fn send_window(data: &[u8]) {
    run_window::<4>(data);
    run_window::<64>(data);
}

fn run_window<const N: usize>(data: &[u8]) {
    let mut input = Input(data);
    let start = match input.u8() % 3 {
        0 => 0,
        1 => SN_MAX + 1 - input.u8() as u64 % 8,
        _ => input.u64(),
    };
    let mut window = SendWindow::<u32, N>::new(start);
    // Unacked (sn, entry), ascending.
    let mut model: VecDeque<(u64, u32)> = VecDeque::new();
    let mut next = start;
    let mut stamp = 0u32;
    while !input.is_empty() {
        let before = window.clone();
        match input.u8() % 4 {
            0 | 1 => {
                stamp += 1;
                let expected = if next > SN_MAX {
                    Err(WindowError::Exhausted { next })
                } else if model.len() == N {
                    Err(WindowError::Full {
                        base: model.front().map_or(next, |e| e.0),
                        next,
                        capacity: N,
                    })
                } else {
                    model.push_back((next, stamp));
                    next += 1;
                    Ok(next - 1)
                };
                let got = window.push(stamp);
                assert_eq!(got, expected, "push at base {}", before.base());
                if got.is_err() {
                    assert_eq!(window, before, "refused push changed the window");
                }
            }
            2 => {
                let base = model.front().map_or(next, |e| e.0);
                let ack = match input.u8() % 4 {
                    0 => base.saturating_add(u64::from(input.u8() % 8)),
                    1 => next.saturating_add(u64::from(input.u8() % 3)),
                    2 => base.saturating_sub(u64::from(input.u8() % 3)),
                    _ => input.u64(),
                };
                let expected = if ack > next {
                    Err(WindowError::AckBeyondSent { ack, next })
                } else {
                    let mut n = 0;
                    while model.front().is_some_and(|e| e.0 < ack) {
                        model.pop_front();
                        n += 1;
                    }
                    Ok(n)
                };
                let got = window.release(ack);
                assert_eq!(got, expected, "release({ack})");
                if got.is_err() {
                    assert_eq!(window, before, "refused release changed the window");
                }
            }
            _ => {
                let from = window
                    .base()
                    .saturating_add(u64::from(input.u8() % 80))
                    .saturating_sub(8);
                let got: Vec<(u64, u32)> = window.iter_from(from).map(|(sn, e)| (sn, *e)).collect();
                let expected: Vec<(u64, u32)> =
                    model.iter().copied().filter(|e| e.0 >= from).collect();
                assert_eq!(got, expected, "iter_from({from})");
                for sn in from.saturating_sub(2)..from.saturating_add(3) {
                    let want = model.iter().find(|e| e.0 == sn).map(|e| e.1);
                    assert_eq!(window.get(sn).copied(), want, "get({sn})");
                }
            }
        }
        assert_eq!(window.len(), model.len());
        assert_eq!(window.is_empty(), model.is_empty());
        assert_eq!(window.is_full(), model.len() == N);
        assert_eq!(window.next(), next);
        assert_eq!(window.base(), model.front().map_or(next, |e| e.0));
    }
}

#[cfg(test)]
// A one-range Vec is a list of lost ranges that holds one range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use std::vec;

    /// Seeded pseudo-random fuzz inputs of `len` bytes (splitmix64).
    fn inputs(seed: u64, count: usize, len: usize) -> Vec<Vec<u8>> {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (state ^ (state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB) >> 56
        };
        (0..count)
            .map(|_| (0..len).map(|_| next() as u8).collect())
            .collect()
    }

    #[test]
    fn seq_tracker_holds_on_random_inputs() {
        for (i, data) in inputs(1, 200, 300).iter().enumerate() {
            let mut data = data.clone();
            data[0] = (i % 4) as u8; // every kind of start
            seq_tracker(&data);
        }
    }

    #[test]
    fn model_reports_slide_out_and_give_up_as_maximal_ranges() {
        let mut m = TrackerModel::new(0, 64).unwrap();
        assert_eq!(m.commit(0).0, Verdict::InOrder);
        assert_eq!(m.commit(3).0, Verdict::Gap { missing: 1..3 });
        assert_eq!(m.commit(66), (Verdict::Gap { missing: 4..66 }, vec![1..3]));
        assert_eq!(m.give_up_to(70), Ok(vec![4..66, 67..70]));
        assert_eq!(
            (m.cumulative(), m.top(), m.lost(), m.missing()),
            (70, 70, 67, 0)
        );
        assert_eq!(m.commit(2).0, Verdict::Duplicate);
    }
}
