//! The field reproduction and every fault the protocol must survive, as
//! deterministic simulations with exact expected counts.

use std::time::Duration;

use iomsg_core::wire::RejectReason;
use iomsg_core::Instant;
use iomsg_loopback::sim::{self, CrashPlan, LossClass, LostRange, Report, Scenario, Workload};
use iomsg_loopback::{Direction, FaultConfig, FrameFault, ScheduledFault};

/// A client window small enough that a burst of completions never
/// overflows today's client event queue (16 events per driver poll): with
/// the default 64, the core drops `Acked` events and every run fails
/// `client-events-lost` (the sweep reports it).
const CLEAN_WINDOW: usize = 8;

/// One server crashed every millisecond of uptime, two clients each
/// sending one io_msg every 10 µs.
fn repro(seed: u64, kills: u64, replay: bool, rebuild: bool) -> Scenario {
    let every = Duration::from_millis(1);
    let down_for = Duration::from_micros(300);
    Scenario {
        seed,
        workload: Workload {
            messages: u64::MAX,
            interval: Duration::from_micros(10),
            ..Workload::default()
        },
        crash: Some(CrashPlan {
            every,
            down_for,
            max_kills: kills,
        }),
        duration: (every + down_for) * kills as u32 + every,
        replay,
        rebuild_transport: rebuild,
        client_window: CLEAN_WINDOW,
        ..Scenario::default()
    }
}

fn schedule(faults: &[(u64, FrameFault)]) -> FaultConfig {
    FaultConfig {
        schedule: faults
            .iter()
            .map(|&(nth, fault)| ScheduledFault {
                nth,
                direction: Direction::ToServer,
                data_only: true,
                fault,
            })
            .collect(),
        ..FaultConfig::default()
    }
}

fn assert_truthful(r: &Report) {
    assert!(r.passed(), "{r}");
    assert_eq!(r.pending, 0, "the drain finished: {r}");
    assert_eq!(r.failed_clients, 0, "{r}");
}

fn assert_nothing_lost(r: &Report) {
    assert_truthful(r);
    assert_eq!(r.truth_lost, 0, "{r}");
    assert_eq!(r.lost_total(), 0, "{r}");
    assert_eq!(r.delivered_unique, r.submitted, "{r}");
    assert_eq!(r.acknowledged, r.submitted, "{r}");
}

#[test]
fn field_repro_with_replay_loses_nothing_and_every_duplicate_follows_a_restart() {
    let r = sim::run(&repro(1, 30, true, false)).unwrap();
    assert_nothing_lost(&r);
    assert_eq!(r.kills, 30);
    assert_eq!(
        r.reconnects, 60,
        "each of 2 clients re-established once per kill"
    );
    assert!(
        r.unacked_at_disconnects > 0,
        "kills did catch io_msgs in flight"
    );
    assert!(
        r.duplicates_after_restart > 0,
        "a dead server had processed unacked io_msgs"
    );
    assert!(r.duplicates_after_restart <= r.possible_duplicates, "{r}");
    assert_eq!(
        r.deliveries,
        r.delivered_unique + r.duplicates_after_restart
    );
}

#[test]
fn field_repro_with_clients_rebuilding_their_transport_loses_nothing() {
    let r = sim::run(&repro(2, 30, true, true)).unwrap();
    assert_nothing_lost(&r);
    assert_eq!(r.kills, 30);
    assert_eq!(r.reconnects, 60);
    assert!(r.transport_rebuilds >= 60, "{r}");
    assert_eq!(
        r.deliveries,
        r.delivered_unique + r.duplicates_after_restart
    );
}

