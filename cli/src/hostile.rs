//! `iomsg hostile`: the project's own hostile peer (raw UCX traffic aimed
//! at a server) run from the command line, as the fault soak runs it.
//!
//! ```text
//! iomsg hostile --server ADDR:PORT [--modes LIST|all] [--seed N] [--duration 10s] [--conns N]
//!               [--api am|tag] [--io-demo]
//! ```
//!
//! Exit status 0 when the attack ran (whatever the server did), 1 when it
//! could not run at all (no UCX worker, no server answering), 2 on a usage
//! error.

use std::net::SocketAddr;
use std::time::Duration;

use iomsg_ucx::hostile::{self, Attack, Mode, Report};

/// What `iomsg hostile` is asked to do.
#[derive(Clone, Debug)]
pub struct HostileJob {
    /// The server attacked.
    pub server: SocketAddr,
    /// The modes.
    pub modes: Vec<Mode>,
    /// Seed of the run's choices.
    pub seed: u64,
    /// How long to attack.
    pub duration: Duration,
    /// Connections a flood opens at once.
    pub conns: usize,
    /// The UCX API the server uses.
    pub api: iomsg_lab::transport::Api,
    /// The protocol the server speaks.
    pub protocol: hostile::Protocol,
}

/// `--modes`: `all` or names separated by commas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Modes(pub Vec<Mode>);

impl core::str::FromStr for Modes {
    type Err = String;
    fn from_str(s: &str) -> Result<Modes, String> {
        Mode::list(s).map(Modes)
    }
}

/// The modes, one line each, for `--help`.
pub fn modes_help() -> String {
    let mut s = String::from("Modes (--modes, comma-separated, or `all`):\n");
    for m in Mode::ALL {
        s.push_str(&format!("  {:<18} {}\n", m.name(), m.help()));
    }
    s.push_str(
        "\nExit status: 0 when the attack ran (whatever the server did), 1 when it could \
         not run at all, 2 on a usage error.",
    );
    s
}

/// Runs the attack.
///
/// # Errors
///
/// The attack could not run at all (see [`hostile::run`]).
pub fn run(job: &HostileJob) -> Result<Report, String> {
    if job.conns == 0 || job.conns > hostile::MAX_CONNS {
        return Err(format!("--conns must be 1 to {}", hostile::MAX_CONNS));
    }
    hostile::run(&Attack {
        server: job.server,
        modes: job.modes.clone(),
        seed: job.seed,
        duration: job.duration,
        conns: job.conns,
        api: job.api,
        protocol: job.protocol,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_take_all_or_a_list_and_the_help_names_every_mode() {
        assert_eq!("all".parse::<Modes>(), Ok(Modes(Mode::ALL.to_vec())));
        assert_eq!(
            "flood,stream-garbage".parse::<Modes>(),
            Ok(Modes(vec![Mode::Flood, Mode::StreamGarbage]))
        );
        assert!("flood,bogus".parse::<Modes>().is_err());
        let help = modes_help();
        for m in Mode::ALL {
            assert!(help.contains(m.name()), "--help lacks {m}");
        }
    }
}
