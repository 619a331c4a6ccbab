//! The server driver: a [`ServerCore`] over a listener.

use core::borrow::BorrowMut;

use crate::session::{JournalError, ServerConfig, ServerCore, ServerEvent, ServerHandler, Unkept};
use crate::time::Instant;
use crate::transport::{
    check, DriverError, Event, Listener, Readiness, RxToken, SendError, TxToken,
};

/// Runs a [`ServerCore`] over a [`Listener`]: accepts, hands messages to
/// the application, answers, acks.
///
/// The core is held as `C`: by value (the default, from
/// [`new`](Server::new)), or wherever the application keeps it — a
/// `&'static mut` from a `static`, a `Box` — through
/// [`with_core`](Server::with_core), so that a large core need never be
/// built on the stack.
///
/// The sizes are the core's (see [`ServerCore`]); `TOMBS`, last so that
/// it may be left out, is its tombstone table's, and a core with another
/// one names it in `C` too:
/// `Server<T, 64, 64, 33, Box<ServerCore<64, 64, 33, 1024>>, 1024>`.
pub struct Server<
    T: Listener,
    const SESSIONS: usize = 64,
    const CONNS: usize = 64,
    const WORDS: usize = 33,
    C = ServerCore<SESSIONS, CONNS, WORDS>,
    const TOMBS: usize = 256,
> {
    transport: T,
    core: C,
    send_errors: u64,
    /// The last transmit round ended with replies the transport refused.
    blocked: bool,
}

impl<T: Listener> Server<T> {
    /// A server over `transport` with the default table sizes (64
    /// sessions, 64 connections, 2,048 sns of window per session), its
    /// core built by value. Other sizes:
    /// `Server::<T, SESSIONS, CONNS, WORDS>::with_core(transport, ServerCore::new(config))`.
    ///
    /// # Errors
    ///
    /// [`DriverError`] if the transport cannot carry the protocol.
    pub fn new(transport: T, config: ServerConfig) -> Result<Self, DriverError> {
        Server::with_core(transport, ServerCore::new(config))
    }
}

impl<T, const SESSIONS: usize, const CONNS: usize, const WORDS: usize, C, const TOMBS: usize>
    Server<T, SESSIONS, CONNS, WORDS, C, TOMBS>
