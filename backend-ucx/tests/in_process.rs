//! Real UCX in one process: faults put in front of the UCX transport, and
//! blocking mode. Loopback device, tcp, bounded in time.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant as Wall};

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, Message, ReadRequest, ServerConfig,
    ServerEvent, ServerHandler,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::{workload, Instant};
use iomsg_loopback::{Direction, FaultConfig, Faults, Faulty, FrameFault, ScheduledFault};
use iomsg_ucx::{UcxConfig, UcxTransport};

/// Loopback device and tcp only, set once, before this process creates
/// any UCX context (UCX's threads read the environment); the tests then
/// run one at a time.
fn loopback_only() -> std::sync::MutexGuard<'static, ()> {
    static ENV: std::sync::Once = std::sync::Once::new();
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    ENV.call_once(|| {
        std::env::set_var("UCX_NET_DEVICES", "lo");
        std::env::set_var("UCX_TLS", "tcp");
        std::env::set_var(iomsg_ucx::REUSE_ADDRESS.0, iomsg_ucx::REUSE_ADDRESS.1);
    });
    guard
}

#[derive(Default)]
struct App {
    taken: BTreeMap<u64, BTreeMap<u64, u64>>,
    events: Vec<ServerEvent>,
}

impl ServerHandler for App {
    fn deliver(&mut self, d: Delivery<'_>) {
        let first = self
            .taken
            .entry(d.session)
            .or_default()
            .insert(d.sn, workload::hash(d.data));
        assert!(first.is_none(), "sn {} taken twice", d.sn);
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        workload::fill(read.session, read.sn, out);
    }
    fn event(&mut self, event: ServerEvent) {
        self.events.push(event);
    }
}

fn clock(start: Wall) -> Instant {
    Instant::from_micros(start.elapsed().as_micros() as u64)
}

fn server() -> (Server<UcxTransport<iomsg_ucx::Accept>>, SocketAddr) {
    let t = UcxTransport::server("127.0.0.1:0".parse().unwrap(), UcxConfig::default()).unwrap();
    let addr = t.local_addr();
    (Server::new(t, ServerConfig::new(1)).unwrap(), addr)
}

#[test]
fn a_frame_the_fault_wrapper_drops_in_front_of_ucx_is_reported_at_once_as_a_live_loss() {
    let _one = loopback_only();
    let (mut server, addr) = server();
    let faults = Faults::new(
        FaultConfig {
            schedule: vec![ScheduledFault {
                nth: 100,
                direction: Direction::ToServer,
                data_only: true,
                fault: FrameFault::SilentDrop,
            }],
            ..FaultConfig::default()
        },
        1,
    );
    let ucx = UcxTransport::client(addr, UcxConfig::default()).unwrap();
    let transport = Faulty::new(ucx, faults.clone(), true);
    let mut config = ClientConfig::new(5, 6);
    config.reply_timeout = Duration::from_millis(400);
    let session = ClientSession::<256, _>::new(config, Instant::ZERO, vec![0u8; 256 * 64]);
    let mut client = Client::new(transport, session).unwrap();
    let start = Wall::now();
    client.start(clock(start));
    let mut app = App::default();
    let mut buf = [0u8; 64];
    let mut submitted = BTreeMap::new();
    let mut live_loss_at = None;
    while client.session().base_sn() < 1000 && start.elapsed() < Duration::from_secs(30) {
        let next = client.session().next_sn();
        if next < 1000 {
            workload::fill(5, next, &mut buf);
            if let Ok(sn) = client.submit(Message::Write(&buf)) {
                submitted.insert(sn, workload::hash(&buf));
            }
        }
        client.poll(clock(start), &mut |_: ClientEvent| {});
        server.poll(clock(start), &mut app);
        if live_loss_at.is_none() {
            let reported = app.events.iter().find_map(|e| match e {
                ServerEvent::LiveLoss { missing, .. } => Some(missing.clone()),
                _ => None,
            });
            if let Some(missing) = reported {
                live_loss_at = Some((missing, client.session().sent_sn()));
            }
        }
    }
    assert_eq!(faults.counts().silent_dropped, 1);
    let (missing, sent_then) = live_loss_at.expect("no live loss reported");
    assert_eq!(missing, 100..101, "the dropped data frame's sn");
    assert!(sent_then < 1000, "reported while the stream went on");
    assert_eq!(
        app.taken[&5], submitted,
        "the replay filled it: every byte arrived"
    );
}

