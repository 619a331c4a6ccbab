//! The client session: connection lifecycle, send window, replay.

mod connection;
mod reads;
mod resume;
#[cfg(test)]
mod retry_tests;
mod transmit;
mod types;

pub use resume::ResumePoint;
pub use types::{
    Action, ClientConfig, ClientEvent, ClientState, ClientStats, DisconnectCause, FailReason,
    Message, MessageLimits, ProtocolError, ReadData, RequestOp, SubmitError, Transmit,
};

use types::Frame;

use heapless::Deque;

use super::server::{wire_error_code, MAX_READ_REQUEST};
use crate::conn::DisconnectReason;
use crate::rng::SplitMix64;
use crate::seq::{PayloadRing, SendWindow, WindowError};
use crate::time::Instant;
use crate::wire::{Body, RejectReason, WireError, MAX_DATA_LEN, VERSION};

/// One unacknowledged message: what is needed to send it again. Its bytes
/// (a write's payload, a read's request) are in the payload ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    op: RequestOp,
    /// A read's requested length (a write's: its payload length).
    len: u32,
    /// Where its bytes start in the payload ring.
    pos: u64,
    /// How many bytes it keeps there.
    bytes: u32,
    /// Nothing more is expected for it: a write, or a read whose data the
    /// application got or that was given up (and named).
    settled: bool,
    /// A read asked again on this connection (see `reads`).
    reasked: bool,
    /// When it was last sent (the session's `frames_out` then); 0 for a
    /// read below the ack that waits to be asked again.
    asked: u64,
}

/// The fields of a `Welcome` body, and its header's ack.
#[derive(Clone, Copy, Debug)]
struct Welcome {
    /// Where the server record's knowledge begins: below the `Hello`'s
    /// `base_sn` only when the record is younger than what was
    /// acknowledged.
    ack: u64,
    instance: u64,
    resume_from: u64,
    incarnation: u64,
    window: u32,
    known: bool,
}

