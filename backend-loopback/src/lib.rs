//! iomsg-loopback: a deterministic in-memory transport with seeded fault
//! injection, and a simulation driver that runs whole client/server
//! scenarios in virtual time.
//!
//! * [`Network`] is an in-process network of endpoints. [`ClientPort`] and
//!   [`ServerPort`] implement the core's `Transport` trait over it. There
//!   are no threads, no real time and no OS randomness: the same seed gives
//!   the same run, bit for bit.
//! * [`FaultInjector`] sits on the network's send path and, by rate or by
//!   schedule, drops (resetting the connection), silently drops (the
//!   connection stays up: the transport bug the field report suspected),
//!   duplicates, reorders, corrupts, delays and disconnects. Server
//!   crash-restarts are run by the simulation: all server state is gone
//!   and a new instance listens again after a delay.
//! * [`sim`] runs a [`sim::Scenario`] and returns a [`sim::Report`] whose
//!   protocol-side counts are checked against a ground truth kept apart
//!   from the protocol.
//! * [`sweep`] draws random scenarios, checks each run's invariants, and
//!   shrinks a failing scenario to a small one-line reproduction.

mod fault;
mod network;
pub mod sim;
pub mod sweep;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

pub use fault::{Direction, FaultConfig, FaultCounts, FaultInjector, FrameFault, ScheduledFault};
pub use network::{
    ClientPort, ConnStatus, EndpointId, Network, NetworkConfig, NetworkCounts, ServerPort, Tap,
    TapFn, TapKind,
};
