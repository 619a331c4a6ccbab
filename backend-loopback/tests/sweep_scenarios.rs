//! The sweep's scenarios: repro lines round-trip, the shrinker shrinks,
//! the generator turns every knob and draws each shape, and a short sweep
//! of clean scenarios passes. (The invariants' own tests, on hand-made
//! truths, are in `sweep.rs`.)

use std::time::Duration;

use iomsg_loopback::sim::{
    CrashPlan, Durability, Invariant, KillEvent, KillOn, RestoreDefect, Scenario, StrayPeer,
    TailLoss, Workload,
};
use iomsg_loopback::sweep::{self, repro, Profile, Shape, ShrinkBudget, SHAPE_PER_MILLE};
use iomsg_loopback::{Direction, FaultConfig, FrameFault, ScheduledFault};

/// A scenario with every field away from its default.
fn everything() -> Scenario {
    Scenario {
        seed: u64::MAX - 3,
        clients: 9,
        servers: 3,
        workload: Workload {
            messages: u64::MAX,
            size: 4112,
            size_spread: 3000,
            storage: 5000,
            read_per_mille: 300,
            stream_per_mille: 250,
            validate: true,
            interval: Duration::from_nanos(1500),
        },
        faults: FaultConfig {
            drop_ppm: 1,
            silent_drop_ppm: 2,
            duplicate_ppm: 3,
            reorder_ppm: 4,
            corrupt_ppm: 5,
            delay_ppm: 6,
            disconnect_ppm: 7,
            reorder_depth: 5,
            delay: Duration::from_millis(3),
            schedule: vec![
                ScheduledFault {
                    nth: 12,
                    direction: Direction::ToClient,
                    data_only: true,
                    fault: FrameFault::Corrupt,
                },
                ScheduledFault {
                    nth: 0,
                    direction: Direction::Any,
                    data_only: false,
                    fault: FrameFault::Disconnect,
                },
            ],
        },
        crash: Some(CrashPlan {
            every: Duration::from_secs(2),
            down_for: Duration::ZERO,
            max_kills: 17,
        }),
        kill_on: vec![
            KillOn {
                event: KillEvent::SessionOpened,
                nth: 2,
                down_for: Duration::from_micros(100),
            },
            KillOn {
                event: KillEvent::LiveLoss,
                nth: 1,
                down_for: Duration::ZERO,
            },
        ],
        duration: Duration::from_millis(20),
        drain: Duration::from_secs(3),
        replay: false,
        rebuild_transport: true,
        latency: Duration::ZERO,
        detect_delay: Duration::from_micros(3000),
        client_window: 4096,
        server_window: 64,
        server_sessions: 4,
        server_tombs: 4,
        shared_session_pairs: 2,
        stray: Some(StrayPeer {
            victim: 8,
            at: Duration::from_micros(1234),
            ahead: 1 << 20,
            writes: 3,
            bye: true,
        }),
        max_steps: 12345,
        durable: Some(Durability {
            journal: false,
            client_crash: Some(CrashPlan {
                every: Duration::from_micros(700),
                down_for: Duration::from_nanos(1500),
                max_kills: 9,
            }),
            outbox_lag: 64,
            tail_loss: Some(TailLoss {
                every: 3,
                batches: 17,
                at_end: true,
                synced_openings: false,
            }),
            restore_defect: Some(RestoreDefect::DropHoles),
        }),
    }
}

#[test]
fn repro_lines_round_trip() {
    let all = everything();
    let line = repro::encode(&all);
    assert_eq!(repro::decode(&line), Ok(all), "{line}");
    let plain = Scenario::default();
    assert_eq!(repro::encode(&plain), "seed=1");
    assert_eq!(repro::decode("seed=1"), Ok(plain));
    for seed in 0..300 {
        for profile in [Profile::Full, Profile::Clean, Profile::Durable] {
            let s = sweep::generate(seed, profile);
            let line = repro::encode(&s);
            assert_eq!(repro::decode(&line).as_ref(), Ok(&s), "{line}");
            assert!(!line.contains('\n'));
        }
    }
}

#[test]
fn bad_repro_lines_say_which_token_is_wrong() {
    for (line, token) in [
        ("seed=1 clients=x", "clients=x"),
        ("seed=1 bogus=3", "bogus=3"),
        ("seed=1 dur=5", "dur=5"),
        ("seed=1 crash=1ms/2ms", "crash=1ms/2ms"),
        ("seed=1 kill=opened:1", "kill=opened:1"),
        ("seed=1 replay", "replay"),
        ("seed=1 defect=holes", "defect=holes"),
        ("seed=1 ccrash=1ms", "ccrash=1ms"),
        ("seed=1 tail=1/2", "tail=1/2"),
        ("seed=1 tail=1/2/x", "tail=1/2/x"),
    ] {
        let e = repro::decode(line).unwrap_err();
        assert_eq!(e.token, token);
        assert!(e.to_string().contains(token), "{e}");
    }
}

