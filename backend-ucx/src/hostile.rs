//! A hostile peer: raw UCX traffic aimed at an iomsg server, for tests and
//! `iomsg soak --faults hostile`.
//!
//! [`run`] opens its own UCP contexts and workers (never a
//! [`UcxTransport`](crate::UcxTransport)) and speaks the transport's wire
//! layout directly, wrongly on purpose: tags that name no connection,
//! other connections' keys, frames that lie about their length, messages
//! far past the server's largest frame, messages that stop halfway, bytes
//! on the endpoint's stream after the key exchange, connections that open
//! and close at once or never say `Hello`, more connections than the
//! server's table holds. Each [`Mode`] is one of these; a run interleaves
//! the chosen modes in bursts, in an order drawn from the seed, until its
//! duration is over, and returns a [`Report`] of what it sent and what the
//! server answered.
//!
//! Every wait is bounded in time and every loop in count; the run tears
//! down its endpoints and workers before it returns, and its memory stays
//! near one 64 MiB send buffer (shared by every large message) plus UCX's
//! own.
//!
//! What this module knows of the transport's wire layout (the tag, the key
//! exchange, the message kinds, the batch format) is in the `wire layout`
//! items at the top, so that a change of layout is made in one place.

use core::ffi::c_void;
use core::fmt;
use core::mem;
use core::ptr;
use core::str::FromStr;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iomsg_core::rng::SplitMix64;
use iomsg_core::wire::{self, Body, IoMsg, HEADER_LEN, MAX_FRAME_LEN};
use ucx1_sys as sys;

use crate::sockaddr::SockAddr;
use crate::status::{Pending, Status};
use crate::worker::{self, ErrArg, WaitMode, Worker};

// ---------------------------------------------------------------------
// The wire layout (see the transport module's "Connections and tags").
// ---------------------------------------------------------------------

/// Bytes each end sends on the endpoint's stream to announce its key
/// (the key, little-endian).
const KEY_EXCHANGE_LEN: usize = 8;
/// The tag's low bits are the message kind; the receiver's key sits
/// above them (the transport's own layout, so that the two never drift
/// apart).
const KIND_BITS: u32 = crate::transport::KIND_BITS;
/// The tag's low bits: the message kind.
const KIND_MASK: u64 = (1 << KIND_BITS) - 1;
/// The bits a receiver key may use.
const KEY_MASK: u64 = u64::MAX >> KIND_BITS;
/// Message kinds.
const KIND_FRAME: u64 = crate::transport::KIND_FRAME;
const KIND_HEARTBEAT: u64 = crate::transport::KIND_HEARTBEAT;
const KIND_BATCH: u64 = crate::transport::KIND_BATCH;
/// A key-exchange answer whose top byte is this says "table full" (no
/// key has it).
const FULL_MARK: u64 = crate::transport::FULL_MARK;
/// The largest frame a server with the default configuration takes.
const SERVER_MAX_FRAME: usize = MAX_FRAME_LEN;

/// The tag of a message of `kind` to the receiver whose key is `key`.
fn tag(key: u64, kind: u64) -> u64 {
    ((key & KEY_MASK) << KIND_BITS) | (kind & KIND_MASK)
}

/// The receiver key a tag names.
fn tag_key(tag: u64) -> u64 {
    (tag >> KIND_BITS) & KEY_MASK
}

/// The message kind a tag names.
fn tag_kind(tag: u64) -> u64 {
    tag & KIND_MASK
}

/// Our key as the stream carries it.
fn key_message(key: u64) -> [u8; KEY_EXCHANGE_LEN] {
    key.to_le_bytes()
}

/// What the server's side of the key exchange said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyAnswer {
    /// Its key for this connection: our frames carry it.
    Key(u64),
    /// The server's table is full: it takes no more connections.
    TableFull,
    /// Anything else (a zero key, a short answer): no connection.
    Refused,
}

/// Reads the server's key-exchange bytes (`len` of them arrived).
fn key_answer(bytes: &[u8; KEY_EXCHANGE_LEN], len: usize) -> KeyAnswer {
    if len != KEY_EXCHANGE_LEN {
        return KeyAnswer::Refused;
    }
    let v = u64::from_le_bytes(*bytes);
    if v & FULL_MARK == FULL_MARK {
        return KeyAnswer::TableFull;
    }
    if v == 0 || v & !KEY_MASK != 0 {
        return KeyAnswer::Refused;
    }
    KeyAnswer::Key(v)
}

/// A batch message: each frame after its length (`u32`, little-endian).
fn batch(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Offsets of the frame header's fields this module corrupts (see
/// `iomsg_core::wire`).
const DATA_LEN_AT: usize = 20;
const PAYLOAD_CRC_AT: usize = 40;
const HEADER_CRC_AT: usize = 44;

/// CRC32C (Castagnoli), bit by bit: for headers that are sound except
/// where this module lies on purpose.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Seals a header whose fields were changed: its CRC is right again.
fn reseal(frame: &mut [u8]) {
    if frame.len() >= HEADER_LEN {
        let crc = crc32c(&frame[..HEADER_CRC_AT]);
        frame[HEADER_CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A sound frame of `body` for `session`.
fn frame(session: u64, sn: u64, validate: bool, body: Body<'_>) -> Vec<u8> {
    let msg = IoMsg {
        session,
        epoch: 1,
        sn,
        ack: 0,
        validate,
        stream: false,
        body,
    };
    let mut f = vec![0; msg.buffer_len()];
    let _ = msg.emit(&mut f);
    f
}

fn hello(session: u64) -> Vec<u8> {
    frame(
        session,
        0,
        true,
        Body::Hello {
            base_sn: 0,
            next_sn: 0,
            token: session ^ 0x5a5a,
            window: 64,
            replay: true,
        },
    )
}

// ---------------------------------------------------------------------
// Modes and reports.
// ---------------------------------------------------------------------

/// One kind of hostile traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Messages with random 64-bit tags and random bytes.
    RandomTags,
    /// Frames, heartbeats and batches on random keys that are not ours.
    WrongKeys,
    /// Frames on keys near our own and on small keys (1, 2, 3, …): other
    /// connections' keys when keys are handed out in order.
    GuessKeys,
    /// Frames shorter than their header says, headers with a bad CRC or a
    /// length that lies, batches whose lengths run past their end.
    Truncated,
    /// Messages from 2 MiB to 64 MiB, past the server's largest frame, on
    /// our key and on wrong keys.
    Oversized,
    /// A stream of 1 MiB messages that stops halfway (the worker is no
    /// longer progressed), its connection kept open for seconds.
    StallMidMessage,
    /// As `StallMidMessage`, then the worker is destroyed abruptly.
    DieMidMessage,
    /// Up to 64 MiB of bytes on the endpoint's stream after the key
    /// exchange, the connection kept open.
    StreamGarbage,
    /// A key exchange that is wrong: a zero key, 3 bytes, a key with
    /// garbage after it.
    BadKeyExchange,
    /// Connections closed within 0–20 ms of their start, again and again.
    ConnectClose,
    /// Connections that never say `Hello` (some never finish the key
    /// exchange) but send heartbeats, kept until the run ends.
    SilentConnect,
    /// Many connections at once, past the server's table (`conns`).
    Flood,
}

impl Mode {
    /// Every mode, in the order reports list them.
    pub const ALL: [Mode; 12] = [
        Mode::RandomTags,
        Mode::WrongKeys,
        Mode::GuessKeys,
        Mode::Truncated,
        Mode::Oversized,
        Mode::StallMidMessage,
        Mode::DieMidMessage,
        Mode::StreamGarbage,
        Mode::BadKeyExchange,
        Mode::ConnectClose,
        Mode::SilentConnect,
        Mode::Flood,
    ];

    /// The mode's name on the command line (kebab-case).
    pub const fn name(self) -> &'static str {
        match self {
            Mode::RandomTags => "random-tags",
            Mode::WrongKeys => "wrong-keys",
            Mode::GuessKeys => "guess-keys",
            Mode::Truncated => "truncated",
            Mode::Oversized => "oversized",
            Mode::StallMidMessage => "stall-mid-message",
            Mode::DieMidMessage => "die-mid-message",
            Mode::StreamGarbage => "stream-garbage",
            Mode::BadKeyExchange => "bad-key-exchange",
            Mode::ConnectClose => "connect-close",
            Mode::SilentConnect => "silent-connect",
            Mode::Flood => "flood",
        }
    }

    /// What the mode does, in one line.
    pub const fn help(self) -> &'static str {
        match self {
            Mode::RandomTags => "messages with random tags and random bytes",
            Mode::WrongKeys => "frames, heartbeats and batches on random keys that are not ours",
            Mode::GuessKeys => "frames on keys near ours and on small keys (other connections')",
            Mode::Truncated => {
                "frames shorter than their header says, bad header CRCs, lying lengths, \
                 broken batches"
            }
            Mode::Oversized => "2 MiB to 64 MiB messages on our key and on wrong keys",
            Mode::StallMidMessage => {
                "a large message that stops halfway, the connection kept open for seconds"
            }
            Mode::DieMidMessage => "a large message cut by destroying the endpoint and worker",
            Mode::StreamGarbage => "up to 64 MiB of bytes on the stream after the key exchange",
            Mode::BadKeyExchange => "a zero key, 3 bytes, or a key with garbage after it",
            Mode::ConnectClose => "connections closed 0-20 ms after they start, repeatedly",
            Mode::SilentConnect => {
                "connections that heartbeat but never say Hello, held until the end"
            }
            Mode::Flood => "--conns connections at once, past the server's table",
        }
    }

    /// The modes of a list: `all`, or names separated by commas.
    ///
    /// # Errors
    ///
    /// An unknown name, or an empty list.
    pub fn list(s: &str) -> Result<Vec<Mode>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "all" {
                return Ok(Mode::ALL.to_vec());
            }
            let m: Mode = part.parse()?;
            if !out.contains(&m) {
                out.push(m);
            }
        }
        if out.is_empty() {
            return Err("no hostile mode given".into());
        }
        Ok(out)
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "{s:?} is not a hostile mode (one of: all, {})",
                    names.join(", ")
                )
            })
    }
}

