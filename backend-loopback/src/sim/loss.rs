//! What a loss is called in the simulation's verdict, and one session's
//! loss report.
//!
//! Every sn that never reaches the server's application is classified:
//!
//! * [`LossClass::LiveConnection`]: a later frame of the same connection
//!   arrived (or a probe proved the frame was sent before it), so the
//!   transport lost it while the connection stayed up: a transport bug;
//! * [`LossClass::InFlightAtDisconnect`]: unacknowledged when its
//!   connection broke, and not replayed (replay off). Expected, and
//!   recoverable with replay on.

use core::fmt;
use core::ops::Range;

use heapless::Vec;

/// Why an sn was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LossClass {
    /// Unacknowledged when its connection broke, and not replayed.
    InFlightAtDisconnect,
    /// Lost on a connection that stayed up: a transport bug.
    LiveConnection,
}

impl LossClass {
    /// Its name in reports.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LossClass::InFlightAtDisconnect => "in flight at disconnect",
            LossClass::LiveConnection => "on a live connection",
        }
    }
}

impl fmt::Display for LossClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Ranges a [`SessionLoss`] lists (all are counted).
pub const LISTED_RANGES: usize = 16;

/// One session's losses: counts per class, and the first
/// [`LISTED_RANGES`] runs of lost sns with their class. Adjacent runs of
/// one class merge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionLoss {
    /// Sns lost on a live connection.
    pub live: u64,
    /// Sns lost in flight at a disconnect.
    pub in_flight: u64,
    /// The first runs of lost sns, ascending as recorded.
    pub ranges: Vec<(Range<u64>, LossClass), LISTED_RANGES>,
    /// Runs not listed because the list was full.
    pub unlisted: u64,
}

impl SessionLoss {
    /// Records the lost sns `range` as `class`.
    pub fn record(&mut self, class: LossClass, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let n = range.end - range.start;
        match class {
            LossClass::LiveConnection => self.live += n,
            LossClass::InFlightAtDisconnect => self.in_flight += n,
        }
        if let Some((last, c)) = self.ranges.last_mut() {
            if *c == class && last.end == range.start {
                last.end = range.end;
                return;
            }
        }
        if self.ranges.push((range, class)).is_err() {
            self.unlisted += 1;
        }
    }

    /// Every lost sn, of both classes.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.live + self.in_flight
    }

    /// Whether nothing was lost.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.total() == 0
    }
}

impl fmt::Display for SessionLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_clean() {
            return f.write_str("nothing lost");
        }
        write!(
            f,
            "{} lost on a live connection, {} in flight at disconnect",
            self.live, self.in_flight
        )?;
        for (range, class) in &self.ranges {
            write!(f, "; sn {}..{} {class}", range.start, range.end)?;
        }
        if self.unlisted > 0 {
            write!(f, "; {} more runs", self.unlisted)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn adjacent_runs_of_one_class_merge_and_counts_add_up() {
        let mut l = SessionLoss::default();
        l.record(LossClass::LiveConnection, 3..5);
        l.record(LossClass::LiveConnection, 5..7);
        l.record(LossClass::InFlightAtDisconnect, 7..9);
        l.record(LossClass::InFlightAtDisconnect, 0..0);
        assert_eq!((l.live, l.in_flight, l.total()), (4, 2, 6));
        assert_eq!(
            l.ranges.as_slice(),
            &[
                (3..7, LossClass::LiveConnection),
                (7..9, LossClass::InFlightAtDisconnect)
            ]
        );
        assert_eq!(
            format!("{l}"),
            "4 lost on a live connection, 2 in flight at disconnect; \
             sn 3..7 on a live connection; sn 7..9 in flight at disconnect"
        );
    }

    #[test]
    fn runs_past_the_list_are_counted_not_listed() {
        let mut l = SessionLoss::default();
        for i in 0..(LISTED_RANGES as u64 + 3) {
            l.record(LossClass::LiveConnection, 2 * i..2 * i + 1);
        }
        assert_eq!(l.ranges.len(), LISTED_RANGES);
        assert_eq!(l.unlisted, 3);
        assert_eq!(l.live, LISTED_RANGES as u64 + 3);
        assert!(SessionLoss::default().is_clean());
    }
}
