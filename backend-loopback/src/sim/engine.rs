//! The event loop of one run.

use core::cell::RefCell;
use core::time::Duration;
use std::rc::Rc;

use iomsg_core::rng::{mix64, SplitMix64};
use iomsg_core::session::{ClientEvent, ClientSession, DisconnectCause, ReadData};
use iomsg_core::transport::{Client, ClientHandler, ConnId};
use iomsg_core::{workload, Instant};

use super::journal::Journal;
use super::ledger::Ledger;
use super::report::Report;
use super::scenario::{
    configs, KillEvent, Scenario, ScenarioError, CLIENT_WINDOW_MAX, MAX_ROUNDS_PER_INSTANT,
};
use super::server::{self, Notice, SimServer};
use super::stray::Stray;
use super::truth::{ClientSpec, FrameInfo, Taken, Truth};
use crate::fault::FaultConfig;
use crate::faulty::{Faults, Faulty};
use crate::network::{ClientPort, ConnStatus, Network, NetworkConfig, Tap, TapKind};

type SimClient = Client<Faulty<ClientPort>, CLIENT_WINDOW_MAX, Box<[u8]>>;

/// A client's application in the simulation: events and read data go to
/// two closures.
struct SimApp<E, R> {
    event: E,
    read: R,
}

impl<E: FnMut(ClientEvent), R: FnMut(ReadData<'_>)> ClientHandler for SimApp<E, R> {
    fn event(&mut self, event: ClientEvent) {
        (self.event)(event);
    }
    fn read_data(&mut self, data: ReadData<'_>) {
        (self.read)(data);
    }
}

struct ClientSlot {
    driver: Box<SimClient>,
    addr: u16,
    next_submit: Instant,
    closing: bool,
    disconnected_at: Option<Instant>,
    /// Established since the last disconnect.
    connected: bool,
    /// The outbox and crashes (crash-proof state on).
    life: Option<durable::ClientLife>,
}

struct ServerSlot {
    driver: Option<Box<dyn SimServer>>,
    addr: u16,
    next_kill: Option<Instant>,
    restart_at: Option<Instant>,
    generation: u32,
    /// The journal of its instances (journal on).
    journal: Journal,
}

/// Counts protocol events for `Scenario::kill_on`.
struct Triggers {
    seen: [u64; 4],
    fired: Vec<bool>,
    armed: bool,
}

impl Triggers {
    /// Counts `event`; returns the downtime of a kill it triggers.
    fn hit(&mut self, s: &Scenario, event: KillEvent) -> Option<Duration> {
        let k = KillEvent::ALL.iter().position(|&e| e == event)?;
        self.seen[k] += 1;
        if !self.armed {
            return None;
        }
        let n = self.seen[k];
        for (j, on) in s.kill_on.iter().enumerate() {
            if on.event == event && on.nth == n && !self.fired[j] {
                self.fired[j] = true;
                return Some(on.down_for);
            }
        }
        None
    }
}

/// Runs scenario `s` to its end and reports it, judged against the
/// ground truth kept beside the network.
pub(crate) fn run(s: &Scenario) -> Result<Report, ScenarioError> {
    let mut world = World::new(s)?;
    while world.step() {}
    Ok(world.finish())
}

mod durable;
mod recorder;
mod submit;
mod world;

use world::World;

use recorder::{EpOwner, Recorder, RxIndex, TapRecord};
