//! Fuzz bodies for [`iomsg_core::seq`]: the tracker and the send window, each run
//! against a slow model written the obvious way.
//!
//! The models and the [`TrackerPair`] driver are shared with the unit tests
//! in `seq/tracker.rs` and `seq/window.rs`.
//!
//! Cost: checking one tracker call is O(log n + holes + `WORDS`), never
//! proportional to the distance between sns; the model keeps only what can
//! still change (the received sns in `[cum, top)`, as ranges); buffers are
//! reused from one fuzz input to the next, so an input allocates nothing;
//! and one input makes at most `MAX_CALLS` calls per tracker, which keeps
//! the fuzzer at thousands of inputs a second (long call sequences are the
//! unit tests' business: `seq/tracker.rs` drives [`TrackerPair`] directly).

use core::cell::{Cell, RefCell};
use core::ops::Range;
use std::collections::VecDeque;
use std::vec::Vec;

use iomsg_core::seq::{Arrival, RecvTracker, SendWindow, SeqError, WindowError};
use iomsg_core::wire::SN_MAX;

mod model;

pub use model::TrackerModel;

/// The heap buffers of a [`TrackerPair`], kept between fuzz inputs.
#[derive(Default)]
struct Buffers {
    received: VecDeque<Range<u64>>,
    got: Vec<Range<u64>>,
    want: Vec<Range<u64>>,
}

std::thread_local! {
    /// Buffers of the last [`run_tracker`], reused by the next.
    static BUFFERS: RefCell<Buffers> = RefCell::new(Buffers::default());
}

/// A tracker and its model, fed the same calls; every call compares them.
///
/// Only the calls into the tracker are generic over `WORDS`; the checks live
/// in `Log`, once for every window size.
#[derive(Clone, Debug)]
pub struct TrackerPair<const WORDS: usize> {
    pub tracker: RecvTracker<WORDS>,
    pub model: TrackerModel,
    log: Log,
}

/// What a [`TrackerPair`] remembers besides the tracker and the model.
#[derive(Clone, Debug)]
struct Log {
    /// Every range reported lost so far ends at or below this: a new report
    /// must start here or above (ascending, never the same sn twice).
    reported_end: u64,
    reported_total: u64,
    /// Lost ranges of the current call: the tracker's and the model's.
    got: Vec<Range<u64>>,
    want: Vec<Range<u64>>,
    /// The holes of the current state were compared: a refused call, which
    /// changes nothing, need not compare them again. Cleared by every call
    /// that changes the state (so change `tracker` and `model` only through
    /// the pair's methods).
    holes_compared: Cell<bool>,
}

impl<const WORDS: usize> TrackerPair<WORDS> {
    /// Both starting at `start`; `None` (after checking that both refuse)
    /// when `start > SN_MAX`. `window` is the model's window, given
    /// independently of `RecvTracker::WINDOW`.
    pub fn new(start: u64, window: u64) -> Option<Self> {
        Self::with_buffers(start, window, Buffers::default()).ok()
    }

    /// [`new`](Self::new), reusing `buffers`; they come back when
    /// `start > SN_MAX`.
    fn with_buffers(start: u64, window: u64, buffers: Buffers) -> Result<Self, Buffers> {
        assert_eq!(RecvTracker::<WORDS>::WINDOW, window, "WINDOW formula");
        let tracker = RecvTracker::<WORDS>::try_new(start);
        let Some(model) = TrackerModel::new(start, window) else {
            assert_eq!(tracker, Err(SeqError::OutOfRange { sn: start }));
            return Err(buffers);
        };
        let tracker = tracker.unwrap_or_else(|e| panic!("try_new({start}): {e}"));
        let pair = Self {
            tracker,
            model: model.reusing(buffers.received),
            log: Log {
                reported_end: 0,
                reported_total: 0,
                got: buffers.got,
                want: buffers.want,
                holes_compared: Cell::new(false),
            },
        };
        pair.compare(true);
        Ok(pair)
    }

    fn into_buffers(self) -> Buffers {
        Buffers {
            received: self.model.received,
            got: self.log.got,
            want: self.log.want,
        }
    }

    /// `check(sn)` on both; nothing may change.
    pub fn check(&self, sn: u64) -> Arrival {
        let verdict = self.tracker.check(sn);
        let expected = self.model.check(sn);
        if verdict != expected {
            fail_verdict("check", sn, &verdict, &expected, At::of(&self.tracker));
        }
        verdict
    }

    /// `commit(sn)` on both, comparing verdicts, lost ranges and state.
    pub fn observe(&mut self, sn: u64, full: bool) -> Arrival {
        let at = At::of(&self.tracker);
        let checked = self.tracker.check(sn);
        let verdict = if checked.delivers() {
            let got = &mut self.log.got;
            got.clear();
            self.tracker.commit(sn, |r| got.push(r))
        } else {
            self.commit_refused(sn)
        };
        self.log
            .after_commit(&mut self.model, sn, &verdict, &checked, at);
        self.compare_after(!verdict.delivers(), full);
        verdict
    }

