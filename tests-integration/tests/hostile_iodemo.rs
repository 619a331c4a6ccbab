//! The hostile peer's modes against the io_demo server
//! ([`IoDemoServer`], what `iomsg server --io-demo` runs), each while a
//! good io_demo client of the same API keeps operations going: the
//! server (this test binary run again as a server process) must stay up
//! and keep serving, the good client must never be disconnected, every
//! one of its operations must be answered, it must never wait longer than
//! [`MAX_GAP`] for an answer, and the server's resident memory must stay
//! under the bound `iomsg server --io-demo` prints (the program and UCX,
//! [`BASE_RSS`], plus [`IoDemoOptions::memory_bound`]) and grow by at
//! most [`MAX_RSS_GROWTH_KB`].
//!
//! The ground truth is what the good client saw answered (with io_demo's
//! data pattern checked on every answer) and the server process's own
//! life and memory; never the server's counters. UCX over tcp on the
//! loopback device; one test at a time, each bounded in time; only the
//! processes a test started are killed, by pid.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant as Wall};

use iomsg_core::iodemo::Op;
use iomsg_ucx::hostile::{self, Attack, Mode, Protocol};
use iomsg_ucx::iodemo::{IoDemoClient, IoDemoClientEvent, IoDemoOptions, IoDemoServer};
use iomsg_ucx::Api;

mod support;
use support::{tail, Dir, Proc};

/// Set in the server process's environment (any value): it serves.
const SERVER_ENV: &str = "IOMSG_HOSTILE_IODEMO_SERVER";

/// How long each mode attacks; a flood longer, for the server to answer
/// every one of its connections.
const ATTACK: Duration = Duration::from_secs(3);
const FLOOD_ATTACK: Duration = Duration::from_secs(8);
/// The longest the good client may wait for an answer while it has
/// operations in flight.
const MAX_GAP: Duration = Duration::from_millis(1500);
/// What the program and UCX take besides the server's own buffers (as
/// `iomsg server`'s `SERVER_BASE_RSS`).
const BASE_RSS: u64 = 64 << 20;
/// How much the server's resident memory may grow under one mode: the
/// rendezvous writes it serves take their data (up to 4 MiB each, 32 at
/// once), everything else far less.
const MAX_RSS_GROWTH_KB: u64 = 192 * 1024;
/// The good client's operations: writes and reads of this size, this
/// many in flight.
const SIZE: u64 = 4096;
const WINDOW: u32 = 16;

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ENV: std::sync::Once = std::sync::Once::new();
    let guard = support::one_at_a_time();
    ENV.call_once(|| {
        std::env::set_var("UCX_NET_DEVICES", "lo");
        std::env::set_var("UCX_TLS", "tcp");
    });
    guard
}

/// Not a test: the server process the tests start (this binary run
/// again with [`SERVER_ENV`] set). Serves until killed.
#[test]
fn server_process() {
    if std::env::var_os(SERVER_ENV).is_none() {
        return;
    }
    let addr = "127.0.0.1:0".parse().unwrap();
    let mut server = IoDemoServer::bind(addr, IoDemoOptions::default()).unwrap();
    println!("listening on {}", server.local_addr());
    loop {
        server.wait(Duration::from_millis(20));
        while server.next_event().is_some() {}
    }
}

fn start_server(dir: &Dir) -> (Proc, SocketAddr) {
    let env = [(SERVER_ENV, "1")];
    support::start_self("server_process", &env, &dir.file("server.out"))
}

/// A good io_demo client: keeps [`WINDOW`] operations in flight, writes
/// and reads in turn, and notes what it sees.
struct Good {
    client: IoDemoClient,
    next_sn: u32,
    answered: u64,
    corrupt: u64,
    closed: Option<String>,
    last_answer: Wall,
    longest_gap: Duration,
}

impl Good {
    fn connect(addr: SocketAddr, api: Api) -> Result<Good, String> {
        let tag = api == Api::Tag;
        let client =
            IoDemoClient::connect(addr, tag, 256, u64::MAX, true).map_err(|e| e.to_string())?;
        Ok(Good {
            client,
            next_sn: 0,
            answered: 0,
            corrupt: 0,
            closed: None,
            last_answer: Wall::now(),
            longest_gap: Duration::ZERO,
        })
    }

