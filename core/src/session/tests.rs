//! One test per protocol rule of DESIGN.md, driving a `ClientSession` and a
//! `ServerCore` against each other frame by frame, with virtual time.

use core::ops::Range;
use core::time::Duration;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::time::Instant;
use crate::transport::{ConnId, DisconnectReason};
use crate::wire::{self, Body, IoMsg, Op, RejectReason, HEADER_LEN, SN_MAX};

type Server = ServerCore<4, 4, 4, 3>; // window of 128 sns, backlog of 4
type Client = ClientSession<8>;

const SESSION: u64 = 0x5E55_1011;
const INSTANCE_A: u64 = 0xA;
const INSTANCE_B: u64 = 0xB;

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Collects everything a server emits.
#[derive(Default)]
struct Out {
    frames: Vec<(ConnId, Vec<u8>)>,
    closed: Vec<ConnId>,
    events: Vec<ServerEvent>,
}

impl ServerSink for Out {
    fn transmit(&mut self, conn: ConnId, msg: &IoMsg<'_>) {
        let mut buf = vec![0u8; msg.buffer_len()];
        msg.emit(&mut buf).unwrap();
        self.frames.push((conn, buf));
    }
    fn close(&mut self, conn: ConnId) {
        self.closed.push(conn);
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
}

impl Out {
    fn take(&mut self) -> Vec<(ConnId, Vec<u8>)> {
        core::mem::take(&mut self.frames)
    }
    fn delivered(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ServerEvent::Delivered { sn, .. } => Some(*sn),
                _ => None,
            })
            .collect()
    }
    fn rejected(&self) -> Vec<RejectReason> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ServerEvent::Rejected { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect()
    }
}

fn config() -> ClientConfig {
    let mut c = ClientConfig::new(SESSION);
    c.backoff.jitter_per_mille = 0;
    c.eager = false;
    c
}

fn server(instance: u64) -> Server {
    ServerCore::new(ServerConfig::new(instance))
}

/// Every frame the client wants to send now.
fn client_frames(c: &mut Client, now: Instant) -> Vec<Vec<u8>> {
    let mut scratch = [0u8; 4096];
    let mut out = [0u8; 4096 + HEADER_LEN];
    let mut frames = Vec::new();
    while let Some(len) = c.poll_transmit(now, &mut scratch, &mut out) {
        frames.push(out[..len].to_vec());
    }
    frames
}

fn to_server(s: &mut Server, out: &mut Out, conn: ConnId, frames: &[Vec<u8>], now: Instant) {
    for f in frames {
        s.handle_frame(now, conn, f, out);
    }
}

fn to_client(c: &mut Client, out: &mut Out, conn: ConnId, now: Instant) {
    for (to, f) in out.take() {
        if to == conn {
            c.handle_frame(now, &f);
        }
    }
}

/// Client connects as `conn` and completes the handshake with `s`.
fn connect(c: &mut Client, s: &mut Server, out: &mut Out, conn: ConnId, now: Instant) {
    if c.state() == ClientState::Idle {
        c.start(now);
    } else {
        while !matches!(c.state(), ClientState::Connecting { .. }) {
            let due = c.poll_timeout().expect("a timer while reconnecting");
            c.handle_timeout(due.max(now));
        }
    }
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(now);
    let hello = client_frames(c, now);
    assert_eq!(hello.len(), 1, "exactly one Hello");
    to_server(s, out, conn, &hello, now);
    to_client(c, out, conn, now);
    assert!(
        matches!(c.state(), ClientState::Established { .. }),
        "not established: {:?}",
        c.state()
    );
}

fn submit_writes(c: &mut Client, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| c.submit(RequestOp::Write, 16).unwrap())
        .collect()
}

fn sns(frames: &[Vec<u8>]) -> Vec<u64> {
    frames.iter().map(|f| wire::parse(f).unwrap().sn).collect()
}

