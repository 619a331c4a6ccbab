//! The transport against raw traffic from a peer of its own kind: strays,
//! oversized messages, stream bytes, stalls, a paused server, a full
//! table, per-connection back-pressure.

use super::*;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

/// One test at a time: they measure this process's memory and run many
/// UCX connections.
static ONE: Mutex<()> = Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn config() -> UcxConfig {
    UcxConfig {
        settings: {
            let mut s = UcxConfig::default().settings;
            s.push(("TLS".into(), "tcp,self".into()));
            s
        },
        ..UcxConfig::default()
    }
}

fn config_for(api: Api) -> UcxConfig {
    UcxConfig { api, ..config() }
}

/// `both!(test)`: `test(api)` as a test on each API, `test_tag` and
/// `test_am`.
macro_rules! both {
    ($name:ident) => {
        mod $name {
            use super::*;
            #[test]
            fn tag() {
                super::$name(Api::Tag);
            }
            #[test]
            fn am() {
                super::$name(Api::Am);
            }
        }
    };
}

fn localhost() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn now() -> Instant {
    Instant::from_micros(0)
}

/// What a poll said, owned.
#[derive(Debug)]
enum Seen {
    Up(ConnId),
    Frame(ConnId, Vec<u8>),
    Gone(ConnId, DisconnectReason),
}

fn poll<R: Role>(t: &mut UcxTransport<R>) -> Option<Seen> {
    match t.poll(now())? {
        Event::Connected { conn } | Event::Accepted { conn } => Some(Seen::Up(conn)),
        Event::Received { conn, frame } => Some(Seen::Frame(conn, frame.consume(|b| b.to_vec()))),
        Event::Disconnected { conn, reason } => Some(Seen::Gone(conn, reason)),
        _ => None,
    }
}

/// Polls both until `until` says done or `limit` passed.
fn run(
    server: &mut UcxTransport<Accept>,
    clients: &mut [&mut UcxTransport<Dial>],
    limit: Duration,
    mut until: impl FnMut(&[Seen], &[Seen]) -> bool,
) -> (Vec<Seen>, Vec<Seen>) {
    let (mut s, mut c) = (Vec::new(), Vec::new());
    let end = Clock::now() + limit;
    while Clock::now() < end && !until(&s, &c) {
        for _ in 0..64 {
            match poll(server) {
                Some(e) => s.push(e),
                None => break,
            }
        }
        for cl in clients.iter_mut() {
            for _ in 0..64 {
                match poll(cl) {
                    Some(e) => c.push(e),
                    None => break,
                }
            }
        }
    }
    (s, c)
}

fn send<R: Role>(t: &mut UcxTransport<R>, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
    let tx = t.transmit(now(), conn, bytes.len())?;
    tx.consume(|b| b.copy_from_slice(bytes));
    Ok(())
}

/// Runs both ends until the client's connection `cid` is up on both;
/// the server's id for it.
fn up(server: &mut UcxTransport<Accept>, c: &mut UcxTransport<Dial>, cid: ConnId) -> ConnId {
    let (s, cs) = run(server, &mut [c], Duration::from_secs(10), |s, c| {
        s.iter().any(|e| matches!(e, Seen::Up(_))) && c.iter().any(|e| matches!(e, Seen::Up(_)))
    });
    assert!(
        cs.iter().any(|e| matches!(e, Seen::Up(i) if *i == cid)),
        "{cs:?}"
    );
    s.iter()
        .find_map(|e| match e {
            Seen::Up(i) => Some(*i),
            _ => None,
        })
        .expect("the server saw the connection come up")
}

/// A connected client and the server's id for it.
fn pair(server: &mut UcxTransport<Accept>, cfg: UcxConfig) -> (UcxTransport<Dial>, ConnId, ConnId) {
    let mut c = UcxTransport::client(server.local_addr(), cfg).unwrap();
    let cid = c.connect(now()).unwrap();
    let sid = up(server, &mut c, cid);
    let srv = server.local_addr();
    assert_eq!(c.peer_addr(cid), Some(srv));
    let from = server
        .peer_addr(sid)
        .expect("the server knows the client's address");
    assert!(from.ip().is_loopback() && from.port() != 0, "{from}");
    (c, cid, sid)
}