#[test]
fn in_blocking_mode_a_quiet_pair_sleeps_on_the_event_fds_and_still_delivers_everything() {
    blocking_pair(iomsg_ucx::Api::Tag);
}

#[test]
fn with_active_messages_in_blocking_mode_a_quiet_pair_sleeps_and_still_delivers_everything() {
    blocking_pair(iomsg_ucx::Api::Am);
}

fn blocking_pair(api: iomsg_ucx::Api) {
    let _one = loopback_only();
    let blocking = UcxConfig::default()
        .api(api)
        .mode(iomsg_ucx::WaitMode::Blocking);
    let t = UcxTransport::server("127.0.0.1:0".parse().unwrap(), blocking.clone()).unwrap();
    let addr = t.local_addr();
    let server_fd = t.event_fd().unwrap();
    let mut server: Server<UcxTransport<iomsg_ucx::Accept>> =
        Server::new(t, ServerConfig::new(1)).unwrap();
    let t = UcxTransport::client(addr, blocking).unwrap();
    let client_fd = t.event_fd().unwrap();
    let session =
        ClientSession::<64, _>::new(ClientConfig::new(3, 4), Instant::ZERO, vec![0; 8192]);
    let mut client = Client::new(t, session).unwrap();
    let start = Wall::now();
    client.start(clock(start));
    let mut app = App::default();
    let (mut slept, mut buf) = (0u32, [0u8; 100]);
    while client.session().base_sn() < 2000 && start.elapsed() < Duration::from_secs(20) {
        let next = client.session().next_sn();
        // Bursts with pauses, so that both ends go quiet now and then.
        if next < 2000 && next % 200 != 199 {
            workload::fill(3, next, &mut buf);
            let _ = client.submit(Message::Write(&buf));
        }
        let busy = client.poll(clock(start), &mut |_: ClientEvent| {})
            | server.poll(clock(start), &mut app);
        let now = clock(start);
        if !busy
            && client.arm(now) == iomsg_core::transport::Readiness::Armed
            && server.arm(now) == iomsg_core::transport::Readiness::Armed
        {
            let mut fds = [
                libc::pollfd {
                    fd: client_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: server_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: fds is a live array of two pollfd for the call.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, 10) };
            slept += 1;
        }
        if next % 200 == 199 && client.session().base_sn() >= next {
            // The pause is over once everything so far is acknowledged.
            workload::fill(3, next, &mut buf);
            let _ = client.submit(Message::Write(&buf));
        }
    }
    assert_eq!(client.session().base_sn(), 2000);
    assert_eq!(app.taken[&3].len(), 2000);
    assert!(
        slept > 0,
        "never armed: the blocking mode was not exercised"
    );
}

