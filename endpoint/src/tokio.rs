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
mod server;

use crate::events::EventQueue;
use crate::{Accept, ClientOptions, Dial, Error, ServerOptions, ToAddr};
use keeper::Kept;
pub use keeper::{Batch, Keeper};
pub use server::{Delivered, Server};

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
    fn poll_delay(&self) -> Option<Duration>;
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
                Some(end.poll_delay())
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
    fn poll_delay(&self) -> Option<Duration> {
        self.client.poll_delay()
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
