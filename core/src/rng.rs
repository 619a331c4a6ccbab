//! Seeded randomness for backoff jitter, workloads and simulations: one
//! home for every random number the project draws from a seed.

/// SplitMix64: a tiny, seeded, deterministic generator (not cryptographic).
///
/// Used for backoff jitter, workloads and simulations, so that a run is a pure
/// function of its seeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// A value in `0..bound` (`0` when `bound` is `0`).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // Multiply-shift: unbiased enough for jitter and simulation choices.
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// The SplitMix64 finaliser: a bijective 64-bit mix.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
