//! One peer affects only itself: frames on guessed keys, oversized
//! messages, stream bytes, senders stalled or dead mid-message, a peer
//! that does not read, and a close after writes.

use super::*;

both!(frames_on_guessed_keys_are_strays_and_disturb_no_other_connection);
fn frames_on_guessed_keys_are_strays_and_disturb_no_other_connection(api: Api) {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config_for(api)).unwrap();
    let (mut good, gid, _) = pair(&mut server, config_for(api));
    let (mut bad, bid, _) = pair(&mut server, config_for(api));
    // Sequential keys, and random ones: none names a connection.
    for k in 0..200u64 {
        raw_tag(&mut bad, bid, tag(k, KIND_FRAME), &[1; 100]);
        raw_tag(
            &mut bad,
            bid,
            tag(random_key().unwrap(), KIND_BATCH),
            &[1; 100],
        );
    }
    let n = echoes(
        &mut server,
        &mut [&mut bad],
        &mut good,
        gid,
        Duration::from_secs(1),
    );
    assert!(n > 100, "the good client got {n} echoes");
    assert!(server.stray_frames() >= 400, "{}", server.stray_frames());
    assert_eq!(server.connections(), 2, "no connection was closed");
}

both!(oversized_messages_are_refused_without_memory_and_close_only_their_sender);
fn oversized_messages_are_refused_without_memory_and_close_only_their_sender(api: Api) {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config_for(api)).unwrap();
    let (mut good, gid, _) = pair(&mut server, config_for(api));
    let (mut bad, bid, bad_on_s) = pair(&mut server, config_for(api));
    let before = rss_kib();
    let big = vec![9u8; 64 << 20];
    // Wrong key: strays, received into nothing.
    for i in 0..16 {
        raw_tag(&mut bad, bid, tag(random_key().unwrap(), KIND_FRAME), &big);
        let t = Clock::now();
        run(
            &mut server,
            &mut [&mut bad, &mut good],
            Duration::from_millis(200),
            |_, _| false,
        );
        eprintln!(
            "round {i}: {:?} rss {} KiB, strays {}, held {:?}",
            t.elapsed(),
            rss_kib(),
            server.stray_frames(),
            server.held()
        );
    }
    let n = echoes(
        &mut server,
        &mut [&mut bad],
        &mut good,
        gid,
        Duration::from_secs(1),
    );
    assert!(n > 100, "the good client got {n} echoes");
    let right = bad.conn(bid).unwrap().remote_key;
    raw_tag(&mut bad, bid, tag(right, KIND_FRAME), &big);
    let (s, _) = run(
        &mut server,
        &mut [&mut bad, &mut good],
        Duration::from_secs(10),
        |s, _| s.iter().any(|e| matches!(e, Seen::Gone(..))),
    );
    assert!(
        s.iter()
            .any(|e| matches!(e, Seen::Gone(id, DisconnectReason::Other(c)) if *c == OVERSIZED && *id == bad_on_s)),
        "{s:?}"
    );
    let n = echoes(
        &mut server,
        &mut [&mut bad],
        &mut good,
        gid,
        Duration::from_secs(1),
    );
    assert!(n > 100, "the good client got {n} echoes after");
    drop(big);
    drop(bad);
    let grew = rss_kib().saturating_sub(before);
    let (_, held, _, pooled) = server.held();
    eprintln!("RSS grew {grew} KiB; server holds {held} + {pooled} bytes");
    assert!(held + pooled < 8 << 20, "held {held} pooled {pooled}");
    assert!(grew < 200 * 1024, "RSS grew {grew} KiB");
}

both!(stream_bytes_after_the_key_exchange_close_their_sender_only);
fn stream_bytes_after_the_key_exchange_close_their_sender_only(api: Api) {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config_for(api)).unwrap();
    let (mut good, gid, _) = pair(&mut server, config_for(api));
    let (mut bad, bid, _) = pair(&mut server, config_for(api));
    raw_stream(&mut bad, bid, vec![0x55; 64 << 20]);
    let (s, _) = run(
        &mut server,
        &mut [&mut bad, &mut good],
        Duration::from_secs(10),
        |s, _| s.iter().any(|e| matches!(e, Seen::Gone(..))),
    );
    assert!(
        s.iter()
            .any(|e| matches!(e, Seen::Gone(_, DisconnectReason::Other(c)) if *c == STREAM_DATA)),
        "{s:?}"
    );
    let n = echoes(
        &mut server,
        &mut [&mut bad],
        &mut good,
        gid,
        Duration::from_secs(1),
    );
    assert!(n > 100, "the good client got {n} echoes");
}

both!(senders_stalled_or_dead_mid_message_hold_back_only_their_own_connections);
fn senders_stalled_or_dead_mid_message_hold_back_only_their_own_connections(api: Api) {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config_for(api)).unwrap();
    let (mut good, gid, _) = pair(&mut server, config_for(api));
    // More stalled senders than any fixed list of held connections: each
    // sends a 1 MiB frame and is not progressed again, so it goes out in
    // part only.
    let mut stalled = Vec::new();
    for _ in 0..20 {
        let (mut c, cid, on_server) = pair(&mut server, config_for(api));
        send(&mut c, cid, &vec![3u8; 1 << 20]).unwrap();
        let _ = poll(&mut c);
        stalled.push((c, on_server));
        // The good client stays heard meanwhile.
        echoes(
            &mut server,
            &mut [],
            &mut good,
            gid,
            Duration::from_millis(50),
        );
    }
    let n = echoes(&mut server, &mut [], &mut good, gid, Duration::from_secs(1));
    assert!(
        n > 100,
        "the good client got {n} echoes behind stalled messages"
    );
    // Their senders go: their receives are cancelled and their buffers
    // released (a receive UCX cannot cancel keeps its buffer until it
    // completes, without holding anyone back).
    drop(stalled);
    let end = Clock::now() + Duration::from_secs(10);
    while server.connections() > 1 && Clock::now() < end {
        echoes(
            &mut server,
            &mut [],
            &mut good,
            gid,
            Duration::from_millis(50),
        );
    }
    assert_eq!(
        server.connections(),
        1,
        "the stalled senders' connections stay"
    );
    let n = echoes(&mut server, &mut [], &mut good, gid, Duration::from_secs(1));
    assert!(n > 100, "the good client got {n} echoes after");
    let (_, held, _, _) = server.held();
    assert!(
        held < 1 << 20,
        "{held} bytes still held for dead connections"
    );
}

