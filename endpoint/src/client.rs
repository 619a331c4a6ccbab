//! [`Client`]: one session to one server, over any backend.

use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, ClientStats, DisconnectCause, FailReason, Message,
    ResumePoint, SubmitError,
};
use iomsg_core::transport::{self, ClientHandler, Readiness};
use iomsg_core::Instant;

use crate::backend::{Dial, DialSetup};
use crate::events::{EventQueue, GivenUp};
use crate::observe::ClientObserver;
use crate::{random_u64, sooner, ClientOptions, Clock, Error, Idle, Progress, ToAddr, WINDOW};

/// The sans-IO driver under a [`Client`] on backend `B`.
pub type ClientDriver<B> = transport::Client<B, WINDOW, Box<[u8]>>;

/// One session to one server over backend `B` (`iomsg_ucx::Client` and
/// `iomsg_stream::Client` name it for theirs): connects, sends,
/// reconnects and replays by itself, and tells when a message is
/// acknowledged — the server's application took it — or given up.
///
/// Written once for any backend `B` (an application names its own, such
/// as `iomsg_stream::Client`):
///
/// ```no_run
/// # fn demo<B: iomsg_endpoint::Dial>() -> Result<(), iomsg_endpoint::Error> {
/// use std::time::Duration;
/// let mut client = iomsg_endpoint::Client::<B>::connect("127.0.0.1:13337", Default::default())?;
/// let sn = client.send(b"hello")?;
/// client.wait_acked(sn, Duration::from_secs(5))?;
/// client.close(Duration::from_secs(5))?;
/// # Ok(()) }
/// ```
///
/// A client does work only inside its calls: `send`, the waits, `poll`.
/// One that has nothing to send calls [`wait`](Self::wait) (or `poll` in
/// its own loop, sleeping at most [`poll_delay`](Self::poll_delay))
/// so that acknowledgements arrive, heartbeats go out and a lost server is
/// noticed.
pub struct Client<B: Dial> {
    driver: ClientDriver<B>,
    clock: Clock,
    seen: Seen,
    addr: B::Addr,
    progress: Progress,
    idle: Idle,
    /// Sns below it were reported by an earlier `flush`.
    flushed: u64,
}

/// What the session told, kept for the calls that ask.
#[derive(Default)]
struct Seen {
    /// Every sn below it is acknowledged or given up.
    acked: u64,
    /// Every sn given up, for `wait_acked`, `flush` and receipts.
    given_up: GivenUp,
    /// Sns a server said it lost after acknowledging them, not yet
    /// reported by `flush`.
    state_lost: Option<std::ops::Range<u64>>,
    failed: Option<FailReason>,
    established: bool,
    last_cause: Option<DisconnectCause>,
    /// For `next_event`: folded, never dropped (see `next_event`).
    events: EventQueue<ClientEvent>,
    /// Metrics and traces (empty without their features).
    observer: ClientObserver,
    /// The instant of the poll under way, for the observer's timings.
    #[cfg(feature = "metrics")]
    now: Instant,
}

impl Seen {
    /// The instant of the poll under way (the observer uses it only with
    /// feature `metrics`).
    #[inline]
    fn now(&self) -> Instant {
        #[cfg(feature = "metrics")]
        return self.now;
        #[cfg(not(feature = "metrics"))]
        Instant::ZERO
    }

    /// How message `sn` ended, if it has: acknowledged, given up (in the
    /// range of touching give-ups that holds it), or the client failed.
    fn outcome(&self, sn: u64) -> Option<Result<(), Error>> {
        if let Some(range) = self.given_up.find(sn) {
            return Some(Err(Error::Lost {
                sn,
                range: range.clone(),
            }));
        }
        if self.acked > sn {
            return Some(Ok(()));
        }
        self.failed.map(|reason| Err(Error::Failed(reason)))
    }
}

