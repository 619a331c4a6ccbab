//! One test per protocol rule (docs/protocol.md and docs/guarantees.md), driving a `ClientSession` and a
//! `ServerCore` against each other frame by frame, with virtual time. This
//! file holds the harness; each submodule one group of rules.
//!
//! The client's frames come out of `poll_transmit` / `write_transmit` into
//! buffers of exactly the offered length; the server's replies are drained
//! from its queue (`poll_close`, `poll_transmit`, `write_transmit`) into
//! [`Out`], whose [`ServerHandler`] records what the application was given.

use core::ops::Range;
use core::time::Duration;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::conn::{ConnId, DisconnectReason};
use crate::time::Instant;
use crate::wire::{self, Body, IoMsg, Op, RejectReason, SN_MAX};
use crate::workload;

/// Room for 4 sessions and 4 connections, a window of 128 sns, 256
/// tombstones.
pub(super) type Server = ServerCore<4, 4, 3>;
/// Bytes of payload storage of a test client: a full window of the
/// largest test message, and then some.
pub(super) const STORAGE: usize = 4096;
pub(super) type Client = ClientSession<8, [u8; STORAGE]>;

pub(super) const SESSION: u64 = 0x5E55_1011;
pub(super) const TOKEN: u64 = 0x70CE_0001;
pub(super) const INSTANCE_A: u64 = 0xA;
pub(super) const INSTANCE_B: u64 = 0xB;

pub(super) fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// The handle of connection `slot` (generation 0).
pub(super) const fn cid(slot: u32) -> ConnId {
    ConnId::new(slot, 0)
}

/// A message the server handed to its application, with a hash of its
/// bytes (a write's payload, a read's request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Delivered {
    pub(super) session: u64,
    pub(super) epoch: u32,
    pub(super) conn: ConnId,
    pub(super) sn: u64,
    pub(super) op: RequestOp,
    pub(super) hash: u64,
    pub(super) len: usize,
    pub(super) read_len: u32,
}

/// Everything a server emits and hands its application, and the read
/// data the client took.
#[derive(Default)]
pub(super) struct Out {
    pub(super) frames: Vec<(ConnId, Vec<u8>)>,
    pub(super) closed: Vec<ConnId>,
    pub(super) events: Vec<ServerEvent>,
    pub(super) deliveries: Vec<Delivered>,
    /// Reads the application answered: sn and the hash of its answer.
    pub(super) responses: Vec<(u64, u64)>,
    /// Read data the client returned from `handle_frame`: sn and bytes.
    pub(super) reads: Vec<(u64, Vec<u8>)>,
    /// Journal records, in the order the server handed them over.
    pub(super) journal: Vec<Vec<u8>>,
}

impl ServerHandler for Out {
    fn deliver(&mut self, msg: Delivery<'_>) {
        self.deliveries.push(Delivered {
            session: msg.session,
            epoch: msg.epoch,
            conn: msg.conn,
            sn: msg.sn,
            op: msg.op,
            hash: workload::hash(msg.data),
            len: msg.data.len(),
            read_len: msg.read_len,
        });
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            read.len as usize,
            "respond's buffer is the read's length"
        );
        answer(read.session, read.sn, read.request, out);
        self.responses.push((read.sn, workload::hash(out)));
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
    fn journal(&mut self, record: &[u8]) {
        self.journal.push(record.to_vec());
    }
    fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        let id = session.to_le_bytes();
        let r = self
            .journal
            .iter()
            .rev()
            .find(|r| r.get(8..16) == Some(&id[..]))?;
        out.get_mut(..r.len())?.copy_from_slice(r);
        Some(r.len())
    }
}

/// What the test server's application answers a read: the workload
/// pattern of its sn, salted with its request, so the answer depends on
/// both.
pub(super) fn answer(session: u64, sn: u64, request: &[u8], out: &mut [u8]) {
    workload::fill(session ^ workload::hash(request), sn, out);
}

/// The bytes of the answer to a read of `len` bytes.
pub(super) fn answer_bytes(sn: u64, request: &[u8], len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    answer(SESSION, sn, request, &mut v);
    v
}

