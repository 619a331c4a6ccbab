//! One connection's sns: the project's [`RecvTracker`] over io_demo's
//! 32-bit sns, unwrapped, with room for sns just below the first one seen
//! (active messages may overtake the first few: UCX keeps no order
//! between an endpoint's first messages, sent while it is wired up, and
//! those after).

use core::ops::Range;

use iomsg_core::iodemo::unwrap_sn;
use iomsg_core::seq::{Arrival, RecvTracker};

/// Sns below the first one seen that are still taken (once each).
const BEFORE: u64 = 64;

/// What the tracker says about an arriving sn.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Placed {
    /// New: serve it.
    New,
    /// Already arrived on this connection: do not serve it twice.
    Duplicate,
}

pub(super) struct Track {
    tracker: RecvTracker,
    /// The first sn seen.
    start: u64,
    /// Which of the [`BEFORE`] sns below `start` arrived (bit i: start - 1 - i).
    below: u64,
    /// The highest sn placed.
    last: u64,
}

impl Track {
    /// A tracker whose first sn is `sn` (unwrapped: above 2³² so that the
    /// sns before it stay positive).
    pub(super) fn new(sn: u32) -> Result<Track, String> {
        let start = (1u64 << 32) | u64::from(sn);
        Ok(Track {
            tracker: RecvTracker::try_new(start).map_err(|e| e.to_string())?,
            start,
            below: 0,
            last: start,
        })
    }

    /// Places `sn`; sns the tracker's window slid past without their
    /// arriving are added to `lost`.
    pub(super) fn place(&mut self, sn: u32, lost: &mut Vec<Range<u64>>) -> Result<Placed, String> {
        let sn = unwrap_sn(self.last, sn);
        if sn < self.start {
            let back = self.start - sn - 1;
            if back >= BEFORE || self.below & (1 << back) != 0 {
                return Ok(Placed::Duplicate);
            }
            self.below |= 1 << back;
            return Ok(Placed::New);
        }
        let mut verdict = self.tracker.commit(sn, |r| lost.push(r.clone()));
        if let Arrival::TooFar { top, .. } = verdict {
            // Past the window: what lies between is skipped; tracking
            // starts again at this sn.
            lost.extend(self.tracker.holes());
            lost.push(top..sn);
            self.tracker = RecvTracker::try_new(sn).map_err(|e| e.to_string())?;
            verdict = self.tracker.commit(sn, |_| {});
        }
        match verdict {
            Arrival::Duplicate => Ok(Placed::Duplicate),
            Arrival::OutOfRange { sn } => Err(format!("sn {sn} out of the tracker's range")),
            _ => {
                self.last = self.last.max(sn);
                Ok(Placed::New)
            }
        }
    }

    /// Sns skipped and never filled, as the connection ends.
    pub(super) fn holes(&self) -> Vec<Range<u64>> {
        self.tracker.holes().collect()
    }

    /// How far from `sn` (wrapping) the connection's last sn is: sorts
    /// sns of one connection.
    pub(super) fn order(&self, sn: u32) -> u64 {
        unwrap_sn(self.last, sn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sns_just_before_the_first_are_taken_once_and_gaps_are_found() {
        let mut t = Track::new(u32::MAX - 1).unwrap();
        let mut lost = Vec::new();
        assert_eq!(t.place(u32::MAX - 1, &mut lost), Ok(Placed::New));
        assert_eq!(t.place(u32::MAX - 3, &mut lost), Ok(Placed::New));
        assert_eq!(t.place(u32::MAX - 3, &mut lost), Ok(Placed::Duplicate));
        assert_eq!(t.place(u32::MAX - 1, &mut lost), Ok(Placed::Duplicate));
        // Across the 32-bit edge: 0 follows u32::MAX; 1 is skipped.
        assert_eq!(t.place(u32::MAX, &mut lost), Ok(Placed::New));
        assert_eq!(t.place(0, &mut lost), Ok(Placed::New));
        assert_eq!(t.place(2, &mut lost), Ok(Placed::New));
        let holes = t.holes();
        assert_eq!(holes.len(), 1);
        assert_eq!(holes[0].start as u32, 1);
        assert_eq!(holes[0].end as u32, 2);
        assert!(lost.is_empty());
        // Far ahead: the skipped stretch is reported at once.
        assert_eq!(t.place(100_000, &mut lost), Ok(Placed::New));
        assert_eq!(
            lost.iter().map(|r| r.end - r.start).sum::<u64>(),
            1 + 100_000 - 3
        );
    }
}