    /// One round: submits up to the window, polls, takes the events.
    fn step(&mut self, submit: bool) {
        if submit && self.client.ready() {
            while (self.client.in_flight() as u32) < WINDOW {
                let op = if self.next_sn % 2 == 0 {
                    Op::Write
                } else {
                    Op::Read
                };
                self.client.submit(op, self.next_sn, SIZE);
                self.next_sn = self.next_sn.wrapping_add(1);
            }
        }
        self.client.wait(Duration::from_millis(1));
        let now = Wall::now();
        for e in self.client.events() {
            match e {
                IoDemoClientEvent::Connected => self.last_answer = now,
                IoDemoClientEvent::Done { corrupt, .. } => {
                    self.answered += 1;
                    if corrupt.is_some() {
                        self.corrupt += 1;
                    }
                    self.last_answer = now;
                }
                IoDemoClientEvent::Closed { reason, in_flight } => {
                    self.closed = Some(format!("{reason} ({} in flight)", in_flight.len()));
                }
            }
        }
        if self.client.in_flight() == 0 {
            self.last_answer = now;
        }
        self.longest_gap = self.longest_gap.max(now - self.last_answer);
    }
}

/// A new client's 20 operations, answered within 5 s.
fn fresh_client(addr: SocketAddr, api: Api) -> Result<Duration, String> {
    let mut g = Good::connect(addr, api)?;
    let start = Wall::now();
    while g.answered < 20 {
        if start.elapsed() > Duration::from_secs(5) {
            return Err(format!(
                "a new client had {} of 20 operations answered after 5 s",
                g.answered
            ));
        }
        if let Some(c) = &g.closed {
            return Err(format!("a new client was closed: {c}"));
        }
        g.step(g.next_sn < 20);
    }
    Ok(start.elapsed())
}

/// What one attack showed.
#[derive(Debug)]
struct Outcome {
    server_ended: Option<String>,
    fresh: Result<Duration, String>,
    answered: u64,
    corrupt: u64,
    closed: Option<String>,
    drained: bool,
    longest_gap: Duration,
    rss_before_kb: u64,
    rss_peak_kb: u64,
    attack: Result<String, String>,
    server_log: String,
}

/// Runs `modes` for `duration` against a fresh server while a good client
/// of `api` keeps operations going.
fn run(name: &str, modes: Vec<Mode>, duration: Duration, api: Api) -> Outcome {
    let _one = one_at_a_time();
    let dir = Dir::new(&format!("iodemo-{name}-{api}"));
    let (mut server, addr) = start_server(&dir);
    let mut good = Good::connect(addr, api).unwrap();
    let start = Wall::now();
    while good.answered < 200 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the good client never got going ({:?}): {}",
            good.closed,
            tail(&dir.file("server.out"), 20)
        );
        good.step(true);
    }
    good.longest_gap = Duration::ZERO;
    let rss_before_kb = server.rss_kib().unwrap_or(0);
    let mut rss_peak_kb = rss_before_kb;
    let attack = Attack {
        modes,
        seed: 11,
        duration,
        conns: 1100,
        api,
        protocol: Protocol::IoDemo,
        ..Attack::new(addr)
    };
    let hostile = std::thread::spawn(move || hostile::run(&attack).map(|r| r.to_string()));
    let mut server_ended = None;
    let mut last_rss = Wall::now();
    let mut drain_from: Option<Wall> = None;
    let mut drained = false;
    let limit = duration + Duration::from_secs(40);
    while start.elapsed() < limit {
        good.step(drain_from.is_none());
        let now = Wall::now();
        if now - last_rss >= Duration::from_millis(50) {
            last_rss = now;
            rss_peak_kb = rss_peak_kb.max(server.rss_kib().unwrap_or(0));
            if let Some(e) = server.ended() {
                server_ended = Some(e);
                break;
            }
        }
        if good.closed.is_some() {
            break;
        }
        if drain_from.is_none() && hostile.is_finished() {
            drain_from = Some(now);
        }
        if let Some(d) = drain_from {
            if good.client.in_flight() == 0 {
                drained = true;
                break;
            }
            if now - d > Duration::from_secs(10) {
                break;
            }
        }
    }
    let waited = Wall::now();
    while !hostile.is_finished() && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let attack = if hostile.is_finished() {
        hostile
            .join()
            .unwrap_or_else(|_| Err("the hostile peer panicked".into()))
    } else {
        Err("the hostile peer did not end".into())
    };
    let fresh = if server_ended.is_none() {
        fresh_client(addr, api)
    } else {
        Err("no server".into())
    };
    if server_ended.is_none() {
        server_ended = server.ended();
    }
    Outcome {
        server_ended,
        fresh,
        answered: good.answered,
        corrupt: good.corrupt,
        closed: good.closed,
        drained,
        longest_gap: good.longest_gap,
        rss_before_kb,
        rss_peak_kb,
        attack,
        server_log: tail(&dir.file("server.out"), 45),
    }
}

