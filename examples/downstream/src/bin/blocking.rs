//! Sends 1,000 messages to a server in the same process and waits until
//! each is acknowledged: the server's handler took it.
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use iomsg_ucx::{Client, Delivery, Server};

fn main() -> Result<(), iomsg_ucx::Error> {
    let mut server = Server::bind("127.0.0.1:0", Default::default(), |d: Delivery<'_>| {
        assert_eq!(d.data, format!("message {}", d.sn).as_bytes());
    })?;
    let (addr, stop) = (server.local_addr(), Arc::new(AtomicBool::new(false)));
    let stopped = Arc::clone(&stop);
    let serving = std::thread::spawn(move || server.run_until(|_| stopped.load(Relaxed)));

    let mut client = Client::connect(addr, Default::default())?;
    for i in 0..1000 {
        client.send(format!("message {i}").as_bytes())?;
    }
    client.flush(Duration::from_secs(10))?; // every message acknowledged
    println!("{} messages acknowledged", client.acked_below());
    client.close(Duration::from_secs(1))?;
    stop.store(true, Relaxed);
    serving.join().expect("the server thread")
}
