//! The client session: connection lifecycle, send window, replay.

mod types;

pub use types::{
    Action, ClientConfig, ClientEvent, ClientState, ClientStats, DisconnectCause, FailReason,
    ProtocolError, Request, RequestOp, SubmitError,
};

use heapless::Deque;

use super::backoff::SplitMix64;
use super::pattern;
use super::server::MIN_WINDOW;
use crate::seq::{SendWindow, WindowError};
use crate::time::Instant;
use crate::transport::DisconnectReason;
use crate::wire::{Body, IoMsg, RejectReason, HEADER_LEN, MAX_DATA_LEN};

/// The fields of a `Welcome` body.
#[derive(Clone, Copy, Debug)]
struct Welcome {
    instance: u64,
    resume_from: u64,
    incarnation: u64,
    window: u32,
    known: bool,
}

/// The client state machine of one session, over a window of `N` frames.
#[derive(Clone, Debug)]
pub struct ClientSession<const N: usize> {
    config: ClientConfig,
    state: ClientState,
    epoch: u32,
    window: SendWindow<Request, N>,
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
    instance: Option<u64>,
    /// The incarnation of the server record known to have seen every frame
    /// sent so far: the last `Welcome`'s. A `Welcome` naming another one
    /// cannot prove what happened to the frames in between.
    trusted: Option<u64>,
    /// Sns that may be outstanding: the window agreed in the last
    /// `Welcome` (before any, the client's own).
    agreed: u64,
    attempt: u32,
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

impl<const N: usize> ClientSession<N> {
    /// A new session in `Idle`, sns starting at 0.
    pub fn new(config: ClientConfig, now: Instant) -> Self {
        let rng = SplitMix64::new(config.seed);
        let agreed = u64::from(config.window).min(N as u64).max(1);
        ClientSession {
            config,
            state: ClientState::Idle,
            epoch: 0,
            window: SendWindow::new(0),
            sent_hw: 0,
            tx_cursor: 0,
            hello_pending: false,
            hello: (0, 0),
            bye_pending: false,
            probe_pending: false,
            last_probe: now,
            probed_upto: 0,
            closing: false,
            instance: None,
            trusted: None,
            agreed,
            attempt: 0,
            started: now,
            last_progress: now,
            action: None,
            rng,
            events: Deque::new(),
            stats: ClientStats::default(),
        }
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
    /// Oldest unacknowledged sn.
    pub fn base_sn(&self) -> u64 {
        self.window.base()
    }
    /// Next sn `submit` will assign.
    pub fn next_sn(&self) -> u64 {
        self.window.next()
    }
    /// One past the highest sn ever transmitted.
    pub fn sent_sn(&self) -> u64 {
        self.sent_hw
    }
    /// Unacknowledged requests (sent or not).
    pub fn outstanding(&self) -> usize {
        self.window.len()
    }
    /// Whether the window has room for another `submit`.
    pub fn can_submit(&self) -> bool {
        !self.window.is_full() && !self.closing && !self.is_terminal()
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
            self.begin_connect(now);
        }
    }

