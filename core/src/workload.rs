//! The io_demo-style workload: a payload source and its checker.
//!
//! Not part of the protocol, which carries whatever bytes an application
//! gives it: this is one application, shared by the simulation, the fuzz
//! targets, the soak and the benches. Its payloads are a deterministic
//! function of `(session, sn, offset)`, so a receiver can check content end
//! to end, beyond what the CRCs cover, and a reference can recompute what a
//! message carried. [`hash`] names a payload's bytes in ground-truth
//! records.

use crate::rng::mix64;

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

/// A 64-bit name for a payload's bytes (FNV-1a folded through
/// [`mix64`]): what ground-truth records keep per sn instead of the bytes.
/// Not cryptographic; equal bytes give equal hashes.
#[must_use]
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    for &b in chunks.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix64(h ^ bytes.len() as u64)
}

/// Whether a delivered payload is the pattern of `(session, sn)`: the
/// checker's verdict, with the length for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The bytes are the pattern.
    Intact,
    /// The bytes differ from the pattern: corruption the CRCs did not
    /// catch (or a payload that is not this workload's).
    Corrupt {
        /// The payload's length.
        len: usize,
    },
}

/// Checks `buf` against the pattern of `(session, sn)`.
#[must_use]
pub fn check(session: u64, sn: u64, buf: &[u8]) -> Check {
    if matches(session, sn, buf) {
        Check::Intact
    } else {
        Check::Corrupt { len: buf.len() }
    }
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
    fn hash_differs_for_a_flipped_byte_or_another_length() {
        let mut buf = [0u8; 37];
        fill(3, 9, &mut buf);
        let h = hash(&buf);
        assert_eq!(h, hash(&buf.clone()));
        assert_ne!(h, hash(&buf[..36]));
        for i in 0..buf.len() {
            buf[i] ^= 1;
            assert_ne!(hash(&buf), h, "flip at {i}");
            buf[i] ^= 1;
        }
        assert_eq!(check(3, 9, &buf), Check::Intact);
        assert_eq!(check(3, 8, &buf), Check::Corrupt { len: 37 });
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