/// The client state machine of one session: a window of `N` messages
/// whose bytes are kept in the storage `S` until acknowledged.
///
/// It contains no networking code and reads no clock: time comes in as
/// `now`, what happened on the network through the `handle_*` methods,
/// and what to do comes out of the `poll_*` methods. The
/// [`transport::Client`](crate::transport::Client) driver does all of
/// this over a [`Connector`](crate::transport::Connector); drive it by
/// hand only for a transport that does not fit the trait.
///
/// # Usage contract
///
/// - **Getters** (`config`, `state`, `stats`, `base_sn`, `next_sn`,
///   `outstanding`, `limits`, ...) may be called at any time.
/// - **Mutators** from the application: [`start`](Self::start) once,
///   [`submit`](Self::submit) / [`submit_with`](Self::submit_with) at any
///   time (backpressure is an error, nothing changes), [`close`](Self::close)
///   to end after everything is acknowledged.
/// - **`handle_*`** from the transport, as things happen:
///   [`handle_connected`](Self::handle_connected) when the connection the
///   session asked for is up, [`handle_frame`](Self::handle_frame) for
///   every frame received on it (in order),
///   [`handle_disconnected`](Self::handle_disconnected) when it ends or
///   fails to open, [`handle_transport_refused`](Self::handle_transport_refused)
///   when a frame can never be sent, and
///   [`handle_timeout`](Self::handle_timeout) once `now` reaches
///   [`poll_timeout`](Self::poll_timeout).
/// - **`poll_*`** after any of the above, until each returns `None`:
///   [`poll_action`](Self::poll_action) (connect or close the transport's
///   connection), [`poll_transmit`](Self::poll_transmit) then
///   [`write_transmit`](Self::write_transmit) into a buffer of the length
///   it asked for (the frame counts as sent once written: a frame the
///   transport cannot take is not written yet, ask again later),
///   [`poll_event`](Self::poll_event) (the application's events; the queue
///   is bounded, and a new connection attempt waits until it has room),
///   and [`poll_timeout`](Self::poll_timeout) for when to call
///   `handle_timeout` next.
/// - **Time never goes back**: every `now` passed in is at least the one
///   before. Frames of a connection are handed over in the order they
///   arrived, and only for the connection the session asked for last.
#[derive(Clone, Debug)]
pub struct ClientSession<const N: usize, S> {
    config: ClientConfig,
    state: ClientState,
    epoch: u32,
    /// Unacknowledged messages, and from its base on, reads below
    /// `acked` still waiting for their answer.
    window: SendWindow<Entry, N>,
    payloads: PayloadRing<S>,
    /// The cumulative ack: every sn below it was delivered or given up.
    acked: u64,
    /// Reads in the window neither answered nor given up.
    unsettled_reads: u32,
    /// Reads below `acked` to ask again on this connection.
    reask_due: u32,
    /// No read below it is due to be asked again.
    reask_cursor: u64,
    /// Reads asked again on this connection, not answered yet.
    reasks_awaited: u32,
    /// Request frames (data, reads asked again, probes) sent so far.
    frames_out: u64,
    /// `frames_out` when this connection's `Hello` went out: a frame
    /// sent later has a larger number.
    conn_start: u64,
    /// What the transport carries in one frame's payload (set by the driver).
    transport_limit: usize,
    /// One past the highest sn ever transmitted.
    sent_hw: u64,
    /// Next sn to transmit on this connection.
    tx_cursor: u64,
    hello_pending: bool,
    /// `(base_sn, next_sn)` of the `Hello` sent on this connection.
    hello: (u64, u64),
    bye_pending: bool,
    /// A tail-loss probe is due on this connection.
    probe_pending: bool,
    /// When the last probe went out.
    last_probe: Instant,
    /// Every sn this connection carried below this is covered by a probe
    /// sent after it (or by the handshake).
    probed_upto: u64,
    closing: bool,
    /// Made by [`ClientSession::resume`] and not started yet: the crashed
    /// process may have sent every message it is given again.
    resumed: bool,
    instance: Option<u64>,
    /// The incarnation of the server record known to have seen every frame
    /// sent so far: the last `Welcome`'s. A `Welcome` naming another one
    /// cannot prove what happened to the frames in between.
    trusted: Option<u64>,
    /// Sns that may be outstanding: the window agreed in the last
    /// `Welcome` (before any, the client's own).
    agreed: u64,
    attempt: u32,
    /// Attempts of the current run of failures retried after
    /// `refused_retry` (see [`ClientConfig::refused_retry`]).
    quick_retries: u32,
    /// The connection just lost was refused before it connected.
    refused: bool,
    /// When the first failed attempt of the current run of failures ended.
    failing_since: Option<Instant>,
    started: Instant,
    last_progress: Instant,
    action: Option<Action>,
    rng: SplitMix64,
    events: Deque<ClientEvent, EVENTS>,
    stats: ClientStats,
}

/// Room in the event queue. A connection cycle queues at most
/// [`CYCLE_EVENTS`]; acks and read mismatches fold into the queue's tail.
const EVENTS: usize = 32;
/// Events one connection cycle (and a close or failure) can queue: a new
/// attempt waits until the application has drained this much room.
const CYCLE_EVENTS: usize = 12;

