//! `iomsg`: io_demo-style server and client over UCX, TCP or Unix
//! sockets, `info`, and `soak`, the field report's reproduction, in one
//! command.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cmd::client::{ClientArgs, CLIENT_HELP};
#[cfg(feature = "ucx")]
use cmd::hostile::HostileArgs;
use cmd::server::{server_help, ServerArgs};
use cmd::soak::{soak_help, SoakArgs};
#[cfg(feature = "ucx")]
use iomsg_cli::hostile;

#[derive(Parser)]
#[command(
    name = "iomsg",
    max_term_width = 100,
    version,
    about = "io_msgs over UCX, TCP or Unix sockets that are never lost unnoticed",
    long_about = "io_msgs over UCX tag matching or active messages, TCP or Unix sockets \
                  (--transport), with sequence numbers, acknowledgements and replay: a server \
                  restart or a reconnect loses nothing unnoticed, and with replay on loses \
                  nothing.\n\nSubcommands: `server` and `client` (io_demo's \
                  options), `info` (which UCX), `soak` (a server killed again and again while \
                  clients reconnect, judged from audit files), `hostile` (raw UCX traffic \
                  aimed at a server)."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Take io_msgs from clients: writes are taken, reads answered with
    /// io_demo's pattern.
    #[command(after_help = server_help())]
    Server(ServerArgs),
    /// Send io_demo's workload (random reads and writes of random sizes)
    /// to one or more servers and check every reply's bytes.
    #[command(after_help = CLIENT_HELP)]
    Client(ClientArgs),
    /// Which UCX this is: its version, the libucp file loaded, the
    /// transports it offers here; and iomsg's protocol version.
    Info,
    /// Kill the server again and again while clients reconnect (and, with
    /// --faults, kill, pause and cut off clients, pause the server, let a
    /// hostile peer loose); judge the run from the processes' audit files
    /// and exit statuses.
    #[command(args_override_self = true, after_help = soak_help())]
    Soak(Box<SoakArgs>),
    /// Attack a server with raw UCX traffic (random tags, wrong keys,
    /// broken and oversized frames, stalls, floods) and print what it sent
    /// and what the server answered.
    #[cfg(feature = "ucx")]
    #[command(after_help = hostile::modes_help())]
    Hostile(HostileArgs),
}

fn main() -> ExitCode {
    // Before any thread and any UCX context: a restarted server listens on
    // its port again at once, and the open-files limit admits a full
    // connection table.
    #[cfg(feature = "ucx")]
    {
        let ucx = iomsg_cli::common::ucx_config(false, false, iomsg_lab::transport::Api::default());
        for (name, value) in ucx.environment() {
            if std::env::var_os(name).is_none() {
                std::env::set_var(name, value);
            }
        }
        iomsg_ucx::raise_open_files(ucx.open_files());
    }
    warn_renamed_flags();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            // One clear line, exit code 2.
            let text = e.to_string();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad arguments")
                .trim_start_matches("error: ");
            eprintln!("iomsg: {first} (see `iomsg --help`)");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Cmd::Server(a) => cmd::server::run_server(a),
        Cmd::Client(a) => cmd::client::run_client(a),
        Cmd::Info => cmd::info::run_info(),
        Cmd::Soak(a) => cmd::soak::run_soak(*a),
        #[cfg(feature = "ucx")]
        Cmd::Hostile(a) => cmd::hostile::run_hostile(a),
    }
}

/// Flags renamed for what they mean, still taken under their old names
/// for one release: each old name used is told once on stderr.
fn warn_renamed_flags() {
    const RENAMED: [(&str, &str); 3] = [
        ("--tls", "--ucx-tls"),
        ("--hosts", "--network"),
        ("--report", "--report-json"),
    ];
    for arg in std::env::args().skip(1) {
        let name = arg.split('=').next().unwrap_or("");
        if let Some((old, new)) = RENAMED.iter().find(|(old, _)| *old == name) {
            eprintln!("iomsg: {old} is now {new}; the old name goes in the next release");
        }
    }
}