/// Every verdict at once, so that a failure names all its symptoms.
fn check(name: &str, modes: Vec<Mode>, duration: Duration, api: Api) {
    let oversized = modes.contains(&Mode::Oversized);
    let o = run(name, modes, duration, api);
    let report = match &o.attack {
        Ok(r) => r.clone(),
        Err(e) => format!("hostile run failed: {e}"),
    };
    let bound_kb = (BASE_RSS + IoDemoOptions::default().memory_bound()) >> 10;
    eprintln!(
        "{name} ({api}, io_demo): server {}, answered {}, drained {}, longest gap {:?}, \
         RSS {} -> {} kB (bound {bound_kb} kB), new client {:?}\n{report}",
        o.server_ended.as_deref().unwrap_or("alive"),
        o.answered,
        o.drained,
        o.longest_gap,
        o.rss_before_kb,
        o.rss_peak_kb,
        o.fresh
    );
    let mut wrong = Vec::new();
    if let Some(e) = &o.server_ended {
        wrong.push(format!("the server died: {e}"));
    } else if let Err(e) = &o.fresh {
        wrong.push(format!("the server no longer serves: {e}"));
    }
    if let Err(e) = &o.attack {
        wrong.push(format!("the attack did not run: {e}"));
    }
    if let Some(c) = &o.closed {
        wrong.push(format!("the good client was disconnected: {c}"));
    } else if !o.drained {
        wrong.push("the good client's operations were not all answered within 10 s".into());
    }
    if o.corrupt > 0 {
        wrong.push(format!(
            "{} answers had data not in io_demo's pattern",
            o.corrupt
        ));
    }
    if o.longest_gap > MAX_GAP {
        wrong.push(format!(
            "the good client waited {:?} for an answer (bound {MAX_GAP:?})",
            o.longest_gap
        ));
    }
    if o.rss_peak_kb > bound_kb {
        wrong.push(format!(
            "the server's RSS reached {} kB, past its bound of {bound_kb} kB",
            o.rss_peak_kb
        ));
    }
    let growth = o.rss_peak_kb.saturating_sub(o.rss_before_kb);
    // UCX 1.13.1 assembles a multi-fragment active message whole before the
    // server sees it: oversized ones cost their size until refused (the
    // docs/guarantees.md's stated limit of active messages); the printed bound holds.
    let assembled = api == Api::Am && oversized;
    if !assembled && growth > MAX_RSS_GROWTH_KB {
        wrong.push(format!(
            "the server's RSS grew by {growth} kB (bound {MAX_RSS_GROWTH_KB} kB)"
        ));
    }
    assert!(
        wrong.is_empty(),
        "{name} ({api}, io_demo):\n  {}\nserver log:\n{}\n{report}",
        wrong.join("\n  "),
        o.server_log
    );
}

/// `survives!(name, mode)`: the attack of `mode` against an io_demo
/// server with a good client of each API, as `name::tag` and `name::am`.
macro_rules! survives {
    ($name:ident, $mode:expr) => {
        mod $name {
            use super::*;
            fn attack() -> Duration {
                if $mode == Mode::Flood {
                    FLOOD_ATTACK
                } else {
                    ATTACK
                }
            }
            #[test]
            fn tag() {
                check(stringify!($name), vec![$mode], attack(), Api::Tag);
            }
            #[test]
            fn am() {
                check(stringify!($name), vec![$mode], attack(), Api::Am);
            }
        }
    };
}

survives!(random_tags, Mode::RandomTags);
survives!(wrong_keys, Mode::WrongKeys);
survives!(guess_keys, Mode::GuessKeys);
survives!(truncated, Mode::Truncated);
survives!(oversized, Mode::Oversized);
survives!(stall_mid_message, Mode::StallMidMessage);
survives!(die_mid_message, Mode::DieMidMessage);
survives!(stream_garbage, Mode::StreamGarbage);
survives!(bad_key_exchange, Mode::BadKeyExchange);
survives!(connect_close, Mode::ConnectClose);
survives!(silent_connect, Mode::SilentConnect);
survives!(flood, Mode::Flood);
survives!(am_ids, Mode::AmIds);
survives!(am_headers, Mode::AmHeaders);
survives!(am_no_reply, Mode::AmNoReply);
survives!(am_early, Mode::AmEarly);
survives!(am_rendezvous, Mode::AmRendezvous);

#[test]
fn every_mode_at_once_against_a_tag_client() {
    check(
        "all",
        Mode::ALL.to_vec(),
        support::every_mode_for(),
        Api::Tag,
    );
}
