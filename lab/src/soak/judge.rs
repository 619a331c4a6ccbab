//! The soak's verdict and report: the audit files read and reconciled,
//! every process's end judged, the stalls measured, the report and the
//! picture written.

use std::fs;

use super::lab::{journal_dir, outbox_dir, World};
use super::remote::{fleet, HostReport};
use super::report::{
    self, ClientProcReport, EventReport, FaultReport, Files, HostileReport, InstanceReport,
    LongestReport, OnceReport, ServerReport, SoakConfig, StallReport, StallRow, UcxInfo,
};
use super::supervision::LostHost;
use super::verdict::{self, ClientEnd, Event, Kind, Life, ServerEnd};
use super::{faults, stall_bounds, Fault, Hosts, SoakJob, SoakReport, SAMPLE_EVERY};
use crate::audit::once::{self, OnceFigures};
use crate::audit::{self, ClientTrail, InstanceTrail, Sns};
use crate::plot;

/// What the run itself counted, for the verdict.
pub(super) struct VerdictInput<'a> {
    pub(super) kills: u32,
    pub(super) planned_kills: u32,
    pub(super) kills_us: &'a [u64],
    /// Client kills done for `--exactly-once`.
    pub(super) once_client_kills: u32,
    pub(super) seconds: f64,
    pub(super) t0: u64,
    /// The hosts (`--launcher`): clock offsets, UCX, losses.
    pub(super) hosts: &'a [HostReport],
    /// Hosts lost during the run.
    pub(super) lost: &'a [LostHost],
    /// The journal faults done (`--journal-faults`).
    pub(super) journal_faults: &'a [super::journal_faults::Done],
}

/// Seconds from `t0` to `us` (both microseconds since the epoch).
fn secs(t0: u64, us: u64) -> f64 {
    us.saturating_sub(t0) as f64 / 1e6
}

