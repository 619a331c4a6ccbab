//! The drivers allocate nothing per message and copy a payload at most
//! once on each side: a counting global allocator watches a steady stream
//! of writes, reads and streamed writes with the application's own bytes
//! between a `Client` and a `Server` over a transport of fixed rings that
//! lends its slots, and pointer provenance shows where each payload lies.

use std::alloc::System;
use std::cell::{Cell, RefCell, RefMut};
use std::ops::Range;
use std::rc::Rc;
use std::sync::Mutex;

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, ReadData, ReadRequest, RequestOp,
    ServerConfig, ServerCore, ServerHandler,
};
use iomsg_core::transport::{
    Capabilities, Client, ClientHandler, ConnId, Connector, DisconnectReason, Event, Listener,
    RxToken, SendError, Server, Transport, TxToken,
};
use iomsg_core::{workload, Instant};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The allocator counts every thread: one test at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const SLOTS: usize = 256;
const SLOT: usize = 512;
const SESSION: u64 = 0xA110C;
/// Salts the pattern of read answers, so that they differ from requests.
const ANSWER: u64 = 0xA5;
const PAYLOAD: usize = 64;
const REQUEST: usize = 8;

/// What a ring slot holds.
#[derive(Clone, Copy)]
enum Ev {
    Connected(ConnId),
    Accepted(ConnId),
    Received(ConnId, usize),
}

/// A fixed ring of events, each with a slot for its frame: nothing is
/// allocated after creation, and a frame is written and read in its slot.
struct Ring {
    events: Vec<Ev>,
    bytes: Vec<[u8; SLOT]>,
    head: usize,
    len: usize,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            events: vec![Ev::Connected(ConnId::new(0, 0)); SLOTS],
            bytes: vec![[0; SLOT]; SLOTS],
            head: 0,
            len: 0,
        }
    }
    fn next(&self) -> usize {
        (self.head + self.len) % SLOTS
    }
    fn push(&mut self, e: Ev) {
        assert!(self.len < SLOTS, "ring full");
        let i = self.next();
        self.events[i] = e;
        self.len += 1;
    }
    fn pop(&mut self) -> Option<(Ev, usize)> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        self.head = (self.head + 1) % SLOTS;
        self.len -= 1;
        Some((self.events[i], i))
    }
}

struct Wire {
    to_server: Ring,
    to_client: Ring,
}

impl Wire {
    fn ring(&mut self, to_server: bool) -> &mut Ring {
        if to_server {
            &mut self.to_server
        } else {
            &mut self.to_client
        }
    }
}

/// The addresses of the buffers an end lent last: for transmit, and for
/// a received frame.
#[derive(Default)]
struct Lent {
    tx: Cell<(usize, usize)>,
    rx: Cell<(usize, usize)>,
}

fn span(bytes: &[u8]) -> (usize, usize) {
    let start = bytes.as_ptr() as usize;
    (start, start + bytes.len())
}

/// Whether the non-empty `bytes` lie inside `within`.
fn inside(bytes: &[u8], within: (usize, usize)) -> bool {
    let (start, end) = span(bytes);
    !bytes.is_empty() && within.0 <= start && end <= within.1
}

struct End {
    wire: Rc<RefCell<Wire>>,
    client: bool,
    lent: Rc<Lent>,
}

/// A lent slot of the peer's ring.
struct Tx<'a> {
    wire: RefMut<'a, Wire>,
    to_server: bool,
    conn: ConnId,
    len: usize,
    lent: &'a Lent,
}

impl TxToken for Tx<'_> {
    fn consume<R>(mut self, emit: impl FnOnce(&mut [u8]) -> R) -> R {
        let ring = self.wire.ring(self.to_server);
        let i = ring.next();
        let buf = &mut ring.bytes[i][..self.len];
        self.lent.tx.set(span(buf));
        let r = emit(buf);
        ring.push(Ev::Received(self.conn, self.len));
        r
    }
}

/// A received frame, lent where it lies in its ring slot.
struct Rx<'a> {
    bytes: RefMut<'a, [u8]>,
    lent: &'a Lent,
}

impl RxToken for Rx<'_> {
    fn consume<R>(self, read: impl FnOnce(&[u8]) -> R) -> R {
        self.lent.rx.set(span(&self.bytes));
        read(&self.bytes)
    }
}

