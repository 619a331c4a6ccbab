//! The sweep's invariants: each can fail, checked on hand-made truths.
//! (The sweep's scenarios, repro lines, shrinker and generator are tested
//! in `sweep_scenarios.rs`.)

use std::collections::BTreeSet;

use iomsg_core::session::{ClientEvent, DisconnectCause, ServerEvent};
use iomsg_core::transport::ConnId;
use iomsg_core::wire::{Op, RejectReason};
use iomsg_core::workload;
use iomsg_loopback::sim::truth::{ClientSpec, FrameInfo, Owner, Taken, Truth};
use iomsg_loopback::sim::{Invariant, Verdict};

const S: u64 = 0xA11CE;

fn spec(session: u64, replay: bool) -> ClientSpec {
    ClientSpec {
        session,
        server: 0,
        replay,
    }
}

/// One client of session `S`, sns `0..n` submitted.
fn truth(n: u64, replay: bool) -> Truth {
    let mut t = Truth::new(&[spec(S, replay)]);
    for sn in 0..n {
        t.submitted(0, sn, sn);
    }
    t
}

fn data(sn: u64, epoch: u32) -> FrameInfo {
    FrameInfo {
        session: S,
        epoch,
        sn,
        op: Op::Write,
        hello: None,
    }
}

/// Client 0 connects in `epoch` and completes its handshake.
fn established(t: &mut Truth, epoch: u32) {
    t.client_event(0, &ClientEvent::Connecting { epoch, attempt: 1 });
    t.client_event(
        0,
        &ClientEvent::Established {
            epoch,
            instance: 1,
            known: false,
            resume_from: 0,
        },
    );
}

/// Client 0's `Hello` of `epoch` reached instance 1 on `conn`, which bound it.
fn hello(t: &mut Truth, conn: u32, epoch: u32, base_sn: u64, next_sn: u64, replay: bool) {
    let f = FrameInfo {
        session: S,
        epoch,
        sn: 0,
        op: Op::Hello,
        hello: Some((base_sn, next_sn, replay)),
    };
    t.carried(Owner::Client(0), ConnId::new(conn, 0), 1, Some(&f));
    t.conn_bound(0, S, ConnId::new(conn, 0));
}

/// Client 0's sn carried on `conn` and delivered by instance `gen`.
fn carry_and_deliver(t: &mut Truth, conn: u32, gen: u32, sn: u64, epoch: u32) {
    t.carried(
        Owner::Client(0),
        ConnId::new(conn, 0),
        gen,
        Some(&data(sn, epoch)),
    );
    let taken = Taken {
        session: S,
        sn,
        hash: sn,
    };
    t.delivered(gen, 0, Owner::Client(0), Some(ConnId::new(conn, 0)), taken);
}

fn acked(t: &mut Truth, upto: u64) {
    t.client_event(0, &ClientEvent::Acked { upto });
}

/// Session `S`'s `sn`, with bytes of hash `hash`.
fn taken(sn: u64, hash: u64) -> Taken {
    Taken {
        session: S,
        sn,
        hash,
    }
}

fn verdict(t: &Truth) -> Verdict {
    t.verdict()
}

fn only(v: &Verdict, inv: Invariant) {
    assert!(
        v.findings.count(inv) > 0,
        "{inv} not flagged: {:?}",
        v.findings
    );
}

fn none_of(v: &Verdict, inv: Invariant) {
    assert_eq!(v.findings.count(inv), 0, "{inv} flagged: {:?}", v.findings);
}

#[test]
fn a_clean_truth_violates_nothing() {
    let mut t = truth(3, true);
    established(&mut t, 1);
    for sn in 0..3 {
        carry_and_deliver(&mut t, 1, 1, sn, 1);
    }
    acked(&mut t, 3);
    t.client_final(0, 3, [1, 1, 0]);
    let v = verdict(&t);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!((v.delivered_unique, v.acknowledged, v.pending), (3, 3, 0));
}

