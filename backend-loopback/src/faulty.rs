//! Fault injection as a wrapper around any [`Transport`], in the manner of
//! smoltcp's `phy::FaultInjector`: [`Faulty`] sits between a driver and
//! its backend and, by rate or by schedule ([`FaultConfig`]), drops,
//! silently drops, duplicates, reorders, corrupts, delays and disconnects
//! the frames that side sends. It uses nothing but the trait, so the same
//! faults can be put in front of UCX as in front of the loopback network.
//!
//! Several wrappers share one [`Faults`] handle: one seeded decision
//! engine, one schedule and one set of counts for a whole run. A wrapper
//! knows which way its frames go (a client's towards servers, a server's
//! towards clients), which is what a schedule's [`Direction`] matches.
//!
//! What each fault does here:
//!
//! * `Drop`: the frame is not sent and the connection ends: the wrapper
//!   closes it underneath (the peer hears of it) and reports
//!   `Disconnected(PeerFailed)` to its own driver;
//! * `SilentDrop`: the frame is not sent, the connection stays up: the
//!   transport bug the protocol must find. The drop tap hears of it;
//! * `Duplicate`: sent twice;
//! * `Reorder`: held back until `reorder_depth` later frames of its
//!   connection went out (or the connection closes);
//! * `Corrupt`: one bit flipped;
//! * `Delay`: held for `delay`; later frames of its connection wait
//!   behind it, so the connection keeps its order;
//! * `Disconnect`: sent, then the connection ends as for `Drop`.
//!
//! The wrapper reports its backend's capabilities unchanged: its faults
//! break them on purpose.
//!
//! [`Direction`]: crate::Direction

use core::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use iomsg_core::transport::{
    Capabilities, ConnId, Connector, DisconnectReason, Event, Listener, Readiness, SendError,
    Transport, TxToken,
};
use iomsg_core::wire::Op;
use iomsg_core::Instant;

use crate::fault::{FaultConfig, FaultCounts, FaultInjector, FrameFault};

/// Hears of every frame a `SilentDrop` fault lost: its connection, and
/// the frame's bytes.
pub type DropTap = Box<dyn FnMut(ConnId, &[u8])>;

struct Shared {
    injector: FaultInjector,
    drop_tap: Option<DropTap>,
}

/// The decision engine, schedule and counts that [`Faulty`] wrappers
/// share. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Faults {
    shared: Rc<RefCell<Shared>>,
}

impl Faults {
    /// Faults by `config`, drawn from a generator seeded with `seed`.
    pub fn new(config: FaultConfig, seed: u64) -> Faults {
        Faults {
            shared: Rc::new(RefCell::new(Shared {
                injector: FaultInjector::new(config, seed),
                drop_tap: None,
            })),
        }
    }

    /// Replaces the configuration (counts and schedule positions carry
    /// on); `FaultConfig::default()` turns injection off.
    pub fn set_config(&self, config: FaultConfig) {
        self.shared.borrow_mut().injector.set_config(config);
    }

    /// What was injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.shared.borrow().injector.counts()
    }

    /// Installs (or removes) the tap that hears of silently dropped frames.
    /// It must not call back into the wrappers.
    pub fn set_drop_tap(&self, tap: Option<DropTap>) {
        self.shared.borrow_mut().drop_tap = tap;
    }

    /// The fault for the next frame, with a bit position for `Corrupt`.
    fn decide(&self, to_server: bool, frame: &[u8]) -> (Option<FrameFault>, u64) {
        let data = matches!(frame.get(5).copied(), Some(op) if op == Op::Write as u8 || op == Op::Read as u8);
        let mut s = self.shared.borrow_mut();
        let fault = s.injector.next(to_server, data);
        let bit = match fault {
            Some(FrameFault::Corrupt) => s.injector.below(frame.len() as u64 * 8),
            _ => 0,
        };
        (fault, bit)
    }

    fn held_lost(&self) {
        self.shared.borrow_mut().injector.count_held_lost();
    }

    fn silently_dropped(&self, conn: ConnId, frame: &[u8]) {
        let mut s = self.shared.borrow_mut();
        if let Some(tap) = s.drop_tap.as_mut() {
            tap(conn, frame);
        }
    }

    fn config(&self) -> (u8, core::time::Duration) {
        let s = self.shared.borrow();
        let c = s.injector.config();
        (c.reorder_depth.max(1), c.delay)
    }
}

