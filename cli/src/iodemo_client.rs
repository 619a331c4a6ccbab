//! `iomsg client --io-demo`: io_demo's client workload against an
//! unmodified io_demo server, that names every operation the server
//! left unanswered when a connection ended (io_demo's own client forgets
//! them) and checks every answer's data.
//!
//! Audit files (with `--audit-dir`): `NAME.records` holds one 24-byte
//! record per operation answered (session = the client's random id, sn =
//! op << 32 | sn with op 0 read and 1 write, hash = the data size);
//! `NAME.log` has `iodemo_connected ADDR`, `iodemo_closed REASON…` and,
//! for each operation then unanswered, `iodemo_forgot read|write SN`, and
//! `corrupt SN OFFSET` for an answer whose bytes are not the pattern.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use iomsg_core::iodemo::Op;
use iomsg_core::rng::SplitMix64;
use iomsg_ucx::iodemo::{IoDemoClient, IoDemoClientEvent};

use crate::common;
use iomsg_lab::args::{self, SizeRange};
use iomsg_lab::common::{Audit, Record};

/// What `iomsg client --io-demo` is asked to do.
#[derive(Clone, Debug)]
pub struct IoDemoClientJob {
    /// The io_demo server.
    pub server: SocketAddr,
    /// Tag API (`false`: active messages, io_demo's `-A`).
    pub tag: bool,
    /// Operations drawn from.
    pub ops: Vec<args::Op>,
    /// Data sizes.
    pub sizes: SizeRange,
    /// Operations in flight at most.
    pub window: u32,
    /// Operations in all (0: no limit).
    pub iterations: u64,
    /// Stop submitting after this long.
    pub run_time: Option<Duration>,
    /// No answer for this long while operations are in flight: the
    /// connection is closed and made again.
    pub reply_timeout: Duration,
    /// Between connection attempts.
    pub retry_interval: Duration,
    /// Give up after this many failed attempts in a row.
    pub retries: u32,
    /// After stopping, wait this long at most for answers.
    pub drain: Duration,
    /// Seeds the first sn, operations and sizes.
    pub seed: u64,
    /// io_demo's io message size (`-r`).
    pub msg_len: usize,
    /// io_demo's chunk size (`-k`).
    pub chunk: u64,
    /// Check every answer's bytes (io_demo's `-q`; the server needs it
    /// too).
    pub check: bool,
    /// A status line this often (zero: never).
    pub report_interval: Duration,
    /// Print every event.
    pub verbose: bool,
    /// Audit directory and name.
    pub audit: Option<(PathBuf, String)>,
}

/// What the run came to.
#[derive(Clone, Debug, Default)]
pub struct IoDemoTally {
    /// Operations sent.
    pub submitted: u64,
    /// Answered.
    pub answered: u64,
    /// Left unanswered when a connection ended (named in the log).
    pub forgotten: u64,
    /// Answers whose bytes were not io_demo's pattern.
    pub corrupt: u64,
    /// Connections made.
    pub connections: u64,
}

struct Run<'a> {
    job: &'a IoDemoClientJob,
    rng: SplitMix64,
    sn: u32,
    t: IoDemoTally,
    audit: Option<Audit>,
    session: u64,
}

/// Runs the workload; `Err` when the server could not be reached for
/// good, an audit file failed, or an answer's data was wrong.
///
/// # Errors
///
/// As above, each with its cause.
pub fn run(job: &IoDemoClientJob) -> Result<IoDemoTally, String> {
    let stop = iomsg_lab::common::stop_on_signals()?;
    let audit = match &job.audit {
        Some((dir, name)) => Some(Audit::create(dir, name)?),
        None => None,
    };
    let mut rng = SplitMix64::new(job.seed);
    let sn = rng.next_u64() as u32;
    let mut r = Run {
        job,
        rng,
        sn,
        t: IoDemoTally::default(),
        audit,
        session: common::os_random()?,
    };
    let start = Instant::now();
    let deadline = job.run_time.map(|d| start + d);
    let mut failures = 0u32;
    loop {
        let done = |r: &Run| {
            stop.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| Instant::now() >= d)
                || (job.iterations > 0 && r.t.submitted >= job.iterations)
        };
        if done(&r) {
            break;
        }
        match r.connection(&done) {
            Ok(true) => failures = 0,
            Ok(false) => {
                failures += 1;
                if failures >= job.retries {
                    return Err(format!(
                        "no connection to the io_demo server {} after {failures} attempts",
                        job.server
                    ));
                }
                std::thread::sleep(job.retry_interval);
            }
            Err(e) => return Err(e),
        }
    }
    r.flush()?;
    println!("{}", r.status());
    if r.t.corrupt > 0 {
        return Err(format!(
            "{} answers were not io_demo's pattern",
            r.t.corrupt
        ));
    }
    Ok(r.t)
}

