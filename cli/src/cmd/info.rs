//! `iomsg info`: which UCX this is.

use std::process::ExitCode;

pub(crate) fn run_info() -> ExitCode {
    use std::io::Write as _;
    // A reader that stops early (`| head`) is no error of ours.
    let _ = std::io::stdout()
        .lock()
        .write_all(iomsg_lab::info::text().as_bytes());
    ExitCode::SUCCESS
}