impl ClientHandler for Seen {
    fn event(&mut self, event: ClientEvent) {
        self.observer.on_event(&event, self.now());
        match &event {
            ClientEvent::Acked { upto } => self.acked = self.acked.max(*upto),
            ClientEvent::NotReplayed { range } => self.given_up.insert(range.clone()),
            ClientEvent::StateLost { unknown, .. } => {
                let r = unknown.clone();
                self.state_lost = Some(match self.state_lost.take() {
                    Some(old) => old.start.min(r.start)..old.end.max(r.end),
                    None => r,
                });
            }
            ClientEvent::Established { .. } => self.established = true,
            ClientEvent::Disconnected { cause, .. } => self.last_cause = Some(*cause),
            ClientEvent::Failed(reason) => self.failed = Some(*reason),
            _ => {}
        }
        self.events.push(event);
    }
}

impl<B: Dial> Client<B> {
    /// Connects to the server at `addr` (text such as `"127.0.0.1:7000"`,
    /// a `SocketAddr`, or the backend's own address) and waits for the
    /// handshake (at most `options`' connect timeout). The session id and
    /// its token come from the operating system's randomness.
    ///
    /// # Errors
    ///
    /// [`Error::Address`] for an address that does not parse (it names
    /// the input and the forms the backend takes), [`Error::Setup`] if
    /// the backend cannot be set up, [`Error::ConnectTimeout`]
    /// (with how the last attempt ended) if no handshake completed in
    /// time, [`Error::Failed`] at once if the server refused the client
    /// for good (its reason named: another client's session id, a full
    /// table the client was never let in to, the other API or wire
    /// version).
    pub fn connect(
        addr: impl ToAddr<B::Addr>,
        options: ClientOptions<B::Config>,
    ) -> Result<Client<B>, Error> {
        let id = random_u64().map_err(Error::Random)?;
        let token = random_u64().map_err(Error::Random)?;
        Client::resume(
            addr,
            options,
            (id, token),
            ResumePoint::new(0, 0),
            [[0u8; 0]; 0],
        )
    }

