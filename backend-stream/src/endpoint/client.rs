//! [`Client`]: one session to one server over a TCP or Unix stream.

use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, ClientStats, DisconnectCause, FailReason, Message,
    SubmitError,
};
use iomsg_core::transport::{self, ClientHandler, Readiness};

use super::{random_u64, sooner, ClientOptions, Clock, Error};
use crate::{Addr, Dial, StreamTransport, ToAddr};
use iomsg_endpoint::events::{EventQueue, GivenUp};

/// The send window's capacity in messages (the most a client may have
/// unacknowledged).
pub(crate) const WINDOW: usize = 1024;

/// The sans-IO driver under a [`Client`].
pub type ClientDriver = transport::Client<StreamTransport<Dial>, WINDOW, Box<[u8]>>;

/// One session to one server over a stream: connects, sends, reconnects and
/// replays by itself, and tells when a message is acknowledged — the
/// server's application took it — or given up.
///
/// ```no_run
/// # fn main() -> Result<(), iomsg_stream::Error> {
/// use std::time::Duration;
/// let mut client = iomsg_stream::Client::connect("127.0.0.1:13337", Default::default())?;
/// let sn = client.send(b"hello")?;
/// client.wait_acked(sn, Duration::from_secs(5))?;
/// client.close(Duration::from_secs(5))?;
/// # Ok(()) }
/// ```
///
/// A client does work only inside its calls: `send`, the waits, `poll`.
/// One that has nothing to send calls [`wait`](Self::wait) (or `poll` in
/// its own loop, sleeping at most [`poll_timeout`](Self::poll_timeout))
/// so that acknowledgements arrive, probes go out and a lost server is
/// noticed.
pub struct Client {
    driver: ClientDriver,
    clock: Clock,
    seen: Seen,
    addr: Addr,
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
}

impl Seen {
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

impl Client {
    /// Connects to the server at `addr` (`"127.0.0.1:7000"`,
    /// `"unix:/run/app.sock"`, an [`Addr`]) and waits for the handshake
    /// (at most `options`' connect timeout). The session id and its token come
    /// from the operating system's randomness.
    ///
    /// # Errors
    ///
    /// [`Error::Address`] for an address that does not parse,
    /// [`Error::Poll`] if no poller can be made, [`Error::ConnectTimeout`]
    /// (with how the last attempt ended) if no handshake completed in
    /// time, [`Error::Failed`] at once if the server refused the client
    /// for good (its reason named: another client's session id, a full
    /// table the client was never let in to, another wire version).
    pub fn connect(addr: impl ToAddr, options: ClientOptions) -> Result<Client, Error> {
        let addr = addr.to_addr()?;
        let mut config = ClientConfig::new(
            random_u64().map_err(Error::Random)?,
            random_u64().map_err(Error::Random)?,
        );
        config.window = options.window;
        config.replay = options.replay;
        config.retry_for = options.retry_for;
        config.retry_full_table = options.retry_full_table;
        config.validate = options.validate;
        let transport =
            StreamTransport::client(addr.clone(), options.stream).map_err(Error::Poll)?;
        let clock = Clock::start();
        let storage = vec![0u8; options.window_bytes].into_boxed_slice();
        let session = ClientSession::new(config, clock.now(), storage);
        let mut driver = transport::Client::new(transport, session)?;
        driver.start(clock.now());
        let mut client = Client {
            driver,
            clock,
            seen: Seen::default(),
            addr: addr.clone(),
            flushed: 0,
        };
        let started = Wall::now();
        while !client.seen.established {
            client.check()?;
            let waited = started.elapsed();
            if waited >= options.connect_timeout {
                return Err(Error::ConnectTimeout {
                    addr: addr.clone(),
                    waited,
                    last: client.seen.last_cause,
                });
            }
            client.step(options.connect_timeout - waited)?;
        }
        Ok(client)
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
    /// queued: queue many, then poll, to send them in few writes.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub fn try_send(&mut self, data: &[u8]) -> Result<Option<u64>, Error> {
        self.check()?;
        match self.driver.submit(Message::Write(data)) {
            Ok(sn) => Ok(Some(sn)),
            Err(SubmitError::WindowFull { .. } | SubmitError::BufferFull(_)) => Ok(None),
            Err(e) => Err(Error::Rejected(e)),
        }
    }

    /// How message `sn` ended, if it has: acknowledged, given up, or the
    /// client failed.
    pub(crate) fn outcome(&self, sn: u64) -> Option<Result<(), Error>> {
        self.seen.outcome(sn)
    }

    /// Arms the transport: whether the application may sleep on the
    /// sockets now.
    #[cfg(feature = "tokio")]
    pub(crate) fn arm(&mut self) -> bool {
        self.driver.arm(self.clock.now()) == Readiness::Armed
    }

    /// A handle on the socket poller, readable when a socket has
    /// something.
    #[cfg(feature = "tokio")]
    pub(crate) fn registry(&self) -> Result<mio::Registry, Error> {
        self.driver.transport().registry().map_err(Error::Poll)
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
        self.driver.poll(self.clock.now(), &mut self.seen)
    }

    /// How long the client may sleep before it must [`poll`](Self::poll)
    /// again (its own timers); `None`: until something arrives.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.driver.poll_timeout().map(|t| self.clock.until(t))
    }

    /// Polls, and when there was nothing to do sleeps on the socket until
    /// something arrives or a timer is due, at most `max`.
    ///
    /// # Errors
    ///
    /// [`Error::Poll`] if waiting on the socket failed.
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
    pub fn server_addr(&self) -> &Addr {
        &self.addr
    }

    /// Counters: submitted, sent, replayed, acknowledged, ...
    #[must_use]
    pub fn stats(&self) -> &ClientStats {
        self.driver.session().stats()
    }

    /// The sans-IO driver underneath, for what this type does not offer
    /// (reads, in-place submits, the session's state).
    pub fn driver_mut(&mut self) -> &mut ClientDriver {
        &mut self.driver
    }

    /// The client has given up: the same error every later call returns.
    fn check(&self) -> Result<(), Error> {
        match self.seen.failed {
            Some(reason) => Err(Error::Failed(reason)),
            None => Ok(()),
        }
    }

    /// Polls; when idle, sleeps (once the transport armed) at most `max`
    /// and until the next timer. Returns whether the poll did anything.
    fn step(&mut self, max: Duration) -> Result<bool, Error> {
        if self.poll() {
            return Ok(true);
        }
        if self.driver.arm(self.clock.now()) == Readiness::Armed {
            let wait = sooner(Some(max), self.poll_timeout()).unwrap_or(max);
            self.driver
                .transport_mut()
                .sleep(wait)
                .map_err(Error::Poll)?;
        }
        Ok(false)
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
