//! Shapes the full profile draws on purpose, on top of its random knobs:
//! each is a combination the independent draws would make too rarely for
//! a one-minute sweep to find the defect it provokes.
//!
//! * [`Shape::ReadLoss`]: mostly reads, while the servers' outgoing frames
//!   (read completions among them) are silently dropped and servers are
//!   killed right after deliveries: a read whose answer is lost must be
//!   answered later or named (`read-unanswered`);
//! * [`Shape::TightStorage`]: a client storage barely larger than the
//!   largest message, and writes of every size up to it: a message over
//!   half the storage after a smaller one (`buffer-full-while-idle`);
//! * [`Shape::TombOverflow`]: a tombstone table of 4, at least twice as
//!   many short-lived sessions per server, and many of the frames sent in
//!   a short faulty phase (`Hello`s and the writes right behind them) held
//!   up 20 ms, past the reply timeout: a client resumes on a new
//!   connection, finishes and says `Bye`, other sessions' `Bye`s make its
//!   server forget it, then its old `Hello` and writes arrive
//!   (`unannounced-duplicate`).

use core::time::Duration;

use super::Dice;
use crate::fault::{Direction, FrameFault, ScheduledFault};
use crate::sim::{KillEvent, KillOn, Scenario, MAX_SIZE};

/// A shape the full profile draws on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Reads with silently dropped server frames and kills after deliveries.
    ReadLoss,
    /// A client storage near the largest message, writes of mixed sizes.
    TightStorage,
    /// Tombstone overflow while old `Hello`s are held up.
    TombOverflow,
}

/// How often [`generate`](super::generate) draws each shape under the
/// full profile (per mille of scenarios, each independently).
pub const SHAPE_PER_MILLE: [(Shape, u64); 3] = [
    (Shape::ReadLoss, 150),
    (Shape::TightStorage, 120),
    (Shape::TombOverflow, 120),
];

/// The tombstone shape's table of tombstones.
const TOMBS: usize = 4;

/// Most clients the tombstone shape asks for, as the sweep's other draws.
const MAX_SWEEP_CLIENTS: usize = 40;

/// How long the tombstone shape holds the first frames up: far past the
/// simulation's reply timeout (2 ms), well inside the sweep's 3 s drain.
const HOLD: Duration = Duration::from_millis(20);

impl Shape {
    /// Whether the scenario has this shape (drawn on purpose or not).
    pub fn of(self, s: &Scenario) -> bool {
        let w = &s.workload;
        match self {
            Shape::ReadLoss => {
                w.read_per_mille > 0
                    && s.faults.schedule.iter().any(|x| {
                        x.fault == FrameFault::SilentDrop && x.direction != Direction::ToServer
                    })
            }
            Shape::TightStorage => w.storage > 0 && w.storage < 2 * w.size as usize,
            Shape::TombOverflow => {
                s.server_tombs < s.clients.div_ceil(s.servers)
                    && s.faults.delay >= HOLD
                    && (s.faults.delay_ppm > 0
                        || s.faults
                            .schedule
                            .iter()
                            .any(|x| x.fault == FrameFault::Delay))
            }
        }
    }

    fn apply(self, d: &mut Dice, s: &mut Scenario) {
        match self {
            Shape::ReadLoss => read_loss(d, s),
            Shape::TightStorage => tight_storage(d, s),
            Shape::TombOverflow => tomb_overflow(d, s),
        }
    }
}

/// Draws each shape with its chance and applies those drawn.
pub(super) fn draw(d: &mut Dice, s: &mut Scenario) {
    for (shape, per_mille) in SHAPE_PER_MILLE {
        if d.chance(per_mille) {
            shape.apply(d, s);
        }
    }
}

/// At least `n` requests per client (an unbounded workload stays so).
fn at_least(s: &mut Scenario, n: u64) {
    s.workload.messages = s.workload.messages.max(n);
}

fn read_loss(d: &mut Dice, s: &mut Scenario) {
    let w = &mut s.workload;
    w.read_per_mille = 300 + d.below(701) as u16;
    w.stream_per_mille = w.stream_per_mille.min(1000 - w.read_per_mille);
    at_least(s, 10);
    for _ in 0..1 + d.below(3) {
        s.faults.schedule.push(ScheduledFault {
            nth: d.below(40),
            direction: Direction::ToClient,
            data_only: false,
            fault: FrameFault::SilentDrop,
        });
    }
    if d.chance(500) {
        s.faults.silent_drop_ppm = s.faults.silent_drop_ppm.max(d.ppm() / 4 + 1);
    }
    if d.chance(500) {
        s.kill_on.push(KillOn {
            event: KillEvent::Delivered,
            nth: 1 + d.below(50),
            down_for: d.us(&[0, 100, 2000]),
        });
    }
}

fn tight_storage(d: &mut Dice, s: &mut Scenario) {
    let w = &mut s.workload;
    w.size = w.size.clamp(16, MAX_SIZE);
    w.size_spread = w.size / 2 + d.below(u64::from(w.size / 2) + 1) as u32;
    let size = w.size as usize;
    w.storage = size + d.below(size as u64) as usize;
    // One or two messages in flight at a time: few enough to finish
    // within the drain, whatever the clients' turns at the session table.
    if w.messages != u64::MAX {
        w.messages = w.messages.clamp(10, 100);
    }
}

fn tomb_overflow(d: &mut Dice, s: &mut Scenario) {
    s.server_tombs = TOMBS;
    s.server_sessions = d.pick(&[4, 16]);
    let per_server = 2 * s.server_tombs + d.below(12) as usize;
    s.clients = s
        .clients
        .max((per_server * s.servers).min(MAX_SWEEP_CLIENTS));
    let w = &mut s.workload;
    w.messages = d.pick(&[1u64, 3, 10]);
    w.interval = Duration::ZERO;
    // A short faulty phase (faults hit only frames sent in it): the
    // held-up clients reconnect, finish and close after it, among others.
    s.duration = d.us(&[300, 1000, 2000]);
    s.faults.delay = HOLD;
    s.faults.delay_ppm = s.faults.delay_ppm.max(100_000 + d.below(200_000) as u32);
    for _ in 0..d.below(3) {
        s.faults.schedule.push(ScheduledFault {
            nth: d.below(2 * s.clients as u64),
            direction: Direction::ToServer,
            data_only: false,
            fault: FrameFault::Delay,
        });
    }
}
