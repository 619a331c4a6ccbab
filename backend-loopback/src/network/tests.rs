//! The network's contract, event by event.

use super::*;
use crate::fault::{Direction, ScheduledFault};
use core::cell::RefCell;
use std::rc::Rc;

fn us(n: u64) -> Instant {
    Instant::from_micros(n)
}

fn net(faults: FaultConfig) -> Network {
    Network::new(NetworkConfig {
        latency: Duration::from_micros(5),
        detect_delay: Duration::from_micros(50),
        seed: 3,
        faults,
    })
}

/// Every event a port has at `now`, with received frames' bytes.
fn drain(port: &mut impl Transport, now: Instant) -> Vec<(TransportEvent, Vec<u8>)> {
    let mut buf = [0u8; 64];
    let mut out = Vec::new();
    while let Some(e) = port.poll(now, &mut buf) {
        let bytes = match e {
            TransportEvent::Received { len, .. } => buf[..len.min(64)].to_vec(),
            _ => Vec::new(),
        };
        out.push((e, bytes));
    }
    out
}

fn frames(events: &[(TransportEvent, Vec<u8>)]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter(|(e, _)| matches!(e, TransportEvent::Received { .. }))
        .map(|(_, b)| b.clone())
        .collect()
}

/// A client connected to a server listening on address 1, both told.
fn connected(n: &Network) -> (ClientPort, ServerPort, ConnId) {
    let mut server = n.listen(1, us(0)).unwrap();
    let mut client = n.client(1);
    let conn = client.connect(us(0)).unwrap();
    assert_eq!(
        drain(&mut server, us(5)),
        vec![(TransportEvent::Accepted { conn }, vec![])]
    );
    assert_eq!(
        drain(&mut client, us(10)),
        vec![(TransportEvent::Connected { conn }, vec![])]
    );
    (client, server, conn)
}

#[test]
fn connect_without_a_listener_fails_after_one_latency() {
    let n = net(FaultConfig::default());
    let mut client = n.client(9);
    let conn = client.connect(us(0)).unwrap();
    assert!(
        drain(&mut client, us(4)).is_empty(),
        "nothing before the latency"
    );
    let reason = DisconnectReason::ConnectFailed;
    assert_eq!(
        drain(&mut client, us(5)),
        vec![(TransportEvent::Disconnected { conn, reason }, vec![])]
    );
    assert_eq!(n.connections(), 0, "forgotten once the client knows");
}

