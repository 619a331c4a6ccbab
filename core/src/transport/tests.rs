//! The drivers over an in-memory transport pair: a queue of events per
//! direction, a buffer lent per frame, and knobs for what backends do
//! differently or wrong (capabilities, `WouldBlock`, `TooLarge`, lost
//! frames, reused connection slots).

use core::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::vec;
use std::vec::Vec;

use super::*;
use crate::session::{
    ClientConfig, ClientEvent, ClientSession, ClientState, Delivery, DisconnectCause, FailReason,
    Message, MessageLimits, ReadData, ReadRequest, ServerConfig, ServerCore, ServerEvent,
    ServerHandler, SubmitError,
};
use crate::wire::{self, Body, IoMsg, MAX_DATA_LEN, MAX_FRAME_LEN};
use crate::workload;

/// What travels: events with their frames, for each side.
#[derive(Default)]
struct Net {
    to_client: VecDeque<Event<Vec<u8>>>,
    to_server: VecDeque<Event<Vec<u8>>>,
    /// Connections opened so far: the generation of the next one. The
    /// client always reuses slot 0.
    generation: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// What an end does differently from a perfect backend.
struct Knobs {
    caps: Capabilities,
    /// Refuse frames longer than this with `TooLarge`.
    refuse_above: Option<usize>,
    /// Refuse frames of this length with `WouldBlock`, this many times.
    block: Option<(usize, u32)>,
    /// Frames sent are lost.
    mute: bool,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            caps: Capabilities {
                max_frame: MAX_FRAME_LEN,
                in_order: true,
            },
            refuse_above: None,
            block: None,
            mute: false,
        }
    }
}

/// One end of the pair.
struct End {
    net: Rc<RefCell<Net>>,
    side: Side,
    knobs: Knobs,
    /// Every frame this end sent, in order.
    sent: Vec<Vec<u8>>,
    /// Every `WouldBlock` it answered.
    blocked: u32,
    /// The frame lent by the last `Received`.
    rx: Vec<u8>,
}

impl End {
    fn new(net: &Rc<RefCell<Net>>, side: Side) -> End {
        End {
            net: net.clone(),
            side,
            knobs: Knobs::default(),
            sent: Vec::new(),
            blocked: 0,
            rx: Vec::new(),
        }
    }
    /// The data frames (`Write`, `Read`) this end sent: their sns.
    fn data_sns(&self) -> Vec<u64> {
        self.sent
            .iter()
            .filter_map(|f| wire::parse(f).ok())
            .filter(|m| matches!(m.body, Body::Write { .. } | Body::Read { .. }))
            .map(|m| m.sn)
            .collect()
    }
}

/// A lent transmit buffer: the frame is emitted straight into it.
struct Tx<'a> {
    end: &'a mut End,
    conn: ConnId,
    len: usize,
}

impl TxToken for Tx<'_> {
    fn consume<R>(self, emit: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut buf = vec![0u8; self.len];
        let r = emit(&mut buf);
        self.end.sent.push(buf.clone());
        if !self.end.knobs.mute {
            let mut net = self.end.net.borrow_mut();
            let q = match self.end.side {
                Side::Client => &mut net.to_server,
                Side::Server => &mut net.to_client,
            };
            q.push_back(Event::Received {
                conn: self.conn,
                frame: buf,
            });
        }
        r
    }
}

/// A received frame, lent from the end's receive buffer.
struct Rx<'a>(&'a [u8]);

impl RxToken for Rx<'_> {
    fn consume<R>(self, read: impl FnOnce(&[u8]) -> R) -> R {
        read(self.0)
    }
}

impl Transport for End {
    type TxToken<'a> = Tx<'a>;
    type RxToken<'a> = Rx<'a>;

    fn capabilities(&self) -> Capabilities {
        self.knobs.caps
    }

