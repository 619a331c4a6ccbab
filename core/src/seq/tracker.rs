//! The receiver's sequence tracker.
//!
//! A [`RecvTracker`] remembers, for one session, which sns of the last
//! [`RecvTracker::WINDOW`] have arrived. It keeps `WORDS` `u64` words in a
//! ring (RFC 6479): the bit for sn `s` lives in word `(s / 64) % WORDS`, bit
//! `s % 64`. One word more than the window needs is kept so that the word
//! holding `top` never aliases a word of the window; advancing `top` clears
//! the words it enters, so nothing is ever shifted.
//!
//! State, with `cum = cumulative()` and `top = top()`:
//! - every sn below `cum` is done: received, given up (lost) or below the
//!   start;
//! - `cum` itself (when `cum < top`) is an open hole;
//! - in `[cum, top)` a set bit means received, a clear bit an open hole;
//! - `top - WINDOW <= cum <= top`: a hole that falls out of the window is
//!   reported lost, once, and `cum` moves past it;
//! - bits of sns at or above `top` in `top`'s word are clear.
//!
//! Bits of sns below `cum` are never read.

use core::ops::Range;

use super::arrival::{Arrival, SeqError};
use crate::wire::SN_MAX;

/// Bits per ring word.
const BITS: u64 = u64::BITS as u64;

/// Receiver-side sequence tracker for one session.
///
/// `WORDS` `u64` words in a ring; the window is `(WORDS - 1) * 64` sns
/// ([`WINDOW`](Self::WINDOW)), 2048 for the default of 33 words. No heap.
///
/// Frames must be verified (checksums, session, epoch) before they reach
/// [`commit`](Self::commit); [`check`](Self::check) gives the same verdict
/// without changing anything.
///
/// ```
/// use iomsg_core::seq::{DefaultTracker, Arrival};
///
/// let mut tracker = DefaultTracker::default();
/// let mut lost = Vec::new();
/// assert_eq!(tracker.commit(0, |r| lost.push(r)), Arrival::InOrder);
/// assert_eq!(tracker.commit(3, |r| lost.push(r)), Arrival::Gap { missing: 1..3 });
/// assert_eq!(tracker.commit(2, |r| lost.push(r)), Arrival::FillsGap);
/// assert_eq!(tracker.cumulative(), 1);
/// assert_eq!(tracker.holes().collect::<Vec<_>>(), [1..2]);
/// // Reconnect without replay: give up what never arrived.
/// tracker.give_up_to(4, |r| lost.push(r)).unwrap();
/// assert_eq!(lost, [1..2]);
/// assert_eq!((tracker.cumulative(), tracker.lost()), (4, 1));
/// ```
///
/// A ring of fewer than two words does not compile:
///
/// ```compile_fail
/// let _ = iomsg_core::seq::RecvTracker::<1>::try_new(0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvTracker<const WORDS: usize = 33> {
    /// The ring of bitmap words.
    words: [u64; WORDS],
    /// Lowest sn neither received nor given up.
    cum: u64,
    /// One past the highest sn received (or the start / give-up point).
    top: u64,
    /// Open holes in `[cum, top)`.
    missing: u64,
    /// Total sns given up or slid out of the window without arriving.
    lost: u64,
    /// The ring slot of `top`'s word, `slot(top)`, kept so that the
    /// in-order path indexes the ring without a division by `WORDS`.
    top_slot: usize,
}

/// A tracker with the default window of 2048 sns.
pub type DefaultTracker = RecvTracker<33>;

impl<const WORDS: usize> RecvTracker<WORDS> {
    /// How many sns below `top` are tracked: `(WORDS - 1) * 64`.
    pub const WINDOW: u64 = (WORDS as u64 - 1) * BITS;

    /// Compile-time check of `WORDS`, evaluated by every constructor.
    const VALID: () = assert!(
        WORDS >= 2,
        "RecvTracker needs WORDS >= 2 (a window of at least 64 sns)"
    );

