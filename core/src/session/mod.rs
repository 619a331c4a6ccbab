//! Client and server session state machines, without IO.
//!
//! In the style of quinn-proto: no clock, no RNG and no sockets here. Time
//! arrives as `now`, frames arrive through `handle_*` methods, and work comes
//! out of `poll_*` methods; the server's application is a [`ServerHandler`].
//!
//! The protocol rules implemented here (docs/protocol.md):
//!
//! * a session is one client's ordered stream of sns to one server; its id is
//!   chosen by the client and outlives connections and transports;
//! * the epoch counts connections within a session: the client increments it
//!   for every connection attempt and stamps it on every frame; the server
//!   discards frames of an older epoch than the session's current one;
//! * `Hello{base_sn, next_sn, replay}` / `Welcome{instance, resume_from, known}`
//!   resume a session: a server that knows the session answers its cumulative
//!   point (`base_sn <= resume_from <= next_sn`, anything else is a protocol
//!   error); one that does not (it restarted) starts the session at `base_sn`
//!   (`next_sn` when the client will not replay);
//! * a connection's frames arrive in order and its `Hello` comes first; a
//!   data frame before it is refused (`NotBound`) and sent again after the
//!   handshake, never delivered out of turn;
//! * the application's bytes ride in `Write` and `Read` frames: the client
//!   keeps them until acknowledged and replays them as they are; the
//!   server hands each new sn's bytes to its application once
//!   ([`ServerHandler::deliver`]) and lets it answer reads
//!   ([`ServerHandler::respond`]);
//! * every completion carries the cumulative ack; streamed writes are acked
//!   every K frames or T microseconds.
//!
//! Every sn that never reaches the server application is classified:
//! *lost on a live connection* (a later frame of the same epoch jumped over
//! it: a transport bug, reported at once) or *in flight at disconnect*
//! (unacknowledged when a connection broke and not replayed).

mod backoff;
mod client;
mod server;

pub use backoff::Backoff;
pub use client::{
    Action, ClientConfig, ClientEvent, ClientSession, ClientState, ClientStats, DisconnectCause,
    FailReason, Message, MessageLimits, ProtocolError, ReadData, RequestOp, ResumePoint,
    SubmitError, Transmit,
};
pub use server::{
    malformed_detail, window_words, wire_error_code, Delivery, JournalError, JournalRecord,
    ReadRequest, ServerConfig, ServerCore, ServerEvent, ServerHandler, ServerStats, ServerTransmit,
    SessionInfo, Unkept, CONN_REPLIES, HALTED_UNKEPT, JOURNAL_FIXED, JOURNAL_MAGIC,
    JOURNAL_MAX_RECORD, JOURNAL_MAX_WORDS, JOURNAL_VERSION, MAX_READ_REQUEST, MIN_WINDOW,
    STRAY_REPLIES, UNCHECKED_BODY,
};

#[cfg(test)]
mod tests;
