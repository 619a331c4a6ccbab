//! The durable profile ([`Profile::Durable`](super::Profile::Durable)):
//! servers with a journal and clients with an outbox, both crashed and
//! restarted, under faults that leave holes in the servers' receive
//! windows when they crash, with small server tables and journals that
//! lose their last commits.
//!
//! Every scenario has server crashes (planned, and often right after a
//! delivery, a live loss or a `Hello`, before the flush that would commit
//! it) and
//! client crashes (a process restarted from its outbox, sometimes written
//! behind by up to 64 releases). Most have frames silently dropped or
//! reordered on live connections: a server that crashes then has open
//! holes in its journal, which the next instance must still deliver when
//! the client replays them, and nothing it had delivered before. Streamed
//! writes (acknowledged late, so delivered long before the flush that
//! commits them) and reads come in some. The workload is paced so that
//! the faulty phase (5 to 50 ms) has messages on the way when crashes
//! come.
//!
//! Most scenarios give each server a table of 2 to 4 sessions and 2 to 8
//! tombstones, and more clients than its table holds (often more than
//! its table and tombstones together): running servers evict idle
//! sessions and forget tombstones, restores meet full tables (sessions
//! without holes become tombstones, the oldest forgotten), and the
//! sessions they let go come back by the journal's recall. The others
//! keep tables of 16 sessions and 256 tombstones, as before.
//!
//! In most scenarios journals lose their last 1 to 64 commits
//! ([`TailLoss`]): at every first, second or fourth server crash while
//! faults go on in about half of them, and in most at a power cut of
//! every server a quarter of the faulty phase before its end (the faults
//! end there, the workload goes on); in half of them a commit that opens
//! a session is synced at once, in the others a cut may take a session
//! whole. What the clients saw acknowledged and the journal lost must be
//! named to every client that comes back (`StateLost`), never lost
//! silently, and no client may be locked out.
//!
//! Kept out, as in the clean profile, for the reasons it gives: client
//! windows above 8 or the server's, frames delayed past the reply
//! timeout, shared session ids and stray peers, replay off.

use core::time::Duration;

use super::Dice;
use crate::fault::{Direction, FaultConfig, FrameFault, ScheduledFault};
use crate::sim::{
    CrashPlan, Durability, KillEvent, KillOn, Scenario, TailLoss, Workload, MAX_SIZE,
    SERVER_WINDOWS,
};

/// A durable scenario drawn with `d`; `seed` is the scenario's.
pub(super) fn draw(d: &mut Dice, seed: u64) -> Scenario {
    let servers = 1 + d.below(2) as usize;
    let (server_sessions, server_tombs, clients) = tables(d, servers);
    let server_window = d.pick(&SERVER_WINDOWS);
    let client_window = (d.pick(&[1usize, 2, 4, 8]) as u64).min(server_window) as usize;
    let interval = d.us(&[5, 20, 50, 200]);
    let duration = d.us(&[5000, 20_000, 50_000]);
    let messages = if d.chance(500) {
        u64::MAX
    } else {
        d.pick(&[100u64, 500, 2000])
    };
    let read_per_mille = if d.chance(250) {
        d.below(301) as u16
    } else {
        0
    };
    let stream_per_mille = if d.chance(500) {
        d.below(701) as u16
    } else {
        0
    };
    let size = d.pick(&[0u32, 1, 64, 1000, MAX_SIZE]);
    let mut s = Scenario {
        seed,
        clients,
        servers,
        workload: Workload {
            messages,
            size,
            size_spread: 0,
            storage: 0,
            read_per_mille,
            stream_per_mille,
            validate: d.chance(300),
            interval,
        },
        faults: faults(d),
        crash: Some(CrashPlan {
            every: d.us(&[500, 2000, 5000]),
            down_for: d.us(&[0, 20, 500]),
            max_kills: 1 + d.below(20),
        }),
        kill_on: kill_on(d),
        duration,
        drain: Duration::from_secs(3),
        replay: true,
        rebuild_transport: d.chance(300),
        latency: d.us(&[1, 5, 50, 200]),
        detect_delay: d.us(&[0, 10, 50, 500]),
        client_window,
        server_window,
        server_sessions,
        server_tombs,
        shared_session_pairs: 0,
        stray: None,
        max_steps: super::SWEEP_MAX_STEPS,
        durable: Some(Durability {
            journal: true,
            client_crash: Some(CrashPlan {
                every: d.us(&[300, 1000, 3000]),
                down_for: d.us(&[0, 50, 500]),
                max_kills: 1 + d.below(20),
            }),
            outbox_lag: d.pick(&[1u64, 1, 2, 8, 64]),
            tail_loss: d.chance(TAIL_LOSS_PER_MILLE).then(|| {
                // Cuts at crashes while faults go on in half the runs.
                let every = d.pick(&[0u64, 0, 1, 2, 4]);
                TailLoss {
                    every,
                    batches: d.pick(&[1u32, 2, 4, 16, 64]),
                    at_end: every == 0 || d.chance(800),
                    // A cut may take a session whole (its journal lost
                    // every record of it) in half the runs.
                    synced_openings: d.chance(500),
                }
            }),
            restore_defect: None,
        }),
    };
    if s.workload.messages != u64::MAX {
        s.workload.messages = s.workload.messages.min(in_turns(&s));
    }
    s
}

