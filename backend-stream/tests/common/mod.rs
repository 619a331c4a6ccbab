//! What the tests share: a server handler that keeps its own record of
//! what it took, a checker that reads only records, and a temp dir.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use iomsg_core::workload::hash;
use iomsg_stream::{Delivery, ReadRequest, ServerEvent, ServerHandler};

/// One delivered message as a server instance recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    pub session: u64,
    pub sn: u64,
    pub hash: u64,
}

/// The handler's own record (ground truth, apart from the protocol's
/// counters), and the events it heard.
#[derive(Clone, Default)]
pub struct Record {
    pub taken: Arc<Mutex<Vec<Taken>>>,
    pub events: Arc<Mutex<Vec<ServerEvent>>>,
}

impl Record {
    pub fn taken(&self) -> Vec<Taken> {
        self.taken.lock().expect("record").clone()
    }
    pub fn events(&self) -> Vec<ServerEvent> {
        self.events.lock().expect("events").clone()
    }
}

impl ServerHandler for Record {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.taken.lock().expect("record").push(Taken {
            session: d.session,
            sn: d.sn,
            hash: hash(d.data),
        });
    }
    fn respond(&mut self, _read: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.lock().expect("events").push(event);
    }
}

/// Checks `sent` (sn -> hash of what the client submitted for `session`)
/// against the server instances' records alone: every sn in some record
/// with the same hash, no record holding an sn twice, no record holding
/// an sn never sent. Returns the number of copies past the first across
/// instances (possible duplicates after restarts), or what is wrong.
pub fn reconcile(
    session: u64,
    sent: &HashMap<u64, u64>,
    instances: &[Vec<Taken>],
) -> Result<usize, String> {
    let mut seen = HashSet::new();
    let mut across = 0;
    for (i, record) in instances.iter().enumerate() {
        let mut within = HashSet::new();
        for t in record.iter().filter(|t| t.session == session) {
            if !within.insert(t.sn) {
                return Err(format!("instance {i} took sn {} twice", t.sn));
            }
            let Some(want) = sent.get(&t.sn) else {
                return Err(format!("instance {i} recorded sn {}, never sent", t.sn));
            };
            if *want != t.hash {
                return Err(format!(
                    "instance {i}: sn {} arrived with other bytes than were sent",
                    t.sn
                ));
            }
            if !seen.insert(t.sn) {
                across += 1;
            }
        }
    }
    let mut lost: Vec<u64> = sent
        .keys()
        .filter(|sn| !seen.contains(sn))
        .copied()
        .collect();
    lost.sort_unstable();
    if !lost.is_empty() {
        return Err(format!(
            "{} sent sns in no record: {:?}",
            lost.len(),
            &lost[..lost.len().min(20)]
        ));
    }
    Ok(across)
}

/// A fresh directory under the system's temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nonce = iomsg_stream::random_u64().expect("random");
        let dir = std::env::temp_dir().join(format!("iomsg-stream-{tag}-{nonce:016x}"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The message sizes the tests cycle through: 1 B to 64 KiB.
pub const SIZES: [usize; 10] = [1, 2, 7, 48, 100, 1000, 4095, 4096, 65535, 65536];
