//! `iomsg server`: takes io_msgs from any number of clients over UCX, TCP
//! or a Unix socket (`--transport`),
//! answers reads, and (with `--audit-dir`) records every message it hands
//! to the application before any acknowledgement of it leaves.
//!
//! With `--metrics ADDR` it also shows, every second, through the
//! `metrics` facade (see [`crate::exporter`]):
//! `iomsg_server_delivered_total`, `iomsg_server_duplicates_total`,
//! `iomsg_server_live_loss_sns_total` (sns lost on live connections),
//! `iomsg_server_in_flight_loss_sns_total` (sns lost in flight at a
//! disconnect, replay off), and the gauges `iomsg_server_connections` and
//! `iomsg_server_sessions`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    Delivery, ReadRequest, RequestOp, ServerConfig, ServerCore, ServerEvent, ServerHandler, Unkept,
};
use iomsg_core::transport::{Readiness, Server};
use iomsg_core::workload;
use iomsg_endpoint::{Accept, Backend, Idle, Progress};
use iomsg_stream::{StreamConfig, StreamTransport};
#[cfg(feature = "ucx")]
use iomsg_ucx::UcxTransport;

use crate::common;
use iomsg_lab::common::{Audit, Record};
use iomsg_lab::journal::{self, Journal, JournalJob, Rollback};
use iomsg_lab::transport::Place;

/// Sessions the server's table holds at most (`--sessions` lowers it).
pub const SESSIONS: usize = 1024;
/// Connections held at once.
pub const CONNS: usize = 1024;
/// The tracker's words per session: a receive window of 2,048 sns.
pub const WORDS: usize = 33;

/// The server's session table.
pub type Core = ServerCore<SESSIONS, CONNS, WORDS>;

/// What `iomsg server` is asked to do.
#[derive(Clone, Debug)]
pub struct ServerJob {
    /// Where to listen, and so over which transport.
    pub listen: Place,
    /// Sessions held at most.
    pub sessions: usize,
    /// Check every write's bytes against the io_demo pattern.
    pub validate: bool,
    /// Print every event.
    pub verbose: bool,
    /// A status line this often (none when zero).
    pub report_interval: Duration,
    /// How it waits when quiet.
    pub progress: Progress,
    /// Frames over shared memory where both ends are on one host.
    pub shared_memory: bool,
    /// The UCX API that carries the frames.
    pub api: iomsg_lab::transport::Api,
    /// Where to keep the audit files, and their name.
    pub audit: Option<(PathBuf, String)>,
    /// Keep a journal (`--journal`).
    pub journal: Option<JournalJob>,
}

/// The driver over backend `B`.
type Driver<B> = Server<B, SESSIONS, CONNS, WORDS, Box<Core>>;

/// The server's application: io_demo's (it takes writes and answers reads
/// with the pattern), plus the audit and the counts.
struct App {
    audit: Option<Audit>,
    /// The journal, kept in step with the audit records.
    journal: Option<Journal>,
    validate: bool,
    verbose: bool,
    corrupt: u64,
    error: Option<String>,
    /// The library's metrics and tracing (see `iomsg_ucx::observe`).
    observer: iomsg_endpoint::observe::ServerObserver,
}

