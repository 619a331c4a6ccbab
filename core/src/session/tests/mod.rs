//! One test per protocol rule of DESIGN.md, driving a `ClientSession` and a
//! `ServerCore` against each other frame by frame, with virtual time. This
//! file holds the harness; each submodule one group of rules.

use core::ops::Range;
use core::time::Duration;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::time::Instant;
use crate::transport::{ConnId, DisconnectReason};
use crate::wire::{self, Body, IoMsg, Op, RejectReason, HEADER_LEN, SN_MAX};

pub(super) type Server = ServerCore<4, 4, 4, 3>; // window of 128 sns, backlog of 4
pub(super) type Client = ClientSession<8>;

pub(super) const SESSION: u64 = 0x5E55_1011;
pub(super) const TOKEN: u64 = 0x70CE_0001;
pub(super) const INSTANCE_A: u64 = 0xA;
pub(super) const INSTANCE_B: u64 = 0xB;

pub(super) fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Collects everything a server emits.
#[derive(Default)]
pub(super) struct Out {
    pub(super) frames: Vec<(ConnId, Vec<u8>)>,
    pub(super) closed: Vec<ConnId>,
    pub(super) events: Vec<ServerEvent>,
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
    pub(super) fn take(&mut self) -> Vec<(ConnId, Vec<u8>)> {
        core::mem::take(&mut self.frames)
    }
    pub(super) fn delivered(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ServerEvent::Delivered { sn, .. } => Some(*sn),
                _ => None,
            })
            .collect()
    }
    /// Reason and detail of the last `Reject` frame sent.
    pub(super) fn last_reject(&self) -> Option<(RejectReason, u64)> {
        self.frames
            .iter()
            .rev()
            .find_map(|(_, f)| match wire::parse(f).ok()?.body {
                Body::Reject { reason, detail } => Some((reason, detail)),
                _ => None,
            })
    }
    pub(super) fn rejected(&self) -> Vec<RejectReason> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ServerEvent::Rejected { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect()
    }
}

pub(super) fn config() -> ClientConfig {
    let mut c = ClientConfig::new(SESSION, TOKEN);
    c.backoff.jitter_per_mille = 0;
    c.eager = false;
    c
}

pub(super) fn server(instance: u64) -> Server {
    ServerCore::new(ServerConfig::new(instance))
}

/// A client (eager sends off), a server of instance A, and its sink.
pub(super) fn setup() -> (Client, Server, Out) {
    (
        Client::new(config(), t(0)),
        server(INSTANCE_A),
        Out::default(),
    )
}

/// A frame of `SESSION`; control bodies are checksummed as the peers send
/// them.
pub(super) fn msg(epoch: u32, sn: u64, ack: u64, body: Body<'_>) -> IoMsg<'_> {
    IoMsg {
        session: SESSION,
        epoch,
        sn,
        ack,
        validate: body.carries_state(),
        stream: false,
        body,
    }
}

/// The bytes of `msg`.
pub(super) fn frame(msg: &IoMsg<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf).unwrap();
    buf
}

/// Every frame the client wants to send now.
pub(super) fn client_frames(c: &mut Client, now: Instant) -> Vec<Vec<u8>> {
    let mut scratch = [0u8; 4096];
    let mut out = [0u8; 4096 + HEADER_LEN];
    let mut frames = Vec::new();
    while let Some(len) = c.poll_transmit(now, &mut scratch, &mut out) {
        frames.push(out[..len].to_vec());
    }
    frames
}

pub(super) fn to_server(
    s: &mut Server,
    out: &mut Out,
    conn: ConnId,
    frames: &[Vec<u8>],
    now: Instant,
) {
    for f in frames {
        s.handle_frame(now, conn, f, out);
    }
}

pub(super) fn to_client(c: &mut Client, out: &mut Out, conn: ConnId, now: Instant) {
    for (to, f) in out.take() {
        if to == conn {
            c.handle_frame(now, &f);
        }
    }
}

/// Every frame the client wants to send now goes to `s` on `conn`, and
/// every answer on `conn` back to the client.
pub(super) fn exchange(c: &mut Client, s: &mut Server, out: &mut Out, conn: ConnId, now: Instant) {
    let frames = client_frames(c, now);
    to_server(s, out, conn, &frames, now);
    to_client(c, out, conn, now);
}

/// Client connects as `conn` and completes the handshake with `s`.
pub(super) fn connect(c: &mut Client, s: &mut Server, out: &mut Out, conn: ConnId, now: Instant) {
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

pub(super) fn submit_writes(c: &mut Client, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| c.submit(RequestOp::Write, 16).unwrap())
        .collect()
}

pub(super) fn sns(frames: &[Vec<u8>]) -> Vec<u64> {
    frames.iter().map(|f| wire::parse(f).unwrap().sn).collect()
}

pub(super) fn events(c: &mut Client) -> Vec<ClientEvent> {
    core::iter::from_fn(|| c.poll_event()).collect()
}

mod acks_replay;
mod bad_input;
mod epochs_backlog;
mod handshake;
mod loss_guarantees;
mod lost_welcome;
mod session_table;
mod timers;
