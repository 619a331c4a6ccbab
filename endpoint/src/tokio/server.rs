//! The async server: deliveries queued for a stream, with or without a
//! journal kept by a [`Keeper`].

use super::*;

/// A message the server's application took, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivered {
    /// The session that sent it.
    pub session: u64,
    /// Its sn in that session.
    pub sn: u64,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// A read answerer.
type Respond = Box<dyn FnMut(ReadRequest<'_>, &mut [u8]) + Send>;

/// The server's application inside its task: queues deliveries for the
/// stream.
struct Queue {
    items: VecDeque<Delivered>,
    bytes: usize,
    reader: Option<Waker>,
    respond: Option<Respond>,
    /// For `next_event`: folded, never dropped (see `next_event`).
    events: EventQueue<ServerEvent>,
    /// With a journal: where batches are kept, and what waits for the
    /// next commit.
    keeper: Option<Kept>,
}

/// Deliveries queued at most before the server stops taking more (the
/// transport then holds clients back): by count and by bytes.
const QUEUE_ITEMS: usize = 4096;
const QUEUE_BYTES: usize = 16 << 20;

impl ServerHandler for Queue {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.bytes += d.data.len();
        let d = Delivered {
            session: d.session,
            sn: d.sn,
            data: d.data.to_vec(),
        };
        match &mut self.keeper {
            Some(k) => k.take(d),
            None => self.items.push_back(d),
        }
    }
    fn journal(&mut self, record: &[u8]) {
        if let Some(k) = &mut self.keeper {
            k.journal(record);
        }
    }
    fn flush(&mut self) -> Result<(), Unkept> {
        match &mut self.keeper {
            Some(k) => k.commit(&mut self.items),
            None => Ok(()),
        }
    }
    fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        self.keeper.as_mut()?.recall(session, out)
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        match &mut self.respond {
            Some(respond) => respond(read, out),
            None => out.fill(0),
        }
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
}

impl<B: Accept> Endpoint for crate::Server<B, Queue> {
    const DROPPED_WITH_HANDLE: bool = true;
    fn ready_fd(&self) -> Result<BorrowedFd<'_>, Error> {
        crate::Server::ready_fd(self)
    }
    fn poll(&mut self) -> bool {
        crate::Server::poll(self)
    }
    fn arm(&mut self) -> bool {
        self.arm_for_edges()
    }
    fn poll_delay(&self) -> Option<Duration> {
        crate::Server::poll_delay(self)
    }
    fn paused(&self) -> bool {
        let q = self.handler();
        q.items.len() >= QUEUE_ITEMS || q.bytes >= QUEUE_BYTES
    }
    fn finished(&self) -> bool {
        false
    }
    fn wake(&mut self) {
        let halted = crate::Server::halted(self);
        let q = self.handler_mut();
        if !q.items.is_empty() || halted {
            if let Some(w) = q.reader.take() {
                w.wake();
            }
        }
    }
}

/// A server for tokio: [`crate::Server`] whose deliveries are a stream
/// ([`next`](Server::next), or `futures::Stream`).
///
/// A message counts as taken — and may be acknowledged — once it is in
/// the server's queue for the stream (at most 4096 messages or 16 MiB;
/// past that the server takes nothing more until the application catches
/// up). A process that dies loses what its queue held, as one that dies
/// inside a handler loses what the handler had not kept.
///
/// While the queue is full the server does no work at all: no frames,
/// no acknowledgements, no heartbeats. Its clients see a silent server
/// after their liveness timeout (3 s by default) and reconnect until the
/// application takes deliveries again, or fail once their `retry_for`
/// (30 s by default) has passed: take deliveries promptly, or move them
/// to storage of the application's own.
pub struct Server<B: Accept> {
    handle: Handle<crate::Server<B, Queue>>,
    addr: B::Addr,
}

impl<B: Accept> Server<B> {
    /// Listens on `addr` (see [`crate::Server::bind`]); reads are answered
    /// with zeros (see [`bind_answering`](Self::bind_answering)).
    ///
    /// # Errors
    ///
    /// As [`crate::Server::bind`]; [`Error::Unsupported`] with
    /// [`ServerOptions::journal`] on (a journal needs a [`Keeper`]: see
    /// [`bind_keeping`](Self::bind_keeping)).
    pub async fn bind(
        addr: impl ToAddr<B::Addr>,
        options: ServerOptions<B::Config>,
    ) -> Result<Server<B>, Error> {
        Self::start(addr.to_addr()?, options, None, None)
    }

