//! The sender's window of unacknowledged messages.
//!
//! [`SendWindow`] maps each sn in `[base, next)` to what the sender needs to
//! send that message again (`E`), in a ring of `N` entries: sn `s` lives at
//! `s % N`. [`push`](SendWindow::push) assigns the next sn,
//! [`release`](SendWindow::release) applies a cumulative ack and
//! [`iter_from`](SendWindow::iter_from) yields the replay after a reconnect.

use core::fmt;

use crate::wire::SN_MAX;

/// Why a [`SendWindow`] refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowError {
    /// The window holds `capacity` unacknowledged messages: backpressure.
    /// Wait for an ack that releases some, then push again.
    Full {
        /// Oldest unacknowledged sn.
        base: u64,
        /// The sn the next push would get.
        next: u64,
        /// The window's capacity.
        capacity: usize,
    },
    /// The next sn would be above [`SN_MAX`]; sequence numbers never wrap.
    Exhausted {
        /// The sn the next push would get.
        next: u64,
    },
    /// A cumulative ack for sns that were never sent.
    AckBeyondSent {
        /// The ack received.
        ack: u64,
        /// One past the highest sn sent.
        next: u64,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WindowError::Full {
                base,
                next,
                capacity,
            } => write!(
                f,
                "send window full: {capacity} unacknowledged messages (sn {base}..{next}); \
                 wait for an ack before sending more"
            ),
            WindowError::Exhausted { next } => write!(
                f,
                "sequence numbers exhausted: next sn {next} is above SN_MAX ({SN_MAX}); \
                 start a new session"
            ),
            WindowError::AckBeyondSent { ack, next } => write!(
                f,
                "peer acknowledged up to sn {ack} but only sns below {next} were sent; \
                 the peer is confused or not the one that received them"
            ),
        }
    }
}

impl core::error::Error for WindowError {}

/// Bounded window of unacknowledged messages: sn → `E`, what is needed to
/// send that message again. At most `N` entries; no heap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWindow<E, const N: usize> {
    /// Entry of sn `s` at `s % N`, for `base <= s < next`.
    ring: [E; N],
    /// Oldest unacknowledged sn.
    base: u64,
    /// The sn the next push gets.
    next: u64,
}

impl<E: Copy + Default, const N: usize> SendWindow<E, N> {
    /// Compile-time check of `N`, evaluated by the constructor.
    const VALID: () = assert!(N >= 1, "SendWindow needs a capacity N >= 1");

    /// An empty window whose first push gets sn `start_sn`.
    ///
    /// `N == 0` is a compile-time error. A `start_sn` above [`SN_MAX`] makes
    /// every push fail with [`WindowError::Exhausted`].
    #[must_use]
    pub fn new(start_sn: u64) -> Self {
        let () = Self::VALID;
        Self {
            ring: [E::default(); N],
            base: start_sn,
            next: start_sn,
        }
    }

    /// Appends `entry`, assigning it the next sn, which is returned.
    ///
    /// # Errors
    ///
    /// - [`WindowError::Exhausted`] if the next sn would be above
    ///   [`SN_MAX`];
    /// - [`WindowError::Full`] if `N` messages are unacknowledged
    ///   (backpressure).
    ///
    /// Either way nothing changes.
    pub fn push(&mut self, entry: E) -> Result<u64, WindowError> {
        if self.next > SN_MAX {
            return Err(WindowError::Exhausted { next: self.next });
        }
        if self.is_full() {
            return Err(WindowError::Full {
                base: self.base,
                next: self.next,
                capacity: N,
            });
        }
        let sn = self.next;
        self.ring[Self::slot(sn)] = entry;
        self.next = sn + 1;
        Ok(sn)
    }

    /// Applies the cumulative ack `ack`: releases every sn below it and
    /// returns how many were released (0 if `ack <= base()`).
    ///
    /// # Errors
    ///
    /// [`WindowError::AckBeyondSent`] if `ack > next()`; nothing changes.
    pub fn release(&mut self, ack: u64) -> Result<u64, WindowError> {
        if ack > self.next {
            return Err(WindowError::AckBeyondSent {
                ack,
                next: self.next,
            });
        }
        if ack <= self.base {
            return Ok(0);
        }
        let released = ack - self.base;
        self.base = ack;
        Ok(released)
    }

    /// The entry of the unacknowledged sn `sn`, if it is in the window.
    #[must_use]
    pub fn get(&self, sn: u64) -> Option<&E> {
        if self.base <= sn && sn < self.next {
            Some(&self.ring[Self::slot(sn)])
        } else {
            None
        }
    }

    /// The entry of the unacknowledged sn `sn`, mutably.
    pub fn get_mut(&mut self, sn: u64) -> Option<&mut E> {
        if self.base <= sn && sn < self.next {
            Some(&mut self.ring[Self::slot(sn)])
        } else {
            None
        }
    }