where
    T: Listener,
    C: BorrowMut<ServerCore<SESSIONS, CONNS, WORDS, TOMBS>>,
{
    /// A server over `transport` with the core the application keeps
    /// (a fresh one, or one [`reset`](ServerCore::reset) for this instance).
    ///
    /// # Errors
    ///
    /// [`DriverError`] if the transport cannot carry the protocol.
    pub fn with_core(transport: T, mut core: C) -> Result<Self, DriverError> {
        let caps = transport.capabilities();
        check(caps)?;
        core.borrow_mut().set_transport_limit(caps.max_payload());
        Ok(Server {
            transport,
            core,
            send_errors: 0,
            blocked: false,
        })
    }

    /// The session table and counters.
    pub fn core(&self) -> &ServerCore<SESSIONS, CONNS, WORDS, TOMBS> {
        self.core.borrow()
    }

    /// Takes back one journal record before serving (see
    /// [`ServerCore::restore`]).
    ///
    /// # Errors
    ///
    /// As [`ServerCore::restore`].
    pub fn restore(&mut self, now: Instant, record: &[u8]) -> Result<u64, JournalError> {
        self.core.borrow_mut().restore(now, record)
    }

    /// Hands the journal records of changed sessions to
    /// [`ServerHandler::journal`] (journal on), then calls
    /// [`ServerHandler::flush`]. `poll` does this before replies leave;
    /// call it once more before stopping, so that what was delivered
    /// since is kept with its journal.
    ///
    /// # Errors
    ///
    /// [`Unkept`]: the application's `flush` failed, or failed before:
    /// the server [halted](ServerCore::halt) and acknowledges nothing
    /// more (see [`halted`](Self::halted)).
    pub fn flush(&mut self, app: &mut impl ServerHandler) -> Result<(), Unkept> {
        let core = self.core.borrow_mut();
        if core.is_halted() {
            return Err(Unkept);
        }
        core.drain_journal(|r| app.journal(r));
        app.flush().inspect_err(|_| core.halt(app))
    }

    /// Whether the application's [`flush`](ServerHandler::flush) failed:
    /// the server then acknowledges nothing more and refuses every
    /// connection (see [`ServerCore::halt`]); stop it, report the
    /// application's error, and start a new instance once the cause is
    /// fixed.
    #[must_use]
    pub fn halted(&self) -> bool {
        self.core().is_halted()
    }

    /// Takes the driver apart.
    pub fn into_parts(self) -> (T, C) {
        (self.transport, self.core)
    }
    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }
    /// The transport, mutably.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }
    /// Replies the transport refused with an error other than `WouldBlock`
    /// (their connections were closed).
    pub fn send_errors(&self) -> u64 {
        self.send_errors
    }

    /// When `poll` must run next if nothing arrives before.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.core().poll_timeout()
    }

    /// The readiness hook: whether the application may sleep now (until
    /// [`poll_timeout`](Self::poll_timeout) at the latest). Replies that
    /// the transport refused (`WouldBlock`) are its to wake for: the
    /// transport is asked to arm then.
    pub fn arm(&mut self, now: Instant) -> Readiness {
        let ready = self.core().pending_replies() > 0 && !self.blocked;
        if ready || self.poll_timeout().is_some_and(|t| t <= now) {
            return Readiness::Pending;
        }
        self.transport.arm()
    }

    /// Does all the work possible at `now`; returns whether anything
    /// happened. Messages go to `app` as they arrive, reads are answered
    /// by it as their completions go out.
    ///
    /// Frames are taken for every connection while any one of them
    /// stalls: the replies of a connection the transport refuses wait in
    /// that connection's own queue, and when they no longer fit, that
    /// connection alone is closed.
    pub fn poll(&mut self, now: Instant, app: &mut impl ServerHandler) -> bool {
        let mut any = false;
        loop {
            let mut progress = false;
            loop {
                let core = self.core.borrow_mut();
                match self.transport.poll(now) {
                    None => break,
                    Some(Event::Accepted { conn }) => {
                        core.handle_accepted(now, conn, app);
                    }
                    Some(Event::Received { conn, frame }) => {
                        frame.consume(|bytes| core.handle_frame(now, conn, bytes, app));
                    }
                    Some(Event::Disconnected { conn, reason }) => {
                        core.handle_disconnected(conn);
                        app.event(ServerEvent::Disconnected { conn, reason });
                    }
                    Some(_) => {}
                }
                progress = true;
                if self.core.borrow_mut().needs_transmit() {
                    // A queue near full or a rejected connection: send
                    // (and close) before the transport hands over more.
                    self.transmit(now, app);
                }
            }
            if self
                .core
                .borrow_mut()
                .poll_timeout()
                .is_some_and(|t| t <= now)
            {
                self.core.borrow_mut().handle_timeout(now, app);
                progress = true;
            }
            progress |= self.transmit(now, app);
            if !progress {
                return any;
            }
            any = true;
        }
    }

    /// One transmit round: closes what is due, then one frame per
    /// connection in turn until every queue is empty or refused.
    fn transmit(&mut self, now: Instant, app: &mut impl ServerHandler) -> bool {
        let mut progress = false;
        if self.core.borrow_mut().pending_replies() > 0 && !self.halted() {
            // Whatever the replies acknowledge is kept before they leave;
            // when it cannot be, the core halts and drops them.
            let _ = self.flush(app);
        }
        loop {
            if let Some(conn) = self.core.borrow_mut().poll_close() {
                self.transport.close(now, conn);
                progress = true;
                continue;
            }
            let Some(t) = self.core.borrow_mut().poll_transmit() else {
                break;
            };
            let e = match self.transport.transmit(now, t.conn, t.len()) {
                Ok(token) => {
                    let core = self.core.borrow_mut();
                    token.consume(|buf| core.write_transmit(t, buf, app));
                    progress = true;
                    continue;
                }
                Err(e) => e,
            };
            match e {
                // Delayed, never dropped: this connection waits for the
                // next round, the others go on.
                SendError::WouldBlock => self.core.borrow_mut().transmit_blocked(t),
                _ => {
                    // This connection can take nothing more: close it; its
                    // client resends what was not acknowledged.
                    self.send_errors += 1;
                    self.core.borrow_mut().discard_transmit(t);
                    self.transport.close(now, t.conn);
                    progress = true;
                }
            }
        }
        // What is left was refused: the transport wakes the waiter.
        self.blocked = self.core().pending_replies() > 0;
        progress
    }
}