    /// A tracker whose next expected sn is `start`; every sn below `start`
    /// counts as done (neither deliverable nor lost).
    ///
    /// `WORDS < 2` is a compile-time error.
    ///
    /// # Errors
    ///
    /// [`SeqError::OutOfRange`] if `start > SN_MAX`.
    pub const fn try_new(start: u64) -> Result<Self, SeqError> {
        if start > SN_MAX {
            return Err(SeqError::OutOfRange { sn: start });
        }
        Ok(Self::starting_at(start))
    }

    /// The constructor behind [`try_new`](Self::try_new) and `Default`;
    /// `start <= SN_MAX` is the caller's business.
    const fn starting_at(start: u64) -> Self {
        let () = Self::VALID;
        Self {
            words: [0; WORDS],
            cum: start,
            top: start,
            missing: 0,
            lost: 0,
            top_slot: Self::slot(start),
        }
    }

    /// The verdict [`commit`](Self::commit) would give `sn`, without
    /// changing anything.
    #[must_use]
    pub fn check(&self, sn: u64) -> Arrival {
        if sn > SN_MAX {
            Arrival::OutOfRange { sn }
        } else if sn < self.cum {
            Arrival::Duplicate
        } else if sn < self.top {
            if self.is_set(sn) {
                Arrival::Duplicate
            } else {
                Arrival::FillsGap
            }
        } else if sn == self.top {
            Arrival::InOrder
        } else if sn - self.top < Self::WINDOW {
            Arrival::Gap {
                missing: self.top..sn,
            }
        } else {
            Arrival::TooFar { sn, top: self.top }
        }
    }

    /// Applies `sn` and returns the verdict [`check`](Self::check) would
    /// have given.
    ///
    /// On a refused verdict ([`Duplicate`](Arrival::Duplicate),
    /// [`TooFar`](Arrival::TooFar), [`OutOfRange`](Arrival::OutOfRange))
    /// nothing changes. When the window slides past holes that never
    /// arrived, `on_lost` is called with each maximal range of them,
    /// ascending; no sn is ever reported twice.
    ///
    /// O(1) on the in-order path; amortized O(1) otherwise (each ring word is
    /// scanned a bounded number of times per pass of the window).
    #[doc(alias = "observe")]
    #[inline]
    pub fn commit(&mut self, sn: u64, mut on_lost: impl FnMut(Range<u64>)) -> Arrival {
        if sn == self.top && sn == self.cum && sn <= SN_MAX {
            // In order with no open holes: nothing can slide out. `top`'s
            // word is `top_slot`, so no division by `WORDS`.
            if let Some(word) = self.words.get_mut(self.top_slot) {
                *word |= 1 << (sn % BITS);
            }
            self.top = sn + 1;
            self.cum = self.top;
            if self.top % BITS == 0 {
                // `top` enters the next word: clear it.
                self.top_slot += 1;
                if self.top_slot == WORDS {
                    self.top_slot = 0;
                }
                if let Some(word) = self.words.get_mut(self.top_slot) {
                    *word = 0;
                }
            }
            return Arrival::InOrder;
        }
        self.commit_other(sn, &mut on_lost)
    }

    /// [`commit`](Self::commit) of every sn but the next in order without
    /// open holes: out of line, so the in-order path inlines into callers.
    #[inline(never)]
    fn commit_other(&mut self, sn: u64, on_lost: &mut impl FnMut(Range<u64>)) -> Arrival {
        let verdict = self.check(sn);
        match verdict {
            Arrival::FillsGap => {
                self.set(sn);
                self.missing -= 1;
                if sn == self.cum {
                    self.cum = self.next_unset(sn + 1, self.top);
                }
            }
            Arrival::InOrder | Arrival::Gap { .. } => self.advance_top(sn, on_lost),
            Arrival::Duplicate | Arrival::TooFar { .. } | Arrival::OutOfRange { .. } => {}
        }
        verdict
    }

