//! iomsg over plain TCP: a backend the core has never seen.
//!
//! ```text
//! cargo run -p iomsg-core --example tcp -- server 127.0.0.1:PORT [--record FILE]
//! cargo run -p iomsg-core --example tcp -- client 127.0.0.1:PORT --count N
//!     [--size BYTES] [--record FILE]
//! ```
//!
//! [`TcpTransport`] (in `transport.rs`) is the whole backend: non-blocking `std::net` sockets, a
//! receive buffer per connection cut into frames with
//! [`frame_len`](iomsg_core::wire::frame_len), a send buffer per connection
//! that the lent [`TxToken`] appends to. The `Client` and `Server` drivers
//! of `iomsg-core` add sessions, acks and replay on top. Sockets are written
//! only by `TcpTransport::flush`, which the server's loop calls after its
//! record is flushed: no ack leaves before what it acknowledges is on record.
//!
//! The server prints every delivered message and, with `--record FILE`,
//! appends `session sn hash` lines to FILE. The client sends `--count`
//! messages of `--size` bytes, writes `sn hash` lines to its own record
//! (after a `# session ID` line), keeps going across server restarts (it
//! reconnects and replays), closes once everything is acknowledged and
//! prints a summary. `ci/tcp-example` kills the server mid-run and compares
//! the records.
//!
//! Exit status: 0 on success, 1 on failure, 2 on bad arguments.

