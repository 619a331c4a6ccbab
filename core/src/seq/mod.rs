//! Sequence numbers on both ends of a session.
//!
//! - [`RecvTracker`] (receiver): classifies every arriving sn as a
//!   [`Arrival`] — in order, opening a gap, filling a gap, duplicate, too far
//!   ahead, or out of range — and reports the cumulative ack, the open holes
//!   and the sns that slid out of the window without ever arriving (confirmed
//!   lost). A ring of `u64` words in the style of RFC 6479 and WireGuard's
//!   replay counter: advancing the top clears whole words, nothing is ever
//!   bit-shifted, and the in-order path is O(1).
//! - [`SendWindow`] (sender): the bounded window of unacknowledged messages,
//!   released by cumulative acks and iterated from `resume_from` for replay.
//!   A full window is backpressure, not an error.
//! - [`PayloadRing`] (sender): the bytes of those messages, contiguous, in
//!   storage the caller provides.
//!
//! Sequence numbers above [`SN_MAX`](crate::wire::SN_MAX) are refused by
//! both: an sn never wraps.
//!
//! Nothing here allocates; capacities are const generics or the caller's
//! storage.

mod arrival;
mod ring;
mod tracker;
mod window;

pub use arrival::{Arrival, SeqError};
pub use ring::{PayloadRing, RingFull};
pub use tracker::{DefaultTracker, Holes, RecvTracker};

/// The old name of [`Arrival`], which the simulation's judgement
/// (`iomsg_loopback::sim::Verdict`) shares.
#[deprecated(since = "0.2.0", note = "renamed `Arrival`: what an arriving sn is")]
pub type Verdict = Arrival;
pub use window::{SendWindow, WindowError};
