//! The transport's clock: `CLOCK_MONOTONIC_COARSE`.
//!
//! Liveness needs time to a few milliseconds (heartbeats every 250 ms, a
//! 3 s silence timeout), and the transport reads the clock after every
//! progress call. The coarse clock is read from memory the kernel keeps
//! (no counter read): 9 ns a call here against 64 ns for `Instant::now`
//! on this VM, whose precise clock is the TSC read through the vDSO. Its
//! resolution is the kernel's tick (4 ms here).

use core::ops::Add;
use core::time::Duration;

/// A moment on the coarse monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Clock(Duration);

impl Clock {
    /// Now, to the kernel's tick.
    pub(crate) fn now() -> Clock {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: ts is a live out-struct for the call; the clock id is
        // valid on Linux (since 2.6.32), so the call cannot fail.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        Clock(Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        ))
    }

    /// How long after `earlier` this is (zero if it is not after).
    pub(crate) fn saturating_duration_since(self, earlier: Clock) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// How long ago this was.
    #[cfg(test)]
    pub(crate) fn elapsed(self) -> Duration {
        Clock::now().saturating_duration_since(self)
    }
}

impl Add<Duration> for Clock {
    type Output = Clock;

    fn add(self, d: Duration) -> Clock {
        Clock(self.0.saturating_add(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_keeps_up_with_the_precise_one_to_a_few_ticks() {
        let (c0, p0) = (Clock::now(), std::time::Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (c1, p1) = (Clock::now(), std::time::Instant::now());
        let coarse = c1.saturating_duration_since(c0);
        let precise = p1 - p0;
        let off = coarse.abs_diff(precise);
        assert!(
            off <= Duration::from_millis(20),
            "{coarse:?} against {precise:?}"
        );
        assert!(c1 > c0 && c0 + coarse == c1);
        assert_eq!(c0.saturating_duration_since(c1), Duration::ZERO);
    }
}
