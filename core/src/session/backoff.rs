//! Exponential backoff with jitter.

use core::time::Duration;

use crate::rng::SplitMix64;

/// Exponential backoff: `initial * 2^(attempt-1)`, capped at `max`, then
/// scaled by a seeded jitter factor in `[1 - jitter, 1 + jitter]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub initial: Duration,
    /// Largest delay before jitter.
    pub max: Duration,
    /// Jitter as a fraction in per mille (0 = none, 250 = ±25 %).
    pub jitter_per_mille: u16,
}

impl Backoff {
    /// The delay before retry number `attempt` (1 for the first retry).
    pub fn delay(&self, attempt: u32, rng: &mut SplitMix64) -> Duration {
        let shift = attempt.saturating_sub(1).min(30);
        let base = self
            .initial
            .checked_mul(1u32 << shift)
            .unwrap_or(self.max)
            .min(self.max);
        self.jittered(base, rng)
    }

    /// `base` scaled by the jitter factor, as [`delay`](Self::delay) does.
    pub fn jittered(&self, base: Duration, rng: &mut SplitMix64) -> Duration {
        let jitter = u64::from(self.jitter_per_mille.min(1000));
        if jitter == 0 {
            return base;
        }
        // factor in [1000 - jitter, 1000 + jitter] per mille.
        let factor = 1000 - jitter + rng.below(2 * jitter + 1);
        let micros = u64::try_from(base.as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(micros.saturating_mul(factor) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_deterministic_per_seed() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let mut c = SplitMix64::new(8);
        let xs: [u64; 4] = core::array::from_fn(|_| a.next_u64());
        let ys: [u64; 4] = core::array::from_fn(|_| b.next_u64());
        let zs: [u64; 4] = core::array::from_fn(|_| c.next_u64());
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn below_stays_below_bound() {
        let mut r = SplitMix64::new(1);
        for bound in [1u64, 2, 3, 10, 1000, u64::MAX] {
            for _ in 0..1000 {
                assert!(r.below(bound) < bound);
            }
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn backoff_doubles_until_capped_without_jitter() {
        let b = Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(100),
            jitter_per_mille: 0,
        };
        let mut r = SplitMix64::new(0);
        let got: [u64; 6] =
            core::array::from_fn(|i| b.delay(i as u32 + 1, &mut r).as_millis() as u64);
        assert_eq!(got, [10, 20, 40, 80, 100, 100]);
        assert_eq!(b.delay(u32::MAX, &mut r), Duration::from_millis(100));
    }

    #[test]
    fn backoff_jitter_stays_within_bounds_and_varies() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            jitter_per_mille: 250,
        };
        let mut r = SplitMix64::new(42);
        let mut seen_low = false;
        let mut seen_high = false;
        for _ in 0..1000 {
            let d = b.delay(1, &mut r).as_micros();
            assert!((75_000..=125_000).contains(&d), "{d}");
            seen_low |= d < 90_000;
            seen_high |= d > 110_000;
        }
        assert!(seen_low && seen_high, "jitter never spread");
    }
}