#[test]
fn heartbeats_keep_a_quiet_connection_up_and_a_silent_peer_is_closed_in_bounded_time() {
    use iomsg_core::transport::{Connector, DisconnectReason, Event, RxToken, Transport, TxToken};
    let _env = loopback_only();
    let live = iomsg_ucx::Liveness {
        interval: Duration::from_millis(20),
        timeout: Duration::from_millis(300),
    };
    let config = UcxConfig::default().liveness(Some(live));
    let mut server = UcxTransport::server("127.0.0.1:0".parse().unwrap(), config.clone()).unwrap();
    let mut client = UcxTransport::client(server.local_addr(), config).unwrap();
    let start = Wall::now();
    client.connect(clock(start)).unwrap();
    let (mut cconn, mut sconn) = (None, None);
    while cconn.is_none() || sconn.is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "no connection");
        if let Some(Event::Connected { conn }) = client.poll(clock(start)) {
            cconn = Some(conn);
        }
        if let Some(Event::Accepted { conn }) = server.poll(clock(start)) {
            sconn = Some(conn);
        }
    }
    // Quiet for more than three timeouts, both ends polling: heartbeats
    // alone keep the connection up, and neither end hears of them.
    let quiet = Wall::now();
    while quiet.elapsed() < Duration::from_secs(1) {
        assert!(client.poll(clock(start)).is_none(), "client had an event");
        assert!(server.poll(clock(start)).is_none(), "server had an event");
    }
    // Still carries a frame, from the client to the server.
    client
        .transmit(clock(start), cconn.unwrap(), 44)
        .unwrap()
        .consume(|b| b.fill(7));
    let sent = Wall::now();
    let got = loop {
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "the frame never came"
        );
        let _ = client.poll(clock(start));
        if let Some(Event::Received { conn, frame }) = server.poll(clock(start)) {
            assert_eq!(Some(conn), sconn);
            break frame.consume(<[u8]>::to_vec);
        }
    };
    assert_eq!(got, vec![7u8; 44]);
    // The client freezes (never polls again): the server closes the
    // connection as silent, no sooner than the timeout and soon after it.
    let frozen = Wall::now();
    let reason = loop {
        assert!(frozen.elapsed() < Duration::from_secs(5), "never noticed");
        match server.poll(clock(start)) {
            Some(Event::Disconnected { conn, reason }) => {
                assert_eq!(Some(conn), sconn);
                break reason;
            }
            Some(_) => panic!("unexpected server event"),
            None => {}
        }
    };
    let noticed = frozen.elapsed();
    assert_eq!(reason, DisconnectReason::PeerSilent);
    assert!(
        noticed >= Duration::from_millis(250) && noticed < Duration::from_secs(2),
        "noticed after {noticed:?}"
    );
}

#[test]
fn frames_emitted_between_polls_arrive_whole_and_in_order_batched_or_alone() {
    use iomsg_core::transport::{Connector, Event, RxToken, Transport, TxToken};
    let _env = loopback_only();
    let config = UcxConfig::default();
    assert!(config.coalesce);
    let mut server = UcxTransport::server("127.0.0.1:0".parse().unwrap(), config.clone()).unwrap();
    let mut client = UcxTransport::client(server.local_addr(), config).unwrap();
    let start = Wall::now();
    let cconn = client.connect(clock(start)).unwrap();
    let mut up = (false, false);
    while !(up.0 && up.1) {
        assert!(start.elapsed() < Duration::from_secs(10), "no connection");
        if let Some(Event::Connected { .. }) = client.poll(clock(start)) {
            up.0 = true;
        }
        if let Some(Event::Accepted { .. }) = server.poll(clock(start)) {
            up.1 = true;
        }
    }
    // Small frames (batched) and large ones (alone, past
    // COALESCE_MAX_FRAME) interleaved, all emitted before the next poll.
    let sizes: Vec<usize> = (0..300)
        .map(|i| match i % 7 {
            0 => iomsg_ucx::transport::COALESCE_MAX_FRAME + 1 + i,
            1 => 1,
            _ => 48 + i * 13,
        })
        .collect();
    let frame =
        |i: usize, len: usize| -> Vec<u8> { (0..len).map(|b| (i * 31 + b) as u8).collect() };
    for (i, &len) in sizes.iter().enumerate() {
        client
            .transmit(clock(start), cconn, len)
            .unwrap()
            .consume(|b| b.copy_from_slice(&frame(i, len)));
    }
    let mut got = Vec::new();
    while got.len() < sizes.len() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "got {}",
            got.len()
        );
        let _ = client.poll(clock(start));
        if let Some(Event::Received { frame, .. }) = server.poll(clock(start)) {
            got.push(frame.consume(<[u8]>::to_vec));
        }
    }
    for (i, (g, &len)) in got.iter().zip(&sizes).enumerate() {
        assert_eq!(g, &frame(i, len), "frame {i}");
    }
    assert_eq!(server.stray_frames(), 0);
}
