//! The sweep's parts: every invariant can fail (checked on hand-made
//! truths), repro lines round-trip, the shrinker shrinks, the generator
//! turns every knob, and a short sweep of clean scenarios passes.

use std::collections::BTreeSet;
use std::time::Duration;

use iomsg_core::session::{ClientEvent, DisconnectCause, ServerEvent};
use iomsg_core::transport::ConnId;
use iomsg_core::wire::Op;
use iomsg_core::workload;
use iomsg_loopback::sim::truth::{ClientSpec, FrameInfo, Owner, Taken, Truth};
use iomsg_loopback::sim::{
    CrashPlan, Invariant, KillEvent, KillOn, Scenario, StrayPeer, Verdict, Workload,
};
use iomsg_loopback::sweep::{self, repro, Profile, ShrinkBudget};
use iomsg_loopback::{Direction, FaultConfig, FrameFault, ScheduledFault};

const S: u64 = 0xA11CE;

fn spec(session: u64, replay: bool) -> ClientSpec {
    ClientSpec {
        session,
        server: 0,
        replay,
    }
}

/// One client of session `S`, sns `0..n` submitted.
fn truth(n: u64, replay: bool) -> Truth {
    let mut t = Truth::new(&[spec(S, replay)]);
    for sn in 0..n {
        t.submitted(0, sn, sn);
    }
    t
}

fn data(sn: u64, epoch: u32) -> FrameInfo {
    FrameInfo {
        session: S,
        epoch,
        sn,
        op: Op::Write,
        hello: None,
    }
}

/// Client 0 connects in `epoch` and completes its handshake.
fn established(t: &mut Truth, epoch: u32) {
    t.client_event(0, &ClientEvent::Connecting { epoch, attempt: 1 });
    t.client_event(
        0,
        &ClientEvent::Established {
            epoch,
            instance: 1,
            known: false,
            resume_from: 0,
        },
    );
}

/// Client 0's `Hello` of `epoch` reached instance 1 on `conn`, which bound it.
fn hello(t: &mut Truth, conn: u32, epoch: u32, base_sn: u64, next_sn: u64, replay: bool) {
    let f = FrameInfo {
        session: S,
        epoch,
        sn: 0,
        op: Op::Hello,
        hello: Some((base_sn, next_sn, replay)),
    };
    t.carried(Owner::Client(0), ConnId::new(conn, 0), 1, Some(&f));
    t.conn_bound(0, S, ConnId::new(conn, 0));
}

/// Client 0's sn carried on `conn` and delivered by instance `gen`.
fn carry_and_deliver(t: &mut Truth, conn: u32, gen: u32, sn: u64, epoch: u32) {
    t.carried(
        Owner::Client(0),
        ConnId::new(conn, 0),
        gen,
        Some(&data(sn, epoch)),
    );
    let taken = Taken {
        session: S,
        sn,
        hash: sn,
    };
    t.delivered(gen, 0, Owner::Client(0), Some(ConnId::new(conn, 0)), taken);
}

fn acked(t: &mut Truth, upto: u64) {
    t.client_event(0, &ClientEvent::Acked { upto });
}

/// Session `S`'s `sn`, with bytes of hash `hash`.
fn taken(sn: u64, hash: u64) -> Taken {
    Taken {
        session: S,
        sn,
        hash,
    }
}

fn verdict(t: &Truth) -> Verdict {
    t.verdict()
}

fn only(v: &Verdict, inv: Invariant) {
    assert!(
        v.findings.count(inv) > 0,
        "{inv} not flagged: {:?}",
        v.findings
    );
}

fn none_of(v: &Verdict, inv: Invariant) {
    assert_eq!(v.findings.count(inv), 0, "{inv} flagged: {:?}", v.findings);
}

#[test]
fn a_clean_truth_violates_nothing() {
    let mut t = truth(3, true);
    established(&mut t, 1);
    for sn in 0..3 {
        carry_and_deliver(&mut t, 1, 1, sn, 1);
    }
    acked(&mut t, 3);
    t.client_final(0, 3, [1, 1, 0]);
    let v = verdict(&t);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!((v.delivered_unique, v.acknowledged, v.pending), (3, 3, 0));
}

#[test]
fn pending_fails_when_an_sn_is_neither_delivered_nor_reported() {
    let mut t = truth(2, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    let v = verdict(&t);
    only(&v, Invariant::Pending);
    assert_eq!(v.pending, 1, "sn 1 was never even sent");
}

#[test]
fn not_finished_fails_when_the_run_hit_a_cap() {
    let mut t = truth(0, true);
    t.not_finished("stopped at the step cap".into());
    only(&verdict(&t), Invariant::NotFinished);
}

#[test]
fn lost_with_replay_fails_when_replay_lets_an_sn_go() {
    let mut t = truth(1, true);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..1 });
    only(&verdict(&t), Invariant::LostWithReplay);
    // A client that failed and said so reported it: not lost.
    let mut t = truth(1, true);
    t.client_event(
        0,
        &ClientEvent::Failed(iomsg_core::session::FailReason::EpochExhausted),
    );
    let v = verdict(&t);
    none_of(&v, Invariant::LostWithReplay);
    none_of(&v, Invariant::Pending);
    assert_eq!(v.failed_reported, 1);
}