impl ServerHandler for App {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.observer.on_deliver(&d);
        if let Some(a) = self.audit.as_mut() {
            a.record(Record {
                session: d.session,
                sn: d.sn,
                hash: workload::hash(d.data),
            });
        }
        if self.validate && d.op != RequestOp::Read && !workload::matches(d.session, d.sn, d.data) {
            self.corrupt += 1;
            eprintln!(
                "iomsg server: session {:016x} sn {}: {} bytes differ from the pattern",
                d.session,
                d.sn,
                d.data.len()
            );
            if let Some(a) = self.audit.as_mut() {
                a.event(format_args!("corrupt {:016x} {}", d.session, d.sn));
            }
        }
    }

    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }

    fn event(&mut self, event: ServerEvent) {
        self.observer.on_event(&event);
        let line = match event {
            ServerEvent::LiveLoss {
                session,
                epoch,
                missing,
            } => {
                format!(
                    "live_gap {session:016x} {epoch} {} {}",
                    missing.start, missing.end
                )
            }
            ServerEvent::Recovered { session, sn } => format!("recovered {session:016x} {sn}"),
            ServerEvent::LostInFlight { session, range } => {
                format!(
                    "lost_in_flight {session:016x} {} {}",
                    range.start, range.end
                )
            }
            ServerEvent::LostLive { session, range } => {
                format!("lost_live {session:016x} {} {}", range.start, range.end)
            }
            ServerEvent::Duplicate { session, sn } => format!("duplicate {session:016x} {sn}"),
            ServerEvent::Stale { session, epoch, sn } => {
                format!("stale {session:016x} {epoch} {sn}")
            }
            ServerEvent::Rejected {
                conn,
                reason,
                detail,
            } => {
                // Always said: a client (or something else) is broken.
                eprintln!("iomsg server: rejected {conn}: {reason} (detail {detail})");
                format!("rejected {conn} {reason:?} {detail}")
            }
            ServerEvent::SlowConsumer {
                conn,
                session,
                dropped,
            } => {
                // Always said: a peer stopped taking its replies.
                eprintln!(
                    "iomsg server: closed {conn}: a slow consumer ({dropped} replies it never \
                     took were dropped; its client replays)"
                );
                let session = session.map_or_else(|| "-".to_string(), |s| format!("{s:016x}"));
                format!("slow_consumer {conn} {session} {dropped}")
            }
            ServerEvent::HandshakeTimeout { conn, timeout } => {
                eprintln!("iomsg server: closed {conn}: no Hello within {timeout:?}");
                format!("handshake_timeout {conn} {timeout:?}")
            }
            ServerEvent::Disconnected { conn, reason } => format!("disconnected {conn} {reason:?}"),
            ServerEvent::Evicted { session } => format!("evicted {session:016x}"),
            ServerEvent::Forgotten { session } => format!("forgotten {session:016x}"),
            ServerEvent::Closed { session } => format!("closed {session:016x}"),
            other => format!("{other:?}"),
        };
        if self.verbose {
            println!("{line}");
        }
        if let Some(a) = self.audit.as_mut() {
            a.event(format_args!("{line}"));
        }
    }

    fn journal(&mut self, record: &[u8]) {
        if let Some(j) = self.journal.as_mut() {
            j.keep(record);
        }
    }

    fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        let r = self.journal.as_ref()?.recall(session)?;
        out.get_mut(..r.len())?.copy_from_slice(&r);
        Some(r.len())
    }

    fn flush(&mut self) -> Result<(), Unkept> {
        if let Some(Err(e)) = self.audit.as_mut().map(Audit::flush) {
            return self.fail(e);
        }
        self.commit().or_else(|e| self.fail(e))
    }
}

impl App {
    /// Why the server halted, as it says on stopping.
    fn halted(&mut self) -> String {
        let e = self.error.take().unwrap_or_else(|| "a flush failed".into());
        format!(
            "{e}; stopped before acknowledging what it could not keep (every \
             acknowledgement that left is true)"
        )
    }

    /// The audit records' length now.
    fn committed(&self) -> u64 {
        self.audit.as_ref().map_or(0, Audit::records_len)
    }

    /// Appends the journal batch that commits the audit records written.
    fn commit(&mut self) -> Result<(), String> {
        let committed = self.committed();
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        let audit = self.audit.as_ref();
        j.commit(committed, || audit.map_or(Ok(()), Audit::sync_records))
            .map(drop)
    }

    /// A write failed: the replies about to leave would acknowledge what
    /// is not kept. The core halts (they never leave) and the loop stops
    /// after this poll with `e`.
    fn fail(&mut self, e: String) -> Result<(), Unkept> {
        self.error.get_or_insert(e);
        Err(Unkept)
    }

    /// Syncs the journal when `--sync batch` says, and compacts it once it
    /// is too large: everything delivered is flushed first, so the
    /// snapshot of the sessions matches the audit records' length.
    fn keep_journal<B: Accept>(&mut self, server: &mut Driver<B>) -> Result<(), String> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        let audit = self.audit.as_ref();
        j.tick(|| audit.map_or(Ok(()), Audit::sync_records))?;
        if !j.over_limit() {
            return Ok(());
        }
        if server.flush(self).is_err() {
            return Err(self.halted());
        }
        let committed = self.committed();
        let audit = self.audit.as_ref();
        if let Some(j) = self.journal.as_mut() {
            let before = j.len();
            j.compact(committed, || audit.map_or(Ok(()), Audit::sync_records))?;
            println!(
                "journal compacted: {before} bytes to {} ({} sessions; {} in the server's tables)",
                j.len(),
                j.sessions(),
                server.core().session_count() + server.core().tomb_count()
            );
        }
        Ok(())
    }
}

