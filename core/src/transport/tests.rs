//! The drivers over a tiny in-test transport: two queues per connection.

use core::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::vec::Vec;

use super::*;
use crate::session::{
    ClientConfig, ClientEvent, ClientSession, RequestOp, ServerConfig, ServerEvent,
};
use crate::wire::{RejectReason, HEADER_LEN};

/// What travels: events for the client side and for the server side.
#[derive(Default)]
struct Net {
    to_client: VecDeque<(TransportEvent, Vec<u8>)>,
    to_server: VecDeque<(TransportEvent, Vec<u8>)>,
    next_conn: ConnId,
    server_up: bool,
}

struct ClientEnd(Rc<RefCell<Net>>);
struct ServerEnd(Rc<RefCell<Net>>);

fn pop(q: &mut VecDeque<(TransportEvent, Vec<u8>)>, buf: &mut [u8]) -> Option<TransportEvent> {
    let (event, bytes) = q.pop_front()?;
    let n = bytes.len().min(buf.len());
    buf[..n].copy_from_slice(&bytes[..n]);
    Some(event)
}

impl Transport for ClientEnd {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        let mut net = self.0.borrow_mut();
        net.next_conn += 1;
        let conn = net.next_conn;
        if net.server_up {
            net.to_client
                .push_back((TransportEvent::Connected { conn }, Vec::new()));
            net.to_server
                .push_back((TransportEvent::Accepted { conn }, Vec::new()));
        } else {
            let reason = DisconnectReason::ConnectFailed;
            net.to_client
                .push_back((TransportEvent::Disconnected { conn, reason }, Vec::new()));
        }
        Ok(conn)
    }
    fn send(&mut self, _now: Instant, conn: ConnId, frame: &[u8]) -> Result<(), SendError> {
        let mut net = self.0.borrow_mut();
        let len = frame.len();
        net.to_server
            .push_back((TransportEvent::Received { conn, len }, frame.to_vec()));
        Ok(())
    }
    fn close(&mut self, _now: Instant, _conn: ConnId) {}
    fn poll(&mut self, _now: Instant, buf: &mut [u8]) -> Option<TransportEvent> {
        pop(&mut self.0.borrow_mut().to_client, buf)
    }
}

impl Transport for ServerEnd {
    fn connect(&mut self, _now: Instant) -> Result<ConnId, DisconnectReason> {
        Err(DisconnectReason::ConnectFailed)
    }
    fn send(&mut self, _now: Instant, conn: ConnId, frame: &[u8]) -> Result<(), SendError> {
        let len = frame.len();
        self.0
            .borrow_mut()
            .to_client
            .push_back((TransportEvent::Received { conn, len }, frame.to_vec()));
        Ok(())
    }
    fn close(&mut self, _now: Instant, _conn: ConnId) {}
    fn poll(&mut self, _now: Instant, buf: &mut [u8]) -> Option<TransportEvent> {
        pop(&mut self.0.borrow_mut().to_server, buf)
    }
}

type TestServer = Server<ServerEnd, 4, 8, 8, 1024>;
type TestClient = Client<ClientEnd, 32, 1024>;

fn pair(instance: u64) -> (Rc<RefCell<Net>>, TestClient, TestServer) {
    let net = Rc::new(RefCell::new(Net {
        server_up: true,
        ..Net::default()
    }));
    let mut cfg = ClientConfig::new(77, 0x70CE);
    cfg.max_payload = 512;
    let session = ClientSession::new(cfg, Instant::ZERO);
    let client = Client::new(ClientEnd(net.clone()), session).unwrap();
    let server = Server::new(ServerEnd(net.clone()), ServerConfig::new(instance));
    (net, client, server)
}

#[test]
fn driver_refuses_an_mtu_below_the_largest_frame() {
    let net = Rc::new(RefCell::new(Net::default()));
    let session = ClientSession::<4>::new(ClientConfig::new(1, 0x70CE), Instant::ZERO); // 4 KiB payloads
    let err = Client::<ClientEnd, 4, 1024>::new(ClientEnd(net), session).err();
    assert_eq!(
        err,
        Some(DriverError::MtuTooSmall {
            need: 4096 + HEADER_LEN,
            mtu: 1024
        })
    );
}

#[test]
fn drivers_deliver_every_write_across_a_server_restart() {
    let (net, mut client, mut server) = pair(1);
    let mut delivered: Vec<u64> = Vec::new();
    let mut client_events = Vec::new();
    let mut now = Instant::ZERO;
    client.start(now);
    let mut submitted = 0u64;
    for step in 0..2000u64 {
        now = Instant::from_micros(step * 100);
        while submitted < 300 && client.submit(RequestOp::Write, 64).is_ok() {
            submitted += 1;
        }
        client.poll(now, &mut |e| client_events.push(e));
        server.poll(now, &mut |e| {
            if let ServerEvent::Delivered { sn, .. } = e {
                delivered.push(sn);
            }
        });
        if step == 40 {
            // Kill the server: queued frames die with it, both ends see the break.
            let mut n = net.borrow_mut();
            n.to_server.clear();
            n.to_client.clear();
            let conn = n.next_conn;
            let reason = DisconnectReason::PeerFailed;
            n.to_client
                .push_back((TransportEvent::Disconnected { conn, reason }, Vec::new()));
            drop(n);
            server = Server::new(ServerEnd(net.clone()), ServerConfig::new(2));
        }
    }
    let mut unique = delivered.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique, (0..300).collect::<Vec<u64>>(), "every sn delivered");
    assert_eq!(client.session().base_sn(), 300, "and acknowledged");
    let dups = (delivered.len() - unique.len()) as u64;
    assert!(
        dups <= client.session().stats().possible_duplicates,
        "{dups} duplicates, only {} announced",
        client.session().stats().possible_duplicates
    );
    assert!(client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::ServerRestarted { instance: 2, .. })));
}

#[test]
fn oversized_frame_is_rejected_and_the_server_keeps_serving() {
    let (net, mut client, mut server) = pair(1);
    let now = Instant::ZERO;
    client.start(now);
    client.submit(RequestOp::Write, 8).unwrap();
    let mut delivered = 0;
    let mut rejected = Vec::new();
    for _ in 0..5 {
        client.poll(now, &mut |_| {});
        server.poll(now, &mut |e| match e {
            ServerEvent::Delivered { .. } => delivered += 1,
            ServerEvent::Rejected { reason, .. } => rejected.push(reason),
            _ => {}
        });
    }
    // A stranger's 4 KiB frame into a 1 KiB server buffer.
    {
        let mut n = net.borrow_mut();
        n.to_server
            .push_back((TransportEvent::Accepted { conn: 99 }, Vec::new()));
        let big = std::vec![0x55u8; 4096];
        n.to_server.push_back((
            TransportEvent::Received {
                conn: 99,
                len: big.len(),
            },
            big,
        ));
    }
    client.submit(RequestOp::Write, 8).unwrap();
    for _ in 0..5 {
        client.poll(now, &mut |_| {});
        server.poll(now, &mut |e| match e {
            ServerEvent::Delivered { .. } => delivered += 1,
            ServerEvent::Rejected { reason, .. } => rejected.push(reason),
            _ => {}
        });
    }
    assert_eq!(rejected, std::vec![RejectReason::Malformed]);
    assert_eq!(delivered, 2, "the client's session is unaffected");
}