impl Transport for End {
    type TxToken<'a> = Tx<'a>;
    type RxToken<'a> = Rx<'a>;

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_frame: SLOT,
            in_order: true,
        }
    }
    fn transmit(&mut self, _now: Instant, conn: ConnId, len: usize) -> Result<Tx<'_>, SendError> {
        let mut wire = self.wire.borrow_mut();
        if len > SLOT {
            return Err(SendError::TooLarge { len, max: SLOT });
        }
        if wire.ring(self.client).len == SLOTS {
            return Err(SendError::WouldBlock);
        }
        Ok(Tx {
            wire,
            to_server: self.client,
            conn,
            len,
            lent: &self.lent,
        })
    }
    fn poll(&mut self, _now: Instant) -> Option<Event<Rx<'_>>> {
        let mut wire = self.wire.borrow_mut();
        let mine = !self.client;
        let (ev, i) = wire.ring(mine).pop()?;
        Some(match ev {
            Ev::Connected(conn) => Event::Connected { conn },
            Ev::Accepted(conn) => Event::Accepted { conn },
            Ev::Received(conn, n) => {
                let bytes = RefMut::map(wire, |w| &mut w.ring(mine).bytes[i][..n]);
                let lent = &self.lent;
                Event::Received {
                    conn,
                    frame: Rx { bytes, lent },
                }
            }
        })
    }
    fn close(&mut self, _now: Instant, _conn: ConnId) {}
}

impl Connector for End {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let conn = ConnId::new(1, 0);
        let mut w = self.wire.borrow_mut();
        w.to_server.push(Ev::Accepted(conn));
        w.to_client.push(Ev::Connected(conn));
        Ok(conn)
    }
}

impl Listener for End {}

/// The server's application: checks every payload against the workload
/// pattern, answers reads with a pattern of its own, and counts the
/// payloads that lie in the transport's lent buffers.
struct App {
    lent: Rc<Lent>,
    delivered: u64,
    corrupt: u64,
    answered: u64,
    /// Deliveries whose bytes lie in the frame its transport lent.
    data_in_rx: u64,
    /// Answers written into the buffer its transport lent.
    answer_in_tx: u64,
}

impl ServerHandler for App {
    fn deliver(&mut self, msg: Delivery<'_>) {
        self.delivered += 1;
        if !workload::matches(msg.session, msg.sn, msg.data) {
            self.corrupt += 1;
        }
        if inside(msg.data, self.lent.rx.get()) {
            self.data_in_rx += 1;
        }
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        self.answered += 1;
        workload::fill(read.session ^ ANSWER, read.sn, out);
        if inside(out, self.lent.tx.get()) {
            self.answer_in_tx += 1;
        }
    }
}

/// The client's application: checks every read's data and counts those
/// that lie in the frame its transport lent.
struct Seen {
    lent: Rc<Lent>,
    reads: u64,
    corrupt: u64,
    data_in_rx: u64,
}

impl ClientHandler for Seen {
    fn event(&mut self, _event: ClientEvent) {}
    fn read_data(&mut self, data: ReadData<'_>) {
        self.reads += 1;
        if !workload::matches(SESSION ^ ANSWER, data.sn, data.data) {
            self.corrupt += 1;
        }
        if inside(data.data, self.lent.rx.get()) {
            self.data_in_rx += 1;
        }
    }
}

type TestClient = Client<End, 64, Box<[u8]>>;
type TestServer = Server<End, 4, 4, 4>;

struct Run {
    client: Box<TestClient>,
    server: Box<TestServer>,
    seen: Seen,
    app: App,
    /// Where the client keeps its messages' bytes.
    storage: Range<usize>,
    step: u64,
    submitted: u64,
    /// `submit_with` fills that wrote into the client's storage.
    filled_in_storage: u64,
}

impl Run {
    fn new() -> Run {
        let wire = Rc::new(RefCell::new(Wire {
            to_server: Ring::new(),
            to_client: Ring::new(),
        }));
        let (client_lent, server_lent) = (Rc::new(Lent::default()), Rc::new(Lent::default()));
        let storage = vec![0u8; 64 * 2 * PAYLOAD].into_boxed_slice();
        let (start, end) = span(&storage);
        let session =
            ClientSession::new(ClientConfig::new(SESSION, 0x70CE), Instant::ZERO, storage);
        let end_c = End {
            wire: wire.clone(),
            client: true,
            lent: client_lent.clone(),
        };
        let mut client =
            Box::new(Client::new(end_c, session).expect("a ring carries the protocol"));
        let end_s = End {
            wire,
            client: false,
            lent: server_lent.clone(),
        };
        let server = Box::new(
            TestServer::with_core(end_s, ServerCore::new(ServerConfig::new(7)))
                .expect("a ring carries the protocol"),
        );
        client.start(Instant::ZERO);
        Run {
            client,
            server,
            seen: Seen {
                lent: client_lent,
                reads: 0,
                corrupt: 0,
                data_in_rx: 0,
            },
            app: App {
                lent: server_lent,
                delivered: 0,
                corrupt: 0,
                answered: 0,
                data_in_rx: 0,
                answer_in_tx: 0,
            },
            storage: start..end,
            step: 0,
            submitted: 0,
            filled_in_storage: 0,
        }
    }

