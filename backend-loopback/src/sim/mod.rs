//! The simulation driver: whole scenarios in virtual time.
//!
//! [`run`] builds a loopback [`Network`](crate::Network), `clients` client
//! drivers and `servers` server drivers, feeds the clients a workload,
//! injects the scenario's faults, server crash-restarts (planned, or right
//! after a chosen protocol event), a stray peer, and clients sharing a
//! session id during `duration`, then turns faults off and runs until
//! every client is done *and the network is empty* (frames still in flight
//! after the last `Bye` are delivered or discarded inside the run), or
//! until `duration + drain` of virtual time or `max_steps` steps, which
//! fails the verdict. Time jumps from event to event, so a run of many
//! virtual seconds takes milliseconds.
//!
//! The [`Report`] holds what the protocol said (client and server counters
//! and claims) next to a ground truth the driver keeps by itself ([`truth`]):
//! what the network really carried to each server, what each server
//! instance handed to its application (attributed to the client whose
//! connection carried the frame), and what each client released. The
//! verdict ([`Report::passed`], [`Report::discrepancies`]) is every
//! [`Invariant`] checked against that truth.

mod check;
mod engine;
pub mod journal;
pub mod ledger;
pub mod loss;
mod report;
mod scenario;
mod server;
mod stray;
pub mod truth;

pub use check::{Findings, Invariant, Violation, MAX_LISTED_VIOLATIONS};
pub use report::{
    lost_line, DurableCounts, Latency, LossClass, LostRange, Report, MAX_LISTED_LIVE_LOSSES,
};
pub use scenario::{
    configs, sim_client_config, CrashPlan, Durability, KillEvent, KillOn, RestoreDefect, Scenario,
    ScenarioError, StrayPeer, TailLoss, Workload, CLIENT_WINDOW_MAX, DEFAULT_MAX_STEPS,
    EPOCH_RESERVE, MAX_CLIENTS, MAX_ROUNDS_PER_INSTANT, MAX_SERVERS, MAX_SIZE, MAX_STORAGE,
    MAX_TAIL_BATCHES, MAX_VIRTUAL_TIME, MTU, READ_REQUEST_LEN, SERVER_SESSIONS, SERVER_TOMBS,
    SERVER_WINDOWS,
};
pub use truth::{Truth, Verdict, MAX_LISTED_LOST};

/// Runs a scenario to the end and reports.
///
/// Every scenario that passes [`Scenario::validate`] ends: within
/// `duration + drain` of virtual time and `max_steps` steps (a run that
/// hits either fails its verdict with [`Invariant::NotFinished`]).
///
/// # Errors
/// The scenario's [`ScenarioError`] when it does not validate.
pub fn run(scenario: &Scenario) -> Result<Report, ScenarioError> {
    // The servers' cores (a reply queue per connection) are built by value
    // and moved into their boxes; an unoptimised build keeps several
    // copies on the stack, past a test thread's 2 MiB. The run gets a
    // thread of its own with room (address space; only what is used is
    // memory).
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("sim".into())
            .stack_size(SIM_STACK)
            .spawn_scoped(s, || engine::run(scenario))
        {
            Ok(h) => h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => engine::run(scenario),
        }
    })
}

/// The stack of a simulation's thread.
const SIM_STACK: usize = 256 << 20;

#[cfg(test)]
mod tests;