/// What to attack, how, and for how long.
#[derive(Clone, Debug)]
pub struct Attack {
    /// The server's listening address.
    pub server: SocketAddr,
    /// The modes, interleaved in bursts.
    pub modes: Vec<Mode>,
    /// Seed of every choice the run makes (order, sizes, keys, delays).
    pub seed: u64,
    /// How long to attack (the teardown after it takes up to a few
    /// seconds more).
    pub duration: Duration,
    /// Connections `Flood` opens at once; `SilentConnect` holds up to a
    /// sixteenth of it (at least 4).
    pub conns: usize,
}

impl Attack {
    /// Every mode against `server`, seed 1, 10 s, floods of 1,100.
    pub fn new(server: SocketAddr) -> Attack {
        Attack {
            server,
            modes: Mode::ALL.to_vec(),
            seed: 1,
            duration: Duration::from_secs(10),
            conns: 1100,
        }
    }
}

/// The most connections `--conns` may ask for.
pub const MAX_CONNS: usize = 8192;

/// What one mode did and what the server answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModeReport {
    /// Bursts of the mode that ran.
    pub bursts: u64,
    /// Connections opened (endpoints created).
    pub opened: u64,
    /// Connections whose key exchange the server answered with a key.
    pub established: u64,
    /// Connections the server refused in the key exchange or that failed
    /// before it ended.
    pub refused: u64,
    /// Of those, refused because the server's table was full.
    pub table_full: u64,
    /// Tagged messages sent (frames, batches, heartbeats, garbage).
    pub messages: u64,
    /// Bytes sent, tagged and on the stream.
    pub bytes: u64,
    /// Sends that failed (the connection was gone).
    pub send_errors: u64,
    /// Connections the server closed or reset after the key exchange.
    pub closed_by_server: u64,
    /// Frames the server sent back (heartbeats not counted).
    pub frames_back: u64,
    /// Heartbeats the server sent back.
    pub heartbeats_back: u64,
    /// `Reject`s the server sent back, by reason.
    pub rejects: BTreeMap<String, u64>,
}

impl ModeReport {
    /// Adds `o`'s counts to these (several runs in one report).
    pub fn add(&mut self, o: &ModeReport) {
        self.bursts += o.bursts;
        self.opened += o.opened;
        self.established += o.established;
        self.refused += o.refused;
        self.table_full += o.table_full;
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.send_errors += o.send_errors;
        self.closed_by_server += o.closed_by_server;
        self.frames_back += o.frames_back;
        self.heartbeats_back += o.heartbeats_back;
        for (k, v) in &o.rejects {
            *self.rejects.entry(k.clone()).or_default() += v;
        }
    }
}

/// What a run did, per mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The server attacked.
    pub server: SocketAddr,
    /// The seed.
    pub seed: u64,
    /// How long the run took, teardown included.
    pub elapsed: Duration,
    /// Each mode that ran, in [`Mode::ALL`] order.
    pub modes: Vec<(Mode, ModeReport)>,
}

impl Report {
    /// The report of `mode`, if it ran.
    pub fn mode(&self, mode: Mode) -> Option<&ModeReport> {
        self.modes.iter().find(|(m, _)| *m == mode).map(|(_, r)| r)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "hostile peer against {} (seed {}), {:.1} s",
            self.server,
            self.seed,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "  {:<18} {:>6} {:>6} {:>6} {:>6} {:>5} {:>8} {:>10} {:>6} {:>6} {:>6}  rejects",
            "mode",
            "bursts",
            "opened",
            "up",
            "refuse",
            "full",
            "msgs",
            "bytes",
            "senderr",
            "closed",
            "back"
        )?;
        for (m, r) in &self.modes {
            let rejects: Vec<String> = r.rejects.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(
                f,
                "  {:<18} {:>6} {:>6} {:>6} {:>6} {:>5} {:>8} {:>10} {:>6} {:>6} {:>6}  {}",
                m.name(),
                r.bursts,
                r.opened,
                r.established,
                r.refused,
                r.table_full,
                r.messages,
                r.bytes,
                r.send_errors,
                r.closed_by_server,
                r.frames_back,
                if rejects.is_empty() {
                    "-".to_string()
                } else {
                    rejects.join(", ")
                }
            )?;
        }
        Ok(())
    }
}

/// Counts per mode, indexed by [`Mode::index`].
type Tally = Vec<ModeReport>;

// ---------------------------------------------------------------------
// A raw UCX peer: one context and worker, its endpoints and requests.
// ---------------------------------------------------------------------

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EpState {
    /// Key exchange under way.
    Opening,
    /// The server's key came.
    Up,
    /// The exchange failed or was refused, or the server closed it.
    Dead,
    /// Being closed: the slot goes once the close completes.
    Closing,
}

struct Ep {
    h: sys::ucp_ep_h,
    /// The error handler's argument: lives until the close completed.
    _err: Box<ErrArg>,
    mode: Mode,
    state: EpState,
    server_key: u64,
    our_key: u64,
    /// Send heartbeats while up (so that only a handshake deadline may
    /// close it).
    beat: bool,
    last_beat: Instant,
}

