//! The drivers allocate nothing per message: a counting global allocator
//! watches a steady stream of writes, reads and streamed writes between a
//! `Client` and a `Server` over a transport of fixed rings.

use std::alloc::System;
use std::cell::RefCell;
use std::rc::Rc;

use iomsg_core::session::{ClientConfig, ClientSession, RequestOp, ServerConfig};
use iomsg_core::transport::{
    Client, ConnId, DisconnectReason, SendError, Server, Transport, TransportEvent,
};
use iomsg_core::Instant;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SLOTS: usize = 256;
const SLOT: usize = 320;

/// A fixed ring of events with their frames: no allocation after creation.
struct Ring {
    events: Vec<(TransportEvent, usize)>,
    bytes: Vec<[u8; SLOT]>,
    head: usize,
    len: usize,
}

impl Ring {
    fn new() -> Ring {
        Ring {
            events: vec![(TransportEvent::Connected { conn: 0 }, 0); SLOTS],
            bytes: vec![[0; SLOT]; SLOTS],
            head: 0,
            len: 0,
        }
    }
    fn push(&mut self, e: TransportEvent, frame: &[u8]) -> Result<(), SendError> {
        if self.len == SLOTS || frame.len() > SLOT {
            return Err(SendError::WouldBlock);
        }
        let i = (self.head + self.len) % SLOTS;
        self.events[i] = (e, frame.len());
        self.bytes[i][..frame.len()].copy_from_slice(frame);
        self.len += 1;
        Ok(())
    }
    fn pop(&mut self, buf: &mut [u8]) -> Option<TransportEvent> {
        if self.len == 0 {
            return None;
        }
        let (e, n) = self.events[self.head];
        buf[..n].copy_from_slice(&self.bytes[self.head][..n]);
        self.head = (self.head + 1) % SLOTS;
        self.len -= 1;
        Some(e)
    }
}

struct Wire {
    to_server: Ring,
    to_client: Ring,
}

struct End {
    wire: Rc<RefCell<Wire>>,
    client: bool,
}

impl Transport for End {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let mut w = self.wire.borrow_mut();
        let _ = w.to_server.push(TransportEvent::Accepted { conn: 1 }, &[]);
        let _ = w.to_client.push(TransportEvent::Connected { conn: 1 }, &[]);
        Ok(1)
    }
    fn send(&mut self, _now: Instant, conn: ConnId, frame: &[u8]) -> Result<(), SendError> {
        let mut w = self.wire.borrow_mut();
        let ring = if self.client {
            &mut w.to_server
        } else {
            &mut w.to_client
        };
        ring.push(
            TransportEvent::Received {
                conn,
                len: frame.len(),
            },
            frame,
        )
    }
    fn close(&mut self, _now: Instant, _conn: ConnId) {}
    fn poll(&mut self, _now: Instant, buf: &mut [u8]) -> Option<TransportEvent> {
        let mut w = self.wire.borrow_mut();
        if self.client {
            w.to_client.pop(buf)
        } else {
            w.to_server.pop(buf)
        }
    }
}

#[test]
fn steady_state_messages_allocate_nothing() {
    let wire = Rc::new(RefCell::new(Wire {
        to_server: Ring::new(),
        to_client: Ring::new(),
    }));
    let mut cfg = ClientConfig::new(0xA110C, 0x70CE);
    cfg.max_payload = 256;
    let session = ClientSession::<64>::new(cfg, Instant::ZERO);
    let mut client: Box<Client<End, 64, 512>> = Box::new(
        Client::new(
            End {
                wire: wire.clone(),
                client: true,
            },
            session,
        )
        .unwrap(),
    );
    let mut server: Box<Server<End, 4, 4, 4, 512>> = Box::new(Server::new(
        End {
            wire,
            client: false,
        },
        ServerConfig::new(7),
    ));
    let mut delivered = 0u64;
    let mut run = |client: &mut Client<End, 64, 512>,
                   server: &mut Server<End, 4, 4, 4, 512>,
                   from: u64,
                   messages: u64| {
        let mut submitted = 0;
        let mut step = from;
        while submitted < messages {
            let now = Instant::from_micros(step);
            step += 1;
            let op = match submitted % 3 {
                0 => RequestOp::Write,
                1 => RequestOp::Read,
                _ => RequestOp::StreamWrite,
            };
            while submitted < messages && client.submit(op, 64).is_ok() {
                submitted += 1;
            }
            client.poll(now, &mut |_| {});
            server.poll(now, &mut |e| {
                if matches!(e, iomsg_core::session::ServerEvent::Delivered { .. }) {
                    delivered += 1;
                }
            });
        }
        step
    };
    client.start(Instant::ZERO);
    // Warm up: connect and handshake.
    let step = run(&mut client, &mut server, 0, 1000);
    let region = Region::new(GLOBAL);
    run(&mut client, &mut server, step, 100_000);
    let change = region.change();
    assert!(delivered > 100_000, "messages flowed: {delivered}");
    assert_eq!(change.allocations, 0, "allocations during 100 000 messages");
    assert_eq!(
        change.reallocations, 0,
        "reallocations during 100 000 messages"
    );
}
