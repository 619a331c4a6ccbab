//! `iomsg-ucx-peer`: one end of an iomsg session over UCX, for the
//! backend's multi-process tests (the `iomsg` command is the user-facing
//! one).
//!
//! ```text
//! iomsg-ucx-peer server ADDR [--api am|tag] [--shared-memory] [--no-heartbeats] --record FILE|none
//! iomsg-ucx-peer client ADDR --count N [--size BYTES] [--replay on|off] [--api am|tag]
//!     [--recreate-context] [--stream] [--shared-memory] [--no-heartbeats] --record FILE|none
//! iomsg-ucx-peer raw ADDR [--api am|tag]
//! ```
//!
//! `--api` picks the UCX API that carries the frames (`UcxConfig::api`,
//! the library's default when absent); both ends must use the same.
//!
//! `raw` is a broken peer: it sends one malformed frame per connection
//! (see `malformed_frames`) and waits for the server to close each; the
//! server prints `rejected CONN: REASON (detail N)` for each.
//!
//! `--record none` keeps no record (for timing runs).
//!
//! The server prints `listening on ADDR` and appends `session sn hash`
//! to its record for every message its application takes, with one
//! `write(2)` each, before any ack can leave: a SIGKILL loses nothing that
//! was acknowledged; it prints `conns N sessions M` whenever its number of
//! connections changes. The client sends `--count` messages of the io_demo
//! workload, writes `# session ID`, then `sn hash` per submitted message,
//! to its record, and
//! exits once every sn is acknowledged (or given up, replay off: then
//! `# not_replayed START END` lines name them), printing
//! `done submitted=.. acked=.. announced=.. not_replayed=.. restarts=..`.
//! Exit status 0 on success, 1 on failure, 2 on bad arguments.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, FailReason, Message, ReadRequest,
    ServerConfig, ServerEvent, ServerHandler,
};
use iomsg_core::transport::{Client, ClientHandler, Connector, Event, Server, Transport, TxToken};
use iomsg_core::wire::{Body, IoMsg};
use iomsg_core::{workload, Instant};
use iomsg_ucx::{Api, Liveness, UcxConfig, UcxTransport};

const USAGE: &str =
    "usage: iomsg-ucx-peer server ADDR [--api am|tag] [--shared-memory] [--no-heartbeats] --record FILE|none
       iomsg-ucx-peer client ADDR --count N [--size BYTES] [--replay on|off] [--api am|tag]
           [--recreate-context] [--stream] [--shared-memory] [--no-heartbeats] --record FILE|none
       iomsg-ucx-peer raw ADDR [--api am|tag]";

/// A session id or token: 64 bits from the operating system.
fn random_u64() -> u64 {
    iomsg_ucx::random_u64().unwrap_or_else(|e| {
        eprintln!("iomsg-ucx-peer: {e}");
        std::process::exit(2)
    })
}

/// Microseconds since the Unix epoch: a clock both peers share.
fn epoch_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

fn clock(start: Wall) -> Instant {
    Instant::since(start)
}

struct Recorder {
    record: Option<File>,
    error: Option<std::io::Error>,
}