#[test]
fn acked_undelivered_fails_when_a_client_releases_what_no_instance_delivered() {
    let mut t = truth(2, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    acked(&mut t, 2);
    let v = verdict(&t);
    only(&v, Invariant::AckedUndelivered);
    none_of(&v, Invariant::AckedFromOthersFrames);
    // A known session's resume_from releases too.
    let mut t = truth(2, true);
    t.client_event(
        0,
        &ClientEvent::Established {
            epoch: 1,
            instance: 1,
            known: true,
            resume_from: 2,
        },
    );
    only(&verdict(&t), Invariant::AckedUndelivered);
}

#[test]
fn acked_from_others_frames_fails_when_a_shared_session_steals_the_ack() {
    let mut t = Truth::new(&[spec(S, true), spec(S, true)]);
    t.submitted(0, 0, 0);
    t.submitted(1, 0, 0);
    // Client 1's sn 0 is delivered; client 0's never is, yet it is acked.
    t.carried(Owner::Client(1), ConnId::new(7, 0), 1, Some(&data(0, 1)));
    t.delivered(1, 0, Owner::Client(1), Some(ConnId::new(7, 0)), taken(0, 0));
    acked(&mut t, 1);
    let v = verdict(&t);
    only(&v, Invariant::AckedFromOthersFrames);
    none_of(&v, Invariant::AckedUndelivered);
}

#[test]
fn delivered_twice_by_one_instance_fails() {
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    only(&verdict(&t), Invariant::DeliveredTwiceByOneInstance);
    // Also when the first delivery came from another peer's frame.
    let mut t = truth(1, true);
    t.delivered(1, 0, Owner::Stray, Some(ConnId::new(9, 0)), taken(0, 0));
    t.delivered(1, 0, Owner::Client(0), Some(ConnId::new(1, 0)), taken(0, 0));
    only(&verdict(&t), Invariant::DeliveredTwiceByOneInstance);
}

#[test]
fn unannounced_duplicate_fails_and_an_announced_one_does_not() {
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 2, 2, 0, 2);
    only(&verdict(&t), Invariant::UnannouncedDuplicate);

    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.client_event(
        0,
        &ClientEvent::ServerRestarted {
            previous: Some(1),
            instance: 2,
            unconfirmed: 0..1,
        },
    );
    carry_and_deliver(&mut t, 2, 2, 0, 2);
    // The announcement covers one duplicate, not the next one.
    carry_and_deliver(&mut t, 3, 3, 0, 3);
    let v = verdict(&t);
    assert_eq!(v.findings.count(Invariant::UnannouncedDuplicate), 1);
    assert_eq!(v.deliveries, 3);
}

#[test]
fn delivery_counts_are_exact_past_255() {
    let mut t = truth(1, true);
    for gen in 1..=300 {
        t.client_event(
            0,
            &ClientEvent::ServerRestarted {
                previous: None,
                instance: u64::from(gen),
                unconfirmed: 0..1,
            },
        );
        carry_and_deliver(&mut t, gen, gen, 0, gen);
    }
    let v = verdict(&t);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!(v.deliveries, 300);
    assert_eq!(v.duplicates, 299);
}

#[test]
fn reported_twice_fails_when_an_sn_is_given_up_again() {
    let mut t = truth(2, false);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..2 });
    t.client_event(0, &ClientEvent::NotReplayed { range: 1..2 });
    only(&verdict(&t), Invariant::ReportedTwice);
}

#[test]
fn delivered_after_given_up_fails_with_replay_off() {
    let mut t = truth(1, false);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..1 });
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    only(&verdict(&t), Invariant::DeliveredAfterGivenUp);
}

/// Replay off: sn 1 of 0..3 jumped over on a live connection, given up.
fn live_jump(claim_live: bool) -> Truth {
    let mut t = truth(3, false);
    established(&mut t, 1);
    hello(&mut t, 1, 1, 0, 0, false);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 1, 1, 2, 1);
    if claim_live {
        t.server_event(
            0,
            &ServerEvent::LiveLoss {
                session: S,
                epoch: 1,
                missing: 1..2,
            },
        );
    }
    t.client_event(0, &ClientEvent::NotReplayed { range: 1..2 });
    t
}

#[test]
fn wrong_loss_class_fails_when_a_live_loss_is_reported_in_flight() {
    let v = verdict(&live_jump(false));
    only(&v, Invariant::WrongLossClass);
    assert_eq!(v.lost_live, 1);
    let v = verdict(&live_jump(true));
    none_of(&v, Invariant::WrongLossClass);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
}

