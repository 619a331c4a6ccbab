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
//! [`iodemo_peer`] is a raw client of UCX io_demo's protocol instead, for
//! tests of the [io_demo server](crate::iodemo).
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
use iomsg_ucx_sys as sys;

use crate::sockaddr::SockAddr;
use crate::status::{Pending, Status};
use crate::transport::Api;
use crate::worker::{AmData, ErrArg, WaitMode, Worker, AM_ID};

pub use protocol::Protocol;
use protocol::{batch, reseal, AmBytes, AmOut};

mod am;
mod attacker;
#[doc(hidden)]
pub mod iodemo_peer;
mod peer;
mod protocol;

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

/// Our key as the stream carries it, from an end that uses `api`.
fn key_message(key: u64, api: Api) -> [u8; KEY_EXCHANGE_LEN] {
    let mark = match api {
        Api::Am => crate::transport::AM_MARK,
        Api::Tag => 0,
    };
    (key | mark).to_le_bytes()
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
    // The top byte says the server's API (zero: tag, AM_MARK: active
    // messages); the key is below it.
    let mark = v & !KEY_MASK;
    if v & KEY_MASK == 0 || (mark != 0 && mark != crate::transport::AM_MARK) {
        return KeyAnswer::Refused;
    }
    KeyAnswer::Key(v & KEY_MASK)
}

/// Offsets of the frame header's fields this module corrupts (see
/// `iomsg_core::wire`).
const DATA_LEN_AT: usize = 20;
const PAYLOAD_CRC_AT: usize = 40;
const HEADER_CRC_AT: usize = 44;

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
    /// Active messages on ids the server never registered, 1 to 65,535,
    /// with and without the reply flag.
    AmIds,
    /// Active messages on the server's id with user headers of 0 to 4,000
    /// bytes.
    AmHeaders,
    /// Plausible active messages on the server's id without the reply
    /// flag.
    AmNoReply,
    /// Active messages sent the moment a connection opens, before its key
    /// (or id) exchange, which never comes.
    AmEarly,
    /// Rendezvous active messages of 256 KiB to 4 MiB, many at once over
    /// several connections, on the server's id and others.
    AmRendezvous,
}

impl Mode {
    /// Every mode, in the order reports list them.
    pub const ALL: [Mode; 17] = [
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
        Mode::AmIds,
        Mode::AmHeaders,
        Mode::AmNoReply,
        Mode::AmEarly,
        Mode::AmRendezvous,
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
            Mode::AmIds => "am-ids",
            Mode::AmHeaders => "am-headers",
            Mode::AmNoReply => "am-no-reply",
            Mode::AmEarly => "am-early",
            Mode::AmRendezvous => "am-rendezvous",
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
            Mode::AmIds => {
                "active messages on unregistered ids 1-65535 (UCX 1.13.1 reads past its table)"
            }
            Mode::AmHeaders => "active messages on the server's id with 0 to 4,000-byte headers",
            Mode::AmNoReply => "plausible active messages without the reply flag",
            Mode::AmEarly => "active messages before the key or id exchange, which never comes",
            Mode::AmRendezvous => "rendezvous active messages of 256 KiB-4 MiB, many at once",
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
    /// The UCX API the server uses: the attack speaks it (its key
    /// exchange says so, its messages are tagged or active messages;
    /// the `am-*` modes send active messages whatever it is).
    pub api: Api,
    /// The protocol the server speaks.
    pub protocol: Protocol,
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
            api: Api::default(),
            protocol: Protocol::default(),
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
    api: Api,
    protocol: Protocol,
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
    api: Api,
    protocol: Protocol,
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
        main: Some(Peer::new(attack.api, attack.protocol)?),
        api: attack.api,
        protocol: attack.protocol,
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
        Mode::AmRendezvous,
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
mod tests;