    fn transmit(&mut self, _now: Instant, conn: ConnId, len: usize) -> Result<Tx<'_>, SendError> {
        if let Some(max) = self.knobs.refuse_above.filter(|&max| len > max) {
            return Err(SendError::TooLarge { len, max });
        }
        if let Some((n, times)) = &mut self.knobs.block {
            if *n == len && *times > 0 {
                *times -= 1;
                self.blocked += 1;
                return Err(SendError::WouldBlock);
            }
        }
        Ok(Tx {
            end: self,
            conn,
            len,
        })
    }

    fn poll(&mut self, _now: Instant) -> Option<Event<Rx<'_>>> {
        let event = {
            let mut net = self.net.borrow_mut();
            match self.side {
                Side::Client => net.to_client.pop_front(),
                Side::Server => net.to_server.pop_front(),
            }
        }?;
        Some(match event {
            Event::Received { conn, frame } => {
                self.rx = frame;
                Event::Received {
                    conn,
                    frame: Rx(&self.rx),
                }
            }
            Event::Connected { conn } => Event::Connected { conn },
            Event::Accepted { conn } => Event::Accepted { conn },
            Event::Disconnected { conn, reason } => Event::Disconnected { conn, reason },
        })
    }

    fn close(&mut self, _now: Instant, conn: ConnId) {
        let mut guard = self.net.borrow_mut();
        let net = &mut *guard;
        let (mine, peer) = match self.side {
            Side::Client => (&mut net.to_client, &mut net.to_server),
            Side::Server => (&mut net.to_server, &mut net.to_client),
        };
        // Nothing more is reported for it here; the peer hears of it after
        // the frames already on their way.
        mine.retain(|e| conn_of(e) != conn);
        let reason = DisconnectReason::PeerClosed;
        peer.push_back(Event::Disconnected { conn, reason });
    }
}

fn conn_of(e: &Event<Vec<u8>>) -> ConnId {
    match *e {
        Event::Connected { conn }
        | Event::Accepted { conn }
        | Event::Received { conn, .. }
        | Event::Disconnected { conn, .. } => conn,
    }
}

impl Connector for End {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let mut net = self.net.borrow_mut();
        let conn = ConnId::new(0, net.generation);
        net.generation += 1;
        net.to_client.push_back(Event::Connected { conn });
        net.to_server.push_back(Event::Accepted { conn });
        Ok(conn)
    }
}

impl Listener for End {}

/// The server's application: records what it is given (a hash of the
/// bytes per sn, and how often) and answers reads with bytes that depend
/// on its instance, the sn and the request.
#[derive(Default)]
struct App {
    instance: u64,
    /// Per sn: the hash of its bytes and how often it was delivered.
    delivered: BTreeMap<u64, (u64, u32)>,
    /// Every delivery: sn and the hash of its bytes.
    log: Vec<(u64, u64)>,
    /// Per read sn: the hash of the last answer written.
    answered: BTreeMap<u64, u64>,
    events: Vec<ServerEvent>,
    /// Flushes fail from now on (a full disk): what `deliver` took since
    /// the last good flush is not kept.
    fail_flush: bool,
    /// Every sn delivered and then kept by a good flush.
    kept: Vec<u64>,
    /// Delivered since the last flush.
    unflushed: Vec<u64>,
}

impl App {
    fn new(instance: u64) -> App {
        App {
            instance,
            ..App::default()
        }
    }
    fn hashes(&self) -> BTreeMap<u64, u64> {
        self.delivered
            .iter()
            .map(|(&sn, &(h, _))| (sn, h))
            .collect()
    }
    fn each_once(&self) -> bool {
        self.delivered.values().all(|&(_, n)| n == 1)
    }
}

fn answer(instance: u64, sn: u64, request: &[u8], out: &mut [u8]) {
    workload::fill(instance ^ workload::hash(request), sn, out);
}

impl ServerHandler for App {
    fn deliver(&mut self, msg: Delivery<'_>) {
        let hash = workload::hash(msg.data);
        let e = self.delivered.entry(msg.sn).or_insert((0, 0));
        *e = (hash, e.1 + 1);
        self.log.push((msg.sn, hash));
        self.unflushed.push(msg.sn);
    }
    fn flush(&mut self) -> Result<(), crate::session::Unkept> {
        if self.fail_flush {
            return Err(crate::session::Unkept);
        }
        self.kept.append(&mut self.unflushed);
        Ok(())
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        answer(self.instance, read.sn, read.request, out);
        self.answered.insert(read.sn, workload::hash(out));
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
}

/// What the client's application sees, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Event(ClientEvent),
    Read { sn: u64, hash: u64 },
}

#[derive(Default)]
struct Log(Vec<Seen>);

impl ClientHandler for Log {
    fn event(&mut self, event: ClientEvent) {
        self.0.push(Seen::Event(event));
    }
    fn read_data(&mut self, data: ReadData<'_>) {
        let hash = workload::hash(data.data);
        self.0.push(Seen::Read { sn: data.sn, hash });
    }
}

