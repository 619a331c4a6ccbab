//! The soak from start to end: the job checked, the lab and the plan set
//! up, the supervision loop with its status line, the processes stopped,
//! then the verdict.

use std::fs;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as Wall};

use super::faults::{self, Fault};
use super::judge;
use super::lab::{free_port, has_hostile, Lab, Runner, LAB_PORT};
use super::remote::fleet;
use super::report::grouped;
use super::supervision::Supervisor;
use super::verdict::Kind;
use super::{silence_timeout, Hosts, SoakJob, SoakReport};
use crate::common::{self, epoch_us};

/// Runs the soak; returns the report (also written to `job.report`).
///
/// # Errors
///
/// The processes or namespaces could not be set up, or the files could
/// not be read or written.
pub fn run(job: &SoakJob) -> Result<SoakReport, String> {
    let exe = check(job)?;
    fs::create_dir_all(&job.audit_dir)
        .map_err(|e| format!("cannot create {}: {e}", job.audit_dir.display()))?;
    let stop = common::stop_on_signals()?;
    let (mut runner, mut hosts) = set_up(job, exe).inspect_err(|_| {
        // Nothing ran: the audit directory made above goes if empty.
        let _ = fs::remove_dir(&job.audit_dir);
    })?;
    // The hosts' scratch directories are the soak's from here on (set_up
    // refused any already there). Declared before the processes: dropped
    // after they are stopped.
    let mut scratch = fleet::Scratch::new(job.remote.as_ref());
    let planned = match job.duration {
        Some(d) => (d.as_secs_f64() / job.kill_every.as_secs_f64()).floor() as u32,
        None => job.kills,
    };
    let plan = plan(job, planned, &mut runner);
    let started = Wall::now();
    let t0 = runner.t0;
    let mut s = Supervisor::start(runner, plan, started)?;
    supervise(&mut s, &stop, planned)?;
    s.stop_all();
    let seconds = started.elapsed().as_secs_f64();
    let lab = s.runner.lab.take();
    drop(lab);
    if let Some(r) = &s.runner.remote {
        fleet::finish(&r.job, &s.world, &job.audit_dir, &mut hosts, &s.lost);
    }
    scratch.disarm();
    judge::verdict_and_report(
        job,
        &s.world,
        &s.plan,
        &s.events,
        judge::VerdictInput {
            kills: s.kills,
            // A run of --duration kills on its schedule until its end,
            // later while the server is paused: how many fit is not fixed
            // beforehand, but at least one must happen when one was due.
            planned_kills: match job.duration {
                Some(_) if planned > 0 => s.kills.max(1),
                Some(_) => 0,
                None => planned,
            },
            kills_us: &s.kills_us,
            once_client_kills: s.once_client_kills,
            journal_faults: &s.journal_faults,
            seconds,
            t0,
            hosts: &hosts,
            lost: &s.lost,
        },
    )
}