#[test]
fn pending_fails_when_an_sn_is_neither_delivered_nor_reported() {
    let mut t = truth(2, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    let v = verdict(&t);
    only(&v, Invariant::Pending);
    assert_eq!(v.pending, 1, "sn 1 was never even sent");
}

#[test]
fn not_finished_fails_when_the_run_hit_a_cap() {
    let mut t = truth(0, true);
    t.not_finished("stopped at the step cap".into());
    only(&verdict(&t), Invariant::NotFinished);
}

#[test]
fn lost_with_replay_fails_when_replay_lets_an_sn_go() {
    let mut t = truth(1, true);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..1 });
    only(&verdict(&t), Invariant::LostWithReplay);
    // A client that failed and said so reported it: not lost.
    let mut t = truth(1, true);
    t.client_event(
        0,
        &ClientEvent::Failed(iomsg_core::session::FailReason::EpochExhausted),
    );
    let v = verdict(&t);
    none_of(&v, Invariant::LostWithReplay);
    none_of(&v, Invariant::Pending);
    assert_eq!(v.failed_reported, 1);
}

#[test]
fn acked_undelivered_fails_when_a_client_releases_what_no_instance_delivered() {
    let mut t = truth(2, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    acked(&mut t, 2);
    let v = verdict(&t);
    only(&v, Invariant::AckedUndelivered);
    none_of(&v, Invariant::AckedFromOthersFrames);
    // A known session's resume_from releases too.
    let mut t = truth(2, true);
    t.client_event(
        0,
        &ClientEvent::Established {
            epoch: 1,
            instance: 1,
            known: true,
            resume_from: 2,
        },
    );
    only(&verdict(&t), Invariant::AckedUndelivered);
}

#[test]
fn acked_from_others_frames_fails_when_a_shared_session_steals_the_ack() {
    let mut t = Truth::new(&[spec(S, true), spec(S, true)]);
    t.submitted(0, 0, 0);
    t.submitted(1, 0, 0);
    // Client 1's sn 0 is delivered; client 0's never is, yet it is acked.
    t.carried(Owner::Client(1), ConnId::new(7, 0), 1, Some(&data(0, 1)));
    t.delivered(1, 0, Owner::Client(1), Some(ConnId::new(7, 0)), taken(0, 0));
    acked(&mut t, 1);
    let v = verdict(&t);
    only(&v, Invariant::AckedFromOthersFrames);
    none_of(&v, Invariant::AckedUndelivered);
}

#[test]
fn delivered_twice_by_one_instance_fails() {
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    only(&verdict(&t), Invariant::DeliveredTwiceByOneInstance);
    // Also when the first delivery came from another peer's frame.
    let mut t = truth(1, true);
    t.delivered(1, 0, Owner::Stray, Some(ConnId::new(9, 0)), taken(0, 0));
    t.delivered(1, 0, Owner::Client(0), Some(ConnId::new(1, 0)), taken(0, 0));
    only(&verdict(&t), Invariant::DeliveredTwiceByOneInstance);
}

#[test]
fn unannounced_duplicate_fails_and_an_announced_one_does_not() {
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 2, 2, 0, 2);
    only(&verdict(&t), Invariant::UnannouncedDuplicate);

    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.client_event(
        0,
        &ClientEvent::ServerRestarted {
            previous: Some(1),
            instance: 2,
            unconfirmed: 0..1,
        },
    );
    carry_and_deliver(&mut t, 2, 2, 0, 2);
    // The announcement covers one duplicate, not the next one.
    carry_and_deliver(&mut t, 3, 3, 0, 3);
    let v = verdict(&t);
    assert_eq!(v.findings.count(Invariant::UnannouncedDuplicate), 1);
    assert_eq!(v.deliveries, 3);
}

#[test]
fn a_delivery_its_instance_never_committed_is_undone_with_the_announcement_it_used() {
    // Instance 1 delivers and commits sn 0; the client announces it to
    // instance 2, which delivers it again and crashes before committing;
    // instance 3 delivers it: the repeat instance 2's announcement covered
    // was never kept, so the announcement still covers instance 3's.
    let run = |crash: bool| {
        let mut t = truth(1, true);
        t.set_crash_proof(true);
        carry_and_deliver(&mut t, 1, 1, 0, 1);
        t.committed(0, 1);
        t.client_event(
            0,
            &ClientEvent::ServerRestarted {
                previous: Some(1),
                instance: 2,
                unconfirmed: 0..1,
            },
        );
        carry_and_deliver(&mut t, 2, 2, 0, 2);
        if crash {
            t.crashed(2);
        } else {
            t.committed(0, 2);
        }
        carry_and_deliver(&mut t, 3, 3, 0, 3);
        t.committed(0, 3);
        verdict(&t)
    };
    let v = run(true);
    none_of(&v, Invariant::UnannouncedDuplicate);
    assert_eq!(v.deliveries, 2, "instance 2's delivery was never kept");
    // Kept, it used the announcement: instance 3's is a new duplicate.
    let v = run(false);
    only(&v, Invariant::UnannouncedDuplicate);
    assert_eq!(v.deliveries, 3);
}