fn events(c: &mut Client) -> Vec<ClientEvent> {
    core::iter::from_fn(|| c.poll_event()).collect()
}

// ---- handshake -------------------------------------------------------------

#[test]
fn handshake_new_session_starts_at_base_sn_and_delivers_in_order() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert_eq!(out.delivered(), vec![0, 1, 2]);
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 3, "every WriteComp's cumulative ack releases");
    assert_eq!(c.stats().acked, 3);
    assert_eq!(c.stats().completions, 3);
}

#[test]
fn handshake_known_session_resumes_at_servers_next_expected_sn() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    // 0..3 reach the server; their completions are lost with the connection.
    to_server(&mut s, &mut out, 1, &frames[..3], t(1));
    out.take();
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    connect(&mut c, &mut s, &mut out, 2, t(100));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::Established {
        epoch: 2,
        instance: INSTANCE_A,
        known: true,
        resume_from: 3
    }));
    assert_eq!(
        c.base_sn(),
        3,
        "[base_sn, resume_from) released as acknowledged"
    );
    let replay = client_frames(&mut c, t(100));
    assert_eq!(
        sns(&replay),
        vec![3, 4],
        "replay starts at resume_from, in order"
    );
    to_server(&mut s, &mut out, 2, &replay, t(100));
    assert_eq!(
        out.delivered(),
        vec![0, 1, 2, 3, 4],
        "each sn delivered exactly once"
    );
    assert_eq!(s.stats().duplicates, 0);
}

#[test]
fn handshake_unknown_session_after_restart_replays_from_base_sn_as_possible_duplicates() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    out.take(); // the server dies before its completions leave
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);

    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    connect(&mut c, &mut s2, &mut out2, 1, t(50));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::ServerRestarted {
        previous: Some(INSTANCE_A),
        instance: INSTANCE_B,
        unconfirmed: 0..4
    }));
    assert!(ev.contains(&ClientEvent::Established {
        epoch: 2,
        instance: INSTANCE_B,
        known: false,
        resume_from: 0
    }));
    let replay = client_frames(&mut c, t(50));
    assert_eq!(sns(&replay), vec![0, 1, 2, 3]);
    assert_eq!(c.stats().possible_duplicates, 4);
    assert_eq!(c.stats().replayed, 4);
    to_server(&mut s2, &mut out2, 1, &replay, t(50));
    assert_eq!(out2.delivered(), vec![0, 1, 2, 3]);
}

#[test]
fn client_treats_resume_from_outside_base_and_next_as_protocol_error() {
    let mut c = Client::new(config(), t(0));
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let hello = client_frames(&mut c, t(0));
    assert_eq!(hello.len(), 1);
    // next_sn is 0, so resume_from 7 is beyond it.
    let welcome = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Welcome {
            instance: INSTANCE_A,
            resume_from: 7,
            known: true,
        },
    };
    let mut buf = vec![0u8; welcome.buffer_len()];
    welcome.emit(&mut buf).unwrap();
    c.handle_frame(t(1), &buf);
    assert_eq!(c.stats().protocol_errors, 1);
    let expected = DisconnectCause::Protocol(ProtocolError::BadResume {
        base_sn: 0,
        resume_from: 7,
        next_sn: 0,
    });
    assert!(events(&mut c).contains(&ClientEvent::Disconnected {
        epoch: 1,
        cause: expected
    }));
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
    assert_eq!(c.poll_action(), Some(Action::Close));
}

#[test]
fn server_rejects_hello_whose_range_excludes_its_cumulative_point() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    s.handle_disconnected(1);
    // A Hello claiming only sn 0 was ever sent, though the server has 0 and 1.
    let hello = IoMsg {
        session: SESSION,
        epoch: 2,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Hello {
            base_sn: 0,
            next_sn: 1,
            replay: true,
        },
    };
    let mut buf = vec![0u8; hello.buffer_len()];
    hello.emit(&mut buf).unwrap();
    s.handle_frame(t(2), 2, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::BadHandshake]);
    assert_eq!(out.closed, vec![2]);
    let reject = wire::parse(&out.frames.last().unwrap().1).unwrap();
    assert_eq!(
        reject.body,
        Body::Reject {
            reason: RejectReason::BadHandshake,
            detail: 2
        },
        "the detail names the server's cumulative point"
    );
}

