//! The server journal and the client's resume point: a restarted server
//! recognises its past, a restarted client goes on with its session, and
//! nothing is delivered twice across the two instances' records.

use super::*;

fn journaled(instance: u64) -> Server {
    let mut cfg = ServerConfig::new(instance);
    cfg.journal = true;
    ServerCore::new(cfg)
}

/// A new instance with every record of `from` restored, in order.
fn restarted(instance: u64, from: &Out) -> Server {
    let mut s = journaled(instance);
    for r in &from.journal {
        s.restore(t(0), r)
            .expect("a record the server wrote restores");
    }
    s
}

fn lose_connection(c: &mut Client, now: Instant) {
    c.handle_disconnected(
        now,
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
}

#[test]
fn without_the_journal_on_nothing_is_handed_over() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 3);
    exchange(&mut c, &mut s, &mut out, 1, t(1));
    assert_eq!(out.delivered(), vec![0, 1, 2]);
    assert!(out.journal.is_empty());
}

#[test]
fn a_restored_server_acknowledges_replays_without_delivering_them() {
    let (mut c, mut a, mut out_a) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 6);
    to_server(&mut a, &mut out_a, 1, &client_frames(&mut c, t(1)), t(1));
    assert_eq!(out_a.delivered(), vec![0, 1, 2, 3, 4, 5]);
    out_a.take(); // the completions are lost: A is killed
    lose_connection(&mut c, t(2));
    events(&mut c);

    let (mut b, mut out_b) = (restarted(INSTANCE_B, &out_a), Out::default());
    assert_eq!(b.stats().restored, out_a.journal.len() as u64);
    assert_eq!(
        b.session_count() + b.tomb_count(),
        1,
        "one session, its last record"
    );
    connect(&mut c, &mut b, &mut out_b, 1, t(50));
    let ev = events(&mut c);
    assert!(
        unconfirmed(&ev).is_empty(),
        "nothing may arrive twice: {ev:?}"
    );
    assert!(ev.contains(&ClientEvent::Established {
        epoch: 2,
        instance: INSTANCE_B,
        known: true,
        resume_from: 6,
    }));
    assert!(ev.contains(&ClientEvent::Acked { upto: 6 }), "{ev:?}");
    assert_eq!(c.stats().possible_duplicates, 0);
    exchange(&mut c, &mut b, &mut out_b, 1, t(51));
    assert!(
        out_b.delivered().is_empty(),
        "B delivered again: {:?}",
        out_b.delivered()
    );
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn a_restored_server_delivers_its_holes_and_only_them() {
    let (mut c, mut a, mut out_a) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 6);
    let frames = client_frames(&mut c, t(1));
    // sns 2 and 3 are lost on the way; 4 and 5 open a hole.
    let kept: Vec<Vec<u8>> = frames
        .into_iter()
        .filter(|f| !matches!(wire::parse(f).unwrap().sn, 2 | 3))
        .collect();
    to_server(&mut a, &mut out_a, 1, &kept, t(1));
    assert_eq!(out_a.delivered(), vec![0, 1, 4, 5]);
    let last = out_a.journal.last().expect("a record");
    let r = JournalRecord::decode(last, &crate::wire::Crc32c::BUILTIN).unwrap();
    assert_eq!((r.cumulative, r.top, r.missing()), (2, 6, 2));
    out_a.take();
    lose_connection(&mut c, t(2));
    events(&mut c);

    let (mut b, mut out_b) = (restarted(INSTANCE_B, &out_a), Out::default());
    assert_eq!(b.holes(SESSION).collect::<Vec<_>>(), vec![2..4]);
    connect(&mut c, &mut b, &mut out_b, 1, t(50));
    let ev = events(&mut c);
    assert!(unconfirmed(&ev).is_empty(), "{ev:?}");
    for _ in 0..3 {
        exchange(&mut c, &mut b, &mut out_b, 1, t(51));
    }
    assert_eq!(out_b.delivered(), vec![2, 3], "B delivers the holes alone");
    let mut all: Vec<u64> = out_a.delivered();
    all.extend(out_b.delivered());
    all.sort_unstable();
    assert_eq!(all, vec![0, 1, 2, 3, 4, 5], "each sn once across instances");
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn a_hello_whose_sns_move_backwards_under_one_token_is_refused_after_a_restore() {
    let (mut c, mut a, mut out_a) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 5);
    exchange(&mut c, &mut a, &mut out_a, 1, t(1));
    let (mut b, mut out_b) = (restarted(INSTANCE_B, &out_a), Out::default());
    // The same id and token, sns from 0 again (a client that lost its
    // outbox), at a later epoch.
    serve(&mut b, &mut out_b, cid(1), &hello_frame(9, 0, 0), t(5));
    assert_eq!(out_b.last_reject(), Some((RejectReason::Rewound, 5)));
    // An old epoch is refused as well.
    serve(&mut b, &mut out_b, cid(2), &hello_frame(1, 0, 5), t(5));
    assert_eq!(out_b.last_reject(), Some((RejectReason::StaleEpoch, 1)));
    assert!(out_b.delivered().is_empty());
}