impl Log {
    fn reads(&self) -> Vec<(u64, u64)> {
        self.0
            .iter()
            .filter_map(|s| match *s {
                Seen::Read { sn, hash } => Some((sn, hash)),
                _ => None,
            })
            .collect()
    }
    fn events(&self) -> impl Iterator<Item = &ClientEvent> {
        self.0.iter().filter_map(|s| match s {
            Seen::Event(e) => Some(e),
            Seen::Read { .. } => None,
        })
    }
}

type TestClient = Client<End, 16, Vec<u8>>;
type TestServer = Server<End, 4, 8, 8>;

const SESSION: u64 = 77;

fn ms(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// The bytes the tests write as sn `sn`: the workload pattern.
fn payload(sn: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    workload::fill(SESSION, sn, &mut v);
    v
}

fn session<const N: usize>() -> ClientSession<N, [u8; 64]> {
    ClientSession::new(ClientConfig::new(1, 2), Instant::ZERO, [0; 64])
}

/// A client and a server over one in-memory pair, their applications,
/// and virtual time in milliseconds.
struct Pair {
    net: Rc<RefCell<Net>>,
    client: TestClient,
    server: TestServer,
    log: Log,
    app: App,
    now: u64,
}

impl Pair {
    /// A client whose end has `knobs` and `storage` bytes of payload
    /// storage, and a server of instance 1.
    fn with(knobs: Knobs, storage: usize) -> Pair {
        Pair::with_crc(knobs, storage, wire::Crc32c::BUILTIN, false)
    }

    /// [`Pair::with`], both ends computing CRCs with `crc`, and the
    /// client asking for payload CRCs if `validate`.
    fn with_crc(knobs: Knobs, storage: usize, crc: wire::Crc32c, validate: bool) -> Pair {
        let net = Rc::new(RefCell::new(Net::default()));
        let mut end = End::new(&net, Side::Client);
        end.knobs = knobs;
        let mut cfg = ClientConfig::new(SESSION, 0x70CE);
        cfg.backoff.jitter_per_mille = 0;
        cfg.crc = crc;
        cfg.validate = validate;
        let session = ClientSession::new(cfg, Instant::ZERO, vec![0; storage]);
        let client = Client::new(end, session).unwrap();
        let end = End::new(&net, Side::Server);
        let mut server_cfg = ServerConfig::new(1);
        server_cfg.crc = crc;
        server_cfg.validate = validate;
        let server = TestServer::with_core(end, ServerCore::new(server_cfg)).unwrap();
        Pair {
            net,
            client,
            server,
            log: Log::default(),
            app: App::new(1),
            now: 0,
        }
    }

    fn new() -> Pair {
        Pair::with(Knobs::default(), 1 << 16)
    }

    fn poll(&mut self) {
        self.client.poll(ms(self.now), &mut self.log);
        self.server.poll(ms(self.now), &mut self.app);
    }

    /// Polls both every millisecond until `done` holds; `false` when
    /// `limit` milliseconds passed first.
    fn until(&mut self, limit: u64, done: impl Fn(&Pair) -> bool) -> bool {
        for _ in 0..limit {
            self.poll();
            if done(self) {
                return true;
            }
            self.now += 1;
        }
        false
    }

    fn established(&self) -> bool {
        matches!(
            self.client.session().state(),
            ClientState::Established { .. }
        )
    }

    fn base_sn(&self) -> u64 {
        self.client.session().base_sn()
    }

    /// Starts the client and completes its handshake.
    fn connect(&mut self) {
        self.client.start(ms(self.now));
        assert!(self.until(100, Pair::established), "no handshake");
    }

    /// Runs until every sn below `upto` is acknowledged.
    fn acked(&mut self, upto: u64) {
        let done = self.until(1000, |p| p.base_sn() == upto);
        assert!(done, "acked up to {}, not {upto}", self.base_sn());
    }

    /// The connection the client opened last.
    fn last_conn(&self) -> ConnId {
        let generation = self.net.borrow().generation - 1;
        ConnId::new(0, generation)
    }

    /// Queues `event` for the client.
    fn to_client(&self, event: Event<Vec<u8>>) {
        self.net.borrow_mut().to_client.push_back(event);
    }

    /// Kills the server: everything on the wire dies with it, the client
    /// sees its connection fail, and instance `instance` listens. Returns
    /// the dead instance's application.
    fn restart(&mut self, instance: u64) -> App {
        let conn = self.last_conn();
        {
            let mut n = self.net.borrow_mut();
            n.to_server.clear();
            n.to_client.clear();
        }
        let reason = DisconnectReason::PeerFailed(crate::transport::Cause::UNKNOWN);
        self.to_client(Event::Disconnected { conn, reason });
        let end = End::new(&self.net, Side::Server);
        self.server =
            TestServer::with_core(end, ServerCore::new(ServerConfig::new(instance))).unwrap();
        core::mem::replace(&mut self.app, App::new(instance))
    }
}

#[test]
fn drivers_deliver_every_write_across_a_server_restart() {
    let mut p = Pair::new();
    let mut submitted = BTreeMap::new();
    let mut delivered: Vec<(u64, u64)> = Vec::new();
    p.client.start(ms(0));
    for step in 0..200u64 {
        p.now = step;
        while p.client.session().next_sn() < 300 {
            let sn = p.client.session().next_sn();
            let bytes = payload(sn, 64);
            if p.client.submit(Message::Write(&bytes)).is_err() {
                break;
            }
            submitted.insert(sn, workload::hash(&bytes));
        }
        p.poll();
        if step == 4 {
            delivered.append(&mut p.restart(2).log);
        }
    }
    delivered.append(&mut p.app.log);
    let mut unique = delivered.clone();
    unique.sort_unstable();
    unique.dedup();
    let expected: Vec<(u64, u64)> = submitted.into_iter().collect();
    assert_eq!(expected.len(), 300);
    assert_eq!(unique, expected, "every sn delivered, with its own bytes");
    assert_eq!(p.base_sn(), 300, "and acknowledged");
    let dups = (delivered.len() - unique.len()) as u64;
    let announced = p.client.session().stats().possible_duplicates;
    assert!(dups > 0, "the restart came with sns unacknowledged");
    assert!(
        dups <= announced,
        "{dups} duplicates, {announced} announced"
    );
    assert!(p
        .log
        .events()
        .any(|e| matches!(e, ClientEvent::ServerRestarted { instance: 2, .. })));
}

#[test]
fn a_strangers_malformed_frame_is_rejected_and_the_server_keeps_serving() {
    let mut p = Pair::new();
    p.connect();
    p.client.submit(Message::Write(&payload(0, 8))).unwrap();
    p.acked(1);
    {
        let mut n = p.net.borrow_mut();
        let conn = ConnId::new(99, 0);
        n.to_server.push_back(Event::Accepted { conn });
        let frame = vec![0x55u8; 4096];
        n.to_server.push_back(Event::Received { conn, frame });
    }
    p.client.submit(Message::Write(&payload(1, 8))).unwrap();
    p.acked(2);
    let rejected: Vec<_> = p
        .app
        .events
        .iter()
        .filter_map(|e| match *e {
            ServerEvent::Rejected { conn, reason, .. } => Some((conn.slot(), reason)),
            _ => None,
        })
        .collect();
    assert_eq!(rejected, vec![(99, wire::RejectReason::Malformed)]);
    assert_eq!(
        p.app.delivered.len(),
        2,
        "the client's session is unaffected"
    );
    assert!(p.app.each_once());
}

// ---- capabilities ------------------------------------------------------------

#[test]
fn drivers_refuse_a_transport_without_in_order_delivery() {
    let net = Rc::new(RefCell::new(Net::default()));
    let unordered = |side| {
        let mut end = End::new(&net, side);
        end.knobs.caps.in_order = false;
        end
    };
    let client = Client::new(unordered(Side::Client), session::<4>());
    assert_eq!(client.err(), Some(DriverError::Unordered));
    let server = Server::<End, 4, 8, 8>::with_core(
        unordered(Side::Server),
        ServerCore::new(ServerConfig::new(1)),
    );
    assert_eq!(server.err(), Some(DriverError::Unordered));
}

#[test]
fn drivers_refuse_a_transport_whose_frames_cannot_hold_a_hello() {
    let net = Rc::new(RefCell::new(Net::default()));
    let small = |side, max_frame| {
        let mut end = End::new(&net, side);
        end.knobs.caps.max_frame = max_frame;
        end
    };
    let too_small = DriverError::FrameTooSmall {
        max_frame: MIN_FRAME - 1,
        need: MIN_FRAME,
    };
    let client = Client::new(small(Side::Client, MIN_FRAME - 1), session::<4>());
    assert_eq!(client.err(), Some(too_small));
    let end = small(Side::Server, MIN_FRAME - 1);
    let server = Server::<End, 4, 8, 8>::with_core(end, ServerCore::new(ServerConfig::new(1)));
    assert_eq!(server.err(), Some(too_small));
    // At the least it takes, a client is built and its Hello goes out.
    let mut knobs = Knobs::default();
    knobs.caps.max_frame = MIN_FRAME;
    let mut p = Pair::with(knobs, 64);
    p.connect();
    let hello = &p.client.transport().sent[0];
    assert!(wire::parse(hello).is_ok_and(|m| m.body.op() == wire::Op::Hello));
}

#[test]
fn replacing_the_transport_with_one_that_cannot_carry_the_protocol_changes_nothing() {
    let mut p = Pair::new();
    let mut end = End::new(&p.net, Side::Client);
    end.knobs.caps.in_order = false;
    let refused = p.client.replace_transport(ms(0), end).err();
    assert_eq!(refused, Some(DriverError::Unordered));
    let limit = p.client.session().limits().transport;
    assert_eq!(limit, MAX_DATA_LEN as usize);
}

#[test]
fn a_message_over_the_transports_max_frame_is_refused_at_submit() {
    let mut knobs = Knobs::default();
    knobs.caps.max_frame = 200;
    let mut p = Pair::with(knobs, 4096);
    p.connect();
    let limits = MessageLimits {
        configured: MAX_DATA_LEN as usize,
        transport: 200 - wire::HEADER_LEN,
        storage: 4096,
    };
    assert_eq!(
        p.client.submit(Message::Write(&payload(0, 1000))),
        Err(SubmitError::TooLong { len: 1000, limits })
    );
    p.until(100, |_| false);
    assert_eq!(p.client.session().stats().connects, 1, "no reconnect");
    assert_eq!(
        p.client.transport().data_sns(),
        Vec::<u64>::new(),
        "no frame"
    );
    assert_eq!(p.client.session().next_sn(), 0);
    // The most the transport carries goes through.
    let at_limit = payload(0, limits.transport);
    assert_eq!(p.client.submit(Message::Write(&at_limit)), Ok(0));
    p.acked(1);
    let hashes = BTreeMap::from([(0, workload::hash(&at_limit))]);
    assert_eq!(p.app.hashes(), hashes);
    assert_eq!(p.client.send_errors(), 0);
}

// ---- the application's bytes, end to end ---------------------------------------

/// What one end-to-end run submits: writes of every size class, a read
/// with a request body and a streamed write. Returns the hash of each
/// sn's bytes (a read's: its request).
fn submit_all(client: &mut TestClient) -> BTreeMap<u64, u64> {
    let mut hashes = BTreeMap::new();
    for len in [0, 1, 100, 4096, MAX_DATA_LEN as usize] {
        let sn = client.session().next_sn();
        let bytes = payload(sn, len);
        assert_eq!(client.submit(Message::Write(&bytes)), Ok(sn), "len {len}");
        hashes.insert(sn, workload::hash(&bytes));
    }
    let read = Message::Read {
        len: 3000,
        request: b"key-5",
    };
    assert_eq!(client.submit(read), Ok(5));
    hashes.insert(5, workload::hash(b"key-5"));
    let bytes = payload(6, 777);
    assert_eq!(client.submit(Message::StreamWrite(&bytes)), Ok(6));
    hashes.insert(6, workload::hash(&bytes));
    hashes
}

#[test]
fn the_applications_bytes_arrive_once_per_sn_reads_are_answered_and_replay_resends_them() {
    let mut p = Pair::with(Knobs::default(), 3 << 20);
    p.connect();
    // Instance 1 gets everything, but its answers are lost; then it dies.
    p.server.transport_mut().knobs.mute = true;
    let submitted = submit_all(&mut p.client);
    assert!(p.until(100, |p| p.app.delivered.len() == 7));
    assert_eq!(p.app.hashes(), submitted, "exactly the bytes submitted");
    assert!(p.app.each_once());
    assert!(p.app.answered.contains_key(&5), "answered, then lost");
    assert!(p.log.reads().is_empty());
    assert_eq!(p.base_sn(), 0, "nothing acknowledged");
    // Instance 2: the client replays every message from its storage.
    p.restart(2);
    p.acked(7);
    assert_eq!(
        p.app.hashes(),
        submitted,
        "the replay resends the same bytes"
    );
    assert!(p.app.each_once());
    assert_eq!(p.client.session().stats().replayed, 7);
    // The read: the client got instance 2's answer, exactly once.
    let mut expected = vec![0u8; 3000];
    answer(2, 5, b"key-5", &mut expected);
    assert_eq!(p.app.answered.get(&5), Some(&workload::hash(&expected)));
    assert_eq!(p.log.reads(), vec![(5, workload::hash(&expected))]);
    assert_eq!(p.client.session().stats().reads_answered, 1);
}

#[test]
fn events_of_an_older_generation_of_a_reused_slot_are_ignored_by_the_client() {
    let mut p = Pair::new();
    p.connect();
    let old = p.last_conn();
    // The connection fails; the client reconnects on the same slot.
    let reason = DisconnectReason::PeerFailed(crate::transport::Cause::UNKNOWN);
    p.to_client(Event::Disconnected { conn: old, reason });
    let gone = Event::Disconnected { conn: old, reason };
    p.net.borrow_mut().to_server.push_back(gone);
    assert!(p.until(1000, |p| p.established() && p.client.session().epoch() == 2));
    let new = p.last_conn();
    assert_eq!(
        (new.slot(), new.generation()),
        (old.slot(), old.generation() + 1)
    );
    // A Bye of the session's current epoch, and a disconnect, both on the
    // old generation: neither may end the new connection.
    let bye = IoMsg {
        session: SESSION,
        epoch: 2,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Bye,
    };
    let mut frame = vec![0u8; bye.buffer_len()];
    bye.emit(&mut frame).unwrap();
    let before = *p.client.session().stats();
    let f = frame.clone();
    p.to_client(Event::Received {
        conn: old,
        frame: f,
    });
    p.to_client(Event::Disconnected { conn: old, reason });
    assert!(
        p.client.poll(ms(p.now), &mut p.log),
        "the events were taken"
    );
    assert!(p.established(), "{:?}", p.client.session().state());
    assert_eq!(
        *p.client.session().stats(),
        before,
        "nothing reached the session"
    );
    // The connection still carries messages.
    p.client.submit(Message::Write(&payload(0, 32))).unwrap();
    p.acked(1);
    // The same Bye on the current generation does end it.
    p.to_client(Event::Received { conn: new, frame });
    p.client.poll(ms(p.now), &mut p.log);
    let ended = ClientEvent::Disconnected {
        epoch: 2,
        cause: DisconnectCause::ServerBye,
    };
    assert!(p.log.events().any(|e| *e == ended));
}

mod client_waits;
mod core_storage;
mod crc_and_refusals;

#[test]
fn a_flush_that_fails_halts_the_server_before_it_acknowledges_what_it_did_not_keep() {
    let mut p = Pair::new();
    p.connect();
    for sn in 0..10 {
        p.client.submit(Message::Write(&payload(sn, 64))).unwrap();
    }
    p.acked(10);
    assert_eq!(p.app.kept, (0..10).collect::<Vec<_>>());
    // The disk fills: the next batch cannot be kept.
    p.app.fail_flush = true;
    for sn in 10..20 {
        p.client.submit(Message::Write(&payload(sn, 64))).unwrap();
    }
    let halted = p.until(100, |p| p.server.halted());
    assert!(halted, "the failed flush halts the server");
    assert!(!p.app.unflushed.is_empty(), "it took some of them");
    // Nothing past the last kept batch was acknowledged, however long
    // the client waits; the server refuses it by name.
    p.until(300, |_| false);
    assert_eq!(p.base_sn(), 10, "acknowledged only what was kept");
    assert!(
        p.server.flush(&mut p.app).is_err(),
        "a halted server stays so"
    );
    let refused = p.log.events().any(|e| {
        matches!(
            e,
            ClientEvent::Disconnected {
                cause: DisconnectCause::Rejected {
                    reason: wire::RejectReason::ShuttingDown,
                    detail: crate::session::HALTED_UNKEPT,
                },
                ..
            }
        )
    });
    assert!(refused, "the client is told why: {:?}", p.log.0);
    assert!(p.app.kept.iter().all(|&sn| sn < 10));
    // A new instance gets what the halted one did not keep.
    p.restart(2);
    p.acked(20);
    assert_eq!(p.app.kept, (10..20).collect::<Vec<_>>());
}
