//! When the client tries again: refusals sooner than the backoff.

use core::time::Duration;
use std::vec::Vec;

use super::*;
use crate::conn::Cause;

type Session = ClientSession<8, [u8; 256]>;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

/// Backoff 10 ms doubling to 500 ms, refusals retried after 2 ms (three of
/// them), no jitter.
fn config() -> ClientConfig {
    let mut c = ClientConfig::new(0x5E55, 0x70CE);
    c.backoff.jitter_per_mille = 0;
    c.refused_retry = Duration::from_millis(2);
    c.refused_retries = 3;
    c
}

/// How the attempt in progress at `now` ends.
#[derive(Clone, Copy)]
enum End {
    /// The transport refused it before it connected.
    Refused,
    /// It did not connect within the connect timeout.
    TimedOut,
}

/// Runs one attempt per `ends`, from `Connect` to its failure, and returns
/// the wait before each next attempt (or the state it ended in).
fn waits(session: &mut Session, ends: &[End]) -> Vec<Duration> {
    let mut now = ms(0);
    let mut out = Vec::new();
    for end in ends {
        assert_eq!(
            session.poll_action(),
            Some(Action::Connect),
            "{:?}",
            session.state()
        );
        let ClientState::Connecting { deadline, .. } = session.state() else {
            panic!("not connecting: {:?}", session.state());
        };
        match end {
            End::Refused => {
                now = now + Duration::from_micros(300);
                let reason = DisconnectReason::ConnectFailed(Cause::UNKNOWN);
                session.handle_disconnected(now, reason);
            }
            End::TimedOut => {
                now = deadline;
                session.handle_timeout(now);
                assert_eq!(session.poll_action(), Some(Action::Close));
            }
        }
        let ClientState::Backoff { until } = session.state() else {
            break;
        };
        out.push(until - now);
        now = until;
        session.handle_timeout(now);
        while session.poll_event().is_some() {}
    }
    out
}

#[test]
fn refused_connects_are_retried_sooner_than_the_backoff_then_back_off() {
    let mut c = Session::new(config(), ms(0), [0; 256]);
    c.start(ms(0));
    let got = waits(&mut c, &[End::Refused; 5]);
    let ms = Duration::from_millis;
    // Three quick retries, then the backoff from its first step: the
    // refusals did not make it grow.
    assert_eq!(got, [ms(2), ms(2), ms(2), ms(10), ms(20)]);
}

#[test]
fn a_connect_that_timed_out_waits_for_the_backoff() {
    let mut c = Session::new(config(), ms(0), [0; 256]);
    c.start(ms(0));
    let got = waits(&mut c, &[End::TimedOut, End::Refused, End::TimedOut]);
    let ms = Duration::from_millis;
    assert_eq!(got, [ms(10), ms(2), ms(20)]);
}

#[test]
fn quick_retries_do_not_count_towards_the_retry_limit() {
    let mut cfg = config();
    cfg.max_retries = 2;
    cfg.retry_for = Duration::ZERO;
    let mut c = Session::new(cfg, ms(0), [0; 256]);
    c.start(ms(0));
    let ends = [End::Refused; 6];
    let got = waits(&mut c, &ends);
    let ms = Duration::from_millis;
    assert_eq!(got, [ms(2), ms(2), ms(2), ms(10), ms(20)]);
    assert!(
        matches!(
            c.state(),
            ClientState::Failed(FailReason::RetriesExceeded { attempts: 6, .. })
        ),
        "{:?}",
        c.state()
    );
}

#[test]
fn a_lost_connection_is_not_a_refusal() {
    let mut c = Session::new(config(), ms(0), [0; 256]);
    c.start(ms(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(ms(1));
    // The connection drops during the handshake: the server is there.
    let reason = DisconnectReason::ConnectFailed(Cause::UNKNOWN);
    c.handle_disconnected(ms(2), reason);
    assert_eq!(c.state(), ClientState::Backoff { until: ms(12) });
}

#[test]
fn without_quick_retries_a_refusal_waits_for_the_backoff() {
    let mut cfg = config();
    cfg.refused_retries = 0;
    let mut c = Session::new(cfg, ms(0), [0; 256]);
    c.start(ms(0));
    let got = waits(&mut c, &[End::Refused; 3]);
    let ms = Duration::from_millis;
    assert_eq!(got, [ms(10), ms(20), ms(40)]);
}

#[test]
fn a_refusal_is_never_retried_later_than_the_backoff_would() {
    let mut cfg = config();
    cfg.refused_retry = Duration::from_millis(50);
    let mut c = Session::new(cfg, ms(0), [0; 256]);
    c.start(ms(0));
    let got = waits(&mut c, &[End::Refused; 2]);
    let ms = Duration::from_millis;
    assert_eq!(got, [ms(10), ms(10)]);
}