/// The memory a request uses, kept until it completed (or the worker is
/// gone).
enum ReqBuf {
    None,
    Own(Vec<u8>),
    Key(Box<[u8; KEY_EXCHANGE_LEN]>),
    /// Within the run's shared large buffer, which outlives every worker.
    Shared,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    KeySend,
    KeyRecv,
    Send,
    Recv,
    Close,
}

struct Req {
    h: *mut c_void,
    ep: usize,
    mode: Mode,
    what: What,
    buf: ReqBuf,
    /// A receive's tag.
    tag: u64,
}

/// One UCP context and worker with its endpoints and requests.
///
/// Teardown: endpoints are closed and requests completed or cancelled in
/// bounded time; then the worker and context are destroyed (field order),
/// and only then the buffers of requests UCX never gave back are freed.
struct Peer {
    worker: Worker,
    eps: Vec<Option<Ep>>,
    reqs: Vec<Req>,
    /// Our keys: their endpoint slot.
    by_key: BTreeMap<u64, usize>,
    /// Endpoints closed by force without progress, then the worker
    /// destroyed (a death).
    abrupt: bool,
    /// Buffers of requests handed back to UCX unfinished: kept until the
    /// worker is destroyed (declared after it).
    orphans: Vec<ReqBuf>,
    torn_down: bool,
}

/// Request parameters without a callback: requests are polled.
fn params(flags: u32) -> sys::ucp_request_param_t {
    // SAFETY: all-zero is a valid request-param value.
    let mut p: sys::ucp_request_param_t = unsafe { mem::zeroed() };
    if flags != 0 {
        p.op_attr_mask = sys::UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = flags;
    }
    p
}

impl Peer {
    fn new() -> Result<Peer, String> {
        let settings = crate::UcxConfig::default().settings;
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let worker = Worker::new(WaitMode::BusyPoll, &settings, 1024)
            .map_err(|s| format!("creating a UCX context and worker: {s}"))?;
        Ok(Peer {
            worker,
            eps: Vec::new(),
            reqs: Vec::new(),
            by_key: BTreeMap::new(),
            abrupt: false,
            orphans: Vec::new(),
            torn_down: false,
        })
    }

    fn ep(&self, i: usize) -> Option<&Ep> {
        self.eps.get(i).and_then(Option::as_ref)
    }

    fn state(&self, i: usize) -> Option<EpState> {
        self.ep(i).map(|e| e.state)
    }

