//! `iomsg client`: io_demo's workload (random reads and writes of random
//! sizes, a window of operations in flight) to one or more servers, one
//! session each, with every read's bytes checked; with `--audit-dir` it
//! records what it submitted and what it saw, for the soak's ground truth.
//!
//! With `--metrics ADDR` it also shows, every second and at the end,
//! through the `metrics` facade (see [`crate::exporter`]), summed over its
//! sessions: `iomsg_client_submitted_total`, `iomsg_client_acked_total`
//! (acknowledged sns), `iomsg_client_replayed_total` (frames sent again
//! after reconnects) and `iomsg_client_not_replayed_total` (sns given up at
//! disconnects, replay off).

mod outboxes;
mod report;
mod seen;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant as Wall};

use iomsg_core::rng::SplitMix64;
use iomsg_core::session::{
    Backoff, ClientConfig, ClientEvent, ClientSession, ClientState, FailReason, Message, ReadData,
    SubmitError,
};
use iomsg_core::transport::{Client, ClientHandler, Readiness};
use iomsg_core::workload;
use iomsg_endpoint::{Backend, Dial, DialSetup, Idle, Progress};
use iomsg_stream::{StreamConfig, StreamTransport};
#[cfg(feature = "ucx")]
use iomsg_ucx::UcxTransport;

use crate::common;
use iomsg_lab::args::{Op, Retries, SizeRange};
use iomsg_lab::common::{Audit, Record};
use iomsg_lab::outbox::{Outbox, OutboxJob, Stored};
use iomsg_lab::transport::{Place, Transport};

use outboxes::{begin_outbox, close_outboxes, keep_before_sending, keep_outboxes};
use report::{finish, report};
pub use report::{ClientReport, SessionReport};
use seen::Seen;

/// The most messages one session keeps unacknowledged (`--conn-window`
/// is capped here): the endpoint's window.
pub const MAX_CONN_WINDOW: u32 = iomsg_endpoint::WINDOW as u32;

/// What `iomsg client` is asked to do.
#[derive(Clone, Debug)]
pub struct ClientJob {
    /// The servers; one session each, operations spread over them.
    pub servers: Vec<Place>,
    /// What carries the frames (every server's address is of it).
    pub transport: Transport,
    /// The operations to draw from.
    pub ops: Vec<Op>,
    /// Each operation's size, drawn uniformly.
    pub sizes: SizeRange,
    /// Operations in all (0: no limit).
    pub iterations: u64,
    /// Operations in flight at most, over all servers.
    pub window: u32,
    /// Operations in flight at most per server.
    pub conn_window: u32,
    /// No reply for this long: the connection is considered dead.
    pub reply_timeout: Duration,
    /// A connection attempt may take this long.
    pub connect_timeout: Duration,
    /// Consecutive failed connection attempts tolerated (once `retry_for`
    /// has passed).
    pub retries: Retries,
    /// Retrying goes on at least this long after the first failed attempt.
    pub retry_for: Duration,
    /// Delay between connection attempts.
    pub retry_interval: Duration,
    /// Retry a full table even before the server ever let the session in.
    pub retry_full_table: bool,
    /// Stop submitting after this long, then wait for what is in flight.
    pub run_time: Option<Duration>,
    /// Seeds the workload (operations and sizes) and the retry jitter;
    /// never the session ids.
    pub seed: u64,
    /// Print every event.
    pub verbose: bool,
    /// Payload CRCs on every frame.
    pub validate: bool,
    /// A status line this often (none when zero).
    pub report_interval: Duration,
    /// How it waits when quiet.
    pub progress: Progress,
    /// Replay what was unacknowledged after a reconnect.
    pub replay: bool,
    /// Rebuild the UCX context and worker after every disconnect.
    pub recreate_context: bool,
    /// Frames over shared memory where both ends are on one host.
    pub shared_memory: bool,
    /// The UCX API that carries the frames.
    pub api: iomsg_lab::transport::Api,
    /// Write a JSON report here at the end.
    pub report: Option<PathBuf>,
    /// Where to keep the audit files, and their name.
    pub audit: Option<(PathBuf, String)>,
    /// After stopping, wait this long at most for acknowledgements.
    pub drain: Duration,
    /// Keep an outbox (`--outbox`; one per server).
    pub outbox: Option<OutboxJob>,
}

type Driver<B> = Client<B, { MAX_CONN_WINDOW as usize }, Vec<u8>>;

