//! The async API, for tokio (feature `tokio`): a [`Client`] whose
//! [`send`](Client::send) resolves when the message is acknowledged (or
//! says why it never will be), and a [`Server`] that yields deliveries as
//! a stream.
//!
//! Each endpoint runs the blocking [`crate::Client`] / [`crate::Server`]
//! on a thread of its own, which sleeps on the endpoint's sockets (their
//! poller's fd) and on its next timer, and is woken by the handles when
//! they queue work: an idle endpoint costs no CPU, and the runtime's
//! threads never block on it. Futures are woken from that thread.
//! Handles are `Send + Sync`: a multi-threaded runtime may run them on
//! any of its threads, and a `Client` may be shared (`Arc`) by tasks that
//! send concurrently. [`Client::connect`] needs a runtime (it connects on
//! tokio's blocking pool).
//!
//! ```no_run
//! # async fn demo() -> Result<(), iomsg_stream::Error> {
//! use iomsg_stream::tokio::{Client, Server};
//! let mut server = Server::bind("127.0.0.1:0", Default::default()).await?;
//! let client = Client::connect(server.local_addr(), Default::default()).await?;
//! let sn = client.send(b"hello").await?; // resolves once acknowledged
//! let delivered = server.next().await.expect("the server runs");
//! assert_eq!((delivered.sn, &delivered.data[..]), (sn, &b"hello"[..]));
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use std::os::fd::AsRawFd;

use mio::unix::SourceFd;
use mio::{Events, Interest, Token};

use iomsg_core::session::{
    ClientEvent, Delivery, ReadRequest, ServerEvent, ServerHandler, ServerStats,
};

use mio::Registry;

use crate::{Addr, ClientOptions, Error, ServerOptions, ToAddr};
use iomsg_endpoint::events::EventQueue;

/// What the driving thread asks of the endpoint it runs.
trait Endpoint: Send + 'static {
    /// Does all the work possible now; whether anything happened.
    fn poll(&mut self) -> bool;
    /// Arms the sockets: whether the thread may sleep on them.
    fn arm(&mut self) -> bool;
    /// When the endpoint must poll again at the latest.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Whether the thread should stop polling for now (the application is
    /// behind on deliveries), or for good.
    fn paused(&self) -> bool {
        false
    }
    /// The endpoint is done for good (closed or failed): the thread ends.
    fn finished(&self) -> bool;
    /// After a poll: wake the futures whose outcome it decided.
    fn wake(&mut self);
    /// The thread ends: wake every future still waiting, to learn why.
    fn release(&mut self) {}
}

/// An endpoint, the waker of its thread, and whether its handles are gone.
struct Shared<E> {
    state: Mutex<State<E>>,
    /// Wakes the endpoint's thread out of its sleep.
    waker: mio::Waker,
}

struct State<E> {
    endpoint: E,
    /// The handles were dropped: the thread ends.
    dropped: bool,
}

impl<E> Shared<E> {
    fn lock(&self) -> MutexGuard<'_, State<E>> {
        // A panic while locked (in the application's own handler) leaves
        // the endpoint as it was between two calls: usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the endpoint's thread: the handles queued work.
    fn wake(&self) {
        if let Err(e) = self.waker.wake() {
            crate::transport::log(&format!("cannot wake the endpoint's thread: {e}"));
        }
    }
}

/// The thread's poller tokens: the endpoint's own poller, the handles.
const SOCKETS: Token = Token(0);
const HANDLES: Token = Token(1);

/// What the endpoint's thread sleeps on: the endpoint's socket poller
/// (its fd is readable when a socket has something) and the handles'
/// waker. `poller` is kept open for as long as it is registered.
struct Sleeper {
    poll: mio::Poll,
    events: Events,
    poller: Registry,
}

impl Sleeper {
    /// A sleeper on `poller`, and the waker of it for the handles.
    fn new(poller: Registry) -> Result<(Sleeper, mio::Waker), Error> {
        let poll = mio::Poll::new().map_err(Error::Poll)?;
        let fd = poller.as_raw_fd();
        poll.registry()
            .register(&mut SourceFd(&fd), SOCKETS, Interest::READABLE)
            .map_err(Error::Poll)?;
        let waker = mio::Waker::new(poll.registry(), HANDLES).map_err(Error::Poll)?;
        let sleeper = Sleeper {
            poll,
            events: Events::with_capacity(4),
            poller,
        };
        Ok((sleeper, waker))
    }