    /// `commit(sn)` on the tracker when `check(sn)` refuses: if `commit`
    /// refuses too, the tracker must not change.
    #[inline(never)]
    fn commit_refused(&mut self, sn: u64) -> Arrival {
        let before = self.tracker.clone();
        let got = &mut self.log.got;
        got.clear();
        let verdict = self.tracker.commit(sn, |r| got.push(r));
        if !verdict.delivers() && self.tracker != before {
            fail_changed("refused commit", sn, At::of(&before), At::of(&self.tracker));
        }
        verdict
    }

    /// `give_up_to(end)` on both, comparing results, lost ranges and state.
    pub fn give_up_to(&mut self, end: u64, full: bool) -> Result<(), SeqError> {
        let before = self.tracker.clone();
        let got = &mut self.log.got;
        got.clear();
        let result = self.tracker.give_up_to(end, |r| got.push(r));
        let at = At::of(&before);
        let after = At::of(&self.tracker);
        let unchanged = match self.model.give_up_into(end, &mut self.log.want) {
            Ok(()) => {
                assert_eq!(result, Ok(()), "give_up_to({end}) at {at}");
                self.log.compare_lost("give_up_to", end, at);
                assert!(
                    after.cum >= end && after.top >= end,
                    "give_up_to({end}) at {at}"
                );
                end <= at.cum
            }
            Err(e) => {
                assert_eq!(result, Err(e), "give_up_to({end}) at {at}");
                assert!(self.log.got.is_empty(), "refused give_up_to({end}) lost");
                true
            }
        };
        if unchanged && self.tracker != before {
            fail_changed("refused or no-op give_up_to", end, at, after);
        }
        self.log.note_reported();
        self.compare_after(unchanged, full);
        result
    }

    /// [`compare`](Self::compare) after a call; the holes are not compared
    /// again when the call changed nothing and they were compared already.
    fn compare_after(&self, unchanged: bool, full: bool) {
        if !unchanged {
            self.log.holes_compared.set(false);
        }
        self.compare(full && !self.log.holes_compared.get());
    }

    /// Compares the tracker with the model and checks its invariants;
    /// `full` also compares the holes (O(holes + `WORDS`)).
    pub fn compare(&self, full: bool) {
        let at = At::of(&self.tracker);
        self.log.compare_state(at, &self.model);
        if full {
            if let Err(index) = compare_holes(at, &mut self.tracker.holes(), &self.model) {
                let got: Vec<_> = self.tracker.holes().collect();
                let want: Vec<_> = self.model.holes().collect();
                panic!("holes at {at} differ at #{index}: tracker {got:?}, model {want:?}");
            }
            self.log.holes_compared.set(true);
        }
    }
}

impl Log {
    /// After `commit(sn)` on the tracker gave `verdict` (and lost ranges
    /// `got`) where `check(sn)` gave `checked`: the same on the model.
    fn after_commit(
        &mut self,
        model: &mut TrackerModel,
        sn: u64,
        verdict: &Arrival,
        checked: &Arrival,
        at: At,
    ) {
        let expected = model.commit_into(sn, &mut self.want);
        if *verdict != expected {
            fail_verdict("commit", sn, verdict, &expected, at);
        }
        if verdict != checked {
            fail_verdict("commit vs check", sn, verdict, checked, at);
        }
        self.compare_lost("commit", sn, at);
        self.note_reported();
    }

    fn compare_lost(&self, call: &str, arg: u64, at: At) {
        if self.got != self.want {
            fail_lost(call, arg, &self.got, &self.want, at);
        }
    }

    /// Checks the tracker's lost ranges of the last call against all earlier
    /// ones: non-empty, ascending, and no sn reported twice.
    fn note_reported(&mut self) {
        for r in &self.got {
            assert!(r.start < r.end, "empty lost range {r:?}");
            assert!(
                r.start >= self.reported_end,
                "lost range {r:?} overlaps or precedes an earlier report (up to {})",
                self.reported_end
            );
            self.reported_end = r.end;
            self.reported_total += r.end - r.start;
        }
    }

    /// Compares the tracker's state `t` with the model and checks its
    /// invariants, holes aside.
    fn compare_state(&self, t: At, m: &TrackerModel) {
        // Folded into one test: cheap under the fuzzer's instrumentation of
        // every comparison. Conservation: every sn in [start, top) is
        // exactly one of received, lost or an open hole.
        let differ = (t.cum ^ m.cumulative())
            | (t.top ^ m.top())
            | (t.missing ^ m.missing())
            | (t.lost ^ m.lost())
            | ((m.start() + m.delivered() + t.lost + t.missing) ^ t.top)
            | (self.reported_total ^ t.lost);
        let ordered =
            (t.top.saturating_sub(t.window) <= t.cum) & (t.cum <= t.top) & (t.top <= SN_MAX + 1);
        if differ != 0 || !ordered {
            fail_state(t, m, self.reported_total);
        }
    }
}

