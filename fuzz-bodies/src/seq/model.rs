//! The reference model of a receiver tracker, written the obvious way.

use core::ops::Range;
use std::collections::VecDeque;
use std::vec::Vec;

use iomsg_core::seq::{Arrival, SeqError};
use iomsg_core::wire::SN_MAX;

/// Reference model of a receiver tracker: the set of received sns at or
/// above `cum` as ascending ranges, with `cum` / `top` / lost bookkeeping
/// done the obvious way.
///
/// Everything below `cum` is done (received, lost or below the start) and
/// can never change again, so it is forgotten.
#[derive(Clone, Debug)]
pub struct TrackerModel {
    window: u64,
    start: u64,
    cum: u64,
    top: u64,
    /// Received sns in `[cum, top)`: disjoint, non-adjacent ranges,
    /// ascending, each starting above `cum`.
    pub(super) received: VecDeque<Range<u64>>,
    /// How many sns `received` holds.
    received_len: u64,
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
            received: VecDeque::new(),
            received_len: 0,
            lost_total: 0,
            delivered: 0,
        })
    }

    /// A fresh model keeping its received ranges in `buffer` (cleared
    /// first), so that its capacity is reused.
    pub(super) fn reusing(mut self, mut buffer: VecDeque<Range<u64>>) -> Self {
        assert!(self.received.is_empty(), "reusing() on a used model");
        buffer.clear();
        self.received = buffer;
        self
    }

    fn is_received(&self, sn: u64) -> bool {
        // Above the last range (and so at or above `top`): not received.
        if self.received.back().is_none_or(|last| last.end <= sn) {
            return false;
        }
        let i = self.received.partition_point(|r| r.end <= sn);
        self.received[i].start <= sn
    }

    pub fn check(&self, sn: u64) -> Arrival {
        if sn > SN_MAX {
            Arrival::OutOfRange { sn }
        } else if sn < self.cum || self.is_received(sn) {
            Arrival::Duplicate
        } else if sn < self.top {
            Arrival::FillsGap
        } else if sn == self.top {
            Arrival::InOrder
        } else if sn < self.top.saturating_add(self.window) {
            Arrival::Gap {
                missing: self.top..sn,
            }
        } else {
            Arrival::TooFar { sn, top: self.top }
        }
    }

    /// Applies `sn`: its verdict and the ranges that became lost.
    pub fn commit(&mut self, sn: u64) -> (Arrival, Vec<Range<u64>>) {
        let mut newly = Vec::new();
        let verdict = self.commit_into(sn, &mut newly);
        (verdict, newly)
    }

    /// [`commit`](Self::commit), writing the lost ranges to `newly`
    /// (cleared first).
    pub fn commit_into(&mut self, sn: u64, newly: &mut Vec<Range<u64>>) -> Arrival {
        newly.clear();
        let verdict = self.check(sn);
        if verdict.delivers() {
            self.delivered += 1;
            self.insert(sn);
            if sn >= self.top {
                self.top = sn + 1;
                let floor = self.top.saturating_sub(self.window);
                newly.extend(self.open_below(floor));
                self.settle(newly, floor);
            } else {
                self.settle(newly, self.cum);
            }
        }
        verdict
    }

    /// Gives up every sn below `end` not yet received: the ranges lost.
    pub fn give_up_to(&mut self, end: u64) -> Result<Vec<Range<u64>>, SeqError> {
        let mut newly = Vec::new();
        self.give_up_into(end, &mut newly).map(|()| newly)
    }

    /// [`give_up_to`](Self::give_up_to), writing the lost ranges to `newly`
    /// (cleared first).
    pub fn give_up_into(&mut self, end: u64, newly: &mut Vec<Range<u64>>) -> Result<(), SeqError> {
        newly.clear();
        if end > SN_MAX {
            return Err(SeqError::OutOfRange { sn: end });
        }
        newly.extend(self.open_below(end.min(self.top)));
        if end > self.top {
            push_range(newly, self.top..end);
            self.top = end;
        }
        self.settle(newly, end);
        Ok(())
    }

    /// Marks `sn` (`cum <= sn`, not received) received.
    fn insert(&mut self, sn: u64) {
        self.received_len += 1;
        match self.received.back_mut() {
            // At or above the last range (any sn at or above `top`).
            Some(last) if last.end == sn => {
                last.end = sn + 1;
                return;
            }
            Some(last) if last.end < sn => {
                self.received.push_back(sn..sn + 1);
                return;
            }
            None => {
                self.received.push_back(sn..sn + 1);
                return;
            }
            Some(_) => {}
        }
        // Index of the first range ending at or after `sn`.
        let i = self.received.partition_point(|r| r.end < sn);
        match self.received.get(i).cloned() {
            // Extends the range just below, maybe joining the one above.
            Some(r) if r.end == sn => {
                let joined = self.received.get(i + 1).filter(|next| next.start == sn + 1);
                let end = joined.map_or(sn + 1, |next| next.end);
                if joined.is_some() {
                    self.received.remove(i + 1);
                }
                self.received[i].end = end;
            }
            Some(r) if r.start == sn + 1 => self.received[i].start = sn,
            _ => self.received.insert(i, sn..sn + 1),
        }
    }

    /// Records `newly` as lost; every sn below `done` is now received or
    /// lost. Moves `cum` to the lowest sn that is neither and forgets
    /// everything below it.
    fn settle(&mut self, newly: &[Range<u64>], done: u64) {
        for range in newly {
            self.lost_total += range.end - range.start;
        }
        self.cum = self.cum.max(done);
        while let Some(first) = self.received.front() {
            if first.start > self.cum {
                break;
            }
            self.cum = self.cum.max(first.end);
            self.received_len -= first.end - first.start;
            self.received.pop_front();
        }
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

    /// Open holes in `[cum, top)`, ascending; O(holes).
    pub fn holes(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        self.open_below(self.top)
    }

    /// The sns in `[cum, to)` that have not arrived, as ascending maximal
    /// ranges: the gaps between received ranges.
    fn open_below(&self, to: u64) -> impl Iterator<Item = Range<u64>> + '_ {
        // Every received range starts above `cum`.
        let mut ranges = self.received.iter().take_while(move |r| r.start < to);
        let mut at = self.cum;
        core::iter::from_fn(move || {
            for r in ranges.by_ref() {
                let gap = at..r.start;
                at = at.max(r.end);
                if !gap.is_empty() {
                    return Some(gap);
                }
            }
            let tail = at..to;
            at = at.max(to);
            (!tail.is_empty()).then_some(tail)
        })
    }

    /// Open holes in `[cum, top)`: every received sn kept is in there.
    pub fn missing(&self) -> u64 {
        self.top - self.cum - self.received_len
    }
}