#[test]
fn server_rejects_hello_with_next_sn_beyond_sn_max() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let hello = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Hello {
            base_sn: SN_MAX,
            next_sn: SN_MAX + 1,
            replay: true,
        },
    };
    let mut buf = vec![0u8; hello.buffer_len()];
    hello.emit(&mut buf).unwrap();
    s.handle_frame(t(0), 1, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::BadHandshake]);
    assert_eq!(s.session_count(), 0, "no session was created");
}

// ---- epochs ----------------------------------------------------------------

#[test]
fn frames_of_an_older_epoch_are_discarded_as_stale_and_never_delivered_twice() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let old = client_frames(&mut c, t(1)); // sns 0, 1 in epoch 1, still in flight
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    connect(&mut c, &mut s, &mut out, 2, t(50));
    let replay = client_frames(&mut c, t(50));
    to_server(&mut s, &mut out, 2, &replay, t(50));
    // The old connection's frames arrive late, after the new epoch began.
    to_server(&mut s, &mut out, 1, &old, t(51));
    assert_eq!(out.delivered(), vec![0, 1]);
    assert_eq!(s.stats().stale, 2);
    assert_eq!(
        s.stats().duplicates,
        0,
        "stale frames never reach the tracker"
    );
}

#[test]
fn hello_with_an_epoch_not_newer_than_the_sessions_is_rejected() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let hello = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Hello {
            base_sn: 0,
            next_sn: 0,
            replay: true,
        },
    };
    let mut buf = vec![0u8; hello.buffer_len()];
    hello.emit(&mut buf).unwrap();
    s.handle_frame(t(1), 2, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::StaleEpoch]);
    assert_eq!(
        s.session(SESSION).unwrap().conn,
        Some(1),
        "the live binding is untouched"
    );
}

#[test]
fn client_ignores_server_frames_of_an_older_epoch() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let late_comp = out.take();
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    connect(&mut c, &mut s, &mut out, 2, t(50));
    let acked = c.stats().acked;
    for (_, f) in late_comp {
        c.handle_frame(t(51), &f);
    }
    assert_eq!(c.stats().stale_frames, 1);
    assert_eq!(c.stats().acked, acked);
}

// ---- backlog ---------------------------------------------------------------

#[test]
fn frames_before_the_handshake_wait_in_the_backlog_and_are_processed_after_it() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    // Same frames on a fresh server connection, before any Hello there.
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    to_server(&mut s2, &mut out2, 7, &frames, t(1));
    assert!(
        out2.delivered().is_empty(),
        "nothing delivered before the handshake"
    );
    assert_eq!(s2.stats().backlogged, 3);
    let hello = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Hello {
            base_sn: 0,
            next_sn: 3,
            replay: true,
        },
    };
    let mut buf = vec![0u8; hello.buffer_len()];
    hello.emit(&mut buf).unwrap();
    s2.handle_frame(t(2), 7, &buf, &mut out2);
    assert_eq!(
        out2.delivered(),
        vec![0, 1, 2],
        "processed after the handshake, in order"
    );
    assert!(out2.rejected().is_empty());
}