    /// Goes on with a session of an earlier process, as kept in its
    /// outbox: the same `identity` (session id and token, see
    /// [`identity`](Self::identity)), its [`resume_point`](Self::resume_point),
    /// and the messages it still `held` from the point's `base_sn` on, in
    /// sn order, with the bytes they had. They keep their sns and are sent
    /// again; a server that keeps a journal
    /// ([`ServerOptions::journal`](crate::ServerOptions::journal), on any
    /// backend)
    /// acknowledges what it already took without taking it twice. Then
    /// waits for the handshake, as [`connect`](Self::connect).
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect); [`Error::Rejected`] if a held message
    /// no longer fits the window ([`ClientOptions::window`] and
    /// [`ClientOptions::window_bytes`] must hold them all).
    pub fn resume<I>(
        addr: impl ToAddr<B::Addr>,
        options: ClientOptions<B::Config>,
        (id, token): (u64, u64),
        point: ResumePoint,
        held: I,
    ) -> Result<Client<B>, Error>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let addr = addr.to_addr()?;
        let mut config = ClientConfig::new(id, token);
        config.window = options.window.min(B::MAX_WINDOW);
        config.replay = options.replay;
        config.retry_for = options.retry_for;
        config.retry_full_table = options.retry_full_table;
        config.validate = options.validate;
        config.crc = B::crc();
        let progress = if options.busy_poll {
            Progress::BusyPoll
        } else {
            Progress::Adaptive
        };
        let setup = DialSetup {
            config: options.transport,
            busy_poll: options.busy_poll,
        };
        let transport = B::dial(&addr, setup)?;
        let clock = Clock::start();
        let storage = vec![0u8; options.window_bytes].into_boxed_slice();
        let mut session = ClientSession::resume(config, clock.now(), storage, point);
        for data in held {
            session
                .submit(Message::Write(data.as_ref()))
                .map_err(Error::Rejected)?;
        }
        let mut driver = transport::Client::new(transport, session)?;
        driver.start(clock.now());
        let mut client = Client {
            driver,
            clock,
            seen: Seen::default(),
            addr,
            progress,
            idle: Idle::default(),
            flushed: 0,
        };
        let started = Wall::now();
        while !client.seen.established {
            client.check()?;
            let waited = started.elapsed();
            if waited >= options.connect_timeout {
                return Err(Error::ConnectTimeout {
                    addr: client.addr.to_string(),
                    waited,
                    last: client.seen.last_cause,
                });
            }
            client.step(options.connect_timeout - waited)?;
        }
        Ok(client)
    }

    /// The session id and its token: with [`resume_point`](Self::resume_point)
    /// and the unacknowledged messages, what an outbox keeps to
    /// [`resume`](Self::resume) this session in another process.
    #[must_use]
    pub fn identity(&self) -> (u64, u64) {
        let c = self.driver.session().config();
        (c.session, c.token)
    }

    /// Where the session stands (see [`ResumePoint`]): messages from its
    /// `base_sn` on are not yet acknowledged.
    #[must_use]
    pub fn resume_point(&self) -> ResumePoint {
        self.driver.session().resume_point()
    }

    /// Queues `data` as the next message and starts sending it; returns
    /// its sn. Waits while the window is full (the server has not
    /// acknowledged enough yet). The bytes are copied into the window,
    /// which keeps them until they are acknowledged.
    ///
    /// # Errors
    ///
    /// [`Error::Rejected`] for a message longer than the largest one
    /// (nothing changed), [`Error::Failed`] once the client gave up.
    pub fn send(&mut self, data: &[u8]) -> Result<u64, Error> {
        loop {
            if let Some(sn) = self.try_send(data)? {
                self.poll();
                return Ok(sn);
            }
            self.step(Duration::from_millis(100))?;
        }
    }

    /// Queues `data` as the next message without waiting or sending, and
    /// returns its sn; `Ok(None)` while the window is full. The next
    /// [`poll`](Self::poll) (or any wait) sends it, with whatever else was
    /// queued: queue many, then poll, to send them in few transport
    /// messages.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub fn try_send(&mut self, data: &[u8]) -> Result<Option<u64>, Error> {
        self.check()?;
        match self.driver.submit(Message::Write(data)) {
            Ok(sn) => {
                if ClientObserver::OBSERVES_SUBMITS {
                    let now = self.clock.now();
                    self.seen.observer.on_submit(sn, now);
                }
                Ok(Some(sn))
            }
            Err(SubmitError::WindowFull { .. } | SubmitError::BufferFull(_)) => Ok(None),
            Err(e) => Err(Error::Rejected(e)),
        }
    }

    /// How message `sn` ended, if it has: acknowledged, given up, or the
    /// client failed.
    pub(crate) fn outcome(&self, sn: u64) -> Option<Result<(), Error>> {
        self.seen.outcome(sn)
    }

    /// Arms the transport for an edge-triggered waiter: whether the
    /// application may sleep on the ready fd now (see
    /// [`Backend::take_wakeups`](crate::Backend::take_wakeups)).
    #[cfg(feature = "tokio")]
    pub(crate) fn arm_for_edges(&mut self) -> bool {
        self.driver.arm(self.clock.now()) == Readiness::Armed
            && matches!(self.driver.transport().take_wakeups(), Ok(0))
    }

    /// The backend's ready fd.
    #[cfg(feature = "tokio")]
    pub(crate) fn ready_fd(&self) -> Result<std::os::fd::BorrowedFd<'_>, Error> {
        self.driver.transport().ready_fd().map_err(wait_error::<B>)
    }

    /// Whether the session ended (closed or failed).
    #[cfg(feature = "tokio")]
    pub(crate) fn is_terminal(&self) -> bool {
        self.driver.session().is_terminal()
    }

    /// Starts closing (a `Bye` once everything is acknowledged).
    pub(crate) fn start_close(&mut self) {
        self.driver.close(self.clock.now());
    }

    /// Waits until message `sn` is acknowledged: the server's application
    /// took it (with replay on, possibly an instance before a restart, and
    /// possibly twice: see the crate's guarantees).
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] if it was given up (replay off),
    /// [`Error::Failed`] if the client gave up, [`Error::Timeout`] after
    /// `timeout`.
    pub fn wait_acked(&mut self, sn: u64, timeout: Duration) -> Result<(), Error> {
        let started = Wall::now();
        loop {
            if let Some(outcome) = self.outcome(sn) {
                return outcome;
            }
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(Error::Timeout {
                    what: "waiting for an acknowledgement",
                    waited,
                });
            }
            self.step(timeout - waited)?;
        }
    }

    /// Waits until every message sent so far is acknowledged or given up.
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] naming the first message given up since the last
    /// `flush` (replay off), [`Error::StateLost`] when a server lost
    /// state it had acknowledged since the last `flush`, or as
    /// [`wait_acked`](Self::wait_acked) for the first that was not
    /// acknowledged in time.
    pub fn flush(&mut self, timeout: Duration) -> Result<(), Error> {
        let next = self.driver.session().next_sn();
        let since = std::mem::replace(&mut self.flushed, next);
        if next > 0 {
            match self.wait_acked(next - 1, timeout) {
                Ok(()) | Err(Error::Lost { .. }) => {}
                Err(e) => {
                    self.flushed = since;
                    return Err(e);
                }
            }
        }
        if let Some(r) = self.seen.given_up.first_in(since..next) {
            return Err(Error::Lost {
                sn: r.start.max(since),
                range: r.clone(),
            });
        }
        match self.seen.state_lost.take() {
            Some(unknown) => Err(Error::StateLost { unknown }),
            None => Ok(()),
        }
    }

    /// Says goodbye once everything is acknowledged (at most `timeout`),
    /// and ends the session.
    ///
    /// # Errors
    ///
    /// As [`flush`](Self::flush); the session ends in any case.
    pub fn close(mut self, timeout: Duration) -> Result<(), Error> {
        let started = Wall::now();
        let flushed = self.flush(timeout);
        self.start_close();
        while !self.driver.session().is_terminal() {
            let waited = started.elapsed();
            if waited >= timeout + Duration::from_secs(1) {
                break;
            }
            self.step(Duration::from_millis(50))?;
        }
        flushed
    }

    /// Does all the work possible now without waiting (receive, send,
    /// timers); returns whether anything happened.
    pub fn poll(&mut self) -> bool {
        let now = self.clock.now();
        #[cfg(feature = "metrics")]
        {
            self.seen.now = now;
        }
        let busy = self.driver.poll(now, &mut self.seen);
        self.seen.observer.on_stats(self.driver.session().stats());
        busy
    }

    /// How long the client may sleep before it must [`poll`](Self::poll)
    /// again (its own timers and the transport's heartbeats together);
    /// `None`: until something arrives.
    #[must_use]
    pub fn poll_delay(&self) -> Option<Duration> {
        sooner(
            self.driver.poll_timeout().map(|t| self.clock.until(t)),
            self.driver.transport().poll_delay(),
        )
    }

    /// The old name of [`poll_delay`](Self::poll_delay): a `Duration`,
    /// where the core's `poll_timeout` is an `Instant`.
    #[deprecated(
        since = "0.2.0",
        note = "renamed `poll_delay`: it is a Duration, not an Instant"
    )]
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.poll_delay()
    }

    /// Polls, and when there was nothing to do for a moment
    /// ([`SPIN_FOR`](crate::progress::SPIN_FOR), unless busy polling)
    /// sleeps on the transport until something arrives or a timer is due,
    /// at most `max`.
    ///
    /// # Errors
    ///
    /// [`Error::Wait`] if waiting on the transport failed.
    pub fn wait(&mut self, max: Duration) -> Result<(), Error> {
        self.step(max).map(drop)
    }

    /// The next thing the session told (connections, acks, restarts,
    /// losses), oldest first. Reading them is optional; what waits is
    /// bounded by folding, and no event that names sns is ever dropped:
    ///
    /// - `ServerRestarted` (its `unconfirmed` sns may arrive twice),
    ///   `NotReplayed`, `Failed`, `Closed` and every variant not listed
    ///   below wait until taken. An `Acked` folds into an `Acked` right
    ///   before it among these (the later `upto`, which covers both), and
    ///   a `NotReplayed` into a `NotReplayed` whose range it touches; the
    ///   folded event is told where the later one was.
    /// - Routine events — `Connecting`, `Established`, `Disconnected` —
    ///   say only how connections came and went: of those not taken, the
    ///   newest 1,024 wait, older ones are removed.
    ///
    /// [`events_folded`](Self::events_folded) counts what was folded or
    /// removed.
    pub fn next_event(&mut self) -> Option<ClientEvent> {
        self.seen.events.pop()
    }

    /// Events that [`next_event`](Self::next_event) does not return one by
    /// one: acks and give-ups folded into a later event, and routine
    /// events removed beyond the newest 1,024.
    #[must_use]
    pub fn events_folded(&self) -> u64 {
        self.seen.events.folded()
    }

    /// Every sn below this is acknowledged or given up.
    #[must_use]
    pub fn acked_below(&self) -> u64 {
        self.seen.acked
    }

    /// The sn the next message will get.
    #[must_use]
    pub fn next_sn(&self) -> u64 {
        self.driver.session().next_sn()
    }

    /// Messages sent and not yet acknowledged.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.driver.session().outstanding()
    }

    /// The session's id (random per client).
    #[must_use]
    pub fn session_id(&self) -> u64 {
        self.driver.session().config().session
    }

    /// The server's address.
    #[must_use]
    pub fn server_addr(&self) -> B::Addr {
        self.addr.clone()
    }

    /// Counters: submitted, sent, replayed, acknowledged, ...
    #[must_use]
    pub fn stats(&self) -> &ClientStats {
        self.driver.session().stats()
    }

    /// The sans-IO driver underneath, for what this type does not offer
    /// (reads, in-place submits, the session's state).
    pub fn driver_mut(&mut self) -> &mut ClientDriver<B> {
        &mut self.driver
    }

    /// The client has given up: the same error every later call returns.
    fn check(&self) -> Result<(), Error> {
        match self.seen.failed {
            Some(reason) => Err(Error::Failed(reason)),
            None => Ok(()),
        }
    }

    /// Polls; when idle for [`SPIN_FOR`](crate::progress::SPIN_FOR)
    /// (unless busy polling), sleeps once the transport armed, at most
    /// `max` and until the next timer. Returns whether the poll did
    /// anything.
    fn step(&mut self, max: Duration) -> Result<bool, Error> {
        if self.poll() {
            self.idle.busy();
            return Ok(true);
        }
        if self.idle.may_sleep(self.progress)
            && self.driver.arm(self.clock.now()) == Readiness::Armed
        {
            let wait = sooner(Some(max), self.poll_delay()).unwrap_or(max);
            self.driver
                .transport_mut()
                .sleep(wait)
                .map_err(wait_error::<B>)?;
        }
        Ok(false)
    }
}