/// The longest a busy-polling client naps between two polls while a
/// connection of its is being opened or awaits its first acknowledgement.
const CONNECTING_NAP: Duration = Duration::from_micros(200);
/// The longest it naps while every session waits to retry.
const BACKOFF_NAP: Duration = Duration::from_millis(20);

/// How long a busy-polling client with nothing to do may sleep when no
/// session of its is established and acknowledged: until the next retry
/// when every one waits for it, [`CONNECTING_NAP`] while a connection is
/// opening or waits for its first acknowledgement. A connection is opened
/// in a dozen steps that alternate between the client, the server and
/// their UCX progress threads, and its first acknowledgement takes a few
/// more; on a host whose cores are all taken by busy-polling processes
/// each step waits for the scheduler's next tick (4 ms at 250 Hz), so a
/// client spinning then slows its own connection down. `None`: a session
/// is acknowledged on its connection (keep polling) or none is waiting.
fn unconnected_nap<B: Dial>(peers: &[Peer<B>], now: iomsg_core::time::Instant) -> Option<Duration> {
    let mut nap = BACKOFF_NAP;
    let mut waiting = false;
    for p in peers {
        let session = p.client.session();
        match session.state() {
            ClientState::Established { .. } if !p.seen.awaiting_first_ack => return None,
            ClientState::Established { .. }
            | ClientState::Connecting { .. }
            | ClientState::Handshaking { .. } => {
                nap = nap.min(CONNECTING_NAP);
                waiting = true;
            }
            ClientState::Backoff { .. } => waiting = true,
            _ => {}
        }
        if let Some(t) = p.client.poll_timeout() {
            nap = nap.min(t.saturating_since(now));
        }
    }
    (waiting && !nap.is_zero()).then_some(nap)
}

struct Peer<B: Dial> {
    addr: B::Addr,
    client: Driver<B>,
    seen: Seen,
    rebuilds: u64,
    /// Its session's outbox (`--outbox`).
    outbox: Option<Outbox>,
}

/// Runs the client until its iterations or run time are done and what it
/// sent is acknowledged (or `--drain` passed), or SIGINT/SIGTERM.
///
/// # Errors
///
/// A transport could not be made, or the audit could not be written.
pub fn run(job: &ClientJob) -> Result<ClientReport, String> {
    match job.transport {
        #[cfg(not(feature = "ucx"))]
        Transport::Ucx => Err(iomsg_lab::transport::NO_UCX.into()),
        #[cfg(feature = "ucx")]
        Transport::Ucx => {
            let setup = DialSetup::new(
                common::ucx_config(job.progress.sleeps(), job.shared_memory, job.api),
                !job.progress.sleeps(),
            );
            run_over::<UcxTransport<iomsg_ucx::Dial>>(job, &setup, |place| match place {
                Place::Ucx(a) => Some(*a),
                Place::Stream(_) => None,
            })
        }
        Transport::Tcp | Transport::Unix => {
            let setup = DialSetup::new(StreamConfig::default(), !job.progress.sleeps());
            run_over::<StreamTransport<iomsg_stream::Dial>>(job, &setup, |place| match place {
                Place::Stream(a) => Some(a.clone()),
                Place::Ucx(_) => None,
            })
        }
    }
}

