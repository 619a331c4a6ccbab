//! Fuzz body for whole runs over the loopback backend: `loopback_e2e`.
//!
//! The fuzz bytes choose a small [`Scenario`] (1-3 clients, 1-2 servers, at
//! most 300 requests of at most 512 bytes per client, a mix of writes,
//! streamed writes and reads, fault rates of up to 4064 ppm each, silent
//! drops included, up to four scheduled faults, up to five server
//! crash-restarts, at most 20 ms of faults, then a 5 s drain) and the
//! protocol's knobs (a client window of 1 to 4096 and a server window of
//! 64 to 4096, so either may be the larger; 4 to 64 sessions per server;
//! two clients sharing one session id; a stray peer's `Hello` for a
//! client's session; a server kill right after the nth accept, `Hello`,
//! delivery or live loss; writes of mixed sizes in a client storage
//! barely larger than the largest; 4 tombstones per server), runs it
//! with [`sim::run`] and checks the
//! [`Report`]:
//!
//! 1. always: every invariant of the simulation holds against its ground
//!    truth ([`Report::passed`]: nothing pending, the run finished, no
//!    unannounced or same-instance duplicate, no acknowledged-but-undelivered
//!    sn, loss classes right, ...) and no client gave up;
//! 2. replay on: nothing is lost (`truth_lost == 0`), every submitted sn is
//!    delivered and acknowledged;
//! 3. replay off: the named `lost` ranges cover each lost sn once, and each
//!    was reported (given up) with the class the ground truth sees.
//!
//! The checks are the simulation's full verdict.
//!
//! Compiled only for tests and with the `fuzzing` feature.
#![allow(missing_docs)]

use core::time::Duration;

use crate::sim::{
    self, CrashPlan, KillEvent, KillOn, Report, Scenario, StrayPeer, Workload, READ_REQUEST_LEN,
    SERVER_WINDOWS,
};
use crate::{Direction, FaultConfig, FrameFault, ScheduledFault};

/// The session tables the fuzz input chooses from.
const SESSIONS: [usize; 3] = [4, 16, 64];

/// Runs the scenario the bytes describe and checks the report.
///
/// # Panics
///
/// When a property does not hold: that is the bug the fuzzer is looking for.
pub fn loopback_e2e(data: &[u8]) {
    let scenario = scenario(data);
    match sim::run(&scenario) {
        Ok(report) => check(&scenario, &report),
        Err(e) => panic!("the fuzz input chose a scenario that does not validate: {e}"),
    }
}

/// Reads the scenario from the fuzz input; past its end every byte is 0.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// A fault rate: zero for half the byte values, else up to 4064 ppm.
    fn ppm(&mut self) -> u32 {
        let b = self.byte();
        if b < 128 {
            0
        } else {
            u32::from(b - 128) * 32
        }
    }
}

/// The small scenario the bytes describe.
pub fn scenario(data: &[u8]) -> Scenario {
    let mut c = Cursor(data);
    let seed = u64::from(c.u32());
    let shape = c.byte();
    let flags = c.byte();
    let clients = 1 + usize::from(shape % 3);
    let servers = 1 + usize::from(shape >> 2 & 1);
    let read_per_mille = (u16::from(c.byte()) * 4).min(1000);
    let stream_per_mille = (u16::from(c.byte()) * 4).min(1000 - read_per_mille);
    let workload = Workload {
        messages: u64::from(c.u16() % 301),
        size: u32::from(c.u16() % 513),
        size_spread: 0,
        storage: 0,
        read_per_mille,
        stream_per_mille,
        validate: flags & 1 != 0,
        interval: Duration::from_micros(u64::from(c.byte() % 8) * 5),
    };
    let mut faults = FaultConfig {
        drop_ppm: c.ppm(),
        silent_drop_ppm: c.ppm(),
        duplicate_ppm: c.ppm(),
        reorder_ppm: c.ppm(),
        corrupt_ppm: c.ppm(),
        delay_ppm: c.ppm(),
        disconnect_ppm: c.ppm(),
        reorder_depth: 1 + c.byte() % 4,
        delay: Duration::from_micros(u64::from(c.byte())),
        schedule: Vec::new(),
    };
    let scheduled = c.byte() % 5;
    for _ in 0..scheduled {
        let b = c.byte();
        let fault = FrameFault::ALL[usize::from(b) % FrameFault::ALL.len()];
        let direction = match b >> 3 & 3 {
            0 => Direction::ToServer,
            1 => Direction::ToClient,
            _ => Direction::Any,
        };
        faults.schedule.push(ScheduledFault {
            nth: u64::from(c.u16() % 1024),
            direction,
            data_only: b & 0x20 != 0,
            fault,
        });
    }
    let crash = (flags & 2 != 0).then(|| CrashPlan {
        every: Duration::from_micros(300 + u64::from(c.byte()) * 20),
        down_for: Duration::from_micros(50 + u64::from(c.byte()) * 4),
        max_kills: u64::from(c.byte() % 6),
    });
    let mut s = Scenario {
        seed,
        clients,
        servers,
        workload,
        faults,
        crash,
        duration: Duration::from_micros(500 + u64::from(c.u16()) % 19_501),
        drain: Duration::from_secs(5),
        replay: flags & 4 == 0,
        rebuild_transport: flags & 8 != 0,
        latency: Duration::from_micros(1 + u64::from(c.byte() % 20)),
        detect_delay: Duration::from_micros(10 + u64::from(c.byte())),
        // Past the input's end (0): the default window of 64.
        client_window: match c.byte() {
            b @ 0..=191 => 64 - usize::from(b % 64),
            b => 64 << (b % 7),
        },
        ..Scenario::default()
    };
    // The protocol's own knobs: the server's window and session table,
    // two clients sharing one session id, a stray peer, kills right after
    // a protocol event.
    let knobs = c.byte();
    s.server_window = SERVER_WINDOWS[usize::from(knobs) % SERVER_WINDOWS.len()];
    s.server_sessions = SESSIONS[usize::from(knobs >> 2) % SESSIONS.len()];
    if knobs & 0x10 != 0 && s.clients >= 2 {
        s.shared_session_pairs = 1;
    }
    if knobs & 0x20 != 0 {
        s.stray = Some(StrayPeer {
            victim: usize::from(c.byte()) % s.clients,
            at: Duration::from_micros(u64::from(c.u16()) % 20_000),
            ahead: u64::from(c.byte()),
            writes: u32::from(c.byte() % 8),
            bye: c.byte() & 1 != 0,
        });
    }
    if knobs & 0x40 != 0 {
        s.kill_on.push(KillOn {
            event: KillEvent::ALL[usize::from(c.byte()) % KillEvent::ALL.len()],
            nth: 1 + u64::from(c.byte() % 16),
            down_for: Duration::from_micros(u64::from(c.byte()) * 4),
        });
    }
    // The storage's and tombstones' knobs: mixed write sizes in a storage
    // barely larger than the largest, a table of 4 tombstones.
    let more = c.byte();
    if more & 1 != 0 {
        let w = &mut s.workload;
        w.size_spread = u32::from(c.u16()) % (w.size + 1);
        let least = (w.size as usize).max(READ_REQUEST_LEN);
        w.storage = least + usize::from(c.u16()) % (least + 1);
    }
    if more & 2 != 0 {
        s.server_tombs = 4;
    }
    s
}