#[test]
fn the_shrinker_reduces_a_synthetic_failure_to_its_cause() {
    // "Fails" when there are at least 3 clients and any drop fault.
    let fails = |s: &Scenario| s.clients >= 3 && s.faults.drop_ppm > 0;
    let big = everything();
    let mut start = big.clone();
    start.faults.drop_ppm = 40_000;
    start.clients = 40;
    assert!(fails(&start));
    let small = sweep::shrink(&start, fails, ShrinkBudget::default());
    assert!(fails(&small), "still fails");
    assert_eq!(small.clients, 3);
    assert_eq!(small.faults.drop_ppm, 1, "halved down to the least rate");
    let f = &small.faults;
    assert_eq!(
        (
            f.silent_drop_ppm,
            f.duplicate_ppm,
            f.reorder_ppm,
            f.corrupt_ppm,
            f.delay_ppm,
            f.disconnect_ppm
        ),
        (0, 0, 0, 0, 0, 0),
        "other fault kinds dropped"
    );
    assert!(f.schedule.is_empty());
    assert_eq!(small.servers, 1);
    assert_eq!(small.crash, None);
    assert!(small.kill_on.is_empty());
    assert_eq!(small.stray, None);
    assert_eq!(small.shared_session_pairs, 0);
    assert_eq!(small.workload.messages, 0);
    assert_eq!(small.duration, Duration::ZERO);
    assert!(!small.rebuild_transport);
    assert!(small.validate().is_ok());
    // Nothing smaller fails: the shrinker returns its input.
    let minimal = sweep::shrink(&small, fails, ShrinkBudget::default());
    assert_eq!(minimal, small);
}

#[test]
fn the_shrinker_keeps_the_same_invariant_on_a_real_run() {
    // Latency past half the 1 ms connect timeout: no client ever connects,
    // whatever the core does, so every submitted sn stays pending.
    let s = Scenario {
        clients: 6,
        servers: 2,
        latency: Duration::from_micros(600),
        workload: Workload {
            messages: 50,
            size: 300,
            ..Workload::default()
        },
        faults: FaultConfig {
            duplicate_ppm: 5000,
            ..FaultConfig::default()
        },
        client_window: 4,
        duration: Duration::from_millis(5),
        drain: Duration::from_millis(30),
        ..Scenario::default()
    };
    assert!(sweep::violates(&s, Invariant::Pending));
    let small = sweep::shrink(
        &s,
        |c| sweep::violates(c, Invariant::Pending),
        ShrinkBudget::default(),
    );
    assert!(sweep::violates(&small, Invariant::Pending));
    let line = repro::encode(&small);
    assert_eq!(small.clients, 1, "{line}");
    assert_eq!(small.servers, 1, "{line}");
    assert_eq!(small.workload.messages, 1, "{line}");
    assert_eq!(small.workload.size, 0, "{line}");
    assert_eq!(small.faults, FaultConfig::default(), "{line}");
    assert_eq!(small.latency, Duration::from_micros(600), "the cause stays");
}

#[test]
fn the_generator_turns_every_knob() {
    let all: Vec<Scenario> = (0..600)
        .map(|i| sweep::generate(i, Profile::Full))
        .collect();
    let any = |f: &dyn Fn(&Scenario) -> bool| all.iter().any(f);
    assert!(all.iter().all(|s| s.validate().is_ok()));
    assert!(any(&|s| s.clients == 1) && any(&|s| s.clients > 16));
    assert!(
        any(&|s| s.clients > s.servers * s.server_sessions),
        "eviction"
    );
    assert!((1..=3).all(|n| any(&|s| s.servers == n)));
    assert!(any(&|s| s.client_window as u64 > s.server_window));
    assert!(any(&|s| (s.client_window as u64) < s.server_window));
    let f = |s: &Scenario| s.faults.clone();
    assert!(any(&|s| f(s).drop_ppm > 50_000));
    assert!(any(&|s| f(s).silent_drop_ppm > 0));
    assert!(any(&|s| f(s).duplicate_ppm > 0));
    assert!(any(&|s| f(s).reorder_ppm > 0));
    assert!(any(&|s| f(s).corrupt_ppm > 0));
    assert!(any(&|s| f(s).delay_ppm > 0));
    assert!(any(&|s| f(s).disconnect_ppm > 0));
    assert!(any(&|s| !f(s).schedule.is_empty()));
    assert!(any(&|s| s.faults
        == FaultConfig {
            reorder_depth: s.faults.reorder_depth,
            delay: s.faults.delay,
            ..FaultConfig::default()
        }));
    for e in KillEvent::ALL {
        assert!(any(&|s| s.kill_on.iter().any(|k| k.event == e)), "{e:?}");
    }
    assert!(any(&|s| s.crash.is_some_and(|c| c.down_for.is_zero())));
    assert!(any(&|s| s
        .crash
        .is_some_and(|c| c.down_for >= Duration::from_millis(5))));
    assert!(any(&|s| s.replay) && any(&|s| !s.replay));
    assert!(any(&|s| s.rebuild_transport));
    assert!(any(&|s| s.workload.size == 0) && any(&|s| s.workload.size == 4112));
    assert!(any(&|s| s.workload.read_per_mille > 0));
    assert!(any(&|s| s.workload.stream_per_mille > 0));
    assert!(any(&|s| s.workload.interval.is_zero()));
    assert!(any(&|s| s.workload.interval == Duration::from_millis(3)));
    assert!(any(&|s| s.workload.messages == u64::MAX));
    assert!(any(&|s| s.latency.is_zero()) && any(&|s| s.latency >= Duration::from_micros(200)));
    assert!(any(&|s| s.shared_session_pairs > 0));
    assert!(any(&|s| s.stray.is_some()));
    assert!(any(&|s| s.workload.size_spread > 0));
    assert!(any(&|s| s.workload.storage > 0));
    assert!(any(&|s| s.server_tombs < Scenario::default().server_tombs));
}