impl Out {
    pub(super) fn take(&mut self) -> Vec<(ConnId, Vec<u8>)> {
        core::mem::take(&mut self.frames)
    }
    /// The sns handed to the application, in order.
    pub(super) fn delivered(&self) -> Vec<u64> {
        self.deliveries.iter().map(|d| d.sn).collect()
    }
    /// Asserts that every delivery carried the bytes [`payload`] gives its
    /// sn at length `len`: the client's own bytes, replays included.
    pub(super) fn assert_payloads(&self, len: usize) {
        for d in &self.deliveries {
            assert_eq!(
                (d.len, d.hash),
                (len, workload::hash(&payload(d.sn, len))),
                "sn {} delivered with other bytes than submitted",
                d.sn
            );
        }
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

/// A client of `config` with empty storage.
pub(super) fn client(config: ClientConfig) -> Client {
    Client::new(config, t(0), [0; STORAGE])
}

/// A client (eager sends off), a server of instance A, and its handler.
pub(super) fn setup() -> (Client, Server, Out) {
    (client(config()), server(INSTANCE_A), Out::default())
}

/// The bytes the tests write as sn `sn` of `SESSION`: the workload
/// pattern, so that every sn carries its own bytes.
pub(super) fn payload(sn: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    workload::fill(SESSION, sn, &mut v);
    v
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

/// The owner's `Hello` of `epoch` announcing `base_sn..next_sn` (window
/// 128, replay on), as bytes.
pub(super) fn hello_frame(epoch: u32, base_sn: u64, next_sn: u64) -> Vec<u8> {
    let body = Body::Hello {
        base_sn,
        next_sn,
        token: TOKEN,
        window: 128,
        replay: true,
    };
    frame(&msg(epoch, 0, 0, body))
}

/// The bytes of `msg`.
pub(super) fn frame(msg: &IoMsg<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.emit(&mut buf).unwrap();
    buf
}

/// Every frame the client wants to send now, each written into a buffer
/// of exactly the length `poll_transmit` offered.
pub(super) fn client_frames<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>>(
    c: &mut ClientSession<N, S>,
    now: Instant,
) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while let Some(tx) = c.poll_transmit(now) {
        assert_eq!(c.poll_transmit(now), Some(tx), "poll_transmit only peeks");
        let mut buf = vec![0u8; tx.len()];
        assert_eq!(c.write_transmit(now, tx, &mut buf), tx.len());
        frames.push(buf);
        assert!(frames.len() <= 2 * N + 4, "poll_transmit never ends");
    }
    frames
}

/// Every reply and close the server has queued, in order, into `out`.
pub(super) fn drain<const A: usize, const B: usize, const C: usize, const D: usize>(
    s: &mut ServerCore<A, B, C, D>,
    out: &mut Out,
) {
    // As the driver does: the journal is kept before any reply leaves.
    s.drain_journal(|r| out.journal.push(r.to_vec()));
    loop {
        if let Some(conn) = s.poll_close() {
            out.closed.push(conn);
            continue;
        }
        let Some(tx) = s.poll_transmit() else {
            break;
        };
        let mut buf = vec![0u8; tx.len()];
        assert_eq!(s.write_transmit(tx, &mut buf, out), tx.len());
        out.frames.push((tx.conn, buf));
    }
    assert_eq!(s.pending_replies(), 0, "drained");
}

/// One frame to the server on `conn`, and its replies drained.
pub(super) fn serve<const A: usize, const B: usize, const C: usize, const D: usize>(
    s: &mut ServerCore<A, B, C, D>,
    out: &mut Out,
    conn: ConnId,
    frame: &[u8],
    now: Instant,
) {
    s.handle_frame(now, conn, frame, out);
    drain(s, out);
}

pub(super) fn to_server(
    s: &mut Server,
    out: &mut Out,
    conn: u32,
    frames: &[Vec<u8>],
    now: Instant,
) {
    for f in frames {
        serve(s, out, cid(conn), f, now);
    }
}

/// The server's frames on `conn` to the client (the others are dropped);
/// read data it returns goes to `out.reads`.
pub(super) fn to_client(c: &mut Client, out: &mut Out, conn: u32, now: Instant) {
    for (to, f) in out.take() {
        if to == cid(conn) {
            if let Some(read) = c.handle_frame(now, &f) {
                out.reads.push((read.sn, read.data.to_vec()));
            }
        }
    }
}

/// Every frame the client wants to send now goes to `s` on `conn`, and
/// every answer on `conn` back to the client.
pub(super) fn exchange(c: &mut Client, s: &mut Server, out: &mut Out, conn: u32, now: Instant) {
    let frames = client_frames(c, now);
    to_server(s, out, conn, &frames, now);
    to_client(c, out, conn, now);
}

/// Client connects as `conn` and sends its `Hello` to `s` (its replies
/// queued in `out`, not handed to the client).
pub(super) fn send_hello<const A: usize, const B: usize, const C: usize, const D: usize>(
    c: &mut Client,
    s: &mut ServerCore<A, B, C, D>,
    out: &mut Out,
    conn: u32,
    now: Instant,
) {
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
    serve(s, out, cid(conn), &hello[0], now);
}

/// Client connects as `conn` and completes the handshake with `s`.
pub(super) fn connect<const A: usize, const B: usize, const C: usize, const D: usize>(
    c: &mut Client,
    s: &mut ServerCore<A, B, C, D>,
    out: &mut Out,
    conn: u32,
    now: Instant,
) {
    send_hello(c, s, out, conn, now);
    to_client(c, out, conn, now);
    assert!(
        matches!(c.state(), ClientState::Established { .. }),
        "not established: {:?} (the server said {:?})",
        c.state(),
        out.last_reject()
    );
}

/// Submits `n` writes of 16 bytes, each its sn's [`payload`].
pub(super) fn submit_writes(c: &mut Client, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let sn = c.next_sn();
            assert_eq!(c.submit(Message::Write(&payload(sn, 16))), Ok(sn));
            sn
        })
        .collect()
}

pub(super) fn sns(frames: &[Vec<u8>]) -> Vec<u64> {
    frames.iter().map(|f| wire::parse(f).unwrap().sn).collect()
}

pub(super) fn events<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>>(
    c: &mut ClientSession<N, S>,
) -> Vec<ClientEvent> {
    core::iter::from_fn(|| c.poll_event()).collect()
}

/// The `unconfirmed` ranges of the `ServerRestarted` events among
/// `events`: the sns the client announced may arrive twice.
pub(super) fn unconfirmed(events: &[ClientEvent]) -> Vec<Range<u64>> {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::ServerRestarted { unconfirmed, .. } => Some(unconfirmed.clone()),
            _ => None,
        })
        .collect()
}

mod acks_replay;
mod bad_input;
mod epochs_not_bound;
mod handshake;
mod isolation;
mod journal;
mod journal_state;
mod loss_guarantees;
mod lost_welcome;
mod payloads;
mod reads;
mod refusals;
mod session_table;
mod timers;
