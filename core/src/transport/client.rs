//! The client driver: one session over one connector.

use crate::conn::{ConnId, DisconnectReason};
use crate::session::{Action, ClientEvent, ClientSession, Message, ReadData, SubmitError};
use crate::time::Instant;
use crate::transport::{
    check, Connector, DriverError, Event, Readiness, RxToken, SendError, TxToken,
};

/// The client's application: hears events and takes read data. Any
/// `FnMut(ClientEvent)` is one that ignores read data.
pub trait ClientHandler {
    /// Something happened (see [`ClientEvent`]).
    fn event(&mut self, event: ClientEvent);
    /// A read's data, borrowed from the transport: once per read.
    fn read_data(&mut self, data: ReadData<'_>) {
        let _ = data;
    }
}

impl<F: FnMut(ClientEvent)> ClientHandler for F {
    fn event(&mut self, event: ClientEvent) {
        self(event);
    }
}

/// Runs a [`ClientSession`] over a [`Connector`]: connects, reconnects,
/// sends and replays, and hands the session every frame and disconnect.
pub struct Client<T: Connector, const N: usize, S> {
    transport: T,
    session: ClientSession<N, S>,
    conn: Option<ConnId>,
    send_errors: u64,
    /// The last transmit ended on `WouldBlock`: the next frame waits for
    /// the transport, which wakes the application when it has room.
    blocked: bool,
}

impl<T: Connector, const N: usize, S: AsRef<[u8]> + AsMut<[u8]>> Client<T, N, S> {
    /// A driver for `session` over `transport`. Tells the session what the
    /// transport carries, so `submit` refuses what could never be sent.
    ///
    /// # Errors
    ///
    /// [`DriverError`] if the transport cannot carry the protocol.
    pub fn new(transport: T, mut session: ClientSession<N, S>) -> Result<Self, DriverError> {
        let caps = transport.capabilities();
        check(caps)?;
        session.set_transport_limit(caps.max_payload());
        Ok(Client {
            transport,
            session,
            conn: None,
            send_errors: 0,
            blocked: false,
        })
    }

    /// The session.
    pub fn session(&self) -> &ClientSession<N, S> {
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
    /// The current connection, if one is open or opening.
    pub fn connection(&self) -> Option<ConnId> {
        self.conn
    }
    /// Frames the transport refused with an error other than `WouldBlock`.
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }
    /// Takes the driver apart; the session can be driven again later.
    pub fn into_parts(self) -> (T, ClientSession<N, S>) {
        (self.transport, self.session)
    }

    /// Marks read `sn` of a resumed session as answered (see
    /// [`ClientSession::settle_read`]).
    pub fn settle_read(&mut self, sn: u64) -> bool {
        self.session.settle_read(sn)
    }