impl ServerHandler for Recorder {
    fn deliver(&mut self, d: Delivery<'_>) {
        // `--record none` (timing runs): nothing to write, nothing to
        // format.
        if self.record.is_none() {
            return;
        }
        let line = format!(
            "{:016x} {} {:016x}\n",
            d.session,
            d.sn,
            workload::hash(d.data)
        );
        // One write per message: in the kernel before the ack is sent.
        if let Some(Err(e)) = self.record.as_mut().map(|r| r.write_all(line.as_bytes())) {
            self.error.get_or_insert(e);
        }
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn event(&mut self, event: ServerEvent) {
        // What a user of the server wants to read in its log.
        match event {
            ServerEvent::Rejected {
                conn,
                reason,
                detail,
            } => println!("rejected {conn}: {reason:?} (detail {detail})"),
            ServerEvent::Disconnected { conn, reason } => {
                println!("disconnected {conn}: {reason:?}")
            }
            ServerEvent::LiveLoss {
                session,
                epoch,
                missing,
            } => println!(
                "live loss: session {session:016x} epoch {epoch} sns {}..{}",
                missing.start, missing.end
            ),
            _ => {}
        }
    }
}

/// Frames a broken peer sends, one connection each: a header of the wrong
/// magic, a truncated frame, an unknown version, a corrupted length, a
/// sound header whose length promises bytes that never come, bytes the
/// header never declared, and data before any `Hello`.
fn malformed_frames() -> Vec<Vec<u8>> {
    let frame = |session: u64, body: Body<'_>| {
        let msg = IoMsg {
            session,
            epoch: 1,
            sn: 0,
            ack: 0,
            validate: true,
            stream: false,
            body,
        };
        let mut f = vec![0; msg.buffer_len()];
        let _ = msg.emit(&mut f);
        f
    };
    let hello = frame(
        99,
        Body::Hello {
            base_sn: 0,
            next_sn: 0,
            token: 1,
            window: 64,
            replay: true,
        },
    );
    let mut bad_magic = hello.clone();
    bad_magic[0] ^= 0xff;
    let mut bad_version = hello.clone();
    bad_version[4] = 9;
    let mut huge_len = hello.clone();
    huge_len[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut lying_len = frame(99, Body::Write { data: &[7; 100] });
    lying_len.truncate(48);
    let mut undeclared = frame(99, Body::Ack);
    undeclared.extend_from_slice(&[0; 16]);
    let before_hello = frame(
        12345,
        Body::Write {
            data: b"no hello first",
        },
    );
    vec![
        bad_magic,
        hello[..20].to_vec(),
        bad_version,
        huge_len,
        lying_len,
        undeclared,
        before_hello,
    ]
}

/// Sends each malformed frame on a connection of its own, waiting for the
/// server to close it; prints how many it sent.
fn raw(addr: SocketAddr, ucx: UcxConfig) -> Result<(), String> {
    let mut t = UcxTransport::client(addr, ucx).map_err(|e| e.to_string())?;
    let start = Wall::now();
    let frames = malformed_frames();
    let mut sent = 0;
    for f in &frames {
        let conn = t.connect(clock(start)).map_err(|e| e.to_string())?;
        let (mut up, mut closed) = (false, false);
        while !closed {
            if start.elapsed() > Duration::from_secs(30) {
                return Err("the server did not close a malformed connection".into());
            }
            while let Some(event) = t.poll(clock(start)) {
                match event {
                    Event::Connected { conn: c } if c == conn => up = true,
                    Event::Disconnected { conn: c, .. } if c == conn => closed = true,
                    _ => {}
                }
            }
            if std::mem::take(&mut up) {
                let token = t
                    .transmit(clock(start), conn, f.len())
                    .map_err(|e| e.to_string())?;
                token.consume(|b| b.copy_from_slice(f));
                sent += 1;
            }
        }
    }
    println!("raw sent {sent} malformed frames");
    Ok(())
}

/// The UCX settings of both ends: `--api` picks the API;
/// `--shared-memory` exchanges worker addresses so that frames may travel
/// over shared memory; `--no-heartbeats` turns the transport's liveness
/// checks off.
fn ucx_config(args: &[String], api: Api) -> UcxConfig {
    UcxConfig::default()
        .api(api)
        .shared_memory(args.iter().any(|a| a == "--shared-memory"))
        .liveness(match args.iter().any(|a| a == "--no-heartbeats") {
            true => None,
            false => Some(Liveness::default()),
        })
}

/// A server's protocol settings: a fresh instance id, the CPU's CRC32C
/// instruction.
fn server_config() -> ServerConfig {
    let mut config = ServerConfig::new(random_u64());
    config.crc = iomsg_ucx::crc32c_provider();
    config
}

fn server(addr: SocketAddr, record: &str, config: UcxConfig) -> Result<(), String> {
    let record = match record {
        "none" => None,
        path => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open {path}: {e}"))?,
        ),
    };
    let transport =
        UcxTransport::server(addr, config).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    println!("listening on {}", transport.local_addr());
    println!("listening since {} us", epoch_us());
    let mut server: Server<_> =
        Server::new(transport, server_config()).map_err(|e| e.to_string())?;
    let mut app = Recorder {
        record,
        error: None,
    };
    let start = Wall::now();
    let mut conns = 0;
    loop {
        server.poll(clock(start), &mut app);
        if let Some(e) = app.error.take() {
            return Err(format!("cannot write the record: {e}"));
        }
        // What the server holds for its clients, as it changes.
        let now = server.core().conn_count();
        if now != conns {
            conns = now;
            println!("conns {conns} sessions {}", server.core().session_count());
        }
    }
}