#[test]
fn stalled_senders_past_the_receive_memory_give_way_and_the_others_flow() {
    let _one = one();
    let small = UcxConfig {
        recv_bytes: 4 << 20,
        ..config()
    };
    let mut server = UcxTransport::server(localhost(), small).unwrap();
    let (mut good, gid, _) = pair(&mut server, config());
    // Ten senders stall mid-way through 1 MiB frames: together more than
    // the server's 4 MiB of receive memory. Each pushes what its socket
    // takes while the server does not read, and is not progressed again.
    let mut stalled = Vec::new();
    for _ in 0..10 {
        stalled.push(pair(&mut server, config()));
    }
    for (c, cid, _) in &mut stalled {
        send(c, *cid, &vec![3u8; 1 << 20]).unwrap();
    }
    for _ in 0..50 {
        for (c, _, _) in &mut stalled {
            let _ = poll(c);
        }
    }
    let n = echoes(&mut server, &mut [], &mut good, gid, Duration::from_secs(1));
    assert!(n > 100, "the good client got {n} echoes");
    let evicted = server.receive_evictions();
    assert!(
        evicted >= 6,
        "{evicted} stalled senders closed; 10 MiB cannot fit in 4 MiB"
    );
    let (_, held, _, _) = server.held();
    assert!(
        held <= (4 << 20) + (1 << 20),
        "{held} bytes held past the receive memory"
    );
    drop(stalled);
}

both!(a_peer_that_does_not_read_blocks_only_its_own_sends);
fn a_peer_that_does_not_read_blocks_only_its_own_sends(api: Api) {
    let _one = one();
    let cfg = UcxConfig {
        liveness: None,
        ..config_for(api)
    };
    let mut server = UcxTransport::server(localhost(), cfg.clone()).unwrap();
    let (mut good, gid, g_on_s) = pair(&mut server, cfg.clone());
    let (mut deaf, _, d_on_s) = pair(&mut server, cfg);
    let frame = vec![1u8; 1 << 20];
    let mut blocked = false;
    for _ in 0..4096 {
        match send(&mut server, d_on_s, &frame) {
            Ok(()) => {}
            Err(SendError::WouldBlock) => {
                blocked = true;
                break;
            }
            Err(e) => panic!("{e:?}"),
        }
        while poll(&mut server).is_some() {}
    }
    assert!(blocked, "sends to a peer that does not read never blocked");
    // The other connection sends on.
    for _ in 0..100 {
        send(&mut server, g_on_s, &[5; 64]).unwrap();
        while poll(&mut server).is_some() {}
        while poll(&mut good).is_some() {}
    }
    let _ = (gid, &mut deaf);
}

/// Frames of `FRAME` bytes numbered from 0 (the number in the first 4
/// bytes), sent on `id` until the connection's send caps refuse one
/// (its peer not reading meanwhile); returns how many went.
pub(super) fn fill_up(server: &mut UcxTransport<Accept>, id: ConnId) -> u32 {
    const FRAME: usize = 16 * 1024;
    let mut n = 0u32;
    loop {
        let mut frame = vec![0u8; FRAME];
        frame[..4].copy_from_slice(&n.to_le_bytes());
        match send(server, id, &frame) {
            Ok(()) => n += 1,
            Err(SendError::WouldBlock) => return n,
            Err(e) => panic!("{e:?}"),
        }
    }
}

both!(frames_written_before_a_close_reach_the_peer_before_the_close);
/// A server writes frames and closes at once, as after a `Reject` or a
/// `Bye`: every frame reaches the client, in order, before it learns of
/// the close (a force close alone discards what UCX still holds).
fn frames_written_before_a_close_reach_the_peer_before_the_close(api: Api) {
    let _one = one();
    let mut server = UcxTransport::server(localhost(), config_for(api)).unwrap();
    let (mut client, cid, sid) = pair(&mut server, config_for(api));
    let sent = fill_up(&mut server, sid);
    server.close(now(), sid);
    let (_, seen) = run(
        &mut server,
        &mut [&mut client],
        Duration::from_secs(10),
        |_, c| c.iter().any(|e| matches!(e, Seen::Gone(..))),
    );
    let numbers: Vec<u32> = seen
        .iter()
        .filter_map(|e| match e {
            Seen::Frame(c, b) if *c == cid => Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => None,
        })
        .collect();
    assert!(
        numbers.iter().copied().eq(0..sent),
        "the client got {} of {sent} frames before the close",
        numbers.len()
    );
    assert!(
        matches!(seen.last(), Some(Seen::Gone(c, _)) if *c == cid),
        "{:?}",
        seen.last()
    );
    assert!(server.flushing.is_empty());
}