/// Frames of one connection the wrapper holds back.
#[derive(Default)]
struct Held {
    /// Delayed frames and what queued behind them, in sending order, with
    /// the time each may go.
    queue: VecDeque<(Instant, Vec<u8>)>,
    /// A reordered frame and how many later frames it still waits for.
    reordered: Option<(Vec<u8>, u8)>,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.reordered.is_none()
    }
}

/// A transport with faults injected on its send path; see the module
/// documentation.
pub struct Faulty<T> {
    inner: T,
    faults: Faults,
    /// This side's frames go to servers (a client's wrapper).
    to_server: bool,
    held: HashMap<ConnId, Held>,
    /// Connections this wrapper ended, with the disconnect its driver has
    /// yet to hear of.
    ended: VecDeque<ConnId>,
    broken: HashSet<ConnId>,
    /// Connections the client driver closed while delayed frames of
    /// theirs were still held: those go at their time, then the close.
    closing: HashSet<ConnId>,
    spare: Vec<Vec<u8>>,
}

impl<T: Transport> Faulty<T> {
    /// Wraps `inner`, whose frames go towards servers when `to_server`.
    pub fn new(inner: T, faults: Faults, to_server: bool) -> Faulty<T> {
        Faulty {
            inner,
            faults,
            to_server,
            held: HashMap::new(),
            ended: VecDeque::new(),
            broken: HashSet::new(),
            closing: HashSet::new(),
            spare: Vec::new(),
        }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The wrapped transport, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Frames of `conn` held back (delayed or reordered): sent by the
    /// driver, not yet handed to the wrapped transport.
    pub fn held(&self, conn: ConnId) -> usize {
        self.held
            .get(&conn)
            .map_or(0, |h| h.queue.len() + usize::from(h.reordered.is_some()))
    }

    /// When the next delayed frame may go: poll by then.
    pub fn next_release(&self) -> Option<Instant> {
        self.held
            .values()
            .filter_map(|h| h.queue.front().map(|(at, _)| *at))
            .min()
    }

    /// What the driver wrote into a lent buffer: its fate.
    fn dispatch(&mut self, now: Instant, conn: ConnId, mut frame: Vec<u8>) {
        let (fault, bit) = self.faults.decide(self.to_server, &frame);
        match fault {
            None => self.send_in_order(now, conn, frame),
            Some(FrameFault::SilentDrop) => {
                self.faults.silently_dropped(conn, &frame);
                self.recycle(frame);
            }
            Some(FrameFault::Drop) => {
                self.recycle(frame);
                self.end(now, conn);
            }
            Some(FrameFault::Duplicate) => {
                let copy = self.copy(&frame);
                self.send_in_order(now, conn, frame);
                self.send_in_order(now, conn, copy);
            }
            Some(FrameFault::Reorder) => {
                let (depth, _) = self.faults.config();
                let held = self.held.entry(conn).or_default();
                if held.reordered.is_none() {
                    held.reordered = Some((frame, depth));
                } else {
                    self.send_in_order(now, conn, frame);
                }
            }
            Some(FrameFault::Corrupt) => {
                if let Some(byte) = frame.get_mut((bit / 8) as usize) {
                    *byte ^= 1 << (bit % 8);
                }
                self.send_in_order(now, conn, frame);
            }
            Some(FrameFault::Delay) => {
                let (_, delay) = self.faults.config();
                let at = self
                    .held
                    .get(&conn)
                    .and_then(|h| h.queue.back())
                    .map_or(now, |b| b.0);
                self.held
                    .entry(conn)
                    .or_default()
                    .queue
                    .push_back((at.max(now + delay), frame));
            }
            Some(FrameFault::Disconnect) => {
                self.send_in_order(now, conn, frame);
                self.flush(now, conn);
                self.end(now, conn);
            }
        }
    }

    /// Sends `frame` behind whatever of its connection is delayed; a
    /// reordered frame goes once enough later ones went.
    fn send_in_order(&mut self, now: Instant, conn: ConnId, frame: Vec<u8>) {
        let held = self.held.entry(conn).or_default();
        if let Some(&(at, _)) = held.queue.back() {
            held.queue.push_back((at, frame));
            return;
        }
        self.send_now(now, conn, frame);
        let released = match self.held.get_mut(&conn).and_then(|h| h.reordered.as_mut()) {
            Some((_, left)) if *left <= 1 => self
                .held
                .get_mut(&conn)
                .and_then(|h| h.reordered.take())
                .map(|(f, _)| f),
            Some((_, left)) => {
                *left -= 1;
                None
            }
            None => None,
        };
        if let Some(f) = released {
            self.send_now(now, conn, f);
        }
        if self.held.get(&conn).is_some_and(Held::is_empty) {
            self.held.remove(&conn);
        }
    }

    /// Hands a frame to the wrapped transport; one it has no room for now
    /// waits at the head of the connection's queue.
    fn send_now(&mut self, now: Instant, conn: ConnId, frame: Vec<u8>) {
        match pass(&mut self.inner, now, conn, &frame) {
            Ok(()) => self.recycle(frame),
            Err(SendError::WouldBlock) => {
                self.held
                    .entry(conn)
                    .or_default()
                    .queue
                    .push_front((now, frame));
            }
            // The connection is gone: so is the frame, as with any frame
            // a breaking connection carried.
            Err(_) => self.recycle(frame),
        }
    }

    /// Sends every held frame of `conn` that is due at `now`.
    fn release(&mut self, now: Instant, conn: ConnId) {
        loop {
            let due = self
                .held
                .get_mut(&conn)
                .filter(|h| h.queue.front().is_some_and(|(at, _)| *at <= now))
                .and_then(|h| h.queue.pop_front());
            let Some((_, frame)) = due else {
                break;
            };
            match pass(&mut self.inner, now, conn, &frame) {
                Ok(()) => self.recycle(frame),
                Err(SendError::WouldBlock) => {
                    if let Some(h) = self.held.get_mut(&conn) {
                        h.queue.push_front((now, frame));
                    }
                    break;
                }
                Err(_) => {
                    self.faults.held_lost();
                    self.recycle(frame);
                }
            }
        }
        if self.held.get(&conn).is_some_and(Held::is_empty) {
            self.held.remove(&conn);
        }
        if !self.held.contains_key(&conn) && self.closing.remove(&conn) {
            // The last delayed frame went: now the close the driver asked for.
            self.inner.close(now, conn);
        }
    }

    /// Sends everything held for `conn` now: it was sent before what
    /// follows (a close, a break).
    fn flush(&mut self, now: Instant, conn: ConnId) {
        let Some(mut held) = self.held.remove(&conn) else {
            return;
        };
        let reordered = held.reordered.take().map(|(f, _)| f);
        for (_, frame) in held.queue.drain(..).chain(reordered.map(|f| (now, f))) {
            if pass(&mut self.inner, now, conn, &frame).is_err() {
                self.faults.held_lost();
            }
            self.recycle(frame);
        }
    }

    /// Ends `conn`: closes it underneath and tells this side's driver.
    fn end(&mut self, now: Instant, conn: ConnId) {
        if let Some(held) = self.held.remove(&conn) {
            let reordered = held.reordered.map(|(f, _)| f);
            for f in held.queue.into_iter().map(|(_, f)| f).chain(reordered) {
                self.faults.held_lost();
                self.recycle(f);
            }
        }
        self.inner.close(now, conn);
        if self.broken.insert(conn) {
            self.ended.push_back(conn);
        }
    }

    fn copy(&mut self, frame: &[u8]) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        b
    }