#[test]
fn the_durable_profile_crashes_both_sides_under_faults_that_leave_holes() {
    let all: Vec<Scenario> = (0..300)
        .map(|i| sweep::generate(i, Profile::Durable))
        .collect();
    let any = |f: &dyn Fn(&Scenario) -> bool| all.iter().any(f);
    assert!(all.iter().all(|s| s.validate().is_ok()));
    for s in &all {
        let d = s.durable.expect("crash-proof state on");
        assert!(d.journal && d.client_crash.is_some() && d.restore_defect.is_none());
        assert!(s.crash.is_some() && s.replay);
        assert!(s.stray.is_none() && s.shared_session_pairs == 0);
    }
    // Holes at crash time: frames lost or held on live connections.
    let holes = all
        .iter()
        .filter(|s| s.faults.silent_drop_ppm > 0 || s.faults.reorder_ppm > 0)
        .count();
    assert!(holes * 2 > all.len(), "{holes} of {}", all.len());
    for e in KillEvent::ALL {
        assert!(any(&|s| s.kill_on.iter().any(|k| k.event == e)), "{e:?}");
    }
    assert!(any(&|s| s.durable.is_some_and(|d| d.outbox_lag > 1)));
    assert!(any(&|s| s.workload.stream_per_mille > 0));
    assert!(any(&|s| s.workload.read_per_mille > 0));
    assert!(any(&|s| s.clients > 1) && any(&|s| s.servers > 1));
}

#[test]
fn the_generator_draws_each_shape_about_as_often_as_it_says() {
    let n = 4000u64;
    let all: Vec<Scenario> = (0..n).map(|i| sweep::generate(i, Profile::Full)).collect();
    for (shape, per_mille) in SHAPE_PER_MILLE {
        let seen = all.iter().filter(|s| shape.of(s)).count() as u64;
        // At least three quarters of the drawn share (random knobs may
        // add more), and every one of them a scenario that runs.
        assert!(
            seen * 1000 >= n * per_mille * 3 / 4,
            "{shape:?}: {seen} of {n}, drawn at {per_mille} per mille"
        );
    }
    let clean = (0..n).map(|i| sweep::generate(i, Profile::Clean));
    for s in clean {
        for (shape, _) in SHAPE_PER_MILLE {
            assert!(
                shape != Shape::TombOverflow || !shape.of(&s),
                "the clean profile holds nothing past the reply timeout: {}",
                repro::encode(&s)
            );
        }
    }
}

#[test]
fn a_short_sweep_of_clean_scenarios_passes() {
    let mut runs = 0;
    for i in 0..60 {
        let s = sweep::generate(0xC1EA_0000 + i, Profile::Clean);
        let out = sweep::check(&s);
        let r = out.report.as_ref().expect("generated scenarios validate");
        assert!(out.passed(), "run {i}: {}\nrepro: {}", r, repro::encode(&s));
        runs += 1;
    }
    assert_eq!(runs, 60);
}

#[test]
fn check_names_the_violated_invariants_and_reports_invalid_scenarios() {
    let bad = Scenario {
        clients: 0,
        ..Scenario::default()
    };
    let out = sweep::check(&bad);
    assert!(out.report.is_none() && !out.passed());
    let unconnectable = Scenario {
        latency: Duration::from_micros(600),
        drain: Duration::from_millis(20),
        client_window: 4,
        ..Scenario::default()
    };
    let out = sweep::check(&unconnectable);
    assert!(
        out.violated.contains(&Invariant::Pending),
        "{:?}",
        out.violated
    );
    assert!(!out.passed());
}