#[test]
fn eager_frames_follow_the_hello_only_when_nothing_is_unacknowledged() {
    let mut cfg = config();
    cfg.eager = true;
    let (mut c, mut s, mut out) = (Client::new(cfg, t(0)), server(INSTANCE_A), Out::default());
    submit_writes(&mut c, 2);
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let first = client_frames(&mut c, t(0));
    assert_eq!(first.len(), 3, "Hello, then sns 0 and 1 before the Welcome");
    // The data overtakes the Hello on the way (reordering): backlog, then in order.
    to_server(&mut s, &mut out, 1, &first[1..], t(1));
    assert!(out.delivered().is_empty());
    to_server(&mut s, &mut out, 1, &first[..1], t(1));
    assert_eq!(out.delivered(), vec![0, 1]);
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 2);
    // Unacknowledged frames at a reconnect: no early sends, replay first.
    submit_writes(&mut c, 1);
    let lost = client_frames(&mut c, t(2));
    assert_eq!(sns(&lost), vec![2]);
    c.handle_disconnected(t(3), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    submit_writes(&mut c, 1);
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due);
    }
    let _ = c.poll_action();
    c.handle_connected(t(50));
    assert_eq!(client_frames(&mut c, t(50)).len(), 1, "only the Hello");
}

#[test]
fn backlog_overflow_rejects_the_connection_with_a_clear_reason() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    to_server(&mut s2, &mut out2, 7, &frames, t(1)); // backlog holds 4
    assert_eq!(out2.rejected(), vec![RejectReason::BacklogOverflow]);
    assert_eq!(out2.closed, vec![7]);
    assert_eq!(s2.stats().rejects(RejectReason::BacklogOverflow), 1);
    assert_eq!(
        s2.stats().backlog_discarded,
        4,
        "unacknowledged: the client replays them"
    );
    assert_eq!(s2.conn_count(), 0);
}

// ---- acks ------------------------------------------------------------------

#[test]
fn cumulative_ack_releases_the_send_window_and_unblocks_a_full_window() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 8);
    assert_eq!(
        c.submit(RequestOp::Write, 16),
        Err(SubmitError::Full),
        "backpressure"
    );
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..5], t(1));
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 5);
    assert_eq!(c.submit(RequestOp::Write, 16), Ok(8));
}

#[test]
fn streamed_writes_are_acked_every_k_frames() {
    let mut cfg = ServerConfig::new(INSTANCE_A);
    cfg.ack_every = 3;
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        Server::new(cfg),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    for _ in 0..7 {
        c.submit(RequestOp::StreamWrite, 8).unwrap();
    }
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let acks: Vec<u64> = out
        .frames
        .iter()
        .map(|(_, f)| wire::parse(f).unwrap())
        .filter(|m| m.body == Body::Ack)
        .map(|m| m.ack)
        .collect();
    assert_eq!(acks, vec![3, 6], "one Ack per K=3 streamed frames");
    assert_eq!(
        s.poll_timeout(),
        Some(t(1) + s.config().ack_delay),
        "the 7th waits for T"
    );
}

#[test]
fn streamed_writes_below_k_are_acked_after_t() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    c.submit(RequestOp::StreamWrite, 8).unwrap();
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert!(out.frames.is_empty(), "no completion for a streamed write");
    let due = s.poll_timeout().unwrap();
    assert_eq!(due, t(1) + Duration::from_micros(200));
    s.handle_timeout(due, &mut out);
    let ack = wire::parse(&out.frames[0].1).unwrap();
    assert_eq!((ack.body, ack.ack), (Body::Ack, 1));
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn ack_beyond_anything_sent_is_a_protocol_error() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let _ = client_frames(&mut c, t(1));
    let ack = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 5,
        validate: false,
        stream: false,
        body: Body::Ack,
    };
    let mut buf = vec![0u8; ack.buffer_len()];
    ack.emit(&mut buf).unwrap();
    c.handle_frame(t(2), &buf);
    assert_eq!(c.base_sn(), 0, "nothing released");
    let e = DisconnectCause::Protocol(ProtocolError::AckBeyondSent { ack: 5, sent: 1 });
    assert!(events(&mut c).contains(&ClientEvent::Disconnected { epoch: 1, cause: e }));
}

// ---- replay and loss classification ----------------------------------------

