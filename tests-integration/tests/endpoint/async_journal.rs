// The async server with a journal (`tokio::Server::bind_keeping`): a
// keeper that keeps a batch and then fails (a crash right after a
// commit: the batch's acknowledgements never leave) halts the server;
// a new one restored from what the keeper kept takes the replays without
// taking anything twice. Judged from the keeper's own record.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iomsg_core::workload;

/// What every instance's keeper kept: each message taken (session, sn,
/// hash) and the latest journal record of each session.
#[derive(Default)]
struct Store {
    taken: Vec<(u64, u64, u64)>,
    latest: HashMap<u64, Vec<u8>>,
}

struct MemoryKeeper {
    store: Arc<Mutex<Store>>,
    /// Fails right after keeping the batch that reaches this many.
    fail_after: Option<usize>,
}

impl Keeper for MemoryKeeper {
    fn commit(&mut self, batch: Batch<'_>) -> std::io::Result<()> {
        let mut store = self.store.lock().unwrap();
        for d in batch.delivered {
            store.taken.push((d.session, d.sn, workload::hash(&d.data)));
        }
        for r in batch.records {
            let session = u64::from_le_bytes(r[8..16].try_into().unwrap());
            store.latest.insert(session, r.clone());
        }
        if self.fail_after.is_some_and(|n| store.taken.len() >= n) {
            // Kept, and then the disk (or the process) is gone.
            return Err(std::io::Error::other("the disk went away after the commit"));
        }
        Ok(())
    }

    fn recall(&mut self, session: u64) -> Option<Vec<u8>> {
        self.store.lock().unwrap().latest.get(&session).cloned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_that_fails_after_a_commit_halts_the_server_and_nothing_is_taken_twice() {
    prepare();
    let store = Arc::new(Mutex::new(Store::default()));
    let keeper = |fail_after| MemoryKeeper {
        store: Arc::clone(&store),
        fail_after,
    };
    let no_records: [Vec<u8>; 0] = [];
    let mut a = Server::bind_keeping(
        "127.0.0.1:0",
        ServerOptions::default(),
        keeper(Some(400)),
        no_records,
    )
    .await
    .unwrap();
    let addr = a.local_addr();
    let options = ClientOptions::default().retry_for(Duration::from_secs(20));
    let client = Arc::new(Client::connect(addr.clone(), options).await.unwrap());
    let session = client.session_id();
    let total = 1000u64;
    let sender = {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            let mut sent = BTreeMap::new();
            let mut receipts = Vec::new();
            for i in 0..total {
                let mut data = vec![0u8; 64 + (i % 7) as usize * 100];
                workload::fill(session, i, &mut data);
                sent.insert(i, workload::hash(&data));
                receipts.push(client.submit(&data).await.unwrap());
            }
            for r in receipts {
                r.await.unwrap();
            }
            sent
        })
    };
    // A's stream ends once it halted; what reached it was kept before.
    let mut streamed = 0;
    while let Some(d) = a.next().await {
        assert_eq!(d.session, session);
        streamed += 1;
    }
    let why = a
        .halted()
        .expect("the stream ends only when the server halts");
    assert!(why.contains("the disk went away"), "{why}");
    let kept_by_a = store.lock().unwrap().taken.len();
    assert!(kept_by_a >= 400);
    assert!(
        streamed < kept_by_a,
        "the failed batch never reached the stream"
    );
    drop(a);
    let records: Vec<Vec<u8>> = store.lock().unwrap().latest.values().cloned().collect();
    let mut b = Server::bind_keeping(addr, ServerOptions::default(), keeper(None), records)
        .await
        .unwrap();
    let taking = tokio::spawn(async move { while b.next().await.is_some() {} });
    let sent = tokio::time::timeout(Duration::from_secs(60), sender)
        .await
        .expect("every message acknowledged in time")
        .unwrap();
    taking.abort();
    let store = store.lock().unwrap();
    let mut taken: BTreeMap<u64, u64> = BTreeMap::new();
    for &(s, sn, hash) in &store.taken {
        assert_eq!(s, session);
        assert!(
            taken.insert(sn, hash).is_none(),
            "sn {sn} kept twice across the halt"
        );
    }
    assert_eq!(taken, sent, "every sn kept once, with its bytes");
}