#[test]
fn frames_arrive_in_order_after_the_latency() {
    let n = net(FaultConfig::default());
    let (mut client, mut server, conn) = connected(&n);
    for i in 0..5u8 {
        client.send(us(20), conn, &[i, 0, 0, 0, 0, 3]).unwrap();
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
    let n = net(FaultConfig::default());
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
    let n = net(FaultConfig::default());
    let (mut client, server, conn) = connected(&n);
    client.send(us(20), conn, &[1, 0, 0, 0, 0, 3]).unwrap();
    drop(server); // crash at 20 µs, the frame still on the wire
                  // Sent after the crash, before the client knows: accepted locally, lost.
    assert_eq!(client.send(us(30), conn, &[2, 0, 0, 0, 0, 3]), Ok(()));
    let events = drain(&mut client, us(70));
    let reason = DisconnectReason::PeerFailed;
    assert_eq!(
        events,
        vec![(TransportEvent::Disconnected { conn, reason }, vec![])]
    );
    assert_eq!(
        client.send(us(71), conn, &[3]),
        Err(SendError::NotConnected)
    );
    assert_eq!(n.connections(), 0);
}

#[test]
fn a_graceful_close_delivers_earlier_frames_then_the_close() {
    let n = net(FaultConfig::default());
    let (mut client, mut server, conn) = connected(&n);
    client.send(us(20), conn, &[7, 0, 0, 0, 0, 8]).unwrap();
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
fn a_delayed_frame_delays_the_rest_of_its_connection_but_not_others() {
    let mut faults = FaultConfig {
        schedule: vec![ScheduledFault {
            nth: 0,
            direction: Direction::ToServer,
            data_only: true,
            fault: FrameFault::Delay,
        }],
        ..FaultConfig::default()
    };
    faults.delay = Duration::from_micros(100);
    let n = net(faults);
    let (mut a, mut server, conn_a) = connected(&n);
    let mut b = n.client(1);
    let conn_b = b.connect(us(10)).unwrap();
    let write = |i: u8| [i, 0, 0, 0, 0, Op::Write as u8];
    a.send(us(20), conn_a, &write(1)).unwrap(); // delayed to 125
    a.send(us(21), conn_a, &write(2)).unwrap(); // kept behind it
    drain(&mut b, us(20));
    b.send(us(21), conn_b, &write(9)).unwrap();
    let early = frames(&drain(&mut server, us(30)));
    assert_eq!(
        early,
        vec![write(9).to_vec()],
        "the other connection is not held up"
    );
    let late = frames(&drain(&mut server, us(125)));
    assert_eq!(late, vec![write(1).to_vec(), write(2).to_vec()]);
}

#[test]
fn a_reordered_frame_arrives_after_the_next_depth_frames() {
    let faults = FaultConfig {
        reorder_depth: 2,
        schedule: vec![ScheduledFault {
            nth: 0,
            direction: Direction::ToServer,
            data_only: true,
            fault: FrameFault::Reorder,
        }],
        ..FaultConfig::default()
    };
    let n = net(faults);
    let (mut client, mut server, conn) = connected(&n);
    for i in 1..=4u8 {
        client
            .send(us(20), conn, &[i, 0, 0, 0, 0, Op::Write as u8])
            .unwrap();
    }
    let got: Vec<u8> = frames(&drain(&mut server, us(25)))
        .iter()
        .map(|f| f[0])
        .collect();
    assert_eq!(got, vec![2, 3, 1, 4]);
}

#[test]
fn silent_drop_loses_one_frame_and_keeps_the_connection() {
    let faults = FaultConfig {
        schedule: vec![ScheduledFault {
            nth: 1,
            direction: Direction::ToServer,
            data_only: true,
            fault: FrameFault::SilentDrop,
        }],
        ..FaultConfig::default()
    };
    let n = net(faults);
    let (mut client, mut server, conn) = connected(&n);
    for i in 1..=3u8 {
        client
            .send(us(20), conn, &[i, 0, 0, 0, 0, Op::Write as u8])
            .unwrap();
    }
    let events = drain(&mut server, us(25));
    let got: Vec<u8> = frames(&events).iter().map(|f| f[0]).collect();
    assert_eq!(got, vec![1, 3]);
    assert!(events
        .iter()
        .all(|(e, _)| !matches!(e, TransportEvent::Disconnected { .. })));
    assert_eq!(n.fault_counts().silent_dropped, 1);
}

#[test]
fn drop_fault_resets_the_connection_for_both_ends() {
    let faults = FaultConfig {
        schedule: vec![ScheduledFault {
            nth: 0,
            direction: Direction::ToServer,
            data_only: true,
            fault: FrameFault::Drop,
        }],
        ..FaultConfig::default()
    };
    let n = net(faults);
    let (mut client, mut server, conn) = connected(&n);
    client
        .send(us(20), conn, &[1, 0, 0, 0, 0, Op::Write as u8])
        .unwrap();
    let reason = DisconnectReason::PeerFailed;
    let gone = vec![(TransportEvent::Disconnected { conn, reason }, vec![])];
    assert_eq!(drain(&mut server, us(70)), gone);
    assert_eq!(drain(&mut client, us(70)), gone);
    assert_eq!(n.connections(), 0);
}

#[test]
fn a_frame_larger_than_the_poll_buffer_reports_its_full_length() {
    let n = net(FaultConfig::default());
    let (mut client, mut server, conn) = connected(&n);
    client.send(us(20), conn, &[0xAB; 200]).unwrap();
    let mut small = [0u8; 16];
    assert_eq!(
        server.poll(us(25), &mut small),
        Some(TransportEvent::Received { conn, len: 200 })
    );
    assert_eq!(small, [0xAB; 16]);
}

#[test]
fn endpoints_of_crashed_servers_are_reused_so_restarts_do_not_grow_the_network() {
    let n = net(FaultConfig::default());
    for i in 0..1000u64 {
        let server = n.listen(1, us(i)).unwrap();
        drop(server);
    }
    assert!(n.inner.borrow().endpoints.len() <= 2);
}

fn scheduled(nth: u64, fault: FrameFault) -> FaultConfig {
    FaultConfig {
        schedule: vec![ScheduledFault {
            nth,
            direction: Direction::ToServer,
            data_only: true,
            fault,
        }],
        ..FaultConfig::default()
    }
}

#[test]
fn disconnect_fault_delivers_the_frame_then_breaks_the_connection_for_both_ends() {
    let n = net(scheduled(0, FrameFault::Disconnect));
    let (mut client, mut server, conn) = connected(&n);
    let write = [1, 0, 0, 0, 0, Op::Write as u8];
    client.send(us(20), conn, &write).unwrap();
    assert_eq!(n.conn_status(conn), Some(ConnStatus::Breaking));
    // Sent after the break, before the client heard of it: lost.
    assert_eq!(client.send(us(21), conn, &[2, 0, 0, 0, 0, 3]), Ok(()));
    let reason = DisconnectReason::PeerFailed;
    let events = drain(&mut server, us(70));
    assert_eq!(frames(&events), vec![write.to_vec()], "unlike Drop");
    assert_eq!(
        events.last().map(|e| e.0),
        Some(TransportEvent::Disconnected { conn, reason })
    );
    assert_eq!(
        drain(&mut client, us(70)),
        vec![(TransportEvent::Disconnected { conn, reason }, vec![])]
    );
    assert_eq!(n.connections(), 0);
    assert_eq!(n.fault_counts().disconnects, 1);
}

#[test]
fn drop_fault_loses_the_frame_and_those_in_flight_where_disconnect_delivers_them() {
    let n = net(scheduled(1, FrameFault::Drop));
    let (mut client, mut server, conn) = connected(&n);
    for i in 1..=2u8 {
        client
            .send(us(20), conn, &[i, 0, 0, 0, 0, Op::Write as u8])
            .unwrap();
    }
    assert!(frames(&drain(&mut server, us(70))).is_empty());
    assert_eq!(n.fault_counts().dropped, 1);
    assert_eq!(
        n.counts().discarded,
        1,
        "the frame in flight: {:?}",
        n.counts()
    );
}

#[test]
fn the_tap_sees_what_servers_receive_and_what_is_silently_dropped() {
    let n = net(scheduled(1, FrameFault::SilentDrop));
    type Seen = Vec<(TapKind, ConnId, EndpointId, EndpointId, u8)>;
    let seen: Rc<RefCell<Seen>> = Rc::default();
    let log = seen.clone();
    n.set_tap(Some(Box::new(move |t: &Tap<'_>| {
        log.borrow_mut()
            .push((t.kind, t.conn, t.client, t.server, t.frame[0]));
    })));
    let (mut client, mut server, conn) = connected(&n);
    for i in 1..=3u8 {
        client
            .send(us(20), conn, &[i, 0, 0, 0, 0, Op::Write as u8])
            .unwrap();
    }
    drain(&mut server, us(25));
    server.send(us(26), conn, &[9, 0, 0, 0, 0, 4]).unwrap();
    drain(&mut client, us(40));
    let (c, s) = (client.endpoint(), server.endpoint());
    assert_ne!(c, s);
    assert_eq!(
        *seen.borrow(),
        vec![
            (TapKind::SilentlyDropped, conn, c, s, 2),
            (TapKind::Received, conn, c, s, 1),
            (TapKind::Received, conn, c, s, 3),
        ],
        "frames to clients are not tapped"
    );
}

#[test]
fn late_events_of_a_dropped_client_go_to_a_dead_endpoint_even_when_its_slot_is_reused() {
    let n = net(FaultConfig::default());
    let (client, mut server, conn) = connected(&n);
    assert_eq!(n.conn_status(conn), Some(ConnStatus::Open));
    // A reply is on its way when the client's transport is rebuilt; the
    // new transport takes the freed slot.
    server.send(us(20), conn, &[5, 0, 0, 0, 0, 4]).unwrap();
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
    let n = net(FaultConfig::default());
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
                reason: DisconnectReason::PeerFailed
            }
        ]
    );
}

#[test]
fn a_held_reordered_frame_still_arrives_when_its_sender_closes() {
    let mut faults = scheduled(0, FrameFault::Reorder);
    faults.reorder_depth = 3;
    let n = net(faults);
    let (mut client, mut server, conn) = connected(&n);
    client
        .send(us(20), conn, &[1, 0, 0, 0, 0, Op::Write as u8])
        .unwrap();
    client
        .send(us(20), conn, &[2, 0, 0, 0, 0, Op::Write as u8])
        .unwrap();
    client.close(us(21), conn);
    assert_eq!(n.conn_status(conn), Some(ConnStatus::Closing));
    let events = drain(&mut server, us(40));
    let got: Vec<u8> = frames(&events).iter().map(|f| f[0]).collect();
    assert_eq!(got, vec![2, 1]);
    assert!(matches!(
        events.last().map(|e| e.0),
        Some(TransportEvent::Disconnected { .. })
    ));
}