    /// Opens a connection to `server` for `mode`; with `exchange`, starts
    /// the key exchange at once (our key out, theirs in).
    fn connect(
        &mut self,
        server: &SockAddr,
        mode: Mode,
        our_key: u64,
        exchange: bool,
        t: &mut Tally,
    ) -> Option<usize> {
        let slot = self
            .eps
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.eps.push(None);
                self.eps.len() - 1
            });
        let err = Box::new(ErrArg {
            shared: self.worker.shared_ptr(),
            key: slot as _,
        });
        // SAFETY: all-zero is a valid endpoint-params value.
        let mut p: sys::ucp_ep_params_t = unsafe { mem::zeroed() };
        p.field_mask = u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE)
            | u64::from(sys::UCP_EP_PARAM_FIELD_ERR_HANDLER)
            | u64::from(sys::UCP_EP_PARAM_FIELD_FLAGS)
            | u64::from(sys::UCP_EP_PARAM_FIELD_SOCK_ADDR);
        p.err_mode = sys::UCP_ERR_HANDLING_MODE_PEER;
        p.err_handler.cb = Some(worker::on_ep_error);
        p.err_handler.arg = (&*err as *const ErrArg).cast_mut().cast();
        p.flags = sys::UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        p.sockaddr = server.as_ucs();
        let mut h: sys::ucp_ep_h = ptr::null_mut();
        t[mode.index()].opened += 1;
        // SAFETY: the worker is live; the socket address lives in the
        // caller for the call; `err` is boxed in the endpoint's slot and
        // outlives the endpoint (freed once its close completed, or after
        // the worker is destroyed).
        let made = Status(unsafe { sys::ucp_ep_create(self.worker.worker, &p, &mut h) });
        if made.check().is_err() {
            t[mode.index()].refused += 1;
            return None;
        }
        self.eps[slot] = Some(Ep {
            h,
            _err: err,
            mode,
            state: EpState::Opening,
            server_key: 0,
            our_key,
            beat: false,
            last_beat: Instant::now(),
        });
        self.by_key.insert(our_key, slot);
        if exchange {
            self.stream_send_own(slot, key_message(our_key).to_vec(), t);
        }
        self.key_recv(slot, t);
        Some(slot)
    }

    /// Starts receiving the server's key on the stream of `slot`.
    fn key_recv(&mut self, slot: usize, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let mut buf = Box::new([0u8; KEY_EXCHANGE_LEN]);
        let p = params(sys::UCP_STREAM_RECV_FLAG_WAITALL);
        let mut length = 0usize;
        // SAFETY: the endpoint is live; the 8-byte buffer is boxed in the
        // request kept below until it completed or the worker is gone;
        // `length` is written only on immediate completion.
        let ptr = unsafe {
            sys::ucp_stream_recv_nbx(
                h,
                buf.as_mut_ptr().cast(),
                KEY_EXCHANGE_LEN,
                &mut length,
                &p,
            )
        };
        match Pending::from_ptr(ptr) {
            Pending::Request(r) => self.reqs.push(Req {
                h: r,
                ep: slot,
                mode,
                what: What::KeyRecv,
                buf: ReqBuf::Key(buf),
                tag: 0,
            }),
            Pending::Done => self.key_answered(slot, key_answer(&buf, length), t),
            Pending::Failed(_) => self.key_answered(slot, KeyAnswer::Refused, t),
        }
    }

    fn key_answered(&mut self, slot: usize, answer: KeyAnswer, t: &mut Tally) {
        let Some(ep) = self.eps.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if ep.state != EpState::Opening {
            return;
        }
        let r = &mut t[ep.mode.index()];
        match answer {
            KeyAnswer::Key(k) => {
                ep.server_key = k;
                ep.state = EpState::Up;
                r.established += 1;
            }
            KeyAnswer::TableFull => {
                ep.state = EpState::Dead;
                r.refused += 1;
                r.table_full += 1;
            }
            KeyAnswer::Refused => {
                ep.state = EpState::Dead;
                r.refused += 1;
            }
        }
    }

    /// Sends `bytes` on the stream of `slot`.
    fn stream_send_own(&mut self, slot: usize, bytes: Vec<u8>, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let len = bytes.len();
        let p = params(0);
        // SAFETY: the endpoint is live; the bytes move into the request
        // kept below until it completed or the worker is gone.
        let ptr = unsafe { sys::ucp_stream_send_nbx(h, bytes.as_ptr().cast(), len, &p) };
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::KeySend, ReqBuf::Own(bytes), t);
    }

    /// Sends `len` bytes of the shared buffer at `at` on the stream.
    fn stream_send_shared(&mut self, slot: usize, at: *const u8, len: usize, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let p = params(0);
        // SAFETY: the endpoint is live; `at` points to `len` bytes of the
        // run's shared buffer, which outlives every worker (see
        // `Attacker`).
        let ptr = unsafe { sys::ucp_stream_send_nbx(h, at.cast(), len, &p) };
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, ReqBuf::Shared, t);
    }

    /// Sends a tagged message of `bytes` on the endpoint of `slot`.
    fn send_own(&mut self, slot: usize, tag: u64, bytes: Vec<u8>, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let len = bytes.len();
        let p = params(0);
        // SAFETY: the endpoint is live; the bytes move into the request
        // kept below until it completed or the worker is gone (a Vec's
        // heap buffer does not move with it).
        let ptr = unsafe { sys::ucp_tag_send_nbx(h, bytes.as_ptr().cast(), len, tag, &p) };
        t[mode.index()].messages += 1;
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, ReqBuf::Own(bytes), t);
    }

    /// Sends a tagged message of `len` bytes of the shared buffer at `at`.
    /// Returns whether it is still in progress.
    fn send_shared(
        &mut self,
        slot: usize,
        tag: u64,
        at: *const u8,
        len: usize,
        t: &mut Tally,
    ) -> bool {
        let Some(ep) = self.ep(slot) else {
            return false;
        };
        let (h, mode) = (ep.h, ep.mode);
        let p = params(0);
        // SAFETY: the endpoint is live; `at` points to `len` bytes of the
        // run's shared buffer, which outlives every worker.
        let ptr = unsafe { sys::ucp_tag_send_nbx(h, at.cast(), len, tag, &p) };
        t[mode.index()].messages += 1;
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, ReqBuf::Shared, t)
    }

    /// Keeps a request, or counts its immediate result. Returns whether
    /// it is in progress.
    fn track(
        &mut self,
        ptr: sys::ucs_status_ptr_t,
        ep: usize,
        mode: Mode,
        what: What,
        buf: ReqBuf,
        t: &mut Tally,
    ) -> bool {
        match Pending::from_ptr(ptr) {
            Pending::Request(h) => {
                self.reqs.push(Req {
                    h,
                    ep,
                    mode,
                    what,
                    buf,
                    tag: 0,
                });
                true
            }
            Pending::Done => false,
            Pending::Failed(_) => {
                t[mode.index()].send_errors += 1;
                false
            }
        }
    }

    /// Closes the endpoint of `slot` (force): it goes once closed.
    fn close(&mut self, slot: usize) {
        let Some(ep) = self.eps.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if ep.state == EpState::Closing {
            return;
        }
        ep.state = EpState::Closing;
        let (h, mode) = (ep.h, ep.mode);
        let p = params(sys::UCP_EP_CLOSE_FLAG_FORCE);
        // SAFETY: the endpoint is live and closed once (its state is now
        // Closing); FORCE releases it without waiting for the server.
        let ptr = unsafe { sys::ucp_ep_close_nbx(h, &p) };
        match Pending::from_ptr(ptr) {
            Pending::Request(r) => self.reqs.push(Req {
                h: r,
                ep: slot,
                mode,
                what: What::Close,
                buf: ReqBuf::None,
                tag: 0,
            }),
            Pending::Done | Pending::Failed(_) => self.forget(slot),
        }
    }

    /// The endpoint of `slot` is closed: its slot and argument go.
    fn forget(&mut self, slot: usize) {
        if let Some(ep) = self.eps.get_mut(slot).and_then(Option::take) {
            self.by_key.remove(&ep.our_key);
        }
    }

    /// Progresses the worker a few times and handles what completed,
    /// failed or arrived.
    fn progress(&mut self, t: &mut Tally) {
        for _ in 0..4 {
            if !self.worker.progress() {
                break;
            }
        }
        let failed = self.worker.shared.failed.take();
        for (slot, _status) in failed {
            let slot = slot as usize;
            if let Some(ep) = self.eps.get_mut(slot).and_then(Option::as_mut) {
                match ep.state {
                    EpState::Up => t[ep.mode.index()].closed_by_server += 1,
                    EpState::Opening => t[ep.mode.index()].refused += 1,
                    EpState::Dead | EpState::Closing => {}
                }
                if ep.state != EpState::Closing {
                    ep.state = EpState::Dead;
                }
            }
        }
        self.complete(t);
        self.probe(t);
        self.heartbeats(t);
    }

    /// Handles the requests that completed.
    fn complete(&mut self, t: &mut Tally) {
        let mut i = 0;
        while i < self.reqs.len() {
            let h = self.reqs[i].h;
            // SAFETY: h is a live request of this worker, not yet freed.
            let status = Status(unsafe { sys::ucp_request_check_status(h) });
            if status == Status::IN_PROGRESS {
                i += 1;
                continue;
            }
            let mut length = 0usize;
            if self.reqs[i].what == What::KeyRecv {
                // SAFETY: a completed stream receive of this worker, not
                // yet freed; length is a local out-pointer.
                let _ = unsafe { sys::ucp_stream_recv_request_test(h, &mut length) };
            }
            self.worker.free(h);
            let r = self.reqs.swap_remove(i);
            match r.what {
                What::KeySend | What::Send => {
                    if !status.is_ok() {
                        t[r.mode.index()].send_errors += 1;
                    }
                }
                What::KeyRecv => {
                    let answer = match (&r.buf, status.is_ok()) {
                        (ReqBuf::Key(b), true) => key_answer(b, length),
                        _ => KeyAnswer::Refused,
                    };
                    self.key_answered(r.ep, answer, t);
                }
                What::Recv => {
                    if let (ReqBuf::Own(b), true) = (&r.buf, status.is_ok()) {
                        self.answered(r.tag, b, t);
                    }
                }
                What::Close => self.forget(r.ep),
            }
        }
    }

    /// Receives what the server sent us (its answers, heartbeats).
    fn probe(&mut self, t: &mut Tally) {
        for _ in 0..256 {
            // SAFETY: all-zero is a valid info value to fill.
            let mut info: sys::ucp_tag_recv_info_t = unsafe { mem::zeroed() };
            // SAFETY: the worker is live; tag and mask 0 match any tag;
            // remove=1 takes the message for ucp_tag_msg_recv_nbx below.
            let msg = unsafe { sys::ucp_tag_probe_nb(self.worker.worker, 0, 0, 1, &mut info) };
            if msg.is_null() {
                return;
            }
            // A server sends frames of at most its largest frame; more is
            // still received (UCX holds it otherwise), never kept.
            let mut buf = vec![0u8; info.length];
            let p = params(0);
            // SAFETY: msg came from the probe above and is consumed once;
            // buf has `info.length` bytes and moves into the request kept
            // until it completed or the worker is gone.
            let ptr = unsafe {
                sys::ucp_tag_msg_recv_nbx(
                    self.worker.worker,
                    buf.as_mut_ptr().cast(),
                    info.length,
                    msg,
                    &p,
                )
            };
            let ep = self
                .by_key
                .get(&tag_key(info.sender_tag))
                .copied()
                .unwrap_or(usize::MAX);
            let mode = self.ep(ep).map_or(Mode::RandomTags, |e| e.mode);
            match Pending::from_ptr(ptr) {
                Pending::Request(h) => self.reqs.push(Req {
                    h,
                    ep,
                    mode,
                    what: What::Recv,
                    buf: ReqBuf::Own(buf),
                    tag: info.sender_tag,
                }),
                Pending::Done => self.answered(info.sender_tag, &buf, t),
                Pending::Failed(_) => {}
            }
        }
    }

    /// Counts a message the server sent.
    fn answered(&mut self, tag: u64, bytes: &[u8], t: &mut Tally) {
        let Some(mode) = self
            .by_key
            .get(&tag_key(tag))
            .and_then(|&s| self.ep(s))
            .map(|e| e.mode)
        else {
            return;
        };
        let r = &mut t[mode.index()];
        let mut count = |f: &[u8]| {
            r.frames_back += 1;
            if let Ok(IoMsg {
                body: Body::Reject { reason, .. },
                ..
            }) = wire::parse(f)
            {
                *r.rejects.entry(reason.name().to_string()).or_default() += 1;
            }
        };
        match tag_kind(tag) {
            KIND_HEARTBEAT => r.heartbeats_back += 1,
            KIND_BATCH => {
                let mut at = 0usize;
                for _ in 0..4096 {
                    if at + 4 > bytes.len() {
                        break;
                    }
                    let mut n = [0u8; 4];
                    n.copy_from_slice(&bytes[at..at + 4]);
                    let end = (at + 4).saturating_add(u32::from_le_bytes(n) as usize);
                    count(&bytes[at + 4..end.min(bytes.len())]);
                    at = end;
                }
            }
            _ => count(bytes),
        }
    }

    /// Heartbeats on the connections that keep themselves alive.
    fn heartbeats(&mut self, t: &mut Tally) {
        let now = Instant::now();
        let due: Vec<(usize, u64)> = self
            .eps
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
            .filter(|(_, e)| {
                e.beat
                    && e.state == EpState::Up
                    && now.duration_since(e.last_beat) >= Duration::from_millis(200)
            })
            .map(|(i, e)| (i, e.server_key))
            .collect();
        for (slot, key) in due {
            if let Some(ep) = self.eps[slot].as_mut() {
                ep.last_beat = now;
            }
            self.send_own(slot, tag(key, KIND_HEARTBEAT), Vec::new(), t);
        }
    }

    /// Progresses until `done` says so or `until`; returns whether done.
    fn wait_for(
        &mut self,
        until: Instant,
        t: &mut Tally,
        mut done: impl FnMut(&Peer) -> bool,
    ) -> bool {
        for _ in 0..10_000_000u32 {
            self.progress(t);
            if done(self) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
        }
        false
    }

    /// Progresses for `d` (bounded).
    fn spin(&mut self, d: Duration, t: &mut Tally) {
        let until = Instant::now() + d;
        self.wait_for(until, t, |_| false);
    }

    /// Closes every endpoint and lets the requests complete, within
    /// `limit`; what UCX never completes stays for the worker's
    /// destruction (their buffers are freed after it).
    fn teardown(&mut self, limit: Duration, t: &mut Tally) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        let slots: Vec<usize> = (0..self.eps.len()).collect();
        for s in slots {
            self.close(s);
        }
        if !self.abrupt {
            let until = Instant::now() + limit;
            self.wait_for(until, t, |p| p.reqs.is_empty());
            for r in &self.reqs {
                // SAFETY: a live request of this worker; cancelling
                // completes it (UCS_ERR_CANCELED) on a later progress if
                // UCX can.
                unsafe { sys::ucp_request_cancel(self.worker.worker, r.h) };
            }
            let until = Instant::now() + limit / 2;
            self.wait_for(until, t, |p| p.reqs.is_empty());
        }
        // What is left is released by UCX when it completes (at the
        // latest while the worker is destroyed); its memory stays until
        // the worker is gone.
        for r in mem::take(&mut self.reqs) {
            // SAFETY: a live request of this worker, freed once (it leaves
            // `reqs`); UCX releases an unfinished one when it completes,
            // and its buffer stays in `orphans` until the worker is gone.
            unsafe { sys::ucp_request_free(r.h) };
            self.orphans.push(r.buf);
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let mut scratch: Tally = vec![ModeReport::default(); Mode::ALL.len()];
        self.teardown(Duration::from_millis(500), &mut scratch);
        // The worker is destroyed by its own Drop (the first field); then
        // `orphans` and `eps` free the buffers and handler arguments UCX
        // can no longer touch.
    }
}

