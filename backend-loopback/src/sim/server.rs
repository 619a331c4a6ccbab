//! The simulation's server driver: a [`ServerCore`] over a [`ServerPort`],
//! as the core's `Server` driver runs it, with two additions the
//! simulation needs: the receive window is a const capacity chosen by the
//! scenario (the core's driver fixes it), and the caller can stop the
//! driver right after any transport event (to kill the server right after
//! a chosen protocol event).

use core::ops::Range;

use iomsg_core::session::{ServerConfig, ServerCore, ServerEvent, ServerSink, ServerStats};
use iomsg_core::transport::{ConnId, Transport, TransportEvent};
use iomsg_core::wire::IoMsg;
use iomsg_core::Instant;

use super::scenario::MTU;
use crate::network::{EndpointId, ServerPort};

/// Early frames held per connection before its `Hello`.
const BACKLOG: usize = 16;

/// What the driver tells its caller.
pub(crate) enum Notice<'a> {
    /// The transport accepted a connection.
    Accepted,
    /// The core's event.
    Event(&'a ServerEvent),
}

/// A server instance, whatever its capacities.
pub(crate) trait SimServer {
    /// Does the work possible at `now`. `on` sees every notice and returns
    /// `true` to stop right after the current transport event. Returns
    /// whether anything happened and whether `on` asked to stop.
    fn poll(&mut self, now: Instant, on: &mut dyn FnMut(Notice<'_>) -> bool) -> (bool, bool);
    /// When `poll` must run next if nothing arrives before.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The counters.
    fn stats(&self) -> &ServerStats;
    /// Open holes of a session.
    fn holes(&self, session: u64) -> Vec<Range<u64>>;
    /// The endpoint it listens on.
    fn endpoint(&self) -> EndpointId;
}

struct Driver<const S: usize, const C: usize, const W: usize> {
    transport: ServerPort,
    core: ServerCore<S, C, BACKLOG, W>,
    rx: [u8; MTU],
    tx: [u8; MTU],
}

struct Sink<'a, F: FnMut(Notice<'_>) -> bool + ?Sized> {
    transport: &'a mut ServerPort,
    tx: &'a mut [u8],
    now: Instant,
    on: &'a mut F,
    stop: bool,
}

impl<F: FnMut(Notice<'_>) -> bool + ?Sized> ServerSink for Sink<'_, F> {
    fn transmit(&mut self, conn: ConnId, msg: &IoMsg<'_>) {
        // A reply that cannot be sent is not data loss: the client's reply
        // timer expires and the handshake resumes the session.
        if let Ok(len) = msg.emit(self.tx) {
            let _ = self.transport.send(self.now, conn, &self.tx[..len]);
        }
    }
    fn close(&mut self, conn: ConnId) {
        self.transport.close(self.now, conn);
    }
    fn event(&mut self, event: ServerEvent) {
        self.stop |= (self.on)(Notice::Event(&event));
    }
}

impl<const S: usize, const C: usize, const W: usize> SimServer for Driver<S, C, W> {
    fn poll(&mut self, now: Instant, on: &mut dyn FnMut(Notice<'_>) -> bool) -> (bool, bool) {
        let Driver {
            transport,
            core,
            rx,
            tx,
        } = self;
        let mut progress = false;
        while let Some(event) = transport.poll(now, rx) {
            progress = true;
            let mut sink = Sink {
                transport,
                tx,
                now,
                on,
                stop: false,
            };
            match event {
                TransportEvent::Accepted { conn } => {
                    sink.stop |= (sink.on)(Notice::Accepted);
                    core.handle_accepted(conn, &mut sink);
                }
                TransportEvent::Received { conn, len } => {
                    core.handle_frame(now, conn, &rx[..len.min(MTU)], &mut sink);
                }
                TransportEvent::Disconnected { conn, .. } => core.handle_disconnected(conn),
                TransportEvent::Connected { .. } => {}
            }
            if sink.stop {
                return (true, true);
            }
        }
        if core.poll_timeout().is_some_and(|t| t <= now) {
            let mut sink = Sink {
                transport,
                tx,
                now,
                on,
                stop: false,
            };
            core.handle_timeout(now, &mut sink);
            return (true, sink.stop);
        }
        (progress, false)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.core.poll_timeout()
    }

    fn stats(&self) -> &ServerStats {
        self.core.stats()
    }

    fn holes(&self, session: u64) -> Vec<Range<u64>> {
        self.core.holes(session).collect()
    }

    fn endpoint(&self) -> EndpointId {
        self.transport.endpoint()
    }
}

fn boxed<const S: usize, const C: usize, const W: usize>(
    transport: ServerPort,
    config: ServerConfig,
) -> Box<dyn SimServer> {
    Box::new(Driver::<S, C, W> {
        transport,
        core: ServerCore::new(config),
        rx: [0; MTU],
        tx: [0; MTU],
    })
}

/// A server with a receive window of `window` sns per session and a table
/// of `sessions` sessions (connections: twice that, at least 16).
///
/// Until the core takes these as runtime limits (see
/// [`configs`](super::configs)), they are const capacities, so only the
/// sizes in [`SERVER_WINDOWS`](super::SERVER_WINDOWS) and
/// [`SERVER_SESSIONS`](super::SERVER_SESSIONS) exist; `Scenario::validate`
/// refuses others, and this falls back to the defaults for them.
pub(crate) fn build(
    transport: ServerPort,
    config: ServerConfig,
    window: u64,
    sessions: usize,
) -> Box<dyn SimServer> {
    // WORDS = window / 64 + 1 (one word of the ring is the one being filled).
    match (sessions, window) {
        (4, 64) => boxed::<4, 16, 2>(transport, config),
        (4, 256) => boxed::<4, 16, 5>(transport, config),
        (4, 2048) => boxed::<4, 16, 33>(transport, config),
        (4, 4096) => boxed::<4, 16, 65>(transport, config),
        (64, 64) => boxed::<64, 128, 2>(transport, config),
        (64, 256) => boxed::<64, 128, 5>(transport, config),
        (64, 2048) => boxed::<64, 128, 33>(transport, config),
        (64, 4096) => boxed::<64, 128, 65>(transport, config),
        (_, 64) => boxed::<16, 32, 2>(transport, config),
        (_, 256) => boxed::<16, 32, 5>(transport, config),
        (_, 4096) => boxed::<16, 32, 65>(transport, config),
        _ => boxed::<16, 32, 33>(transport, config),
    }
}
