//! The network namespaces of `--hosts netns`: a server host and a host
//! per client on a bridge, link-local addresses; a client's link can be
//! cut and restored.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant as Wall};

/// The network namespaces of `--hosts netns`, deleted on drop.
pub struct Lab {
    /// The server's namespace.
    pub server_ns: String,
    /// Each client's namespace.
    pub client_ns: Vec<String>,
    /// The bridge (in the server's namespace).
    pub bridge: String,
    /// Each client's device (in its namespace).
    pub client_dev: Vec<String>,
}

/// The lab's network (`/24`); the server is `.1`.
pub const LAB_NET: &str = "169.254.78";
/// The server's port in the lab.
pub const LAB_PORT: u16 = 13337;

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Lab {
    /// Makes the namespaces and links, and waits until they are up.
    ///
    /// # Errors
    ///
    /// Not root, no iproute2, or a link that never came up.
    pub fn new(clients: usize) -> Result<Lab, String> {
        let id = std::process::id();
        let mut lab = Lab {
            server_ns: format!("iomsoak{id}s"),
            client_ns: Vec::new(),
            bridge: format!("iombr{id}"),
            client_dev: Vec::new(),
        };
        ip(&["netns", "add", &lab.server_ns])
            .map_err(|e| format!("--hosts netns needs root and iproute2: {e}"))?;
        let s = lab.server_ns.clone();
        ip(&["-n", &s, "link", "set", "lo", "up"])?;
        ip(&["-n", &s, "link", "add", &lab.bridge, "type", "bridge"])?;
        ip(&[
            "-n",
            &s,
            "addr",
            "add",
            &format!("{LAB_NET}.1/24"),
            "dev",
            &lab.bridge,
        ])?;
        ip(&["-n", &s, "link", "set", &lab.bridge, "up"])?;
        for k in 0..clients {
            let ns = format!("iomsoak{id}c{k}");
            ip(&["netns", "add", &ns])?;
            lab.client_ns.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            let (cdev, sdev) = (format!("ioc{id}x{k}"), format!("ios{id}x{k}"));
            ip(&[
                "link", "add", &cdev, "netns", &ns, "type", "veth", "peer", "name", &sdev, "netns",
                &s,
            ])?;
            lab.client_dev.push(cdev.clone());
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{LAB_NET}.{}/24", k + 2),
                "dev",
                &cdev,
            ])?;
            ip(&["-n", &s, "link", "set", &sdev, "master", &lab.bridge])?;
            ip(&["-n", &ns, "link", "set", &cdev, "up"])?;
            ip(&["-n", &s, "link", "set", &sdev, "up"])?;
        }
        // UCX lists a device only once its link is up at both ends.
        let mut devices = vec![(lab.server_ns.clone(), lab.bridge.clone())];
        devices.extend(
            lab.client_ns
                .iter()
                .cloned()
                .zip(lab.client_dev.iter().cloned()),
        );
        for (ns, dev) in devices {
            let deadline = Wall::now() + Duration::from_secs(10);
            loop {
                let out = Command::new("ip")
                    .args(["-n", &ns, "link", "show", "dev", &dev])
                    .output()
                    .map_err(|e| e.to_string())?;
                let text = String::from_utf8_lossy(&out.stdout);
                if text.contains("state UP") && !text.contains("NO-CARRIER") {
                    break;
                }
                if Wall::now() > deadline {
                    return Err(format!("{dev} in {ns} never came up"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(Duration::from_secs(1));
        Ok(lab)
    }

    /// Takes client `client`'s link up or down.
    ///
    /// # Errors
    ///
    /// `ip` failed.
    pub fn link(&self, client: usize, up: bool) -> Result<(), String> {
        ip(&[
            "-n",
            &self.client_ns[client],
            "link",
            "set",
            &self.client_dev[client],
            if up { "up" } else { "down" },
        ])
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes the links in it.
        for ns in self.client_ns.iter().chain([&self.server_ns]) {
            let _ = ip(&["netns", "delete", ns]);
        }
    }
}
