//! The async API, for tokio (feature `tokio`): a [`Client`] whose
//! [`send`](Client::send) resolves when the message is acknowledged (or
//! says why it never will be), and a [`Server`] that yields deliveries as
//! a stream.
//!
//! Each endpoint runs the blocking [`crate::Client`] / [`crate::Server`]
//! in a task of its own on the runtime, on any backend. The task sleeps
//! on the backend's ready fd (through [`AsyncFd`]: UCX's event fd, the
//! stream backend's socket poller) and on the endpoint's next timer, and
//! is woken by the handles when they queue work: an idle endpoint costs
//! no CPU. Create endpoints inside a runtime.
//! Handles are `Send + Sync`: a multi-threaded runtime may run them on
//! any of its threads, and a `Client` may be shared (`Arc`) by tasks that
//! send concurrently. Create them inside a runtime; drop them there too.
//! The blocking endpoints underneath report to [`crate::observe`]
//! (features `metrics`, `tracing`), so the async ones do too.
//!
//! ```no_run
//! # async fn demo<B, D>() -> Result<(), iomsg_endpoint::Error>
//! # where B: iomsg_endpoint::Accept, D: iomsg_endpoint::Dial<Addr = B::Addr, Config = B::Config> {
//! use iomsg_endpoint::tokio::{Client, Server};
//! let mut server = Server::<B>::bind("127.0.0.1:0", Default::default()).await?;
//! let client = Client::<D>::connect(server.local_addr(), Default::default()).await?;
//! let sn = client.send(b"hello").await?; // resolves once acknowledged
//! let delivered = server.next().await.expect("the server runs");
//! assert_eq!((delivered.sn, &delivered.data[..]), (sn, &b"hello"[..]));
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use ::tokio::sync::Notify;

use iomsg_core::session::{
    ClientEvent, Delivery, ReadRequest, ServerEvent, ServerHandler, ServerStats, Unkept,
};

mod keeper;

use crate::events::EventQueue;
use crate::{Accept, ClientOptions, Dial, Error, ServerOptions, ToAddr};
use keeper::Kept;
pub use keeper::{Batch, Keeper};

/// What the driving task asks of the endpoint it runs.
trait Endpoint: Send + 'static {
    /// Whether dropping the handle drops the endpoint at once.
    const DROPPED_WITH_HANDLE: bool;
    /// The backend's ready fd.
    fn ready_fd(&self) -> Result<BorrowedFd<'_>, Error>;
    /// Does all the work possible now; whether anything happened.
    fn poll(&mut self) -> bool;
    /// Arms the ready fd: whether the task may sleep on it.
    fn arm(&mut self) -> bool;
    /// When the endpoint must poll again at the latest.
    fn poll_timeout(&self) -> Option<Duration>;
    /// Whether the task should stop polling for now (the application is
    /// behind on deliveries), or for good.
    fn paused(&self) -> bool {
        false
    }
    fn finished(&self) -> bool;
    /// After a poll: wake the futures whose outcome it decided.
    fn wake(&mut self);
    /// The task ends: wake every future still waiting, to learn why.
    fn release(&mut self) {}
}

/// An endpoint (until its handle drops it) and the waker of its task.
struct Shared<E> {
    state: Mutex<State<E>>,
    wake_task: Notify,
}

struct State<E> {
    /// `None` once a handle that takes its endpoint along was dropped.
    endpoint: Option<E>,
    /// The handle was dropped: the task ends.
    dropped: bool,
}

impl<E> Shared<E> {
    fn lock(&self) -> MutexGuard<'_, State<E>> {
        // A panic while locked (in the application's own handler) leaves
        // the endpoint as it was between two calls: usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the endpoint's task: the handles queued work.
    fn wake(&self) {
        self.wake_task.notify_one();
    }
}

/// What the task owns: its own descriptor of the backend's ready fd
/// (a duplicate, open as long as the registration lives) and the
/// endpoint.
struct Task<E> {
    fd: Option<AsyncFd<OwnedFd>>,
    shared: Arc<Shared<E>>,
}

