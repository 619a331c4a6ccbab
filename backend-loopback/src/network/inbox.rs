//! A network endpoint's queue of what is on its way to it (frames,
//! connection notices), ordered by delivery time, and the hasher of the
//! network's own small keys.

use super::*;

#[derive(Debug)]
pub(super) enum Kind {
    Connected,
    Accepted,
    Frame(Vec<u8>),
    Disconnected(DisconnectReason),
}

#[derive(Debug)]
pub(super) struct Pending {
    pub(super) at: Instant,
    /// Tie-breaker: equal times keep their sending order.
    pub(super) seq: u64,
    pub(super) sent_at: Instant,
    pub(super) conn: ConnId,
    /// Addressed to the connection's server end.
    pub(super) to_server: bool,
    pub(super) kind: Kind,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// An endpoint's queue, ordered by delivery time then sequence. Events
/// usually arrive in that order already (one latency for all): those go to
/// a FIFO; the others (a delayed frame, an earlier reset notice) to a
/// heap, and the earlier of the two fronts comes out first.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    pub(super) fifo: VecDeque<Pending>,
    pub(super) heap: BinaryHeap<Reverse<Pending>>,
}

impl Inbox {
    #[inline]
    pub(super) fn push(&mut self, p: Pending) {
        if self.heap.is_empty() && self.fifo.back().is_none_or(|b| *b <= p) {
            self.fifo.push_back(p);
        } else {
            self.heap.push(Reverse(p));
        }
    }

    pub(super) fn peek(&self) -> Option<&Pending> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) => Some(if h < f { h } else { f }),
            (f, h) => f.or(h.map(|r| &r.0)),
        }
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<Pending> {
        let from_heap = match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) => h < f,
            (None, Some(_)) => true,
            _ => false,
        };
        if from_heap {
            self.heap.pop().map(|r| r.0)
        } else {
            self.fifo.pop_front()
        }
    }

    pub(super) fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.fifo.iter().chain(self.heap.iter().map(|r| &r.0))
    }

    pub(super) fn into_all(self) -> impl Iterator<Item = Pending> {
        self.fifo
            .into_iter()
            .chain(self.heap.into_iter().map(|r| r.0))
    }
}

/// Hashes the network's small integer keys (connection ids, addresses)
/// with one multiply: the tables are the network's hot path, and its keys
/// are its own, not an adversary's.
#[derive(Default, Clone, Copy)]
pub(super) struct KeyHasher(u64);

impl core::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub(super) type KeyMap<K, V> = HashMap<K, V, core::hash::BuildHasherDefault<KeyHasher>>;