    /// Sleeps until a socket or a handle wakes it, `timeout` at most.
    fn sleep(&mut self, timeout: Duration) {
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                crate::transport::log(&format!("cannot sleep on the sockets ({e}); napping"));
                std::thread::sleep(timeout.min(Duration::from_millis(1)));
            }
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let fd = self.poller.as_raw_fd();
        let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
    }
}

/// Runs `shared`'s endpoint until its handles are dropped or it finished.
fn drive<E: Endpoint>(shared: &Shared<E>, sleeper: &mut Sleeper) {
    loop {
        let sleep = {
            let mut st = shared.lock();
            if st.dropped || st.endpoint.finished() {
                st.endpoint.release();
                return;
            }
            let busy = !st.endpoint.paused() && st.endpoint.poll();
            st.endpoint.wake();
            if busy {
                None
            } else if st.endpoint.paused() {
                // Until the application takes deliveries (it wakes us).
                Some(Duration::from_millis(100))
            } else if st.endpoint.arm() {
                Some(st.endpoint.poll_timeout().unwrap_or(Duration::from_secs(1)))
            } else {
                None
            }
        };
        match sleep {
            Some(timeout) => sleeper.sleep(timeout),
            None => std::thread::yield_now(),
        }
    }
}

/// Stops the thread when the last handle goes.
struct Handle<E> {
    shared: Arc<Shared<E>>,
}

impl<E> Drop for Handle<E> {
    fn drop(&mut self) {
        self.shared.lock().dropped = true;
        self.shared.wake();
    }
}

/// Starts the thread for `endpoint`, whose socket poller is `poller`.
fn spawn<E: Endpoint>(endpoint: E, poller: Registry) -> Result<Handle<E>, Error> {
    let (mut sleeper, waker) = Sleeper::new(poller)?;
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            endpoint,
            dropped: false,
        }),
        waker,
    });
    let driven = Arc::clone(&shared);
    std::thread::Builder::new()
        .name("iomsg-stream".into())
        .spawn(move || drive(&driven, &mut sleeper))
        .map_err(Error::Thread)?;
    Ok(Handle { shared })
}

/// The client's endpoint: the blocking client and the futures waiting on
/// it.
struct ClientEnd {
    client: crate::Client,
    /// Futures of unacknowledged messages, by sn.
    acks: BTreeMap<u64, Waker>,
    /// Senders waiting for room in the window.
    room: Vec<Waker>,
    /// `acked_below` at the last wake.
    woken_below: u64,
}

impl Endpoint for ClientEnd {
    fn poll(&mut self) -> bool {
        self.client.poll()
    }
    fn arm(&mut self) -> bool {
        self.client.arm()
    }
    fn poll_timeout(&self) -> Option<Duration> {
        self.client.poll_timeout()
    }
    fn finished(&self) -> bool {
        self.client.is_terminal() && self.acks.is_empty() && self.room.is_empty()
    }
    fn wake(&mut self) {
        let below = self.client.acked_below();
        let ended = self.client.is_terminal();
        if below == self.woken_below && !ended {
            return;
        }
        self.woken_below = below;
        if ended {
            self.acks.values().for_each(Waker::wake_by_ref);
            self.acks.clear();
        } else {
            let later = self.acks.split_off(&below);
            std::mem::replace(&mut self.acks, later)
                .into_values()
                .for_each(Waker::wake);
        }
        self.room.drain(..).for_each(Waker::wake);
    }
    fn release(&mut self) {
        std::mem::take(&mut self.acks)
            .into_values()
            .for_each(Waker::wake);
        self.room.drain(..).for_each(Waker::wake);
    }
}

/// One session to one server, for tokio: [`crate::Client`] with futures.
/// `Send + Sync`; share it with an `Arc` to send from several tasks.
pub struct Client {
    handle: Handle<ClientEnd>,
}

impl Client {
    /// Connects to the server at `addr` and waits for the handshake (see
    /// [`crate::Client::connect`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::connect`].
    pub async fn connect(addr: impl ToAddr, options: ClientOptions) -> Result<Client, Error> {
        let addr = addr.to_addr()?;
        let connecting =
            ::tokio::task::spawn_blocking(move || crate::Client::connect(addr, options));
        let client = match connecting.await {
            Ok(made) => made?,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => return Err(Error::Shutdown),
        };
        let poller = client.registry()?;
        let end = ClientEnd {
            client,
            acks: BTreeMap::new(),
            room: Vec::new(),
            woken_below: 0,
        };
        Ok(Client {
            handle: spawn(end, poller)?,
        })
    }