#[derive(Default)]
struct Seen {
    /// Record lines not yet written: the given-up ranges.
    notes: String,
    acked: u64,
    announced: u64,
    not_replayed: u64,
    restarts: u64,
    /// A connection ended since the last poll.
    disconnected: bool,
    /// A restarted server answered and nothing was acknowledged since.
    restarted: bool,
    failed: Option<FailReason>,
}

impl ClientHandler for Seen {
    fn event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Acked { upto } => {
                self.acked = upto;
                if std::mem::take(&mut self.restarted) {
                    // The first acknowledgement from a restarted server.
                    println!("acked after restart {} us", epoch_us());
                }
            }
            ClientEvent::ServerRestarted { unconfirmed, .. } => {
                self.restarted = true;
                self.restarts += 1;
                self.announced += unconfirmed.end - unconfirmed.start;
            }
            ClientEvent::NotReplayed { range } => {
                self.not_replayed += range.end - range.start;
                self.notes
                    .push_str(&format!("# not_replayed {} {}\n", range.start, range.end));
            }
            ClientEvent::Failed(reason) => self.failed = Some(reason),
            ClientEvent::Disconnected { .. } => self.disconnected = true,
            _ => {}
        }
    }
}

/// What the client is asked to do.
struct Job {
    count: u64,
    size: usize,
    replay: bool,
    /// Tear down the UCX context and worker after every disconnect, as the
    /// field report's clients did; the session lives on above them.
    recreate: bool,
    /// Streamed writes (acknowledged by cadence) instead of one completion
    /// per write.
    stream: bool,
}

