//! Exactly once across crashes of either side: the durable sweep passes
//! under small tables and journals that lose their last commits, finds
//! each defect planted in what the journal gives back and names it, the
//! restore property compares a restored table with the dead instance's,
//! and the applications' records (the ledger) flag each of their
//! invariants.

use core::time::Duration;

use iomsg_core::session::{ClientEvent, JournalRecord, JOURNAL_FIXED, JOURNAL_VERSION};
use iomsg_core::wire::Crc32c;
use iomsg_loopback::sim::journal::{raise_cumulative, Journal};
use iomsg_loopback::sim::ledger::{Ledger, Took};
use iomsg_loopback::sim::{
    self, CrashPlan, Durability, Findings, Invariant, KillEvent, KillOn, RestoreDefect, Scenario,
    TailLoss, Violation, Workload,
};
use iomsg_loopback::sweep::{self, repro, Outcome, Profile};
use iomsg_loopback::FaultConfig;

/// Runs of each durable sweep below (debug builds run them in a few
/// seconds each).
const RUNS: u64 = 24;

/// The durable sweep's scenarios of the tests, with `defect` planted.
fn durable_scenarios(defect: Option<RestoreDefect>) -> impl Iterator<Item = Scenario> {
    (0..RUNS).map(move |i| {
        let mut s = sweep::generate(0xD0AB_1E00 + i, Profile::Durable);
        if let Some(x) = s.durable.as_mut() {
            x.restore_defect = defect;
        }
        s
    })
}

fn durable_sweep(defect: Option<RestoreDefect>) -> Vec<Outcome> {
    durable_scenarios(defect)
        .map(|s| sweep::check(&s))
        .collect()
}

#[test]
fn a_durable_sweep_passes_with_crashes_of_both_sides() {
    let outs = durable_sweep(None);
    let (mut server_kills, mut client_kills, mut resubmitted, mut rolled_back) = (0, 0, 0, 0);
    let (mut evicted, mut forgotten, mut recalled, mut compared) = (0, 0, 0, 0);
    let (mut cuts, mut deliveries_lost, mut named) = (0, 0, 0);
    for (i, out) in outs.iter().enumerate() {
        let r = out.report.as_ref().expect("generated scenarios validate");
        assert!(
            out.passed(),
            "run {i}: {r}\nrepro: {}",
            repro::encode(&out.scenario)
        );
        server_kills += r.kills;
        client_kills += r.durable.client_kills;
        resubmitted += r.durable.resubmitted;
        rolled_back += r.durable.rolled_back;
        evicted += r.evicted;
        forgotten += r.tombs_forgotten;
        recalled += r.recalled;
        compared += r.durable.restore_compared;
        cuts += r.durable.tail_cuts;
        deliveries_lost += r.durable.deliveries_lost;
        named += r.state_lost;
    }
    // The sweep crashed both sides, restarted clients with messages to
    // submit again, and lost uncommitted deliveries with servers.
    assert!(server_kills >= RUNS, "{server_kills} server kills");
    assert!(client_kills >= RUNS, "{client_kills} client kills");
    assert!(resubmitted > 0, "no client restarted with messages held");
    assert!(
        rolled_back > 0,
        "no server crashed with deliveries uncommitted"
    );
    // Small tables: sessions evicted, tombstones forgotten and recalled,
    // every restore compared with the dead instance.
    assert!(
        evicted > 0 && forgotten > 0 && recalled > 0,
        "{evicted} {forgotten} {recalled}"
    );
    assert!(compared > 0, "no restore compared");
    // Journals lost committed deliveries, and clients named what they had
    // seen acknowledged of them.
    assert!(cuts > 0 && deliveries_lost > 0, "{cuts} {deliveries_lost}");
    assert!(named > 0, "no client named lost state");
}