#[test]
fn an_announcement_before_the_first_delivery_announces_no_duplicate() {
    // The client announces sn 0 at a reconnect, instance 1 then delivers
    // it, forgets the session, and delivers it again from an old
    // connection's late frames: nothing announced that repeat.
    let mut t = truth(1, true);
    t.client_event(
        0,
        &ClientEvent::ServerRestarted {
            previous: None,
            instance: 1,
            unconfirmed: 0..1,
        },
    );
    carry_and_deliver(&mut t, 2, 1, 0, 2);
    t.forgotten(1, S);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    only(&verdict(&t), Invariant::UnannouncedDuplicate);
}

#[test]
fn delivery_counts_are_exact_past_255() {
    let mut t = truth(1, true);
    for gen in 1..=300 {
        t.client_event(
            0,
            &ClientEvent::ServerRestarted {
                previous: None,
                instance: u64::from(gen),
                unconfirmed: 0..1,
            },
        );
        carry_and_deliver(&mut t, gen, gen, 0, gen);
    }
    let v = verdict(&t);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!(v.deliveries, 300);
    assert_eq!(v.duplicates, 299);
}

#[test]
fn reported_twice_fails_when_an_sn_is_given_up_again() {
    let mut t = truth(2, false);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..2 });
    t.client_event(0, &ClientEvent::NotReplayed { range: 1..2 });
    only(&verdict(&t), Invariant::ReportedTwice);
}

#[test]
fn delivered_after_given_up_fails_with_replay_off() {
    let mut t = truth(1, false);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..1 });
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    only(&verdict(&t), Invariant::DeliveredAfterGivenUp);
}

/// Replay off: sn 1 of 0..3 jumped over on a live connection, given up.
fn live_jump(claim_live: bool) -> Truth {
    let mut t = truth(3, false);
    established(&mut t, 1);
    hello(&mut t, 1, 1, 0, 0, false);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 1, 1, 2, 1);
    if claim_live {
        t.server_event(
            0,
            &ServerEvent::LiveLoss {
                session: S,
                epoch: 1,
                missing: 1..2,
            },
        );
    }
    t.client_event(0, &ClientEvent::NotReplayed { range: 1..2 });
    t
}

#[test]
fn wrong_loss_class_fails_when_a_live_loss_is_reported_in_flight() {
    let v = verdict(&live_jump(false));
    only(&v, Invariant::WrongLossClass);
    assert_eq!(v.lost_live, 1);
    let v = verdict(&live_jump(true));
    none_of(&v, Invariant::WrongLossClass);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
}

#[test]
fn live_loss_undetected_fails_for_a_jump_and_for_a_trailing_drop() {
    only(&verdict(&live_jump(false)), Invariant::LiveLossUndetected);
    // A trailing drop: sn 1 silently dropped, nothing behind it, and the
    // client timed the connection out while it was still up.
    let mut t = truth(2, true);
    established(&mut t, 1);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.silently_dropped(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(1, 1)));
    t.client_event(
        0,
        &ClientEvent::Disconnected {
            epoch: 1,
            cause: DisconnectCause::ReplyTimeout,
        },
    );
    t.reply_timeout(0, 1, |_| true);
    carry_and_deliver(&mut t, 2, 1, 1, 2);
    only(&verdict(&t), Invariant::LiveLossUndetected);
    // The same drop on a connection the network had already broken is in
    // flight at a disconnect, not a live loss.
    let mut t = truth(2, true);
    established(&mut t, 1);
    t.silently_dropped(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(1, 1)));
    t.reply_timeout(0, 1, |_| false);
    carry_and_deliver(&mut t, 2, 1, 0, 2);
    carry_and_deliver(&mut t, 2, 1, 1, 2);
    none_of(&verdict(&t), Invariant::LiveLossUndetected);
}

#[test]
fn live_reclassified_fails_when_a_live_loss_is_later_called_in_flight() {
    let mut t = live_jump(true);
    t.server_event(
        0,
        &ServerEvent::LostInFlight {
            session: S,
            range: 1..2,
        },
    );
    only(&verdict(&t), Invariant::LiveReclassified);
}

