//! The bytes of unacknowledged messages, in caller-provided storage.
//!
//! [`PayloadRing`] stores each message's bytes contiguously in a ring over
//! any `S: AsRef<[u8]> + AsMut<[u8]>` (an array, a `&mut [u8]`, a boxed
//! slice: smoltcp's storage manner, so the core never allocates). A
//! message that would wrap past the end starts again at the beginning;
//! positions are byte offsets that only grow, so a message's place is
//! `pos % capacity`. Messages are released oldest first; the bytes a
//! message skipped at the end of the storage go with the message before
//! it, and when nothing is held nothing is skipped: an empty ring takes
//! any message up to its capacity.

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
    /// `head` before the newest [`alloc`](PayloadRing::alloc), which
    /// [`unalloc`](PayloadRing::unalloc) restores with any bytes it skipped.
    prev_head: u64,
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> PayloadRing<S> {
    /// An empty ring over `storage`.
    pub fn new(storage: S) -> Self {
        PayloadRing {
            storage,
            tail: 0,
            head: 0,
            prev_head: 0,
        }
    }

    /// The storage's size: no message can be longer.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// Bytes between the oldest message held and the next free byte
    /// (bytes skipped at the end of the storage included).
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
        if self.tail == self.head {
            // No byte is held (only empty messages, if any): the skipped
            // bytes hold nothing either.
            self.tail = start;
        }
        if start + len as u64 - self.tail > cap as u64 {
            return Err(full);
        }
        self.prev_head = self.head;
        self.head = start + len as u64;
        let bytes = self.slot_mut(start, len);
        Ok((start, bytes))
    }

    /// Undoes the newest [`alloc`](Self::alloc), which returned `pos`,
    /// bytes it skipped at the end of the storage included.
    pub fn unalloc(&mut self, pos: u64) {
        if self.head > pos {
            self.head = self.prev_head.max(self.tail);
        }
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
    use std::{vec, vec::Vec};

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

    /// The storage as a trivial oracle: a flag per byte, and the live
    /// messages oldest first. A message goes where the newest one ended,
    /// or at the start of the storage when it would not fit before the
    /// end (the bytes it skips then go with the message before it); it is
    /// accepted exactly when those bytes are free.
    #[derive(Clone)]
    struct Oracle {
        used: Vec<bool>,
        /// (offset, len, bytes held incl. skipped ones after it, tag).
        live: VecDeque<(usize, usize, usize, u8)>,
        /// Where the next message would go, before any skip.
        write: usize,
    }

    impl Oracle {
        fn new(cap: usize) -> Self {
            Oracle {
                used: vec![false; cap],
                live: VecDeque::new(),
                write: 0,
            }
        }

        fn free(&self, from: usize, to: usize) -> bool {
            self.used[from..to].iter().all(|&u| !u)
        }

        /// The offset a message of `len` bytes goes to, if it fits now.
        fn place(&self, len: usize) -> Option<usize> {
            let cap = self.used.len();
            if len > cap {
                None
            } else if self.write + len <= cap {
                self.free(self.write, self.write + len)
                    .then_some(self.write)
            } else {
                (self.free(self.write, cap) && self.free(0, len)).then_some(0)
            }
        }

        fn alloc(&mut self, len: usize, tag: u8) -> Option<usize> {
            let cap = self.used.len();
            let at = self.place(len)?;
            let holds_bytes = self.live.iter().any(|m| m.2 > 0);
            if let Some(newest) = self
                .live
                .back_mut()
                .filter(|_| at != self.write && holds_bytes)
            {
                // The skipped bytes go with the newest message, unless
                // nothing holds a byte.
                newest.2 += cap - self.write;
                for b in &mut self.used[self.write..cap] {
                    *b = true;
                }
            }
            for b in &mut self.used[at..at + len] {
                *b = true;
            }
            self.live.push_back((at, len, len, tag));
            self.write = at + len;
            Some(at)
        }

        fn release(&mut self) {
            let cap = self.used.len();
            if let Some((at, _, held, _)) = self.live.pop_front() {
                for i in at..at + held {
                    self.used[i % cap] = false;
                }
            }
        }
    }

    /// Every sequence of `depth` allocations (0 to `cap` bytes) and
    /// releases of the oldest message, from `ring` and `oracle` alike.
    fn explore(
        ring: &PayloadRing<Vec<u8>>,
        oracle: &Oracle,
        positions: &VecDeque<u64>,
        depth: u32,
        tag: u8,
    ) {
        if depth == 0 {
            return;
        }
        let cap = ring.capacity();
        for len in 0..=cap + 1 {
            let (mut r, mut o, mut p) = (ring.clone(), oracle.clone(), positions.clone());
            let empty = o.live.is_empty();
            let got = r.alloc(len).map(|(pos, buf)| {
                buf.fill(tag);
                pos
            });
            let want = o.alloc(len, tag);
            assert_eq!(
                got.ok().map(|pos| (pos % cap as u64) as usize),
                want.map(|at| at % cap),
                "cap {cap}, alloc {len} with {:?} live",
                oracle.live
            );
            if empty && len <= cap {
                assert!(got.is_ok(), "an empty ring refused {len} of {cap} bytes");
            }
            if let Ok(pos) = got {
                p.push_back(pos);
            }
            check_live(&r, &o, &p);
            explore(&r, &o, &p, depth - 1, tag.wrapping_add(1));
        }
        if !oracle.live.is_empty() {
            let (mut r, mut o, mut p) = (ring.clone(), oracle.clone(), positions.clone());
            o.release();
            p.pop_front();
            r.release_to(p.front().copied().unwrap_or(r.head()));
            check_live(&r, &o, &p);
            explore(&r, &o, &p, depth - 1, tag.wrapping_add(1));
        }
    }

    fn check_live(r: &PayloadRing<Vec<u8>>, o: &Oracle, p: &VecDeque<u64>) {
        for (&pos, &(_, len, _, tag)) in p.iter().zip(&o.live) {
            assert!(r.get(pos, len).iter().all(|&b| b == tag));
        }
    }

    #[test]
    fn every_short_sequence_matches_the_oracle() {
        for cap in 1..=6 {
            let ring = PayloadRing::new(vec![0u8; cap]);
            explore(&ring, &Oracle::new(cap), &VecDeque::new(), 6, 1);
        }
    }

    #[test]
    fn an_empty_ring_takes_a_message_longer_than_what_is_left_before_the_end() {
        let mut r = PayloadRing::new(vec![0u8; 1000]);
        let (a, _) = r.alloc(300).unwrap();
        r.release_to(r.head());
        assert_eq!(r.used(), 0);
        let (b, buf) = r.alloc(800).expect("nothing is held");
        assert_eq!((a, b, buf.len(), r.used()), (0, 1000, 800, 800));
    }

    #[test]
    fn unalloc_gives_back_the_bytes_a_message_skipped() {
        let mut r = PayloadRing::new([0u8; 10]);
        let (_, _) = r.alloc(4).unwrap();
        let (b, _) = r.alloc(4).unwrap();
        r.release_to(b);
        let (c, _) = r.alloc(3).unwrap();
        assert_eq!((c, r.used()), (10, 9));
        r.unalloc(c);
        assert_eq!(r.used(), 4);
    }
}
