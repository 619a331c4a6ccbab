//! The network's contract, event by event.

use super::*;
use crate::testkit::{connected, drain, frames, net, us, TransportEvent};
use iomsg_core::transport::{Connector, Transport, TxToken};
use iomsg_core::wire::MAX_FRAME_LEN;

#[test]
fn connect_without_a_listener_fails_after_one_latency() {
    let n = net();
    let mut client = n.client(9);
    let conn = client.connect(us(0)).unwrap();
    assert!(
        drain(&mut client, us(4)).is_empty(),
        "nothing before the latency"
    );
    let reason = DisconnectReason::ConnectFailed(iomsg_core::transport::Cause::UNKNOWN);
    assert_eq!(
        drain(&mut client, us(5)),
        vec![(TransportEvent::Disconnected { conn, reason }, vec![])]
    );
    assert_eq!(n.connections(), 0, "forgotten once the client knows");
}

#[test]
fn frames_arrive_in_order_after_the_latency() {
    let n = net();
    let (mut client, mut server, conn) = connected(&n);
    for i in 0..5u8 {
        client
            .send_frame(us(20), conn, &[i, 0, 0, 0, 0, 3])
            .unwrap();
    }
    assert!(drain(&mut server, us(24)).is_empty());
    let got = frames(&drain(&mut server, us(25)));
    assert_eq!(
        got.iter().map(|f| f[0]).collect::<Vec<u8>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(n.next_event(), None);
}

#[test]
fn listening_twice_on_one_address_is_refused_until_the_first_server_is_gone() {
    let n = net();
    let first = n.listen(1, us(0)).unwrap();
    assert_eq!(n.listen(1, us(0)).err(), Some(AddrInUse(1)));
    drop(first);
    assert!(
        n.listen(1, us(1)).is_ok(),
        "a restarted server listens again at once"
    );
}

#[test]
fn a_crashed_server_resets_its_connections_and_drops_what_was_in_flight() {
    let n = net();
    let (mut client, server, conn) = connected(&n);
    client
        .send_frame(us(20), conn, &[1, 0, 0, 0, 0, 3])
        .unwrap();
    drop(server); // crash at 20 µs, the frame still on the wire
                  // Sent after the crash, before the client knows: accepted locally, lost.
    assert_eq!(client.send_frame(us(30), conn, &[2, 0, 0, 0, 0, 3]), Ok(()));
    let events = drain(&mut client, us(70));
    let reason = DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN);
    assert_eq!(
        events,
        vec![(TransportEvent::Disconnected { conn, reason }, vec![])]
    );
    assert_eq!(
        client.send_frame(us(71), conn, &[3]),
        Err(SendError::NotConnected)
    );
    assert_eq!(n.connections(), 0);
}

#[test]
fn a_graceful_close_delivers_earlier_frames_then_the_close() {
    let n = net();
    let (mut client, mut server, conn) = connected(&n);
    client
        .send_frame(us(20), conn, &[7, 0, 0, 0, 0, 8])
        .unwrap();
    client.close(us(20), conn);
    let events = drain(&mut server, us(25));
    assert_eq!(frames(&events), vec![vec![7, 0, 0, 0, 0, 8]]);
    assert_eq!(
        events.last().map(|e| e.0),
        Some(TransportEvent::Disconnected {
            conn,
            reason: DisconnectReason::PeerClosed
        })
    );
    assert!(
        drain(&mut client, us(100)).is_empty(),
        "no event after a local close"
    );
}

#[test]
fn a_lent_transmit_buffer_has_the_length_asked_and_the_frame_arrives_whole() {
    let n = net();
    let (mut client, mut server, conn) = connected(&n);
    let token = client.transmit(us(20), conn, 200).unwrap();
    token.consume(|buf| {
        assert_eq!(buf.len(), 200);
        buf.fill(0xAB);
    });
    assert_eq!(
        drain(&mut server, us(25)),
        vec![(TransportEvent::Received { conn, len: 200 }, vec![0xAB; 200])]
    );
    assert_eq!(
        client.transmit(us(26), conn, MAX_FRAME_LEN + 1).err(),
        Some(SendError::TooLarge {
            len: MAX_FRAME_LEN + 1,
            max: MAX_FRAME_LEN
        })
    );
    assert_eq!(client.capabilities().max_frame, MAX_FRAME_LEN);
    assert!(client.capabilities().in_order);
}

#[test]
fn endpoints_of_crashed_servers_are_reused_so_restarts_do_not_grow_the_network() {
    let n = net();
    for i in 0..1000u64 {
        let server = n.listen(1, us(i)).unwrap();
        drop(server);
    }
    assert!(n.inner.borrow().endpoints.len() <= 2);
}

#[test]
fn late_events_of_a_dropped_client_go_to_a_dead_endpoint_even_when_its_slot_is_reused() {
    let n = net();
    let (client, mut server, conn) = connected(&n);
    assert_eq!(n.conn_status(conn), Some(ConnStatus::Open));
    // A reply is on its way when the client's transport is rebuilt; the
    // new transport takes the freed slot.
    server
        .send_frame(us(20), conn, &[5, 0, 0, 0, 0, 4])
        .unwrap();
    let old = client.endpoint();
    drop(client);
    let mut fresh = n.client(1);
    assert_ne!(fresh.endpoint(), old, "identities are never reused");
    assert!(drain(&mut fresh, us(100)).is_empty());
    assert!(n.counts().to_dead_endpoint >= 1, "{:?}", n.counts());
    drain(&mut server, us(100));
    assert_eq!(n.connections(), 0);
}

#[test]
fn a_connection_broken_before_the_server_saw_it_is_announced_then_reported_gone() {
    let n = net();
    let mut server = n.listen(1, us(0)).unwrap();
    let mut client = n.client(1);
    let conn = client.connect(us(0)).unwrap();
    drain(&mut client, us(10));
    // Reset before the server polled its Accepted (it polls at 10 µs).
    n.disconnect_all(us(3));
    let events: Vec<TransportEvent> = drain(&mut server, us(60))
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(
        events,
        vec![
            TransportEvent::Accepted { conn },
            TransportEvent::Disconnected {
                conn,
                reason: DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN)
            }
        ]
    );
}