#[test]
fn replay_resends_every_unacked_sn_in_ascending_order() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 6);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..2], t(1));
    to_client(&mut c, &mut out, 1, t(1));
    c.handle_disconnected(t(2), DisconnectReason::PeerClosed);
    s.handle_disconnected(1);
    connect(&mut c, &mut s, &mut out, 2, t(60));
    assert_eq!(sns(&client_frames(&mut c, t(60))), vec![2, 3, 4, 5]);
}

#[test]
fn replay_off_gives_up_in_flight_sns_and_both_sides_classify_them() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (Client::new(cfg, t(0)), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..2], t(1)); // 2, 3, 4 die in flight
    out.take();
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    connect(&mut c, &mut s, &mut out, 2, t(60));
    assert!(events(&mut c).contains(&ClientEvent::NotReplayed { range: 2..5 }));
    assert!(out.events.contains(&ServerEvent::LostInFlight {
        session: SESSION,
        range: 2..5
    }));
    assert_eq!(s.stats().lost_in_flight, 3);
    assert_eq!(s.stats().lost_live, 0);
    assert_eq!(c.stats().not_replayed, 3);
    assert!(
        client_frames(&mut c, t(60)).is_empty(),
        "nothing is replayed"
    );
    assert!(c.can_submit());
    assert_eq!(c.submit(RequestOp::Write, 16), Ok(5));
    let next = client_frames(&mut c, t(61));
    to_server(&mut s, &mut out, 2, &next, t(61));
    assert_eq!(out.delivered(), vec![0, 1, 5]);
    assert_eq!(
        s.stats().live_gap_sns,
        0,
        "no live gap: the handshake gave them up"
    );
}

#[test]
fn a_jump_on_a_live_connection_is_reported_at_once_as_live_loss() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 5);
    let frames = client_frames(&mut c, t(1));
    to_server(
        &mut s,
        &mut out,
        1,
        &[frames[0].clone(), frames[3].clone()],
        t(1),
    );
    assert!(out.events.contains(&ServerEvent::LiveLoss {
        session: SESSION,
        epoch: 1,
        missing: 1..3
    }));
    assert_eq!(s.stats().live_gap_sns, 2);
    assert_eq!(s.holes(SESSION).collect::<Vec<Range<u64>>>(), vec![1..3]);
    // The cumulative ack stays at the hole, so the client keeps 1 and 2.
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.base_sn(), 1);
}

#[test]
fn replay_after_reconnect_fills_live_holes_and_counts_them_recovered() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    let frames = client_frames(&mut c, t(1));
    to_server(
        &mut s,
        &mut out,
        1,
        &[frames[0].clone(), frames[2].clone()],
        t(1),
    );
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    connect(&mut c, &mut s, &mut out, 2, t(60));
    let replay = client_frames(&mut c, t(60));
    assert_eq!(sns(&replay), vec![1, 2, 3]);
    to_server(&mut s, &mut out, 2, &replay, t(60));
    assert_eq!(out.delivered(), vec![0, 2, 1, 3]);
    assert_eq!(s.stats().recovered, 1);
    assert_eq!(
        s.stats().duplicates,
        1,
        "sn 2 arrived twice, delivered once"
    );
    assert_eq!(s.session(SESSION).unwrap().missing, 0);
}

#[test]
fn sequence_numbers_near_sn_max_are_refused_not_wrapped() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let hello = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Hello {
            base_sn: SN_MAX - 1,
            next_sn: SN_MAX - 1,
            replay: true,
        },
    };
    let mut buf = vec![0u8; hello.buffer_len()];
    hello.emit(&mut buf).unwrap();
    s.handle_frame(t(0), 1, &buf, &mut out);
    for sn in [SN_MAX - 1, SN_MAX + 1] {
        let data = [0u8; 0];
        let write = IoMsg {
            session: SESSION,
            epoch: 1,
            sn,
            ack: 0,
            validate: false,
            stream: false,
            body: Body::Write { data: &data },
        };
        let mut buf = vec![0u8; write.buffer_len()];
        write.emit(&mut buf).unwrap();
        s.handle_frame(t(1), 1, &buf, &mut out);
    }
    assert_eq!(out.delivered(), vec![SN_MAX - 1]);
    assert_eq!(
        out.rejected(),
        vec![RejectReason::TooFar],
        "SN_MAX + 1 is refused"
    );
}