/// Sends `bytes` with `tag` (as the tag, or as an active message's
/// header) on the endpoint of `id`, raw.
fn raw_tag(t: &mut UcxTransport<Dial>, id: ConnId, tag: u64, bytes: &[u8]) {
    raw_send(t, id, tag, bytes, 0);
}

/// [`raw_tag`], with an active message's send flags.
fn raw_send(t: &mut UcxTransport<Dial>, id: ConnId, tag: u64, bytes: &[u8], am_flags: u32) {
    let ep = t.conn(id).unwrap().frame_ep();
    let buf = bytes.to_vec();
    let len = buf.len();
    let am = t.config.api == Api::Am;
    t.sending(id, len);
    let op = Op::Send {
        buf,
        conn: id,
        len,
        am_flags,
    };
    let (done, slot) = t.start_with(op, tag.to_le_bytes(), |buf, param, header| {
        if am {
            // SAFETY: ep is live; buf and header stay beside the request
            // until completion.
            unsafe { sys::ucp_am_send_nbx(ep, AM_ID, header, 8, buf, len, param) }
        } else {
            // SAFETY: ep is live; buf stays in its slot until completion.
            unsafe { sys::ucp_tag_send_nbx(ep, buf, len, tag, param) }
        }
    });
    if let Some(status) = done {
        t.finish(slot, status, 0);
    }
}

/// Sends `bytes` on the stream of `id`, raw.
fn raw_stream(t: &mut UcxTransport<Dial>, id: ConnId, bytes: Vec<u8>) {
    let ep = t.conn(id).unwrap().ep;
    let len = bytes.len();
    let (done, slot) = t.start(
        Op::AddrSend {
            conn: id,
            buf: bytes,
        },
        |buf, param| {
            // SAFETY: ep is live; buf stays in its slot until completion.
            unsafe { sys::ucp_stream_send_nbx(ep, buf.cast(), len, param) }
        },
    );
    if let Some(status) = done {
        t.finish(slot, status, len);
    }
}

/// A good client streams 64-byte frames and the server echoes; returns
/// how many echoes came back in `time`.
fn echoes(
    server: &mut UcxTransport<Accept>,
    others: &mut [&mut UcxTransport<Dial>],
    good: &mut UcxTransport<Dial>,
    gid: ConnId,
    time: Duration,
) -> usize {
    let mut n = 0;
    let end = Clock::now() + time;
    while Clock::now() < end {
        let _ = send(good, gid, &[7; 64]);
        for _ in 0..32 {
            match poll(server) {
                Some(Seen::Frame(c, b)) if b.len() == 64 => {
                    let _ = send(server, c, &b);
                }
                Some(_) => {}
                None => break,
            }
        }
        for o in others.iter_mut() {
            while poll(o).is_some() {}
        }
        for _ in 0..32 {
            match poll(good) {
                Some(Seen::Frame(_, _)) => n += 1,
                Some(Seen::Gone(_, r)) => panic!("the good client was closed: {r:?}"),
                Some(_) => {}
                None => break,
            }
        }
    }
    n
}

#[test]
fn keys_are_random_56_bit_and_the_exchange_reads_full_and_bad_messages() {
    let a = random_key().unwrap();
    let b = random_key().unwrap();
    assert!(a != b && a != 0 && a <= KEY_MASK && b <= KEY_MASK);
    assert_eq!(untag(tag(a, KIND_BATCH)), (a, KIND_BATCH));
    assert_eq!(key_message(&a.to_le_bytes()), KeyMessage::Key(a, Api::Tag));
    assert_eq!(
        key_message(&key_bytes(a, Api::Tag)),
        KeyMessage::Key(a, Api::Tag)
    );
    assert_eq!(
        key_message(&key_bytes(a, Api::Am)),
        KeyMessage::Key(a, Api::Am)
    );
    // An active-message end's mark with no key is no key.
    assert_eq!(key_message(&AM_MARK.to_le_bytes()), KeyMessage::Bad);
    assert_eq!(
        key_message(&(FULL_MARK | 1024).to_le_bytes()),
        KeyMessage::Full(1024)
    );
    assert_eq!(key_message(&0u64.to_le_bytes()), KeyMessage::Bad);
    assert_eq!(key_message(&[1, 2, 3]), KeyMessage::Bad);
    assert_eq!(key_message(&(1u64 << 60).to_le_bytes()), KeyMessage::Bad);
    assert_eq!(
        DisconnectReason::TableFull { size: 1024 }.to_string(),
        "the peer refused the connection: connection table full (1024)"
    );
}