    /// Sends `data` and resolves once the server acknowledged it, with its
    /// sn: [`submit`](Self::submit) and then its [`Receipt`].
    ///
    /// # Errors
    ///
    /// [`Error::Lost`] if it was given up (replay off), [`Error::Failed`]
    /// if the client gave up, [`Error::Rejected`] for a message that can
    /// never be sent.
    pub async fn send(&self, data: &[u8]) -> Result<u64, Error> {
        self.submit(data).await?.await
    }

    /// Queues `data` as the next message, waiting only for room in the
    /// window; the returned [`Receipt`] resolves when it is acknowledged.
    /// Submitting many and awaiting their receipts later keeps the window
    /// full.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), for what is known before it is sent.
    pub async fn submit(&self, data: &[u8]) -> Result<Receipt, Error> {
        let sn = std::future::poll_fn(|cx| {
            let mut st = self.handle.shared.lock();
            match st.endpoint.client.try_send(data) {
                Ok(Some(sn)) => Poll::Ready(Ok(sn)),
                Ok(None) => {
                    st.endpoint.room.push(cx.waker().clone());
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(e)),
            }
        })
        .await?;
        self.handle.shared.wake();
        Ok(Receipt {
            sn,
            shared: Arc::clone(&self.handle.shared),
        })
    }

    /// Resolves once every message submitted so far is acknowledged.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), for the last message.
    pub async fn flush(&self) -> Result<(), Error> {
        let next = self.handle.shared.lock().endpoint.client.next_sn();
        match next.checked_sub(1) {
            Some(last) => Receipt {
                sn: last,
                shared: Arc::clone(&self.handle.shared),
            }
            .await
            .map(drop),
            None => Ok(()),
        }
    }

    /// Flushes, then ends the session with a goodbye.
    ///
    /// # Errors
    ///
    /// As [`flush`](Self::flush).
    pub async fn close(self) -> Result<(), Error> {
        let flushed = self.flush().await;
        self.handle.shared.lock().endpoint.client.start_close();
        self.handle.shared.wake();
        let deadline = ::tokio::time::Instant::now() + Duration::from_secs(1);
        while !self.handle.shared.lock().endpoint.client.is_terminal()
            && ::tokio::time::Instant::now() < deadline
        {
            ::tokio::time::sleep(Duration::from_millis(1)).await;
        }
        flushed
    }

    /// Every sn below this is acknowledged or given up.
    #[must_use]
    pub fn acked_below(&self) -> u64 {
        self.handle.shared.lock().endpoint.client.acked_below()
    }

    /// The session's id.
    #[must_use]
    pub fn session_id(&self) -> u64 {
        self.handle.shared.lock().endpoint.client.session_id()
    }

    /// The next thing the session told (connections, acks, restarts,
    /// losses), oldest first: as [`crate::Client::next_event`], which
    /// says what waits and what is folded. A `ServerRestarted` names the
    /// sns that may arrive twice; nothing else tells it.
    pub fn next_event(&self) -> Option<ClientEvent> {
        self.handle.shared.lock().endpoint.client.next_event()
    }

    /// As [`crate::Client::events_folded`].
    #[must_use]
    pub fn events_folded(&self) -> u64 {
        self.handle.shared.lock().endpoint.client.events_folded()
    }
}

/// A submitted message: resolves to its sn once acknowledged, or to why
/// it never will be.
#[must_use = "a receipt does nothing unless awaited"]
pub struct Receipt {
    sn: u64,
    shared: Arc<Shared<ClientEnd>>,
}

impl Receipt {
    /// The message's sn.
    #[must_use]
    pub fn sn(&self) -> u64 {
        self.sn
    }
}

impl Future for Receipt {
    type Output = Result<u64, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.shared.lock();
        if let Some(outcome) = st.endpoint.client.outcome(self.sn) {
            return Poll::Ready(outcome.map(|()| self.sn));
        }
        if st.dropped {
            return Poll::Ready(Err(Error::Dropped));
        }
        st.endpoint.acks.insert(self.sn, cx.waker().clone());
        Poll::Pending
    }
}

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

