//! The async API over TCP and a Unix socket: every message whose send
//! resolved is among the server stream's deliveries with the same bytes,
//! none twice.

#![cfg(feature = "tokio")]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{reconcile, Taken, TempDir, SIZES};
use iomsg_core::workload::{fill, hash};
use iomsg_stream::tokio::{Client, Server};
use iomsg_stream::ClientEvent;

const MESSAGES: u64 = 400;
const LIMIT: Duration = Duration::from_secs(30);

async fn roundtrip(addr: String) {
    let mut server = Server::bind(addr, Default::default()).await.expect("binds");
    let client = Client::connect(server.local_addr(), Default::default())
        .await
        .expect("connects");
    let session = client.session_id();
    let collector = tokio::spawn(async move {
        let mut taken = Vec::new();
        while taken.len() <= MESSAGES as usize {
            let d = server.next().await.expect("the server runs");
            taken.push(Taken {
                session: d.session,
                sn: d.sn,
                hash: hash(&d.data),
            });
        }
        (taken, server)
    });
    let mut sent = HashMap::new();
    let mut receipts = Vec::new();
    let mut buf = Vec::new();
    for i in 0..MESSAGES {
        buf.resize(SIZES[i as usize % SIZES.len()], 0);
        fill(session, i, &mut buf);
        let receipt = client.submit(&buf).await.expect("submitted");
        sent.insert(receipt.sn(), hash(&buf));
        receipts.push(receipt);
    }
    for receipt in receipts {
        receipt.await.expect("acknowledged");
    }
    // One more, through `send`: resolves once acknowledged.
    let sn = client.send(b"last").await.expect("sent and acknowledged");
    assert_eq!(sn, MESSAGES);
    sent.insert(sn, hash(b"last"));
    assert_eq!(client.acked_below(), MESSAGES + 1);
    // Read only now: the acks wait folded into one event, after the
    // connection's own.
    let events: Vec<ClientEvent> = std::iter::from_fn(|| client.next_event()).collect();
    assert!(
        matches!(
            &events[..],
            [ClientEvent::Connecting { .. }, ClientEvent::Established { .. }, ClientEvent::Acked { upto }]
                if *upto == MESSAGES + 1
        ),
        "{events:?}"
    );
    let (taken, server) = collector.await.expect("collector");
    client.close().await.expect("closes");
    drop(server);
    reconcile(session, &sent, &[taken]).unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_sends_resolve_once_the_server_took_them() {
    tokio::time::timeout(LIMIT, roundtrip("127.0.0.1:0".into()))
        .await
        .expect("within the limit");
}

#[tokio::test(flavor = "current_thread")]
async fn unix_sends_resolve_once_the_server_took_them() {
    let dir = TempDir::new("tokio");
    let addr = format!("unix:{}", dir.0.join("s.sock").display());
    tokio::time::timeout(LIMIT, roundtrip(addr))
        .await
        .expect("within the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_outliving_its_client_resolves_to_dropped() {
    let server = Server::bind("127.0.0.1:0", Default::default())
        .await
        .expect("binds");
    let client = Client::connect(server.local_addr(), Default::default())
        .await
        .expect("connects");
    // No server: nothing will be acknowledged.
    drop(server);
    let receipt = client.submit(b"never acknowledged").await.expect("queued");
    // Already waiting when the client goes.
    let waiting = tokio::spawn(tokio::time::timeout(Duration::from_secs(5), receipt));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let dropped = std::time::Instant::now();
    drop(client);
    let outcome = waiting
        .await
        .expect("the waiting task")
        .expect("the receipt resolves once its client is gone");
    let took = dropped.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "resolved only after {took:?}"
    );
    assert!(
        matches!(outcome, Err(iomsg_stream::Error::Dropped)),
        "{outcome:?}"
    );
}
