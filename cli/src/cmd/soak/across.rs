//! `iomsg soak`'s options for a run across hosts.

use std::path::PathBuf;

use iomsg_lab::soak::remote::{check_host, default_dir, parse_hosts_file, Launcher, RemoteJob};

/// `iomsg soak --help`'s paragraph on the soak across hosts.
pub const HELP: &str = "\
    Across hosts (--launcher): each process runs on its host under a small sh wrapper \
    that prints its pid there and its exit status; the server is SIGKILLed there by \
    that pid through the launcher and restarted; output streams back into the audit \
    directory; the audit files are fetched from --remote-dir at the end and judged as \
    above, each host's times moved by its clock offset (measured before the run). The \
    report's `hosts` gives each host's roles, clock offset, UCX version, the \
    transports UCX offers there and those its endpoints used. A host that stops \
    answering (ssh and pdsh give up after 5 missed keepalives, 1 s apart) ends the \
    run with a fail naming it. Example: iomsg soak --launcher ssh --server srv01 \
    --client cn01 cn02 --kills 12";

/// Where and how a soak across hosts runs (`iomsg soak --launcher`).
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Across hosts (--launcher)")]
pub struct LauncherArgs {
    /// Run the server and the clients on other hosts, started with `ssh`,
    /// `pdsh -R ssh` or Slurm's `srun` (one step per process, inside an
    /// allocation); the server is SIGKILLed and restarted on its host,
    /// the audit files fetched at the end.
    #[arg(long, value_name = "ssh|pdsh|slurm", value_parser = Launcher::parse)]
    pub launcher: Option<Launcher>,
    /// The server's host (as the launcher names it: an ssh destination, a
    /// pdsh host, a Slurm node).
    #[arg(long, value_name = "HOST", requires = "launcher")]
    pub server: Option<String>,
    /// The clients' hosts; client K runs on the K-th, round the list
    /// (--clients defaults to their number).
    #[arg(long = "client", value_name = "HOST", num_args = 1.., requires = "launcher")]
    pub client_hosts: Vec<String>,
    /// A file of `server HOST` and `client HOST` lines instead.
    #[arg(long, value_name = "FILE", requires = "launcher", conflicts_with_all = ["server", "client_hosts"])]
    pub hosts_file: Option<PathBuf>,
    /// The address the clients dial [default: the server host's address
    /// as `ssh -G` resolves it; the node name with Slurm].
    #[arg(long, value_name = "ADDR", requires = "launcher")]
    pub server_addr: Option<String>,
    /// The server's port on its host [default: 13337].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// A scratch directory on every host for the audit files (and the
    /// program, with --ship); removed at the end (default
    /// `/tmp/iomsg-soak-<time>-<pid>`).
    #[arg(long, value_name = "DIR", requires = "launcher")]
    pub remote_dir: Option<String>,
    /// This program's path on the hosts [default: its path here, as on a
    /// shared file system].
    #[arg(
        long,
        value_name = "PATH",
        requires = "launcher",
        conflicts_with = "ship"
    )]
    pub remote_exe: Option<String>,
    /// Copy this program to the scratch directory on every host first
    /// (ssh: over the connection; pdsh: `pdcp`; Slurm: `sbcast`).
    #[arg(long, requires = "launcher")]
    pub ship: bool,
    /// An ssh configuration file (`ssh -F`), for ssh and pdsh.
    #[arg(long, value_name = "FILE", requires = "launcher")]
    pub ssh_config: Option<PathBuf>,
    /// An ssh option (`ssh -o OPT`, e.g. `Port=2222`), for ssh and pdsh;
    /// may be given again.
    #[arg(long, value_name = "OPT", requires = "launcher")]
    pub ssh_option: Vec<String>,
    /// The Slurm job whose allocation the steps run in [default: the one
    /// `srun` is in, `SLURM_JOB_ID`].
    #[arg(long, value_name = "ID", requires = "launcher")]
    pub slurm_job: Option<String>,
}

impl LauncherArgs {
    /// The run across hosts asked, if one is.
    ///
    /// # Errors
    ///
    /// Hosts missing or unfit, or the hosts file unreadable.
    pub fn job(&self) -> Result<Option<RemoteJob>, String> {
        let Some(launcher) = self.launcher else {
            if self.port.is_some() {
                return Err(
                    "--port is the server's port on its host with --launcher; a soak on \
                            this host picks a free port itself"
                        .into(),
                );
            }
            return Ok(None);
        };
        let (server, clients) = match &self.hosts_file {
            Some(f) => {
                let text = std::fs::read_to_string(f)
                    .map_err(|e| format!("--hosts-file {}: {e}", f.display()))?;
                parse_hosts_file(&text).map_err(|e| format!("--hosts-file {}: {e}", f.display()))?
            }
            None => {
                let server = self.server.clone().ok_or(
                    "--launcher needs --server HOST and --client HOST... (or --hosts-file FILE)",
                )?;
                if self.client_hosts.is_empty() {
                    return Err("--launcher needs at least one --client HOST".into());
                }
                (server, self.client_hosts.clone())
            }
        };
        for h in std::iter::once(&server).chain(&clients) {
            check_host(h)?;
        }
        if launcher == Launcher::Pdsh {
            // pdsh splits PDSH_SSH_ARGS_APPEND at blanks.
            let blank = |s: &str| s.chars().any(char::is_whitespace);
            if let Some(f) = self
                .ssh_config
                .as_ref()
                .filter(|f| blank(&f.to_string_lossy()))
            {
                return Err(format!(
                    "--ssh-config {}: pdsh cannot pass a path with blanks to ssh",
                    f.display()
                ));
            }
            if let Some(o) = self.ssh_option.iter().find(|o| blank(o)) {
                return Err(format!(
                    "--ssh-option {o:?}: pdsh cannot pass an option with blanks to ssh (write `Key=value`)"
                ));
            }
        }
        if let Some(o) = self.ssh_option.iter().find(|o| o.starts_with('-')) {
            return Err(format!(
                "--ssh-option {o:?}: give the option itself (`Port=2222`), it is passed as `-o OPT`"
            ));
        }
        Ok(Some(RemoteJob {
            launcher,
            server,
            clients,
            server_addr: self.server_addr.clone(),
            port: self.port.unwrap_or(13337),
            dir: self.remote_dir.clone().unwrap_or_else(default_dir),
            exe: self.remote_exe.clone(),
            ship: self.ship,
            ssh_config: self.ssh_config.clone(),
            ssh_options: self.ssh_option.clone(),
            slurm_job: self.slurm_job.clone(),
        }))
    }
}