/// The first of the sweep's runs with `defect` planted that violates
/// `invariant`, checked to pass without the defect (nothing but the
/// defect's doing).
fn found(defect: RestoreDefect, invariant: Invariant) -> Outcome {
    let first = durable_scenarios(Some(defect))
        .map(|s| sweep::check(&s))
        .find(|o| o.violated.contains(&invariant));
    let Some(out) = first else {
        panic!(
            "no run of {RUNS} with {} violated {invariant}",
            defect.name()
        );
    };
    let clean = sweep::check(&Scenario {
        durable: out.scenario.durable.map(|x| Durability {
            restore_defect: None,
            ..x
        }),
        ..out.scenario.clone()
    });
    assert!(clean.passed(), "{:?}", clean.violated);
    out
}

/// The first listed violation of `invariant` in `out`.
fn named(out: &Outcome, invariant: Invariant) -> Violation {
    let r = out.report.as_ref().expect("a report");
    r.discrepancies
        .iter()
        .find(|v| v.invariant == invariant)
        .cloned()
        .unwrap_or_else(|| panic!("{invariant} is listed: {r}"))
}

#[test]
fn the_durable_sweep_finds_holes_dropped_from_the_journal() {
    let out = found(RestoreDefect::DropHoles, Invariant::LostAcrossCrashes);
    let v = named(&out, Invariant::LostAcrossCrashes);
    assert!(!v.sns.is_empty(), "{v}");
    assert!(v.client.is_some(), "{v}");
}

#[test]
fn the_durable_sweep_finds_a_restore_that_keeps_an_older_record() {
    let out = found(RestoreDefect::KeepOldest, Invariant::RestoreDiffers);
    let v = named(&out, Invariant::RestoreDiffers);
    assert_ne!(v.session, 0, "{v}");
    assert!(
        v.note
            .contains("the dead instance's last committed record has"),
        "{v}"
    );
    assert!(
        v.note.contains("cumulative point") || v.note.contains("epoch"),
        "an older record: an older point or epoch: {v}"
    );
}

#[test]
fn the_durable_sweep_finds_a_journal_that_hides_its_lost_tail() {
    let out = found(RestoreDefect::HideStateLoss, Invariant::StateLostUnnamed);
    let v = named(&out, Invariant::StateLostUnnamed);
    assert!(!v.sns.is_empty() && v.client.is_some(), "{v}");
    assert!(
        out.violated.contains(&Invariant::LostAcrossCrashes),
        "{:?}",
        out.violated
    );
    let r = out.report.as_ref().unwrap();
    assert!(r.durable.tail_cuts > 0, "{r}");
}

#[test]
fn a_torn_record_is_refused_and_named() {
    let s = Scenario {
        durable: Some(Durability {
            restore_defect: Some(RestoreDefect::Torn),
            ..Durability::default()
        }),
        ..paced(2, 200)
    };
    let r = sim::run(&s).unwrap();
    assert!(r.violations_of(Invariant::JournalRefused) > 0, "{r}");
}

/// `clients` clients writing `messages` each, 50 µs apart, one server
/// crashed every 2 ms.
fn paced(clients: usize, messages: u64) -> Scenario {
    Scenario {
        seed: 19,
        clients,
        workload: Workload {
            messages,
            interval: Duration::from_micros(50),
            ..Workload::default()
        },
        crash: Some(CrashPlan {
            every: Duration::from_millis(2),
            down_for: Duration::from_micros(200),
            max_kills: 4,
        }),
        duration: Duration::from_millis(20),
        client_window: 8,
        ..Scenario::default()
    }
}

