//! `iomsg hostile`: raw UCX traffic aimed at a server.

use std::process::ExitCode;
use std::time::Duration;

use iomsg_cli::hostile;

use super::common::duration;

#[derive(clap::Args)]
pub(crate) struct HostileArgs {
    /// The server's address, `ADDR:PORT`.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) server: std::net::SocketAddr,
    /// The modes, comma-separated, or `all` (listed below).
    #[arg(long, value_name = "LIST|all", default_value = "all")]
    pub(crate) modes: hostile::Modes,
    /// Seed of the run's choices (order, sizes, keys, delays).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// How long to attack (the teardown takes up to a few seconds more).
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = duration)]
    pub(crate) duration: Duration,
    /// Connections the flood opens at once (silent connections held: a
    /// sixteenth of it, at least 4).
    #[arg(long, default_value_t = 1100)]
    pub(crate) conns: usize,
    /// The UCX API the server uses (`am` or `tag`): the attack speaks it
    /// (the `am-*` modes send active messages whatever it is).
    #[arg(long, value_name = "am|tag", default_value_t = iomsg_lab::transport::Api::default())]
    pub(crate) api: iomsg_lab::transport::Api,
    /// The server speaks UCX io_demo's protocol (`iomsg server --io-demo`):
    /// connections open with io_demo's id exchange instead of iomsg's keys.
    #[arg(long)]
    pub(crate) io_demo: bool,
}

pub(crate) fn run_hostile(a: HostileArgs) -> ExitCode {
    if a.conns == 0 || a.conns > iomsg_ucx::hostile::MAX_CONNS {
        eprintln!(
            "iomsg hostile: --conns must be 1 to {}",
            iomsg_ucx::hostile::MAX_CONNS
        );
        return ExitCode::from(2);
    }
    let job = hostile::HostileJob {
        server: a.server,
        modes: a.modes.0,
        seed: a.seed,
        duration: a.duration,
        conns: a.conns,
        api: a.api,
        protocol: if a.io_demo {
            iomsg_ucx::hostile::Protocol::IoDemo
        } else {
            iomsg_ucx::hostile::Protocol::Iomsg
        },
    };
    match hostile::run(&job) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iomsg hostile: {e}");
            ExitCode::FAILURE
        }
    }
}
