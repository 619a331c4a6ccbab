//! The client driver waits on its transport the right way: a frame the
//! transport refuses has the application sleep on the transport's
//! readiness rather than spin, and connection attempts that fail at once
//! are spaced and carry the session over an outage.

use super::*;

/// The test end, refusing every frame while `block` holds and every
/// connection attempt before `down_until`; counts the readiness calls.
struct Waiting {
    end: End,
    block: bool,
    down_until: Instant,
    /// Connection attempts refused.
    refused: u32,
    /// `arm` calls.
    arms: u32,
}

impl Transport for Waiting {
    type TxToken<'a> = Tx<'a>;
    type RxToken<'a> = Rx<'a>;

    fn capabilities(&self) -> Capabilities {
        self.end.capabilities()
    }
    fn transmit(&mut self, now: Instant, conn: ConnId, len: usize) -> Result<Tx<'_>, SendError> {
        if self.block {
            self.end.blocked += 1;
            return Err(SendError::WouldBlock);
        }
        self.end.transmit(now, conn, len)
    }
    fn poll(&mut self, now: Instant) -> Option<Event<Rx<'_>>> {
        self.end.poll(now)
    }
    fn close(&mut self, now: Instant, conn: ConnId) {
        self.end.close(now, conn);
    }
    fn arm(&mut self) -> Readiness {
        self.arms += 1;
        Readiness::Armed
    }
}

impl Connector for Waiting {
    fn connect(&mut self, now: Instant) -> Result<ConnId, DisconnectReason> {
        if now < self.down_until {
            self.refused += 1;
            // A network that is unreachable: the attempt fails at once.
            return Err(DisconnectReason::ConnectFailed(Cause::UNKNOWN));
        }
        self.end.connect(now)
    }
}

fn pair(block: bool, down_until: Instant) -> (Client<Waiting, 16, Vec<u8>>, TestServer) {
    let net = Rc::new(RefCell::new(Net::default()));
    let waiting = Waiting {
        end: End::new(&net, Side::Client),
        block,
        down_until,
        refused: 0,
        arms: 0,
    };
    // Production defaults.
    let session = ClientSession::new(
        ClientConfig::new(SESSION, 0x70CE),
        Instant::ZERO,
        vec![0; 4096],
    );
    let client = Client::new(waiting, session).unwrap();
    let server = TestServer::with_core(
        End::new(&net, Side::Server),
        ServerCore::new(ServerConfig::new(1)),
    )
    .unwrap();
    (client, server)
}

#[test]
fn a_frame_the_transport_refuses_has_the_application_wait_on_the_transport_not_spin() {
    let (mut client, mut server) = pair(true, Instant::ZERO);
    let mut log = Log::default();
    let mut app = App::new(1);
    client.start(ms(0));
    client.submit(Message::Write(b"x")).unwrap();
    // An application that waits on readiness: poll, then sleep unless
    // there is more to do.
    let mut spins = 0;
    for _ in 0..1000 {
        client.poll(ms(0), &mut log);
        server.poll(ms(0), &mut app);
        match client.arm(ms(0)) {
            Readiness::Pending => spins += 1,
            Readiness::Armed | Readiness::Unsupported => break,
        }
    }
    let refused = client.transport().end.blocked;
    assert!(refused > 0, "the Hello was refused");
    assert!(
        client.transport().arms > 0,
        "the transport was asked to arm ({spins} spins on {refused} WouldBlocks)"
    );
    assert!(spins <= 2, "{spins} spins");
    // Woken with room, the frames go out.
    client.transport_mut().block = false;
    client.poll(ms(1), &mut log);
    assert!(!client.transport().end.sent.is_empty());
}

#[test]
fn a_session_survives_a_ten_second_outage_whose_attempts_fail_at_once() {
    let outage = ms(10_000);
    let (mut client, mut server) = pair(false, outage);
    let mut log = Log::default();
    let mut app = App::new(1);
    client.start(ms(0));
    client.submit(Message::Write(b"x")).unwrap();
    for now in 0..12_000 {
        client.poll(ms(now), &mut log);
        server.poll(ms(now), &mut app);
        if client.session().base_sn() == 1 {
            break;
        }
    }
    let failed: Vec<&ClientEvent> = log
        .events()
        .filter(|e| matches!(e, ClientEvent::Failed(_)))
        .collect();
    assert!(failed.is_empty(), "gave up: {failed:?}");
    assert_eq!(client.session().base_sn(), 1, "the write was acknowledged");
    let refused = client.transport().refused;
    // Spaced by the backoff (10 ms doubling to 500 ms), not a busy loop.
    assert!((15..60).contains(&refused), "{refused} attempts in 10 s");
}