#[test]
fn clients_restarted_from_a_lagging_outbox_submit_again_and_nothing_repeats() {
    let s = Scenario {
        faults: FaultConfig {
            silent_drop_ppm: 20_000,
            ..FaultConfig::default()
        },
        kill_on: vec![KillOn {
            event: KillEvent::Delivered,
            nth: 150,
            down_for: Duration::from_micros(100),
        }],
        durable: Some(Durability {
            client_crash: Some(CrashPlan {
                every: Duration::from_micros(700),
                down_for: Duration::from_micros(100),
                max_kills: 20,
            }),
            outbox_lag: 8,
            ..Durability::default()
        }),
        ..paced(3, 300)
    };
    let r = sim::run(&s).unwrap();
    assert!(r.passed(), "{r}");
    assert_eq!(r.durable.client_kills, 20);
    assert!(r.durable.resubmitted > 0, "{r}");
    assert!(r.durable.restored > 0, "{r}");
    assert_eq!(r.submitted, 900);
    assert_eq!(r.delivered_unique, 900);
    assert_eq!(r.deliveries, 900, "each sn once across instances");
}

#[test]
fn a_server_crash_loses_the_deliveries_since_its_last_flush_and_they_come_again() {
    // Streamed writes are acknowledged late: a kill right after a
    // delivery finds it (and those before it since the last ack)
    // uncommitted.
    let s = Scenario {
        workload: Workload {
            stream_per_mille: 1000,
            ..paced(1, 300).workload
        },
        kill_on: vec![KillOn {
            event: KillEvent::Delivered,
            nth: 100,
            down_for: Duration::from_micros(100),
        }],
        durable: Some(Durability::default()),
        ..paced(1, 300)
    };
    let r = sim::run(&s).unwrap();
    assert!(r.passed(), "{r}");
    assert!(r.durable.rolled_back > 0, "{r}");
    assert_eq!(r.delivered_unique, 300);
    assert_eq!(r.deliveries, 300, "committed once each");
}

/// A journal record by the documented layout: session `session` of
/// token 1 and incarnation 5 at `epoch`, every sn below `cum` done, of
/// `[cum, top)` those in `received` (one past the highest announced:
/// `top`).
fn record(session: u64, epoch: u32, cum: u64, top: u64, received: &[u64]) -> Vec<u8> {
    let words = (top - cum).div_ceil(64) as usize;
    let mut rec = vec![0u8; JOURNAL_FIXED + 8 * words];
    rec[0..4].copy_from_slice(b"IOJR");
    rec[4] = JOURNAL_VERSION;
    rec[6..8].copy_from_slice(&(words as u16).to_le_bytes());
    rec[8..16].copy_from_slice(&session.to_le_bytes());
    rec[16..24].copy_from_slice(&1u64.to_le_bytes());
    rec[24..32].copy_from_slice(&5u64.to_le_bytes());
    rec[32..36].copy_from_slice(&epoch.to_le_bytes());
    rec[40..48].copy_from_slice(&cum.to_le_bytes());
    rec[48..56].copy_from_slice(&top.to_le_bytes());
    rec[56..64].copy_from_slice(&top.to_le_bytes());
    for &sn in received {
        let i = (sn - cum) as usize;
        // The bitmap follows the header (the fixed part less its CRC).
        rec[JOURNAL_FIXED - 4 + i / 8] |= 1 << (i % 8);
    }
    let n = rec.len();
    let sum = Crc32c::BUILTIN.checksum(&rec[..n - 4]);
    rec[n - 4..].copy_from_slice(&sum.to_le_bytes());
    rec
}

fn decode(rec: &[u8]) -> JournalRecord<'_> {
    JournalRecord::decode(rec, &Crc32c::BUILTIN).expect("a record that reads")
}

#[test]
fn dropping_the_holes_rewrites_a_record_as_documented() {
    // Sns below 2 done, 4 and 5 received, 2 and 3 missing (top 6).
    let rec = record(7, 3, 2, 6, &[4, 5]);
    assert_eq!(decode(&rec).missing(), 2);

    let planted = RestoreDefect::DropHoles.apply(&rec);
    let after = decode(&planted);
    assert_eq!((after.cumulative, after.top, after.missing()), (6, 6, 0));
    assert!((0..6).all(|sn| after.received(sn)));
    assert_eq!(
        (after.session, after.epoch, after.announced),
        (7, 3, 6),
        "the rest is kept"
    );
    let torn = RestoreDefect::Torn.apply(&rec);
    assert!(JournalRecord::decode(&torn, &Crc32c::BUILTIN).is_err());
}

