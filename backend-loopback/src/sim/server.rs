//! The simulation's server driver: a [`ServerCore`] over a [`ServerPort`],
//! as the core's `Server` driver runs it, with two additions the
//! simulation needs: the receive window and the tombstone table are const
//! capacities chosen by the scenario (the core's driver fixes them), and
//! the caller can stop the driver right after any transport event (to
//! kill the server right after a chosen protocol event). As the core's
//! driver, it can flush (hand over the journal's records, then say
//! `flush`) before replies leave. Its application keeps the slot's
//! [`Journal`] (lent to each call): it takes the records, commits them at
//! each flush, and answers `recall` from them.

use core::ops::Range;

use iomsg_core::session::{
    Delivery, JournalError, ReadRequest, ServerConfig, ServerCore, ServerEvent, ServerHandler,
    ServerStats, Unkept,
};
use iomsg_core::transport::{ConnId, Event, RxToken, SendError, Transport, TxToken};
use iomsg_core::{workload, Instant};

use super::journal::Journal;
use crate::faulty::Faulty;
use crate::network::{EndpointId, ServerPort};

/// What the driver tells its caller.
pub(crate) enum Notice<'a> {
    /// The transport accepted a connection.
    Accepted,
    /// The application took a message (the sim's ground truth).
    Delivered {
        /// The session.
        session: u64,
        /// Its sn.
        sn: u64,
        /// The connection that carried it.
        conn: ConnId,
        /// [`workload::hash`] of its bytes (a read's: of its request).
        hash: u64,
    },
    /// The core's event.
    Event(&'a ServerEvent),
    /// The application committed what it took and the journal records
    /// since the last flush (the journal has committed its part): replies
    /// that count on them leave next.
    Flush,
}