#[test]
fn a_resumed_client_goes_on_with_its_session_and_nothing_arrives_twice() {
    let (mut c, mut s, mut out) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 4);
    to_server(&mut s, &mut out, 1, &client_frames(&mut c, t(1)), t(1));
    out.take(); // delivered, and the client dies before the completions
    let point = c.resume_point();
    assert_eq!((point.base_sn, point.epoch), (0, 1));
    assert_eq!(point.instance, Some(INSTANCE_A));
    s.handle_disconnected(cid(1));

    // Its outbox gives the new process the point and sns 0..4 again.
    let mut c2 = Client::resume(config(), t(10), [0; STORAGE], point);
    assert_eq!(submit_writes(&mut c2, 4), vec![0, 1, 2, 3]);
    submit_writes(&mut c2, 1);
    connect(&mut c2, &mut s, &mut out, 2, t(10));
    let ev = events(&mut c2);
    assert!(unconfirmed(&ev).is_empty(), "{ev:?}");
    assert!(ev.contains(&ClientEvent::Acked { upto: 4 }), "{ev:?}");
    assert_eq!(c2.epoch(), 2, "epochs go on above the point's");
    exchange(&mut c2, &mut s, &mut out, 2, t(11));
    assert_eq!(out.delivered(), vec![0, 1, 2, 3, 4], "each once");
    assert_eq!(c2.outstanding(), 0);
}

#[test]
fn a_client_resumed_against_a_server_without_its_past_announces_what_may_repeat() {
    let (mut c, mut a, mut out_a) = setup();
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 3);
    to_server(&mut a, &mut out_a, 1, &client_frames(&mut c, t(1)), t(1));
    out_a.take();
    let point = c.resume_point();
    let mut c2 = Client::resume(config(), t(10), [0; STORAGE], point);
    submit_writes(&mut c2, 3);
    // B keeps no journal: it cannot know what A delivered.
    let (mut b, mut out_b) = (server(INSTANCE_B), Out::default());
    connect(&mut c2, &mut b, &mut out_b, 1, t(10));
    assert_eq!(unconfirmed(&events(&mut c2)), vec![0..3]);
}

#[test]
fn a_torn_or_changed_record_is_refused_and_changes_nothing() {
    let (mut c, mut a, mut out_a) = (client(config()), journaled(INSTANCE_A), Out::default());
    connect(&mut c, &mut a, &mut out_a, 1, t(0));
    submit_writes(&mut c, 2);
    exchange(&mut c, &mut a, &mut out_a, 1, t(1));
    let good = out_a.journal.last().unwrap().clone();
    let mut b = journaled(INSTANCE_B);
    let torn = &good[..good.len() - 1];
    assert!(matches!(
        b.restore(t(0), torn),
        Err(JournalError::Truncated { .. })
    ));
    let mut flipped = good.clone();
    flipped[41] ^= 1;
    assert_eq!(b.restore(t(0), &flipped), Err(JournalError::Checksum));
    let mut magic = good.clone();
    magic[0] = b'X';
    assert_eq!(b.restore(t(0), &magic), Err(JournalError::BadMagic));
    let mut version = good.clone();
    version[4] = 9;
    assert_eq!(
        b.restore(t(0), &version),
        Err(JournalError::UnsupportedVersion(9))
    );
    assert_eq!(
        b.restore(t(0), &[]),
        Err(JournalError::Truncated {
            len: 0,
            need: JOURNAL_FIXED
        })
    );
    assert_eq!(b.tomb_count() + b.session_count(), 0);
    assert_eq!(b.restore(t(0), &good), Ok(SESSION));
}
