//! Files to and from the hosts: the program shipped there, the audit
//! files fetched back, and the children's output read on threads.

use super::*;

/// Copies `local` (this program) to the scratch directory on `host`.
///
/// # Errors
///
/// The copy failed.
pub fn ship(job: &RemoteJob, host: &str, local: &Path) -> Result<(), String> {
    let dest = job.exe_on_hosts(local);
    let what = format!("copying {} to {host}:{dest}", local.display());
    let mkdir = run_bounded(
        job.on(host, &format!("mkdir -p {}", quote(&job.dir))),
        SHORT,
        &what,
    );
    mkdir?;
    let c = match job.launcher {
        Launcher::Ssh => {
            let mut c = job.on(
                host,
                &format!(
                    "cat > {q}.part && chmod +x {q}.part && mv {q}.part {q}",
                    q = quote(&dest)
                ),
            );
            let f = fs::File::open(local).map_err(|e| format!("{what}: {e}"))?;
            c.stdin(f);
            c
        }
        Launcher::Pdsh => {
            let mut c = Command::new("pdcp");
            c.env("PDSH_SSH_ARGS_APPEND", job.ssh_args().join(" "))
                .args(["-R", "ssh", "-w", host])
                .arg(local)
                .arg(&dest)
                .stdin(Stdio::null());
            c
        }
        Launcher::Slurm => {
            let mut c = Command::new("sbcast");
            if let Some(j) = &job.slurm_job {
                c.arg(format!("--jobid={j}"));
            }
            c.args(["--force"])
                .arg(local)
                .arg(&dest)
                .stdin(Stdio::null());
            c
        }
    };
    run_bounded(c, COLLECT, &what).map(|_| ())
}

/// Fetches the files `names.*` from the scratch directory on `host` into
/// `into`: a `tar` stream, base64 so that any launcher carries it,
/// decoded and unpacked here as it comes (nothing held in memory);
/// returns the bytes unpacked.
///
/// # Errors
///
/// The host did not answer, the stream was cut or bad, or it took more
/// than an hour.
pub fn collect(job: &RemoteJob, host: &str, names: &[String], into: &Path) -> Result<u64, String> {
    if names.is_empty() {
        return Ok(0);
    }
    let globs: Vec<String> = names.iter().map(|n| format!("{}.*", quote(n))).collect();
    let script = format!(
        "cd {} && tar -cf - {} 2>/dev/null | base64",
        quote(&job.dir),
        globs.join(" ")
    );
    let what = format!("fetching the files of {host}");
    let (mut fetch, stream, said) = stream_from(job, host, &script, &what)?;
    let mut unpack = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "base64 -d | tar -xvf - -C {}",
            quote(&into.display().to_string())
        ))
        .stdin(stream)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{what}: cannot run base64 and tar: {e}"))?;
    let listed = stdout_of(&mut unpack);
    let fetched = wait_bounded(&mut fetch, COLLECT);
    let unpacked = wait_bounded(&mut unpack, Duration::from_secs(60));
    let said = said.join().unwrap_or_default();
    let files = listed.join().unwrap_or_default();
    match (fetched, unpacked) {
        (Some(f), Some(u)) if f.success() && u.success() => {
            let n: u64 = String::from_utf8_lossy(&files)
                .lines()
                .filter_map(|f| fs::metadata(into.join(f.trim())).ok())
                .map(|m| m.len())
                .sum();
            Ok(n)
        }
        (None, _) => Err(format!("{what}: not done in {} s", COLLECT.as_secs())),
        (Some(f), _) if !f.success() => Err(format!(
            "{what}: {} said {f}: {}",
            job.launcher.program(),
            String::from_utf8_lossy(&said).trim()
        )),
        _ => Err(format!("{what}: the tar stream was cut or bad")),
    }
}

/// Starts `script` on `host` for its output as it comes: the launcher,
/// its stdout, and its stderr read on a thread ([`stderr_of`]).
///
/// # Errors
///
/// The launcher could not be started.
pub(super) fn stream_from(
    job: &RemoteJob,
    host: &str,
    script: &str,
    what: &str,
) -> Result<
    (
        Child,
        std::process::ChildStdout,
        std::thread::JoinHandle<Vec<u8>>,
    ),
    String,
> {
    let mut child = job
        .on(host, script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: cannot run {}: {e}", job.launcher.program()))?;
    let said = stderr_of(&mut child);
    let out = child
        .stdout
        .take()
        .ok_or_else(|| format!("{what}: no output"))?;
    Ok((child, out, said))
}

/// Reads `child`'s stderr (its first 64 KiB) on a thread.
pub(super) fn stderr_of(child: &mut Child) -> std::thread::JoinHandle<Vec<u8>> {
    let mut err = child.stderr.take();
    std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.take(64 * 1024).read_to_end(&mut b);
            // The rest is read and dropped, so that it never blocks.
            let _ = std::io::copy(e, &mut std::io::sink());
        }
        b
    })
}

/// Reads `child`'s stdout whole on a thread.
pub(super) fn stdout_of(child: &mut Child) -> std::thread::JoinHandle<Vec<u8>> {
    let mut out = child.stdout.take();
    std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut b);
        }
        b
    })
}
