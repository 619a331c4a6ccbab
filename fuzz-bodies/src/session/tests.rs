//! The `session` fuzz body's own tests: coverage of the seeded scripts and
//! the committed seeds, and each property's check seen to fire.

use super::super::session_checks::{answer, Delivered, Heard};
use super::*;
use iomsg_core::rng::SplitMix64;
use iomsg_core::session::ServerEvent;

#[test]
fn session_properties_hold_on_seeded_random_scripts() {
    let mut rng = SplitMix64::new(0x5E55_10F0_u64);
    let mut total = Summary::default();
    for _ in 0..400 {
        let len = 64 + (rng.next_u64() % 2048) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        total.add(&run(&bytes));
    }
    // The scripts reach the states the properties are about.
    assert!(total.established > 200, "{total:?}");
    assert!(total.delivered > 150, "{total:?}");
    assert!(total.acked > 100, "{total:?}");
    assert!(total.crashes > 50, "{total:?}");
    assert!(total.shared > 50, "{total:?}");
    assert!(total.owned_refusals > 10, "{total:?}");
    assert!(total.owned_failures > 10, "{total:?}");
    assert!(total.stray_refusals > 15, "{total:?}");
    assert!(total.probes > 0, "{total:?}");
    assert!(total.live_losses > 0, "{total:?}");
    assert!(total.bytes_checked > 100, "{total:?}");
    assert!(total.reads > 20, "{total:?}");
    assert!(total.refused > 10, "{total:?}");
}

#[test]
fn committed_seeds_establish_deliver_and_cover_what_they_name() {
    let seeds = crate::seed_files("session");
    assert!(seeds.len() >= 3, "{} seeds", seeds.len());
    let mut crashes = 0;
    for (path, bytes) in seeds {
        let s = run(&bytes);
        let name = path.to_string_lossy();
        // Regression inputs only have to hold; the others also cover.
        let regression = name.contains("seed-regress-");
        assert!(
            regression || s.established > 0 && s.delivered > 0 && s.acked > 0,
            "{}: {s:?}",
            path.display()
        );
        if name.contains("shared-id") {
            assert!(s.shared == 1 && s.owned_refusals > 0, "{name}: {s:?}");
            assert!(s.owned_failures > 0, "{name}: {s:?}");
        }
        if name.contains("stray-hello") {
            assert!(s.stray_refusals > 0, "{name}: {s:?}");
        }
        if name.contains("probe") {
            assert!(s.probes > 0 && s.live_losses > 0, "{name}: {s:?}");
        }
        crashes += s.crashes;
    }
    assert!(crashes > 0, "no seed crashes the server");
}

/// Two clients that share a session id, and `sn 0` (an empty write)
/// submitted by the first.
fn shared_world() -> World {
    let mut world = World::new(&mut Cursor(&[0x21, 0, 0, 0, 0]));
    assert!(world.shared);
    assert_eq!(world.submit(0, 0, 0), Ok(0));
    world
}

fn delivered(conn: u32) -> Heard {
    Heard::Delivered(Delivered {
        session: SESSIONS[0],
        conn: ConnId::new(conn, 0),
        sn: 0,
        op: RequestOp::Write,
        hash: workload::hash(&[]),
        read_len: 0,
    })
}

fn absorb(world: &mut World, heard: Vec<Heard>) {
    let out = Out {
        heard,
        ..Out::default()
    };
    world.absorb(out, None, None);
}

#[test]
fn only_a_forgotten_session_may_be_delivered_again() {
    let mut world = shared_world();
    let forgotten = Heard::Event(ServerEvent::Forgotten {
        session: SESSIONS[0],
    });
    absorb(&mut world, vec![delivered(1), forgotten, delivered(1)]);
    assert_eq!(world.peers[0].delivered.len(), 1);
    assert!(world.peers[1].delivered.is_empty(), "the other client's");
}