#[test]
fn frames_of_every_size_cross_both_ways_on_either_api() {
    let _one = one();
    for api in [Api::Am, Api::Tag] {
        let mut server = UcxTransport::server(localhost(), config_for(api)).unwrap();
        let (mut c, cid, sid) = pair(&mut server, config_for(api));
        let sizes = [0usize, 1, 63, 64, 4096, COALESCE_MAX_FRAME, 40_000, 1 << 20];
        let frame = |i: usize, n: usize| -> Vec<u8> { (0..n).map(|j| (i * 7 + j) as u8).collect() };
        // Several per poll (batched), then each alone.
        for (i, &n) in sizes.iter().enumerate() {
            send(&mut c, cid, &frame(i, n)).unwrap();
            send(&mut server, sid, &frame(i + 100, n)).unwrap();
        }
        let want = sizes.len();
        let (s, cs) = run(
            &mut server,
            &mut [&mut c],
            Duration::from_secs(10),
            |s, c| {
                s.iter().filter(|e| matches!(e, Seen::Frame(..))).count() == want
                    && c.iter().filter(|e| matches!(e, Seen::Frame(..))).count() == want
            },
        );
        let got = |seen: &[Seen]| -> Vec<Vec<u8>> {
            seen.iter()
                .filter_map(|e| match e {
                    Seen::Frame(_, b) => Some(b.clone()),
                    _ => None,
                })
                .collect()
        };
        let server_got = got(&s);
        let client_got = got(&cs);
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(
                server_got.get(i),
                Some(&frame(i, n)),
                "{api}: frame {i} of {n} bytes"
            );
            assert_eq!(
                client_got.get(i),
                Some(&frame(i + 100, n)),
                "{api}: reply {i}"
            );
        }
        let (_, held, _, _) = server.held();
        assert_eq!(held, 0, "{api}: every frame taken, nothing held");
    }
}

