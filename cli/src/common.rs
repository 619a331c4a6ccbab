//! What the server and the client share: the one clock, randomness from
//! the OS, the UCX settings. The audit record format is the lab's
//! ([`iomsg_lab::common`]).

use std::time::Instant as Wall;

use iomsg_core::Instant;
#[cfg(feature = "ucx")]
use iomsg_ucx::{Api, UcxConfig, WaitMode};

/// 64 random bits, non-zero, from the operating system
/// ([`iomsg_endpoint::random_u64`]): session ids, tokens and server instances,
/// never from `--seed`, so that the same command line started on many
/// hosts makes distinct sessions.
///
/// # Errors
///
/// The operating system gave no random bytes (the error says what it
/// said).
pub fn os_random() -> Result<u64, String> {
    iomsg_endpoint::random_u64()
        .map_err(|e| format!("no random bits from the operating system: {e}"))
}

/// The protocol's clock: microseconds since `start` (the project's one
/// clock, [`Instant::since`]).
pub fn clock(start: Wall) -> Instant {
    Instant::since(start)
}

/// The UCX transport's settings from the command line; `sleeps`: the
/// worker has an event fd to sleep on (every progress mode but busy
/// polling).
#[cfg(feature = "ucx")]
pub fn ucx_config(sleeps: bool, shared_memory: bool, api: Api) -> UcxConfig {
    UcxConfig::default()
        .api(api)
        .mode(if sleeps {
            WaitMode::Blocking
        } else {
            WaitMode::BusyPoll
        })
        .shared_memory(shared_memory)
}
