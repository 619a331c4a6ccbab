//! The server driver: a [`ServerCore`] over a transport.

use crate::session::{ServerConfig, ServerCore, ServerEvent, ServerSink};
use crate::time::Instant;
use crate::transport::{ConnId, Transport, TransportEvent};
use crate::wire::IoMsg;

/// Runs a [`ServerCore`] over a [`Transport`]: accepts, answers, acks.
pub struct Server<
    T: Transport,
    const SESSIONS: usize = 64,
    const CONNS: usize = 64,
    const BACKLOG: usize = 32,
    const MTU: usize = 4160,
    const WORDS: usize = 33,
> {
    transport: T,
    core: ServerCore<SESSIONS, CONNS, BACKLOG, WORDS>,
    rx: [u8; MTU],
    tx: [u8; MTU],
    send_errors: u64,
}

struct Sink<'a, T: Transport, F: FnMut(ServerEvent)> {
    transport: &'a mut T,
    tx: &'a mut [u8],
    now: Instant,
    on_event: &'a mut F,
    send_errors: &'a mut u64,
}

impl<T: Transport, F: FnMut(ServerEvent)> ServerSink for Sink<'_, T, F> {
    fn transmit(&mut self, conn: ConnId, msg: &IoMsg<'_>) {
        // A reply that cannot be sent is not data loss: the client's reply
        // timer expires, it reconnects and the handshake resumes the session.
        match msg.emit(self.tx) {
            Ok(len) => {
                if self
                    .transport
                    .send(self.now, conn, &self.tx[..len])
                    .is_err()
                {
                    *self.send_errors += 1;
                }
            }
            Err(_) => *self.send_errors += 1,
        }
    }
    fn close(&mut self, conn: ConnId) {
        self.transport.close(self.now, conn);
    }
    fn event(&mut self, event: ServerEvent) {
        (self.on_event)(event);
    }
}

impl<
        T: Transport,
        const SESSIONS: usize,
        const CONNS: usize,
        const BACKLOG: usize,
        const MTU: usize,
        const WORDS: usize,
    > Server<T, SESSIONS, CONNS, BACKLOG, MTU, WORDS>
{
    /// A server over `transport`.
    pub fn new(transport: T, config: ServerConfig) -> Self {
        Server {
            transport,
            core: ServerCore::new(config),
            rx: [0; MTU],
            tx: [0; MTU],
            send_errors: 0,
        }
    }

    /// The session table and counters.
    pub fn core(&self) -> &ServerCore<SESSIONS, CONNS, BACKLOG, WORDS> {
        &self.core
    }
    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }
    /// The transport, mutably.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }
    /// Replies the transport did not take.
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }

    /// When `poll` must run next if nothing arrives before.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.core.poll_timeout()
    }

    /// Does all the work possible at `now`; returns whether anything happened.
    pub fn poll(&mut self, now: Instant, on_event: &mut impl FnMut(ServerEvent)) -> bool {
        let Server {
            transport,
            core,
            rx,
            tx,
            send_errors,
        } = self;
        let mut progress = false;
        while let Some(event) = transport.poll(now, rx) {
            progress = true;
            let mut sink = Sink {
                transport,
                tx,
                now,
                on_event,
                send_errors,
            };
            match event {
                TransportEvent::Accepted { conn } => {
                    core.handle_accepted(conn, &mut sink);
                }
                TransportEvent::Received { conn, len } => {
                    // An oversized frame arrives truncated and is rejected.
                    core.handle_frame(now, conn, &rx[..len.min(MTU)], &mut sink);
                }
                TransportEvent::Disconnected { conn, .. } => core.handle_disconnected(conn),
                TransportEvent::Connected { .. } => {}
            }
        }
        if core.poll_timeout().is_some_and(|t| t <= now) {
            let mut sink = Sink {
                transport,
                tx,
                now,
                on_event,
                send_errors,
            };
            core.handle_timeout(now, &mut sink);
            progress = true;
        }
        progress
    }
}
