//! Hosts for the soak across hosts, made on this machine: a control
//! network namespace (where the soak runs) with a bridge, and a host
//! namespace per role joined to it by a veth pair, each running its own
//! OpenSSH server on a link-local address with keys made for the test.
//! Everything is removed on drop: the processes left in the host
//! namespaces (by pid), the namespaces, the scratch directory.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The lab.
pub struct SshLab {
    /// Scratch directory: keys, configurations, the test's files.
    pub dir: PathBuf,
    /// The namespace the soak runs in.
    pub ctl: String,
    /// The host namespaces, `h0`, `h1`, ... in the ssh configuration.
    pub hosts: Vec<String>,
    /// The bridge-side end of each host's link (in `ctl`).
    pub links: Vec<String>,
    /// Each host's device (in its namespace).
    pub devices: Vec<String>,
    /// The ssh configuration naming the hosts.
    pub config: PathBuf,
    sshd: Vec<Child>,
    made_run_sshd: bool,
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// libfaketime (Debian's libfaketime), for hosts with their clocks off.
pub const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Why the lab cannot be made here (to skip), if it cannot.
pub fn unavailable() -> Option<String> {
    for p in ["/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"] {
        if !Path::new(p).exists() {
            return Some(format!(
                "{p} is missing (Debian's openssh-server, openssh-client)"
            ));
        }
    }
    let probe = format!("iomsgsshprobe{}", std::process::id());
    if run("ip", &["netns", "add", &probe]).is_err() {
        return Some("needs root and `ip netns` (iproute2) to make network namespaces".into());
    }
    let _ = run("ip", &["netns", "delete", &probe]);
    None
}

impl SshLab {
    /// Makes `n` hosts on `169.254.SUBNET.0/24` (host `i` is `.i+1`, the
    /// control namespace `.254`), `tag` naming its namespaces and links.
    pub fn new(tag: &str, subnet: u8, n: usize) -> Result<SshLab, String> {
        SshLab::with_clocks(tag, subnet, n, &[])
    }