    /// Gives up every sn below `end` that has not arrived: they are
    /// reported to `on_lost` as maximal ranges, ascending, each sn at most
    /// once ever, and count as lost. Afterwards `cumulative() >= end` and
    /// `top() >= end`; an sn below `end` that arrives later is a
    /// [`Duplicate`](Arrival::Duplicate).
    ///
    /// Used at reconnect when the sender will not replay: `[cum, next_sn)`
    /// is given up. `end <= cumulative()` is a no-op.
    ///
    /// # Errors
    ///
    /// [`SeqError::OutOfRange`] if `end > SN_MAX`; nothing changes.
    pub fn give_up_to(
        &mut self,
        end: u64,
        mut on_lost: impl FnMut(Range<u64>),
    ) -> Result<(), SeqError> {
        if end > SN_MAX {
            return Err(SeqError::OutOfRange { sn: end });
        }
        if end <= self.cum {
            return Ok(());
        }
        let top = self.top;
        let mut given_up = 0;
        let mut pending: Option<Range<u64>> = None;
        for hole in self.holes_in(self.cum, end.min(top)) {
            given_up += hole.end - hole.start;
            if let Some(done) = pending.replace(hole) {
                on_lost(done);
            }
        }
        self.missing -= given_up;
        if end > top {
            given_up += end - top;
            pending = match pending {
                Some(last) if last.end == top => Some(last.start..end),
                Some(last) => {
                    on_lost(last);
                    Some(top..end)
                }
                None => Some(top..end),
            };
            // Everything below `end` is done and nothing at or above it has
            // arrived: an empty ring.
            self.words = [0; WORDS];
            self.top = end;
            self.top_slot = Self::slot(end);
            self.cum = end;
        } else {
            self.cum = self.next_unset(end, top);
        }
        if let Some(last) = pending {
            on_lost(last);
        }
        self.lost += given_up;
        Ok(())
    }

    /// Marks every sn in `[top(), end)` as an open hole: the sender says it
    /// sent them (a tail-loss probe), yet none arrived. Returns the range
    /// newly opened, empty when `end <= top()`.
    ///
    /// Nothing is delivered and nothing slides out of the window: a later
    /// arrival of one of them is [`FillsGap`](Arrival::FillsGap).
    ///
    /// # Errors
    ///
    /// [`SeqError::OutOfRange`] if `end > SN_MAX + 1`, and
    /// [`SeqError::TooFar`] if `end - cumulative()` exceeds the window;
    /// nothing changes.
    pub fn open_holes_to(&mut self, end: u64) -> Result<Range<u64>, SeqError> {
        if end <= self.top {
            return Ok(self.top..self.top);
        }
        if end - 1 > SN_MAX {
            return Err(SeqError::OutOfRange { sn: end });
        }
        if end - self.cum > Self::WINDOW {
            return Err(SeqError::TooFar {
                sn: end,
                cum: self.cum,
            });
        }
        let (old_top, last) = (self.top, end - 1);
        // `last - cum < WINDOW`, so nothing slides out.
        self.advance_top(last, &mut |_| {});
        self.words[Self::slot(last)] &= !(1 << (last % BITS));
        self.missing += 1;
        if self.cum == end {
            self.cum = self.next_unset(old_top, end);
        }
        Ok(old_top..end)
    }

    /// The cumulative ack: the lowest sn neither received nor given up.
    #[must_use]
    pub fn cumulative(&self) -> u64 {
        self.cum
    }

    /// One past the highest sn received (or the start, or the give-up
    /// point, whichever is highest).
    #[must_use]
    pub fn top(&self) -> u64 {
        self.top
    }

    /// How many sns in `[cumulative(), top())` are open holes.
    #[must_use]
    pub fn missing(&self) -> u64 {
        self.missing
    }