/// Checks what the job asks against this host and program; returns the
/// program's path.
fn check(job: &SoakJob) -> Result<std::path::PathBuf, String> {
    if job.clients == 0 {
        return Err("--clients must be at least 1".into());
    }
    if job.journal_faults && !job.exactly_once {
        return Err(
            "--journal-faults damages the journal of --exactly-once's server instances: add \
             --exactly-once"
                .into(),
        );
    }
    if job.exactly_once && !job.replay {
        return Err(
            "--exactly-once needs replay: a client that gives up its unacknowledged messages \
             at a reconnect loses them by design; leave out --replay off"
                .into(),
        );
    }
    if let Some(r) = &job.remote {
        check_remote(job, r)?;
    }
    if job.faults.contains(&Fault::LinkCut) && job.hosts != Hosts::Netns {
        return Err(
            "the link-cut fault needs --network netns (root): client links are veth pairs there"
                .into(),
        );
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    if job.faults.contains(&Fault::Hostile) && !has_hostile(&exe) {
        return Err(format!(
            "the hostile fault runs `{} hostile`, and this iomsg has no `hostile` subcommand: \
             leave hostile out of --faults",
            exe.display()
        ));
    }
    if job.audit_dir.exists()
        && fs::read_dir(&job.audit_dir)
            .map_err(|e| e.to_string())?
            .next()
            .is_some()
    {
        return Err(format!(
            "the audit directory {} is not empty: give a new one (--audit-dir)",
            job.audit_dir.display()
        ));
    }
    Ok(exe)
}

/// What a soak across hosts cannot do.
fn check_remote(job: &SoakJob, r: &super::remote::RemoteJob) -> Result<(), String> {
    let refuse = |what: &str| {
        Err(format!(
            "--launcher runs the server kills and client reconnects; {what} runs on one host only"
        ))
    };
    if !job.faults.is_empty() {
        return refuse("--faults");
    }
    if job.exactly_once {
        return refuse("--exactly-once");
    }
    if job.hosts == Hosts::Netns {
        return refuse("--network netns");
    }
    if r.clients.is_empty() {
        return Err("--launcher needs at least one --client HOST".into());
    }
    if r.port == 0 {
        return Err("--port 0: the clients must know the server's port; give one".into());
    }
    if r.dir.is_empty() || r.dir == "/" || !r.dir.starts_with('/') {
        return Err(format!(
            "--remote-dir {:?}: an absolute directory of its own (it is removed at the end)",
            r.dir
        ));
    }
    Ok(())
}

/// What the run's hosts are: their reports with `--launcher`.
type HostReports = Vec<super::remote::HostReport>;

/// The lab (namespaces for `--network netns`) or the hosts (`--launcher`),
/// the server's port, the faults log.
fn set_up(job: &SoakJob, exe: std::path::PathBuf) -> Result<(Runner<'_>, HostReports), String> {
    let lab = match job.hosts {
        Hosts::Netns => Some(Lab::new(job.clients)?),
        Hosts::Local => None,
    };
    let (remote, hosts) = match &job.remote {
        Some(r) => {
            let (remote, hosts) = fleet::prepare(r, &exe, &job.tls, job.clients)?;
            (Some(remote), hosts)
        }
        None => (None, Vec::new()),
    };
    let port = match (&lab, &job.remote) {
        (_, Some(r)) => r.port,
        (Some(_), None) => LAB_PORT,
        (None, None) => free_port()?,
    };
    let faults_log = if job.faults.is_empty() {
        None
    } else {
        let p = job.audit_dir.join("faults.log");
        Some(fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?)
    };
    Ok((
        Runner {
            job,
            exe,
            lab,
            remote,
            port,
            faults_log,
            t0: epoch_us(),
        },
        hosts,
    ))
}

/// The faults' plan for the run's span, each noted in the faults log.
fn plan(job: &SoakJob, planned: u32, runner: &mut Runner<'_>) -> Vec<faults::Planned> {
    let span = job
        .duration
        .unwrap_or_else(|| job.kill_every * planned.max(1));
    let plan = faults::plan(
        job.seed,
        &job.faults,
        &faults::PlanParams {
            span,
            every: job.fault_every,
            clients: job.clients,
            silence: silence_timeout(),
            cut_for: job.cut_for,
            hostile_for: job.fault_every * 2,
        },
    );
    for p in &plan {
        runner.note(format_args!(
            "planned {} client {} at {:.3}s for {:.3}s",
            p.fault.name(),
            p.client,
            p.at.as_secs_f64(),
            p.hold.as_secs_f64()
        ));
    }
    plan
}

/// The supervision loop, every 20 ms, until the run is over or a signal
/// stops it.
fn supervise(s: &mut Supervisor<'_>, stop: &AtomicBool, planned: u32) -> Result<(), String> {
    let mut progress = Progress {
        terminal: std::io::stderr().is_terminal(),
        last: Wall::now(),
        planned,
    };
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) {
            return Err(match s.job.remote {
                Some(_) => "interrupted: the processes on the hosts were stopped and the scratch \
                            directories removed"
                    .into(),
                None => "interrupted: the processes were stopped and the namespaces deleted".into(),
            });
        }
        let now = Wall::now();
        let kills_done = s.kills_done();
        if s.over(now, kills_done) {
            break;
        }
        s.replace_dead_server()?;
        s.sample_rss(now);
        s.kill_server_if_due(now, kills_done)?;
        s.kill_client_if_due(now)?;
        s.start_due_faults()?;
        s.end_due_faults()?;
        s.note_clients_ended();
        progress.show(s);
    }
    if progress.terminal {
        eprintln!();
    }
    Ok(())
}