    /// Listens on `addr`, answering reads with `respond` (called on the
    /// server's task: it must not block).
    ///
    /// # Errors
    ///
    /// As [`crate::Server::bind`].
    pub async fn bind_answering(
        addr: impl ToAddr<B::Addr>,
        options: ServerOptions<B::Config>,
        respond: impl FnMut(ReadRequest<'_>, &mut [u8]) + Send + 'static,
    ) -> Result<Server<B>, Error> {
        Self::start(addr.to_addr()?, options, Some(Box::new(respond)), None)
    }

    /// Listens on `addr` with a journal: each batch of messages taken is
    /// kept by `keeper` with the journal records of their sessions before
    /// any acknowledgement of it leaves, and only then reaches the
    /// stream; `restore` gives back the records an earlier instance's
    /// keeper kept (the latest of each session), so that this instance
    /// acknowledges, without handing them over again, the messages its
    /// predecessors took. With a client that resumes its session
    /// ([`Client::resume`](crate::Client::resume)), each message reaches a
    /// keeper's commit exactly once across crashes of either side. Reads
    /// are answered with zeros.
    ///
    /// # Errors
    ///
    /// As [`crate::Server::bind`]; [`Error::Journal`] for a record that
    /// does not restore (torn, changed, or no room: see
    /// [`crate::Server::restore`]).
    pub async fn bind_keeping<R: AsRef<[u8]>>(
        addr: impl ToAddr<B::Addr>,
        options: ServerOptions<B::Config>,
        keeper: impl Keeper,
        restore: impl IntoIterator<Item = R>,
    ) -> Result<Server<B>, Error> {
        let kept = Kept::new(Box::new(keeper));
        let records: Vec<R> = restore.into_iter().collect();
        let restore: Vec<&[u8]> = records.iter().map(AsRef::as_ref).collect();
        Self::start(
            addr.to_addr()?,
            options.journal(true),
            None,
            Some((kept, &restore)),
        )
    }

    fn start(
        addr: B::Addr,
        options: ServerOptions<B::Config>,
        respond: Option<Respond>,
        journal: Option<(Kept, &[&[u8]])>,
    ) -> Result<Server<B>, Error> {
        if options.journal && journal.is_none() {
            return Err(Error::Unsupported(
                "the async server keeps a journal only with a Keeper \
                 (ServerOptions::journal): use Server::bind_keeping",
            ));
        }
        let (keeper, restore) = match journal {
            Some((kept, records)) => (Some(kept), records),
            None => (None, &[][..]),
        };
        let queue = Queue {
            items: VecDeque::new(),
            bytes: 0,
            reader: None,
            respond,
            events: EventQueue::default(),
            keeper,
        };
        let mut server = crate::Server::<B, Queue>::bind(addr, options.busy_poll(false), queue)?;
        for record in restore {
            server.restore(record)?;
        }
        let addr = server.local_addr();
        Ok(Server {
            handle: spawn(server)?,
            addr,
        })
    }

    /// The address it listens on.
    #[must_use]
    pub fn local_addr(&self) -> B::Addr {
        self.addr.clone()
    }

    /// The next message any client sent; `None` only once the server
    /// halted ([`halted`](Self::halted)) and what it kept before is
    /// taken (otherwise it runs until dropped).
    pub async fn next(&mut self) -> Option<Delivered> {
        std::future::poll_fn(|cx| self.poll_next_delivery(cx)).await
    }

    fn poll_next_delivery(&self, cx: &mut Context<'_>) -> Poll<Option<Delivered>> {
        let mut st = self.handle.shared.lock();
        let Some(server) = st.endpoint.as_mut() else {
            return Poll::Ready(None);
        };
        let halted = server.halted();
        let q = server.handler_mut();
        match q.items.pop_front() {
            Some(d) => {
                let was_full = q.items.len() + 1 >= QUEUE_ITEMS || q.bytes >= QUEUE_BYTES;
                q.bytes -= d.data.len();
                drop(st);
                if was_full {
                    self.handle.shared.wake();
                }
                Poll::Ready(Some(d))
            }
            None if halted => Poll::Ready(None),
            None => {
                q.reader = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Why the server halted, once its [`Keeper`] failed to keep a batch:
    /// nothing of that batch was acknowledged or reached the stream, and
    /// every client is refused from then on. Stop it, and start another
    /// once the cause is fixed.
    #[must_use]
    pub fn halted(&self) -> Option<String> {
        self.handle
            .with(|server| {
                if !server.halted() {
                    return None;
                }
                let failed = (server.handler().keeper.as_ref())
                    .and_then(|k| k.failed.as_ref().map(ToString::to_string));
                Some(failed.unwrap_or_else(|| Error::Halted.to_string()))
            })
            .flatten()
    }

    /// The next thing the server reported (sessions, gaps, losses), if
    /// any, oldest first. Reading them is optional; what waits is bounded
    /// by folding, and no event that names a loss is ever dropped:
    ///
    /// - `LiveLoss`, `Recovered`, `LostLive`, `LostInFlight`, `StateLost`,
    ///   `Forgotten`, `RecallRefused` and every variant not listed below
    ///   wait until taken: their number grows with the losses the server
    ///   saw, so an application that may see many should take them. A
    ///   `LiveLoss`, `LostLive` or `LostInFlight` folds into one of its
    ///   kind and session right before it among these whose range it
    ///   touches.
    /// - Routine events — `SessionOpened`, `Stale` (its sn comes again in
    ///   the newer epoch), `Evicted` (its tombstone remembers the
    ///   session), `Closed`, `HandshakeTimeout`, `Disconnected`, and what
    ///   a peer can send at any rate: `Duplicate` (discarded, not
    ///   delivered), `Rejected` and `SlowConsumer` (the connection is
    ///   closed, its client sends again) — of those not taken, the newest
    ///   1,024 wait, older ones are removed; the stats count them all.
    ///
    /// [`events_folded`](Self::events_folded) counts what was folded or
    /// removed; [`stats`](Self::stats) counts duplicates, stale frames
    /// and losses whether or not their events are read.
    pub fn next_event(&self) -> Option<ServerEvent> {
        self.handle
            .with(|server| server.handler_mut().events.pop())
            .flatten()
    }

    /// Events that [`next_event`](Self::next_event) does not return one by
    /// one: ranges folded into a later event, and routine events removed
    /// beyond the newest 1,024.
    #[must_use]
    pub fn events_folded(&self) -> u64 {
        (self.handle)
            .with(|server| server.handler().events.folded())
            .unwrap_or(0)
    }

    /// Counters: delivered, duplicates, gaps, losses, ...
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        (self.handle)
            .with(|server| *server.stats())
            .unwrap_or_default()
    }
}

impl<B: Accept> futures_core::Stream for Server<B> {
    type Item = Delivered;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivered>> {
        self.poll_next_delivery(cx)
    }
}