/// Reads the audit files, judges the run, writes the report and the
/// picture.
pub(super) fn verdict_and_report(
    job: &SoakJob,
    world: &World,
    plan: &[faults::Planned],
    events: &[Event],
    v: VerdictInput<'_>,
) -> Result<SoakReport, String> {
    let dir = &job.audit_dir;
    let (clients, instances, missing) = read_trails(job, world, events, v.hosts)?;
    let (figures, once, mut reasons) = if missing.is_empty() {
        reconcile(job, world, &clients, &instances)?
    } else {
        // Without a host's files no message of its processes can be
        // accounted for: the run is not reconciled.
        let mut reasons = vec![format!(
            "not reconciled: the files of {} could not be read",
            missing.join(", ")
        )];
        reasons.extend(
            v.lost
                .iter()
                .map(|l| format!("lost {} at {:.1} s: {}", l.host, secs(v.t0, l.at_us), l.why)),
        );
        (audit::Reconciled::default(), None, reasons)
    };
    run_reasons(
        job,
        world,
        (plan, events),
        &v,
        (&clients, missing.is_empty()),
        &mut reasons,
    );
    let server = judge_servers(job, world, &mut reasons, v.t0);
    let client_processes = judge_clients(world, &clients, &mut reasons, v.t0);
    let hostile_runs = judge_hostiles(job, world, &mut reasons, v.t0);
    let stall_report = judge_stalls(world, &clients, events, &mut reasons, v.t0);
    let fault_report = fault_report(job, plan, events, &v);
    let cuts: Vec<(usize, u64, u64)> = events
        .iter()
        .filter(|e| e.kind == Kind::LinkCut)
        .map(|e| (e.client.unwrap_or(0), e.from_us, e.to_us))
        .collect();
    let client_kills = events.iter().filter(|e| e.kind == Kind::ClientKill).count() as u64;
    let mut report = SoakReport {
        verdict: if reasons.is_empty() { "pass" } else { "fail" },
        reasons,
        msgs_per_second: figures.acked as f64 / v.seconds.max(1e-9),
        figures,
        server_kills: u64::from(v.kills),
        client_kills,
        exactly_once: once.map(|figures| OnceReport {
            server_kills: u64::from(v.kills),
            client_kills,
            figures,
            journal_faults: v.journal_faults.to_vec(),
        }),
        link_cuts: cuts.len() as u64,
        faults: fault_report,
        server,
        client_processes,
        hostile_runs,
        stalls: stall_report,
        seconds: v.seconds,
        ucx: ucx_info(job),
        hosts: v.hosts.to_vec(),
        config: config(job),
        files: Files {
            audit_dir: dir.display().to_string(),
            plot: job.plot.display().to_string(),
            records_kept: true,
        },
    };
    if report.verdict == "pass" && !job.keep_records {
        remove_records(job)?;
        report.files.records_kept = false;
    }
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    fs::write(&job.report, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", job.report.display()))?;
    let timeline = report::timeline(
        &report,
        &clients,
        job.clients,
        &instances,
        v.kills_us,
        &cuts,
        v.t0,
    );
    plot::write_svg(&timeline, &job.plot)?;
    Ok(report)
}

/// The run's reasons to fail besides the records': hosts whose files
/// could not be collected, clients that never connected, hosts lost,
/// kills, client kills and faults that did not all happen, journal
/// faults without a named outcome. `reconciled`: every host's files were
/// read.
fn run_reasons(
    job: &SoakJob,
    world: &World,
    (plan, events): (&[faults::Planned], &[Event]),
    v: &VerdictInput<'_>,
    (clients, reconciled): (&[(usize, audit::ClientTrail)], bool),
    reasons: &mut Vec<String>,
) {
    reasons.extend(v.hosts.iter().filter_map(|h| h.collect_error.clone()));
    if reconciled {
        // Said plainly, not only as the sns it left missing.
        for (c, (_, t)) in world.clients.iter().zip(clients) {
            let never = t.sessions.iter().all(|s| s.established == 0);
            if never && c.end != Some(ClientEnd::Killed) {
                reasons.push(format!(
                    "{} never connected to the server (its address or port, or a firewall?)",
                    c.name
                ));
            }
        }
    }
    if reconciled {
        reasons.extend(
            v.lost
                .iter()
                .map(|l| format!("lost {} at {:.1} s: {}", l.host, secs(v.t0, l.at_us), l.why)),
        );
    }
    if v.kills < v.planned_kills {
        reasons.push(format!(
            "only {} of {} kills happened",
            v.kills, v.planned_kills
        ));
    }
    for d in v.journal_faults {
        if d.outcome == super::journal_faults::Outcome::Unnamed {
            reasons.push(format!(
                "journal fault {} after kill {} (offset {}) had no named outcome ({} it must): {}",
                d.fault.name(),
                d.after_kill,
                d.offset,
                if d.fault.must_refuse() {
                    "a refusal naming the journal and the offset"
                } else {
                    "a start that says what it did"
                },
                d.said
            ));
        }
    }
    if job.exactly_once && v.once_client_kills < v.kills {
        reasons.push(format!(
            "only {} of {} client kills happened (one after each server kill)",
            v.once_client_kills, v.kills
        ));
    }
    let done_faults = events
        .iter()
        .filter(|e| !matches!(e.kind, Kind::ServerKill | Kind::ServerDied))
        .count()
        .saturating_sub(v.once_client_kills as usize);
    if done_faults < plan.len() {
        reasons.push(format!(
            "only {done_faults} of {} planned faults happened",
            plan.len()
        ));
    }
}

/// After a pass: the records (24 bytes per message and side) go, the
/// report holds what they showed; so do the journal and the outboxes,
/// the processes' state.
fn remove_records(job: &SoakJob) -> Result<(), String> {
    let dir = &job.audit_dir;
    for e in fs::read_dir(dir).map_err(|e| e.to_string())?.flatten() {
        let path = e.path();
        if path
            .extension()
            .is_some_and(|x| x == "records" || x == "uncommitted")
        {
            let _ = fs::remove_file(&path);
        } else if job.exactly_once
            && (path == journal_dir(dir) || (0..job.clients).any(|k| path == outbox_dir(dir, k)))
        {
            let _ = fs::remove_dir_all(&path);
        }
    }
    Ok(())
}

/// The figures, the exactly-once figures (with `--exactly-once`), and
/// the audit's reasons to fail.
type Judged = (audit::Reconciled, Option<OnceFigures>, Vec<String>);

/// Reconciles the records with the trails: every sn handed over once
/// with `--exactly-once`, the soak's usual rules otherwise.
fn reconcile(
    job: &SoakJob,
    world: &World,
    clients: &[(usize, ClientTrail)],
    instances: &[InstanceTrail],
) -> Result<Judged, String> {
    let dir = &job.audit_dir;
    let trails: Vec<ClientTrail> = clients.iter().map(|(_, t)| t.clone()).collect();
    let client_names: Vec<&str> = world.clients.iter().map(|c| c.name.as_str()).collect();
    let instance_names: Vec<&str> = world.instances.iter().map(|i| i.name.as_str()).collect();
    if job.exactly_once {
        let names = once::Names {
            clients: client_names.iter().map(ToString::to_string).collect(),
            instances: instance_names.iter().map(ToString::to_string).collect(),
        };
        let records = once::sorted_records(dir, &client_names, &instance_names)?;
        let (figures, o) = once::reconcile(&trails, &names, instances, records)?;
        let reasons = once::failures(&figures, &o, job.journal_faults);
        return Ok((figures, Some(o), reasons));
    }
    let records = audit::sorted_records(dir, &client_names, &instance_names)?;
    let figures = audit::reconcile(&trails, instances, records)?;
    let reasons = audit::failures(&figures, job.replay);
    Ok((figures, None, reasons))
}

/// Each client process's slot and trail, each server instance's, and
/// the processes whose files are missing (their hosts lost).
type Trails = (Vec<(usize, ClientTrail)>, Vec<InstanceTrail>, Vec<String>);

/// The clients' and the server instances' trails (records apart), their
/// times on this host's clock (`hosts`' offsets, `--launcher`). A
/// process whose host was lost may have no files: it is named, with an
/// empty trail.
fn read_trails(
    job: &SoakJob,
    world: &World,
    events: &[Event],
    hosts: &[HostReport],
) -> Result<Trails, String> {
    let mut missing = Vec::new();
    let mut absent = |name: &str, host: Option<&str>, e: String| {
        let lost = host.is_some_and(|h| {
            hosts
                .iter()
                .any(|r| r.host == h && (r.lost.is_some() || r.collect_error.is_some()))
        });
        if lost {
            missing.push(format!("{name} (on {})", host.unwrap_or("?")));
            Ok(())
        } else {
            Err(e)
        }
    };
    let dir = &job.audit_dir;
    // The ground truth.
    let mut clients: Vec<(usize, ClientTrail)> = Vec::new();
    // With --exactly-once a generation resumes its slot's session.
    let sns = if job.exactly_once {
        Sns::Resumed
    } else {
        Sns::FromZero
    };
    for c in &world.clients {
        let killed = c.end == Some(ClientEnd::Killed);
        let never_wrote = !dir.join(format!("{}.log", c.name)).exists()
            && !dir.join(format!("{}.records", c.name)).exists();
        let mut t = match audit::read_client_as(dir, &c.name, c.slot, sns) {
            Ok(t) => t,
            // Killed by the soak before it made its audit files (two kills
            // of one slot a few ms apart): it submitted nothing.
            Err(_) if killed && never_wrote && c.host.is_none() => ClientTrail::default(),
            Err(e) => {
                absent(&c.name, c.host.as_deref(), e)?;
                ClientTrail::default()
            }
        };
        t.unskew(fleet::offset_us(hosts, c.host.as_deref()));
        t.killed = c.end == Some(ClientEnd::Killed);
        clients.push((c.slot, t));
    }
    let mut instances: Vec<InstanceTrail> = Vec::new();
    for i in &world.instances {
        let mut trail = match audit::read_instance(dir, &i.name) {
            Ok(t) => t,
            Err(e) => {
                absent(&i.name, i.host.as_deref(), e)?;
                InstanceTrail::default()
            }
        };
        trail.unskew(fleet::offset_us(hosts, i.host.as_deref()));
        // The ends of its pauses: from then on it could serve again.
        let lived = i.from_us..=(if i.to_us == 0 { u64::MAX } else { i.to_us });
        trail.resumed_us = events
            .iter()
            .filter(|e| e.kind == Kind::ServerPause && lived.contains(&e.from_us))
            .map(|e| e.to_us)
            .collect();
        instances.push(trail);
    }
    Ok((clients, instances, missing))
}

/// (a) Every server instance ended as the soak ended it; (c) peak memory.
fn judge_servers(job: &SoakJob, world: &World, reasons: &mut Vec<String>, t0: u64) -> ServerReport {
    let at_s = |us: u64| secs(t0, us);
    let mut server = ServerReport {
        max_rss_bytes: job.max_server_rss,
        ..ServerReport::default()
    };
    for i in &world.instances {
        let judged = verdict::judge_server(&i.name, i.end);
        if let Err(e) = &judged {
            reasons.push(e.clone());
            // (Lost with its host: how it ended is not known.)
            server.died += u64::from(i.end != ServerEnd::HostLost);
        }
        server.peak_rss_bytes = server.peak_rss_bytes.max(i.peak_rss);
        server.instances.push(InstanceReport {
            name: i.name.clone(),
            from_s: at_s(i.from_us),
            to_s: at_s(i.to_us),
            end: match i.end {
                ServerEnd::Killed(e) => format!("killed by the soak ({e})"),
                ServerEnd::Died(e) => format!("died ({e})"),
                ServerEnd::Stopped(e) => format!("stopped at the end ({e})"),
                ServerEnd::Hung => "did not stop on SIGTERM".into(),
                ServerEnd::Unknown => "unknown".into(),
                ServerEnd::HostLost => "its host stopped answering".into(),
            },
            ok: judged.is_ok(),
            peak_rss_bytes: i.peak_rss,
        });
    }
    // (c) Peak memory.
    let peaks: Vec<(String, u64)> = world
        .instances
        .iter()
        .map(|i| (i.name.clone(), i.peak_rss))
        .collect();
    if let Err(e) = verdict::judge_rss(&peaks, job.max_server_rss) {
        reasons.push(e);
    }
    server
}

/// (d) Every client finished (or was killed by the soak).
fn judge_clients(
    world: &World,
    clients: &[(usize, ClientTrail)],
    reasons: &mut Vec<String>,
    t0: u64,
) -> Vec<ClientProcReport> {
    let at_s = |us: u64| secs(t0, us);
    let mut client_processes = Vec::new();
    for (c, (_, t)) in world.clients.iter().zip(clients) {
        let end = c.end.unwrap_or(ClientEnd::NeverFinished);
        let judged = verdict::judge_client(&c.name, end);
        if let Err(e) = &judged {
            reasons.push(e.clone());
        }
        client_processes.push(ClientProcReport {
            name: c.name.clone(),
            slot: c.slot,
            sessions: t
                .sessions
                .iter()
                .map(|s| format!("{:016x}", s.session))
                .collect(),
            from_s: at_s(c.from_us),
            to_s: c.to_us.map_or(0.0, at_s),
            end: match end {
                ClientEnd::Killed => "killed by the soak".into(),
                ClientEnd::Finished(e) => format!("finished ({e})"),
                ClientEnd::EndedEarly(e) => format!("ended by itself ({e})"),
                ClientEnd::NeverFinished => "never finished".into(),
                ClientEnd::HostLost => "its host stopped answering".into(),
            },
            ok: judged.is_ok(),
        });
    }
    client_processes
}

/// The hostile peer ran its attacks.
fn judge_hostiles(
    job: &SoakJob,
    world: &World,
    reasons: &mut Vec<String>,
    t0: u64,
) -> Vec<HostileReport> {
    let (dir, at_s) = (&job.audit_dir, |us: u64| secs(t0, us));
    let mut hostile_runs = Vec::new();
    for h in &world.hostiles {
        let (end, ok) = match h.end {
            Some(Ok(e)) if e.code == Some(0) => (format!("attack ran ({e})"), true),
            Some(Ok(e)) if e.code == Some(1) => (format!("could not run its attack ({e})"), false),
            Some(Ok(e)) => (format!("{e}"), false),
            Some(Err(why)) => (why.to_string(), false),
            None => ("still running at the end; killed".into(), false),
        };
        if !ok {
            let out = fs::read_to_string(dir.join(format!("{}.out", h.name))).unwrap_or_default();
            let last = out
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            reasons.push(format!("{}: {end}: {last}", h.name));
        }
        hostile_runs.push(HostileReport {
            name: h.name.clone(),
            from_s: at_s(h.from_us),
            to_s: at_s(h.to_us),
            end,
            ok,
        });
    }
    hostile_runs
}

/// (b) Acknowledgements resume within the bounds after each fault.
fn judge_stalls(
    world: &World,
    clients: &[(usize, ClientTrail)],
    events: &[Event],
    reasons: &mut Vec<String>,
    t0: u64,
) -> StallReport {
    let at_s = |us: u64| secs(t0, us);
    let bounds = stall_bounds();
    let lives: Vec<Life> = world
        .clients
        .iter()
        .zip(clients)
        .map(|(c, (_, t))| Life {
            name: c.name.clone(),
            slot: c.slot,
            from_us: c.from_us,
            to_us: c.to_us.unwrap_or(c.from_us),
            restarted: c.restarted,
            samples: t.samples.clone(),
        })
        .collect();
    let stalls = verdict::stalls(&lives, events, &bounds);
    let over: Vec<&verdict::Stall> = stalls.iter().filter(|s| s.over()).collect();
    for s in over.iter().take(10) {
        reasons.push(format!(
            "{}: no acknowledgement for {:.2} s from {:.1} s (after {}; bound {:.2} s, outages taken off {:.2} s)",
            s.client,
            s.stalled_ms / 1e3,
            at_s(s.from_us),
            s.kind.name(),
            s.bound_ms / 1e3,
            s.excused_ms / 1e3
        ));
    }
    if over.len() > 10 {
        reasons.push(format!(
            "and {} more stalls past their bound",
            over.len() - 10
        ));
    }
    StallReport {
        bounds,
        sample_interval_ms: SAMPLE_EVERY.as_secs_f64() * 1e3,
        longest: verdict::longest(&stalls)
            .into_iter()
            .map(|l| LongestReport {
                kind: l.kind,
                longest_ms: l.longest_ms,
                bound_ms: l.bound_ms,
                client: l.client,
                at_s: at_s(l.at_us),
                over_bound: l.over_bound,
            })
            .collect(),
        over_bound: over
            .iter()
            .take(100)
            .map(|s| StallRow {
                client: s.client.clone(),
                kind: s.kind,
                from_s: at_s(s.from_us),
                to_s: at_s(s.to_us),
                stalled_ms: s.stalled_ms,
                excused_ms: s.excused_ms,
                bound_ms: s.bound_ms,
            })
            .collect(),
    }
}

/// The faults asked, planned and done.
fn fault_report(
    job: &SoakJob,
    plan: &[faults::Planned],
    events: &[Event],
    v: &VerdictInput<'_>,
) -> FaultReport {
    let at_s = |us: u64| secs(v.t0, us);
    let mut fault_report = FaultReport {
        asked: job.faults.iter().map(|f| f.name().to_string()).collect(),
        planned: plan.len() as u64,
        ..FaultReport::default()
    };
    for e in events {
        if !matches!(e.kind, Kind::ServerKill | Kind::ServerDied) {
            *fault_report
                .done
                .entry(e.kind.name().to_string())
                .or_default() += 1;
        }
        fault_report.events.push(EventReport {
            kind: e.kind,
            client: e.client,
            from_s: at_s(e.from_us),
            to_s: at_s(e.to_us),
        });
    }
    // The planned faults only: --exactly-once's client kills are counted
    // apart (`client_kills`).
    let name = Kind::ClientKill.name().to_string();
    if let Some(n) = fault_report.done.get_mut(&name) {
        *n = n.saturating_sub(u64::from(v.once_client_kills));
        if *n == 0 {
            fault_report.done.remove(&name);
        }
    }
    fault_report
}

/// Which UCX ran.
#[cfg(not(feature = "ucx"))]
fn ucx_info(job: &SoakJob) -> UcxInfo {
    UcxInfo {
        version: "none (built without UCX)".into(),
        library_path: None,
        tls: job.tls.clone(),
        api: job.api.name().to_string(),
        transports: Vec::new(),
        carried_by: job.transport.name().to_string(),
    }
}

/// Which UCX ran.
#[cfg(feature = "ucx")]
fn ucx_info(job: &SoakJob) -> UcxInfo {
    let version = iomsg_ucx::version::ucx_version();
    let transports = iomsg_ucx::resources::transports()
        .map(|v| {
            v.into_iter()
                .map(|r| format!("{}/{}", r.transport, r.device))
                .collect()
        })
        .unwrap_or_default();
    UcxInfo {
        version: version.number(),
        library_path: version.library_path.map(|p| p.display().to_string()),
        tls: job.tls.clone(),
        api: job.api.name().to_string(),
        transports,
        carried_by: job.transport.name().to_string(),
    }
}

/// The run's configuration, for the report.
fn config(job: &SoakJob) -> SoakConfig {
    SoakConfig {
        clients: job.clients,
        kill_every_s: job.kill_every.as_secs_f64(),
        fault_every_s: job.fault_every.as_secs_f64(),
        seed: job.seed,
        replay: job.replay,
        exactly_once: job.exactly_once,
        hosts: match (&job.remote, job.hosts) {
            (Some(r), _) => format!("{} launcher", r.launcher.name()),
            (None, Hosts::Local) => "local".into(),
            (None, Hosts::Netns) => "netns".into(),
        },
        cut_links: job.faults.contains(&Fault::LinkCut),
        recreate_context: job.recreate_context,
        data_size: job.sizes.to_string(),
        ops: job
            .ops
            .iter()
            .map(|o| format!("{o:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(","),
        window: job.window,
    }
}