/// The status line: a progress bar on a terminal, a line every
/// `--report-interval` otherwise.
struct Progress {
    terminal: bool,
    last: Wall,
    planned: u32,
}

impl Progress {
    fn show(&mut self, s: &Supervisor<'_>) {
        let job = s.job;
        let show = self.terminal || self.last.elapsed() >= job.report_interval;
        if !show || self.last.elapsed() < Duration::from_millis(200) {
            return;
        }
        let mut acked = 0;
        let mut rate = 0.0;
        let mut gaps = 0;
        for c in s.world.clients.iter().filter(|c| c.end.is_none()) {
            if let Some((a, r, g)) = client_status(&job.audit_dir.join(format!("{}.out", c.name))) {
                acked += a;
                rate += r;
                gaps += g;
            }
        }
        let t = s.started.elapsed().as_secs_f64();
        let nfaults = s
            .events
            .iter()
            .filter(|e| !matches!(e.kind, Kind::ServerKill | Kind::ServerDied))
            .count()
            .saturating_sub(s.once_client_kills as usize);
        let (kills, planned) = (s.kills, self.planned);
        let (bar_kills, line_kills) = if job.exactly_once {
            let n = s.once_client_kills;
            (format!("  client kills {n}"), format!(" client_kills={n}"))
        } else {
            (String::new(), String::new())
        };
        if self.terminal {
            let width = 24usize;
            let filled = (kills as usize * width)
                .checked_div(planned.max(1) as usize)
                .unwrap_or(0)
                .min(width);
            eprint!(
                "\r[{}{}] kills {kills}/{planned}{bar_kills}  faults {nfaults}/{}  {t:5.1} s  {:>9} msg/s  acked {}  gaps {gaps}   ",
                "#".repeat(filled),
                ".".repeat(width - filled),
                s.plan.len(),
                grouped(rate as u64),
                grouped(acked),
            );
        } else {
            eprintln!(
                "soak: t={t:.1}s kills={kills}/{planned}{line_kills} faults={nfaults}/{} acked={acked} rate={rate:.0} msg/s gaps={gaps}",
                s.plan.len()
            );
        }
        self.last = Wall::now();
    }
}

/// How much of a client's output the status line reads: its end, which
/// holds the last few status lines (one every 250 ms), whatever the run's
/// length, even past UCX's log lines of a server outage (`--launcher`
/// runs log at UCX's info level: a retry line per connection attempt).
const STATUS_TAIL: u64 = 64 * 1024;

/// The last `status` line of a client's output: acked so far, rate, and
/// the sns it gave up so far.
fn client_status(path: &Path) -> Option<(u64, f64, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(STATUS_TAIL)))
        .ok()?;
    let mut tail = Vec::new();
    f.take(STATUS_TAIL).read_to_end(&mut tail).ok()?;
    let text = String::from_utf8_lossy(&tail);
    // A line still being written (streamed from another host, say) is
    // left for the next look.
    let whole = text.rsplit_once('\n').map_or("", |(w, _)| w);
    // (UCX's log lines share the output, one may lack its newline.)
    let line = whole
        .lines()
        .rev()
        .find_map(|l| l.find("status t=").map(|at| &l[at..]))?;
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
    };
    Some((
        field("acked")? as u64,
        field("rate")?,
        field("not_replayed")? as u64 + field("reads_corrupt")? as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_is_the_last_whole_one() {
        let dir = std::env::temp_dir().join(format!("iomsg-status-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("client-0.out");
        let line = |acked: u64| {
            format!("status t=1.0 submitted=9 acked={acked} rate=5 restarts=0 disconnects=0 not_replayed=1 reads_corrupt=2\n")
        };
        fs::write(&p, format!("{}noise\nUCX INFO ep 0x7f{}", line(3), line(7))).unwrap();
        assert_eq!(client_status(&p), Some((7, 5.0, 3)));
        // A line still arriving (cut mid-way) is not read.
        fs::write(&p, format!("{}status t=2.0 submitted=12 acked=1", line(7))).unwrap();
        assert_eq!(client_status(&p), Some((7, 5.0, 3)));
        fs::remove_dir_all(&dir).unwrap();
    }
}