    /// Queues a request; returns its sn. The frame goes out from
    /// [`poll_transmit`](Self::poll_transmit) once connected.
    pub fn submit(&mut self, op: RequestOp, len: u32) -> Result<u64, SubmitError> {
        if self.closing || self.is_terminal() {
            return Err(SubmitError::Closed);
        }
        let max = self.config.max_payload.min(MAX_DATA_LEN);
        if len > max {
            return Err(SubmitError::TooLong { len, max });
        }
        let sn = self.window.push(Request { op, len }).map_err(|e| match e {
            WindowError::Full { .. } => SubmitError::Full,
            _ => SubmitError::Exhausted,
        })?;
        self.stats.submitted += 1;
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
    /// (acks are cumulative), and a `ReadMismatch` adds to the last one of
    /// the same run of completions. Beyond that the application is the
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

    /// A frame arrived on the current connection.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        if !matches!(
            self.state,
            ClientState::Handshaking { .. } | ClientState::Established { .. }
        ) {
            self.stats.stale_frames += 1;
            return;
        }
        let msg = match crate::wire::parse(frame) {
            Ok(m) => m,
            Err(e) => return self.protocol_error(now, ProtocolError::Malformed(e)),
        };
        if msg.session != self.config.session {
            let e = ProtocolError::SessionMismatch {
                expected: self.config.session,
                got: msg.session,
            };
            return self.protocol_error(now, e);
        }
        if msg.epoch != self.epoch {
            self.stats.stale_frames += 1;
            return;
        }
        if msg.body.carries_state() && !msg.validate {
            // A flipped bit there would pass every header check.
            let e = ProtocolError::UncheckedBody(msg.body.op());
            return self.protocol_error(now, e);
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
                    instance,
                    resume_from,
                    incarnation,
                    window,
                    known,
                };
                self.handle_welcome(now, welcome)
            }
            Body::WriteComp | Body::ReadComp { .. } | Body::Ack if established => {
                if let Body::ReadComp { data } = msg.body {
                    self.stats.completions += 1;
                    if !pattern::matches(self.config.session, msg.sn, data) {
                        self.stats.read_mismatches += 1;
                        self.push_event(ClientEvent::ReadMismatch {
                            sn: msg.sn,
                            count: 1,
                        });
                    }
                } else if msg.body == Body::WriteComp {
                    self.stats.completions += 1;
                }
                self.handle_ack(now, msg.ack);
            }
            Body::Reject {
                reason: RejectReason::SessionOwned,
                detail,
            } => {
                // Another client owns this session id: retrying would only
                // be refused again (or, worse, take it from its owner).
                self.stats.rejects += 1;
                let cause = DisconnectCause::Rejected {
                    reason: RejectReason::SessionOwned,
                    detail,
                };
                self.action = Some(Action::Close);
                self.stats.disconnects += 1;
                self.hello_pending = false;
                self.probe_pending = false;
                self.push_event(ClientEvent::Disconnected {
                    epoch: self.epoch,
                    cause,
                });
                self.fail(FailReason::SessionOwned {
                    session: self.config.session,
                });
            }
            Body::Reject { reason, detail } => {
                self.stats.rejects += 1;
                self.lose_connection(now, DisconnectCause::Rejected { reason, detail }, true);
            }
            Body::Bye => self.lose_connection(now, DisconnectCause::ServerBye, true),
            other => self.protocol_error(now, ProtocolError::Unexpected(other.op())),
        }
    }

    /// Writes the next frame to send into `out`, using `scratch` (at least
    /// `max_payload` bytes) to build its payload. Returns its length.
    ///
    /// Returns `None` when there is nothing to send, or when `out` or
    /// `scratch` is too small for the next frame (size them from
    /// `max_payload`; the driver checks this once at construction).
    #[must_use]
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        scratch: &mut [u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let session = self.config.session;
        match self.state {
            ClientState::Handshaking { .. } if self.hello_pending => {
                let (base_sn, next_sn) = (self.window.base(), self.sent_hw);
                let msg = IoMsg {
                    session,
                    epoch: self.epoch,
                    sn: 0,
                    ack: 0,
                    // A control body is protocol state: always checksummed.
                    validate: true,
                    stream: false,
                    body: Body::Hello {
                        base_sn,
                        next_sn,
                        token: self.config.token,
                        window: u32::try_from(self.own_window()).unwrap_or(u32::MAX),
                        replay: self.config.replay,
                    },
                };
                let len = msg.emit(out).ok()?;
                self.hello_pending = false;
                self.hello = (base_sn, next_sn);
                self.tx_cursor = next_sn;
                Some(len)
            }
            ClientState::Handshaking { .. } if self.may_send_early() => {
                self.transmit_data(now, scratch, out)
            }
            ClientState::Established { .. } => {
                if self.probe_pending {
                    let msg = IoMsg {
                        session,
                        epoch: self.epoch,
                        sn: self.tx_cursor,
                        ack: 0,
                        validate: false,
                        stream: false,
                        body: Body::Probe,
                    };
                    let len = msg.emit(out).ok()?;
                    self.probe_pending = false;
                    self.probed_upto = self.tx_cursor;
                    self.stats.probes += 1;
                    return Some(len);
                }
                let limit = self.window.base().saturating_add(self.agreed);
                let stalled = self.sent_hw > self.window.base()
                    && now >= self.last_progress + self.config.reply_timeout;
                if self.tx_cursor < self.window.next() && self.tx_cursor < limit && !stalled {
                    return self.transmit_data(now, scratch, out);
                }
                if self.bye_pending {
                    let msg = IoMsg {
                        session,
                        epoch: self.epoch,
                        sn: 0,
                        ack: 0,
                        validate: false,
                        stream: false,
                        body: Body::Bye,
                    };
                    let len = msg.emit(out).ok()?;
                    self.bye_pending = false;
                    self.state = ClientState::Closed;
                    self.action = Some(Action::Close);
                    self.push_event(ClientEvent::Closed);
                    return Some(len);
                }
                None
            }
            _ => None,
        }
    }

    /// With `eager` on, new frames may follow the `Hello` before the
    /// `Welcome` when nothing is unacknowledged: whatever the server answers,
    /// `resume_from` is then `next_sn`, so they are in order either way.
    ///
    /// At most [`MIN_WINDOW`] of them (and not past the window agreed last
    /// time): every server agrees to at least that many.
    fn may_send_early(&self) -> bool {
        let limit = self.agreed.min(u64::from(MIN_WINDOW));
        self.config.eager
            && !self.hello_pending
            && self.hello.0 == self.hello.1
            && self.tx_cursor < self.window.next()
            && self.tx_cursor < self.hello.1.saturating_add(limit)
    }

    /// The window this client offers: its configuration within `N`.
    fn own_window(&self) -> u64 {
        u64::from(self.config.window).min(N as u64).max(1)
    }

    fn transmit_data(&mut self, now: Instant, scratch: &mut [u8], out: &mut [u8]) -> Option<usize> {
        let session = self.config.session;
        let sn = self.tx_cursor;
        let req = *self.window.get(sn)?;
        let body = match req.op {
            RequestOp::Read => Body::Read { len: req.len },
            RequestOp::Write | RequestOp::StreamWrite => {
                let data = scratch.get_mut(..req.len as usize)?;
                pattern::fill(session, sn, data);
                Body::Write { data }
            }
        };
        let msg = IoMsg {
            session,
            epoch: self.epoch,
            sn,
            ack: 0,
            validate: self.config.validate || req.op == RequestOp::Read,
            stream: req.op == RequestOp::StreamWrite,
            body,
        };
        let len = msg.emit(out).ok()?;
        if self.sent_hw == self.window.base() || self.tx_cursor == self.window.base() {
            // Nothing was outstanding: the reply timer starts now.
            self.last_progress = now;
        }
        self.tx_cursor += 1;
        if sn >= self.sent_hw {
            self.sent_hw = sn + 1;
            self.stats.sent += 1;
        } else {
            self.stats.replayed += 1;
        }
        Some(len)
    }

    /// Bytes the driver needs for `scratch` and `out` of `poll_transmit`.
    pub fn frame_capacity(&self) -> (usize, usize) {
        let payload = self.config.max_payload.min(MAX_DATA_LEN) as usize;
        // Hello/Welcome-sized control bodies are far below any payload limit
        // worth using, but keep room for them when max_payload is tiny.
        (payload, HEADER_LEN + payload.max(32))
    }

    fn handle_welcome(&mut self, now: Instant, welcome: Welcome) {
        let Welcome {
            instance,
            resume_from,
            incarnation,
            window,
            known,
        } = welcome;
        let (base_sn, next_sn) = self.hello;
        let in_range = base_sn <= resume_from && resume_from <= next_sn;
        // A record new to the server starts at base_sn.
        if !in_range || !(known || resume_from == base_sn) {
            let e = ProtocolError::BadResume {
                base_sn,
                resume_from,
                next_sn,
            };
            return self.protocol_error(now, e);
        }
        if window == 0 {
            return self.protocol_error(now, ProtocolError::ZeroWindow);
        }
        // Every sn below `resume_from` was handed to this record's
        // application: the server never answers past an sn it did not
        // deliver.
        let confirmed = resume_from;
        let previous = self.instance;
        // Only the record that answered the last Welcome is known to have
        // seen every frame sent so far. Any other (a restart, an eviction,
        // or a record whose own first Welcome was lost) may be missing
        // what another one processed: what is past `confirmed` may arrive
        // twice, and is announced.
        let proven = known && self.trusted == Some(incarnation);
        let changed = previous.is_some_and(|p| p != instance);
        if !proven && (confirmed < next_sn || changed) {
            self.stats.server_restarts += 1;
            self.push_event(ClientEvent::ServerRestarted {
                previous,
                instance,
                unconfirmed: confirmed..next_sn,
            });
        }
        self.release(confirmed);
        if self.config.replay {
            if !proven {
                self.stats.possible_duplicates += next_sn - confirmed;
            }
            // Frames sent early (after the Hello) are at or past next_sn.
            if confirmed < next_sn {
                self.tx_cursor = confirmed;
            }
        } else if confirmed < next_sn {
            self.stats.not_replayed += next_sn - confirmed;
            self.push_event(ClientEvent::NotReplayed {
                range: confirmed..next_sn,
            });
            // Given up, not acknowledged: leave `acked` alone.
            let _ = self.window.release(next_sn);
        }
        self.instance = Some(instance);
        self.trusted = Some(incarnation);
        self.agreed = u64::from(window).min(self.own_window());
        self.attempt = 0;
        self.last_progress = now;
        self.last_probe = now;
        // Frames of this connection so far: the replay from `confirmed` is
        // still to go out; eager frames from next_sn on went out unprobed.
        self.probed_upto = self.tx_cursor.min(next_sn);
        self.state = ClientState::Established {
            instance,
            since: now,
        };
        self.stats.established += 1;
        self.push_event(ClientEvent::Established {
            epoch: self.epoch,
            instance,
            known,
            resume_from,
        });
        self.check_close(now);
    }

    fn handle_ack(&mut self, now: Instant, ack: u64) {
        if ack > self.sent_hw {
            let e = ProtocolError::AckBeyondSent {
                ack,
                sent: self.sent_hw,
            };
            return self.protocol_error(now, e);
        }
        if self.release(ack) > 0 {
            self.last_progress = now;
            self.push_event(ClientEvent::Acked { upto: ack });
            self.check_close(now);
        }
    }

    fn release(&mut self, ack: u64) -> u64 {
        // `ack <= sent_hw <= window.next()` is checked by every caller.
        let released = self.window.release(ack).unwrap_or(0);
        self.stats.acked += released;
        if self.tx_cursor < self.window.base() {
            self.tx_cursor = self.window.base();
        }
        released
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

    fn begin_connect(&mut self, now: Instant) {
        let Some(epoch) = self.epoch.checked_add(1) else {
            return self.fail(FailReason::EpochExhausted);
        };
        self.epoch = epoch;
        let attempt = self.attempt + 1;
        self.hello_pending = false;
        self.bye_pending = false;
        self.probe_pending = false;
        self.state = ClientState::Connecting {
            attempt,
            deadline: now + self.config.connect_timeout,
        };
        self.action = Some(Action::Connect);
        self.stats.connects += 1;
        self.push_event(ClientEvent::Connecting { epoch, attempt });
    }

    fn lose_connection(&mut self, now: Instant, cause: DisconnectCause, close: bool) {
        if close {
            self.action = Some(Action::Close);
        }
        self.stats.disconnects += 1;
        self.hello_pending = false;
        self.bye_pending = false;
        self.probe_pending = false;
        self.push_event(ClientEvent::Disconnected {
            epoch: self.epoch,
            cause,
        });
        self.state = ClientState::Disconnected { cause };
        self.schedule_retry(now, cause);
    }

    fn schedule_retry(&mut self, now: Instant, cause: DisconnectCause) {
        if self.closing && self.window.is_empty() {
            self.state = ClientState::Closed;
            self.push_event(ClientEvent::Closed);
            return;
        }
        self.attempt += 1;
        if self.attempt > self.config.max_retries {
            return self.fail(FailReason::RetriesExceeded {
                attempts: self.attempt,
                last: cause,
            });
        }
        let delay = self.config.backoff.delay(self.attempt, &mut self.rng);
        self.state = ClientState::Backoff { until: now + delay };
    }

    fn fail(&mut self, reason: FailReason) {
        self.state = ClientState::Failed(reason);
        self.push_event(ClientEvent::Failed(reason));
    }

    /// Queues an event; none is ever dropped (see
    /// [`poll_event`](Self::poll_event)).
    fn push_event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Acked { upto } => {
                if let Some(ClientEvent::Acked { upto: last }) = self.events.back_mut() {
                    *last = upto;
                    return;
                }
            }
            ClientEvent::ReadMismatch { count, .. } => {
                // The newest event that is not an ack, if it is a mismatch.
                let tail = self
                    .events
                    .iter_mut()
                    .rev()
                    .find(|e| !matches!(e, ClientEvent::Acked { .. }));
                if let Some(ClientEvent::ReadMismatch { count: n, .. }) = tail {
                    *n += count;
                    return;
                }
            }
            _ => {}
        }
        // A run of completions queues at most [Acked, ReadMismatch, Acked]
        // and a connection cycle at most CYCLE_EVENTS, which a new attempt
        // waits for: the queue has room.
        let full = self.events.push_back(event);
        debug_assert!(full.is_ok(), "client event queue overflow");
    }
}