#[test]
fn raising_the_cumulative_point_keeps_what_is_past_it() {
    let rec = record(7, 3, 2, 6, &[4, 5]);
    let raised = raise_cumulative(&rec, 3);
    let r = decode(&raised);
    assert_eq!(
        (r.cumulative, r.top, r.missing()),
        (3, 6, 1),
        "sn 3 still missing"
    );
    assert!(r.received(4) && r.received(5) && !r.received(3));
    let raised = raise_cumulative(&rec, 4);
    let r = decode(&raised);
    assert_eq!(
        (r.cumulative, r.top, r.missing()),
        (6, 6, 0),
        "past 4 and 5"
    );
    let raised = raise_cumulative(&rec, 9);
    let r = decode(&raised);
    assert_eq!((r.cumulative, r.top), (9, 9));
    assert_eq!(raise_cumulative(&rec, 2), rec, "already there");
}

/// Session 7's records: an older one with a hole, a later one without.
fn session_7() -> (Vec<u8>, Vec<u8>) {
    (record(7, 3, 2, 6, &[4, 5]), record(7, 4, 6, 6, &[]))
}

/// `journal`'s restore property against the records `held` by
/// instance 2.
fn compare(journal: &Journal, held: &[Vec<u8>]) -> (u64, Findings) {
    let mut f = Findings::default();
    let n = journal.compare_restored(2, held, &mut f);
    (n, f)
}

#[test]
fn the_restore_property_names_what_differs_from_the_dead_instance() {
    let (older, later) = session_7();
    let journal = |defect| {
        let mut j = Journal::new(0, defect);
        for r in [&older, &later] {
            j.keep(r);
            j.commit();
        }
        j
    };
    let j = journal(None);
    // The latest record held, or given back by recall: as the dead
    // instance.
    let (n, f) = compare(&j, std::slice::from_ref(&later));
    assert_eq!(n, 1);
    assert!(f.is_empty(), "{f:?}");
    assert!(compare(&j, &[]).1.is_empty());
    // An older record stayed: named, field by field.
    let (_, f) = compare(&j, std::slice::from_ref(&older));
    assert_eq!(f.count(Invariant::RestoreDiffers), 1);
    let v = &f.listed[0];
    assert_eq!(v.session, 7);
    assert!(
        v.note.contains(
            "instance 2 holds it with cumulative point 2, holes [2..4], epoch 3; the dead \
             instance's last committed record has cumulative point 6, holes none, epoch 4"
        ),
        "{v}"
    );
    // A session no committed record names.
    let (_, f) = compare(&j, &[later.clone(), record(9, 1, 0, 0, &[])]);
    assert_eq!(f.count(Invariant::RestoreDiffers), 1);
    assert_eq!(f.listed[0].session, 9);
    assert!(
        f.listed[0].note.contains("no committed record names"),
        "{f:?}"
    );
    // A journal that gives each session's first record back: its recall
    // differs too.
    let (_, f) = compare(&journal(Some(RestoreDefect::KeepOldest)), &[]);
    assert_eq!(f.count(Invariant::RestoreDiffers), 1);
    assert!(
        f.listed[0]
            .note
            .contains("does not hold it, and recall gives back"),
        "{f:?}"
    );
}