    /// Starts connecting.
    pub fn start(&mut self, now: Instant) {
        self.session.start(now);
    }
    /// Queues a message (see [`ClientSession::submit`]).
    ///
    /// # Errors
    ///
    /// See [`SubmitError`].
    pub fn submit(&mut self, msg: Message<'_>) -> Result<u64, SubmitError> {
        self.session.submit(msg)
    }
    /// Queues a message written in place (see [`ClientSession::submit_with`]).
    ///
    /// # Errors
    ///
    /// See [`SubmitError`].
    pub fn submit_with(
        &mut self,
        op: crate::session::RequestOp,
        bytes: usize,
        read_len: Option<u32>,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<u64, SubmitError> {
        self.session.submit_with(op, bytes, read_len, fill)
    }
    /// Closes gracefully once everything is acknowledged.
    pub fn close(&mut self, now: Instant) {
        self.session.close(now);
    }

    /// Replaces the whole transport (as a client that rebuilds its UCX
    /// context, worker and endpoint does) and keeps the session, which
    /// reconnects over the new one. Returns the old transport.
    ///
    /// # Errors
    ///
    /// [`DriverError`] if the new transport cannot carry the protocol;
    /// nothing changes then.
    pub fn replace_transport(&mut self, now: Instant, transport: T) -> Result<T, DriverError> {
        let caps = transport.capabilities();
        check(caps)?;
        if let Some(conn) = self.conn.take() {
            self.transport.close(now, conn);
        }
        self.session.set_transport_limit(caps.max_payload());
        let old = core::mem::replace(&mut self.transport, transport);
        self.session
            .handle_disconnected(now, DisconnectReason::LocalClose);
        Ok(old)
    }

    /// When `poll` must run next if nothing arrives before.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// The readiness hook: whether the application may sleep now (until
    /// [`poll_timeout`](Self::poll_timeout) at the latest). A frame the
    /// transport refused (`WouldBlock`) waits on the transport: it is asked
    /// to arm, so that an application that waits on readiness sleeps until
    /// the transport has room instead of spinning.
    pub fn arm(&mut self, now: Instant) -> Readiness {
        let frame_ready =
            !self.blocked && self.conn.is_some() && self.session.poll_transmit(now).is_some();
        if frame_ready || self.poll_timeout().is_some_and(|t| t <= now) {
            return Readiness::Pending;
        }
        self.transport.arm()
    }

    /// Does all the work possible at `now`; returns whether anything happened.
    pub fn poll(&mut self, now: Instant, handler: &mut impl ClientHandler) -> bool {
        let mut any = false;
        loop {
            let mut progress = self.receive(now, handler);
            if self.session.poll_timeout().is_some_and(|t| t <= now) {
                self.session.handle_timeout(now);
            }
            progress |= self.run_actions(now);
            progress |= self.transmit(now);
            progress |= self.run_actions(now);
            while let Some(event) = self.session.poll_event() {
                progress = true;
                handler.event(event);
            }
            if !progress {
                return any;
            }
            any = true;
        }
    }

    fn receive(&mut self, now: Instant, handler: &mut impl ClientHandler) -> bool {
        let mut progress = false;
        while let Some(event) = self.transport.poll(now) {
            progress = true;
            match event {
                Event::Connected { conn } if self.conn == Some(conn) => {
                    self.session.handle_connected(now);
                }
                Event::Received { conn, frame } if self.conn == Some(conn) => {
                    let session = &mut self.session;
                    frame.consume(|bytes| {
                        if let Some(read) = session.handle_frame(now, bytes) {
                            handler.read_data(read);
                        }
                    });
                }
                Event::Disconnected { conn, reason } if self.conn == Some(conn) => {
                    self.conn = None;
                    self.session.handle_disconnected(now, reason);
                }
                // Events of connections this driver already left behind.
                _ => {}
            }
        }
        progress
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
                    match self.transport.connect(now) {
                        Ok(conn) => self.conn = Some(conn),
                        Err(reason) => self.session.handle_disconnected(now, reason),
                    }
                }
                Action::Close => {
                    if let Some(conn) = self.conn.take() {
                        self.transport.close(now, conn);
                    }
                }
            }
        }
        progress
    }

    fn transmit(&mut self, now: Instant) -> bool {
        let mut progress = false;
        self.blocked = false;
        while let (Some(t), Some(conn)) = (self.session.poll_transmit(now), self.conn) {
            let e = match self.transport.transmit(now, conn, t.len()) {
                Ok(token) => {
                    let session = &mut self.session;
                    token.consume(|buf| session.write_transmit(now, t, buf));
                    progress = true;
                    continue;
                }
                Err(e) => e,
            };
            match e {
                // Offered again after the next poll: nothing changed.
                SendError::WouldBlock => {
                    self.blocked = true;
                    break;
                }
                e => {
                    // The frame never went out and stays in the window;
                    // skipping it would open a false hole. Close the
                    // connection instead: the session replays after the
                    // next handshake, or gives up when the transport
                    // refuses a frame it said it carries.
                    self.send_errors += 1;
                    self.conn = None;
                    self.transport.close(now, conn);
                    match e {
                        SendError::TooLarge { len, .. } => {
                            // What it claimed, which submit trusted: the
                            // error's own limit is what it really carries.
                            let max_frame = self.transport.capabilities().max_frame;
                            self.session.handle_transport_refused(now, len, max_frame);
                        }
                        _ => self
                            .session
                            .handle_disconnected(now, DisconnectReason::SendFailed),
                    }
                    progress = true;
                    break;
                }
            }
        }
        progress
    }
}
