//! The same with tokio: 1,000 sends resolve once acknowledged, and the
//! server's stream yields each message.
use iomsg_ucx::tokio::{Client, Server};

#[tokio::main]
async fn main() -> Result<(), iomsg_ucx::Error> {
    let mut server = Server::bind("127.0.0.1:0", Default::default()).await?;
    let client = Client::connect(server.local_addr(), Default::default()).await?;
    let mut receipts = Vec::new();
    for i in 0..1000 {
        receipts.push(client.submit(format!("message {i}").as_bytes()).await?);
    }
    for receipt in receipts {
        receipt.await?; // acknowledged: the server took it
    }
    for i in 0..1000 {
        let delivered = server.next().await.expect("the server runs");
        assert_eq!(delivered.data, format!("message {i}").as_bytes());
    }
    println!("{} messages acknowledged", client.acked_below());
    client.close().await
}
