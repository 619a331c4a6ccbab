//! A server and a client in one process over a TCP port on 127.0.0.1:
//! ten messages sent, each acknowledged once the server's handler took it.
//!
//!     cargo run -p iomsg-stream --example hello
use std::time::Duration;

use iomsg_stream::{Client, Delivery, Server};

fn main() -> Result<(), iomsg_stream::Error> {
    let handler = |d: Delivery<'_>| {
        println!(
            "server took sn {}: {}",
            d.sn,
            String::from_utf8_lossy(d.data)
        )
    };
    let mut server = Server::bind("127.0.0.1:0", Default::default(), handler)?;
    let addr = server.local_addr().clone();
    let serving = std::thread::spawn(move || server.run_for(Duration::from_secs(2)));
    let mut client = Client::connect(&addr, Default::default())?;
    for i in 0..10 {
        let sn = client.send(format!("message {i}").as_bytes())?;
        client.wait_acked(sn, Duration::from_secs(5))?;
        println!("client: sn {sn} acknowledged");
    }
    client.close(Duration::from_secs(5))?;
    serving.join().expect("the server thread")
}
