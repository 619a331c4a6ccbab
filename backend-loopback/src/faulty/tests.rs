//! Each fault, as the peer of a wrapped loopback port sees it.

use core::cell::RefCell;
use core::time::Duration;
use std::rc::Rc;

use iomsg_core::transport::{ConnId, DisconnectReason, SendError, Transport, TxToken};
use iomsg_core::wire::Op;

use super::{Faults, Faulty};
use crate::fault::{Direction, FaultConfig, FrameFault, ScheduledFault};
use crate::network::{ClientPort, EndpointId, Network, ServerPort, Tap, TapKind};
use crate::testkit::{connected, drain, frames, net, us, TransportEvent};

/// A data frame whose first byte names it.
fn write(i: u8) -> [u8; 6] {
    [i, 0, 0, 0, 0, Op::Write as u8]
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

/// A connected pair whose client side is wrapped with `config`.
fn wrapped(config: FaultConfig) -> (Network, Faults, Faulty<ClientPort>, ServerPort, ConnId) {
    let n = net();
    let (client, server, conn) = connected(&n);
    let faults = Faults::new(config, 3);
    let client = Faulty::new(client, faults.clone(), true);
    (n, faults, client, server, conn)
}

fn send(port: &mut impl Transport, now: u64, conn: ConnId, frame: &[u8]) -> Result<(), SendError> {
    let token = port.transmit(us(now), conn, frame.len())?;
    token.consume(|buf| buf.copy_from_slice(frame));
    Ok(())
}

fn firsts(events: &[(TransportEvent, Vec<u8>)]) -> Vec<u8> {
    frames(events).iter().map(|f| f[0]).collect()
}

#[test]
fn without_faults_the_wrapper_passes_frames_and_capabilities_through() {
    let (_n, faults, mut client, mut server, conn) = wrapped(FaultConfig::default());
    for i in 1..=3 {
        send(&mut client, 20, conn, &write(i)).unwrap();
    }
    assert_eq!(firsts(&drain(&mut server, us(25))), vec![1, 2, 3]);
    assert_eq!(client.capabilities(), client.inner().capabilities());
    assert_eq!(faults.counts().frames, 3);
}

#[test]
fn a_delayed_frame_delays_the_rest_of_its_connection_but_not_others() {
    let mut config = scheduled(0, FrameFault::Delay);
    config.delay = Duration::from_micros(100);
    let (n, faults, mut a, mut server, conn_a) = wrapped(config);
    let mut b = Faulty::new(n.client(1), faults, true);
    let conn_b = iomsg_core::transport::Connector::connect(&mut b, us(10)).unwrap();
    send(&mut a, 20, conn_a, &write(1)).unwrap(); // held until 120
    send(&mut a, 21, conn_a, &write(2)).unwrap(); // kept behind it
    assert_eq!(a.held(conn_a), 2);
    assert_eq!(a.next_release(), Some(us(120)));
    drain(&mut b, us(20));
    send(&mut b, 21, conn_b, &write(9)).unwrap();
    assert_eq!(firsts(&drain(&mut server, us(30))), vec![9], "others go on");
    drain(&mut a, us(120)); // the wrapper releases on its own poll
    assert_eq!(a.held(conn_a), 0);
    assert_eq!(firsts(&drain(&mut server, us(125))), vec![1, 2]);
}

#[test]
fn a_reordered_frame_arrives_after_the_next_depth_frames() {
    let mut config = scheduled(0, FrameFault::Reorder);
    config.reorder_depth = 2;
    let (_n, _f, mut client, mut server, conn) = wrapped(config);
    for i in 1..=4 {
        send(&mut client, 20, conn, &write(i)).unwrap();
    }
    assert_eq!(firsts(&drain(&mut server, us(25))), vec![2, 3, 1, 4]);
}

#[test]
fn a_held_reordered_frame_still_arrives_when_its_sender_closes() {
    let mut config = scheduled(0, FrameFault::Reorder);
    config.reorder_depth = 3;
    let (_n, _f, mut client, mut server, conn) = wrapped(config);
    send(&mut client, 20, conn, &write(1)).unwrap();
    send(&mut client, 20, conn, &write(2)).unwrap();
    client.close(us(21), conn);
    let events = drain(&mut server, us(40));
    assert_eq!(firsts(&events), vec![2, 1]);
    assert!(matches!(
        events.last().map(|e| e.0),
        Some(TransportEvent::Disconnected { .. })
    ));
}

#[test]
fn silent_drop_loses_one_frame_keeps_the_connection_and_tells_the_drop_tap() {
    let (_n, faults, mut client, mut server, conn) = wrapped(scheduled(1, FrameFault::SilentDrop));
    let dropped: Rc<RefCell<Vec<(ConnId, u8)>>> = Rc::default();
    let log = dropped.clone();
    faults.set_drop_tap(Some(Box::new(move |c, f: &[u8]| {
        log.borrow_mut().push((c, f[0]))
    })));
    for i in 1..=3 {
        send(&mut client, 20, conn, &write(i)).unwrap();
    }
    let events = drain(&mut server, us(25));
    assert_eq!(firsts(&events), vec![1, 3]);
    assert!(events
        .iter()
        .all(|(e, _)| !matches!(e, TransportEvent::Disconnected { .. })));
    assert!(
        drain(&mut client, us(25)).is_empty(),
        "the sender hears nothing"
    );
    assert_eq!(*dropped.borrow(), vec![(conn, 2)]);
    assert_eq!(faults.counts().silent_dropped, 1);
}

#[test]
fn drop_loses_the_frame_and_ends_the_connection_for_both_ends() {
    let (n, faults, mut client, mut server, conn) = wrapped(scheduled(1, FrameFault::Drop));
    send(&mut client, 20, conn, &write(1)).unwrap();
    send(&mut client, 20, conn, &write(2)).unwrap();
    // Ended: nothing more goes out on it.
    assert_eq!(
        send(&mut client, 21, conn, &write(3)),
        Err(SendError::NotConnected)
    );
    assert_eq!(
        drain(&mut client, us(21)),
        vec![(
            TransportEvent::Disconnected {
                conn,
                reason: DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN)
            },
            vec![]
        )]
    );
    let events = drain(&mut server, us(70));
    assert_eq!(firsts(&events), vec![1], "the dropped frame never arrives");
    assert!(matches!(
        events.last().map(|e| e.0),
        Some(TransportEvent::Disconnected { .. })
    ));
    assert_eq!(faults.counts().dropped, 1);
    assert_eq!(n.connections(), 0);
}

