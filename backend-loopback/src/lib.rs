//! iomsg-loopback: a deterministic in-memory transport with seeded fault
//! injection, and a simulation driver that runs whole client/server
//! scenarios in virtual time.
//!
//! * [`Network`] is an in-process network of endpoints. [`ClientPort`] and
//!   [`ServerPort`] implement the core's `Transport` trait over it. There
//!   are no threads, no real time and no OS randomness: the same seed gives
//!   the same run, bit for bit.
//!   The network moves opaque frames: it never looks inside one.
//! * [`Faulty`] wraps any `Transport` (the loopback ports, or UCX's) and,
//!   by rate or by schedule, drops (ending the connection), silently
//!   drops (the connection stays up: the transport bug the field report
//!   suspected), duplicates, reorders, corrupts, delays and disconnects
//!   the frames that side sends; [`Faults`] is the seeded decision engine
//!   its wrappers share. Server crash-restarts are run by the
//!   simulation: all server state is gone and a new instance listens
//!   again after a delay.
//! * [`sim`] runs a [`sim::Scenario`] and returns a [`sim::Report`] whose
//!   protocol-side counts are checked against a ground truth kept apart
//!   from the protocol.
//! * [`sweep`] draws random scenarios, checks each run's invariants, and
//!   shrinks a failing scenario to a small one-line reproduction.
//!
//! # Features
//!
//! - `fuzzing`: the fuzz target's body (`iomsg_loopback::fuzzing`, hidden
//!   from these docs), for the repository's cargo-fuzz crate; it turns on
//!   `iomsg-core`'s `fuzzing` too. Not for applications.

mod fault;
mod faulty;
mod network;
pub mod sim;
pub mod sweep;
#[cfg(test)]
mod testkit;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

pub use fault::{Direction, FaultConfig, FaultCounts, FaultInjector, FrameFault, ScheduledFault};
pub use faulty::{DropTap, Faults, Faulty, FaultyTx};
pub use network::{
    ClientPort, ConnStatus, EndpointId, Network, NetworkConfig, NetworkCounts, ServerPort, Tap,
    TapFn, TapKind,
};