/// [`Error::Wait`] on backend `B`.
pub(crate) fn wait_error<B: crate::Backend>(source: std::io::Error) -> Error {
    Error::Wait {
        backend: B::NAME,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replay off, 2,000 disconnects, each giving up the last 2 of 10
    /// sns: the first give-up is as lost as the last, every sn between
    /// them acknowledged, and every give-up told by its own event.
    #[test]
    fn a_give_up_thousands_of_give_ups_ago_is_still_lost() {
        let mut seen = Seen::default();
        for i in 0..2_000 {
            seen.event(ClientEvent::Acked { upto: 10 * i + 8 });
            seen.event(ClientEvent::NotReplayed {
                range: 10 * i + 8..10 * i + 10,
            });
        }
        seen.event(ClientEvent::Acked { upto: 20_010 });
        for sn in [8, 9, 10_008, 19_999] {
            let lost = seen.outcome(sn);
            let first = sn - sn % 10 + 8;
            assert!(
                matches!(&lost, Some(Err(Error::Lost { sn: s, range })) if *s == sn && *range == (first..first + 2)),
                "sn {sn}: {lost:?}"
            );
        }
        for sn in [0, 7, 10, 17, 19_997, 20_000, 20_009] {
            assert!(matches!(seen.outcome(sn), Some(Ok(()))), "sn {sn}");
        }
        assert!(seen.outcome(20_010).is_none());
        let told = std::iter::from_fn(|| seen.events.pop())
            .filter(|e| matches!(e, ClientEvent::NotReplayed { .. }))
            .count();
        assert_eq!(told, 2_000);
    }
}
