//! Journal state that is not what the dead instance had: a restore under
//! eviction and tombstone pressure, a session forgotten and recalled, a
//! journal cut back to an earlier commit, and a read answered before a
//! client crash.

use std::collections::BTreeMap;

use super::*;

/// Room for 2 sessions, 8 connections, a window of 128 sns and 2
/// tombstones: every few sessions evict and forget one.
type Small = ServerCore<2, 8, 3, 2>;

fn small(instance: u64) -> Small {
    let mut cfg = ServerConfig::new(instance);
    cfg.journal = true;
    ServerCore::new(cfg)
}

fn journaled(instance: u64) -> Server {
    let mut cfg = ServerConfig::new(instance);
    cfg.journal = true;
    ServerCore::new(cfg)
}

/// A client of session `id` (its token derived from it).
fn client_of(id: u64) -> Client {
    let mut c = ClientConfig::new(id, id ^ TOKEN);
    c.backoff.jitter_per_mille = 0;
    c.eager = false;
    client(c)
}

/// Every frame `c` wants to send goes to `s` on `conn` (but the sns in
/// `lost`), and the replies on `conn` back to `c`.
fn exchange_with<const A: usize, const B: usize, const C: usize, const D: usize>(
    c: &mut Client,
    s: &mut ServerCore<A, B, C, D>,
    out: &mut Out,
    conn: u32,
    now: Instant,
    lost: &[u64],
) {
    for f in client_frames(c, now) {
        let m = wire::parse(&f).unwrap();
        let data = matches!(m.body, Body::Write { .. } | Body::Read { .. });
        if data && lost.contains(&m.sn) {
            continue;
        }
        serve(s, out, cid(conn), &f, now);
    }
    to_client(c, out, conn, now);
}

/// Both ends see connection `conn` break.
fn cut<const A: usize, const B: usize, const C: usize, const D: usize>(
    c: &mut Client,
    s: &mut ServerCore<A, B, C, D>,
    conn: u32,
    now: Instant,
) {
    s.handle_disconnected(cid(conn));
    let reason = DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN);
    c.handle_disconnected(now, reason);
}

/// The session id of a journal record.
fn session_of(record: &[u8]) -> u64 {
    u64::from_le_bytes(record[8..16].try_into().unwrap())
}

/// The last record of each session in `journal`.
fn latest(journal: &[Vec<u8>]) -> BTreeMap<u64, Vec<u8>> {
    journal.iter().map(|r| (session_of(r), r.clone())).collect()
}

/// Every record `s` holds (table and tombstones), by session.
fn held<const A: usize, const B: usize, const C: usize, const D: usize>(
    s: &ServerCore<A, B, C, D>,
) -> BTreeMap<u64, Vec<u8>> {
    let mut m = BTreeMap::new();
    s.journal_all(|r| {
        m.insert(session_of(r), r.to_vec());
    });
    m
}

