//! The hosts of a soak across hosts, before and after the run: the
//! program copied, the clocks measured and UCX asked before; the files
//! fetched, the transports used read and the scratch directories removed
//! after.

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::super::lab::{Remote, World};
use super::super::supervision::LostHost;
use super::{
    answers, clean, clock_offset, collect, out_file, quote, run_bounded, ship, transports_used,
    ucx_on, HostReport, RemoteJob,
};

/// Readies every host: the program copied with `--ship`, the clock
/// offset measured, `iomsg info` run; returns what the processes need and
/// the hosts' reports.
///
/// # Errors
///
/// A host did not answer, or the program is not there.
pub(in crate::soak) fn prepare(
    job: &RemoteJob,
    local_exe: &Path,
    tls: &str,
    clients: usize,
) -> Result<(Remote, Vec<HostReport>), String> {
    let exe = job.exe_on_hosts(local_exe);
    println!(
        "iomsg soak: the hosts run {exe}{}",
        if job.ship {
            " (copied there first)"
        } else {
            ""
        }
    );
    // The scratch directory is the soak's own (removed at the end): one
    // already there is refused, on every host, before anything is made.
    for host in job.hosts() {
        let out = run_bounded(
            job.on(
                &host,
                &format!("if [ -e {} ]; then echo exists; fi", quote(&job.dir)),
            ),
            Duration::from_secs(30),
            &format!("reaching {host}"),
        )?;
        if String::from_utf8_lossy(&out).contains("exists") {
            return Err(format!(
                "--remote-dir {} already exists on {host}: give a new directory (the soak makes it and removes it at the end)",
                job.dir
            ));
        }
    }
    // From here the scratch directories are the soak's: a failure
    // removes them.
    let ready = ready_hosts(job, local_exe, &exe, tls, clients).and_then(|hosts| {
        let addr = job.server_address()?;
        Ok((hosts, addr))
    });
    if ready.is_err() {
        for host in job.hosts() {
            let _ = clean(job, &host);
        }
    }
    let (hosts, addr) = ready?;
    Ok((
        Remote {
            job: job.clone(),
            addr,
            exe,
        },
        hosts,
    ))
}

/// Each host readied: the program copied (`--ship`), its clock offset
/// measured, `iomsg info` run there.
fn ready_hosts(
    job: &RemoteJob,
    local_exe: &Path,
    exe: &str,
    tls: &str,
    clients: usize,
) -> Result<Vec<HostReport>, String> {
    let env: Vec<(String, String)> = if tls.is_empty() {
        Vec::new()
    } else {
        vec![("UCX_TLS".to_string(), tls.to_string())]
    };
    let mut hosts = Vec::new();
    for host in job.hosts() {
        if job.ship {
            ship(job, &host, local_exe)?;
        }
        let offset_us = clock_offset(job, &host)?;
        let (ucx_version, transports_offered) = ucx_on(job, &host, exe, &env).map_err(|e| {
            format!("{e}\n(is {exe} there and runnable? give --remote-exe PATH, or --ship to copy this program)")
        })?;
        let mut roles = Vec::new();
        if host == job.server {
            roles.push("server".to_string());
        }
        roles.extend(
            (0..clients)
                .filter(|&k| job.client_host(k) == host)
                .map(|k| format!("client-{k}")),
        );
        println!(
            "iomsg soak: {host} ({}): clock {:+.1} ms, UCX {ucx_version}, offers {}",
            roles.join(", "),
            offset_us as f64 / 1e3,
            transports_offered.join(" ")
        );
        hosts.push(HostReport {
            host,
            roles,
            clock_offset_ms: offset_us as f64 / 1e3,
            ucx_version,
            transports_offered,
            ..HostReport::default()
        });
    }
    Ok(hosts)
}

/// After the run: every host's files fetched into `audit_dir` (all
/// first, since the hosts may share one file system), then the scratch
/// directories removed; the transports used and the losses noted in
/// `hosts`.
pub(in crate::soak) fn finish(
    job: &RemoteJob,
    world: &World,
    audit_dir: &Path,
    hosts: &mut [HostReport],
    lost: &[LostHost],
) {
    for h in hosts.iter_mut() {
        let names: Vec<String> = world
            .instances
            .iter()
            .filter(|i| i.host.as_deref() == Some(&h.host))
            .map(|i| i.name.clone())
            .chain(
                world
                    .clients
                    .iter()
                    .filter(|c| c.host.as_deref() == Some(&h.host))
                    .map(|c| c.name.clone()),
            )
            .collect();
        let lost_here = lost.iter().any(|l| l.host == h.host);
        let fetched = if lost_here && !answers(job, &h.host, Duration::from_secs(5)) {
            Err(format!(
                "{} still does not answer: its files were not fetched",
                h.host
            ))
        } else {
            collect(job, &h.host, &names, audit_dir).map(|_| ())
        };
        if let Err(e) = fetched {
            eprintln!("soak: {e}");
            h.collect_error = Some(e);
        }
        for n in &names {
            let text = fs::read_to_string(out_file(audit_dir, n)).unwrap_or_default();
            for t in transports_used(&text) {
                if !h.transports_used.contains(&t) {
                    h.transports_used.push(t);
                }
            }
        }
        h.lost = lost
            .iter()
            .find(|l| l.host == h.host)
            .map(|l| l.why.clone());
    }
    // A host whose files could not be fetched keeps them.
    for h in hosts.iter().filter(|h| h.collect_error.is_none()) {
        if let Err(e) = clean(job, &h.host) {
            eprintln!("soak: {e}");
        }
    }
}

/// Each host's clock offset in microseconds, to take off its files'
/// times.
pub(in crate::soak) fn offset_us(hosts: &[HostReport], host: Option<&str>) -> i64 {
    host.and_then(|h| hosts.iter().find(|r| r.host == h))
        .map_or(0, |r| (r.clock_offset_ms * 1e3).round() as i64)
}

/// Removes the scratch directories on the hosts when dropped armed: a
/// run that ends early (an error, a signal) leaves nothing on them.
pub(in crate::soak) struct Scratch {
    job: Option<RemoteJob>,
}

impl Scratch {
    /// Armed for `job`'s hosts, if there are any.
    pub(in crate::soak) fn new(job: Option<&RemoteJob>) -> Scratch {
        Scratch { job: job.cloned() }
    }

    /// The run ended normally: [`finish`] removed them.
    pub(in crate::soak) fn disarm(&mut self) {
        self.job = None;
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(job) = &self.job {
            for h in job.hosts() {
                let _ = clean(job, &h);
            }
        }
    }
}
