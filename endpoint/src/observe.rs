//! Metrics and tracing for clients and servers: [`ClientObserver`] and
//! [`ServerObserver`], which [`Client`](crate::Client) and
//! [`Server`](crate::Server) (and so the async API) call for every
//! submit, delivery and event.
//!
//! Both report through the crates an application already uses: feature
//! `metrics` records to the [`metrics`](https://docs.rs/metrics) facade
//! (whatever recorder the application installed: Prometheus, StatsD, ...),
//! feature `tracing` emits [`tracing`](https://docs.rs/tracing) events.
//! With neither feature an observer is an empty struct and every call an
//! empty inline function: nothing is stored, counted or allocated.
//!
//! The observers are plain structs, usable without the facade: an
//! application that drives `iomsg_core::transport::{Client, Server}`
//! itself keeps one per client (per server) and calls
//!
//! - [`ClientObserver::on_submit`] after each accepted submit (skippable,
//!   with the clock read it needs, when
//!   [`ClientObserver::OBSERVES_SUBMITS`] is false),
//! - [`ClientObserver::on_event`] for each `ClientEvent` its handler gets,
//! - [`ClientObserver::on_stats`] after each poll,
//! - [`ServerObserver::on_deliver`] after its handler took a message,
//! - [`ServerObserver::on_event`] for each `ServerEvent`.
//!
//! `now` is the protocol's clock, the [`iomsg_core::Instant`] the driver
//! is polled with (microseconds since any fixed origin): the observer
//! measures durations between two of them, never against the wall clock.
//! Nothing allocates per message: the client keeps submit times in a
//! fixed ring of [`SUBMIT_RING`] entries (the facade's window).
//!
//! # Metrics (feature `metrics`)
//!
//! Handles are registered when an observer is made (at
//! `Client::connect`, `Server::bind`): install the recorder before.
//! None has labels.
//!
//! | name | type | unit | meaning |
//! | --- | --- | --- | --- |
//! | `iomsg_client_submitted_total` | counter | messages | submits accepted into the window |
//! | `iomsg_client_acked_total` | counter | messages | sns acknowledged: the server's application took them (`Acked`, or below a `Welcome`'s `resume_from`); given-up sns are not counted |
//! | `iomsg_client_replayed_total` | counter | messages | sns sent again on a new connection after a disconnect (the session's `ClientStats::replayed`) |
//! | `iomsg_client_not_replayed_total` | counter | messages | sns given up: in flight at a disconnect with replay off (`NotReplayed`) |
//! | `iomsg_client_reconnects_total` | counter | connections | handshakes completed after the session's first one |
//! | `iomsg_client_handshake_seconds` | histogram | seconds | from a connection attempt's `Connecting` to its `Established` |
//! | `iomsg_client_ack_latency_seconds` | histogram | seconds | from a message's submit to the ack that covers it (one sample per acknowledged sn) |
//! | `iomsg_server_delivered_total` | counter | messages | messages handed to the server's application (`deliver` returned) |
//! | `iomsg_server_duplicates_total` | counter | messages | sns that arrived again after their delivery (discarded) |
//! | `iomsg_server_live_loss_sns_total` | counter | messages | sns lost on a live connection: jumped over and confirmed lost (`LostLive`); a gap filled later is not counted |
//! | `iomsg_server_in_flight_loss_sns_total` | counter | messages | sns in flight at a disconnect that the client will not replay (`LostInFlight`) |
//! | `iomsg_server_sessions_opened_total` | counter | handshakes | handshakes accepted (`SessionOpened`): new sessions and resumed ones |
//! | `iomsg_server_rejected_total` | counter | connections | connections rejected and closed (`Rejected`) |
//!
//! # Tracing (feature `tracing`)
//!
//! Events under the targets `iomsg_endpoint::observe::client` and
//! `iomsg_endpoint::observe::server`; sessions and instances as 16 hex digits.
//!
//! | level | event | fields |
//! | --- | --- | --- |
//! | info | connecting | `epoch`, `attempt` |
//! | info | established | `epoch`, `instance`, `known`, `resume_from` |
//! | info | server restarted, unconfirmed sns replayed or given up | `previous`, `instance`, `start`, `end` |
//! | info | disconnected | `epoch`, `cause` |
//! | warn | failed (the client gave up for good) | `reason` |
//! | info | closed | |
//! | warn | not replayed: sns given up | `start`, `end`, `sns` |
//! | info | server: session opened (handshake) | `session`, `epoch`, `conn`, `known`, `resume_from` |
//! | warn | server: live gap, lost on a live connection, lost in flight | `session`, `start`, `end`, `sns` |
//! | warn | server: rejected, slow consumer | `conn`, `reason`/`session`, `detail`/`dropped` |
//! | info | server: closed, disconnected, handshake timeout, forgotten | `session` or `conn`, ... |
//! | debug | server: recovered, duplicate, stale, evicted | `session`, `sn`, ... |
//!
//! Nothing is emitted per message except at debug level (duplicates,
//! recovered gaps, stale frames).

mod client;
#[cfg(feature = "metrics")]
mod meter;
pub(crate) mod server;
#[cfg(feature = "tracing")]
mod trace;

pub use client::{ClientObserver, SUBMIT_RING};
pub use server::ServerObserver;

/// The metrics' names, as recorded with feature `metrics` (see the
/// module docs for their types, units and meanings).
pub mod names {
    /// Counter: submits accepted into the window.
    pub const CLIENT_SUBMITTED: &str = "iomsg_client_submitted_total";
    /// Counter: sns acknowledged (the server's application took them).
    pub const CLIENT_ACKED: &str = "iomsg_client_acked_total";
    /// Counter: sns sent again on a new connection after a disconnect.
    pub const CLIENT_REPLAYED: &str = "iomsg_client_replayed_total";
    /// Counter: sns given up (in flight at a disconnect, replay off).
    pub const CLIENT_NOT_REPLAYED: &str = "iomsg_client_not_replayed_total";
    /// Counter: handshakes completed after the session's first.
    pub const CLIENT_RECONNECTS: &str = "iomsg_client_reconnects_total";
    /// Histogram, seconds: from `Connecting` to `Established`.
    pub const CLIENT_HANDSHAKE: &str = "iomsg_client_handshake_seconds";
    /// Histogram, seconds: from submit to the ack that covers the sn.
    pub const CLIENT_ACK_LATENCY: &str = "iomsg_client_ack_latency_seconds";
    /// Counter: messages handed to the server's application.
    pub const SERVER_DELIVERED: &str = "iomsg_server_delivered_total";
    /// Counter: sns that arrived again after their delivery.
    pub const SERVER_DUPLICATES: &str = "iomsg_server_duplicates_total";
    /// Counter: sns lost on a live connection (confirmed).
    pub const SERVER_LIVE_LOSS: &str = "iomsg_server_live_loss_sns_total";
    /// Counter: sns in flight at a disconnect, never replayed.
    pub const SERVER_IN_FLIGHT_LOSS: &str = "iomsg_server_in_flight_loss_sns_total";
    /// Counter: handshakes accepted (new and resumed sessions).
    pub const SERVER_SESSIONS_OPENED: &str = "iomsg_server_sessions_opened_total";
    /// Counter: connections rejected and closed.
    pub const SERVER_REJECTED: &str = "iomsg_server_rejected_total";
}