#[test]
fn a_journal_cut_goes_back_to_an_earlier_commit_and_recalls_what_it_kept() {
    let (older, later) = session_7();
    let opened = record(9, 1, 0, 0, &[]);
    let journal = |defect| {
        let mut j = Journal::new(4, defect);
        j.keep(&older);
        j.commit();
        j.keep(&later);
        j.keep(&opened);
        j.commit();
        j
    };
    let mut j = journal(None);
    // Handed over, not committed: recalled first, lost with a crash.
    let pending = record(9, 2, 3, 3, &[]);
    j.keep(&pending);
    let mut out = vec![0u8; JOURNAL_FIXED + 8 * 1024];
    let n = j.recall(9, &mut out).expect("recalled");
    assert_eq!(&out[..n], &pending[..]);
    j.crashed();
    let n = j.recall(9, &mut out).expect("recalled");
    assert_eq!(&out[..n], &opened[..]);
    // A commit that opened a session was synced: a cut stops before it.
    assert_eq!(j.cut(1, true), 0);
    assert_eq!(j.latest(7), Some(&later[..]));
    // Otherwise the last commit goes, session 9 with it.
    assert_eq!(j.cut(1, false), 1);
    assert_eq!(j.latest(7), Some(&older[..]));
    assert_eq!(j.sessions(), vec![7]);
    assert_eq!(j.recall(9, &mut out), None);
    assert_eq!(j.commits_kept(), 1);
    // Hiding the loss: the record comes back claiming the lost point.
    let mut j = journal(Some(RestoreDefect::HideStateLoss));
    j.cut(1, false);
    let given = j.given_back(7).expect("a record");
    let r = decode(&given);
    assert_eq!(
        (r.cumulative, r.top, r.epoch),
        (6, 6, 3),
        "session 7's older record at 6"
    );
}

#[test]
fn a_table_filled_evicted_killed_and_restored_answers_as_the_dead_instance() {
    // Two places and two tombstones for six clients, holes from silent
    // drops, connections broken and clients crashed (idle sessions to
    // evict), the server killed again and again: sessions are evicted,
    // tombstones forgotten and recalled, and after every restore each
    // session's record is the dead instance's last committed one (the
    // run's restore property, restore-differs).
    let s = Scenario {
        server_sessions: 2,
        server_tombs: 2,
        faults: FaultConfig {
            silent_drop_ppm: 20_000,
            disconnect_ppm: 10_000,
            ..FaultConfig::default()
        },
        crash: Some(CrashPlan {
            every: Duration::from_millis(1),
            down_for: Duration::from_micros(100),
            max_kills: 12,
        }),
        durable: Some(Durability {
            client_crash: Some(CrashPlan {
                every: Duration::from_micros(700),
                down_for: Duration::from_micros(100),
                max_kills: 20,
            }),
            ..Durability::default()
        }),
        ..paced(6, 200)
    };
    let r = sim::run(&s).unwrap();
    assert!(r.passed(), "{r}");
    assert_eq!(r.violations_of(Invariant::RestoreDiffers), 0);
    assert!(r.evicted > 0, "{r}");
    assert!(r.tombs_forgotten > 0 && r.recalled > 0, "{r}");
    assert_eq!(r.durable.restores, 12, "one per kill: {r}");
    assert!(
        r.durable.restore_compared >= 6 * 8,
        "most restores compared every session: {r}"
    );
    assert_eq!(r.submitted, 1200);
    assert_eq!(r.deliveries, 1200, "each sn once across instances");
}

fn took(client: usize, sn: u64, generation: u32) -> Took {
    Took {
        client,
        session: 9,
        sn,
        generation,
    }
}

fn judge(l: &Ledger) -> Findings {
    let mut f = Findings::default();
    l.judge(|_| 9, &mut f);
    f
}

#[test]
fn the_ledger_flags_an_sn_committed_by_two_instances() {
    let mut l = Ledger::new(1, 1, true);
    l.submitted(0, 0);
    l.took(0, took(0, 0, 1));
    l.commit(0);
    l.took(0, took(0, 0, 2));
    l.commit(0);
    let f = judge(&l);
    assert_eq!(f.count(Invariant::DeliveredTwiceAcrossCrashes), 1);
    assert_eq!(f.listed[0].sns, 0..1);
    // Without a journal a later instance may deliver again (announced).
    let mut l = Ledger::new(1, 1, false);
    l.submitted(0, 0);
    l.took(0, took(0, 0, 1));
    l.commit(0);
    l.took(0, took(0, 0, 2));
    l.commit(0);
    assert!(judge(&l).is_empty());
}