/// A server instance, whatever its capacities.
pub(crate) trait SimServer {
    /// Does the work possible at `now`, its application keeping
    /// `journal`. `on` sees every notice and returns `true` to stop right
    /// after the current transport event. Returns whether anything
    /// happened and whether `on` asked to stop.
    fn poll(
        &mut self,
        now: Instant,
        journal: &mut Journal,
        on: &mut dyn FnMut(Notice<'_>) -> bool,
    ) -> (bool, bool);
    /// When `poll` must run next if nothing arrives before.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The counters.
    fn stats(&self) -> &ServerStats;
    /// Open holes of a session.
    fn holes(&self, session: u64) -> Vec<Range<u64>>;
    /// The endpoint it listens on.
    fn endpoint(&self) -> EndpointId;
    /// When its fault wrapper releases the next delayed frame.
    fn next_release(&self) -> Option<Instant>;
    /// Whether to flush (hand the journal's records over and notify
    /// [`Notice::Flush`]) before replies leave; off by default: without
    /// crash-proof state nobody keeps what a flush commits.
    fn flushing(&mut self, on: bool);
    /// Takes back a journal record before serving.
    fn restore(&mut self, now: Instant, record: &[u8]) -> Result<u64, JournalError>;
    /// The record of every session it holds, table and tombstones
    /// (`ServerCore::journal_all`).
    fn journal_all(&self) -> Vec<Vec<u8>>;
    /// Hands over the journal's pending records and flushes, as before
    /// replies leave (a last flush before a clean stop).
    fn flush(&mut self, journal: &mut Journal, on: &mut dyn FnMut(Notice<'_>) -> bool);
}

struct Driver<const S: usize, const C: usize, const W: usize, const T: usize> {
    transport: Faulty<ServerPort>,
    core: ServerCore<S, C, W, T>,
    /// Whether the caller hears of flushes ([`SimServer::flushing`]).
    flushing: bool,
}

/// The simulated application: reports what it takes, answers reads with
/// the workload's pattern, keeps the journal.
struct App<'a, F: FnMut(Notice<'_>) -> bool + ?Sized> {
    on: &'a mut F,
    journal: &'a mut Journal,
    stop: bool,
}

impl<F: FnMut(Notice<'_>) -> bool + ?Sized> ServerHandler for App<'_, F> {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.stop |= (self.on)(Notice::Delivered {
            session: d.session,
            sn: d.sn,
            conn: d.conn,
            hash: workload::hash(d.data),
        });
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn event(&mut self, event: ServerEvent) {
        self.stop |= (self.on)(Notice::Event(&event));
    }
    fn journal(&mut self, record: &[u8]) {
        self.journal.keep(record);
    }
    fn flush(&mut self) -> Result<(), Unkept> {
        self.journal.commit();
        self.stop |= (self.on)(Notice::Flush);
        Ok(())
    }
    fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        self.journal.recall(session, out)
    }
}

impl<const S: usize, const C: usize, const W: usize, const T: usize> Driver<S, C, W, T> {
    /// Sends what the core has queued, as the core's driver does.
    fn transmit(&mut self, now: Instant, app: &mut impl ServerHandler) -> bool {
        let mut progress = false;
        if self.flushing && self.core.pending_replies() > 0 {
            // Whatever the replies acknowledge is kept before they leave.
            self.core.drain_journal(|r| app.journal(r));
            // The simulated application always keeps its batch.
            let _ = app.flush();
        }
        loop {
            if let Some(conn) = self.core.poll_close() {
                self.transport.close(now, conn);
                progress = true;
                continue;
            }
            let Some(t) = self.core.poll_transmit() else {
                return progress;
            };
            let e = match self.transport.transmit(now, t.conn, t.len()) {
                Ok(token) => {
                    let core = &mut self.core;
                    token.consume(|buf| core.write_transmit(t, buf, app));
                    progress = true;
                    continue;
                }
                Err(e) => e,
            };
            if e == SendError::WouldBlock {
                // This connection waits for the next round.
                self.core.transmit_blocked(t);
                continue;
            }
            self.core.discard_transmit(t);
            self.transport.close(now, t.conn);
            progress = true;
        }
    }
}

impl<const S: usize, const C: usize, const W: usize, const T: usize> SimServer
    for Driver<S, C, W, T>
{
    fn poll(
        &mut self,
        now: Instant,
        journal: &mut Journal,
        on: &mut dyn FnMut(Notice<'_>) -> bool,
    ) -> (bool, bool) {
        let mut app = App {
            on,
            journal,
            stop: false,
        };
        let mut progress = false;
        loop {
            let mut round = false;
            loop {
                let core = &mut self.core;
                match self.transport.poll(now) {
                    None => break,
                    Some(Event::Accepted { conn }) => {
                        app.stop |= (app.on)(Notice::Accepted);
                        core.handle_accepted(now, conn, &mut app);
                    }
                    Some(Event::Received { conn, frame }) => {
                        frame.consume(|bytes| core.handle_frame(now, conn, bytes, &mut app));
                    }
                    Some(Event::Disconnected { conn, .. }) => core.handle_disconnected(conn),
                    Some(_) => {}
                }
                round = true;
                if !app.stop && self.core.needs_transmit() {
                    // As the core's driver: a rejected connection is
                    // closed, and a queue near full is sent, before
                    // anything more is taken.
                    self.transmit(now, &mut app);
                }
                if app.stop {
                    // Killed right after this event: what it queued dies
                    // with the instance.
                    return (true, true);
                }
            }
            if self.core.poll_timeout().is_some_and(|t| t <= now) {
                self.core.handle_timeout(now, &mut app);
                round = true;
                if app.stop {
                    return (true, true);
                }
            }
            round |= self.transmit(now, &mut app);
            if app.stop {
                return (true, true);
            }
            if !round {
                return (progress, false);
            }
            progress = true;
        }
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
        self.transport.inner().endpoint()
    }

    fn next_release(&self) -> Option<Instant> {
        self.transport.next_release()
    }

    fn flushing(&mut self, on: bool) {
        self.flushing = on;
    }

    fn restore(&mut self, now: Instant, record: &[u8]) -> Result<u64, JournalError> {
        self.core.restore(now, record)
    }

    fn journal_all(&self) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        self.core.journal_all(|r| all.push(r.to_vec()));
        all
    }

    fn flush(&mut self, journal: &mut Journal, on: &mut dyn FnMut(Notice<'_>) -> bool) {
        let mut app = App {
            on,
            journal,
            stop: false,
        };
        self.core.drain_journal(|r| app.journal(r));
        let _ = app.flush();
    }
}

fn boxed<const S: usize, const C: usize, const W: usize, const T: usize>(
    transport: Faulty<ServerPort>,
    config: ServerConfig,
) -> Box<dyn SimServer> {
    let mut core = ServerCore::new(config);
    core.set_transport_limit(transport.capabilities().max_payload());
    Box::new(Driver::<S, C, W, T> {
        transport,
        core,
        flushing: false,
    })
}

/// [`boxed`] with `tombs` tombstones: one of
/// [`SERVER_TOMBS`](super::SERVER_TOMBS), the default (256) for others.
fn with_tombs<const S: usize, const C: usize, const W: usize>(
    transport: Faulty<ServerPort>,
    config: ServerConfig,
    tombs: usize,
) -> Box<dyn SimServer> {
    match tombs {
        2 => boxed::<S, C, W, 2>(transport, config),
        4 => boxed::<S, C, W, 4>(transport, config),
        8 => boxed::<S, C, W, 8>(transport, config),
        _ => boxed::<S, C, W, 256>(transport, config),
    }
}

/// A server with a receive window of `window` sns per session, a table
/// of `sessions` sessions (connections: twice that, at least 16; tables
/// below 4 are a table of 4 that `ServerConfig::max_sessions` limits) and
/// `tombs` tombstones.
///
/// Until the core takes these as runtime limits (see
/// [`configs`](super::configs)), they are const capacities, so only the
/// sizes in [`SERVER_WINDOWS`](super::SERVER_WINDOWS),
/// [`SERVER_SESSIONS`](super::SERVER_SESSIONS) and
/// [`SERVER_TOMBS`](super::SERVER_TOMBS) exist; `Scenario::validate`
/// refuses others, and this falls back to the defaults for them.
pub(crate) fn build(
    transport: Faulty<ServerPort>,
    config: ServerConfig,
    window: u64,
    sessions: usize,
    tombs: usize,
) -> Box<dyn SimServer> {
    let (t, c) = (transport, config);
    // WORDS = window / 64 + 1 (one word of the ring is the one being filled).
    match (sessions, window) {
        (2..=4, 64) => with_tombs::<4, 16, 2>(t, c, tombs),
        (2..=4, 256) => with_tombs::<4, 16, 5>(t, c, tombs),
        (2..=4, 2048) => with_tombs::<4, 16, 33>(t, c, tombs),
        (2..=4, 4096) => with_tombs::<4, 16, 65>(t, c, tombs),
        (64, 64) => with_tombs::<64, 128, 2>(t, c, tombs),
        (64, 256) => with_tombs::<64, 128, 5>(t, c, tombs),
        (64, 2048) => with_tombs::<64, 128, 33>(t, c, tombs),
        (64, 4096) => with_tombs::<64, 128, 65>(t, c, tombs),
        (_, 64) => with_tombs::<16, 32, 2>(t, c, tombs),
        (_, 256) => with_tombs::<16, 32, 5>(t, c, tombs),
        (_, 4096) => with_tombs::<16, 32, 65>(t, c, tombs),
        _ => with_tombs::<16, 32, 33>(t, c, tombs),
    }
}