/// [`run`] over backend `B`; `addr` gives a server's address for it.
fn run_over<B: Dial>(
    job: &ClientJob,
    setup: &DialSetup<B::Config>,
    addr: impl Fn(&Place) -> Option<B::Addr>,
) -> Result<ClientReport, String> {
    let stop = iomsg_lab::common::stop_on_signals()?;
    let mut audit = match &job.audit {
        Some((dir, name)) => Some(Audit::create(dir, name)?),
        None => None,
    };
    let max = usize::try_from(job.sizes.max).map_err(|_| "data size too large".to_string())?;
    let start = Wall::now();
    let mut peers = open_sessions::<B>(job, setup, addr, start, &mut audit)?;
    let mut work = Submitter::new(job.seed, max);
    let mut stopped_at: Option<Wall> = None;
    let mut idle = Idle::default();
    // A session resumed from an outbox counts its acknowledgements from
    // its resume point: the first rate is over this run's alone.
    let mut status = Status {
        last: Wall::now(),
        last_acked: peers.iter().map(|p| p.seen.acked).sum(),
    };
    loop {
        let now = common::clock(start);
        for p in &mut peers {
            p.seen.now = now;
        }
        let done_submitting = stop.load(Ordering::Relaxed)
            || job.run_time.is_some_and(|l| start.elapsed() >= l)
            || (job.iterations != 0 && work.submitted >= job.iterations);
        if done_submitting && stopped_at.is_none() {
            stopped_at = Some(Wall::now());
        }
        let mut busy = false;
        if !done_submitting {
            busy = work.fill_window(job, &mut peers, &mut audit)?;
        }
        if job.outbox.is_some() {
            keep_before_sending(&mut peers, &mut audit)?;
        }
        busy |= poll_peers(job, &mut peers, setup, now, &mut audit)?;
        keep_outboxes(&mut peers)?;
        status.show(job, &peers, start, work.submitted, &mut audit);
        if let Some(a) = audit.as_mut() {
            a.flush()?;
        }
        let settled = peers
            .iter()
            .all(|p| p.client.session().is_terminal() || p.client.session().outstanding() == 0);
        if let Some(t) = stopped_at {
            if settled || t.elapsed() >= job.drain || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if peers.iter().all(|p| p.client.session().is_terminal()) {
            break;
        }
        if busy {
            idle.busy();
        } else {
            let cap = peers
                .iter()
                .filter_map(|p| p.outbox.as_ref()?.sync_wait())
                .min();
            wait_for_work(job, &mut peers, start, cap, &mut idle)?;
        }
    }
    close(&mut peers, start);
    close_outboxes(&mut peers)?;
    let report = report(
        &peers,
        start.elapsed().as_secs_f64(),
        work.bytes_submitted,
        job.drain,
    );
    finish(job, &report, &mut audit)?;
    Ok(report)
}

/// One session per server, each connected (or resumed from its outbox)
/// and started, its outbox begun.
fn open_sessions<B: Dial>(
    job: &ClientJob,
    setup: &DialSetup<B::Config>,
    addr: impl Fn(&Place) -> Option<B::Addr>,
    start: Wall,
    audit: &mut Option<Audit>,
) -> Result<Vec<Peer<B>>, String> {
    let mut peers = Vec::new();
    for (k, place) in job.servers.iter().enumerate() {
        let addr = addr(place)
            .ok_or_else(|| format!("server {place} is not a {} address", job.transport))?;
        let (outbox, stored) = match &job.outbox {
            Some(o) => {
                let (o, s) = Outbox::open(&o.for_server(job.servers.len(), place)?)?;
                (Some(o), Some(s))
            }
            None => (None, None),
        };
        let resume = stored.as_ref().filter(|s| s.resumes());
        let mut p = connect::<B>(job, k, addr.clone(), setup, start, resume)?;
        p.outbox = outbox;
        if let Some(s) = stored.as_ref() {
            begin_outbox(s, &mut p, audit)?;
        }
        p.client.start(common::clock(start));
        if let Some(a) = audit.as_mut() {
            a.event(format_args!(
                "session {:016x} server {addr}",
                p.seen.session
            ));
        }
        println!("session {:016x} to {addr}", p.seen.session);
        peers.push(p);
    }
    if let Some(a) = audit.as_mut() {
        a.flush()?;
    }
    Ok(peers)
}

/// The session to the server at `addr` (the `k`th), its transport made,
/// not started; resumed from an outbox's identity and point when given.
fn connect<B: Dial>(
    job: &ClientJob,
    k: usize,
    addr: B::Addr,
    setup: &DialSetup<B::Config>,
    start: Wall,
    resume: Option<&Stored>,
) -> Result<Peer<B>, String> {
    let conn_window = job.conn_window.clamp(1, MAX_CONN_WINDOW);
    let max = usize::try_from(job.sizes.max).map_err(|_| "data size too large".to_string())?;
    // Room for a full window of the largest messages, within 256 MiB, and
    // never less than two of them.
    let storage = (conn_window as usize * (max + 8))
        .min(256 << 20)
        .max(2 * max + 64);
    let (session, token) = match resume.and_then(|s| s.identity) {
        Some(id) => id,
        None => (common::os_random()?, common::os_random()?),
    };
    let mut config = ClientConfig::new(session, token);
    config.window = conn_window;
    config.reply_timeout = job.reply_timeout;
    config.connect_timeout = job.connect_timeout;
    config.max_retries = job.retries.max();
    config.retry_for = job.retry_for;
    config.retry_full_table = job.retry_full_table;
    config.backoff = Backoff {
        initial: job.retry_interval,
        max: job.retry_interval,
        jitter_per_mille: 200,
    };
    config.replay = job.replay;
    config.validate = job.validate;
    config.crc = B::crc();
    config.seed = job.seed.wrapping_add(k as u64);
    let limit = u32::try_from(job.sizes.max).unwrap_or(u32::MAX);
    config.max_payload = limit.max(1);
    let transport = B::dial(&addr, setup.clone()).map_err(|e| e.to_string())?;
    let now = common::clock(start);
    let s = match resume {
        Some(r) => ClientSession::resume(config, now, vec![0u8; storage], r.resume_point()),
        None => ClientSession::new(config, now, vec![0u8; storage]),
    };
    let client = Driver::<B>::new(transport, s).map_err(|e| e.to_string())?;
    let limits = client.session().limits();
    let most = limits.configured.min(limits.transport).min(limits.storage);
    if job.sizes.max > most as u64 {
        return Err(format!(
            "data size {} is larger than a message may be here ({most} bytes: {limits:?})",
            job.sizes.max
        ));
    }
    Ok(Peer {
        addr,
        client,
        seen: Seen {
            session,
            acked: resume.map_or(0, |r| r.point.base),
            ..Seen::default()
        },
        rebuilds: 0,
        outbox: None,
    })
}

/// The workload: operations drawn from the seed, submitted round-robin
/// over the sessions.
struct Submitter {
    rng: SplitMix64,
    buf: Vec<u8>,
    /// The operation drawn and not yet taken by a session.
    next_op: Option<(Op, usize)>,
    submitted: u64,
    bytes_submitted: u64,
    rr: usize,
}

impl Submitter {
    fn new(seed: u64, max: usize) -> Submitter {
        Submitter {
            rng: SplitMix64::new(seed),
            buf: vec![0u8; max],
            next_op: None,
            submitted: 0,
            bytes_submitted: 0,
            rr: 0,
        }
    }

    /// Submits operations until the window is full, every session
    /// refused one, or the iterations are done; whether any was.
    fn fill_window<B: Dial>(
        &mut self,
        job: &ClientJob,
        peers: &mut [Peer<B>],
        audit: &mut Option<Audit>,
    ) -> Result<bool, String> {
        let mut busy = false;
        let outstanding: u64 = peers
            .iter()
            .map(|p| p.client.session().outstanding() as u64)
            .sum();
        let mut room = u64::from(job.window).saturating_sub(outstanding);
        let mut refused = 0;
        while room > 0 && refused < peers.len() {
            if job.iterations != 0 && self.submitted >= job.iterations {
                break;
            }
            let rng = &mut self.rng;
            let (op, size) = *self.next_op.get_or_insert_with(|| {
                let op = job.ops[rng.below(job.ops.len() as u64) as usize];
                let span = job.sizes.max - job.sizes.min;
                let size = job.sizes.min + rng.below(span.saturating_add(1));
                (op, size as usize)
            });
            self.rr = (self.rr + 1) % peers.len();
            let p = &mut peers[self.rr];
            let session = p.seen.session;
            let sn = p.client.session().next_sn();
            let buf = &mut self.buf;
            if op == Op::Write {
                workload::fill(session, sn, &mut buf[..size]);
            }
            let msg = match op {
                Op::Write => Message::Write(&buf[..size]),
                Op::Read => Message::Read {
                    len: size as u32,
                    request: &[],
                },
            };
            match p.client.submit(msg) {
                Ok(sn) => {
                    if let Some(o) = p.outbox.as_mut() {
                        o.message(sn, &msg);
                    }
                    p.seen.observer.on_submit(sn, p.seen.now);
                    let data: &[u8] = if op == Op::Write { &buf[..size] } else { &[] };
                    if let Some(a) = audit.as_mut() {
                        a.record(Record {
                            session,
                            sn,
                            hash: workload::hash(data),
                        });
                    }
                    self.submitted += 1;
                    self.bytes_submitted += size as u64;
                    room -= 1;
                    refused = 0;
                    self.next_op = None;
                    busy = true;
                }
                Err(SubmitError::WindowFull { .. } | SubmitError::BufferFull(_)) => {
                    refused += 1;
                }
                Err(SubmitError::Closed | SubmitError::Exhausted) => refused += 1,
                Err(e) => return Err(format!("cannot submit a {size}-byte {op:?}: {e}")),
            }
        }
        Ok(busy)
    }
}

/// Polls every session (rebuilding its transport after a disconnect
/// with `--recreate-context`) and passes on its event lines; whether any
/// had work.
fn poll_peers<B: Dial>(
    job: &ClientJob,
    peers: &mut [Peer<B>],
    setup: &DialSetup<B::Config>,
    now: iomsg_core::time::Instant,
    audit: &mut Option<Audit>,
) -> Result<bool, String> {
    let mut busy = false;
    for p in peers {
        p.seen.now = now;
        busy |= p.client.poll(now, &mut p.seen);
        p.seen.observer.on_stats(p.client.session().stats());
        if job.recreate_context && std::mem::take(&mut p.seen.disconnected) {
            let fresh = B::dial(&p.addr, setup.clone()).map_err(|e| e.to_string())?;
            drop(
                p.client
                    .replace_transport(now, fresh)
                    .map_err(|e| e.to_string())?,
            );
            p.rebuilds += 1;
        }
        for line in p.seen.lines.drain(..) {
            if job.verbose {
                println!("{line}");
            }
            if let Some(a) = audit.as_mut() {
                a.event(format_args!("{line}"));
            }
        }
    }
    Ok(busy)
}

/// The status line, every `--report-interval`, and its audit `sample`.
struct Status {
    last: Wall,
    last_acked: u64,
}

impl Status {
    fn show<B: Dial>(
        &mut self,
        job: &ClientJob,
        peers: &[Peer<B>],
        start: Wall,
        submitted: u64,
        audit: &mut Option<Audit>,
    ) {
        let acked: u64 = peers.iter().map(|p| p.seen.acked).sum();
        if job.report_interval.is_zero() || self.last.elapsed() < job.report_interval {
            return;
        }
        let secs = self.last.elapsed().as_secs_f64();
        let rate = (acked - self.last_acked) as f64 / secs;
        let s = |f: fn(&Peer<B>) -> u64| peers.iter().map(f).sum::<u64>();
        println!(
            "status t={:.1} submitted={submitted} acked={acked} rate={rate:.0} restarts={} disconnects={} not_replayed={} reads_corrupt={}",
            start.elapsed().as_secs_f64(),
            s(|p| p.seen.restarts),
            s(|p| p.client.session().stats().disconnects),
            s(|p| p.seen.not_replayed),
            s(|p| p.seen.reads_corrupt),
        );
        if let Some(a) = audit.as_mut() {
            a.event(format_args!("sample {acked}"));
        }
        self.last_acked = acked;
        self.last = Wall::now();
    }
}

/// Waits while there is nothing to do: on the UCX event fds once `idle`
/// says the progress mode may sleep; otherwise (busy polling, or the
/// adaptive mode's first moments) a nap only while unconnected.
fn wait_for_work<B: Dial>(
    job: &ClientJob,
    peers: &mut [Peer<B>],
    start: Wall,
    cap: Option<Duration>,
    idle: &mut Idle,
) -> Result<(), String> {
    if !idle.may_sleep(job.progress) {
        if let Some(nap) = unconnected_nap(peers, common::clock(start)) {
            std::thread::sleep(nap);
        }
        return Ok(());
    }
    let now = common::clock(start);
    let mut wait = cap.map_or(Duration::from_millis(50), |c| {
        c.min(Duration::from_millis(50))
    });
    let mut all_armed = true;
    for p in peers.iter_mut() {
        all_armed &= p.client.arm(now) == Readiness::Armed;
        if let Some(d) = Backend::poll_delay(p.client.transport()) {
            wait = wait.min(d);
        }
        if let Some(t) = p.client.poll_timeout() {
            wait = wait.min(t.saturating_since(now));
        }
    }
    if !all_armed {
        return Ok(());
    }
    let waited = if let [p] = peers {
        Backend::sleep(p.client.transport_mut(), wait)
    } else {
        let fds = peers
            .iter()
            .map(|p| Backend::ready_fd(p.client.transport()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("no {} fd to sleep on: {e}", B::NAME))?;
        sleep_any(&fds, wait)
    };
    waited.map_err(|e| format!("cannot wait for {}: {e}", B::NAME))
}

/// Sleeps until one of `fds` (the sessions' transports, each armed) is
/// readable or `timeout` passed: one thread waiting on several
/// transports.
fn sleep_any(fds: &[std::os::fd::BorrowedFd<'_>], timeout: Duration) -> std::io::Result<()> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let ms = u16::try_from(timeout.as_millis().max(1)).unwrap_or(u16::MAX);
    match poll(&mut polled, PollTimeout::from(ms)) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Closes the sessions (a Bye each), for a bounded while.
fn close<B: Dial>(peers: &mut [Peer<B>], start: Wall) {
    let closing = Wall::now();
    for p in peers.iter_mut() {
        p.client.close(common::clock(start));
    }
    while closing.elapsed() < Duration::from_secs(1)
        && !peers.iter().all(|p| p.client.session().is_terminal())
    {
        for p in peers.iter_mut() {
            p.client.poll(common::clock(start), &mut p.seen);
        }
    }
}
