//! 20,000 messages over TCP on 127.0.0.1 across a server restart (the
//! server stops answering with sns in flight and goes away; a new one
//! binds the same port), with no client event read until the end: the
//! restart's warning is still there and says exactly which sns may have
//! arrived twice, and the thousands of acks are folded into a few events.

mod common;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{reconcile, Record, Taken};
use iomsg_core::workload::{fill, hash};
use iomsg_stream::{Addr, Client, ClientEvent, ClientOptions, Server, ServerOptions};

const MESSAGES: u64 = 20_000;
/// The first instance stops answering once it took this many.
const FREEZE_AT: usize = 2_000;
/// Every this many messages, the client waits for their ack: more than
/// 2,000 acks, well past the 1,024 events a queue once kept.
const PACE: u64 = 8;
/// The longest wait for any one step.
const STEP: Duration = Duration::from_secs(30);

/// Serves on a thread until `done` says so (or `STEP` passed); then
/// stops answering for `frozen` (what comes meanwhile is never
/// acknowledged) and goes away, closing its connections.
fn serve(
    server: Server<Record>,
    done: impl Fn(&Record) -> bool + Send + 'static,
    frozen: Duration,
) -> JoinHandle<()> {
    let mut server = server;
    std::thread::spawn(move || {
        let started = Instant::now();
        server
            .run_until(|r| done(r) || started.elapsed() > STEP)
            .expect("the server runs");
        std::thread::sleep(frozen);
    })
}

/// The sns of `record`, in order; every one of `session`.
fn sns(record: &[Taken], session: u64) -> Vec<u64> {
    let mut sns: Vec<u64> = record
        .iter()
        .map(|t| {
            assert_eq!(t.session, session, "one session only");
            t.sn
        })
        .collect();
    sns.sort_unstable();
    sns
}

#[test]
fn a_restart_warning_outlives_twenty_thousand_unread_acks() {
    let a_record = Record::default();
    let a = Server::bind("127.0.0.1:0", ServerOptions::default(), a_record.clone())
        .expect("the server binds");
    let addr: Addr = a.local_addr().clone();
    let a = {
        let r = a_record.clone();
        serve(
            a,
            move |_| r.taken().len() >= FREEZE_AT,
            Duration::from_millis(300),
        )
    };
    // Instance B binds the same port as soon as A is gone.
    let stop = Arc::new(AtomicBool::new(false));
    let b_record = Record::default();
    let restart = {
        let (addr, stop, record) = (addr.clone(), Arc::clone(&stop), b_record.clone());
        std::thread::spawn(move || {
            a.join().expect("instance A");
            let b = Server::bind(&addr, ServerOptions::default(), record).expect("B binds");
            serve(b, move |_| stop.load(Ordering::Relaxed), Duration::ZERO)
        })
    };

    let options = ClientOptions::default().retry_for(STEP);
    let mut client = Client::connect(&addr, options).expect("the client connects");
    let session = client.session_id();
    let mut sent = HashMap::new();
    let mut buf = [0u8; 100];
    for sn in 0..MESSAGES {
        fill(session, sn, &mut buf);
        assert_eq!(client.send(&buf).expect("send"), sn);
        sent.insert(sn, hash(&buf));
        if sn % PACE == PACE - 1 {
            // Thousands of acks, each its own event before folding.
            client.wait_acked(sn, STEP).expect("acknowledged");
        }
    }
    client.flush(STEP).expect("every message acknowledged");
    let b = restart.join().expect("the restart");
    stop.store(true, Ordering::Relaxed);
    b.join().expect("instance B");
    let (a_taken, b_taken) = (a_record.taken(), b_record.taken());
    assert!(
        a_taken.len() >= FREEZE_AT,
        "instance A took {}",
        a_taken.len()
    );
    reconcile(session, &sent, &[a_taken.clone(), b_taken.clone()])
        .unwrap_or_else(|e| panic!("{e}"));

    let events: Vec<ClientEvent> = std::iter::from_fn(|| client.next_event()).collect();
    let restarts: Vec<Range<u64>> = events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::ServerRestarted { unconfirmed, .. } => Some(unconfirmed.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(restarts.len(), 1, "one restart, told once: {events:?}");
    let unconfirmed = &restarts[0];
    assert!(!unconfirmed.is_empty(), "sns were in flight");
    assert!(unconfirmed.end <= MESSAGES, "{unconfirmed:?}");
    let (a_sns, b_sns) = (sns(&a_taken, session), sns(&b_taken, session));
    assert_eq!(
        b_sns,
        (unconfirmed.start..MESSAGES).collect::<Vec<_>>(),
        "instance B took every sn from the first unconfirmed one on"
    );
    assert!(
        (0..unconfirmed.start).all(|sn| a_sns.binary_search(&sn).is_ok()),
        "instance A took every sn acknowledged before the restart"
    );
    let twice: Vec<u64> = a_sns
        .iter()
        .copied()
        .filter(|sn| b_sns.binary_search(sn).is_ok())
        .collect();
    assert!(
        twice.iter().all(|sn| unconfirmed.contains(sn)),
        "taken by both and not announced: {twice:?} (announced {unconfirmed:?})"
    );

    let acks = events
        .iter()
        .filter(|e| matches!(e, ClientEvent::Acked { .. }))
        .count();
    assert!(acks <= 3, "{acks} Acked events: {events:?}");
    assert!(events.len() < 100, "{} events: {events:?}", events.len());
    let last_ack = events.iter().rev().find_map(|e| match e {
        ClientEvent::Acked { upto } => Some(*upto),
        _ => None,
    });
    assert_eq!(last_ack, Some(MESSAGES), "the last Acked covers every sn");
    assert!(client.events_folded() > 0);
    client.close(Duration::from_secs(5)).expect("close");
}