#[test]
fn live_loss_undetected_fails_for_a_jump_and_for_a_trailing_drop() {
    only(&verdict(&live_jump(false)), Invariant::LiveLossUndetected);
    // A trailing drop: sn 1 silently dropped, nothing behind it, and the
    // client timed the connection out while it was still up.
    let mut t = truth(2, true);
    established(&mut t, 1);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.silently_dropped(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(1, 1)));
    t.client_event(
        0,
        &ClientEvent::Disconnected {
            epoch: 1,
            cause: DisconnectCause::ReplyTimeout,
        },
    );
    t.reply_timeout(0, 1, |_| true);
    carry_and_deliver(&mut t, 2, 1, 1, 2);
    only(&verdict(&t), Invariant::LiveLossUndetected);
    // The same drop on a connection the network had already broken is in
    // flight at a disconnect, not a live loss.
    let mut t = truth(2, true);
    established(&mut t, 1);
    t.silently_dropped(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(1, 1)));
    t.reply_timeout(0, 1, |_| false);
    carry_and_deliver(&mut t, 2, 1, 0, 2);
    carry_and_deliver(&mut t, 2, 1, 1, 2);
    none_of(&verdict(&t), Invariant::LiveLossUndetected);
}

#[test]
fn live_reclassified_fails_when_a_live_loss_is_later_called_in_flight() {
    let mut t = live_jump(true);
    t.server_event(
        0,
        &ServerEvent::LostInFlight {
            session: S,
            range: 1..2,
        },
    );
    only(&verdict(&t), Invariant::LiveReclassified);
}

#[test]
fn read_mismatch_fails_where_a_crc_would_have_caught_corruption() {
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.read_answered(0, 0, workload::Check::Corrupt { len: 8 });
    let v = verdict(&t);
    only(&v, Invariant::ReadMismatch);
    assert_eq!(v.corrupt, 0);
}

#[test]
fn corrupt_data_is_counted_not_failed_where_no_crc_covered_it() {
    let mut t = truth(2, true);
    t.set_undetectable_corruption(true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    // sn 1's bytes differ from what the client submitted.
    t.carried(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(1, 1)));
    t.delivered(
        1,
        0,
        Owner::Client(0),
        Some(ConnId::new(1, 0)),
        taken(1, 99),
    );
    t.read_answered(0, 0, workload::Check::Corrupt { len: 8 });
    let v = verdict(&t);
    assert_eq!(v.corrupt, 2);
    none_of(&v, Invariant::PayloadMismatch);
    none_of(&v, Invariant::ReadMismatch);
}

#[test]
fn payload_mismatch_fails_where_a_crc_would_have_caught_corruption() {
    let mut t = truth(1, true);
    t.carried(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(0, 1)));
    t.delivered(
        1,
        0,
        Owner::Client(0),
        Some(ConnId::new(1, 0)),
        taken(0, 12345),
    );
    only(&verdict(&t), Invariant::PayloadMismatch);
}

#[test]
fn client_events_lost_fails_for_dropped_events_and_unexplained_releases() {
    let mut t = truth(2, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 1, 1, 1, 1);
    acked(&mut t, 1);
    t.client_final(0, 2, [0; 3]); // base_sn 2, but no event released sn 1
    only(&verdict(&t), Invariant::ClientEventsLost);
    let mut t = truth(0, true);
    t.client_final(0, 0, [0, 0, 3]); // three Disconnected never seen
    only(&verdict(&t), Invariant::ClientEventsLost);
}

#[test]
fn untraced_delivery_fails_when_no_received_frame_carried_it() {
    let mut t = truth(1, true);
    t.delivered(1, 0, Owner::Unknown, None, taken(0, 0));
    only(&verdict(&t), Invariant::UntracedDelivery);
}

#[test]
fn every_invariant_has_a_failing_test_above() {
    // The names this file's tests flag, kept in step with Invariant::ALL.
    let tested = [
        "pending",
        "not-finished",
        "lost-with-replay",
        "acked-undelivered",
        "acked-from-others-frames",
        "delivered-twice-by-one-instance",
        "unannounced-duplicate",
        "reported-twice",
        "delivered-after-given-up",
        "wrong-loss-class",
        "live-reclassified",
        "live-loss-undetected",
        "read-mismatch",
        "payload-mismatch",
        "client-events-lost",
        "untraced-delivery",
    ];
    let all: BTreeSet<&str> = Invariant::ALL.iter().map(|i| i.name()).collect();
    assert_eq!(all, tested.into_iter().collect::<BTreeSet<_>>());
    for name in tested {
        assert_eq!(Invariant::from_name(name).map(|i| i.name()), Some(name));
    }
}

/// A scenario with every field away from its default.
fn everything() -> Scenario {
    Scenario {
        seed: u64::MAX - 3,
        clients: 9,
        servers: 3,
        workload: Workload {
            messages: u64::MAX,
            size: 4112,
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
        shared_session_pairs: 2,
        stray: Some(StrayPeer {
            victim: 8,
            at: Duration::from_micros(1234),
            ahead: 1 << 20,
            writes: 3,
            bye: true,
        }),
        max_steps: 12345,
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
        for profile in [Profile::Full, Profile::Clean] {
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
