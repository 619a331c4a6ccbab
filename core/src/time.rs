//! Virtual-or-real time as the caller sees it.
//!
//! The core never reads a clock: every entry point that depends on time takes
//! `now: Instant`. A backend over real IO passes microseconds since some
//! fixed origin; the loopback simulation passes virtual time.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in microseconds since an origin the caller chooses.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// An instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Instant {
        Instant { micros }
    }

    /// An instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Instant {
        Instant {
            micros: millis.saturating_mul(1000),
        }
    }

    /// Microseconds since the origin.
    pub const fn micros(self) -> u64 {
        self.micros
    }

    /// The protocol's clock read from std's: the time since `start` (the
    /// program's start, say), in microseconds. The one clock every
    /// std-based driver, command and test of this project uses (feature
    /// `std`).
    #[cfg(feature = "std")]
    #[must_use]
    pub fn since(start: std::time::Instant) -> Instant {
        Instant::from_micros(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

fn duration_micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the far future instead of overflowing.
    fn add(self, rhs: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(duration_micros(rhs)),
        }
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.micros / 1_000_000,
            self.micros % 1_000_000
        )
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_saturates_instead_of_wrapping() {
        let late = Instant::from_micros(u64::MAX - 1);
        assert_eq!((late + Duration::from_secs(1)).micros(), u64::MAX);
    }

    #[test]
    fn sub_saturates_at_zero() {
        let a = Instant::from_millis(5);
        let b = Instant::from_millis(7);
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(b - a, Duration::from_millis(2));
    }
}