/// The server's application inside its thread: queues deliveries for the
/// stream.
struct Queue {
    items: VecDeque<Delivered>,
    bytes: usize,
    reader: Option<Waker>,
    respond: Option<Respond>,
    /// For `next_event`: folded, never dropped (see `next_event`).
    events: EventQueue<ServerEvent>,
}

/// Deliveries queued at most before the server stops taking more (the
/// transport then holds clients back): by count and by bytes.
const QUEUE_ITEMS: usize = 4096;
const QUEUE_BYTES: usize = 16 << 20;

impl ServerHandler for Queue {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.bytes += d.data.len();
        self.items.push_back(Delivered {
            session: d.session,
            sn: d.sn,
            data: d.data.to_vec(),
        });
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

impl Endpoint for crate::Server<Queue> {
    fn poll(&mut self) -> bool {
        crate::Server::poll(self)
    }
    fn arm(&mut self) -> bool {
        crate::Server::arm(self)
    }
    fn poll_timeout(&self) -> Option<Duration> {
        crate::Server::poll_timeout(self)
    }
    fn paused(&self) -> bool {
        let q = self.handler();
        q.items.len() >= QUEUE_ITEMS || q.bytes >= QUEUE_BYTES
    }
    fn finished(&self) -> bool {
        false
    }
    fn wake(&mut self) {
        let q = self.handler_mut();
        if !q.items.is_empty() {
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
pub struct Server {
    handle: Handle<crate::Server<Queue>>,
    addr: Addr,
}

impl Server {
    /// Listens on `addr` (see [`crate::Server::bind`]); reads are answered
    /// with zeros (see [`bind_answering`](Self::bind_answering)).
    ///
    /// # Errors
    ///
    /// As [`crate::Server::bind`].
    pub async fn bind(addr: impl ToAddr, options: ServerOptions) -> Result<Server, Error> {
        Self::start(addr.to_addr()?, options, None)
    }

    /// Listens on `addr`, answering reads with `respond` (called on the
    /// server's thread: it must not block).
    ///
    /// # Errors
    ///
    /// As [`crate::Server::bind`].
    pub async fn bind_answering(
        addr: impl ToAddr,
        options: ServerOptions,
        respond: impl FnMut(ReadRequest<'_>, &mut [u8]) + Send + 'static,
    ) -> Result<Server, Error> {
        Self::start(addr.to_addr()?, options, Some(Box::new(respond)))
    }

    fn start(
        addr: Addr,
        options: ServerOptions,
        respond: Option<Respond>,
    ) -> Result<Server, Error> {
        let queue = Queue {
            items: VecDeque::new(),
            bytes: 0,
            reader: None,
            respond,
            events: EventQueue::default(),
        };
        let server = crate::Server::bind(addr, options, queue)?;
        let poller = server.registry()?;
        let addr = server.local_addr().clone();
        Ok(Server {
            handle: spawn(server, poller)?,
            addr,
        })
    }

    /// The address it listens on.
    #[must_use]
    pub fn local_addr(&self) -> &Addr {
        &self.addr
    }

    /// The next message any client sent; `None` never (the server runs
    /// until dropped).
    pub async fn next(&mut self) -> Option<Delivered> {
        std::future::poll_fn(|cx| self.poll_next_delivery(cx)).await
    }

    fn poll_next_delivery(&self, cx: &mut Context<'_>) -> Poll<Option<Delivered>> {
        let mut st = self.handle.shared.lock();
        let q = st.endpoint.handler_mut();
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
            None => {
                q.reader = Some(cx.waker().clone());
                Poll::Pending
            }
        }
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
            .shared
            .lock()
            .endpoint
            .handler_mut()
            .events
            .pop()
    }

    /// Events that [`next_event`](Self::next_event) does not return one by
    /// one: ranges folded into a later event, and routine events removed
    /// beyond the newest 1,024.
    #[must_use]
    pub fn events_folded(&self) -> u64 {
        self.handle.shared.lock().endpoint.handler().events.folded()
    }

    /// Counters: delivered, duplicates, gaps, losses, ...
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        *self.handle.shared.lock().endpoint.stats()
    }
}

impl futures_core::Stream for Server {
    type Item = Delivered;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivered>> {
        self.poll_next_delivery(cx)
    }
}