// ---- bad input -------------------------------------------------------------

#[test]
fn corrupt_frame_is_rejected_with_its_reason_and_the_connection_reset() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let mut frames = client_frames(&mut c, t(1));
    frames[0][30] ^= 0x04; // a bit of the sn: the header CRC no longer matches
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
    assert_eq!(out.closed, vec![1]);
    assert!(matches!(
        s.stats().last_wire_error,
        Some(wire::WireError::HeaderChecksum { .. })
    ));
    assert!(out.delivered().is_empty());
    to_client(&mut c, &mut out, 1, t(1));
    assert!(
        matches!(c.state(), ClientState::Backoff { .. }),
        "{:?}",
        c.state()
    );
    assert_eq!(c.outstanding(), 1, "kept for replay");
}

#[test]
fn payload_that_does_not_match_the_pattern_is_never_delivered() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(1));
    let msg = wire::parse(&frames[0]).unwrap();
    let mut data = [0u8; 16];
    if let Body::Write { data: d } = msg.body {
        data.copy_from_slice(d);
    }
    data[3] ^= 1; // corrupt, then re-emit with valid CRCs
    let bad = IoMsg {
        body: Body::Write { data: &data },
        ..msg
    };
    let mut buf = vec![0u8; bad.buffer_len()];
    bad.emit(&mut buf).unwrap();
    s.handle_frame(t(1), 1, &buf, &mut out);
    assert!(out.delivered().is_empty());
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
}

#[test]
fn client_op_from_the_wrong_direction_is_rejected_as_unexpected() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let ack = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::WriteComp,
    };
    let mut buf = vec![0u8; ack.buffer_len()];
    ack.emit(&mut buf).unwrap();
    s.handle_frame(t(0), 3, &buf, &mut out);
    let reject = wire::parse(&out.frames[0].1).unwrap();
    assert_eq!(
        reject.body,
        Body::Reject {
            reason: RejectReason::Unexpected,
            detail: Op::WriteComp as u64
        }
    );
}

#[test]
fn frame_for_another_session_on_a_bound_connection_is_rejected() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let data = [0u8; 0];
    let write = IoMsg {
        session: SESSION + 1,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Write { data: &data },
    };
    let mut buf = vec![0u8; write.buffer_len()];
    write.emit(&mut buf).unwrap();
    s.handle_frame(t(1), 1, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::SessionMismatch]);
    assert!(out.delivered().is_empty());
}

#[test]
fn a_rejected_connection_does_not_disturb_other_sessions() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    s.handle_frame(t(1), 9, b"garbage that is not a frame", &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(2));
    to_server(&mut s, &mut out, 1, &frames, t(2));
    assert_eq!(out.delivered(), vec![0, 1]);
}

// ---- reads -------------------------------------------------------------------

#[test]
fn read_is_answered_with_pattern_data_that_the_client_verifies() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    c.submit(RequestOp::Read, 100).unwrap();
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let comp = wire::parse(&out.frames[0].1).unwrap();
    assert!(matches!(comp.body, Body::ReadComp { data } if data.len() == 100));
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.stats().completions, 1);
    assert_eq!(c.stats().read_mismatches, 0);
    assert_eq!(c.base_sn(), 1);
}

// ---- session table ---------------------------------------------------------

#[test]
fn full_session_table_evicts_the_oldest_idle_session() {
    let mut s = server(INSTANCE_A);
    let mut out = Out::default();
    for (i, id) in (1..=4u64).enumerate() {
        let mut c = Client::new(ClientConfig::new(id), t(0));
        connect(&mut c, &mut s, &mut out, i as ConnId, t(i as u64));
        s.handle_disconnected(i as ConnId);
    }
    let mut c5 = Client::new(ClientConfig::new(5), t(0));
    connect(&mut c5, &mut s, &mut out, 10, t(10));
    assert!(out.events.contains(&ServerEvent::Evicted { session: 1 }));
    assert_eq!(s.session_count(), 4);
    assert!(s.session(1).is_none());
}

