//! Whole runs: a quiet run, determinism, and inputs that must end.

use core::time::Duration;

use super::*;
use crate::fault::FaultConfig;

fn quiet(messages: u64, client_window: usize) -> Scenario {
    Scenario {
        workload: Workload {
            messages,
            ..Workload::default()
        },
        client_window,
        ..Scenario::default()
    }
}

#[test]
fn a_quiet_run_delivers_and_acknowledges_everything_exactly_once() {
    // A window of 8: a burst of completions never overflows today's
    // client event queue.
    let r = run(&quiet(500, 8)).unwrap();
    assert_eq!(r.discrepancies, Vec::<Violation>::new(), "{r}");
    assert!(r.passed());
    assert_eq!(r.submitted, 1000);
    assert_eq!(r.delivered_unique, 1000);
    assert_eq!(r.acknowledged, 1000);
    assert_eq!(r.deliveries, 1000, "no duplicates without faults");
    assert_eq!(r.carried, 1000);
    assert_eq!(r.lost_total(), 0);
}

#[test]
fn a_quiet_run_with_the_default_window_keeps_every_client_event() {
    let r = run(&quiet(500, 64)).unwrap();
    assert!(r.passed(), "{r}");
    assert_eq!(r.events_dropped, 0);
}

#[test]
fn same_seed_gives_the_same_report() {
    let scenario = Scenario {
        seed: 11,
        faults: FaultConfig {
            corrupt_ppm: 2000,
            duplicate_ppm: 2000,
            ..FaultConfig::default()
        },
        crash: Some(CrashPlan {
            every: Duration::from_millis(3),
            down_for: Duration::from_micros(300),
            max_kills: 5,
        }),
        ..Scenario::default()
    };
    let a = run(&scenario).unwrap();
    let b = run(&scenario).unwrap();
    assert_eq!(a, b);
    assert!(
        a.kills > 0 && a.faults.corrupted > 0,
        "the faults did happen: {a:?}"
    );
}

#[test]
fn sns_never_sent_are_pending_and_fail_the_verdict() {
    // Latency past half the 1 ms connect timeout: no connection ever comes
    // up, nothing is sent.
    let mut s = quiet(64, 8);
    s.latency = Duration::from_micros(501);
    s.drain = Duration::from_millis(50);
    let r = run(&s).unwrap();
    assert_eq!(r.sent, 0, "{r}");
    assert_eq!(r.submitted, 16, "a window's worth per client");
    assert_eq!(r.pending, 16, "{r}");
    assert!(!r.passed());
    assert_eq!(r.violations_of(Invariant::Pending), 16);
    assert_eq!(r.violations_of(Invariant::NotFinished), 1, "{r}");
}

#[test]
fn an_unbounded_workload_at_one_instant_is_refused_with_a_clear_error() {
    let mut s = quiet(u64::MAX, 8);
    s.latency = Duration::ZERO;
    let e = run(&s).unwrap_err();
    assert_eq!(e, ScenarioError::UnboundedAtOneInstant);
    assert!(e.to_string().contains("set an interval"), "{e}");
}

#[test]
fn edge_scenarios_end_within_their_bounds() {
    let cases: Vec<(&str, Scenario)> = vec![
        ("latency 0", {
            let mut s = quiet(300, 8);
            s.latency = Duration::ZERO;
            s.detect_delay = Duration::ZERO;
            s
        }),
        ("unbounded, interval 0", {
            let mut s = quiet(u64::MAX, 8);
            s.duration = Duration::from_millis(5);
            s
        }),
        ("unbounded, zero duration, latency 0", {
            let mut s = quiet(u64::MAX, 8);
            s.duration = Duration::ZERO;
            s.latency = Duration::ZERO;
            s
        }),
        ("zero duration and drain", {
            let mut s = quiet(10, 8);
            s.duration = Duration::ZERO;
            s.drain = Duration::ZERO;
            s
        }),
        ("a step cap", {
            let mut s = quiet(100_000, 8);
            s.max_steps = 1000;
            s
        }),
        ("back-to-back kills with no downtime", {
            let mut s = quiet(300, 8);
            s.crash = Some(CrashPlan {
                every: Duration::from_micros(1),
                down_for: Duration::ZERO,
                max_kills: 10_000,
            });
            s
        }),
    ];
    for (name, s) in cases {
        let r = run(&s).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            r.virtual_time <= s.end(),
            "{name}: ran {:?}",
            r.virtual_time
        );
        assert!(r.steps <= s.max_steps, "{name}");
        // Whatever was left undone is in the verdict.
        if r.pending > 0 {
            assert!(!r.passed(), "{name}: {r}");
        }
    }
}

#[test]
fn a_step_cap_is_a_failed_verdict() {
    let mut s = quiet(100_000, 8);
    s.max_steps = 1000;
    let r = run(&s).unwrap();
    assert_eq!(r.violations_of(Invariant::NotFinished), 1, "{r}");
    assert!(r.submitted < 200_000, "the workload was cut short");
    assert!(r.steps <= 1000);
    assert!(r.discrepancies.iter().any(|v| v.note.contains("step cap")));
}

#[test]
fn bad_scenarios_are_refused_not_panicked_on() {
    let bad: Vec<(Scenario, ScenarioError)> = vec![
        (
            Scenario {
                clients: 0,
                ..Scenario::default()
            },
            ScenarioError::Clients(0),
        ),
        (
            Scenario {
                servers: 0,
                ..Scenario::default()
            },
            ScenarioError::Servers(0),
        ),
        (
            Scenario {
                workload: Workload {
                    size: MAX_SIZE + 1,
                    ..Workload::default()
                },
                ..Scenario::default()
            },
            ScenarioError::Size(MAX_SIZE + 1),
        ),
        (
            Scenario {
                client_window: 0,
                ..Scenario::default()
            },
            ScenarioError::ClientWindow(0),
        ),
        (
            Scenario {
                server_window: 100,
                ..Scenario::default()
            },
            ScenarioError::ServerWindow(100),
        ),
        (
            Scenario {
                server_sessions: 5,
                ..Scenario::default()
            },
            ScenarioError::ServerSessions(5),
        ),
        (
            Scenario {
                duration: Duration::MAX,
                ..Scenario::default()
            },
            ScenarioError::TooLong(Duration::MAX),
        ),
        (
            Scenario {
                max_steps: 0,
                ..Scenario::default()
            },
            ScenarioError::MaxSteps,
        ),
        (
            Scenario {
                server_tombs: 3,
                ..Scenario::default()
            },
            ScenarioError::ServerTombs(3),
        ),
    ];
    // Tail losses that never happen, or of no or too many commits.
    let never = TailLoss {
        every: 0,
        batches: 1,
        at_end: false,
        synced_openings: false,
    };
    let bad = bad.into_iter().chain(
        [
            never,
            TailLoss {
                every: 1,
                batches: 0,
                ..never
            },
            TailLoss {
                at_end: true,
                batches: MAX_TAIL_BATCHES + 1,
                ..never
            },
        ]
        .map(|t| {
            let s = Scenario {
                durable: Some(Durability {
                    tail_loss: Some(t),
                    ..Durability::default()
                }),
                ..Scenario::default()
            };
            (s, ScenarioError::TailLoss(t))
        }),
    );
    for (s, want) in bad {
        assert_eq!(run(&s).unwrap_err(), want);
        assert!(!want.to_string().is_empty());
    }
}