#[test]
fn the_ledger_forgets_what_a_crash_took_uncommitted() {
    let mut l = Ledger::new(1, 1, true);
    l.submitted(0, 0);
    l.took(0, took(0, 0, 1));
    assert_eq!(l.crashed(0), vec![took(0, 0, 1)]);
    l.commit(0);
    let f = judge(&l);
    assert_eq!(
        f.count(Invariant::LostAcrossCrashes),
        1,
        "lost with the crash"
    );
    l.took(0, took(0, 0, 2));
    l.commit(0);
    assert!(
        judge(&l).is_empty(),
        "committed once, by the second instance"
    );
}

#[test]
fn the_ledger_flags_a_submitted_sn_no_record_holds_unless_given_up() {
    let mut l = Ledger::new(2, 1, true);
    l.submitted(0, 2);
    l.took(0, took(0, 1, 1));
    l.commit(0);
    let f = judge(&l);
    assert_eq!(f.count(Invariant::LostAcrossCrashes), 2, "sns 0 and 2");
    l.client_event(0, &ClientEvent::NotReplayed { range: 0..1 });
    assert_eq!(judge(&l).count(Invariant::LostAcrossCrashes), 1, "sn 2");
    l.submitted(1, 0);
    l.client_event(
        1,
        &ClientEvent::Failed(iomsg_core::session::FailReason::Timeout {
            limit: Duration::from_secs(1),
        }),
    );
    assert_eq!(
        judge(&l).count(Invariant::LostAcrossCrashes),
        1,
        "a failed client said so"
    );
}

#[test]
fn the_ledger_lets_an_instance_that_lost_the_sessions_past_take_it_again() {
    // Instance 2 forgot the session (its tombstone overflowed): it and the
    // instances after it may take its sns again (the client announces
    // them); instance 1, before it, may not.
    let mut l = Ledger::new(1, 1, true);
    l.submitted(0, 1);
    l.took(0, took(0, 0, 1));
    l.took(0, took(0, 1, 1));
    l.commit(0);
    l.forgotten(2, 9);
    l.took(0, took(0, 0, 3));
    l.commit(0);
    assert!(judge(&l).is_empty());
    l.took(0, took(0, 1, 1));
    l.commit(0);
    assert_eq!(judge(&l).count(Invariant::DeliveredTwiceAcrossCrashes), 1);
    // No room to restore the session from the journal: the same.
    let mut l = Ledger::new(1, 1, true);
    l.submitted(0, 0);
    l.took(0, took(0, 0, 1));
    l.commit(0);
    l.new_to(2, 9);
    l.took(0, took(0, 0, 2));
    l.commit(0);
    assert!(judge(&l).is_empty());
}

#[test]
fn the_ledger_takes_back_what_a_tail_loss_cut_and_wants_it_named() {
    let mut l = Ledger::new(1, 1, true);
    l.set_tail_depth(2);
    l.submitted(0, 1);
    l.took(0, took(0, 0, 1));
    l.commit(0);
    l.took(0, took(0, 1, 1));
    l.commit(0);
    assert!(judge(&l).is_empty());
    assert_eq!(l.cut(0, 1), 1, "sn 1's commit");
    assert!(
        judge(&l).is_empty(),
        "the client has not been back since: nobody could tell it"
    );
    let back = ClientEvent::Established {
        epoch: 2,
        instance: 2,
        known: true,
        resume_from: 2,
    };
    l.client_event(0, &back);
    let f = judge(&l);
    assert_eq!(f.count(Invariant::LostAcrossCrashes), 1);
    assert_eq!(f.listed[0].sns, 1..2);
    l.client_event(
        0,
        &ClientEvent::StateLost {
            instance: 2,
            unknown: 1..2,
        },
    );
    assert!(judge(&l).is_empty(), "named");
    // Taken again and committed: once, not twice.
    l.took(0, took(0, 1, 2));
    l.commit(0);
    assert!(judge(&l).is_empty());
    assert_eq!(l.cut_back, 1);
}