    /// Submits `messages` more (writes, reads and streamed writes in turn,
    /// each filled in place with its sn's pattern) and runs both drivers
    /// until they are acknowledged.
    fn messages(&mut self, messages: u64) {
        let target = self.submitted + messages;
        let storage = (self.storage.start, self.storage.end);
        while self.client.session().base_sn() < target {
            let now = Instant::from_micros(self.step);
            self.step += 1;
            while self.submitted < target {
                let (op, bytes, read_len) = match self.submitted % 3 {
                    0 => (RequestOp::Write, PAYLOAD, None),
                    1 => (RequestOp::Read, REQUEST, Some(PAYLOAD as u32)),
                    _ => (RequestOp::StreamWrite, PAYLOAD, None),
                };
                let sn = self.client.session().next_sn();
                let filled = &mut self.filled_in_storage;
                let fill = |buf: &mut [u8]| {
                    if inside(buf, storage) {
                        *filled += 1;
                    }
                    workload::fill(SESSION, sn, buf);
                };
                if self.client.submit_with(op, bytes, read_len, fill).is_err() {
                    break;
                }
                self.submitted += 1;
            }
            self.client.poll(now, &mut self.seen);
            self.server.poll(now, &mut self.app);
            assert!(
                self.step < 100 * target,
                "stalled at {}",
                self.app.delivered
            );
        }
        assert_eq!((self.app.corrupt, self.seen.corrupt), (0, 0), "intact");
    }
}

/// The allocator counts every thread, and the test harness allocates
/// when it reports another test; so the stream runs in three windows of
/// 100 000 messages and the quietest must show nothing. A driver that
/// allocated per message, or every few thousand, would in every window.
#[test]
fn steady_state_messages_allocate_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut run = Run::new();
    // Warm up: connect and handshake.
    run.messages(1000);
    let mut windows = Vec::with_capacity(3);
    for _ in 0..3 {
        let (delivered, reads) = (run.app.delivered, run.seen.reads);
        let region = Region::new(GLOBAL);
        run.messages(100_000);
        let change = region.change();
        assert_eq!(run.app.delivered - delivered, 100_000, "messages flowed");
        assert!(run.seen.reads - reads > 30_000, "reads answered");
        windows.push((change.allocations, change.reallocations));
    }
    assert_eq!(
        windows.iter().min(),
        Some(&(0, 0)),
        "(allocations, reallocations) in each window of 100 000 messages"
    );
}

/// A payload is copied at most once on each side, shown by where its
/// bytes lie:
///
/// * client: `submit_with` lends the application a buffer inside the
///   caller's own storage, so the bytes are written once, in place, where
///   they stay until acknowledged; `write_transmit` then emits the frame
///   straight into the buffer the transport lent (its `TxToken`): the
///   one copy on the sending side;
/// * server: `Delivery::data` lies inside the frame the transport lent
///   (its `RxToken`), so the application reads the bytes where they
///   arrived, uncopied; a read's answer is written by `respond` straight
///   into the transport's transmit buffer: the one copy of the answer;
/// * client again: a read's data (`read_data`) lies inside the frame its
///   transport lent: read where it arrived.
#[test]
fn payloads_lie_in_the_callers_storage_and_the_transports_lent_buffers() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut run = Run::new();
    run.messages(3000);
    assert_eq!(run.submitted, 3000);
    assert_eq!(
        run.filled_in_storage, run.submitted,
        "every fill buffer in the storage"
    );
    assert_eq!(run.app.delivered, 3000);
    assert_eq!(
        run.app.data_in_rx, run.app.delivered,
        "every delivery in the RxToken's bytes"
    );
    assert_eq!(run.app.answered, 1000);
    assert_eq!(
        run.app.answer_in_tx, run.app.answered,
        "every answer in the TxToken's buffer"
    );
    assert_eq!(run.seen.reads, 1000);
    assert_eq!(
        run.seen.data_in_rx, run.seen.reads,
        "every read's data in the client's RxToken's bytes"
    );
    // The check tells buffers apart: the storage is none of the
    // transport's, nor a buffer of this stack frame.
    let local = [1u8; 8];
    let storage = (run.storage.start, run.storage.end);
    assert!(!inside(&local, storage));
    assert!(!inside(&local, run.app.lent.rx.get()));
    let (rx, tx) = (run.app.lent.rx.get(), run.app.lent.tx.get());
    assert!(
        rx.1 <= storage.0 || storage.1 <= rx.0,
        "storage apart from the ring"
    );
    assert!(
        tx.1 <= storage.0 || storage.1 <= tx.0,
        "storage apart from the ring"
    );
}