/// Registers the task's own duplicate of the backend's ready fd with
/// tokio's reactor; `None` (the task then naps a millisecond at a time)
/// if that fails.
fn register(fd: OwnedFd) -> Option<AsyncFd<OwnedFd>> {
    // `with_interest` is deprecated because an `AsRawFd` value may close
    // or swap its fd while registered; an `OwnedFd` cannot, and it lives
    // in the `AsyncFd` until the registration is dropped.
    #[allow(deprecated)]
    let registered = AsyncFd::with_interest(fd, Interest::READABLE);
    match registered {
        Ok(fd) => Some(fd),
        Err(e) => {
            eprintln!(
                "iomsg: cannot register the transport's ready fd with tokio ({e}); \
                 polling every millisecond"
            );
            None
        }
    }
}

/// Runs `shared`'s endpoint until its handle drops it or it finished.
async fn drive<E: Endpoint>(shared: Arc<Shared<E>>, fd: OwnedFd) {
    let task = Task {
        fd: register(fd),
        shared,
    };
    let (fd, shared) = (&task.fd, &task.shared);
    loop {
        let (busy, sleep) = {
            let mut st = shared.lock();
            let dropped = st.dropped;
            let Some(end) = st.endpoint.as_mut() else {
                return;
            };
            if dropped || end.finished() {
                end.release();
                return;
            }
            let busy = !end.paused() && end.poll();
            end.wake();
            let sleep = if busy || end.paused() || !end.arm() {
                None
            } else {
                Some(end.poll_timeout())
            };
            (busy, sleep)
        };
        let Some(timeout) = sleep else {
            if busy {
                ::tokio::task::yield_now().await;
            } else {
                // Paused, or work the transport cannot arm for: wait for
                // the handles, a little at most.
                let _ =
                    ::tokio::time::timeout(Duration::from_millis(1), shared.wake_task.notified())
                        .await;
            }
            continue;
        };
        let timeout = timeout.unwrap_or(Duration::from_secs(1));
        match fd {
            Some(fd) => {
                ::tokio::select! {
                    ready = fd.readable() => {
                        if let Ok(mut guard) = ready {
                            guard.clear_ready();
                        }
                    }
                    () = ::tokio::time::sleep(timeout) => {}
                    () = shared.wake_task.notified() => {}
                }
            }
            None => {
                let nap = timeout.min(Duration::from_millis(1));
                let _ = ::tokio::time::timeout(nap, shared.wake_task.notified()).await;
            }
        }
    }
}

/// Stops the task when the handle goes; a server's endpoint goes with it
/// (its address is free again at once), a client's stays while a
/// receipt holds it (the receipt resolves to its outcome, or to
/// [`Error::Dropped`] if it had none yet).
struct Handle<E: Endpoint> {
    shared: Arc<Shared<E>>,
}

impl<E: Endpoint> Handle<E> {
    /// `f` on the endpoint; `None` only once the handle is dropped, which
    /// cannot happen while `self` lives.
    fn with<R>(&self, f: impl FnOnce(&mut E) -> R) -> Option<R> {
        self.shared.lock().endpoint.as_mut().map(f)
    }
}

impl<E: Endpoint> Drop for Handle<E> {
    fn drop(&mut self) {
        let gone = {
            let mut st = self.shared.lock();
            st.dropped = true;
            if E::DROPPED_WITH_HANDLE {
                st.endpoint.take()
            } else {
                None
            }
        };
        if let Some(mut end) = gone {
            end.release();
            drop(end);
        }
        self.shared.wake();
    }
}

/// Starts the task for `endpoint`.
fn spawn<E: Endpoint>(endpoint: E) -> Result<Handle<E>, Error> {
    let fd = endpoint
        .ready_fd()?
        .try_clone_to_owned()
        .map_err(|e| Error::setup("the async driver", e))?;
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            endpoint: Some(endpoint),
            dropped: false,
        }),
        wake_task: Notify::new(),
    });
    drop(::tokio::spawn(drive(Arc::clone(&shared), fd)));
    Ok(Handle { shared })
}

/// The client's endpoint: the blocking client and the futures waiting on
/// it.
struct ClientEnd<B: Dial> {
    client: crate::Client<B>,
    /// Futures of unacknowledged messages, by sn.
    acks: BTreeMap<u64, Waker>,
    /// Senders waiting for room in the window.
    room: Vec<Waker>,
    /// `acked_below` at the last wake.
    woken_below: u64,
}