impl Run<'_> {
    /// One connection, until it ends or the run does; `Ok(false)` when it
    /// never came up.
    fn connection(&mut self, done: &dyn Fn(&Run) -> bool) -> Result<bool, String> {
        let job = self.job;
        let mut c =
            match IoDemoClient::connect(job.server, job.tag, job.msg_len, job.chunk, job.check) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("connecting to {}: {e}", job.server);
                    return Ok(false);
                }
            };
        let up_by = Instant::now() + job.reply_timeout;
        while !c.ready() && !c.closed() && Instant::now() < up_by {
            c.wait(Duration::from_millis(20));
            self.take(&mut c)?;
        }
        if !c.ready() {
            c.close("no connection".into());
            self.take(&mut c)?;
            return Ok(false);
        }
        self.t.connections += 1;
        let mut heard = Instant::now();
        let mut next_report = Instant::now() + job.report_interval;
        let mut stopping: Option<Instant> = None;
        while !c.closed() {
            if stopping.is_none() && done(self) {
                stopping = Some(Instant::now() + job.drain);
            }
            if stopping.is_none() {
                self.fill(&mut c);
            }
            c.wait(Duration::from_millis(20));
            if self.take(&mut c)? {
                heard = Instant::now();
            }
            let quiet = heard.elapsed() > job.reply_timeout && c.in_flight() > 0;
            if quiet {
                c.close(format!(
                    "no answer for {}",
                    iomsg_lab::common::human(job.reply_timeout)
                ));
            } else if stopping.is_some_and(|s| c.in_flight() == 0 || Instant::now() >= s) {
                c.close("end of the run".into());
            }
            self.take(&mut c)?;
            if !job.report_interval.is_zero() && Instant::now() >= next_report {
                next_report = Instant::now() + job.report_interval;
                println!("{}", self.status());
            }
        }
        Ok(true)
    }

    fn fill(&mut self, c: &mut IoDemoClient) {
        let job = self.job;
        while c.ready() && (c.in_flight() as u32) < job.window {
            if job.iterations > 0 && self.t.submitted >= job.iterations {
                return;
            }
            let op = match job.ops[self.rng.below(job.ops.len() as u64) as usize] {
                args::Op::Read => Op::Read,
                args::Op::Write => Op::Write,
            };
            let span = job.sizes.max - job.sizes.min + 1;
            let size = job.sizes.min + self.rng.below(span);
            c.submit(op, self.sn, size);
            self.sn = self.sn.wrapping_add(1);
            self.t.submitted += 1;
        }
    }

    /// Takes the client's events into the tally and the audit; whether
    /// any answer came.
    fn take(&mut self, c: &mut IoDemoClient) -> Result<bool, String> {
        let mut heard = false;
        for e in c.events() {
            match e {
                IoDemoClientEvent::Connected => {
                    self.line(format!("iodemo_connected {}", self.job.server))
                }
                IoDemoClientEvent::Done {
                    op,
                    sn,
                    size,
                    corrupt,
                } => {
                    heard = true;
                    self.t.answered += 1;
                    if let Some(at) = corrupt {
                        self.t.corrupt += 1;
                        self.line(format!("corrupt {sn} {at}"));
                    }
                    if let Some(a) = self.audit.as_mut() {
                        a.record(Record {
                            session: self.session,
                            sn: u64::from(op == Op::Write) << 32 | u64::from(sn),
                            hash: size,
                        });
                    }
                }
                IoDemoClientEvent::Closed { reason, in_flight } => {
                    self.line(format!("iodemo_closed {reason}"));
                    self.t.forgotten += in_flight.len() as u64;
                    for (op, sn) in in_flight {
                        self.line(format!("iodemo_forgot {} {sn}", op.name()));
                    }
                }
            }
        }
        self.flush()?;
        Ok(heard)
    }

    fn line(&mut self, l: String) {
        if self.job.verbose || l.starts_with("iodemo_closed") || l.starts_with("corrupt") {
            println!("{l}");
        }
        if let Some(a) = self.audit.as_mut() {
            a.event(format_args!("{l}"));
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        match self.audit.as_mut() {
            Some(a) => a.flush(),
            None => Ok(()),
        }
    }

    fn status(&self) -> String {
        let t = &self.t;
        format!(
            "{} sent, {} answered, {} left unanswered by the server at disconnects, \
             {} corrupt, {} connections",
            t.submitted, t.answered, t.forgotten, t.corrupt, t.connections
        )
    }
}