#[test]
fn disconnect_delivers_the_frame_then_ends_the_connection_for_both_ends() {
    let (n, faults, mut client, mut server, conn) = wrapped(scheduled(0, FrameFault::Disconnect));
    send(&mut client, 20, conn, &write(1)).unwrap();
    assert_eq!(
        send(&mut client, 21, conn, &write(2)),
        Err(SendError::NotConnected)
    );
    let events = drain(&mut server, us(70));
    assert_eq!(firsts(&events), vec![1], "unlike Drop");
    assert!(matches!(
        events.last().map(|e| e.0),
        Some(TransportEvent::Disconnected { .. })
    ));
    assert_eq!(
        drain(&mut client, us(70)),
        vec![(
            TransportEvent::Disconnected {
                conn,
                reason: DisconnectReason::PeerFailed(iomsg_core::transport::Cause::UNKNOWN)
            },
            vec![]
        )]
    );
    assert_eq!(n.connections(), 0);
    assert_eq!(faults.counts().disconnects, 1);
}

#[test]
fn duplicate_sends_twice_and_corrupt_flips_one_bit() {
    let mut config = scheduled(0, FrameFault::Duplicate);
    config.schedule.push(ScheduledFault {
        nth: 1,
        direction: Direction::ToServer,
        data_only: true,
        fault: FrameFault::Corrupt,
    });
    let (_n, faults, mut client, mut server, conn) = wrapped(config);
    send(&mut client, 20, conn, &write(1)).unwrap();
    send(
        &mut client,
        20,
        conn,
        &[2, 0, 0, 0, 0, Op::Write as u8, 0, 0],
    )
    .unwrap();
    let got = frames(&drain(&mut server, us(25)));
    assert_eq!(&got[..2], &[write(1).to_vec(), write(1).to_vec()]);
    let sent = [2, 0, 0, 0, 0, Op::Write as u8, 0, 0];
    let flipped: u32 = got[2]
        .iter()
        .zip(sent)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert_eq!(flipped, 1, "{:?}", got[2]);
    assert_eq!(
        (faults.counts().duplicated, faults.counts().corrupted),
        (1, 1)
    );
}

#[test]
fn a_schedule_towards_clients_hits_the_server_side_wrapper_only() {
    let config = FaultConfig {
        schedule: vec![ScheduledFault {
            nth: 0,
            direction: Direction::ToClient,
            data_only: false,
            fault: FrameFault::SilentDrop,
        }],
        ..FaultConfig::default()
    };
    let n = net();
    let (client, server, conn) = connected(&n);
    let faults = Faults::new(config, 3);
    let mut client = Faulty::new(client, faults.clone(), true);
    let mut server = Faulty::new(server, faults.clone(), false);
    send(&mut client, 20, conn, &write(1)).unwrap();
    send(&mut server, 20, conn, &write(7)).unwrap();
    send(&mut server, 20, conn, &write(8)).unwrap();
    assert_eq!(firsts(&drain(&mut server, us(25))), vec![1]);
    assert_eq!(firsts(&drain(&mut client, us(25))), vec![8]);
}

#[test]
fn the_network_tap_sees_what_servers_receive_and_never_what_was_dropped() {
    let (n, _f, mut client, mut server, conn) = wrapped(scheduled(1, FrameFault::SilentDrop));
    type Seen = Vec<(TapKind, ConnId, EndpointId, EndpointId, u8)>;
    let seen: Rc<RefCell<Seen>> = Rc::default();
    let log = seen.clone();
    n.set_tap(Some(Box::new(move |t: &Tap<'_>| {
        log.borrow_mut()
            .push((t.kind, t.conn, t.client, t.server, t.frame[0]));
    })));
    for i in 1..=3 {
        send(&mut client, 20, conn, &write(i)).unwrap();
    }
    drain(&mut server, us(25));
    send(&mut server, 26, conn, &[9, 0, 0, 0, 0, 4]).unwrap();
    drain(&mut client, us(40));
    let (c, s) = (client.inner().endpoint(), server.endpoint());
    assert_eq!(n.conn_endpoints(conn), Some((c, s)));
    assert_eq!(
        *seen.borrow(),
        vec![
            (TapKind::Received, conn, c, s, 1),
            (TapKind::Received, conn, c, s, 3),
        ],
        "frames to clients are not tapped"
    );
}