#[test]
fn read_mismatch_fails_where_a_crc_would_have_caught_corruption() {
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.read_answered(0, 0, workload::Check::Corrupt { len: 8 });
    let v = verdict(&t);
    only(&v, Invariant::ReadMismatch);
    assert_eq!(v.corrupt, 0);
}

#[test]
fn corrupt_data_is_counted_not_failed_where_no_crc_covered_it() {
    let mut t = truth(2, true);
    t.set_undetectable_corruption(true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    // sn 1's bytes differ from what the client submitted.
    t.carried(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(1, 1)));
    t.delivered(
        1,
        0,
        Owner::Client(0),
        Some(ConnId::new(1, 0)),
        taken(1, 99),
    );
    t.read_answered(0, 0, workload::Check::Corrupt { len: 8 });
    let v = verdict(&t);
    assert_eq!(v.corrupt, 2);
    none_of(&v, Invariant::PayloadMismatch);
    none_of(&v, Invariant::ReadMismatch);
}

#[test]
fn payload_mismatch_fails_where_a_crc_would_have_caught_corruption() {
    let mut t = truth(1, true);
    t.carried(Owner::Client(0), ConnId::new(1, 0), 1, Some(&data(0, 1)));
    t.delivered(
        1,
        0,
        Owner::Client(0),
        Some(ConnId::new(1, 0)),
        taken(0, 12345),
    );
    only(&verdict(&t), Invariant::PayloadMismatch);
}