    /// `(sn, entry)` for every unacknowledged sn `>= from`, ascending: the
    /// replay order after a reconnect that resumes from `from`.
    pub fn iter_from(&self, from: u64) -> impl Iterator<Item = (u64, &E)> + '_ {
        (from.max(self.base)..self.next).map(move |sn| (sn, &self.ring[Self::slot(sn)]))
    }

    /// The oldest unacknowledged sn (`== next()` when empty).
    #[must_use]
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The sn the next push gets.
    #[must_use]
    pub fn next(&self) -> u64 {
        self.next
    }

    /// How many sns are unacknowledged.
    #[must_use]
    pub fn len(&self) -> usize {
        // At most N, so it fits a usize.
        (self.next - self.base) as usize
    }

    /// Whether every sent sn is acknowledged.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.next == self.base
    }

    /// Whether a push would be refused as [`WindowError::Full`].
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len() == N
    }

    /// How many unacknowledged messages the window holds at most: `N`.
    #[must_use]
    pub const fn capacity() -> usize {
        N
    }

    /// Ring slot of `sn`.
    fn slot(sn: u64) -> usize {
        // The remainder is below N, so it fits a usize.
        (sn % N as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    type Window = SendWindow<u32, 4>;

    fn replay(w: &Window, from: u64) -> Vec<(u64, u32)> {
        w.iter_from(from).map(|(sn, e)| (sn, *e)).collect()
    }

    #[test]
    fn push_assigns_consecutive_sns_from_start() {
        let mut w = Window::new(100);
        assert_eq!(
            (w.push(7), w.push(8), w.push(9)),
            (Ok(100), Ok(101), Ok(102))
        );
        assert_eq!((w.base(), w.next(), w.len()), (100, 103, 3));
        assert_eq!(
            (w.get(99), w.get(100), w.get(102), w.get(103)),
            (None, Some(&7), Some(&9), None)
        );
    }

    #[test]
    fn full_window_is_backpressure_until_an_ack_releases() {
        let mut w = Window::new(0);
        for e in 0..4 {
            assert_eq!(w.push(e), Ok(u64::from(e)));
        }
        assert!(w.is_full());
        let before = w.clone();
        let full = WindowError::Full {
            base: 0,
            next: 4,
            capacity: 4,
        };
        assert_eq!(w.push(99), Err(full));
        assert_eq!(w, before);
        let message = std::format!("{full}");
        assert!(
            message.contains("4 unacknowledged") && message.contains("wait for an ack"),
            "{message}"
        );
        assert_eq!(w.release(2), Ok(2));
        assert_eq!((w.push(4), w.push(5)), (Ok(4), Ok(5)));
        assert_eq!(replay(&w, 0), [(2, 2), (3, 3), (4, 4), (5, 5)]);
    }

    #[test]
    fn release_edges() {
        let mut w = Window::new(10);
        for e in 0..3 {
            w.push(e).unwrap();
        }
        assert_eq!(w.release(9), Ok(0));
        assert_eq!(w.release(10), Ok(0));
        assert_eq!(w.release(11), Ok(1));
        assert_eq!(w.release(11), Ok(0));
        let before = w.clone();
        assert_eq!(
            w.release(14),
            Err(WindowError::AckBeyondSent { ack: 14, next: 13 })
        );
        assert_eq!(w, before, "refused ack changed the window");
        assert_eq!(w.release(13), Ok(2));
        assert!(w.is_empty());
        assert_eq!((w.base(), w.next(), w.len()), (13, 13, 0));
    }

    #[test]
    fn iter_from_replays_unacked_in_sn_order() {
        let mut w = Window::new(6);
        for e in 60..64 {
            w.push(e).unwrap();
        }
        w.release(7).unwrap();
        w.push(64).unwrap();
        assert_eq!(replay(&w, 0), [(7, 61), (8, 62), (9, 63), (10, 64)]);
        assert_eq!(replay(&w, 9), [(9, 63), (10, 64)]);
        assert_eq!(replay(&w, 11), []);
        assert_eq!(replay(&w, u64::MAX), []);
    }

    #[test]
    fn exhausted_at_sn_max_never_wraps() {
        let mut w = Window::new(SN_MAX - 1);
        assert_eq!((w.push(1), w.push(2)), (Ok(SN_MAX - 1), Ok(SN_MAX)));
        let before = w.clone();
        assert_eq!(w.push(3), Err(WindowError::Exhausted { next: SN_MAX + 1 }));
        assert_eq!(w, before);
        assert_eq!(w.release(SN_MAX + 1), Ok(2));
        assert_eq!(w.push(3), Err(WindowError::Exhausted { next: SN_MAX + 1 }));
        assert_eq!(
            SendWindow::<u8, 1>::new(u64::MAX).push(0),
            Err(WindowError::Exhausted { next: u64::MAX })
        );
    }

    #[test]
    fn capacity_is_n() {
        assert_eq!(Window::capacity(), 4);
        assert_eq!(SendWindow::<(), 1>::capacity(), 1);
    }
}