mod transport;

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::io::{self, BufWriter, Stdout, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::ExitCode;
use std::time::{Duration, Instant as WallClock, SystemTime};

use iomsg_core::session::{
    Backoff, ClientConfig, ClientEvent, ClientSession, ClientState, Delivery, Message, ReadRequest,
    ServerConfig, ServerEvent, ServerHandler, SubmitError,
};
use iomsg_core::transport::{Client, ClientHandler, Server};
use iomsg_core::Instant;

use transport::{Accept, Dial, TcpTransport};

const USAGE: &str = "usage: tcp server ADDR [--record FILE]
       tcp client ADDR --count N [--size BYTES] [--record FILE]

  server ADDR     listen on ADDR (127.0.0.1:0 picks a free port; the
                  'listening on' line names it)
  client ADDR     connect to the server at ADDR
  --count N       messages the client sends
  --size BYTES    bytes per message (default 100)
  --record FILE   server: append 'session sn hash' per delivered message;
                  client: write '# session ID', then 'sn hash' per
                  submitted message";

/// The longest nap of an idle loop: sockets are polled, not waited on.
const IDLE: Duration = Duration::from_micros(200);
/// The client's send window (the server agrees to at most its own).
const WINDOW: usize = 4096;
/// The client's payload storage: bytes of unacknowledged messages.
const STORAGE: usize = 4 << 20;

// ---------------------------------------------------------------------------
// What both ends share.

/// Microseconds since the process started, as the core's `Instant`.
struct Clock(WallClock);

impl Clock {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

/// FNV-1a: the hash both records carry, computed on each side on its own.
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A random u64 from std's per-process hash keys, the time and the pid.
fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    let since_epoch = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    h.write_u128(since_epoch.as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

/// Message `i` of `session`: its text line, then a fill that depends on
/// both, to exactly `size` bytes.
fn message(session: u64, i: u64, size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    let _ = writeln!(buf, "message {i} of session {session:016x}");
    buf.truncate(size);
    let mut x = (session ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    while buf.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf.push(b'a' + (x % 26) as u8);
    }
}

fn open_record(path: &str, append: bool) -> Result<BufWriter<File>, String> {
    let file = if append {
        OpenOptions::new().create(true).append(true).open(path)
    } else {
        File::create(path)
    };
    file.map(BufWriter::new)
        .map_err(|e| format!("cannot open record file {path}: {e}; check the directory exists"))
}

// ---------------------------------------------------------------------------
// The server.

/// The server's application: prints and records every message.
struct Recorder {
    out: BufWriter<Stdout>,
    record: Option<BufWriter<File>>,
    /// The first failed record write: the server stops before acking.
    error: Option<io::Error>,
}

impl ServerHandler for Recorder {
    fn deliver(&mut self, d: Delivery<'_>) {
        let h = hash(d.data);
        let _ = writeln!(
            self.out,
            "delivered session {:016x} sn {} len {} hash {h:016x}",
            d.session,
            d.sn,
            d.data.len()
        );
        if let Some(record) = &mut self.record {
            if let Err(e) = writeln!(record, "{:016x} {} {h:016x}", d.session, d.sn) {
                self.error.get_or_insert(e);
            }
        }
    }

    fn respond(&mut self, _read: ReadRequest<'_>, out: &mut [u8]) {
        // This client never reads.
        out.fill(0);
    }

    fn event(&mut self, event: ServerEvent) {
        let _ = match event {
            ServerEvent::SessionOpened {
                session,
                epoch,
                known,
                resume_from,
                ..
            } => writeln!(
                self.out,
                "session {session:016x} epoch {epoch} opened ({}), resuming from sn {resume_from}",
                if known { "known" } else { "new" }
            ),
            ServerEvent::Closed { session } => {
                writeln!(self.out, "session {session:016x} closed by its client")
            }
            other => writeln!(self.out, "event {other:?}"),
        };
    }
}

impl Recorder {
    /// Puts this batch on record; must succeed before any ack goes out.
    fn flush(&mut self) -> io::Result<()> {
        let _ = self.out.flush();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match &mut self.record {
            Some(record) => record.flush(),
            None => Ok(()),
        }
    }
}

fn run_server(addr: SocketAddr, record: Option<String>) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| format!("cannot listen on {addr}: {e}; pick another port or wait"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot make the listener non-blocking: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let record = record
        .as_deref()
        .map(|p| open_record(p, true))
        .transpose()?;
    let instance = random_u64();
    let mut app = Recorder {
        out: BufWriter::new(io::stdout()),
        record,
        error: None,
    };
    let transport = TcpTransport::new(Accept { listener });
    let mut server: Server<_> =
        Server::new(transport, ServerConfig::new(instance)).map_err(|e| e.to_string())?;
    println!("server: listening on {local} (instance {instance:016x})");
    let clock = Clock(WallClock::now());
    loop {
        let now = clock.now();
        let busy = server.poll(now, &mut app);
        app.flush()
            .map_err(|e| format!("cannot write the record: {e}; nothing more is acknowledged"))?;
        let wrote = server.transport_mut().flush();
        if !busy && !wrote {
            std::thread::sleep(IDLE);
        }
    }
}

// ---------------------------------------------------------------------------
// The client.

/// The client's application: prints what happens to its session.
struct Reporter {
    /// Every sn below this is acknowledged.
    acked: u64,
    last_print: WallClock,
}

impl ClientHandler for Reporter {
    fn event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Acked { upto } => {
                self.acked = upto;
                if self.last_print.elapsed() >= Duration::from_millis(500) {
                    self.last_print = WallClock::now();
                    println!("client: acked every sn below {upto}");
                }
            }
            ClientEvent::Established {
                epoch,
                instance,
                known,
                resume_from,
            } => println!(
                "client: established epoch {epoch} with instance {instance:016x} \
                 (session {}), resuming from sn {resume_from}",
                if known { "known" } else { "new to it" }
            ),
            ClientEvent::ServerRestarted {
                previous,
                instance,
                unconfirmed,
            } => println!(
                "client: server restarted ({} -> {instance:016x}); replaying sns \
                 {unconfirmed:?} ({} possible duplicates)",
                previous.map_or("none".into(), |p| format!("{p:016x}")),
                unconfirmed.end - unconfirmed.start
            ),
            ClientEvent::Disconnected { epoch, cause } => {
                println!("client: epoch {epoch} disconnected: {cause}");
            }
            ClientEvent::Failed(reason) => println!("client: failed: {reason}"),
            ClientEvent::Closed => println!("client: closed, everything acknowledged"),
            ClientEvent::Connecting { .. } => {}
            other => println!("client: {other:?}"),
        }
    }
}

fn run_client(
    addr: SocketAddr,
    count: u64,
    size: usize,
    record: Option<String>,
) -> Result<(), String> {
    let clock = Clock(WallClock::now());
    let session = random_u64();
    let mut config = ClientConfig::new(session, random_u64());
    // Outlast server restarts: about two minutes of failed attempts.
    config.max_retries = 500;
    config.backoff = Backoff {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(250),
        jitter_per_mille: 200,
    };
    let session_state = ClientSession::<WINDOW, _>::new(config, clock.now(), vec![0u8; STORAGE]);
    let transport = TcpTransport::new(Dial { server: addr });
    let mut client = Client::new(transport, session_state).map_err(|e| e.to_string())?;
    let mut record = record
        .as_deref()
        .map(|p| open_record(p, false))
        .transpose()?;
    let record_err = |e: io::Error| format!("cannot write the client record: {e}");
    if let Some(r) = &mut record {
        writeln!(r, "# session {session:016x}").map_err(record_err)?;
    }
    println!("client: session {session:016x}, {count} messages of {size} bytes to {addr}");

    let mut app = Reporter {
        acked: 0,
        last_print: WallClock::now(),
    };
    let mut bytes = Vec::with_capacity(size);
    let mut next = 0u64;
    let mut closing = false;
    client.start(clock.now());
    while !client.session().is_terminal() {
        let now = clock.now();
        let mut submitted = false;
        while next < count && client.session().can_submit() {
            message(session, next, size, &mut bytes);
            match client.submit(Message::Write(&bytes)) {
                Ok(sn) => {
                    if let Some(r) = &mut record {
                        writeln!(r, "{sn} {:016x}", hash(&bytes)).map_err(record_err)?;
                    }
                    next += 1;
                    submitted = true;
                }
                // Backpressure: acks make room.
                Err(SubmitError::WindowFull { .. } | SubmitError::BufferFull(_)) => break,
                Err(e) => return Err(format!("message {next}: {e}")),
            }
        }
        if next == count && !closing {
            client.close(now);
            closing = true;
        }
        if submitted {
            if let Some(r) = &mut record {
                r.flush().map_err(record_err)?;
            }
        }
        let busy = client.poll(now, &mut app);
        let wrote = client.transport_mut().flush();
        if !busy && !wrote && !submitted {
            let wait = client
                .poll_timeout()
                .map_or(IDLE, |t| (t - clock.now()).min(IDLE));
            std::thread::sleep(wait);
        }
    }

    let stats = *client.session().stats();
    let secs = clock.now().micros() as f64 / 1e6;
    println!(
        "client: summary: submitted {}, acked {}, replayed {}, possible duplicates {}, \
         server restarts {}, connections {}, {secs:.2} s ({:.0} messages/s)",
        stats.submitted,
        stats.acked,
        stats.replayed,
        stats.possible_duplicates,
        stats.server_restarts,
        stats.established,
        stats.submitted as f64 / secs.max(1e-6),
    );
    match client.session().state() {
        ClientState::Closed if stats.acked == count && app.acked == count => Ok(()),
        ClientState::Failed(reason) => Err(format!("the session failed: {reason}")),
        state => Err(format!(
            "ended in {state:?} with {} of {count} messages acknowledged",
            stats.acked
        )),
    }
}

// ---------------------------------------------------------------------------
// Arguments.

enum Command {
    Server {
        addr: SocketAddr,
        record: Option<String>,
    },
    Client {
        addr: SocketAddr,
        count: u64,
        size: usize,
        record: Option<String>,
    },
}

fn parse() -> Result<Command, String> {
    let mut args = std::env::args().skip(1);
    let role = args.next().ok_or("say server or client")?;
    if role != "server" && role != "client" {
        return Err(format!("unknown role {role:?}: say server or client"));
    }
    let addr: SocketAddr = args
        .next()
        .ok_or("the address is missing")?
        .parse()
        .map_err(|e| format!("address: {e} (write it as 127.0.0.1:PORT)"))?;
    let (mut count, mut size, mut record) = (None, 100usize, None);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--record" => record = Some(value),
            "--count" if role == "client" => {
                count = Some(value.parse().map_err(|e| format!("--count: {e}"))?);
            }
            "--size" if role == "client" => {
                size = value.parse().map_err(|e| format!("--size: {e}"))?;
            }
            _ => return Err(format!("unknown argument {flag:?} for the {role}")),
        }
    }
    if role == "server" {
        return Ok(Command::Server { addr, record });
    }
    Ok(Command::Client {
        addr,
        count: count.ok_or("the client needs --count N")?,
        size,
        record,
    })
}

fn main() -> ExitCode {
    let command = match parse() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcp: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = match command {
        Command::Server { addr, record } => run_server(addr, record),
        Command::Client {
            addr,
            count,
            size,
            record,
        } => run_client(addr, count, size, record),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tcp: {e}");
            ExitCode::FAILURE
        }
    }
}