#[test]
fn full_session_table_with_every_session_connected_rejects_the_newcomer() {
    let mut s: ServerCore<4, 8, 4, 3> = ServerCore::new(ServerConfig::new(INSTANCE_A));
    let mut out = Out::default();
    let hello_of = |id: u64| {
        let mut c = Client::new(ClientConfig::new(id), t(0));
        c.start(t(0));
        assert_eq!(c.poll_action(), Some(Action::Connect));
        c.handle_connected(t(0));
        client_frames(&mut c, t(0)).remove(0)
    };
    for id in 1..=4u64 {
        s.handle_frame(t(id), id as ConnId, &hello_of(id), &mut out);
    }
    assert!(out.rejected().is_empty());
    s.handle_frame(t(5), 5, &hello_of(5), &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::SessionTableFull]);
    assert!(s.session(5).is_none());
    assert_eq!(s.session_count(), 4, "no connected session was evicted");
}

// ---- client state machine: timers, retries, limits -------------------------

#[test]
fn connect_timeouts_back_off_exponentially_until_retries_are_exceeded() {
    let mut cfg = config();
    cfg.max_retries = 2;
    let mut c = Client::new(cfg.clone(), t(0));
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
    assert_eq!(
        c.state(),
        ClientState::Failed(FailReason::RetriesExceeded {
            attempts: 3,
            last: DisconnectCause::ConnectTimeout
        })
    );
    assert_eq!(c.stats().connects, 3);
    assert_eq!(c.epoch(), 3, "every attempt has its own epoch");
    assert_eq!(c.submit(RequestOp::Write, 1), Err(SubmitError::Closed));
}

#[test]
fn handshake_without_welcome_times_out_and_closes_the_connection() {
    let mut c = Client::new(config(), t(0));
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
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    assert_eq!(c.poll_timeout(), None, "idle: no liveness timer");
    submit_writes(&mut c, 1);
    let _ = client_frames(&mut c, t(10)); // the server never answers
    let due = c.poll_timeout().unwrap();
    assert_eq!(due, t(10) + c.config().reply_timeout);
    c.handle_timeout(due);
    assert_eq!(c.poll_action(), Some(Action::Close));
    assert!(matches!(c.state(), ClientState::Backoff { .. }));
    assert_eq!(c.outstanding(), 1, "still held for replay");
}

#[test]
fn run_limit_fails_the_client_with_timeout() {
    let mut cfg = config();
    cfg.run_limit = Some(Duration::from_secs(3));
    let (mut c, mut s, mut out) = (Client::new(cfg, t(0)), server(INSTANCE_A), Out::default());
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
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    c.close(t(1));
    assert_eq!(c.submit(RequestOp::Write, 1), Err(SubmitError::Closed));
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
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    submit_writes(&mut c, 2);
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let frames = client_frames(&mut c, t(1));
    assert_eq!(sns(&frames), vec![0, 1]);
    assert_eq!(c.stats().sent, 2);
    assert_eq!(c.stats().replayed, 0);
}

#[test]
fn data_frame_of_a_newer_epoch_than_its_connections_hello_is_rejected() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let data = [0u8; 0];
    let write = IoMsg {
        session: SESSION,
        epoch: 2,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Write { data: &data },
    };
    let mut buf = vec![0u8; write.buffer_len()];
    write.emit(&mut buf).unwrap();
    s.handle_frame(t(1), 1, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::Unexpected]);
    assert!(out.delivered().is_empty());
}

// ---- lost Welcomes (found by the session and loopback_e2e fuzz targets) ----