#[test]
fn client_events_lost_fails_for_dropped_events_and_unexplained_releases() {
    let mut t = truth(2, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    carry_and_deliver(&mut t, 1, 1, 1, 1);
    acked(&mut t, 1);
    t.client_final(0, 2, [0; 3]); // base_sn 2, but no event released sn 1
    only(&verdict(&t), Invariant::ClientEventsLost);
    let mut t = truth(0, true);
    t.client_final(0, 0, [0, 0, 3]); // three Disconnected never seen
    only(&verdict(&t), Invariant::ClientEventsLost);
}

#[test]
fn untraced_delivery_fails_when_no_received_frame_carried_it() {
    let mut t = truth(1, true);
    t.delivered(1, 0, Owner::Unknown, None, taken(0, 0));
    only(&verdict(&t), Invariant::UntracedDelivery);
}

/// Client 0's read `sn` carried on `conn` and handed to instance 1's
/// application.
fn carry_and_deliver_read(t: &mut Truth, conn: u32, sn: u64) {
    t.read_submitted(0, sn);
    let f = FrameInfo {
        op: Op::Read,
        ..data(sn, 1)
    };
    t.carried(Owner::Client(0), ConnId::new(conn, 0), 1, Some(&f));
    t.delivered(
        1,
        0,
        Owner::Client(0),
        Some(ConnId::new(conn, 0)),
        taken(sn, sn),
    );
}

#[test]
fn read_unanswered_fails_when_a_released_read_never_reached_the_application() {
    // Sns 0 (a read) and 1 delivered, both acknowledged, the read's data
    // never handed to the client's application.
    let mut t = truth(2, true);
    established(&mut t, 1);
    carry_and_deliver_read(&mut t, 1, 0);
    carry_and_deliver(&mut t, 1, 1, 1, 1);
    acked(&mut t, 2);
    t.client_final(0, 2, [1, 1, 0]);
    let v = verdict(&t);
    only(&v, Invariant::ReadUnanswered);
    assert_eq!(v.findings.total(), 1, "{:?}", v.findings);
    assert_eq!((v.reads, v.reads_answered), (1, 0));
}

#[test]
fn read_unanswered_holds_for_an_answer_after_the_ack_and_for_a_named_read() {
    // Answered after the ack passed it: the client kept it.
    let mut t = truth(2, true);
    established(&mut t, 1);
    carry_and_deliver_read(&mut t, 1, 0);
    carry_and_deliver(&mut t, 1, 1, 1, 1);
    acked(&mut t, 2);
    t.read_answered(0, 0, workload::Check::Intact);
    t.client_final(0, 2, [1, 1, 0]);
    let v = verdict(&t);
    none_of(&v, Invariant::ReadUnanswered);
    assert_eq!((v.reads, v.reads_answered), (1, 1));
    // Named: given up (NotReplayed), or the client failed.
    let mut t = truth(1, false);
    t.read_submitted(0, 0);
    t.client_event(0, &ClientEvent::NotReplayed { range: 0..1 });
    t.client_final(0, 1, [0; 3]);
    none_of(&verdict(&t), Invariant::ReadUnanswered);
    let mut t = truth(1, true);
    carry_and_deliver_read(&mut t, 1, 0);
    acked(&mut t, 1);
    t.client_event(
        0,
        &ClientEvent::Failed(iomsg_core::session::FailReason::EpochExhausted),
    );
    none_of(&verdict(&t), Invariant::ReadUnanswered);
}

#[test]
fn a_read_asked_again_below_the_ack_is_no_jump_on_its_connection() {
    // Sns 0..3 delivered on connection 1 and acknowledged; a later
    // connection carries the re-asked read 0, then sn 3: nothing was
    // jumped over.
    let mut t = truth(4, true);
    established(&mut t, 1);
    hello(&mut t, 1, 1, 0, 0, true);
    carry_and_deliver_read(&mut t, 1, 0);
    carry_and_deliver(&mut t, 1, 1, 1, 1);
    carry_and_deliver(&mut t, 1, 1, 2, 1);
    acked(&mut t, 3);
    hello(&mut t, 2, 2, 3, 3, true);
    let reask = FrameInfo {
        op: Op::Read,
        ..data(0, 2)
    };
    t.carried(Owner::Client(0), ConnId::new(2, 0), 1, Some(&reask));
    carry_and_deliver(&mut t, 2, 1, 3, 2);
    none_of(&verdict(&t), Invariant::LiveLossUndetected);
}

#[test]
fn buffer_full_while_idle_fails_only_with_nothing_outstanding() {
    let full = iomsg_core::seq::RingFull {
        need: 800,
        used: 700,
        capacity: 1000,
    };
    let mut t = truth(1, true);
    t.refused_for_storage(0, 1, 1, full);
    none_of(&verdict(&t), Invariant::BufferFullWhileIdle);
    t.refused_for_storage(0, 1, 0, full);
    t.refused_for_storage(0, 1, 0, full);
    let v = verdict(&t);
    only(&v, Invariant::BufferFullWhileIdle);
    assert_eq!(
        v.findings.count(Invariant::BufferFullWhileIdle),
        1,
        "once per client"
    );
    assert!(
        v.findings.listed[0].note.contains("800-byte"),
        "{:?}",
        v.findings
    );
}

#[test]
fn a_forgetting_instance_may_deliver_again_only_what_was_announced() {
    // Instance 1 delivered sn 0, then forgot the session.
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.forgotten(1, S);
    carry_and_deliver(&mut t, 2, 1, 0, 2);
    let v = verdict(&t);
    none_of(&v, Invariant::DeliveredTwiceByOneInstance);
    only(&v, Invariant::UnannouncedDuplicate);
    let mut t = truth(1, true);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.forgotten(1, S);
    t.client_event(
        0,
        &ClientEvent::ServerRestarted {
            previous: Some(1),
            instance: 1,
            unconfirmed: 0..1,
        },
    );
    carry_and_deliver(&mut t, 2, 1, 0, 2);
    let v = verdict(&t);
    none_of(&v, Invariant::DeliveredTwiceByOneInstance);
    none_of(&v, Invariant::UnannouncedDuplicate);
}

/// Client 0's sns 0 and 1, delivered by instance 1 of server 0 in two
/// commits and acknowledged; then that server's journal loses its last
/// commit (sn 1's delivery).
fn acknowledged_then_cut() -> Truth {
    let mut t = truth(2, true);
    t.set_crash_proof(true);
    t.set_journal(true);
    t.set_tail_depth(2);
    established(&mut t, 1);
    carry_and_deliver(&mut t, 1, 1, 0, 1);
    t.committed(0, 1);
    carry_and_deliver(&mut t, 1, 1, 1, 1);
    t.committed(0, 1);
    acked(&mut t, 2);
    assert_eq!(t.journal_cut(0, 1), 1, "sn 1's delivery taken back");
    t
}

#[test]
fn state_lost_unnamed_fails_when_a_client_back_after_a_tail_loss_is_not_told() {
    // Back, and not told.
    let mut t = acknowledged_then_cut();
    established(&mut t, 2);
    let v = verdict(&t);
    assert_eq!(v.findings.count(Invariant::StateLostUnnamed), 1);
    assert_eq!(v.findings.listed[0].sns, 1..2, "{:?}", v.findings);
    none_of(&v, Invariant::LostWithReplay);
    // Back, and told.
    let mut t = acknowledged_then_cut();
    t.client_event(
        0,
        &ClientEvent::StateLost {
            instance: 2,
            unknown: 1..2,
        },
    );
    established(&mut t, 2);
    let v = verdict(&t);
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!(v.state_lost, 1);
    // Back, and the sn sent again and delivered: nothing lost.
    let mut t = acknowledged_then_cut();
    established(&mut t, 2);
    carry_and_deliver(&mut t, 2, 2, 1, 2);
    assert!(verdict(&t).findings.is_empty());
    // Gone before the loss: nobody could tell it (counted).
    let v = verdict(&acknowledged_then_cut());
    assert!(v.findings.is_empty(), "{:?}", v.findings);
    assert_eq!(v.state_lost_unreachable, 1);
}

/// Client 0's connection of `epoch` refused for `reason`.
fn refused(t: &mut Truth, epoch: u32, reason: RejectReason) {
    t.client_event(0, &ClientEvent::Connecting { epoch, attempt: 1 });
    let cause = DisconnectCause::Rejected { reason, detail: 7 };
    t.client_event(0, &ClientEvent::Disconnected { epoch, cause });
}

#[test]
fn locked_out_fails_when_a_client_ends_refused_for_good() {
    let with = |steps: &dyn Fn(&mut Truth)| {
        let mut t = truth(0, true);
        t.set_crash_proof(true);
        established(&mut t, 1);
        steps(&mut t);
        verdict(&t)
    };
    let v = with(&|t| {
        refused(t, 2, RejectReason::BadHandshake);
        refused(t, 3, RejectReason::BadHandshake);
    });
    assert_eq!(v.findings.count(Invariant::LockedOut), 1);
    let note = &v.findings.listed[0].note;
    assert!(
        note.contains("last 2 connection attempts") && note.contains("BadHandshake"),
        "{note}"
    );
    assert_eq!(
        with(&|t| refused(t, 2, RejectReason::Rewound))
            .findings
            .count(Invariant::LockedOut),
        1
    );
    // Back in, closed, or refused for a reason that passes: not locked out.
    none_of(
        &with(&|t| {
            refused(t, 2, RejectReason::BadHandshake);
            established(t, 3);
        }),
        Invariant::LockedOut,
    );
    none_of(
        &with(&|t| {
            refused(t, 2, RejectReason::BadHandshake);
            t.client_event(0, &ClientEvent::Closed);
        }),
        Invariant::LockedOut,
    );
    none_of(
        &with(&|t| refused(t, 2, RejectReason::SessionTableFull)),
        Invariant::LockedOut,
    );
    none_of(
        &with(&|t| {
            refused(t, 2, RejectReason::BadHandshake);
            refused(t, 3, RejectReason::SessionTableFull);
        }),
        Invariant::LockedOut,
    );
}

#[test]
fn every_invariant_has_a_failing_test_above() {
    // The names this file's tests flag (delivered-twice-across-crashes,
    // lost-across-crashes, journal-refused and restore-differs: those of
    // the applications' records, in durable.rs), kept in step with
    // Invariant::ALL.
    let tested = [
        "pending",
        "not-finished",
        "lost-with-replay",
        "acked-undelivered",
        "acked-from-others-frames",
        "delivered-twice-by-one-instance",
        "unannounced-duplicate",
        "reported-twice",
        "delivered-after-given-up",
        "wrong-loss-class",
        "live-reclassified",
        "live-loss-undetected",
        "read-mismatch",
        "payload-mismatch",
        "client-events-lost",
        "untraced-delivery",
        "read-unanswered",
        "buffer-full-while-idle",
        "delivered-twice-across-crashes",
        "lost-across-crashes",
        "journal-refused",
        "restore-differs",
        "state-lost-unnamed",
        "locked-out",
    ];
    let all: BTreeSet<&str> = Invariant::ALL.iter().map(|i| i.name()).collect();
    assert_eq!(all, tested.into_iter().collect::<BTreeSet<_>>());
    for name in tested {
        assert_eq!(Invariant::from_name(name).map(|i| i.name()), Some(name));
    }
}
