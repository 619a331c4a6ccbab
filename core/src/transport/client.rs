//! The client driver: one session over one transport.

use crate::session::{Action, ClientEvent, ClientSession, RequestOp, SubmitError};
use crate::time::Instant;
use crate::transport::{ConnId, DisconnectReason, SendError, Transport, TransportEvent};

/// Why a driver could not be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverError {
    /// The driver's `MTU` is smaller than the largest frame the session may send.
    MtuTooSmall {
        /// Bytes needed.
        need: usize,
        /// The driver's `MTU`.
        mtu: usize,
    },
}

impl core::fmt::Display for DriverError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DriverError::MtuTooSmall { need, mtu } => write!(
                f,
                "driver MTU {mtu} is smaller than the largest frame ({need} bytes); \
                 raise MTU or lower max_payload"
            ),
        }
    }
}

/// Runs a [`ClientSession`] over a [`Transport`]: connects, reconnects,
/// sends and replays, and hands the session every frame and disconnect.
pub struct Client<T: Transport, const N: usize = 256, const MTU: usize = 4160> {
    transport: T,
    session: ClientSession<N>,
    conn: Option<ConnId>,
    /// A frame `poll_transmit` produced that the transport has not taken yet.
    pending: Option<usize>,
    tx: [u8; MTU],
    scratch: [u8; MTU],
    rx: [u8; MTU],
    send_errors: u64,
}

impl<T: Transport, const N: usize, const MTU: usize> Client<T, N, MTU> {
    /// A driver for `session` over `transport`.
    pub fn new(transport: T, session: ClientSession<N>) -> Result<Self, DriverError> {
        let (scratch, frame) = session.frame_capacity();
        let need = scratch.max(frame);
        if need > MTU {
            return Err(DriverError::MtuTooSmall { need, mtu: MTU });
        }
        Ok(Client {
            transport,
            session,
            conn: None,
            pending: None,
            tx: [0; MTU],
            scratch: [0; MTU],
            rx: [0; MTU],
            send_errors: 0,
        })
    }

    /// The session.
    pub fn session(&self) -> &ClientSession<N> {
        &self.session
    }
    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }
    /// The transport, mutably (for fault injection and inspection).
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }
    /// Frames the transport refused with an error other than `WouldBlock`.
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }
    /// Takes the driver apart; the session can be driven again later.
    pub fn into_parts(self) -> (T, ClientSession<N>) {
        (self.transport, self.session)
    }

    /// Starts connecting.
    pub fn start(&mut self, now: Instant) {
        self.session.start(now);
    }
    /// Queues a request (see [`ClientSession::submit`]).
    pub fn submit(&mut self, op: RequestOp, len: u32) -> Result<u64, SubmitError> {
        self.session.submit(op, len)
    }
    /// Closes gracefully once everything is acknowledged.
    pub fn close(&mut self, now: Instant) {
        self.session.close(now);
    }

    /// Replaces the whole transport (as a client that rebuilds its UCX
    /// context, worker and endpoint does) and keeps the session, which
    /// reconnects over the new one. Returns the old transport.
    pub fn replace_transport(&mut self, now: Instant, transport: T) -> T {
        if let Some(conn) = self.conn.take() {
            self.transport.close(now, conn);
        }
        self.pending = None;
        let old = core::mem::replace(&mut self.transport, transport);
        self.session
            .handle_disconnected(now, DisconnectReason::LocalClose);
        old
    }

    /// When `poll` must run next if nothing arrives before.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// Does all the work possible at `now`; returns whether anything happened.
    pub fn poll(&mut self, now: Instant, on_event: &mut impl FnMut(ClientEvent)) -> bool {
        let mut any = false;
        loop {
            let mut progress = false;
            while let Some(event) = self.transport.poll(now, &mut self.rx) {
                progress = true;
                self.handle_transport_event(now, event);
            }
            if self.session.poll_timeout().is_some_and(|t| t <= now) {
                self.session.handle_timeout(now);
            }
            progress |= self.run_actions(now);
            progress |= self.transmit(now);
            progress |= self.run_actions(now);
            while let Some(event) = self.session.poll_event() {
                progress = true;
                on_event(event);
            }
            if !progress {
                return any;
            }
            any = true;
        }
    }

    fn handle_transport_event(&mut self, now: Instant, event: TransportEvent) {
        match event {
            TransportEvent::Connected { conn } if self.conn == Some(conn) => {
                self.session.handle_connected(now);
            }
            TransportEvent::Received { conn, len } if self.conn == Some(conn) => {
                // An oversized frame arrives truncated and fails to parse.
                let frame = &self.rx[..len.min(MTU)];
                self.session.handle_frame(now, frame);
            }
            TransportEvent::Disconnected { conn, reason } if self.conn == Some(conn) => {
                self.conn = None;
                self.pending = None;
                self.session.handle_disconnected(now, reason);
            }
            // Events of connections this driver already left behind.
            _ => {}
        }
    }

    fn run_actions(&mut self, now: Instant) -> bool {
        let mut progress = false;
        while let Some(action) = self.session.poll_action() {
            progress = true;
            match action {
                Action::Connect => {
                    if let Some(old) = self.conn.take() {
                        self.transport.close(now, old);
                    }
                    self.pending = None;
                    match self.transport.connect(now) {
                        Ok(conn) => self.conn = Some(conn),
                        Err(reason) => self.session.handle_disconnected(now, reason),
                    }
                }
                Action::Close => {
                    if let Some(conn) = self.conn.take() {
                        self.transport.close(now, conn);
                    }
                    self.pending = None;
                }
            }
        }
        progress
    }

    fn transmit(&mut self, now: Instant) -> bool {
        let mut progress = false;
        loop {
            if self.pending.is_none() {
                self.pending = self
                    .session
                    .poll_transmit(now, &mut self.scratch, &mut self.tx);
            }
            let (Some(len), Some(conn)) = (self.pending, self.conn) else {
                // A frame without a connection is still in the window and
                // goes out again after the next handshake.
                self.pending = None;
                return progress;
            };
            match self.transport.send(now, conn, &self.tx[..len]) {
                Ok(()) => {
                    self.pending = None;
                    progress = true;
                }
                Err(SendError::WouldBlock) => return progress,
                Err(_) => {
                    // Still in the window: replayed after the reconnect
                    // that the backend's disconnect report will cause.
                    self.send_errors += 1;
                    self.pending = None;
                    return progress;
                }
            }
        }
    }
}