    /// The open holes: maximal ranges of sns in `[cumulative(), top())` that
    /// have not arrived, ascending.
    pub fn holes(&self) -> Holes<'_, WORDS> {
        self.holes_in(self.cum, self.top)
    }

    /// Total sns given up or slid out of the window without arriving.
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Moves `top` to `sn + 1` (`top <= sn < top + WINDOW`), reporting the
    /// holes that slide out of the window.
    fn advance_top(&mut self, sn: u64, on_lost: &mut impl FnMut(Range<u64>)) {
        let old_top = self.top;
        let new_top = sn + 1;
        let floor = new_top.saturating_sub(Self::WINDOW);
        if self.cum < floor {
            // `floor <= old_top`, so these bits are all valid.
            let mut slid_out = 0;
            for hole in self.holes_in(self.cum, floor) {
                slid_out += hole.end - hole.start;
                on_lost(hole);
            }
            self.missing -= slid_out;
            self.lost += slid_out;
            self.cum = floor;
        }
        // Clear the words `top` enters: `(word(old_top), word(new_top)]`.
        // Their ring slots last held sns below `word(floor) * 64 <= cum`.
        let first = old_top / BITS + 1;
        let count = (new_top / BITS + 1 - first).min(WORDS as u64);
        for word in first..first + count {
            self.words[Self::slot(word * BITS)] = 0;
        }
        self.set(sn);
        self.missing += sn - old_top;
        self.top = new_top;
        self.top_slot = Self::slot(new_top);
        self.cum = self.next_unset(self.cum, new_top);
    }

    /// The maximal open ranges in `[from, to)`, `cum <= from`, `to <= top`.
    fn holes_in(&self, from: u64, to: u64) -> Holes<'_, WORDS> {
        Holes {
            tracker: self,
            pos: from,
            end: to,
        }
    }

    /// Ring slot of the word holding `sn`.
    const fn slot(sn: u64) -> usize {
        // The remainder is below WORDS, so it fits a usize.
        ((sn / BITS) % WORDS as u64) as usize
    }

    fn is_set(&self, sn: u64) -> bool {
        (self.words[Self::slot(sn)] >> (sn % BITS)) & 1 != 0
    }

    fn set(&mut self, sn: u64) {
        self.words[Self::slot(sn)] |= 1 << (sn % BITS);
    }

    /// The first sn in `[from, end)` that has not arrived, or `end`.
    /// Valid for `cum <= from` and `end <= top`.
    fn next_unset(&self, mut from: u64, end: u64) -> u64 {
        while from < end {
            let offset = from % BITS;
            // Bit i: sn `from + i` has not arrived. The shift brings in
            // zeros, which read as "arrived" and move on to the next word.
            let open = !self.words[Self::slot(from)] >> offset;
            if open != 0 {
                return end.min(from + u64::from(open.trailing_zeros()));
            }
            from += BITS - offset;
        }
        end
    }

    /// The first sn in `[from, end)` that has arrived, or `end`.
    /// Valid for `cum <= from` and `end <= top`.
    fn next_set(&self, mut from: u64, end: u64) -> u64 {
        while from < end {
            let offset = from % BITS;
            let arrived = self.words[Self::slot(from)] >> offset;
            if arrived != 0 {
                return end.min(from + u64::from(arrived.trailing_zeros()));
            }
            from += BITS - offset;
        }
        end
    }
}

impl<const WORDS: usize> Default for RecvTracker<WORDS> {
    /// A tracker expecting sn 0 first.
    fn default() -> Self {
        Self::starting_at(0)
    }
}

/// Iterator over the open holes of a [`RecvTracker`], returned by
/// [`RecvTracker::holes`]: maximal ranges, ascending.
#[derive(Clone, Debug)]
pub struct Holes<'a, const WORDS: usize> {
    tracker: &'a RecvTracker<WORDS>,
    pos: u64,
    end: u64,
}

impl<const WORDS: usize> Iterator for Holes<'_, WORDS> {
    type Item = Range<u64>;

    fn next(&mut self) -> Option<Range<u64>> {
        let start = self.tracker.next_unset(self.pos, self.end);
        if start >= self.end {
            self.pos = self.end;
            return None;
        }
        let end = self.tracker.next_set(start, self.end);
        self.pos = end;
        Some(start..end)
    }
}

impl<const WORDS: usize> core::iter::FusedIterator for Holes<'_, WORDS> {}

#[cfg(test)]
mod tests;