#[test]
fn a_forgotten_tombstone_is_recalled_from_the_journal_and_nothing_repeats() {
    // Found by the durable sweep with 4 tombstones and 4 sessions for 9
    // clients, before the journal answered recall: an instance restored
    // with a session as a tombstone forgot it (overflow), the session's
    // client came back, the instance took it as a new session, and a
    // later instance delivered its sns again (announced). Now the instance
    // recalls the session from the journal: it resumes where it was, and
    // nothing is delivered twice.
    let s = repro::decode(
        "seed=11708250849013449362 clients=9 msgs=12 size=0 streams=304 interval=20us \
         silent=16317 delay_by=500us crash=500us/0us/6 dur=3125us drain=3s lat=1us \
         detect=500us cwin=1 ssess=4 tombs=4 journal=1 ccrash=300us/0us/8",
    )
    .unwrap();
    let r = sim::run(&s).unwrap();
    assert!(r.passed(), "{r}");
    assert!(r.tombs_forgotten > 0 && r.recalled > 0, "{r}");
    assert_eq!(r.duplicates_after_restart, 0, "{r}");
    assert_eq!(r.deliveries, r.delivered_unique, "{r}");
}

/// Runs the scenario of `line` and asserts that every invariant holds.
fn holds(line: &str) {
    let s = repro::decode(line).expect("a valid repro line");
    let r = sim::run(&s).expect("a valid scenario");
    assert!(r.passed(), "{r}\nrepro: {line}");
}

// Two runs the durable sweep once failed: a journal that lost every
// record of a session (a cut past its first commit), and a Welcome that
// named lost state and died with its connection or its instance. The
// core names both now: a journaled server that does not know a session
// whose client released sns names [0, base); a record keeps where its
// knowledge begins, and every Welcome of it says so.

#[test]
fn a_journal_that_lost_every_record_of_a_session_names_what_was_acknowledged() {
    holds(
        "seed=7247713632874657023 clients=4 msgs=1 size=0 kill=accept:5:100us dur=195us \
         drain=3s lat=1us cwin=32 swin=4096 ssess=3 tombs=2 steps=3000000 journal=1 tail=1/1/-",
    );
}

#[test]
fn a_welcome_naming_lost_state_that_never_arrives_is_named_again() {
    holds(
        "seed=15229034700902931121 clients=8 msgs=10 size=0 interval=200us crash=500us/20us/7 \
         dur=5ms drain=3s detect=500us cwin=1 ssess=4 steps=3000000 journal=1 \
         ccrash=300us/0us/2 tail=3/2/s",
    );
}

#[test]
fn a_tail_loss_at_a_power_cut_is_named_to_every_client_that_comes_back() {
    // The durable profile's tail loss: every server loses power near the
    // end of the faulty phase, its journal its last 64 commits (those that
    // opened a session synced).
    let s = Scenario {
        faults: FaultConfig {
            silent_drop_ppm: 20_000,
            ..FaultConfig::default()
        },
        durable: Some(Durability {
            tail_loss: Some(TailLoss {
                every: 0,
                batches: 64,
                at_end: true,
                synced_openings: true,
            }),
            ..Durability::default()
        }),
        ..paced(3, 600)
    };
    let r = sim::run(&s).unwrap();
    assert!(r.passed(), "{r}");
    assert_eq!(r.durable.tail_cuts, 1, "{r}");
    assert!(r.durable.deliveries_lost > 0, "{r}");
    assert!(r.state_lost > 0, "named to the clients: {r}");
    assert_eq!(r.submitted, 1800);
}
