//! iomsg's proving ground, apart from the code it proves: the audit
//! records every process keeps (what each server instance handed to its
//! application, what each client submitted and released), the judges that
//! read them ([`audit`]), the soak that kills, pauses, cuts and attacks
//! the processes of the `iomsg` command and judges the run from those
//! records ([`soak`]: on this host, in network namespaces, across hosts),
//! the journal and outbox files of exactly once and the damage the soak
//! does to them ([`journal`], [`outbox`], [`durable`]), and the plots.
//!
//! The lab knows the command only by its command line and its files: what
//! the server under test may spend (its memory bound) is the caller's
//! input ([`soak::SoakJob::max_server_rss`]), not a constant imported
//! from the command.

pub mod args;
pub mod audit;
pub mod common;
pub mod durable;
pub mod info;
pub mod journal;
pub mod outbox;
pub mod plot;
pub mod soak;
pub mod transport;
