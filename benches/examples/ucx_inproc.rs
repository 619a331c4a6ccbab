//! The full protocol over UCX in one thread: a client streaming writes to
//! a server, both drivers polled in turn, on one UCX API and link. For
//! instruction counts under callgrind, which time figures on this
//! machine cannot give (both ends and UCX on one core, no busy peer to
//! wait for: every poll does work or finds the other end's).
//!
//! ```text
//! ucx_inproc am|tag tcp|shm SIZE COUNT
//! ```
//!
//! Prints the messages, their bytes and the wall time. The connection and
//! a warm-up of 10,000 messages come first; then `measured` streams COUNT
//! more. Under `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='*measured*'` the instructions counted are those of
//! the COUNT messages alone, both ends and UCX together.

use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, Message, ReadRequest, ServerConfig,
    ServerEvent, ServerHandler,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::Instant;
use iomsg_ucx::{Accept, Api, UcxConfig, UcxTransport};

const WINDOW: usize = 1024;

#[derive(Default)]
struct Count {
    taken: u64,
    bytes: u64,
}

impl ServerHandler for Count {
    fn deliver(&mut self, d: Delivery<'_>) {
        self.taken += 1;
        self.bytes += d.data.len() as u64;
    }
    fn respond(&mut self, _: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
    fn event(&mut self, _: ServerEvent) {}
}

fn clock(start: Wall) -> Instant {
    Instant::from_micros(u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ucx_inproc am|tag tcp|shm SIZE COUNT";
    let [api, link, size, count] = args.as_slice() else {
        return Err(usage.into());
    };
    let api: Api = api.parse()?;
    let shared_memory = match link.as_str() {
        "tcp" => false,
        "shm" => true,
        _ => return Err(usage.into()),
    };
    let size: usize = size.parse().map_err(|_| usage)?;
    let count: u64 = count.parse().map_err(|_| usage)?;
    let tls = if shared_memory {
        "tcp,posix,sysv,cma,self"
    } else {
        "tcp"
    };
    let config = UcxConfig::default()
        .api(api)
        .shared_memory(shared_memory)
        .setting("TLS", tls)
        .setting("NET_DEVICES", "lo");
    let t = UcxTransport::server(
        "127.0.0.1:0".parse().map_err(|_| "address")?,
        config.clone(),
    )
    .map_err(|e| e.to_string())?;
    let addr = t.local_addr();
    let mut server_config = ServerConfig::new(1);
    server_config.crc = iomsg_ucx::crc32c_provider();
    let mut server: Server<UcxTransport<Accept>> =
        Server::new(t, server_config).map_err(|e| format!("{e:?}"))?;
    let t = UcxTransport::client(addr, config).map_err(|e| e.to_string())?;
    let session = ClientSession::<WINDOW, _>::new(
        {
            let mut c = ClientConfig::new(11, 12);
            c.crc = iomsg_ucx::crc32c_provider();
            c
        },
        Instant::ZERO,
        vec![0u8; WINDOW * size.max(8) + size],
    );
    let mut client = Client::new(t, session).map_err(|e| format!("{e:?}"))?;
    let start = Wall::now();
    client.start(clock(start));
    let mut app = Count::default();
    let buf = vec![0x3c; size];
    const WARM: u64 = 10_000;
    stream(&mut client, &mut server, &mut app, &buf, WARM, start)?;
    let (taken, bytes, t0) = (app.taken, app.bytes, Wall::now());
    measured(
        &mut client,
        &mut server,
        &mut app,
        &buf,
        WARM + count,
        start,
    )?;
    let secs = t0.elapsed().as_secs_f64();
    let n = app.taken - taken;
    println!(
        "{n} messages, {} bytes, {secs:.3} s ({:.0} msg/s)",
        app.bytes - bytes,
        n as f64 / secs
    );
    Ok(())
}

type ClientEnd = Client<UcxTransport<iomsg_ucx::Dial>, WINDOW, Vec<u8>>;
type ServerEnd = Server<UcxTransport<Accept>>;

/// Streams writes until `end` are acknowledged.
fn stream(
    client: &mut ClientEnd,
    server: &mut ServerEnd,
    app: &mut Count,
    buf: &[u8],
    end: u64,
    start: Wall,
) -> Result<(), String> {
    while client.session().base_sn() < end {
        if start.elapsed() > Duration::from_secs(600) {
            return Err(format!("stuck at {}", client.session().base_sn()));
        }
        while client.session().next_sn() < end && client.submit(Message::StreamWrite(buf)).is_ok() {
        }
        client.poll(clock(start), &mut |_: ClientEvent| {});
        server.poll(clock(start), app);
    }
    Ok(())
}

/// [`stream`], under its own name for callgrind's `--toggle-collect`.
#[inline(never)]
fn measured(
    client: &mut ClientEnd,
    server: &mut ServerEnd,
    app: &mut Count,
    buf: &[u8],
    end: u64,
    start: Wall,
) -> Result<(), String> {
    stream(client, server, app, buf, end, start)
}