/// The properties of the module documentation.
///
/// # Panics
///
/// When one does not hold, with the scenario and the report.
pub fn check(scenario: &Scenario, r: &Report) {
    let ctx = || std::format!("{scenario:?}\n{r}");
    assert!(r.passed(), "violations: {}", ctx());
    assert_eq!(r.pending, 0, "the drain did not finish: {}", ctx());
    // Of two clients with one session id, one is refused for good; so is
    // a client whose session a stray peer opened first.
    let refused = scenario.shared_session_pairs as u64 + u64::from(scenario.stray.is_some());
    assert!(r.failed_clients <= refused, "a client gave up: {}", ctx());
    if refused > 0 {
        // The verdict holds the rest: the refused client's sns are its own.
        return;
    }
    if scenario.replay {
        assert_eq!(r.truth_lost, 0, "lost with replay on: {}", ctx());
        assert_eq!(r.delivered_unique, r.submitted, "{}", ctx());
        assert_eq!(r.acknowledged, r.submitted, "{}", ctx());
    } else {
        let named: u64 = r.lost.iter().map(|l| l.range.end - l.range.start).sum();
        assert!(!r.lost_list_cut(), "{}", ctx());
        assert_eq!(named, r.truth_lost, "named lost ranges: {}", ctx());
        assert!(
            r.lost.iter().all(|l| l.reported == Some(l.class)),
            "every lost sn reported with its class: {}",
            ctx()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iomsg_core::rng::SplitMix64;

    #[test]
    fn loopback_e2e_holds_on_seeded_random_scenarios() {
        let mut rng = SplitMix64::new(0x100B_BAC4_u64);
        let (mut kills, mut faults, mut lost, mut submitted) = (0, 0, 0, 0);
        for _ in 0..30 {
            let bytes: Vec<u8> = (0..64).map(|_| rng.next_u64() as u8).collect();
            let s = scenario(&bytes);
            let r = sim::run(&s).unwrap();
            check(&s, &r);
            kills += r.kills;
            faults += r.faults.dropped + r.faults.silent_dropped + r.faults.corrupted;
            lost += r.truth_lost;
            submitted += r.submitted;
        }
        // The scenarios do exercise what the properties are about.
        assert!(submitted > 1000, "{submitted} submitted");
        assert!(kills > 0, "no server was killed");
        assert!(faults > 0, "no frame was dropped or corrupted");
        assert!(lost > 0, "replay off never lost anything");
    }

    #[test]
    fn committed_seeds_hold_and_cover_crashes_losses_and_silent_drops() {
        let seeds = iomsg_fuzz_bodies::seed_files("loopback_e2e");
        assert!(seeds.len() >= 3, "{} seeds", seeds.len());
        let (mut kills, mut lost, mut silent) = (0, 0, 0);
        for (_, bytes) in seeds {
            let s = scenario(&bytes);
            let r = sim::run(&s).unwrap();
            check(&s, &r);
            kills += r.kills;
            lost += r.truth_lost;
            silent += r.faults.silent_dropped;
        }
        assert!(
            kills > 0 && lost > 0 && silent > 0,
            "{kills} {lost} {silent}"
        );
    }
}
