//! Helpers for the loopback backend's unit tests: a network, connected
//! ports, and every event a port has, with received frames' bytes.

use core::time::Duration;

use iomsg_core::transport::{ConnId, Connector, DisconnectReason, Event, RxToken, Transport};
use iomsg_core::Instant;

use crate::network::{ClientPort, Network, NetworkConfig, ServerPort};

pub(crate) fn us(n: u64) -> Instant {
    Instant::from_micros(n)
}

/// A network of 5 µs latency and 50 µs failure detection.
pub(crate) fn net() -> Network {
    Network::new(NetworkConfig {
        latency: Duration::from_micros(5),
        detect_delay: Duration::from_micros(50),
    })
}

/// A port's event with the frame's length in place of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransportEvent {
    Connected {
        conn: ConnId,
    },
    Accepted {
        conn: ConnId,
    },
    Received {
        conn: ConnId,
        len: usize,
    },
    Disconnected {
        conn: ConnId,
        reason: DisconnectReason,
    },
}

/// Every event a port has at `now`, with received frames' bytes.
pub(crate) fn drain(port: &mut impl Transport, now: Instant) -> Vec<(TransportEvent, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(e) = port.poll(now) {
        out.push(match e {
            Event::Received { conn, frame } => {
                let bytes = frame.consume(|b| b.to_vec());
                let len = bytes.len();
                (TransportEvent::Received { conn, len }, bytes)
            }
            Event::Connected { conn } => (TransportEvent::Connected { conn }, Vec::new()),
            Event::Accepted { conn } => (TransportEvent::Accepted { conn }, Vec::new()),
            Event::Disconnected { conn, reason } => {
                (TransportEvent::Disconnected { conn, reason }, Vec::new())
            }
            _ => panic!("an event kind the loopback network never reports"),
        });
    }
    out
}

/// The bytes of the frames among `events`.
pub(crate) fn frames(events: &[(TransportEvent, Vec<u8>)]) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter(|(e, _)| matches!(e, TransportEvent::Received { .. }))
        .map(|(_, b)| b.clone())
        .collect()
}

/// A client connected to a server listening on address 1, both told.
pub(crate) fn connected(n: &Network) -> (ClientPort, ServerPort, ConnId) {
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
