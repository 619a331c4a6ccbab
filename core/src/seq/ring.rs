//! The bytes of unacknowledged messages, in caller-provided storage.
//!
//! [`PayloadRing`] stores each message's bytes contiguously in a ring over
//! any `S: AsRef<[u8]> + AsMut<[u8]>` (an array, a `&mut [u8]`, a boxed
//! slice: smoltcp's storage manner, so the core never allocates). A
//! message that would wrap past the end starts again at the beginning;
//! positions are byte offsets that only grow, so a message's place is
//! `pos % capacity`. Messages are released oldest first.

use core::fmt;

/// The ring has no room for a message now: backpressure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFull {
    /// Bytes the message needs.
    pub need: usize,
    /// Bytes held by unacknowledged messages.
    pub used: usize,
    /// The storage's size.
    pub capacity: usize,
}

impl fmt::Display for RingFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "send buffer full: {} of {} bytes hold unacknowledged messages, {} more needed; \
             wait for acks",
            self.used, self.capacity, self.need
        )
    }
}

impl core::error::Error for RingFull {}

/// Contiguous message bytes in a ring over storage `S`.
#[derive(Clone, Debug)]
pub struct PayloadRing<S> {
    storage: S,
    /// Start of the oldest message held.
    tail: u64,
    /// Where the next message goes (before any skip to the start).
    head: u64,
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> PayloadRing<S> {
    /// An empty ring over `storage`.
    pub fn new(storage: S) -> Self {
        PayloadRing {
            storage,
            tail: 0,
            head: 0,
        }
    }

    /// The storage's size: no message can be longer.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// Bytes between the oldest message held and the next free byte.
    pub fn used(&self) -> usize {
        // At most the capacity.
        (self.head - self.tail) as usize
    }

    /// Reserves `len` contiguous bytes and returns their position and the
    /// bytes themselves.
    ///
    /// # Errors
    ///
    /// [`RingFull`] if they do not fit now (nothing changes). A message
    /// longer than [`capacity`](Self::capacity) never fits.
    pub fn alloc(&mut self, len: usize) -> Result<(u64, &mut [u8]), RingFull> {
        let cap = self.capacity();
        let full = RingFull {
            need: len,
            used: self.used(),
            capacity: cap,
        };
        if len > cap {
            return Err(full);
        }
        let mut start = self.head;
        if len > 0 {
            let off = (start % cap as u64) as usize;
            if off + len > cap {
                // Would wrap: skip the rest of the storage.
                start += (cap - off) as u64;
            }
        }
        if start + len as u64 - self.tail > cap as u64 {
            return Err(full);
        }
        self.head = start + len as u64;
        let bytes = self.slot_mut(start, len);
        Ok((start, bytes))
    }

    /// Undoes the newest [`alloc`](Self::alloc), which returned `pos`.
    pub fn unalloc(&mut self, pos: u64) {
        self.head = pos.max(self.tail);
    }

    /// The `len` bytes at `pos`.
    pub fn get(&self, pos: u64, len: usize) -> &[u8] {
        if len == 0 {
            return &[];
        }
        let cap = self.capacity();
        let off = (pos % cap as u64) as usize;
        &self.storage.as_ref()[off..off + len]
    }

    fn slot_mut(&mut self, pos: u64, len: usize) -> &mut [u8] {
        if len == 0 {
            return &mut [];
        }
        let cap = self.capacity();
        let off = (pos % cap as u64) as usize;
        &mut self.storage.as_mut()[off..off + len]
    }

    /// Frees every byte before `pos`: the position of the oldest message
    /// still held, or the head when none is.
    pub fn release_to(&mut self, pos: u64) {
        self.tail = pos.clamp(self.tail, self.head);
    }

    /// The position the next message would start at if none wrapped.
    pub fn head(&self) -> u64 {
        self.head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn messages_are_contiguous_and_survive_until_released() {
        let mut r = PayloadRing::new([0u8; 10]);
        let (a, buf) = r.alloc(4).unwrap();
        buf.copy_from_slice(b"abcd");
        let (b, buf) = r.alloc(4).unwrap();
        buf.copy_from_slice(b"efgh");
        // 2 bytes left at the end: a 3-byte message starts over at 0,
        // which `a` still holds.
        assert_eq!(
            r.alloc(3).map(|(p, _)| p),
            Err(RingFull {
                need: 3,
                used: 8,
                capacity: 10
            })
        );
        r.release_to(b);
        let (c, buf) = r.alloc(3).unwrap();
        buf.copy_from_slice(b"ijk");
        assert_eq!(c, 10);
        assert_eq!((r.get(b, 4), r.get(c, 3)), (&b"efgh"[..], &b"ijk"[..]));
        assert_eq!(a, 0);
        assert!(r.alloc(11).is_err());
        assert_eq!(r.alloc(0).map(|(_, s)| s.len()), Ok(0));
    }

    #[test]
    fn random_alloc_and_release_never_overlap_live_messages() {
        let mut rng = crate::rng::SplitMix64::new(7);
        let mut r = PayloadRing::new([0u8; 97]);
        let mut live: VecDeque<(u64, usize, u8)> = VecDeque::new();
        for round in 0..20_000u32 {
            if rng.below(3) > 0 {
                let len = rng.below(40) as usize;
                let tag = round as u8;
                if let Ok((pos, buf)) = r.alloc(len) {
                    buf.fill(tag);
                    live.push_back((pos, len, tag));
                } else {
                    // Full only if the live bytes leave no room.
                    assert!(!live.is_empty() || len > 97, "refused into an empty ring");
                }
            } else if live.pop_front().is_some() {
                r.release_to(live.front().map_or(r.head(), |m| m.0));
            }
            for &(pos, len, tag) in &live {
                assert!(r.get(pos, len).iter().all(|&b| b == tag), "round {round}");
            }
        }
    }
}