impl<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>> ClientSession<N, S> {
    /// A new session in `Idle`, sns starting at 0, keeping the bytes of
    /// unacknowledged messages in `storage` (its size bounds the bytes in
    /// flight and the largest message).
    pub fn new(config: ClientConfig, now: Instant, storage: S) -> Self {
        Self::resume(config, now, storage, ResumePoint::new(0, 0))
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }
    /// The current state.
    pub fn state(&self) -> ClientState {
        self.state
    }
    /// The current epoch (0 before the first connection).
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    /// The session id.
    pub fn session(&self) -> u64 {
        self.config.session
    }
    /// The counters.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }
    /// Oldest unacknowledged sn: the cumulative ack.
    pub fn base_sn(&self) -> u64 {
        self.acked
    }
    /// Next sn `submit` will assign.
    pub fn next_sn(&self) -> u64 {
        self.window.next()
    }
    /// One past the highest sn ever transmitted.
    pub fn sent_sn(&self) -> u64 {
        self.sent_hw
    }
    /// Messages the session still holds: unacknowledged requests (sent or
    /// not), and acknowledged reads whose data has not come yet.
    pub fn outstanding(&self) -> usize {
        self.window.len()
    }
    /// Acknowledged reads whose data has not come yet: asked again until
    /// it does.
    pub fn reads_unanswered(&self) -> usize {
        self.window
            .iter_from(self.window.base())
            .take_while(|&(sn, _)| sn < self.acked)
            .filter(|(_, e)| !e.settled)
            .count()
    }
    /// Whether the window has room for another message (its bytes may
    /// still not fit the payload storage: `submit` says so).
    pub fn can_submit(&self) -> bool {
        !self.window.is_full() && !self.closing && !self.is_terminal()
    }
    /// The limits on one message's size.
    pub fn limits(&self) -> MessageLimits {
        MessageLimits {
            configured: self.config.max_payload.min(MAX_DATA_LEN) as usize,
            transport: self.transport_limit,
            storage: self.payloads.capacity(),
        }
    }
    /// Tells the session the largest payload its transport carries in one
    /// frame; the drivers call it when they are built.
    pub fn set_transport_limit(&mut self, max_payload: usize) {
        self.transport_limit = max_payload;
    }
    /// Whether the session is `Closed` or `Failed`.
    pub fn is_terminal(&self) -> bool {
        matches!(self.state, ClientState::Closed | ClientState::Failed(_))
    }
    /// The window agreed with the server: how many sns may be outstanding.
    pub fn agreed_window(&self) -> u64 {
        self.agreed
    }

    /// Starts connecting. Only from `Idle`; otherwise does nothing.
    pub fn start(&mut self, now: Instant) {
        if self.state == ClientState::Idle {
            if core::mem::take(&mut self.resumed) {
                // What the outbox gave back may have reached the server.
                self.sent_hw = self.window.next();
            }
            self.begin_connect(now);
        }
    }

    /// Queues a message; returns its sn. Its bytes are copied into the
    /// session's storage, kept until acknowledged and resent as they are
    /// after a reconnect. The frame goes out from
    /// [`poll_transmit`](Self::poll_transmit) once connected.
    ///
    /// # Errors
    ///
    /// See [`SubmitError`]: a full window or storage is backpressure
    /// (nothing changed; submit again after acks), a message over the
    /// limits can never be sent.
    pub fn submit(&mut self, msg: Message<'_>) -> Result<u64, SubmitError> {
        let (op, bytes) = match msg {
            Message::Write(data) => (RequestOp::Write, data),
            Message::StreamWrite(data) => (RequestOp::StreamWrite, data),
            Message::Read { request, .. } => (RequestOp::Read, request),
        };
        let read_len = match msg {
            Message::Read { len, .. } => Some(len),
            _ => None,
        };
        self.submit_with(op, bytes.len(), read_len, |buf| buf.copy_from_slice(bytes))
    }

