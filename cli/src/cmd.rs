//! One module per subcommand: its arguments, its help and its run.

pub(crate) mod client;
pub(crate) mod common;
#[cfg(feature = "ucx")]
pub(crate) mod hostile;
pub(crate) mod info;
pub(crate) mod server;
pub(crate) mod soak;