/// Most messages per client that let the clients of a server take their
/// turns at its table within 1 s of the drain (as the full profile bounds
/// them): each message a round trip shared by the window, or the pacing;
/// one turn per table full of clients.
fn in_turns(s: &Scenario) -> u64 {
    let per_server = s.clients.div_ceil(s.servers);
    let turns = per_server.div_ceil(s.server_sessions).max(1) as u64;
    let round_trip = 2 * s.latency.as_micros() as u64 + 10;
    let per_request =
        (s.workload.interval.as_micros() as u64).max(round_trip / s.client_window as u64);
    (1_000_000 / per_request.max(1) / turns).max(1)
}

/// How many scenarios (per mille) have small server tables.
const SMALL_TABLES_PER_MILLE: u64 = 950;
/// How many scenarios (per mille) have journals that lose their last
/// commits.
const TAIL_LOSS_PER_MILLE: u64 = 700;
/// Most clients a durable scenario has.
const MAX_DURABLE_CLIENTS: usize = 16;

/// Each server's table of sessions and tombstones, and the clients: with
/// small tables, more per server than its table holds, often more than
/// its table and tombstones together.
fn tables(d: &mut Dice, servers: usize) -> (usize, usize, usize) {
    if !d.chance(SMALL_TABLES_PER_MILLE) {
        return (16, 256, d.pick(&[1usize, 2, 3, 5, 8]));
    }
    let sessions = d.pick(&[2usize, 3, 4]);
    let tombs = d.pick(&[2usize, 4, 8]);
    let per_server = sessions + 2 + d.below(tombs as u64 + 2) as usize;
    (
        sessions,
        tombs,
        (servers * per_server).min(MAX_DURABLE_CLIENTS),
    )
}

/// Faults on live connections (silent drops, reordering) in most runs,
/// with some of every other kind but corruption.
fn faults(d: &mut Dice) -> FaultConfig {
    let mut f = FaultConfig::default();
    if d.chance(700) {
        f.silent_drop_ppm = d.ppm() / 2 + 1;
    }
    if d.chance(300) {
        f.reorder_ppm = d.ppm() / 2 + 1;
        f.reorder_depth = 1 + d.below(6) as u8;
    }
    for kind in [
        FrameFault::Drop,
        FrameFault::Duplicate,
        FrameFault::Delay,
        FrameFault::Disconnect,
    ] {
        if d.chance(200) {
            *f.rate_mut(kind) = d.ppm() / 4 + 1;
        }
    }
    // Shorter than the reply timeout (see the clean profile).
    f.delay = d.us(&[10, 500]);
    if d.chance(300) {
        f.schedule.push(ScheduledFault {
            nth: d.below(200),
            direction: Direction::ToServer,
            data_only: true,
            fault: FrameFault::SilentDrop,
        });
    }
    f
}

/// Kills right after a delivery (before the flush that commits it), a
/// live loss (a hole just opened), a `Hello` (its `Welcome` dies with the
/// instance, its journal record uncommitted) or an accept, in half of the
/// runs.
fn kill_on(d: &mut Dice) -> Vec<KillOn> {
    let mut out = Vec::new();
    if d.chance(500) {
        for _ in 0..1 + d.below(3) {
            let event = d.pick(&[
                KillEvent::Delivered,
                KillEvent::Delivered,
                KillEvent::LiveLoss,
                KillEvent::SessionOpened,
                KillEvent::Accept,
            ]);
            let nth = if event == KillEvent::Delivered {
                1 + d.below(300)
            } else {
                1 + d.below(5)
            };
            out.push(KillOn {
                event,
                nth,
                down_for: d.us(&[0, 100, 2000]),
            });
        }
    }
    out
}