#[test]
fn field_repro_without_replay_loses_exactly_the_in_flight_sns_and_names_them() {
    let r = sim::run(&repro(3, 30, false, false)).unwrap();
    assert_truthful(&r);
    assert_eq!(r.kills, 30);
    assert!(r.truth_lost > 0, "kills without replay lose io_msgs");
    assert_eq!(r.lost_live, 0, "no loss on a live connection");
    assert_eq!(r.lost_in_flight, r.truth_lost);
    // Every reconnect reaches a new instance, so the clients give up
    // exactly what was unacknowledged at the kills: what was lost, and
    // what the dead server had processed without its ack getting out.
    assert_eq!(r.given_up, r.unacked_at_disconnects, "{r}");
    assert!(r.truth_lost <= r.given_up, "{r}");
    assert_eq!(r.reported_in_flight, r.given_up, "{r}");
    let named: u64 = r.lost.iter().map(|l| l.range.end - l.range.start).sum();
    assert_eq!(named, r.truth_lost);
    assert!(!r.lost_list_cut());
    assert!(r
        .lost
        .iter()
        .all(|l| l.class == LossClass::InFlightAtDisconnect
            && l.reported == Some(LossClass::InFlightAtDisconnect)));
    assert_eq!(r.duplicates_after_restart, 0, "nothing is sent twice");
    // The per-session report (core's SessionLoss) adds up to the truth.
    let in_flight: u64 = r.sessions.values().map(|l| l.in_flight).sum();
    let live: u64 = r.sessions.values().map(|l| l.live).sum();
    assert_eq!((in_flight, live), (r.truth_lost, 0));
    assert!(r.sessions.len() <= 2 && !r.sessions.is_empty(), "{r}");
}

#[test]
fn silent_drop_on_a_live_connection_is_reported_at_once_and_replay_recovers_it() {
    let r = sim::run(&Scenario::one_client(
        1000,
        schedule(&[(100, FrameFault::SilentDrop)]),
        true,
    ))
    .unwrap();
    assert_nothing_lost(&r);
    assert_eq!(r.faults.silent_dropped, 1);
    assert_eq!(r.live_gap_sns, 1);
    assert_eq!(r.recovered, 1);
    let (at, _, range) = r.live_losses[0].clone();
    assert_eq!(range, 100..101);
    assert!(
        at < Instant::from_micros(500),
        "reported when sn 101 arrived, at {at}"
    );
}

#[test]
fn silent_drop_without_replay_is_lost_and_classified_live() {
    let r = sim::run(&Scenario::one_client(
        1000,
        schedule(&[(100, FrameFault::SilentDrop)]),
        false,
    ))
    .unwrap();
    assert_truthful(&r);
    assert_eq!(r.truth_lost, 1);
    assert_eq!(r.lost_live, 1);
    assert_eq!(r.lost_in_flight, 0);
    let session = r.lost[0].session;
    assert_eq!(
        r.lost,
        vec![LostRange {
            client: 0,
            session,
            range: 100..101,
            class: LossClass::LiveConnection,
            reported: Some(LossClass::LiveConnection),
        }]
    );
}

#[test]
fn frames_that_overtake_the_hello_are_refused_then_replayed_and_none_is_lost() {
    let faults = FaultConfig {
        reorder_depth: 3,
        schedule: vec![ScheduledFault {
            nth: 0, // the very first frame: the Hello
            direction: Direction::ToServer,
            data_only: false,
            fault: FrameFault::Reorder,
        }],
        ..FaultConfig::default()
    };
    let r = sim::run(&Scenario::one_client(500, faults, true)).unwrap();
    assert_nothing_lost(&r);
    assert_eq!(r.faults.reordered, 1);
    // The eager writes arrived before their connection's Hello: refused,
    // nothing delivered out of turn, and sent again after a reconnect.
    assert_eq!(r.rejected(RejectReason::NotBound), 1, "{r}");
    assert_eq!(
        r.reconnects, 0,
        "the refused connection never had a handshake: {r}"
    );
}

#[test]
fn corrupt_frames_are_rejected_the_connection_resets_and_replay_recovers() {
    let faults = schedule(&[
        (100, FrameFault::Corrupt),
        (300, FrameFault::Corrupt),
        (500, FrameFault::Corrupt),
    ]);
    let r = sim::run(&Scenario::one_client(1000, faults, true)).unwrap();
    assert_nothing_lost(&r);
    assert_eq!(r.faults.corrupted, 3);
    assert_eq!(r.rejected(RejectReason::Malformed), 3, "{r}");
    assert_eq!(r.reconnects, 3, "each rejection reset the connection");
}

