//! What a [`RecvTracker`](super::RecvTracker) says about an sn, and why it
//! refuses a request.

use core::fmt;
use core::ops::Range;

use crate::wire::SN_MAX;

/// What one arriving sn is to a [`RecvTracker`](super::RecvTracker).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// `sn == top`: the next expected sn. Deliver it.
    InOrder,
    /// `top < sn < top + WINDOW`: deliver `sn`; the sns in `missing`
    /// (`top..sn`) become open holes.
    Gap {
        /// The sns jumped over, now open holes.
        missing: Range<u64>,
    },
    /// `cumulative <= sn < top` and `sn` had not arrived: a late arrival
    /// that closes a hole. Deliver it.
    FillsGap,
    /// `sn` is below the cumulative point, or it already arrived (or was
    /// given up as lost). Do not deliver it again.
    Duplicate,
    /// `sn >= top + WINDOW`: too far ahead to track. Refused; the tracker is
    /// unchanged. A peer that sends this broke the window contract.
    TooFar {
        /// The refused sn.
        sn: u64,
        /// The tracker's top when it was refused.
        top: u64,
    },
    /// `sn > SN_MAX`: sequence numbers never wrap. Refused; the tracker is
    /// unchanged.
    OutOfRange {
        /// The refused sn.
        sn: u64,
    },
}

impl Arrival {
    /// Whether the message carrying this sn is to be delivered
    /// ([`InOrder`](Arrival::InOrder), [`Gap`](Arrival::Gap) or
    /// [`FillsGap`](Arrival::FillsGap)).
    #[must_use]
    pub const fn delivers(&self) -> bool {
        matches!(
            self,
            Arrival::InOrder | Arrival::Gap { .. } | Arrival::FillsGap
        )
    }
}

/// Why a [`RecvTracker`](super::RecvTracker) refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeqError {
    /// `sn` is above [`SN_MAX`]; sequence numbers never wrap.
    OutOfRange {
        /// The refused sn.
        sn: u64,
    },
    /// `sn` lies more than a window past the cumulative point.
    TooFar {
        /// The refused sn.
        sn: u64,
        /// The cumulative point when it was refused.
        cum: u64,
    },
}

impl fmt::Display for SeqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeqError::OutOfRange { sn } => write!(
                f,
                "sn {sn} is above SN_MAX ({SN_MAX}); sequence numbers never wrap: \
                 start a new session"
            ),
            SeqError::TooFar { sn, cum } => write!(
                f,
                "sn {sn} is more than a window past the cumulative point {cum}; \
                 the sender broke the agreed window"
            ),
        }
    }
}

impl core::error::Error for SeqError {}