    /// Queues a message whose `bytes` bytes (a write's payload, a read's
    /// request) `fill` writes in place, straight into the session's
    /// storage: the zero-copy form of [`submit`](Self::submit). `read_len`
    /// is a read's requested length and must be `Some` exactly for
    /// [`RequestOp::Read`].
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit); `fill` is not called then.
    pub fn submit_with(
        &mut self,
        op: RequestOp,
        bytes: usize,
        read_len: Option<u32>,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<u64, SubmitError> {
        if self.closing || self.is_terminal() {
            return Err(SubmitError::Closed);
        }
        let limits = self.limits();
        let len = match (op, read_len) {
            (RequestOp::Read, Some(len)) => {
                if bytes > MAX_READ_REQUEST {
                    return Err(SubmitError::RequestTooLong {
                        len: bytes,
                        max: MAX_READ_REQUEST,
                    });
                }
                len
            }
            (RequestOp::Read, None) | (_, Some(_)) => return Err(SubmitError::BadRequest),
            (_, None) => u32::try_from(bytes).unwrap_or(u32::MAX),
        };
        if len as usize > limits.max() {
            return Err(SubmitError::TooLong {
                len: len as usize,
                limits,
            });
        }
        if bytes > limits.storage {
            // A read's request that the storage can never hold.
            return Err(SubmitError::TooLong { len: bytes, limits });
        }
        if self.window.is_full() {
            return Err(SubmitError::WindowFull {
                outstanding: self.window.len(),
            });
        }
        if self.window.next() > crate::wire::SN_MAX {
            return Err(SubmitError::Exhausted);
        }
        let (pos, buf) = self
            .payloads
            .alloc(bytes)
            .map_err(SubmitError::BufferFull)?;
        fill(buf);
        let entry = Entry {
            op,
            len,
            pos,
            bytes: bytes as u32,
            settled: op != RequestOp::Read,
            reasked: false,
            asked: 0,
        };
        let sn = self.window.push(entry).map_err(|e| {
            self.payloads.unalloc(pos);
            match e {
                WindowError::Full { .. } => SubmitError::WindowFull {
                    outstanding: self.window.len(),
                },
                _ => SubmitError::Exhausted,
            }
        })?;
        self.stats.submitted += 1;
        if op == RequestOp::Read {
            self.unsettled_reads += 1;
        }
        Ok(sn)
    }

    /// Asks for a graceful close: once everything is acknowledged, `Bye` is
    /// sent and the state becomes `Closed`.
    pub fn close(&mut self, now: Instant) {
        if self.is_terminal() {
            return;
        }
        self.closing = true;
        self.check_close(now);
    }

    /// The next thing the driver must do with the transport.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.action.take()
    }

    /// The next event for the application.
    ///
    /// No event is dropped. An `Acked` that follows an `Acked` replaces it
    /// (acks are cumulative). Beyond that the application is the
    /// backpressure: while fewer than a connection cycle's events fit, the
    /// client does not start a new connection attempt.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let state_deadline = match self.state {
            ClientState::Connecting { deadline, .. }
            | ClientState::Handshaking { deadline, .. } => Some(deadline),
            ClientState::Backoff { until } => Some(until),
            ClientState::Disconnected { .. } => Some(Instant::ZERO),
            ClientState::Established { .. } if self.sent_hw > self.window.base() => {
                let reply = self.reply_deadline();
                Some(match self.next_probe() {
                    Some(probe) => probe.min(reply),
                    None => reply,
                })
            }
            _ => None,
        };
        let limit = match self.state {
            ClientState::Idle | ClientState::Closed | ClientState::Failed(_) => None,
            _ => self.config.run_limit.map(|l| self.started + l),
        };
        match (state_deadline, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the timers that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let (Some(limit), false) = (self.config.run_limit, self.is_terminal()) {
            if self.state != ClientState::Idle && now >= self.started + limit {
                if matches!(
                    self.state,
                    ClientState::Connecting { .. }
                        | ClientState::Handshaking { .. }
                        | ClientState::Established { .. }
                ) {
                    self.action = Some(Action::Close);
                }
                self.fail(FailReason::Timeout { limit });
                return;
            }
        }
        match self.state {
            ClientState::Connecting { deadline, .. } if now >= deadline => {
                self.lose_connection(now, DisconnectCause::ConnectTimeout, true);
            }
            ClientState::Handshaking { deadline, .. } if now >= deadline => {
                self.lose_connection(now, DisconnectCause::ReplyTimeout, true);
            }
            ClientState::Established { .. }
                if self.sent_hw > self.window.base() && now >= self.reply_deadline() =>
            {
                if self.probed_upto < self.tx_cursor {
                    // Frames went out since the last probe: one more, so
                    // that a drop among them is found before giving up.
                    self.probe_pending = true;
                    self.last_probe = now;
                } else if !self.probe_pending {
                    self.lose_connection(now, DisconnectCause::ReplyTimeout, true);
                }
            }
            ClientState::Established { .. }
                if self.next_probe().is_some_and(|probe| now >= probe) =>
            {
                self.probe_pending = true;
                self.last_probe = now;
            }
            ClientState::Disconnected { cause } => self.schedule_retry(now, cause),
            ClientState::Backoff { until } if now >= until && self.event_room() => {
                self.begin_connect(now)
            }
            _ => {}
        }
    }

    /// When the next tail-loss probe is due: frames of this connection are
    /// unacknowledged and the acks have not moved for a quarter of the
    /// reply timeout (and as long again since the last probe).
    fn next_probe(&self) -> Option<Instant> {
        if self.probe_pending || self.tx_cursor <= self.window.base() {
            return None;
        }
        Some(self.last_progress.max(self.last_probe) + self.probe_interval())
    }

    fn probe_interval(&self) -> core::time::Duration {
        self.config.reply_timeout / 4
    }

    /// When an established connection without ack progress is given up:
    /// a reply timeout after the last progress, and not before the answer
    /// to a probe that covers every frame sent had a probe interval to
    /// come. Past the reply timeout no new frame goes out.
    fn reply_deadline(&self) -> Instant {
        let reply = self.last_progress + self.config.reply_timeout;
        if self.probed_upto < self.tx_cursor || self.probe_pending {
            reply
        } else {
            reply.max(self.last_probe + self.probe_interval())
        }
    }

    /// Whether a whole connection cycle's events fit in the queue.
    fn event_room(&self) -> bool {
        EVENTS - self.events.len() >= CYCLE_EVENTS
    }

    /// The transport connected.
    pub fn handle_connected(&mut self, now: Instant) {
        if let ClientState::Connecting { attempt, .. } = self.state {
            self.state = ClientState::Handshaking {
                attempt,
                deadline: now + self.config.reply_timeout,
            };
            self.hello_pending = true;
        }
    }

    /// The transport refused a frame of `len` bytes as too large although
    /// it says it carries `max_frame`: retrying would fail the same way,
    /// so the session fails (the driver closed the connection).
    pub fn handle_transport_refused(&mut self, now: Instant, len: usize, max_frame: usize) {
        let _ = now;
        if self.is_terminal() {
            return;
        }
        self.stats.disconnects += 1;
        self.hello_pending = false;
        self.probe_pending = false;
        self.push_event(ClientEvent::Disconnected {
            epoch: self.epoch,
            cause: DisconnectCause::Transport(DisconnectReason::SendFailed),
        });
        self.fail(FailReason::TransportRefused { len, max_frame });
    }

    /// The transport lost (or failed to open) the current connection.
    pub fn handle_disconnected(&mut self, now: Instant, reason: DisconnectReason) {
        if matches!(
            self.state,
            ClientState::Connecting { .. }
                | ClientState::Handshaking { .. }
                | ClientState::Established { .. }
        ) {
            self.lose_connection(now, DisconnectCause::Transport(reason), false);
        }
    }

    /// A frame arrived on the current connection. Returns the data of a
    /// read completion, borrowed from `frame`, once per read: the
    /// application takes it from there.
    pub fn handle_frame<'f>(&mut self, now: Instant, frame: &'f [u8]) -> Option<ReadData<'f>> {
        if !matches!(
            self.state,
            ClientState::Handshaking { .. } | ClientState::Established { .. }
        ) {
            self.stats.stale_frames += 1;
            return None;
        }
        let msg = match crate::wire::parse_with(frame, &self.config.crc) {
            Ok(m) => m,
            Err(e) => {
                self.protocol_error(now, ProtocolError::Malformed(e));
                return None;
            }
        };
        // A Reject addressed to no session is the server's answer before
        // it read a Hello (a frame it could not read, a full connection
        // table, a halted server): it is this connection's.
        let unaddressed = msg.session == 0
            && msg.epoch == 0
            && matches!(
                msg.body,
                Body::Reject {
                    reason: RejectReason::Malformed
                        | RejectReason::SessionTableFull
                        | RejectReason::ShuttingDown,
                    ..
                }
            );
        if msg.session != self.config.session && !unaddressed {
            let e = ProtocolError::SessionMismatch {
                expected: self.config.session,
                got: msg.session,
            };
            self.protocol_error(now, e);
            return None;
        }
        if msg.epoch != self.epoch && !unaddressed {
            self.stats.stale_frames += 1;
            return None;
        }
        if msg.body.carries_state() && !msg.validate {
            // A flipped bit there would pass every header check.
            let e = ProtocolError::UncheckedBody(msg.body.op());
            self.protocol_error(now, e);
            return None;
        }
        let established = matches!(self.state, ClientState::Established { .. });
        match msg.body {
            Body::Welcome {
                instance,
                resume_from,
                incarnation,
                window,
                known,
            } if !established && !self.hello_pending => {
                let welcome = Welcome {
                    ack: msg.ack,
                    instance,
                    resume_from,
                    incarnation,
                    window,
                    known,
                };
                self.handle_welcome(now, welcome)
            }
            Body::WriteComp | Body::Ack if established => {
                if msg.body == Body::WriteComp {
                    self.stats.completions += 1;
                    self.completed(msg.sn);
                }
                self.handle_ack(now, msg.ack);
            }
            Body::ReadComp { data } if established => {
                self.stats.completions += 1;
                self.completed(msg.sn);
                let read = self.take_read(msg.sn, data);
                self.handle_ack(now, msg.ack);
                if read.is_some() {
                    self.last_progress = now;
                    self.check_close(now);
                }
                return read;
            }
            Body::Reject { reason, detail } => {
                self.stats.rejects += 1;
                self.lose_connection(now, DisconnectCause::Rejected { reason, detail }, true);
            }
            Body::Bye => self.lose_connection(now, DisconnectCause::ServerBye, true),
            other => self.protocol_error(now, ProtocolError::Unexpected(other.op())),
        }
        None
    }

    fn handle_ack(&mut self, now: Instant, ack: u64) {
        if ack > self.sent_hw {
            let e = ProtocolError::AckBeyondSent {
                ack,
                sent: self.sent_hw,
            };
            return self.protocol_error(now, e);
        }
        if self.ack_to(ack) > 0 {
            self.last_progress = now;
            self.push_event(ClientEvent::Acked { upto: ack });
            self.check_close(now);
        }
    }

    /// Frees the bytes of released messages.
    fn free_payloads(&mut self) {
        let oldest = self.window.get(self.window.base()).map(|e| e.pos);
        let head = self.payloads.head();
        self.payloads.release_to(oldest.unwrap_or(head));
    }

    fn check_close(&mut self, now: Instant) {
        if !self.closing || !self.window.is_empty() {
            return;
        }
        match self.state {
            ClientState::Established { .. } => self.bye_pending = true,
            ClientState::Idle | ClientState::Disconnected { .. } | ClientState::Backoff { .. } => {
                self.state = ClientState::Closed;
                self.push_event(ClientEvent::Closed);
            }
            ClientState::Connecting { .. } | ClientState::Handshaking { .. } => {
                self.action = Some(Action::Close);
                self.state = ClientState::Closed;
                self.push_event(ClientEvent::Closed);
            }
            ClientState::Closed | ClientState::Failed(_) => {}
        }
        let _ = now;
    }

    fn protocol_error(&mut self, now: Instant, e: ProtocolError) {
        self.stats.protocol_errors += 1;
        self.lose_connection(now, DisconnectCause::Protocol(e), true);
    }

    /// Queues an event; none is ever dropped (see
    /// [`poll_event`](Self::poll_event)).
    fn push_event(&mut self, event: ClientEvent) {
        if let (ClientEvent::Acked { upto }, Some(ClientEvent::Acked { upto: last })) =
            (&event, self.events.back_mut())
        {
            *last = *upto;
            return;
        }
        // A run of completions queues at most one Acked and a connection
        // cycle at most CYCLE_EVENTS, which a new attempt waits for: the
        // queue has room.
        let full = self.events.push_back(event);
        debug_assert!(full.is_ok(), "client event queue overflow");
    }
}

/// The wire version refusal a `Malformed` rejection's `detail` states (see
/// [`malformed_detail`](super::server::malformed_detail)), if it states
/// one: the server received this client's version byte and does not speak
/// it. A rejection naming another byte than the one sent, or naming this
/// client's own version as the server's, is damage on the way (a version
/// byte flipped before the server could check the header's CRC), not a
/// refusal. A detail that states neither byte (bits 8 to 23 zero) is
/// taken at its word.
fn version_refused(detail: u64) -> Option<FailReason> {
    if detail & 0xff != wire_error_code(&WireError::UnsupportedVersion(0)) {
        return None;
    }
    let received = (detail >> 8) as u8;
    let theirs = (detail >> 16) as u8;
    let damaged = if theirs == 0 {
        received != 0 && received != VERSION
    } else {
        received != VERSION || theirs == VERSION
    };
    if damaged {
        return None;
    }
    Some(FailReason::WireVersion {
        ours: VERSION,
        theirs: (theirs != 0).then_some(theirs),
    })
}