/// The client's side of a handshake whose Welcome never arrives.
fn handshake_welcome_lost(
    c: &mut Client,
    s: &mut Server,
    out: &mut Out,
    conn: ConnId,
    now: Instant,
) {
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due.max(now));
    }
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(now);
    let hello = client_frames(c, now);
    to_server(s, out, conn, &hello, now);
    out.take(); // the Welcome is lost with the connection
    c.handle_disconnected(now, DisconnectReason::PeerFailed);
    s.handle_disconnected(conn);
}

#[test]
fn a_lost_welcome_after_a_give_up_does_not_turn_given_up_sns_into_acks() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (Client::new(cfg, t(0)), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..1], t(1));
    out.take(); // sn 0 delivered, its completion lost
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    s.handle_disconnected(1);
    // The server gives up 1 and 2 here, but this Welcome is lost.
    handshake_welcome_lost(&mut c, &mut s, &mut out, 2, t(50));
    assert_eq!(s.stats().lost_in_flight, 2);
    connect(&mut c, &mut s, &mut out, 3, t(100));
    assert!(events(&mut c).contains(&ClientEvent::NotReplayed { range: 1..3 }));
    assert_eq!(c.stats().acked, 1, "only sn 0 was delivered");
    assert_eq!(c.stats().not_replayed, 2);
}

#[test]
fn a_lost_first_welcome_of_a_restarted_server_is_still_seen_as_a_restart() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    out.take(); // delivered, unacknowledged, and then the server dies
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    handshake_welcome_lost(&mut c, &mut s2, &mut out2, 1, t(50));
    // Instance B knows the session now (from the lost handshake).
    connect(&mut c, &mut s2, &mut out2, 2, t(100));
    assert!(events(&mut c).contains(&ClientEvent::ServerRestarted {
        previous: Some(INSTANCE_A),
        instance: INSTANCE_B,
        unconfirmed: 0..4
    }));
    assert_eq!(c.stats().possible_duplicates, 4);
    assert_eq!(sns(&client_frames(&mut c, t(100))), vec![0, 1, 2, 3]);
}

#[test]
fn a_lost_welcome_of_a_restarted_server_without_replay_names_the_skipped_sns() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (Client::new(cfg, t(0)), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 2);
    let _lost = client_frames(&mut c, t(1)); // never arrive
    c.handle_disconnected(t(2), DisconnectReason::PeerFailed);
    let (mut s2, mut out2) = (server(INSTANCE_B), Out::default());
    // B starts the session at next_sn = 2, skipping 0 and 1; Welcome lost.
    handshake_welcome_lost(&mut c, &mut s2, &mut out2, 1, t(50));
    connect(&mut c, &mut s2, &mut out2, 2, t(100));
    let ev = events(&mut c);
    assert!(
        ev.contains(&ClientEvent::NotReplayed { range: 0..2 }),
        "{ev:?}"
    );
    assert_eq!(c.stats().acked, 0, "nothing was delivered");
}

#[test]
fn a_welcome_before_this_connections_hello_is_a_protocol_error() {
    let (mut c, mut s, mut out) = (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    );
    connect(&mut c, &mut s, &mut out, 1, t(0));
    c.handle_disconnected(t(1), DisconnectReason::PeerFailed);
    while !matches!(c.state(), ClientState::Connecting { .. }) {
        let due = c.poll_timeout().unwrap();
        c.handle_timeout(due);
    }
    let _ = c.poll_action();
    c.handle_connected(t(50)); // the Hello is not sent yet
    let welcome = IoMsg {
        session: SESSION,
        epoch: c.epoch(),
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Welcome {
            instance: INSTANCE_A,
            resume_from: 0,
            known: true,
        },
    };
    let mut buf = vec![0u8; welcome.buffer_len()];
    welcome.emit(&mut buf).unwrap();
    c.handle_frame(t(50), &buf);
    assert_eq!(c.stats().protocol_errors, 1);
    assert!(!matches!(c.state(), ClientState::Established { .. }));
}