// ---------------------------------------------------------------------
// The attack.
// ---------------------------------------------------------------------

/// Bytes of the shared buffer large messages are sent from.
const BIG: usize = 64 << 20;
/// Connections a flood opens per worker (each takes two of the worker's
/// asynchronous event slots, 1,024 by default).
const FLOOD_PER_WORKER: usize = 300;
/// Small messages a burst of `RandomTags` or `WrongKeys` sends at most.
const MESSAGES_PER_BURST: usize = 2000;
/// Stalled workers held at once.
const MAX_STALLED: usize = 8;
/// Connections of one stalled (or dying) worker.
const STALL_CONNS: usize = 6;
/// Connections `Oversized` sends on at once.
const OVERSIZED_CONNS: usize = 4;
/// Stream bytes sent per connection at most.
const STREAM_MAX: u64 = 64 << 20;
/// Connections `StreamGarbage` opens in a run at most.
const STREAM_CONNS: usize = 4;

/// A worker left without progress in the middle of a message.
struct Stalled {
    peer: Peer,
    release: Instant,
}

struct Attacker {
    /// Declared before `big`: every worker goes before the buffer their
    /// requests may point into.
    main: Option<Peer>,
    stalled: Vec<Stalled>,
    big: Vec<u8>,
    server: SockAddr,
    addr: SocketAddr,
    rng: SplitMix64,
    tally: Tally,
    conns: usize,
    /// Up connections of the main peer, per mode and number.
    own: BTreeMap<(Mode, usize), usize>,
    /// Connections that keep sending on the stream, and what they sent.
    streams: Vec<(usize, u64)>,
    silent: Vec<usize>,
    /// Silent connections that did not send their key.
    unsent: Vec<usize>,
}

impl Attacker {
    /// A random key (never zero).
    fn key(&mut self) -> u64 {
        (self.rng.next_u64() & KEY_MASK).max(1)
    }

    /// An up connection of the main peer for `mode`: the one it has, or
    /// a new one (waited for until `until`, at most 2 s).
    fn own(&mut self, mode: Mode, until: Instant) -> Option<usize> {
        self.own_nth(mode, 0, until)
    }

    /// As [`own`](Self::own), the `n`th of the mode's connections.
    fn own_nth(&mut self, mode: Mode, n: usize, until: Instant) -> Option<usize> {
        if let Some(&s) = self.own.get(&(mode, n)) {
            if self.main.as_ref().and_then(|p| p.state(s)) == Some(EpState::Up) {
                return Some(s);
            }
            self.own.remove(&(mode, n));
            if let Some(p) = self.main.as_mut() {
                p.close(s);
            }
        }
        let key = self.key();
        let server = SockAddr::from(self.addr());
        let Attacker { main, tally, .. } = self;
        let p = main.as_mut()?;
        let s = p.connect(&server, mode, key, true, tally)?;
        let until = until.min(Instant::now() + Duration::from_secs(2));
        p.wait_for(until, tally, |p| p.state(s) != Some(EpState::Opening));
        if p.state(s) == Some(EpState::Up) {
            // Heartbeats keep it open for the next bursts (a server closes
            // a silent connection).
            if let Some(ep) = p.eps.get_mut(s).and_then(Option::as_mut) {
                ep.beat = true;
            }
            self.own.insert((mode, n), s);
            Some(s)
        } else {
            p.close(s);
            None
        }
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn server_key_of(&self, slot: usize) -> u64 {
        self.main
            .as_ref()
            .and_then(|p| p.ep(slot))
            .map_or(0, |e| e.server_key)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.next_u64() as u8).collect()
    }