#[test]
fn active_messages_go_eagerly_even_when_rendezvous_is_asked_and_one_received_closes_its_sender() {
    let _one = one();
    // Rendezvous from 1 KiB on, in the configuration of both ends: the
    // transport's own messages still go eagerly.
    let cfg = |shared_memory: bool| {
        let mut settings = UcxConfig::default().settings;
        settings.retain(|(n, _)| n != "RNDV_THRESH" && n != "ZCOPY_THRESH");
        settings.push(("RNDV_THRESH".into(), "1k".into()));
        let tls = if shared_memory {
            "tcp,posix,sysv,cma,self"
        } else {
            "tcp,self"
        };
        settings.push(("TLS".into(), tls.into()));
        UcxConfig {
            api: Api::Am,
            shared_memory,
            settings,
            ..UcxConfig::default()
        }
    };
    for shared in [true, false] {
        let mut server = UcxTransport::server(localhost(), cfg(shared)).unwrap();
        let (mut good, gid, _) = pair(&mut server, cfg(shared));
        let sizes = [64 * 1024, 100_000, 1 << 20];
        let frame = |n: usize| -> Vec<u8> { (0..n).map(|j| (j % 251) as u8).collect() };
        for &n in &sizes {
            send(&mut good, gid, &frame(n)).unwrap();
        }
        let (s, _) = run(
            &mut server,
            &mut [&mut good],
            Duration::from_secs(10),
            |s, _| s.iter().filter(|e| matches!(e, Seen::Frame(..))).count() == sizes.len(),
        );
        let got: Vec<&Vec<u8>> = s
            .iter()
            .filter_map(|e| match e {
                Seen::Frame(_, b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(got.len(), sizes.len(), "shm {shared}: {s:?}");
        for (b, &n) in got.iter().zip(&sizes) {
            assert!(**b == frame(n), "shm {shared}: a {n}-byte frame changed");
        }
        assert_eq!(server.rendezvous_refused(), 0, "shm {shared}");
        // A peer that sends a rendezvous is closed; the good one goes on.
        let (mut bad, bid, bad_on_s) = pair(&mut server, cfg(shared));
        let key = bad.conn(bid).unwrap().remote_key;
        raw_send(
            &mut bad,
            bid,
            tag(key, KIND_FRAME),
            &frame(200_000),
            sys::UCP_AM_SEND_FLAG_RNDV,
        );
        let (s, _) = run(
            &mut server,
            &mut [&mut bad, &mut good],
            Duration::from_secs(10),
            |s, _| s.iter().any(|e| matches!(e, Seen::Gone(..))),
        );
        assert!(
            s.iter().any(|e| matches!(e,
                Seen::Gone(id, DisconnectReason::Other(c)) if *id == bad_on_s && *c == RENDEZVOUS)),
            "shm {shared}: {s:?}"
        );
        assert_eq!(server.rendezvous_refused(), 1, "shm {shared}");
        let n = echoes(
            &mut server,
            &mut [&mut bad],
            &mut good,
            gid,
            Duration::from_secs(1),
        );
        assert!(n > 100, "shm {shared}: the good client got {n} echoes");
    }
}

#[test]
fn ends_on_different_apis_fail_to_connect_saying_so() {
    let _one = one();
    for (server_api, client_api) in [(Api::Am, Api::Tag), (Api::Tag, Api::Am)] {
        let mut server = UcxTransport::server(localhost(), config_for(server_api)).unwrap();
        let mut c = UcxTransport::client(server.local_addr(), config_for(client_api)).unwrap();
        let cid = c.connect(now()).unwrap();
        let (_, cs) = run(
            &mut server,
            &mut [&mut c],
            Duration::from_secs(10),
            |_, c| c.iter().any(|e| matches!(e, Seen::Gone(..))),
        );
        assert!(
            cs.iter().any(|e| matches!(e,
                Seen::Gone(id, DisconnectReason::Refused(cause)) if *id == cid && *cause == API_MISMATCH)),
            "client {client_api} to server {server_api}: {cs:?}"
        );
        assert!(!cs.iter().any(|e| matches!(e, Seen::Up(_))), "{cs:?}");
    }
}

#[test]
fn a_close_to_a_peer_that_does_not_read_lingers_no_longer_than_linger() {
    let _one = one();
    let cfg = UcxConfig {
        liveness: None,
        ..config()
    };
    let mut server = UcxTransport::server(localhost(), cfg.clone()).unwrap();
    // Connected, and never polled again: it reads nothing.
    let (_deaf, _, sid) = pair(&mut server, cfg);
    fill_up(&mut server, sid);
    server.close(now(), sid);
    assert_eq!(server.flushing.len(), 1, "the close did not linger");
    let closed = Clock::now();
    while !server.flushing.is_empty() && closed.elapsed() < 3 * LINGER {
        let _ = poll(&mut server);
    }
    let took = closed.elapsed();
    assert!(server.flushing.is_empty(), "still flushing after {took:?}");
    assert!(
        took >= LINGER,
        "closed after {took:?}: the flush cannot have completed"
    );
}

#[test]
fn a_server_paused_past_a_clients_connect_timeout_lives_on() {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config()).unwrap();
    let short = UcxConfig {
        liveness: Some(Liveness {
            interval: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
        }),
        ..config()
    };
    // Clients connect while the server does not run (as if stopped), give
    // up after 1 s, and go; then the server runs again.
    for round in 0..3 {
        let mut c = UcxTransport::client(server.local_addr(), short.clone()).unwrap();
        c.connect(now()).unwrap();
        let end = Clock::now() + Duration::from_millis(1500);
        let mut failed = false;
        while Clock::now() < end {
            if let Some(Seen::Gone(..)) = poll(&mut c) {
                failed = true;
            }
        }
        assert!(failed, "round {round}: the client did not give up");
        drop(c);
        run(&mut server, &mut [], Duration::from_millis(300), |_, _| {
            false
        });
    }
    // Peers that connect and close within 0-20 ms, many times.
    for i in 0..60u64 {
        let mut c = UcxTransport::client(server.local_addr(), config()).unwrap();
        let id = c.connect(now()).unwrap();
        let end = Clock::now() + Duration::from_micros((i * 7919) % 20_000);
        while Clock::now() < end {
            let _ = poll(&mut c);
            let _ = poll(&mut server);
        }
        c.close(now(), id);
        drop(c);
        let _ = poll(&mut server);
    }
    let (mut good, gid, _) = pair(&mut server, config());
    let n = echoes(
        &mut server,
        &mut [],
        &mut good,
        gid,
        Duration::from_millis(500),
    );
    assert!(n > 50, "{n}");
    let (recorded, taken) = server.callback_events();
    assert_eq!(recorded, taken, "callback events lost");
}

#[test]
fn past_the_table_size_connects_fail_at_once_saying_the_table_is_full() {
    let _one = one();
    let (max, total) = (1024, 1100);
    // Both ends in this process: about four descriptors per connection.
    let fds = raise_open_files(8 * total as u64);
    if fds < 6 * total as u64 {
        eprintln!("skipped: {fds} open files allowed (hard limit), {total} connections need more");
        return;
    }
    // Many handshakes at once in one process: a generous silence timeout.
    let slow = UcxConfig {
        liveness: Some(Liveness {
            interval: Duration::from_millis(500),
            timeout: Duration::from_secs(60),
        }),
        ..config()
    };
    let cfg = UcxConfig {
        max_connections: max,
        ..slow.clone()
    };
    let mut server = UcxTransport::server(localhost(), cfg).unwrap();
    let mut client = UcxTransport::client(server.local_addr(), slow).unwrap();
    let ids: Vec<ConnId> = (0..total).map(|_| client.connect(now()).unwrap()).collect();
    let mut up = Vec::new();
    let mut full = 0;
    let end = Clock::now() + Duration::from_secs(60);
    while Clock::now() < end && up.len() + full < total {
        while poll(&mut server).is_some() {}
        for _ in 0..256 {
            match poll(&mut client) {
                Some(Seen::Up(c)) => up.push(c),
                Some(Seen::Gone(_, reason @ DisconnectReason::TableFull { size })) => {
                    assert_eq!(size, max as u64);
                    assert!(reason
                        .to_string()
                        .contains(&format!("connection table full ({max})")));
                    full += 1;
                }
                Some(other) => panic!("{other:?}"),
                None => break,
            }
        }
    }
    assert_eq!((up.len(), full), (max, total - max), "of {}", ids.len());
    // Every one served exchanges a message.
    for &c in &up {
        send(&mut client, c, &[1; 32]).unwrap();
    }
    let mut echoed = 0;
    let end = Clock::now() + Duration::from_secs(30);
    while Clock::now() < end && echoed < max {
        while let Some(e) = poll(&mut server) {
            if let Seen::Frame(c, b) = e {
                send(&mut server, c, &b).unwrap();
            }
        }
        while let Some(e) = poll(&mut client) {
            if let Seen::Frame(..) = e {
                echoed += 1;
            }
        }
    }
    assert_eq!(echoed, max);
    assert_eq!(server.refused(), (total - max) as u64);
}

#[test]
fn a_refused_connect_says_which_ucx_status() {
    let _one = one();
    // A port nothing listens on.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut c = UcxTransport::client(addr, config()).unwrap();
    let reason = match c.connect(now()) {
        Err(r) => r,
        Ok(_) => {
            let end = Clock::now() + Duration::from_secs(10);
            loop {
                assert!(Clock::now() < end, "no failure");
                if let Some(Seen::Gone(_, r)) = poll(&mut c) {
                    break r;
                }
            }
        }
    };
    let DisconnectReason::ConnectFailed(cause) = reason else {
        panic!("{reason:?}")
    };
    eprintln!("refused: {cause}");
    assert!(cause.name.starts_with("UCS_ERR_"), "{cause:?}");
    assert!(!cause.text.is_empty() && cause.code < 0, "{cause:?}");
}

#[test]
fn a_client_whose_server_went_mid_message_connects_again_and_is_served() {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config()).unwrap();
    let (mut c, cid, sid) = pair(&mut server, config());
    // The server sends a 1 MiB frame and goes before it is through: the
    // client holds a receive that will never complete.
    send(&mut server, sid, &vec![4u8; 1 << 20]).unwrap();
    for _ in 0..4 {
        let _ = poll(&mut c);
    }
    server.close(now(), sid);
    let (_, seen) = run(
        &mut server,
        &mut [&mut c],
        Duration::from_secs(10),
        |_, c| c.iter().any(|e| matches!(e, Seen::Gone(..))),
    );
    assert!(
        seen.iter()
            .any(|e| matches!(e, Seen::Gone(id, _) if *id == cid)),
        "{seen:?}"
    );
    // Again: the new connection's frames are not held behind the old one.
    let again = c.connect(now()).unwrap();
    let on_server = up(&mut server, &mut c, again);
    send(&mut server, on_server, b"welcome").unwrap();
    let (_, cs) = run(
        &mut server,
        &mut [&mut c],
        Duration::from_secs(10),
        |_, c| c.iter().any(|e| matches!(e, Seen::Frame(..))),
    );
    assert!(
        cs.iter()
            .any(|e| matches!(e, Seen::Frame(i, b) if *i == again && b == b"welcome")),
        "{cs:?}"
    );
    let (_, held, _, _) = c.held();
    eprintln!("orphaned receives: {:?}", c.orphaned());
    assert!(held < 1 << 20, "the client still holds {held} bytes");
}

#[test]
fn a_bad_key_exchange_closes_that_connection_only() {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config()).unwrap();
    let (mut good, gid, _) = pair(&mut server, config());
    for bad in [
        vec![0u8; 8],
        vec![1, 2, 3],
        (1u64 << 60).to_le_bytes().to_vec(),
    ] {
        // A raw endpoint of the client's worker: it sends `bad` in place
        // of a key, and nothing else.
        let mut raw = UcxTransport::client(server.local_addr(), config()).unwrap();
        let err_arg = Box::new(ErrArg {
            shared: raw.worker.shared_ptr(),
            key: 0,
        });
        let sockaddr = SockAddr::from(server.local_addr());
        let params = dial_mode(&err_arg, sockaddr.as_ucs());
        let mut ep: sys::ucp_ep_h = ptr::null_mut();
        // SAFETY: the worker is live; sockaddr and err_arg outlive the
        // endpoint (closed below, before they drop).
        Status(unsafe { sys::ucp_ep_create(raw.worker.worker, &params, &mut ep) })
            .check()
            .unwrap();
        let len = bad.len();
        let (done, slot) = raw.start(
            Op::AddrSend {
                conn: gid,
                buf: bad,
            },
            |buf, param| {
                // SAFETY: ep is live; buf stays in its slot until completion.
                unsafe { sys::ucp_stream_send_nbx(ep, buf.cast(), len, param) }
            },
        );
        if let Some(status) = done {
            raw.finish(slot, status, len);
        }
        let mut gone = None;
        let end = Clock::now() + Duration::from_secs(5);
        while gone.is_none() && Clock::now() < end {
            raw.drive();
            for _ in 0..16 {
                match poll(&mut server) {
                    Some(Seen::Gone(_, r)) => gone = Some(r),
                    Some(_) => {}
                    None => break,
                }
            }
            let _ = poll(&mut good);
        }
        // A short key waits for its missing bytes: the handshake's
        // deadline (the silence timeout) ends it.
        if len == 8 {
            assert_eq!(gone, Some(DisconnectReason::ConnectFailed(BAD_KEY)));
        }
        let (done, slot) = raw.start(
            Op::Close {
                _err_arg: err_arg,
                force: true,
                refused: false,
            },
            |_, param| {
                // SAFETY: ep is live and closed once.
                unsafe { sys::ucp_ep_close_nbx(ep, param) }
            },
        );
        if let Some(status) = done {
            raw.finish(slot, status, 0);
        }
        drop(raw);
    }
    let n = echoes(
        &mut server,
        &mut [],
        &mut good,
        gid,
        Duration::from_millis(500),
    );
    assert!(n > 50, "{n}");
}

#[test]
fn the_memory_bound_adds_up_the_configured_caps() {
    let c = UcxConfig::default();
    let expected = (64u64 << 20)
        + 1024 * 32 * 1024
        + (64u64 << 20)
        + MAX_FRAME_LEN as u64
        + 256 * 64 * 1024
        + 8 * MAX_FRAME_LEN as u64
        + 512 * 256;
    assert_eq!(c.memory_bound(), expected);
    eprintln!("default memory bound: {} bytes", c.memory_bound());
    let small = UcxConfig {
        max_connections: 16,
        ..UcxConfig::default()
    };
    assert!(small.memory_bound() < 200 << 20);
}

mod isolation;

use isolation::fill_up;
