//! The server's tables: heapless index maps (insertion-ordered, fixed
//! capacity) with a one-multiply hasher.
//!
//! Every key is a `u64` (a session id, a [`ConnId`](crate::conn::ConnId)),
//! hashed by `write_u64`. heapless's FNV hasher folds it in byte by byte,
//! eight dependent multiplies per lookup, several lookups per frame; one
//! multiply by an odd constant and a fold of the high half does the same
//! job. Neither is keyed: an attacker who picks session ids can make them
//! collide with either, and a lookup then costs at most the table's
//! capacity, as before. The order of a table (which connection's turn it
//! is, which session is evicted) is its insertion order, whatever the hash.

use core::hash::Hasher;

/// A fixed-capacity, insertion-ordered map with [`MulHasher`].
pub(super) type Table<K, V, const N: usize> =
    heapless::IndexMap<K, V, hash32::BuildHasherDefault<MulHasher>, N>;

/// Multiplies in each word; `finish` folds the well-mixed high half down
/// (heapless keeps the low 16 bits of the hash).
#[derive(Default)]
pub(super) struct MulHasher(u64);

/// 2^64 / φ, odd.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for MulHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::ConnId;
    use core::hash::{BuildHasher, Hash};

    fn hash16<T: Hash>(v: &T) -> u16 {
        hash32::BuildHasherDefault::<MulHasher>::default().hash_one(v) as u16
    }

    #[test]
    fn sequential_keys_spread_over_the_low_16_bits() {
        // Sessions and connections are often numbered 1, 2, 3...: their
        // 16-bit hashes (what heapless keeps) must not pile up.
        for keys in [
            (0..4096u64)
                .map(|i| hash16(&i))
                .collect::<std::vec::Vec<_>>(),
            (0..4096u32).map(|i| hash16(&ConnId::new(i, 1))).collect(),
            (0..4096u32).map(|i| hash16(&ConnId::new(0, i))).collect(),
        ] {
            let mut buckets = [0u32; 64];
            for h in &keys {
                buckets[usize::from(h >> 10)] += 1;
            }
            let max = buckets.iter().max().copied().unwrap_or(0);
            assert!(max < 2 * 4096 / 64, "{buckets:?}");
        }
    }

    #[test]
    fn a_table_keeps_insertion_order_and_finds_every_key() {
        let mut t: Table<u64, u64, 64> = Table::new();
        for i in 0..64u64 {
            assert!(t.insert(i * 0x1_0000_0001, i).is_ok());
        }
        assert!(t.insert(1 << 40, 0).is_err(), "full");
        for i in 0..64u64 {
            assert_eq!(t.get(&(i * 0x1_0000_0001)), Some(&i));
        }
        assert!(t.keys().copied().eq((0..64u64).map(|i| i * 0x1_0000_0001)));
    }
}