/// Opens the journal, restores its sessions into `core` and rolls the
/// audit records the last batch names back to their commit point; says
/// what it did on stdout.
fn recover(job: &JournalJob, core: &mut Core, start: Wall) -> Result<Journal, String> {
    let (journal, rec) = Journal::open(&job.dir, job.sync, job.compact_over)?;
    if let Some(t) = &rec.torn {
        println!("journal: {t}");
    }
    if let Some((u, cut, kept)) = &rec.unvouched {
        // Said on both streams: acknowledged deliveries may be gone.
        let text = format!(
            "journal: the batch at offset {} names {} at {} bytes, and it holds {}: the \
             records it commits are not there (a power cut took their last writes, or the \
             file was cut). The journal was cut back to offset {} ({cut} bytes kept in {}); \
             clients whose acknowledged messages that forgets are told which (StateLost)",
            u.offset,
            u.records.display(),
            u.committed,
            u.len,
            u.offset,
            kept.display()
        );
        println!("{text}");
        eprintln!("iomsg server: {text}");
    }
    // The latest record of each session, in the order written; those the
    // tables cannot hold are forgotten again, and recalled from the
    // journal when their clients come.
    let (mut restored, mut refused, mut first_error) = (0u64, 0u64, None);
    for r in rec.latest() {
        match core.restore(common::clock(start), r) {
            Ok(_) => restored += 1,
            Err(e) => {
                refused += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    println!(
        "journal {} (sync {}): {restored} sessions restored from {} batches ({} bytes); {} \
         in the server's tables, the rest recalled when their clients come",
        journal.path().display(),
        job.sync,
        rec.batches,
        rec.bytes.len(),
        core.session_count() + core.tomb_count()
    );
    if let Some(e) = first_error {
        eprintln!(
            "iomsg server: journal: {refused} sessions not restored (the first: {e}); their \
             clients are refused until there is room"
        );
    }
    match journal::roll_back(rec.last_commit.as_ref(), job.sync)? {
        Rollback::Nothing => {}
        Rollback::Cut {
            path,
            from,
            to,
            aside,
        } => println!(
            "journal: rolled {} back from {from} to {to} bytes, its last commit point: {} \
             deliveries the journal never committed, kept in {} (their clients send them again)",
            path.display(),
            (from - to) / iomsg_lab::common::RECORD_LEN as u64,
            aside.display()
        ),
        Rollback::Short {
            path,
            len,
            committed,
        } => eprintln!(
            "iomsg server: journal: {} holds {len} bytes, less than the {committed} committed \
             (records never synced were lost)",
            path.display()
        ),
    }
    Ok(journal)
}

/// The first batch of this instance: it names its records file at its
/// length now, so that the next instance rolls back the right file.
fn name_records(journal: &mut Journal, audit: Option<&Audit>) -> Result<(), String> {
    if let Some(a) = audit {
        journal.name(a.records_path())?;
    }
    let committed = audit.map_or(0, Audit::records_len);
    journal.commit(committed, || audit.map_or(Ok(()), Audit::sync_records))?;
    Ok(())
}

/// How often the server's figures are given to the `metrics` facade.
const METRICS_EVERY: Duration = Duration::from_secs(1);

/// Describes the gauges [`publish_metrics`] sets (the library's
/// observer describes its iomsg_server_* counters).
fn describe_metrics() {
    use metrics::describe_gauge;
    describe_gauge!("iomsg_server_connections", "Connections open.");
    describe_gauge!("iomsg_server_sessions", "Sessions held.");
}

/// Gives the server's figures to the `metrics` facade (nothing happens
/// without a recorder, that is without `--metrics`).
fn publish_metrics(core: &Core) {
    metrics::gauge!("iomsg_server_connections").set(core.conn_count() as f64);
    metrics::gauge!("iomsg_server_sessions").set(core.session_count() as f64);
}

/// Runs the server until SIGINT or SIGTERM.
///
/// # Errors
///
/// It could not listen, or the audit could not be written.
pub fn run(job: &ServerJob) -> Result<(), String> {
    let stop = iomsg_lab::common::stop_on_signals()?;
    let start = Wall::now();
    let instance = common::os_random()?;
    let mut config = ServerConfig::new(instance);
    config.max_sessions = job.sessions.clamp(1, SESSIONS);
    config.crc = match job.listen {
        #[cfg(feature = "ucx")]
        Place::Ucx(_) => <UcxTransport<iomsg_ucx::Accept> as Backend>::crc(),
        #[cfg(not(feature = "ucx"))]
        Place::Ucx(_) => return Err(iomsg_lab::transport::NO_UCX.into()),
        Place::Stream(_) => <StreamTransport<iomsg_stream::Accept> as Backend>::crc(),
    };
    config.journal = job.journal.is_some();
    let mut core = Box::new(Core::new(config));
    let mut journal = match &job.journal {
        Some(j) => Some(recover(j, &mut core, start)?),
        None => None,
    };
    let audit = match &job.audit {
        Some((dir, name)) => Some(Audit::create(dir, name)?),
        None => None,
    };
    if let Some(j) = journal.as_mut() {
        name_records(j, audit.as_ref())?;
        let records = match audit.as_ref() {
            Some(a) => Some((a.records_file()?, a.records_path().to_path_buf())),
            None => None,
        };
        j.sync_in_background(records)?;
    }
    let listening = |e: &dyn std::fmt::Display| format!("cannot listen on {}: {e}", job.listen);
    match &job.listen {
        #[cfg(not(feature = "ucx"))]
        Place::Ucx(_) => Err(iomsg_lab::transport::NO_UCX.into()),
        #[cfg(feature = "ucx")]
        Place::Ucx(addr) => {
            let config = common::ucx_config(job.progress.sleeps(), job.shared_memory, job.api);
            let transport = UcxTransport::server(*addr, config).map_err(|e| listening(&e))?;
            serve(job, transport, core, journal, audit, stop)
        }
        Place::Stream(addr) => {
            let mut config = StreamConfig::default();
            config.max_connections = CONNS;
            let transport = StreamTransport::server(addr, config).map_err(|e| listening(&e))?;
            serve(job, transport, core, journal, audit, stop)
        }
    }
}

/// The status line, every `--report-interval`.
struct Status {
    last: Wall,
    delivered: u64,
}

impl Status {
    fn new() -> Status {
        Status {
            last: Wall::now(),
            delivered: 0,
        }
    }

    /// Prints the status line when it is due.
    fn show(&mut self, job: &ServerJob, core: &Core, start: Wall, corrupt: u64) {
        if job.report_interval.is_zero() || self.last.elapsed() < job.report_interval {
            return;
        }
        let s = *core.stats();
        let rate = (s.delivered - self.delivered) as f64 / self.last.elapsed().as_secs_f64();
        println!(
            "status t={:.1} conns={} sessions={} delivered={} rate={rate:.0} duplicates={} stale={} live_gaps={} lost_live={} corrupt={corrupt}",
            start.elapsed().as_secs_f64(),
            core.conn_count(),
            core.session_count(),
            s.delivered,
            s.duplicates,
            s.stale,
            s.live_gap_sns,
            s.lost_live,
        );
        self.delivered = s.delivered;
        self.last = Wall::now();
    }
}

/// Sleeps on the transport once it armed, until work comes or the next
/// timer (the core's, the transport's, the journal's sync) is due, 100 ms
/// at most.
fn sleep_when_armed<B: Accept>(
    server: &mut Driver<B>,
    app: &App,
    start: Wall,
) -> Result<(), String> {
    if server.arm(common::clock(start)) != Readiness::Armed {
        return Ok(());
    }
    let mut wait = Duration::from_millis(100);
    if let Some(d) = Backend::poll_delay(server.transport()) {
        wait = wait.min(d);
    }
    if let Some(t) = server.poll_timeout() {
        wait = wait.min(t.saturating_since(common::clock(start)));
    }
    if let Some(w) = app.journal.as_ref().and_then(Journal::sync_wait) {
        wait = wait.min(w);
    }
    Backend::sleep(server.transport_mut(), wait)
        .map_err(|e| format!("cannot wait for {}: {e}", B::NAME))
}

/// Serves over `transport` until SIGINT or SIGTERM (`stop`).
fn serve<B: Accept>(
    job: &ServerJob,
    transport: B,
    core: Box<Core>,
    journal: Option<Journal>,
    mut audit: Option<Audit>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), String> {
    let instance = core.config().instance;
    let local = transport
        .local_addr()
        .map_err(|e| format!("cannot tell where it listens: {e}"))?;
    if let Some(a) = audit.as_mut() {
        a.event(format_args!("listening {local} instance {instance:016x}"));
        a.flush()?;
    }
    let mut server: Driver<B> = Server::with_core(transport, core).map_err(|e| e.to_string())?;
    println!("listening on {local} (instance {instance:016x})");
    let mut app = App {
        audit,
        journal,
        validate: job.validate,
        verbose: job.verbose,
        corrupt: 0,
        error: None,
        observer: iomsg_endpoint::observe::ServerObserver::new(),
    };
    let start = Wall::now();
    let mut idle = Idle::default();
    let mut status = Status::new();
    let mut last_metrics = Wall::now();
    describe_metrics();
    while !stop.load(Ordering::Relaxed) {
        let now = common::clock(start);
        let busy = server.poll(now, &mut app);
        if busy {
            idle.busy();
        }
        if server.halted() {
            // The refusals the halt queued go out before the process ends.
            server.poll(now, &mut app);
            return Err(app.halted());
        }
        app.keep_journal(&mut server)?;
        if last_metrics.elapsed() >= METRICS_EVERY {
            publish_metrics(server.core());
            last_metrics = Wall::now();
        }
        status.show(job, server.core(), start, app.corrupt);
        if !busy && idle.may_sleep(job.progress) {
            sleep_when_armed(&mut server, &app, start)?;
        }
    }
    // What was delivered since the last flush is kept with its journal.
    if server.flush(&mut app).is_err() {
        return Err(app.halted());
    }
    if let Some(j) = app.journal.as_mut() {
        let audit = app.audit.as_ref();
        j.sync_now(|| audit.map_or(Ok(()), Audit::sync_records))?;
    }
    publish_metrics(server.core());
    let s = *server.core().stats();
    println!(
        "stopped: delivered={} duplicates={} stale={} lost_live={} lost_in_flight={} corrupt={}",
        s.delivered, s.duplicates, s.stale, s.lost_live, s.lost_in_flight, app.corrupt
    );
    app.error.map_or(Ok(()), Err)
}

/// What a server process takes besides the buffers the UCX transport
/// and the session table account for: the program, the UCX libraries, its
/// context and worker, and UCX's own per-connection state (measured: 11 MB
/// at rest, 21 MB holding a full table of 1,024 connections from the
/// hostile peer's flood, 24 MB after every hostile mode).
pub const SERVER_BASE_RSS: u64 = 64 << 20;

/// The server's worst-case memory for `iomsg server`'s configuration,
/// whatever its peers send: [`SERVER_BASE_RSS`], the session table, and
/// the UCX transport's own bound (`UcxConfig::memory_bound`: receive and
/// send memory, batches, the buffer pool). The soak holds every server
/// instance's peak RSS to it (its `--max-server-rss` default); `iomsg server --help`
/// states it.
pub fn server_memory_bound() -> u64 {
    let core = SERVER_BASE_RSS + std::mem::size_of::<Core>() as u64;
    #[cfg(feature = "ucx")]
    return core
        + crate::common::ucx_config(false, false, iomsg_lab::transport::Api::default())
            .memory_bound();
    // Without UCX: the stream transport's per-connection bound, a frame
    // being received (the largest, and a read's chunk) and a send buffer
    // that takes one more frame whole past its 256 KiB.
    #[cfg(not(feature = "ucx"))]
    {
        let frame = u64::from(iomsg_core::wire::MAX_DATA_LEN) + 64;
        let per_conn = 2 * frame + (64 << 10) + (256 << 10);
        core + CONNS as u64 * per_conn
    }
}