    /// The same, with host `i` of each `(i, seconds)` in `skews` running
    /// a clock that many seconds off: its sshd gives its sessions
    /// libfaketime (the wall clock only; monotonic time is left alone).
    pub fn with_clocks(
        tag: &str,
        subnet: u8,
        n: usize,
        skews: &[(usize, i32)],
    ) -> Result<SshLab, String> {
        let id = std::process::id();
        let dir = std::env::temp_dir().join(format!("iomsg-sshlab-{id}-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let made_run_sshd = !Path::new("/run/sshd").exists();
        std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
        let mut lab = SshLab {
            config: dir.join("ssh_config"),
            dir,
            ctl: format!("ioml{id}{tag}c"),
            hosts: Vec::new(),
            links: Vec::new(),
            devices: Vec::new(),
            sshd: Vec::new(),
            made_run_sshd,
        };
        lab.network(tag, subnet, n)?;
        lab.keys()?;
        lab.servers(subnet, skews)?;
        Ok(lab)
    }

    fn network(&mut self, tag: &str, subnet: u8, n: usize) -> Result<(), String> {
        let id = std::process::id();
        let ctl = self.ctl.clone();
        let br = format!("imb{tag}{}", id % 100_000);
        run("ip", &["netns", "add", &ctl])?;
        run("ip", &["-n", &ctl, "link", "set", "lo", "up"])?;
        run("ip", &["-n", &ctl, "link", "add", &br, "type", "bridge"])?;
        run(
            "ip",
            &[
                "-n",
                &ctl,
                "addr",
                "add",
                &format!("169.254.{subnet}.254/24"),
                "dev",
                &br,
            ],
        )?;
        run("ip", &["-n", &ctl, "link", "set", &br, "up"])?;
        for i in 0..n {
            let ns = format!("ioml{id}{tag}h{i}");
            run("ip", &["netns", "add", &ns])?;
            self.hosts.push(ns.clone());
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
            let (dev, link) = (format!("imh{tag}{i}"), format!("imb{tag}{i}x{}", id % 1000));
            run(
                "ip",
                &[
                    "link", "add", &dev, "netns", &ns, "type", "veth", "peer", "name", &link,
                    "netns", &ctl,
                ],
            )?;
            self.devices.push(dev.clone());
            self.links.push(link.clone());
            run(
                "ip",
                &[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("169.254.{subnet}.{}/24", i + 1),
                    "dev",
                    &dev,
                ],
            )?;
            run("ip", &["-n", &ctl, "link", "set", &link, "master", &br])?;
            run("ip", &["-n", &ns, "link", "set", &dev, "up"])?;
            run("ip", &["-n", &ctl, "link", "set", &link, "up"])?;
        }
        Ok(())
    }

    fn keys(&self) -> Result<(), String> {
        for k in ["hostkey", "userkey"] {
            let f = self.dir.join(k);
            run(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-f", f.to_str().unwrap()],
            )?;
        }
        std::fs::copy(
            self.dir.join("userkey.pub"),
            self.dir.join("authorized_keys"),
        )
        .map_err(|e| e.to_string())?;
        Ok(())
    }

    fn servers(&mut self, subnet: u8, skews: &[(usize, i32)]) -> Result<(), String> {
        let d = self.dir.display().to_string();
        let mut client = String::new();
        for (i, ns) in self.hosts.clone().iter().enumerate() {
            let addr = format!("169.254.{subnet}.{}", i + 1);
            let cfg = self.dir.join(format!("sshd_{i}.conf"));
            let mut text = format!(
                "ListenAddress {addr}\nHostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PidFile {d}/sshd_{i}.pid\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            );
            if let Some((_, secs)) = skews.iter().find(|(h, _)| *h == i) {
                text.push_str(&format!(
                    "SetEnv LD_PRELOAD={FAKETIME} FAKETIME={secs:+}s FAKETIME_DONT_FAKE_MONOTONIC=1\n"
                ));
            }
            std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
            let log = std::fs::File::create(self.dir.join(format!("sshd_{i}.log")))
                .map_err(|e| e.to_string())?;
            let child = Command::new("ip")
                .args(["netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
                .arg(&cfg)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("cannot start sshd: {e}"))?;
            self.sshd.push(child);
            client.push_str(&format!("Host h{i}\n  HostName {addr}\n"));
        }
        client.push_str(&format!(
            "Host *\n  User root\n  IdentityFile {d}/userkey\n  IdentitiesOnly yes\n  \
             UserKnownHostsFile /dev/null\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n"
        ));
        std::fs::write(&self.config, client).map_err(|e| e.to_string())?;
        // Each server answers before the test goes on.
        for i in 0..self.hosts.len() {
            let until = Instant::now() + Duration::from_secs(15);
            loop {
                let ok = self
                    .in_ctl("ssh")
                    .args([
                        "-F",
                        self.config.to_str().unwrap(),
                        "-o",
                        "BatchMode=yes",
                        "-o",
                        "LogLevel=ERROR",
                    ])
                    .arg(format!("h{i}"))
                    .arg("true")
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|o| o.status.success());
                if ok {
                    break;
                }
                if Instant::now() > until {
                    return Err(format!("sshd on h{i} never answered"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(())
    }

    /// `program` run in the control namespace.
    pub fn in_ctl(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ctl, program]);
        c
    }

    /// The pids of the processes in host `i`'s namespace.
    pub fn pids(&self, i: usize) -> Vec<i32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.hosts[i]])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    }
}

impl Drop for SshLab {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            let _ = c.kill();
            let _ = c.wait();
        }
        // What the test's sshd servers started and left (a session on a
        // host cut off, its process).
        for i in 0..self.hosts.len() {
            for pid in self.pids(i) {
                let _ = nix_kill(pid);
            }
        }
        for ns in self.hosts.iter().chain([&self.ctl]) {
            let _ = run("ip", &["netns", "delete", ns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.made_run_sshd {
            let _ = std::fs::remove_dir("/run/sshd");
        }
    }
}

/// SIGKILL to `pid`, one the lab's servers started.
fn nix_kill(pid: i32) -> Result<(), String> {
    run("kill", &["-KILL", &pid.to_string()])
}