#[test]
#[should_panic(expected = "sn 0 delivered twice by instance 1")]
fn a_closed_session_delivered_again_is_a_violation() {
    let mut world = shared_world();
    let closed = Heard::Event(ServerEvent::Closed {
        session: SESSIONS[0],
    });
    absorb(&mut world, vec![delivered(1), closed, delivered(1)]);
}

#[test]
#[should_panic(expected = "client 1: session 0x5e55000000000a01 sn 0 delivered, only 0 submitted")]
fn a_delivery_belongs_to_the_client_whose_connection_carried_it() {
    // The first client submitted sn 0; the second, on connection 7,
    // did not.
    absorb(&mut shared_world(), vec![delivered(7)]);
}

// ---- the application's bytes (properties 13 and 14) ------------------------

/// One client, one session; its `sn 0` (a write of 16 bytes), or a
/// read of 8 bytes with a request of 8.
fn world(kind: u8) -> World {
    let mut world = World::new(&mut Cursor(&[0, 0, 0]));
    assert_eq!(world.submit(0, kind, if kind == 2 { 8 } else { 16 }), Ok(0));
    world
}

fn delivery(world: &World, hash: u64) -> Out {
    let d = Delivered {
        session: world.peers[0].client.session(),
        conn: ConnId::new(1, 0),
        sn: 0,
        op: RequestOp::Write,
        hash,
        read_len: 0,
    };
    Out {
        heard: vec![Heard::Delivered(d)],
        ..Out::default()
    }
}

#[test]
fn a_clients_own_frame_delivered_with_its_bytes_holds() {
    let mut world = world(0);
    let hash = world.peers[0].submitted[0].hash;
    let out = delivery(&world, hash);
    world.absorb(out, None, Some(0));
    assert_eq!(world.summary.bytes_checked, 1);
}

#[test]
#[should_panic(expected = "client 0: sn 0 delivered with other bytes than it submitted")]
fn a_clients_own_frame_delivered_with_other_bytes_is_a_violation() {
    let mut world = world(0);
    let hash = world.peers[0].submitted[0].hash ^ 1;
    let out = delivery(&world, hash);
    world.absorb(out, None, Some(0));
}

#[test]
fn submit_and_submit_with_record_the_same_bytes() {
    let mut world = world(0);
    assert_eq!(world.submit(0, 3, 16), Ok(1), "kind 3: submit_with");
    let token = world.peers[0].client.config().token;
    for sn in 0..2u64 {
        let mut bytes = [0u8; 16];
        workload::fill(token, sn, &mut bytes);
        let s = &world.peers[0].submitted[sn as usize];
        assert_eq!((s.op, s.hash), (RequestOp::Write, workload::hash(&bytes)));
    }
}

#[test]
fn read_data_the_application_answered_holds_once() {
    let mut world = world(2);
    let mut data = [0u8; 8];
    let session = world.peers[0].client.session();
    answer(session, 0, &world.peers[0].submitted[0].request, &mut data);
    world.check_read(0, 0, &data);
    assert_eq!(world.peers[0].reads.len(), 1);
}

#[test]
#[should_panic(expected = "client 0: read data for sn 0 twice")]
fn read_data_twice_is_a_violation() {
    let mut world = world(2);
    let mut data = [0u8; 8];
    let session = world.peers[0].client.session();
    answer(session, 0, &world.peers[0].submitted[0].request, &mut data);
    world.check_read(0, 0, &data);
    world.check_read(0, 0, &data);
}

#[test]
#[should_panic(expected = "client 0: sn 0 read data is not what the server's application answered")]
fn read_data_of_other_bytes_is_a_violation() {
    world(2).check_read(0, 0, &[0u8; 8]);
}

#[test]
#[should_panic(expected = "client 0: read data for sn 0, which is no read it submitted")]
fn read_data_for_a_write_is_a_violation() {
    world(0).check_read(0, 0, &[0u8; 16]);
}
