//! The io_demo-style data pattern.
//!
//! Payloads of writes and read completions are a deterministic function of
//! `(session, sn, offset)`, so the receiver can verify content end to end
//! (beyond the CRCs) and the sender can regenerate a payload for replay
//! without keeping a copy of it.

use super::backoff::mix64;

fn seed(session: u64, sn: u64) -> u64 {
    mix64(session ^ sn.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Fills `buf` with the pattern of `(session, sn)`.
pub fn fill(session: u64, sn: u64, buf: &mut [u8]) {
    let mut x = seed(session, sn);
    let mut chunks = buf.chunks_exact_mut(8);
    for chunk in &mut chunks {
        chunk.copy_from_slice(&x.to_le_bytes());
        x = next(x);
    }
    let rest = chunks.into_remainder();
    let n = rest.len();
    rest.copy_from_slice(&x.to_le_bytes()[..n]);
}

/// Whether `buf` holds the pattern of `(session, sn)`.
pub fn matches(session: u64, sn: u64, buf: &[u8]) -> bool {
    let mut x = seed(session, sn);
    let mut chunks = buf.chunks_exact(8);
    for chunk in &mut chunks {
        if chunk != x.to_le_bytes() {
            return false;
        }
        x = next(x);
    }
    let rest = chunks.remainder();
    rest == &x.to_le_bytes()[..rest.len()]
}

fn next(x: u64) -> u64 {
    // xorshift64: cheap and never stuck at zero unless seeded with zero,
    // which `mix64` of anything practically never gives; correctness does
    // not depend on it either way.
    let mut x = x;
    x ^= x << 13;
    x ^= x >> 7;
    x ^ (x << 17)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_buffer_matches_for_every_length() {
        let mut buf = [0u8; 40];
        for len in 0..=40 {
            fill(3, 9, &mut buf[..len]);
            assert!(matches(3, 9, &buf[..len]), "len {len}");
        }
    }

    #[test]
    fn other_sn_or_session_or_flipped_byte_does_not_match() {
        let mut buf = [0u8; 37];
        fill(3, 9, &mut buf);
        assert!(!matches(3, 10, &buf));
        assert!(!matches(4, 9, &buf));
        for i in 0..buf.len() {
            buf[i] ^= 0x10;
            assert!(!matches(3, 9, &buf), "flip at {i} not seen");
            buf[i] ^= 0x10;
        }
    }
}