/// Compares the tracker's holes with the model's and with `t.missing`, and
/// the first hole with `t.cum`; on a mismatch, the index of the first
/// difference.
fn compare_holes(
    t: At,
    holes: &mut dyn Iterator<Item = Range<u64>>,
    m: &TrackerModel,
) -> Result<(), usize> {
    let mut want = m.holes();
    let mut sum = 0;
    let mut first = None;
    for index in 0.. {
        let (hole, expected) = (holes.next(), want.next());
        if hole != expected {
            return Err(index);
        }
        let Some(hole) = hole else {
            // Every sn of [cum, top) is in a hole or received; the first is
            // a hole.
            let first_ok = t.cum == t.top || first == Some(t.cum);
            return if sum == t.missing && first_ok {
                Ok(())
            } else {
                Err(index)
            };
        };
        sum += hole.end - hole.start;
        first.get_or_insert(hole.start);
    }
    unreachable!("a tracker has fewer than usize::MAX holes")
}

#[cold]
#[inline(never)]
fn fail_verdict(call: &str, sn: u64, got: &Arrival, want: &Arrival, at: At) -> ! {
    panic!("{call}({sn}) at {at}: tracker {got:?}, model {want:?}");
}

#[cold]
#[inline(never)]
fn fail_lost(call: &str, arg: u64, got: &[Range<u64>], want: &[Range<u64>], at: At) -> ! {
    panic!("lost ranges of {call}({arg}) at {at}: tracker {got:?}, model {want:?}");
}

#[cold]
#[inline(never)]
fn fail_changed(call: &str, arg: u64, before: At, after: At) -> ! {
    panic!("{call}({arg}) changed the tracker: {before} -> {after}");
}

#[cold]
#[inline(never)]
fn fail_state(t: At, m: &TrackerModel, reported: u64) -> ! {
    let expected = At {
        cum: m.cumulative(),
        top: m.top(),
        missing: m.missing(),
        lost: m.lost(),
        window: t.window,
    };
    assert_eq!(t, expected, "tracker vs model");
    assert!(t.top.saturating_sub(t.window) <= t.cum, "window at {t}");
    assert!(t.cum <= t.top && t.top <= SN_MAX + 1, "order at {t}");
    assert_eq!(
        m.start() + m.delivered() + t.lost + t.missing,
        t.top,
        "conservation at {t}"
    );
    assert_eq!(reported, t.lost, "sum of reported lost ranges at {t}");
    unreachable!("fail_state at {t} found nothing wrong");
}

/// A tracker's state, compared with the model's and formatted only when a
/// check fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct At {
    cum: u64,
    top: u64,
    missing: u64,
    lost: u64,
    window: u64,
}

impl At {
    fn of<const WORDS: usize>(t: &RecvTracker<WORDS>) -> Self {
        Self {
            cum: t.cumulative(),
            top: t.top(),
            missing: t.missing(),
            lost: t.lost(),
            window: RecvTracker::<WORDS>::WINDOW,
        }
    }
}

impl core::fmt::Display for At {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "(cum {}, top {}, missing {}, lost {}, window {})",
            self.cum, self.top, self.missing, self.lost, self.window
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

/// Tracker calls per fuzz input at most (per tracker), the sns of in-order
/// runs included; the rest of a longer input is ignored. Checking a call
/// costs one to two microseconds under the fuzzer's instrumentation
/// (sanitizer, comparison tracing), and so does libFuzzer's own work per
/// input for about 16 calls: 16 keeps `cargo fuzz run seq_tracker` near
/// 10,000 inputs a second on one core. Enough to reach every window edge,
/// slide holes out, give up and wrap the ring of both trackers (see the
/// seeds in `fuzz/seeds/seq_tracker/`).
const MAX_CALLS: u32 = 16;

fn run_tracker<const WORDS: usize>(data: &[u8], window: u64) {
    let mut input = Input(data);
    let start = match input.u8() % 4 {
        0 => 0,
        1 => input.u16(),
        2 => SN_MAX - input.u16(),
        _ => input.u64(),
    };
    let buffers = BUFFERS.with(RefCell::take);
    let mut pair = match TrackerPair::<WORDS>::with_buffers(start, window, buffers) {
        Ok(pair) => pair,
        Err(buffers) => {
            BUFFERS.with(|b| *b.borrow_mut() = buffers);
            return;
        }
    };
    let mut budget = MAX_CALLS;
    while !input.is_empty() && budget > 0 {
        budget -= 1;
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
            let run = u32::from(op & 0x0f).min(budget);
            budget -= run;
            for _ in 0..run {
                let top = pair.tracker.top();
                pair.observe(top, false);
            }
            pair.compare_after(run == 0, true);
        }
    }
    let buffers = pair.into_buffers();
    BUFFERS.with(|b| *b.borrow_mut() = buffers);
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
        assert_eq!(m.commit(0).0, Arrival::InOrder);
        assert_eq!(m.commit(3).0, Arrival::Gap { missing: 1..3 });
        assert_eq!(m.commit(66), (Arrival::Gap { missing: 4..66 }, vec![1..3]));
        assert_eq!(m.give_up_to(70), Ok(vec![4..66, 67..70]));
        assert_eq!(
            (m.cumulative(), m.top(), m.lost(), m.missing()),
            (70, 70, 67, 0)
        );
        assert_eq!(m.commit(2).0, Arrival::Duplicate);
    }
}
