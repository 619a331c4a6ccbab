//! The report cannot lie: each of these runs checks one thing the ground
//! truth now shows that the protocol's own counts did not.

use iomsg_core::wire::RejectReason;
use std::time::Duration;

use iomsg_loopback::sim::{self, Invariant, KillEvent, KillOn, LossClass, Report, Scenario};
use iomsg_loopback::{Direction, FaultConfig, FrameFault, ScheduledFault};

fn to_server(nth: u64, fault: FrameFault) -> ScheduledFault {
    ScheduledFault {
        nth,
        direction: Direction::ToServer,
        data_only: true,
        fault,
    }
}

fn kill_after(event: KillEvent, nth: u64) -> Vec<KillOn> {
    vec![KillOn {
        event,
        nth,
        down_for: Duration::from_micros(100),
    }]
}

fn run(s: &Scenario) -> Report {
    sim::run(s).expect("the scenario validates")
}

#[test]
fn a_live_loss_stays_live_after_the_server_that_saw_it_dies() {
    // Replay off: sn 100 is silently dropped, sn 101 reveals the gap, and
    // the server is killed right after it reports the live loss. The
    // client then gives sn 100 up to the next instance (NotReplayed).
    let faults = FaultConfig {
        schedule: vec![to_server(100, FrameFault::SilentDrop)],
        ..FaultConfig::default()
    };
    let mut s = Scenario::one_client(1000, faults, false);
    s.kill_on = kill_after(KillEvent::LiveLoss, 1);
    let r = run(&s);
    assert_eq!(r.kills, 1, "{r}");
    assert_eq!(r.live_losses[0].2, 100..101);
    let l = r
        .lost
        .iter()
        .find(|l| l.range.contains(&100))
        .expect("sn 100 is lost");
    assert_eq!(
        l.class,
        LossClass::LiveConnection,
        "the network lost it live"
    );
    assert_eq!(l.reported, Some(LossClass::LiveConnection), "{r}");
    assert_eq!(r.violations_of(Invariant::WrongLossClass), 0, "{r}");
    assert_eq!(r.violations_of(Invariant::LiveReclassified), 0, "{r}");
}

#[test]
fn a_gap_filled_by_a_later_instance_counts_as_recovered() {
    // Replay on: the gap reported by the killed instance is filled by the
    // replay to the next one. That instance never saw the gap, so no
    // server counts it as recovered; the ground truth does.
    let faults = FaultConfig {
        schedule: vec![to_server(100, FrameFault::SilentDrop)],
        ..FaultConfig::default()
    };
    let mut s = Scenario::one_client(1000, faults, true);
    s.kill_on = kill_after(KillEvent::LiveLoss, 1);
    let r = run(&s);
    assert!(r.passed(), "{r}");
    assert_eq!(r.live_gap_sns, 1);
    assert_eq!(r.recovered, 1, "{r}");
    assert_eq!(r.truth_lost, 0);
}

#[test]
fn the_run_lasts_until_the_network_is_empty() {
    // A data frame delayed 50 ms (and with it the rest of its connection):
    // the client times out, reconnects, replays, finishes and says Bye
    // long before the delayed frames arrive. Its new Hello made the server
    // close the stalled connection, and the late frames still arrive inside
    // the run, at a closed connection.
    let mut faults = FaultConfig {
        schedule: vec![to_server(50, FrameFault::Delay)],
        ..FaultConfig::default()
    };
    faults.delay = Duration::from_millis(50);
    let mut s = Scenario::one_client(200, faults, true);
    s.duration = Duration::from_millis(5);
    let r = run(&s);
    assert!(r.passed(), "{r}");
    assert!(r.virtual_time >= Duration::from_millis(50), "{r}");
    assert_eq!(r.rejected(RejectReason::Superseded), 1, "{r}");
    assert!(
        r.faults.held_lost + r.network.discarded > 0,
        "the late frames were lost with their connection: {r}"
    );
}

#[test]
fn rebuilding_the_transport_changes_what_the_run_exercises() {
    // Server crashes: with the transport rebuilt after every disconnect,
    // each reconnect comes from a fresh client endpoint, and the session
    // (sns, window, replay) lives on above it; kept, one endpoint serves
    // every connection.
    let mut plain = Scenario::one_client(2000, FaultConfig::default(), true);
    plain.crash = Some(sim::CrashPlan {
        every: Duration::from_millis(3),
        down_for: Duration::from_micros(500),
        max_kills: 5,
    });
    let rebuilt = Scenario {
        rebuild_transport: true,
        ..plain.clone()
    };
    let (a, b) = (run(&plain), run(&rebuilt));
    assert!(a.passed() && b.passed(), "{a}\n{b}");
    assert_eq!((a.kills, b.kills), (5, 5));
    assert_eq!((a.transport_rebuilds, a.client_endpoints), (0, 1), "{a}");
    assert!(
        b.transport_rebuilds >= b.reconnects && b.reconnects >= 5,
        "{b}"
    );
    // Attempts while the server is down rebuild too; those that reached it
    // each came from a new endpoint.
    assert_eq!(b.client_endpoints, b.reconnects + 1, "{b}");
    assert_eq!(
        a.reconnects, b.reconnects,
        "the same reconnects, over new transports"
    );
}

#[test]
fn a_failed_first_connection_is_not_a_reconnect() {
    // The server is killed right after it accepts the first connection:
    // the client's first attempt fails, its first handshake comes later.
    let mut s = Scenario::one_client(100, FaultConfig::default(), true);
    s.kill_on = kill_after(KillEvent::Accept, 1);
    let r = run(&s);
    assert!(r.passed(), "{r}");
    assert_eq!(r.kills, 1);
    assert_eq!(r.reconnects, 0, "{r}");
    assert_eq!(
        r.reconnect_latency.count(),
        1,
        "a disconnect, then a handshake"
    );
}

#[test]
fn kills_right_after_protocol_events_happen_once_each() {
    for event in KillEvent::ALL {
        let faults = FaultConfig {
            schedule: vec![
                to_server(20, FrameFault::SilentDrop),
                to_server(150, FrameFault::SilentDrop),
            ],
            ..FaultConfig::default()
        };
        let mut s = Scenario::one_client(300, faults, true);
        s.kill_on = vec![
            KillOn {
                event,
                nth: 1,
                down_for: Duration::ZERO,
            },
            KillOn {
                event,
                nth: 2,
                down_for: Duration::from_micros(200),
            },
        ];
        let r = run(&s);
        assert_eq!(r.kills, 2, "{event:?}: {r}");
        assert_eq!(r.listens.len(), 3, "{event:?}");
    }
}