    /// Progresses the main peer and releases stalled workers whose time
    /// is up.
    fn service(&mut self) {
        let Attacker { main, tally, .. } = self;
        if let Some(p) = main.as_mut() {
            p.progress(tally);
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.stalled.len() {
            if self.stalled[i].release <= now {
                let mut s = self.stalled.swap_remove(i);
                s.peer.teardown(Duration::from_millis(300), &mut self.tally);
            } else {
                i += 1;
            }
        }
    }

    fn burst(&mut self, mode: Mode, until: Instant) {
        self.tally[mode.index()].bursts += 1;
        match mode {
            Mode::RandomTags => self.random_tags(until),
            Mode::WrongKeys => self.wrong_keys(until),
            Mode::GuessKeys => self.guess_keys(until),
            Mode::Truncated => self.truncated(until),
            Mode::Oversized => self.oversized(until),
            Mode::StallMidMessage => self.stall(until, false),
            Mode::DieMidMessage => self.stall(until, true),
            Mode::StreamGarbage => self.stream_garbage(until),
            Mode::BadKeyExchange => self.bad_key_exchange(until),
            Mode::ConnectClose => self.connect_close(until),
            Mode::SilentConnect => self.silent_connect(until),
            Mode::Flood => self.flood(until),
        }
        // What is left of the burst: the server answers (polled gently:
        // the server and its good clients need the processor more).
        while Instant::now() < until {
            self.service();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn random_tags(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::RandomTags, until) else {
            return;
        };
        for _ in 0..MESSAGES_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let tag = self.rng.next_u64();
            let len = self.rng.below(4096) as usize;
            let bytes = self.bytes(len);
            let Attacker { main, tally, .. } = self;
            if let Some(p) = main.as_mut() {
                p.send_own(s, tag, bytes, tally);
                p.progress(tally);
            }
        }
    }

    /// A frame a server may take for a real one, or garbage.
    fn plausible(&mut self) -> Vec<u8> {
        let session = self.rng.next_u64();
        match self.rng.below(4) {
            0 => hello(session),
            1 => frame(
                session,
                self.rng.below(1000),
                false,
                Body::Write { data: &[0xab; 100] },
            ),
            2 => frame(session, 0, false, Body::Bye),
            _ => {
                let n = 1 + self.rng.below(200) as usize;
                self.bytes(n)
            }
        }
    }

    fn wrong_keys(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::WrongKeys, until) else {
            return;
        };
        let ours = self.server_key_of(s);
        for _ in 0..MESSAGES_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let mut key = self.key();
            if key == ours {
                key ^= 1 << 20;
            }
            let kind = self.rng.below(3);
            let body = match kind {
                KIND_HEARTBEAT => Vec::new(),
                KIND_BATCH => {
                    let (a, b) = (self.plausible(), self.plausible());
                    batch(&[&a, &b])
                }
                _ => self.plausible(),
            };
            let Attacker { main, tally, .. } = self;
            if let Some(p) = main.as_mut() {
                p.send_own(s, tag(key, kind), body, tally);
                p.progress(tally);
            }
        }
    }

    fn guess_keys(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::GuessKeys, until) else {
            return;
        };
        let ours = self.server_key_of(s);
        let mut keys: Vec<u64> = (1..=16u64)
            .flat_map(|d| [ours.wrapping_add(d), ours.wrapping_sub(d)])
            .chain(1..=32)
            .map(|k| k & KEY_MASK)
            .filter(|&k| k != 0 && k != ours)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            if Instant::now() >= until {
                break;
            }
            // Malformed (the victim would be closed for it) or a frame of
            // another session.
            let body = if self.rng.below(2) == 0 {
                let mut f = hello(self.rng.next_u64());
                f[0] ^= 0xff;
                f
            } else {
                self.plausible()
            };
            let Attacker { main, tally, .. } = self;
            if let Some(p) = main.as_mut() {
                p.send_own(s, tag(key, KIND_FRAME), body, tally);
                p.progress(tally);
            }
        }
    }

    /// A frame that lies about itself, and the kind to send it as.
    fn lie(&mut self) -> (u64, Vec<u8>) {
        let session = self.rng.next_u64();
        let write = |n: usize| frame(session, 0, true, Body::Write { data: &vec![7; n] });
        match self.rng.below(8) {
            // Shorter than its header says.
            0 => {
                let mut f = write(1000);
                f.truncate(HEADER_LEN + 10);
                (KIND_FRAME, f)
            }
            // Half a header.
            1 => {
                let f = hello(session);
                (KIND_FRAME, f[..HEADER_LEN / 2].to_vec())
            }
            // A bad header CRC.
            2 => {
                let mut f = hello(session);
                f[HEADER_CRC_AT] ^= 0x55;
                (KIND_FRAME, f)
            }
            // A sealed header whose length is past the message's end.
            3 => {
                let mut f = write(64);
                f[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&(1u32 << 19).to_le_bytes());
                reseal(&mut f);
                (KIND_FRAME, f)
            }
            // A sealed header whose length is past the wire's largest.
            4 => {
                let mut f = write(64);
                f[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&u32::MAX.to_le_bytes());
                reseal(&mut f);
                (KIND_FRAME, f)
            }
            // A bad payload CRC.
            5 => {
                let mut f = hello(session);
                f[PAYLOAD_CRC_AT] ^= 0x55;
                reseal(&mut f);
                (KIND_FRAME, f)
            }
            // A batch whose second length runs past its end.
            6 => {
                let h = hello(session);
                let mut b = batch(&[&h]);
                b.extend_from_slice(&(1u32 << 30).to_le_bytes());
                b.extend_from_slice(&[1, 2, 3]);
                (KIND_BATCH, b)
            }
            // A batch cut inside a length.
            _ => (KIND_BATCH, vec![0xff, 0xff]),
        }
    }

    fn truncated(&mut self, until: Instant) {
        for _ in 0..16 {
            if Instant::now() >= until {
                return;
            }
            let Some(s) = self.own(Mode::Truncated, until) else {
                return;
            };
            let ours = self.server_key_of(s);
            // A few on wrong keys, then one on ours (the server closes
            // us for it: a new connection for the next).
            for _ in 0..4 {
                let (kind, f) = self.lie();
                let key = self.key();
                let Attacker { main, tally, .. } = self;
                if let Some(p) = main.as_mut() {
                    p.send_own(s, tag(key, kind), f, tally);
                }
            }
            let (kind, f) = self.lie();
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            p.send_own(s, tag(ours, kind), f, tally);
            let wait = until.min(Instant::now() + Duration::from_millis(300));
            p.wait_for(wait, tally, |p| p.state(s) != Some(EpState::Up));
        }
    }

    fn big(&mut self) -> *const u8 {
        if self.big.is_empty() {
            // A block of random bytes repeated (cheap to make), then a
            // sound `Write` header of the wire's largest payload first:
            // the first MAX_FRAME_LEN bytes are a plausible frame.
            let block = self.bytes(4096);
            let mut b = vec![0u8; BIG];
            for chunk in b.chunks_mut(block.len()) {
                chunk.copy_from_slice(&block[..chunk.len()]);
            }
            let msg = IoMsg {
                session: self.rng.next_u64(),
                epoch: 1,
                sn: 0,
                ack: 0,
                validate: false,
                stream: false,
                body: Body::Write { data: &[] },
            };
            let _ = msg.emit_with_payload(&mut b, wire::MAX_DATA_LEN as usize, |_| {});
            self.big = b;
        }
        self.big.as_ptr()
    }

    fn oversized(&mut self, until: Instant) {
        let at = self.big();
        // Up to OVERSIZED_CONNS connections at once, one large message in
        // flight on each: a server that sizes its receives by what comes
        // holds them all at once.
        let mut budget: u64 = 1 << 30;
        for round in 0..64 {
            if Instant::now() >= until || budget == 0 {
                return;
            }
            let n = round % OVERSIZED_CONNS;
            let Some(s) = self.own_nth(Mode::Oversized, n, until) else {
                return;
            };
            // 2 MiB to 64 MiB, each power of two about as likely.
            let len = (2usize << 20) << self.rng.below(6);
            let len = len.min(BIG).min(budget as usize);
            budget -= len as u64;
            // Mostly wrong keys (the connection lives on), now and then
            // ours (the server should close it).
            let right = self.rng.below(4) == 0;
            let key = if right {
                self.server_key_of(s)
            } else {
                self.key()
            };
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            p.send_shared(s, tag(key, KIND_FRAME), at, len, tally);
            // At most one message per connection in flight.
            let wait = until.min(Instant::now() + Duration::from_secs(2));
            p.wait_for(wait, tally, |p| {
                p.reqs.iter().filter(|r| r.what == What::Send).count() < OVERSIZED_CONNS
            });
        }
    }

    fn stall(&mut self, until: Instant, die: bool) {
        let per_burst = if die { 8 } else { 4 };
        for _ in 0..per_burst {
            if Instant::now() >= until {
                return;
            }
            self.stall_one(until, die);
        }
    }

    /// One worker left in the middle of a message: held for a while
    /// without progress, or (`die`) destroyed abruptly.
    fn stall_one(&mut self, until: Instant, die: bool) {
        let mode = if die {
            Mode::DieMidMessage
        } else {
            Mode::StallMidMessage
        };
        if self.stalled.len() >= MAX_STALLED {
            let mut s = self.stalled.remove(0);
            s.peer.teardown(Duration::from_millis(300), &mut self.tally);
        }
        let at = self.big();
        let Ok(mut peer) = Peer::new() else {
            return;
        };
        // A few connections of this worker, each left halfway through a
        // message of its own.
        let mut slots = Vec::new();
        for _ in 0..STALL_CONNS {
            let key = self.key();
            if let Some(s) = peer.connect(&self.server, mode, key, true, &mut self.tally) {
                slots.push(s);
            }
        }
        let wait = until.min(Instant::now() + Duration::from_secs(2));
        peer.wait_for(wait, &mut self.tally, |p| {
            slots.iter().all(|&s| p.state(s) != Some(EpState::Opening))
        });
        for &s in &slots {
            if peer.state(s) != Some(EpState::Up) {
                continue;
            }
            let server_key = peer.ep(s).map_or(0, |e| e.server_key);
            // Whole frames of the wire's largest size, each on a key of
            // its own (mostly not ours, so the server does not close us
            // for the first), until one is left halfway (the socket is
            // full): it stays so.
            for _ in 0..64 {
                let right = self.rng.below(4) == 0;
                let k = if right { server_key } else { self.key() };
                if peer.send_shared(s, tag(k, KIND_FRAME), at, SERVER_MAX_FRAME, &mut self.tally) {
                    break;
                }
            }
        }
        if die {
            // A moment for the server to take the first fragments, then
            // the end: no close, no progress.
            std::thread::sleep(Duration::from_millis(5 + self.rng.below(50)));
            peer.abrupt = true;
            drop(peer);
        } else {
            let hold = Duration::from_millis(1000 + self.rng.below(3000));
            self.stalled.push(Stalled {
                peer,
                release: Instant::now() + hold,
            });
        }
    }

    fn stream_garbage(&mut self, until: Instant) {
        let at = self.big();
        // Two connections send at once, each up to STREAM_MAX; full ones
        // stay open, heartbeating; STREAM_CONNS in a run at most.
        let alive =
            |a: &Attacker, s: usize| a.main.as_ref().and_then(|p| p.state(s)) == Some(EpState::Up);
        let mut sending: Vec<usize> = self
            .streams
            .iter()
            .filter(|&&(s, sent)| sent < STREAM_MAX && alive(self, s))
            .map(|&(s, _)| s)
            .collect();
        while sending.len() < 2 && self.streams.len() < STREAM_CONNS {
            let Some(s) = self.own_nth(Mode::StreamGarbage, self.streams.len(), until) else {
                break;
            };
            if let Some(ep) = self
                .main
                .as_mut()
                .and_then(|p| p.eps.get_mut(s))
                .and_then(Option::as_mut)
            {
                ep.beat = true;
            }
            self.streams.push((s, 0));
            sending.push(s);
        }
        let Attacker {
            main,
            tally,
            streams,
            ..
        } = self;
        let Some(p) = main.as_mut() else { return };
        for _ in 0..128 {
            if Instant::now() >= until || sending.is_empty() {
                return;
            }
            for &s in &sending {
                let Some(entry) = streams.iter_mut().find(|e| e.0 == s) else {
                    continue;
                };
                let chunk = 1 << 20;
                p.stream_send_shared(s, at.wrapping_add(HEADER_LEN), chunk, tally);
                entry.1 += chunk as u64;
            }
            // At most 8 MiB in flight per connection.
            let wait = until.min(Instant::now() + Duration::from_secs(1));
            let most = 8 * sending.len();
            p.wait_for(wait, tally, |p| p.reqs.len() < most);
            sending.retain(|&s| {
                p.state(s) == Some(EpState::Up)
                    && streams.iter().any(|e| e.0 == s && e.1 < STREAM_MAX)
            });
        }
    }

    fn bad_key_exchange(&mut self, until: Instant) {
        for _ in 0..8 {
            if Instant::now() >= until {
                return;
            }
            let key = self.key();
            let what: Vec<u8> = match self.rng.below(4) {
                0 => key_message(0).to_vec(),
                1 => vec![1, 2, 3],
                2 => {
                    let mut m = key_message(key).to_vec();
                    m.extend_from_slice(&[0xee; 24]);
                    m
                }
                _ => vec![0xff; KEY_EXCHANGE_LEN],
            };
            let server = SockAddr::from(self.addr());
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            let Some(s) = p.connect(&server, Mode::BadKeyExchange, key, false, tally) else {
                continue;
            };
            p.stream_send_own(s, what, tally);
            let wait = until.min(Instant::now() + Duration::from_millis(300));
            p.wait_for(wait, tally, |p| p.state(s) == Some(EpState::Dead));
            p.close(s);
        }
    }

    fn connect_close(&mut self, until: Instant) {
        for _ in 0..32 {
            if Instant::now() >= until {
                return;
            }
            let key = self.key();
            let exchange = self.rng.below(2) == 0;
            let after = Duration::from_micros(self.rng.below(20_000));
            let server = SockAddr::from(self.addr());
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            let Some(s) = p.connect(&server, Mode::ConnectClose, key, exchange, tally) else {
                continue;
            };
            if !after.is_zero() {
                p.spin(after, tally);
            }
            p.close(s);
            p.progress(tally);
        }
    }

    fn silent_connect(&mut self, until: Instant) {
        let cap = (self.conns / 16).max(4);
        self.silent.retain(|&s| {
            self.main
                .as_ref()
                .and_then(|p| p.state(s))
                .is_some_and(|st| st != EpState::Closing && st != EpState::Dead)
        });
        let server = SockAddr::from(self.addr());
        for _ in 0..cap {
            if self.silent.len() >= cap || Instant::now() >= until {
                break;
            }
            let key = self.key();
            // Half finish the key exchange (and heartbeat), half never
            // send their key.
            let exchange = self.rng.below(2) != 0;
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            if let Some(s) = p.connect(&server, Mode::SilentConnect, key, exchange, tally) {
                if let Some(ep) = p.eps[s].as_mut() {
                    ep.beat = exchange;
                }
                self.silent.push(s);
                if !exchange {
                    self.unsent.push(s);
                }
            }
            p.progress(tally);
        }
        // Those that never sent their key send a frame on the server's
        // (which came): a frame of a connection the server still has
        // opening.
        let Attacker {
            main,
            tally,
            unsent,
            rng,
            ..
        } = self;
        let Some(p) = main.as_mut() else { return };
        let wait = until.min(Instant::now() + Duration::from_millis(500));
        p.wait_for(wait, tally, |p| {
            unsent.iter().all(|&s| p.state(s) != Some(EpState::Opening))
        });
        for s in mem::take(unsent) {
            if p.state(s) == Some(EpState::Up) {
                let key = p.ep(s).map_or(0, |e| e.server_key);
                let f = frame(rng.next_u64(), 0, false, Body::Write { data: &[1; 64] });
                p.send_own(s, tag(key, KIND_FRAME), f, tally);
            }
        }
    }

    fn flood(&mut self, until: Instant) {
        let n = self.conns;
        let workers = n.div_ceil(FLOOD_PER_WORKER);
        let mut peers = Vec::new();
        for _ in 0..workers {
            match Peer::new() {
                Ok(p) => peers.push(p),
                Err(_) => break,
            }
        }
        let mut opened = 0;
        let deadline = until;
        'open: for p in &mut peers {
            for _ in 0..FLOOD_PER_WORKER {
                if opened >= n || Instant::now() >= deadline {
                    break 'open;
                }
                let key = self.rng.next_u64() & KEY_MASK | 1;
                if let Some(s) = p.connect(&self.server, Mode::Flood, key, true, &mut self.tally) {
                    if let Some(ep) = p.eps[s].as_mut() {
                        ep.beat = true;
                    }
                }
                opened += 1;
                if opened % 25 == 0 {
                    p.progress(&mut self.tally);
                }
            }
        }
        // Until every exchange ended (or the deadline), then held for a
        // moment, everyone heartbeating.
        let settle = deadline.min(Instant::now() + Duration::from_secs(5));
        for _ in 0..1_000_000u32 {
            let mut opening = 0;
            for p in &mut peers {
                p.progress(&mut self.tally);
                opening += p
                    .eps
                    .iter()
                    .flatten()
                    .filter(|e| e.state == EpState::Opening)
                    .count();
            }
            self.service();
            if opening == 0 || Instant::now() >= settle {
                break;
            }
        }
        let hold = until.min(Instant::now() + Duration::from_millis(500));
        while Instant::now() < hold {
            for p in &mut peers {
                p.progress(&mut self.tally);
            }
            self.service();
        }
        for mut p in peers {
            p.teardown(Duration::from_secs(1), &mut self.tally);
        }
    }

    /// Ends the run: every worker torn down, the report made.
    fn finish(mut self) -> Vec<ModeReport> {
        for mut s in mem::take(&mut self.stalled) {
            s.peer.teardown(Duration::from_millis(300), &mut self.tally);
        }
        if let Some(mut p) = self.main.take() {
            p.teardown(Duration::from_secs(1), &mut self.tally);
        }
        mem::take(&mut self.tally)
    }
}