#[test]
fn frames_of_a_superseded_connection_are_never_delivered_twice() {
    let mut faults = schedule(&[(50, FrameFault::Delay)]);
    faults.delay = Duration::from_millis(5); // longer than the reply timeout
    let r = sim::run(&Scenario::one_client(1000, faults, true)).unwrap();
    assert_nothing_lost(&r);
    assert_eq!(
        r.reconnects, 1,
        "the client gave up on the stalled connection"
    );
    assert_eq!(
        r.rejected(RejectReason::Superseded),
        1,
        "the owner's new Hello closed the stalled connection: {r}"
    );
    assert_eq!(r.deliveries, r.delivered_unique, "nothing delivered twice");
}

#[test]
fn a_full_window_is_backpressure_not_an_error_and_loses_nothing() {
    let mut s = Scenario::one_client(3000, FaultConfig::default(), true);
    s.workload.size = 4096;
    let r = sim::run(&s).unwrap();
    assert_nothing_lost(&r);
    assert!(r.backpressure > 0, "the window filled: {r}");
    assert_eq!(r.submitted, 3000);
}

#[test]
fn duplicated_and_reordered_frames_are_delivered_once_each() {
    let faults = FaultConfig {
        duplicate_ppm: 20_000,
        reorder_ppm: 20_000,
        reorder_depth: 4,
        ..FaultConfig::default()
    };
    let r = sim::run(&Scenario::one_client(3000, faults, true)).unwrap();
    assert_nothing_lost(&r);
    assert!(r.faults.duplicated > 0 && r.faults.reordered > 0);
    assert!(r.duplicates_discarded > 0, "{r}");
    assert_eq!(r.deliveries, r.delivered_unique);
}

/// A fault mix chosen by the seed. Payload CRCs are on whenever reads meet
/// corruption: today's server answers a validated `Read` without a payload
/// CRC, so a flipped bit reaches the application (`read-mismatch`, which
/// the sweep covers).
fn random_scenario(seed: u64, replay: bool) -> Scenario {
    let mut x = iomsg_core::rng::SplitMix64::new(seed);
    let mut pick = |n: u64| x.below(n) as u32;
    let mut s = Scenario {
        seed,
        clients: 1 + pick(3) as usize,
        servers: 1 + pick(2) as usize,
        workload: Workload {
            messages: 300 + u64::from(pick(700)),
            size: 16 + pick(200),
            read_per_mille: pick(300) as u16,
            stream_per_mille: pick(300) as u16,
            validate: pick(2) == 1,
            interval: Duration::from_micros(u64::from(pick(20))),
            ..Workload::default()
        },
        faults: FaultConfig {
            drop_ppm: pick(3000),
            silent_drop_ppm: pick(2000),
            duplicate_ppm: pick(5000),
            reorder_ppm: pick(5000),
            corrupt_ppm: pick(3000),
            delay_ppm: pick(3000),
            disconnect_ppm: pick(2000),
            reorder_depth: 1 + pick(5) as u8,
            delay: Duration::from_micros(u64::from(pick(3000))),
            schedule: Vec::new(),
        },
        crash: (pick(2) == 1).then(|| CrashPlan {
            every: Duration::from_micros(500 + u64::from(pick(3000))),
            down_for: Duration::from_micros(u64::from(pick(1000))),
            max_kills: u64::from(pick(10)),
        }),
        duration: Duration::from_millis(20),
        drain: Duration::from_secs(5),
        replay,
        rebuild_transport: pick(2) == 1,
        client_window: CLEAN_WINDOW,
        ..Scenario::default()
    };
    if s.workload.read_per_mille > 0 && s.faults.corrupt_ppm > 0 {
        s.workload.validate = true;
    }
    s
}

#[test]
fn seeded_random_soak_with_replay_loses_nothing_over_many_seeds() {
    for seed in 0..24 {
        let s = random_scenario(seed, true);
        let r = sim::run(&s).unwrap();
        assert_nothing_lost(&r);
        assert_eq!(
            r.deliveries,
            r.delivered_unique + r.duplicates_after_restart,
            "seed {seed}"
        );
    }
}

#[test]
fn seeded_random_soak_without_replay_reports_exactly_what_the_truth_sees() {
    for seed in 100..124 {
        let r = sim::run(&random_scenario(seed, false)).unwrap();
        assert_truthful(&r);
        assert_eq!(r.lost_total(), r.truth_lost, "seed {seed}: {r}");
    }
}