/// The sns each session's deliveries cover, across `outs`.
fn delivered_by_session(outs: &[&Out]) -> BTreeMap<u64, Vec<u64>> {
    let mut m: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for out in outs {
        for d in &out.deliveries {
            m.entry(d.session).or_default().push(d.sn);
        }
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

const X: u64 = 0x0100;

#[test]
fn a_restore_of_the_whole_journal_equals_the_dead_instance_under_eviction_and_tombstone_pressure() {
    let (mut a, mut out_a) = (small(INSTANCE_A), Out::default());
    let mut x = client_of(X);
    connect(&mut x, &mut a, &mut out_a, 1, t(0));
    for sn in 0..3 {
        x.submit(Message::Write(&payload(sn, 16))).unwrap();
    }
    exchange_with(&mut x, &mut a, &mut out_a, 1, t(1), &[]);
    assert_eq!(x.base_sn(), 3);
    cut(&mut x, &mut a, 1, t(2));
    // Four sessions come and go: X is evicted, then forgotten.
    for (i, id) in (0x200..0x204u64).enumerate() {
        let conn = 2 + i as u32;
        let now = t(10 + 10 * i as u64);
        let mut y = client_of(id);
        connect(&mut y, &mut a, &mut out_a, conn, now);
        y.submit(Message::Write(&payload(0, 16))).unwrap();
        exchange_with(&mut y, &mut a, &mut out_a, conn, now, &[]);
        cut(&mut y, &mut a, conn, now);
    }
    assert!(out_a
        .events
        .contains(&ServerEvent::Forgotten { session: X }));
    // X comes back: the journal gives its session back (recall), and it
    // goes on with a hole (sns 3 and 4 lost on the way).
    connect(&mut x, &mut a, &mut out_a, 7, t(100));
    assert!(events(&mut x).iter().all(|e| !matches!(
        e,
        ClientEvent::ServerRestarted { .. } | ClientEvent::StateLost { .. }
    )));
    assert_eq!(a.stats().recalled, 1);
    for sn in 3..6 {
        x.submit(Message::Write(&payload(sn, 16))).unwrap();
    }
    exchange_with(&mut x, &mut a, &mut out_a, 7, t(101), &[3, 4]);
    assert_eq!(a.holes(X).collect::<Vec<_>>(), vec![3..5]);

    // A dies; B restores the whole journal, in the order written.
    let mut b = small(INSTANCE_B);
    for r in &out_a.journal {
        b.restore(t(200), r).expect("every record restores");
    }
    let want = latest(&out_a.journal);
    for (id, record) in held(&b) {
        assert_eq!(
            Some(&record),
            want.get(&id),
            "session {id:#x} restored from an older record"
        );
    }
    assert_eq!(
        b.holes(X).collect::<Vec<_>>(),
        vec![3..5],
        "X with its hole"
    );

    // X resumes on B as it would have on A: nothing twice, nothing lost.
    cut(&mut x, &mut a, 7, t(201));
    let mut out_b = Out {
        journal: out_a.journal.clone(),
        ..Out::default()
    };
    connect(&mut x, &mut b, &mut out_b, 1, t(210));
    let ev = events(&mut x);
    assert!(unconfirmed(&ev).is_empty(), "{ev:?}");
    for _ in 0..3 {
        exchange_with(&mut x, &mut b, &mut out_b, 1, t(211), &[]);
    }
    assert_eq!(x.outstanding(), 0);
    let all = delivered_by_session(&[&out_a, &out_b]);
    assert_eq!(all[&X], (0..6).collect::<Vec<_>>(), "each sn of X once");
}

#[test]
fn a_session_forgotten_past_the_tombstones_is_recalled_and_nothing_is_delivered_twice() {
    let (mut a, mut out_a) = (small(INSTANCE_A), Out::default());
    let mut x = client_of(X);
    connect(&mut x, &mut a, &mut out_a, 1, t(0));
    for sn in 0..4 {
        x.submit(Message::Write(&payload(sn, 16))).unwrap();
    }
    // Delivered, but the completions die with the connection.
    for f in client_frames(&mut x, t(1)) {
        serve(&mut a, &mut out_a, cid(1), &f, t(1));
    }
    out_a.take();
    cut(&mut x, &mut a, 1, t(2));
    for (i, id) in (0x300..0x304u64).enumerate() {
        let conn = 2 + i as u32;
        let mut y = client_of(id);
        connect(&mut y, &mut a, &mut out_a, conn, t(10 + i as u64));
        cut(&mut y, &mut a, conn, t(10 + i as u64));
    }
    assert!(out_a
        .events
        .contains(&ServerEvent::Forgotten { session: X }));
    connect(&mut x, &mut a, &mut out_a, 9, t(50));
    let ev = events(&mut x);
    assert!(unconfirmed(&ev).is_empty(), "{ev:?}");
    assert!(ev.contains(&ClientEvent::Acked { upto: 4 }), "{ev:?}");
    exchange_with(&mut x, &mut a, &mut out_a, 9, t(51), &[]);
    let all = delivered_by_session(&[&out_a]);
    assert_eq!(all[&X], vec![0, 1, 2, 3], "each once, not again");
}

/// A client that sent 12 writes to a journaled A: 0..10 acknowledged, 10
/// and 11 delivered with their completions lost; and A's journal.
fn acknowledged_then_killed() -> (Client, Out) {
    let (mut c, mut a, mut out_a) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 6);
    exchange(&mut c, &mut a, &mut out_a, 1, t(1));
    submit_writes(&mut c, 4);
    exchange(&mut c, &mut a, &mut out_a, 1, t(2));
    assert_eq!(c.base_sn(), 10);
    submit_writes(&mut c, 2);
    to_server(&mut a, &mut out_a, 1, &client_frames(&mut c, t(3)), t(3));
    out_a.take();
    c.handle_disconnected(
        t(4),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    events(&mut c);
    (c, out_a)
}

#[test]
fn a_journal_cut_back_to_an_earlier_commit_names_what_it_lost_and_the_client_goes_on() {
    let (mut c, out_a) = acknowledged_then_killed();
    // The journal loses everything after the first batch that acked 0..6
    // (a power cut under a lazy sync, an older backup restored).
    let mut b = cut_back_at_6(&out_a);
    let mut out_b = Out::default();
    connect(&mut c, &mut b, &mut out_b, 1, t(50));
    let ev = events(&mut c);
    assert!(
        ev.contains(&ClientEvent::StateLost {
            instance: INSTANCE_B,
            unknown: 6..10
        }),
        "the client names the acknowledged sns B cannot vouch for: {ev:?}"
    );
    assert_eq!(unconfirmed(&ev), vec![10..12], "and what may come twice");
    assert_eq!(c.stats().state_lost, 4);
    assert!(out_b.events.contains(&ServerEvent::StateLost {
        session: SESSION,
        range: 6..10
    }));
    assert_eq!(b.stats().state_lost, 4);
    // It goes on: the replays and new writes are delivered and acked.
    submit_writes(&mut c, 2);
    for _ in 0..2 {
        exchange(&mut c, &mut b, &mut out_b, 1, t(51));
    }
    assert_eq!(out_b.delivered(), vec![10, 11, 12, 13]);
    assert_eq!(c.outstanding(), 0);
    assert_eq!(c.base_sn(), 14);
}

#[test]
fn a_journal_cut_back_below_every_ack_with_nothing_outstanding_still_names_the_loss() {
    let (mut c, mut a, mut out_a) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 5);
    exchange(&mut c, &mut a, &mut out_a, 1, t(1));
    assert_eq!(c.outstanding(), 0);
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    events(&mut c);
    // Only the Hello's record survived.
    let mut b = journaled(INSTANCE_B);
    b.restore(t(0), &out_a.journal[0]).unwrap();
    let mut out_b = Out::default();
    connect(&mut c, &mut b, &mut out_b, 1, t(10));
    let ev = events(&mut c);
    assert!(ev.contains(&ClientEvent::StateLost {
        instance: INSTANCE_B,
        unknown: 0..5
    }));
    assert!(unconfirmed(&ev).iter().all(Range::is_empty), "{ev:?}");
}

#[test]
fn a_hello_behind_the_point_of_a_session_this_instance_serves_is_still_refused() {
    let (mut c, mut s, mut out) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    exchange(&mut c, &mut s, &mut out, 1, t(1));
    s.handle_disconnected(cid(1));
    // This instance acknowledged 0..3 itself: a base past that is a
    // client's mistake, not lost state.
    serve(&mut s, &mut out, cid(2), &hello_frame(5, 7, 9), t(2));
    assert_eq!(out.last_reject(), Some((RejectReason::BadHandshake, 3)));
    assert_eq!(s.stats().state_lost, 0);
}

#[test]
fn a_restore_without_room_for_a_session_with_holes_drops_its_older_state() {
    // A table of one session (heapless tables hold at least 2).
    type One = ServerCore<2, 4, 3, 2>;
    let record = |id: u64, cum: u64, holes: bool| {
        // A server that delivered sns 0..cum of session `id`, and sn
        // cum + 1 past a hole when `holes`.
        let mut s: One = {
            let mut cfg = ServerConfig::new(9);
            cfg.journal = true;
            ServerCore::new(cfg)
        };
        let mut out = Out::default();
        let hello = IoMsg {
            session: id,
            ..msg(
                1,
                0,
                0,
                Body::Hello {
                    base_sn: 0,
                    next_sn: 0,
                    token: TOKEN,
                    window: 128,
                    replay: true,
                },
            )
        };
        serve(&mut s, &mut out, cid(1), &frame(&hello), t(0));
        let sns: Vec<u64> = if holes {
            (0..cum).chain([cum + 1]).collect()
        } else {
            (0..cum).collect()
        };
        for sn in sns {
            let data = payload(sn, 8);
            let w = IoMsg {
                session: id,
                ..msg(1, sn, 0, Body::Write { data: &data })
            };
            serve(&mut s, &mut out, cid(1), &frame(&w), t(0));
        }
        out.journal.last().unwrap().clone()
    };
    let mut s: One = {
        let mut cfg = ServerConfig::new(10);
        cfg.journal = true;
        cfg.max_sessions = 1;
        ServerCore::new(cfg)
    };
    assert_eq!(s.restore(t(0), &record(1, 2, true)), Ok(1));
    assert_eq!(s.restore(t(0), &record(2, 4, false)), Ok(2));
    assert_eq!(s.tomb_count(), 1, "session 2 without holes is a tombstone");
    assert_eq!(
        s.restore(t(0), &record(2, 5, true)),
        Err(JournalError::TableFull { session: 2 })
    );
    assert_eq!(
        (s.session_count(), s.tomb_count()),
        (1, 0),
        "session 2's older tombstone is gone with the refusal"
    );
}

#[test]
fn a_read_answered_before_a_client_crash_is_not_handed_over_again() {
    let (mut c, mut s, mut out) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let request = [7u8; 4];
    assert_eq!(
        c.submit(Message::Read {
            len: 32,
            request: &request
        }),
        Ok(0)
    );
    submit_writes(&mut c, 2);
    exchange(&mut c, &mut s, &mut out, 1, t(1));
    assert_eq!(out.reads.len(), 1, "answered once");
    assert_eq!(c.outstanding(), 0);
    // The process dies before its outbox released sn 0: the new one
    // submits the three again and knows the read was answered.
    let point = ResumePoint::new(0, 5);
    let mut c2 = Client::resume(config(), t(10), [0; STORAGE], point);
    assert_eq!(
        c2.submit(Message::Read {
            len: 32,
            request: &request
        }),
        Ok(0)
    );
    submit_writes(&mut c2, 2);
    assert!(c2.settle_read(0));
    assert!(!c2.settle_read(1), "a write is not a read");
    assert!(!c2.settle_read(0), "settled once");
    s.handle_disconnected(cid(1));
    connect(&mut c2, &mut s, &mut out, 2, t(10));
    for _ in 0..2 {
        exchange(&mut c2, &mut s, &mut out, 2, t(11));
    }
    assert_eq!(out.reads.len(), 1, "not handed over again");
    assert_eq!(c2.outstanding(), 0);
    assert_eq!(c2.base_sn(), 3);
}

/// B restored from `out_a`'s journal up to its record at cumulative
/// point 6 (its last commits lost).
fn cut_back_at_6(out_a: &Out) -> Server {
    let cut_at = out_a
        .journal
        .iter()
        .position(|r| {
            JournalRecord::decode(r, &crate::wire::Crc32c::BUILTIN).is_ok_and(|r| r.cumulative == 6)
        })
        .expect("a record at 6");
    let mut b = journaled(INSTANCE_B);
    for r in &out_a.journal[..=cut_at] {
        b.restore(t(0), r).unwrap();
    }
    b
}

fn state_lost(ev: &[ClientEvent]) -> Vec<Range<u64>> {
    ev.iter()
        .filter_map(|e| match e {
            ClientEvent::StateLost { unknown, .. } => Some(unknown.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lost_state_whose_welcome_is_lost_is_named_by_the_next_welcome() {
    let (mut c, out_a) = acknowledged_then_killed();
    let mut b = cut_back_at_6(&out_a);
    let mut out_b = Out::default();
    // The Welcome that would name 6..10 dies with its connection.
    send_hello(&mut c, &mut b, &mut out_b, 1, t(50));
    out_b.take();
    assert_eq!(b.stats().state_lost, 4, "B took the loss up");
    b.handle_disconnected(cid(1));
    c.handle_disconnected(
        t(51),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    assert!(state_lost(&events(&mut c)).is_empty(), "not told yet");
    connect(&mut c, &mut b, &mut out_b, 2, t(60));
    let ev = events(&mut c);
    assert_eq!(
        state_lost(&ev),
        vec![6..10],
        "named by the next Welcome: {ev:?}"
    );
    // Once named, a later Welcome of the same record says nothing more.
    b.handle_disconnected(cid(2));
    c.handle_disconnected(
        t(61),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    connect(&mut c, &mut b, &mut out_b, 3, t(70));
    assert!(state_lost(&events(&mut c)).is_empty());
}

#[test]
fn a_lost_state_survives_a_crash_of_the_instance_that_took_it_up() {
    let (mut c, out_a) = acknowledged_then_killed();
    let mut b = cut_back_at_6(&out_a);
    let mut out_b = Out::default();
    send_hello(&mut c, &mut b, &mut out_b, 1, t(50));
    // B kept its record of the Hello, and died before its Welcome left.
    out_b.take();
    c.handle_disconnected(
        t(51),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let mut journal = out_a.journal.clone();
    journal.extend(out_b.journal.iter().cloned());
    let mut c3 = journaled(0xC);
    for r in &journal {
        c3.restore(t(0), r).unwrap();
    }
    let mut out_c = Out::default();
    connect(&mut c, &mut c3, &mut out_c, 1, t(60));
    let ev = events(&mut c);
    assert_eq!(state_lost(&ev), vec![6..10], "{ev:?}");
}

#[test]
fn a_session_the_journal_lost_whole_is_named_from_its_start() {
    let (mut c, _out_a) = acknowledged_then_killed();
    // The journal lost every record of the session (a power cut soon
    // after it opened, a journal moved away): B does not know it.
    let (mut b, mut out_b) = (journaled(INSTANCE_B), Out::default());
    connect(&mut c, &mut b, &mut out_b, 1, t(50));
    let ev = events(&mut c);
    assert_eq!(state_lost(&ev), vec![0..10], "{ev:?}");
    assert_eq!(unconfirmed(&ev), vec![10..12]);
    assert!(out_b.events.contains(&ServerEvent::StateLost {
        session: SESSION,
        range: 0..10
    }));
    // Without a journal a server that does not know the session is an
    // ordinary restart: what it may repeat is announced, nothing named.
    let (mut c, _) = acknowledged_then_killed();
    let (mut plain, mut out_p) = (server(INSTANCE_B), Out::default());
    connect(&mut c, &mut plain, &mut out_p, 1, t(50));
    let ev = events(&mut c);
    assert!(state_lost(&ev).is_empty(), "{ev:?}");
    assert_eq!(unconfirmed(&ev), vec![10..12]);
}