impl<B: Dial> Endpoint for ClientEnd<B> {
    const DROPPED_WITH_HANDLE: bool = false;
    fn ready_fd(&self) -> Result<BorrowedFd<'_>, Error> {
        self.client.ready_fd()
    }
    fn poll(&mut self) -> bool {
        self.client.poll()
    }
    fn arm(&mut self) -> bool {
        self.client.arm_for_edges()
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
pub struct Client<B: Dial> {
    handle: Handle<ClientEnd<B>>,
}

impl<B: Dial> Client<B> {
    /// Connects to the server at `addr` and waits for the handshake (see
    /// [`crate::Client::connect`]). The client always sleeps on the
    /// backend's ready fd: `busy_poll` in `options` is ignored.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::connect`].
    pub async fn connect(
        addr: impl ToAddr<B::Addr>,
        options: ClientOptions<B::Config>,
    ) -> Result<Client<B>, Error> {
        let addr = addr.to_addr()?;
        let options = options.busy_poll(false);
        let connecting =
            ::tokio::task::spawn_blocking(move || crate::Client::<B>::connect(addr, options));
        let client = match connecting.await {
            Ok(made) => made?,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => return Err(Error::Shutdown),
        };
        let end = ClientEnd {
            client,
            acks: BTreeMap::new(),
            room: Vec::new(),
            woken_below: 0,
        };
        Ok(Client {
            handle: spawn(end)?,
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
    pub async fn submit(&self, data: &[u8]) -> Result<Receipt<B>, Error> {
        let sn = std::future::poll_fn(|cx| {
            let mut st = self.handle.shared.lock();
            let Some(end) = st.endpoint.as_mut() else {
                return Poll::Ready(Err(Error::Dropped));
            };
            match end.client.try_send(data) {
                Ok(Some(sn)) => Poll::Ready(Ok(sn)),
                Ok(None) => {
                    end.room.push(cx.waker().clone());
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
        let next = self.handle.with(|e| e.client.next_sn()).unwrap_or(0);
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
        self.handle.with(|e| e.client.start_close());
        self.handle.shared.wake();
        let deadline = ::tokio::time::Instant::now() + Duration::from_secs(1);
        while !self.handle.with(|e| e.client.is_terminal()).unwrap_or(true)
            && ::tokio::time::Instant::now() < deadline
        {
            ::tokio::time::sleep(Duration::from_millis(1)).await;
        }
        flushed
    }

    /// Every sn below this is acknowledged or given up.
    #[must_use]
    pub fn acked_below(&self) -> u64 {
        self.handle.with(|e| e.client.acked_below()).unwrap_or(0)
    }

    /// The session's id.
    #[must_use]
    pub fn session_id(&self) -> u64 {
        self.handle.with(|e| e.client.session_id()).unwrap_or(0)
    }

    /// The next thing the session told (connections, acks, restarts,
    /// losses), oldest first: as [`crate::Client::next_event`], which
    /// says what waits and what is folded. A `ServerRestarted` names the
    /// sns that may arrive twice; nothing else tells it.
    pub fn next_event(&self) -> Option<ClientEvent> {
        self.handle.with(|e| e.client.next_event()).flatten()
    }

    /// As [`crate::Client::events_folded`].
    #[must_use]
    pub fn events_folded(&self) -> u64 {
        self.handle.with(|e| e.client.events_folded()).unwrap_or(0)
    }
}

/// A submitted message: resolves to its sn once acknowledged, or to why
/// it never will be.
#[must_use = "a receipt does nothing unless awaited"]
pub struct Receipt<B: Dial> {
    sn: u64,
    shared: Arc<Shared<ClientEnd<B>>>,
}

impl<B: Dial> Receipt<B> {
    /// The message's sn.
    #[must_use]
    pub fn sn(&self) -> u64 {
        self.sn
    }
}

impl<B: Dial> Future for Receipt<B> {
    type Output = Result<u64, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.shared.lock();
        let dropped = st.dropped;
        let Some(end) = st.endpoint.as_mut() else {
            return Poll::Ready(Err(Error::Dropped));
        };
        if let Some(outcome) = end.client.outcome(self.sn) {
            return Poll::Ready(outcome.map(|()| self.sn));
        }
        if dropped {
            return Poll::Ready(Err(Error::Dropped));
        }
        end.acks.insert(self.sn, cx.waker().clone());
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
