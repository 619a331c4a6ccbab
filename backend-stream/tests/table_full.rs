//! A server whose connection table is full tells the client why: a client
//! it never let in fails at once naming the full table (unless told to
//! wait for room, then it gets in once a place frees).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Record;
use iomsg_core::session::{DisconnectCause, FailReason};
use iomsg_core::wire::RejectReason;
use iomsg_stream::{Addr, Client, ClientOptions, Error, Server, ServerOptions};

const LIMIT: Duration = Duration::from_secs(30);

/// A server of one connection, served on a thread until told to stop.
fn serve_one() -> (Addr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let options = ServerOptions::default().max_connections(1);
    let mut server = Server::bind("127.0.0.1:0", options, Record::default()).expect("binds");
    let local = server.local_addr().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        server
            .run_until(|_| done.load(Ordering::Relaxed) || started.elapsed() > LIMIT)
            .expect("the server runs");
    });
    (local, stop, thread)
}

#[test]
fn a_client_never_let_in_fails_at_once_naming_the_full_table() {
    let (addr, stop, thread) = serve_one();
    let mut first = Client::connect(&addr, ClientOptions::default()).expect("the first gets in");
    first.send(b"holds the place").expect("send");
    first.flush(LIMIT).expect("acknowledged");
    let started = Instant::now();
    let second = Client::connect(&addr, ClientOptions::default());
    let took = started.elapsed();
    let Err(e) = second else {
        panic!("a second client got into a table of one");
    };
    let full = Error::Failed(FailReason::TableFull {
        size: 1,
        last: DisconnectCause::Rejected {
            reason: RejectReason::SessionTableFull,
            detail: 1,
        },
    });
    assert_eq!(e.to_string(), full.to_string());
    assert!(e.to_string().contains("table of 1 sessions"), "{e}");
    assert!(took < Duration::from_secs(1), "failed only after {took:?}");
    first.close(Duration::from_secs(5)).expect("close");
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("the server thread");
}

#[test]
fn a_client_told_to_wait_for_room_gets_in_once_a_place_frees() {
    let (addr, stop, thread) = serve_one();
    let mut first = Client::connect(&addr, ClientOptions::default()).expect("the first gets in");
    let waiting = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let options = ClientOptions::default()
                .retry_full_table(true)
                .connect_timeout(LIMIT);
            let mut second = Client::connect(&addr, options)?;
            let sn = second.send(b"in at last")?;
            second.wait_acked(sn, LIMIT)?;
            second.close(Duration::from_secs(5))
        })
    };
    // The waiting client is refused a while, then the place frees.
    std::thread::sleep(Duration::from_millis(300));
    first.send(b"leaving").expect("send");
    first.close(Duration::from_secs(5)).expect("close");
    waiting
        .join()
        .expect("the waiting client")
        .expect("got in once the first left");
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("the server thread");
}