    fn recycle(&mut self, frame: Vec<u8>) {
        if self.spare.len() < 64 {
            self.spare.push(frame);
        }
    }
}

/// Hands `frame` to `inner` (a copy into its lent buffer).
fn pass<T: Transport>(
    inner: &mut T,
    now: Instant,
    conn: ConnId,
    frame: &[u8],
) -> Result<(), SendError> {
    let token = inner.transmit(now, conn, frame.len())?;
    token.consume(|buf| buf.copy_from_slice(frame));
    Ok(())
}

/// A buffer the wrapper lends; the frame's fate is decided when the driver
/// has written it.
pub struct FaultyTx<'a, T: Transport> {
    wrapper: &'a mut Faulty<T>,
    now: Instant,
    conn: ConnId,
    buf: Vec<u8>,
}

impl<T: Transport> TxToken for FaultyTx<'_, T> {
    fn consume<R>(mut self, emit: impl FnOnce(&mut [u8]) -> R) -> R {
        let r = emit(&mut self.buf);
        let frame = core::mem::take(&mut self.buf);
        self.wrapper.dispatch(self.now, self.conn, frame);
        r
    }
}

impl<T: Transport> Transport for Faulty<T> {
    type TxToken<'a>
        = FaultyTx<'a, T>
    where
        Self: 'a;
    type RxToken<'a>
        = T::RxToken<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn transmit(
        &mut self,
        now: Instant,
        conn: ConnId,
        len: usize,
    ) -> Result<FaultyTx<'_, T>, SendError> {
        if self.broken.contains(&conn) {
            return Err(SendError::NotConnected);
        }
        let max = self.inner.capabilities().max_frame;
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.resize(len, 0);
        Ok(FaultyTx {
            wrapper: self,
            now,
            conn,
            buf,
        })
    }

    fn poll(&mut self, now: Instant) -> Option<Event<T::RxToken<'_>>> {
        let due: Vec<ConnId> = self
            .held
            .iter()
            .filter(|(_, h)| h.queue.front().is_some_and(|(at, _)| *at <= now))
            .map(|(&c, _)| c)
            .collect();
        for conn in due {
            self.release(now, conn);
        }
        if let Some(conn) = self.ended.pop_front() {
            return Some(Event::Disconnected {
                conn,
                reason: DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN),
            });
        }
        self.inner.poll(now)
    }

    fn close(&mut self, now: Instant, conn: ConnId) {
        self.broken.remove(&conn);
        // What is held was sent before the close: it arrives, late, first.
        let delayed = self.held.get(&conn).is_some_and(|h| !h.queue.is_empty());
        if self.to_server && delayed {
            // A client's delayed frames stay in flight after its close, as
            // on a real network: the close follows the last of them. (Its
            // driver ignores what the connection still brings.)
            if let Some(h) = self.held.get_mut(&conn) {
                if let Some((f, _)) = h.reordered.take() {
                    let at = h.queue.back().map_or(now, |b| b.0);
                    h.queue.push_back((at, f));
                }
            }
            self.closing.insert(conn);
            return;
        }
        self.flush(now, conn);
        self.inner.close(now, conn);
    }

    fn arm(&mut self) -> Readiness {
        if !self.ended.is_empty() || !self.held.is_empty() {
            return Readiness::Pending;
        }
        self.inner.arm()
    }
}

impl<T: Connector> Connector for Faulty<T> {
    fn connect(&mut self, now: Instant) -> Result<ConnId, DisconnectReason> {
        self.inner.connect(now)
    }
}

impl<T: Listener> Listener for Faulty<T> {}

impl FaultConfig {
    /// Whether any fault can happen (a rate or a schedule entry).
    pub fn is_active(&self) -> bool {
        self.rates().iter().any(|&r| r > 0) || !self.schedule.is_empty()
    }
}

#[cfg(test)]
mod tests;
