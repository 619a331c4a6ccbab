//! Refusals that another attempt would meet again end the client at once,
//! named; a full table is retried only by a client the server let in
//! before (or told to wait for room).

use super::*;
use crate::conn::Cause;
use std::format;
use std::string::ToString;

use crate::wire::VERSION;

/// What a UCX client hears from a server on the other API.
const API_MISMATCH: Cause = Cause {
    code: -22,
    name: "API mismatch",
    text: "the peer uses the other UCX API",
};

/// Asserts that `c` failed for good with `reason` on its first attempt:
/// the attempt's `Disconnected`, then `Failed`, and no attempt after it
/// however long the client is driven.
fn assert_final(c: &mut Client, reason: FailReason) {
    assert_eq!(c.state(), ClientState::Failed(reason));
    let seen = events(c);
    let n = seen.len();
    assert!(n >= 2, "{seen:?}");
    assert!(
        matches!(seen[n - 2], ClientEvent::Disconnected { epoch: 1, .. }),
        "{seen:?}"
    );
    assert_eq!(seen[n - 1], ClientEvent::Failed(reason));
    assert_eq!(c.poll_timeout(), None, "a timer after the failure");
    c.handle_timeout(t(600_000));
    assert_ne!(c.poll_action(), Some(Action::Connect));
    assert_eq!(c.stats().connects, 1, "attempted again");
    assert_eq!(c.state(), ClientState::Failed(reason));
}

/// Whether `c` waits to try again.
fn retries(c: &Client) -> bool {
    matches!(c.state(), ClientState::Backoff { .. })
}

/// A client let in by `s` on connection 1, whose connection then broke,
/// connecting again (on connection 2, not yet up).
fn let_in_then_reconnecting(c: &mut Client, s: &mut Server, out: &mut Out) {
    connect(c, s, out, 1, t(0));
    c.handle_disconnected(t(1), DisconnectReason::PeerFailed(Cause::UNKNOWN));
    s.handle_disconnected(cid(1));
    let due = c.poll_timeout().expect("a retry");
    c.handle_timeout(due);
    assert_eq!(c.poll_action(), Some(Action::Connect));
}

/// The server core's answer to a `Hello` on a connection past its table:
/// addressed to no session.
fn connection_table_full(size: u64) -> Vec<u8> {
    let reject = Body::Reject {
        reason: RejectReason::SessionTableFull,
        detail: size,
    };
    frame(&IoMsg {
        session: 0,
        epoch: 0,
        ..msg(0, 0, 0, reject)
    })
}

#[test]
fn a_transport_refusal_ends_the_client_at_once_naming_its_cause() {
    let mut c = client(config());
    submit_writes(&mut c, 3);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_disconnected(t(1), DisconnectReason::Refused(API_MISMATCH));
    let reason = FailReason::Refused {
        cause: API_MISMATCH,
    };
    assert_final(&mut c, reason);
    let text = reason.to_string();
    assert!(text.contains("API mismatch"), "{text}");
    assert!(text.contains("refused the same way"), "{text}");
    // Nothing vanished: the three writes are still held, unacknowledged,
    // and the Failed event stands for them.
    assert_eq!((c.base_sn(), c.outstanding()), (0, 3));
    assert_eq!(c.submit(Message::Write(b"more")), Err(SubmitError::Closed));
}

#[test]
fn a_full_connection_table_ends_a_client_never_let_in() {
    let mut c = client(config());
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    let full = DisconnectReason::TableFull { size: 1024 };
    c.handle_disconnected(t(1), full);
    let reason = FailReason::TableFull {
        size: 1024,
        last: DisconnectCause::Transport(full),
    };
    assert_final(&mut c, reason);
    let text = reason.to_string();
    assert!(text.contains("connection table full (1024)"), "{text}");
    assert!(text.contains("--retry-full-table"), "{text}");
}

#[test]
fn a_full_session_table_ends_a_client_never_let_in() {
    let mut s: ServerCore<4, 8, 3> = ServerCore::new(ServerConfig::new(INSTANCE_A));
    let mut out = Out::default();
    for id in 1..=4u64 {
        let mut other = client(ClientConfig::new(id, TOKEN));
        send_hello(&mut other, &mut s, &mut out, id as u32, t(id));
    }
    let mut c = client(config());
    send_hello(&mut c, &mut s, &mut out, 5, t(5));
    assert_eq!(out.last_reject(), Some((RejectReason::SessionTableFull, 4)));
    for (to, f) in out.take() {
        if to == cid(5) {
            c.handle_frame(t(5), &f);
        }
    }
    let reason = FailReason::TableFull {
        size: 4,
        last: DisconnectCause::Rejected {
            reason: RejectReason::SessionTableFull,
            detail: 4,
        },
    };
    assert_eq!(c.poll_action(), Some(Action::Close));
    assert_final(&mut c, reason);
    assert!(
        reason.to_string().contains("table of 4 sessions"),
        "{reason}"
    );
}

#[test]
fn a_full_connection_table_of_the_server_core_ends_a_client_never_let_in() {
    let (mut c, mut s, mut out) = setup();
    for conn in 1..=4u32 {
        assert!(s.handle_accepted(t(0), cid(conn), &mut out));
    }
    send_hello(&mut c, &mut s, &mut out, 5, t(1));
    // Refused before the Hello was read: addressed to no session.
    let (_, reject) = out.frames.last().expect("a Reject").clone();
    let parsed = wire::parse(&reject).unwrap();
    assert_eq!((parsed.session, parsed.epoch), (0, 0));
    to_client(&mut c, &mut out, 5, t(1));
    assert!(
        matches!(
            c.state(),
            ClientState::Failed(FailReason::TableFull { size: 4, .. })
        ),
        "{:?}",
        c.state()
    );
}

