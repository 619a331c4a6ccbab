//! The client state machine: timers, retries, limits.

use super::*;

// ---- client state machine: timers, retries, limits -------------------------

#[test]
fn connect_timeouts_back_off_exponentially_until_retries_are_exceeded() {
    let mut cfg = config();
    cfg.max_retries = 2;
    // The count alone decides.
    cfg.retry_for = Duration::ZERO;
    let mut c = client(cfg.clone());
    c.start(t(0));
    let mut backoffs = Vec::new();
    let mut now = t(0);
    for _ in 0..10 {
        let Some(due) = c.poll_timeout() else { break };
        now = due.max(now);
        c.handle_timeout(now);
        let _ = c.poll_action();
        if let ClientState::Backoff { until } = c.state() {
            backoffs.push(until - now);
        }
        if c.is_terminal() {
            break;
        }
    }
    assert_eq!(
        backoffs,
        vec![Duration::from_millis(10), Duration::from_millis(20)],
        "initial, then doubled"
    );
    assert!(
        matches!(
            c.state(),
            ClientState::Failed(FailReason::RetriesExceeded {
                attempts: 3,
                last: DisconnectCause::ConnectTimeout,
                ..
            })
        ),
        "{:?}",
        c.state()
    );
    assert_eq!(c.stats().connects, 3);
    assert_eq!(c.epoch(), 3, "every attempt has its own epoch");
    assert_eq!(c.submit(Message::Write(&[0])), Err(SubmitError::Closed));
}

#[test]
fn handshake_without_welcome_times_out_and_closes_the_connection() {
    let mut c = client(config());
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(1));
    let _ = client_frames(&mut c, t(1));
    assert_eq!(c.poll_timeout(), Some(t(1) + c.config().reply_timeout));
    c.handle_timeout(t(1) + c.config().reply_timeout);
    assert_eq!(c.poll_action(), Some(Action::Close));
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
    assert!(events(&mut c).contains(&ClientEvent::Disconnected {
        epoch: 1,
        cause: DisconnectCause::ReplyTimeout
    }));
}

#[test]
fn established_connection_without_ack_progress_times_out() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    assert_eq!(c.poll_timeout(), None, "idle: no liveness timer");
    submit_writes(&mut c, 1);
    let _ = client_frames(&mut c, t(10)); // the server never answers
    let reply_timeout = c.config().reply_timeout;
    // Tail-loss probes at each quarter of the reply timeout, then the end.
    for quarter in 1..4u32 {
        let due = c.poll_timeout().unwrap();
        assert_eq!(due, t(10) + reply_timeout / 4 * quarter, "probe {quarter}");
        c.handle_timeout(due);
        let probe = client_frames(&mut c, due);
        assert_eq!(probe.len(), 1, "one probe");
        let probe = wire::parse(&probe[0]).unwrap();
        assert_eq!((probe.body, probe.sn), (Body::Probe, 1), "carries next_sn");
    }
    let due = c.poll_timeout().unwrap();
    assert_eq!(due, t(10) + reply_timeout);
    c.handle_timeout(due);
    assert_eq!(c.poll_action(), Some(Action::Close));
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
    assert_eq!(c.outstanding(), 1, "still held for replay");
}

#[test]
fn run_limit_fails_the_client_with_timeout() {
    let mut cfg = config();
    cfg.run_limit = Some(Duration::from_secs(3));
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    assert_eq!(c.poll_timeout(), Some(t(3000)));
    c.handle_timeout(t(3000));
    assert_eq!(
        c.state(),
        ClientState::Failed(FailReason::Timeout {
            limit: Duration::from_secs(3)
        })
    );
    assert_eq!(c.poll_action(), Some(Action::Close));
}

#[test]
fn graceful_close_waits_for_acks_then_says_bye_and_the_server_forgets_the_session() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    c.close(t(1));
    assert_eq!(c.submit(Message::Write(&[0])), Err(SubmitError::Closed));
    let frames = client_frames(&mut c, t(1));
    assert_eq!(frames.len(), 2, "no Bye while sns are unacknowledged");
    to_server(&mut s, &mut out, 1, &frames, t(1));
    to_client(&mut c, &mut out, 1, t(1));
    let bye = client_frames(&mut c, t(2));
    assert_eq!(wire::parse(&bye[0]).unwrap().body, Body::Bye);
    assert_eq!(c.state(), ClientState::Closed);
    to_server(&mut s, &mut out, 1, &bye, t(2));
    assert!(out
        .events
        .contains(&ServerEvent::Closed { session: SESSION }));
    assert_eq!(s.session_count(), 0);
}

#[test]
fn requests_submitted_while_disconnected_go_out_after_the_handshake() {
    let (mut c, mut s, mut out) = setup();
    submit_writes(&mut c, 2);
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let frames = client_frames(&mut c, t(1));
    assert_eq!(sns(&frames), vec![0, 1]);
    assert_eq!(c.stats().sent, 2);
    assert_eq!(c.stats().replayed, 0);
}

#[test]
fn data_frame_of_a_newer_epoch_than_its_connections_hello_is_rejected() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let data = [0u8; 0];
    let write = msg(2, 0, 0, Body::Write { data: &data });
    let buf = frame(&write);
    serve(&mut s, &mut out, cid(1), &buf, t(1));
    assert_eq!(out.rejected(), vec![RejectReason::Unexpected]);
    assert!(out.delivered().is_empty());
}