fn client(addr: SocketAddr, job: &Job, record: &str, ucx: UcxConfig) -> Result<(), String> {
    let Job {
        count,
        size,
        replay,
        recreate,
        stream,
    } = *job;
    let keep_record = record != "none";
    let mut record: Box<dyn Write> = match record {
        "none" => Box::new(std::io::sink()),
        path => Box::new(File::create(path).map_err(|e| format!("cannot create {path}: {e}"))?),
    };
    let transport = UcxTransport::client(addr, ucx.clone()).map_err(|e| e.to_string())?;
    let session_id = random_u64();
    writeln!(record, "# session {session_id:016x}").map_err(|e| e.to_string())?;
    let mut config = ClientConfig::new(session_id, random_u64());
    // The CPU's CRC32C instruction, chosen once at run time.
    config.crc = iomsg_ucx::crc32c_provider();
    config.replay = replay;
    config.max_retries = 1000;
    config.reply_timeout = Duration::from_secs(1);
    let storage = vec![0u8; 1024 * size.max(8) + size];
    let session = ClientSession::<1024, _>::new(config, Instant::ZERO, storage);
    let mut client = Client::new(transport, session).map_err(|e| e.to_string())?;
    let start = Wall::now();
    client.start(clock(start));
    let mut seen = Seen::default();
    let mut buf = vec![0u8; size];
    let mut lines = String::new();
    let mut rebuilds = 0u64;
    while client.session().base_sn() < count {
        let mut next = client.session().next_sn();
        while next < count {
            // Each message's own bytes when they are recorded (and checked
            // against the server's record); for timing runs one pattern.
            if keep_record || next == 0 {
                workload::fill(session_id, next, &mut buf);
            }
            let msg = if stream {
                Message::StreamWrite(&buf)
            } else {
                Message::Write(&buf)
            };
            let Ok(sn) = client.submit(msg) else {
                break;
            };
            if keep_record {
                lines.push_str(&format!("{sn} {:016x}\n", workload::hash(&buf)));
            }
            next += 1;
        }
        if !lines.is_empty() {
            record
                .write_all(lines.as_bytes())
                .map_err(|e| e.to_string())?;
            lines.clear();
        }
        client.poll(clock(start), &mut seen);
        if recreate && std::mem::take(&mut seen.disconnected) {
            let fresh = UcxTransport::client(addr, ucx.clone()).map_err(|e| e.to_string())?;
            let old = client
                .replace_transport(clock(start), fresh)
                .map_err(|e| e.to_string())?;
            drop(old);
            rebuilds += 1;
        }
        if !seen.notes.is_empty() {
            record
                .write_all(seen.notes.as_bytes())
                .map_err(|e| e.to_string())?;
            seen.notes.clear();
        }
        if let Some(reason) = seen.failed {
            return Err(format!("client failed: {reason}"));
        }
        if start.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "not done after 120 s: base {}",
                client.session().base_sn()
            ));
        }
    }
    let stats = client.session().stats();
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "rate {:.0} msg/s ({count} messages of {size} B acknowledged in {seconds:.3} s)",
        count as f64 / seconds
    );
    println!(
        "done submitted={} acked={} announced={} not_replayed={} restarts={} replayed={} \
         rebuilds={rebuilds}",
        stats.submitted,
        stats.acked,
        seen.announced,
        seen.not_replayed,
        seen.restarts,
        stats.replayed
    );
    Ok(())
}

fn main() -> ExitCode {
    // Before any thread and any UCX context: a restarted server listens on
    // its port again at once, and UCX's event table and the open-file
    // limit fit the connection table.
    let ucx = UcxConfig::default();
    for (name, value) in ucx.environment() {
        if std::env::var_os(name).is_none() {
            std::env::set_var(name, value);
        }
    }
    iomsg_ucx::raise_open_files(ucx.open_files());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(mode), Some(addr)) = (args.first(), args.get(1)) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        eprintln!("iomsg-ucx-peer: bad address {addr:?}\n{USAGE}");
        return ExitCode::from(2);
    };
    let api = match flag("--api").map(|a| a.parse::<Api>()) {
        None => Api::default(),
        Some(Ok(api)) => api,
        Some(Err(e)) => {
            eprintln!("iomsg-ucx-peer: --api: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if mode == "raw" {
        return finish(raw(addr, ucx_config(&args, api)));
    }
    let Some(record) = flag("--record") else {
        eprintln!("iomsg-ucx-peer: --record FILE is required\n{USAGE}");
        return ExitCode::from(2);
    };
    let result = match mode.as_str() {
        "server" => server(addr, &record, ucx_config(&args, api)),
        "client" => {
            let count = flag("--count").and_then(|c| c.parse().ok());
            let size = flag("--size").map_or(Some(64), |s| s.parse().ok());
            let replay = match flag("--replay").as_deref() {
                None | Some("on") => Some(true),
                Some("off") => Some(false),
                _ => None,
            };
            let (Some(count), Some(size), Some(replay)) = (count, size, replay) else {
                eprintln!("iomsg-ucx-peer: bad --count, --size or --replay\n{USAGE}");
                return ExitCode::from(2);
            };
            let job = Job {
                count,
                size,
                replay,
                recreate: args.iter().any(|a| a == "--recreate-context"),
                stream: args.iter().any(|a| a == "--stream"),
            };
            client(addr, &job, &record, ucx_config(&args, api))
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    finish(result)
}

fn finish(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iomsg-ucx-peer: {e}");
            ExitCode::FAILURE
        }
    }
}