#[test]
fn a_full_table_is_retried_by_a_client_let_in_before() {
    let (mut c, mut s, mut out) = setup();
    let_in_then_reconnecting(&mut c, &mut s, &mut out);
    let full = DisconnectReason::TableFull { size: 1024 };
    c.handle_disconnected(t(100), full);
    assert!(retries(&c), "{:?}", c.state());
    // The server core's refusal of the next attempt, too.
    let due = c.poll_timeout().expect("a retry");
    c.handle_timeout(due);
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(due);
    let _hello = client_frames(&mut c, due);
    c.handle_frame(due, &connection_table_full(4));
    assert!(retries(&c), "{:?}", c.state());
    assert_eq!(c.stats().rejects, 1);
}

#[test]
fn a_client_told_to_wait_for_room_retries_a_full_table_before_it_was_let_in() {
    let mut cfg = config();
    cfg.retry_full_table = true;
    let mut c = client(cfg);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_disconnected(t(1), DisconnectReason::TableFull { size: 1024 });
    assert!(retries(&c), "{:?}", c.state());
    let due = c.poll_timeout().expect("a retry");
    c.handle_timeout(due);
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(due);
    let _hello = client_frames(&mut c, due);
    c.handle_frame(due, &connection_table_full(4));
    assert!(retries(&c), "{:?}", c.state());
}

#[test]
fn a_stale_epoch_ends_the_client_at_once() {
    let (mut first, mut s, mut out) = setup();
    connect(&mut first, &mut s, &mut out, 1, t(0));
    // The same identity started again from epoch 0, as a second process.
    let mut again = client(config());
    send_hello(&mut again, &mut s, &mut out, 2, t(1));
    assert_eq!(out.last_reject(), Some((RejectReason::StaleEpoch, 1)));
    to_client(&mut again, &mut out, 2, t(1));
    let reason = FailReason::StaleEpoch {
        session: SESSION,
        epoch: 1,
        seen: 1,
    };
    assert_eq!(again.poll_action(), Some(Action::Close));
    assert_final(&mut again, reason);
    assert!(reason.to_string().contains("epoch 1"), "{reason}");
}

#[test]
fn a_server_that_answers_in_another_wire_version_ends_the_client_at_once() {
    let mut c = client(config());
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let _hello = client_frames(&mut c, t(0));
    // A server of version 2 answers with a frame of its own version.
    let reject = Body::Reject {
        reason: RejectReason::Malformed,
        detail: 3,
    };
    let mut answer = frame(&msg(1, 0, 0, reject));
    answer[4] = VERSION + 1;
    c.handle_frame(t(1), &answer);
    let reason = FailReason::WireVersion {
        ours: VERSION,
        theirs: Some(VERSION + 1),
    };
    assert_final(&mut c, reason);
    let text = reason.to_string();
    assert!(text.contains("wire version mismatch"), "{text}");
    assert!(text.contains(&format!("version {VERSION}, the server {}", VERSION + 1)));
}

#[test]
fn a_server_that_does_not_speak_this_wire_version_ends_the_client_at_once() {
    let mut c = client(config());
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let _hello = client_frames(&mut c, t(0));
    // A server of version 7 that reads this one well enough to say so.
    let detail = wire_error_code(&wire::WireError::UnsupportedVersion(VERSION))
        | u64::from(VERSION) << 8
        | 7 << 16;
    let reject = Body::Reject {
        reason: RejectReason::Malformed,
        detail,
    };
    c.handle_frame(
        t(1),
        &frame(&IoMsg {
            session: 0,
            epoch: 0,
            ..msg(0, 0, 0, reject)
        }),
    );
    assert_final(
        &mut c,
        FailReason::WireVersion {
            ours: VERSION,
            theirs: Some(7),
        },
    );
}

#[test]
fn a_version_byte_damaged_on_the_way_is_retried() {
    let (mut c, mut s, mut out) = setup();
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let mut hello = client_frames(&mut c, t(0)).remove(0);
    hello[4] = 9;
    serve(&mut s, &mut out, cid(1), &hello, t(0));
    let said = 3 | 9 << 8 | u64::from(VERSION) << 16;
    assert_eq!(out.last_reject(), Some((RejectReason::Malformed, said)));
    to_client(&mut c, &mut out, 1, t(1));
    assert!(retries(&c), "{:?}", c.state());
    assert_eq!(c.stats().rejects, 1);
}

#[test]
fn a_version_byte_zeroed_on_the_way_is_retried_not_taken_for_a_refusal() {
    // The server names the byte it got (0) and its own version, which is
    // this client's: nothing was refused, the byte was damaged.
    let (mut c, mut s, mut out) = setup();
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let mut hello = client_frames(&mut c, t(0)).remove(0);
    hello[4] = 0;
    serve(&mut s, &mut out, cid(1), &hello, t(0));
    let said = 3 | u64::from(VERSION) << 16;
    assert_eq!(out.last_reject(), Some((RejectReason::Malformed, said)));
    to_client(&mut c, &mut out, 1, t(1));
    assert!(retries(&c), "{:?}", c.state());
    assert_eq!(c.stats().rejects, 1);
}