/// How long [`run`] tries to complete its first key exchange before it
/// gives up (a server paused past the silence timeout, or restarting, is
/// waited for).
pub const READY_WITHIN: Duration = Duration::from_secs(10);

/// Runs `attack` until its duration is over, then tears everything down.
///
/// # Errors
///
/// The attack could not run at all: a bad attack (no modes, `conns` 0 or
/// past [`MAX_CONNS`]), no UCX context or worker, or a server that never
/// completed a key exchange within 5 s.
pub fn run(attack: &Attack) -> Result<Report, String> {
    if attack.modes.is_empty() {
        return Err("no hostile mode given".into());
    }
    if attack.conns == 0 || attack.conns > MAX_CONNS {
        return Err(format!("--conns must be 1 to {MAX_CONNS}"));
    }
    let mut a = Attacker {
        main: Some(Peer::new()?),
        stalled: Vec::new(),
        big: Vec::new(),
        server: SockAddr::from(attack.server),
        addr: attack.server,
        rng: SplitMix64::new(attack.seed),
        tally: vec![ModeReport::default(); Mode::ALL.len()],
        conns: attack.conns,
        own: BTreeMap::new(),
        streams: Vec::new(),
        silent: Vec::new(),
        unsent: Vec::new(),
    };
    // The shared buffer of large messages, made before the clock runs.
    let large = [
        Mode::Oversized,
        Mode::StallMidMessage,
        Mode::DieMidMessage,
        Mode::StreamGarbage,
    ];
    if attack.modes.iter().any(|m| large.contains(m)) {
        a.big();
    }
    let start = Instant::now();
    let end = start + attack.duration;
    // The server must answer one key exchange: otherwise there is nothing
    // to attack. Attempts go on for a while (a server paused or restarting
    // answers late), each bounded.
    let first = attack.modes[0];
    let ready_by = start + READY_WITHIN;
    let mut reached = false;
    for _ in 0..1000 {
        reached = a.own(first, ready_by).is_some();
        if reached || Instant::now() >= ready_by {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if !reached {
        let _ = a.finish();
        return Err(format!(
            "the server at {} completed no key exchange within {} s",
            attack.server,
            READY_WITHIN.as_secs()
        ));
    }
    let mut order = attack.modes.clone();
    'run: for _ in 0..1_000_000u32 {
        // Each cycle: every mode once, in an order drawn from the seed.
        for i in (1..order.len()).rev() {
            let j = a.rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        for (n, &mode) in order.iter().enumerate() {
            let now = Instant::now();
            if now >= end {
                break 'run;
            }
            let left = end - now;
            let share = left / (order.len() - n) as u32;
            // A flood needs seconds to open its connections and see them
            // answered; the others a few hundred milliseconds.
            let (least, most) = if mode == Mode::Flood {
                (Duration::from_secs(3), Duration::from_secs(5))
            } else {
                (Duration::from_millis(300), Duration::from_millis(1500))
            };
            let budget = share.clamp(least, most).min(left);
            a.burst(mode, now + budget);
        }
    }
    let tally = a.finish();
    Ok(Report {
        server: attack.server,
        seed: attack.seed,
        elapsed: start.elapsed(),
        modes: Mode::ALL
            .iter()
            .filter(|m| attack.modes.contains(m))
            .map(|&m| (m, tally[m.index()].clone()))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_round_trip_and_all_lists_every_mode() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
            assert_eq!(Mode::ALL[m.index()], m);
        }
        assert_eq!(Mode::list("all"), Ok(Mode::ALL.to_vec()));
        assert_eq!(
            Mode::list("flood, truncated,flood"),
            Ok(vec![Mode::Flood, Mode::Truncated])
        );
        assert!(Mode::list("flood,nope").is_err());
        assert!(Mode::list("").is_err());
    }

    #[test]
    fn tags_put_the_key_above_the_kind_as_the_transport_does() {
        let t = tag(0xabcd, KIND_BATCH);
        assert_eq!(tag_key(t), 0xabcd);
        assert_eq!(tag_kind(t), KIND_BATCH);
        assert_eq!(t, crate::transport::tag(0xabcd, KIND_BATCH));
        assert_eq!(KEY_MASK, crate::transport::KEY_MASK);
        assert_eq!(KIND_MASK, crate::transport::KIND_MASK);
    }

    #[test]
    fn the_key_answer_reads_a_key_or_a_refusal() {
        assert_eq!(key_answer(&key_message(7), 8), KeyAnswer::Key(7));
        assert_eq!(key_answer(&key_message(0), 8), KeyAnswer::Refused);
        assert_eq!(key_answer(&key_message(7), 3), KeyAnswer::Refused);
        assert_eq!(
            key_answer(&key_message(FULL_MARK | 1024), 8),
            KeyAnswer::TableFull
        );
    }

    #[test]
    fn a_resealed_header_parses_up_to_the_lie() {
        let mut f = hello(5);
        assert!(wire::parse(&f).is_ok());
        f[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&1000u32.to_le_bytes());
        reseal(&mut f);
        // The CRC is right again: what fails is the length.
        let e = wire::parse(&f).unwrap_err();
        assert!(!format!("{e:?}").contains("Crc"), "{e:?}");
    }
}
