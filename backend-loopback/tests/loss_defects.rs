//! Shrunk reproductions of the protocol defects the sweep found in the
//! core before their fixes, one per defect: each scenario violated the
//! named invariants then, and must pass the whole verdict now.
//!
//! A repro line replays through `sweep --repro "<line>"` too.

mod common;

use iomsg_core::session::{
    ClientConfig, ClientEvent, ClientSession, Delivery, Message, ReadRequest, ServerConfig,
    ServerHandler, SubmitError,
};
use iomsg_core::transport::{Client, Server};
use iomsg_core::Instant;
use iomsg_loopback::sim::{self, Invariant};
use iomsg_loopback::sweep::repro;

/// Runs the scenario of `line` and asserts that every invariant holds.
/// `was` names what the core violated before the fix, for the message.
fn holds(line: &str, was: &[Invariant]) {
    let s = repro::decode(line).expect("a valid repro line");
    let r = sim::run(&s).expect("a valid scenario");
    let names: Vec<&str> = was.iter().map(|i| i.name()).collect();
    assert!(
        r.passed(),
        "{r}\nrepro: {line}\nthe defect's invariants: {names:?}"
    );
}

#[test]
// Was: a burst of more than 16 completions overflows the client's event queue.
fn a_burst_of_completions_loses_no_client_event() {
    holds(
        "seed=7247713632874657023 clients=1 msgs=15 size=0 dur=0us drain=3s lat=200us detect=10us swin=64 ssess=64",
        &[Invariant::ClientEventsLost],
    );
}

#[test]
// Was: a client window past the server's lets a hole slide out and be acked.
fn a_client_window_past_the_server_window_loses_nothing() {
    holds(
        "seed=7247713632874657023 clients=1 msgs=494 size=0 streams=744 silent=975 depth=1 delay_by=20ms dur=12us drain=3s cwin=512 swin=64",
        &[Invariant::LostWithReplay, Invariant::AckedUndelivered],
    );
}

#[test]
// Was: a silent drop with nothing behind it is never reported as a live loss.
fn a_trailing_drop_is_reported_as_a_live_loss() {
    holds(
        "seed=15054179515254645270 clients=4 msgs=3 size=0 silent=2935 depth=1 delay_by=500us dur=7us drain=3s lat=1us cwin=1",
        &[Invariant::LiveLossUndetected],
    );
}

#[test]
// Was: without replay a trailing drop is given up as in flight, not live.
fn a_trailing_drop_without_replay_is_given_up_as_live() {
    holds(
        "seed=2843683978968845783 clients=1 msgs=217 size=0 silent=1300 corrupt=3669 depth=1 delay_by=10us dur=2500us drain=3s replay=0 cwin=1",
        &[Invariant::WrongLossClass, Invariant::LiveLossUndetected],
    );
}

#[test]
// Was: a delayed Hello of an old epoch re-creates the session its client closed.
fn a_delayed_old_hello_never_recreates_a_closed_session() {
    holds(
        "seed=6950370329464316762 clients=3 msgs=1 size=0 delay=25898 depth=1 delay_by=20ms dur=1ms drain=3s replay=0 lat=450us cwin=8 swin=4096 ssess=4",
        &[Invariant::DeliveredAfterGivenUp],
    );
}

#[test]
// Was: an evicted session is re-created and its sns delivered again by the same instance.
fn an_evicted_session_is_never_delivered_twice_by_one_instance() {
    holds(
        "seed=12418798490098076547 clients=5 msgs=5 size=0 interval=100us corrupt=1896 depth=1 delay_by=20ms dur=625us drain=3s detect=500us cwin=8 ssess=4",
        &[Invariant::DeliveredTwiceByOneInstance],
    );
}

#[test]
// Was: after a lost Welcome and a restart, a duplicate is not announced.
fn a_duplicate_after_a_lost_welcome_and_a_restart_is_announced() {
    holds(
        "seed=16397098623566694439 clients=16 msgs=238 size=0 corrupt=29753 delay=4459 disconnect=485 depth=1 delay_by=500us kill=accept:1:100us,accept:2:2ms,delivered:98:0us dur=5ms drain=3s detect=0us cwin=8",
        &[Invariant::UnannouncedDuplicate],
    );
}

#[test]
// Was: two clients with one session id share, and steal, each other's acks.
fn two_clients_with_one_session_id_never_steal_acks() {
    holds(
        "seed=3418213408037102827 msgs=1 size=0 dur=156us drain=3s replay=0 detect=3ms cwin=8 swin=64 ssess=4 shared=1",
        &[Invariant::AckedFromOthersFrames],
    );
}

#[test]
// Was: a stray Hello takes over another client's session.
fn a_stray_hello_never_takes_over_a_session() {
    holds(
        "seed=13281470818331094617 clients=1 msgs=78 size=0 interval=10us dur=1ms drain=3s lat=1us detect=500us cwin=8 swin=4096 ssess=64 stray=0:765us:1048576:1:0",
        &[Invariant::LostWithReplay, Invariant::AckedFromOthersFrames],
    );
}

#[test]
// Was: a read completion carries no payload CRC when the server's validate
// is off, though the Read asked for one.
fn a_corrupted_read_completion_never_reaches_the_application() {
    holds(
        "seed=3947602601716923177 clients=1 msgs=38 size=4 reads=966 corrupt=2925 depth=1 delay_by=500us dur=195us drain=3s cwin=4",
        &[Invariant::ReadMismatch],
    );
}

#[test]
// Was: a read whose ReadComp was silently dropped on a live connection is
// released by the next ack and never answered, and nobody is told.
fn a_read_whose_answer_was_dropped_is_answered() {
    // Seed 7 draws a Read (sn 0), then a Write (sn 1); the server's second
    // outgoing frame, after the Welcome, is the read's ReadComp.
    let line = "seed=7 clients=1 msgs=2 size=8 reads=500 sched=1:c:0:silent dur=1ms drain=3s";
    holds(line, &[Invariant::ReadUnanswered]);
    let r = sim::run(&repro::decode(line).expect("a valid repro line")).expect("a valid scenario");
    assert_eq!(r.faults.silent_dropped, 1, "{r}");
    assert_eq!(r.submitted, 2, "{r}");
    assert_eq!(
        (r.reads, r.reads_answered),
        (1, 1),
        "the read's data must reach the client's application\n{r}"
    );
}

#[test]
// Was: a message over half the client's storage, after a smaller one was
// acknowledged, is refused (BufferFull) with nothing outstanding.
fn the_workload_never_meets_a_full_storage_with_nothing_outstanding() {
    // One message at a time, 8 to 800 bytes, in 1000 bytes of storage.
    holds(
        "seed=3 clients=1 msgs=40 size=800 spread=792 store=1000 dur=1ms drain=3s cwin=1",
        &[Invariant::BufferFullWhileIdle],
    );
}

#[test]
// Was: a Hello held up past its client's reconnect, finish and Bye arrives
// after other sessions' Byes made the server forget the session: the
// instance opens it again and delivers its writes a second time,
// unannounced.
fn a_held_up_hello_after_its_tombstone_was_forgotten_delivers_nothing_again() {
    holds(
        "seed=6668440357076588639 clients=6 msgs=1 size=0 delay=69133 depth=1 delay_by=20ms sched=10:s:0:delay,6:s:0:delay dur=1us drain=3s lat=0us cwin=32 swin=64 tombs=4",
        &[Invariant::UnannouncedDuplicate],
    );
}

/// A client with `storage` bytes of payload storage and a server, on a
/// quiet loopback network: every message `sizes` names is submitted in
/// turn, each once the one before is acknowledged. Returns the refusals
/// `submit` made with nothing outstanding: `(size, error)`.
fn submit_one_at_a_time(storage: usize, sizes: &[usize]) -> Vec<(usize, SubmitError)> {
    let net = common::quiet_network();
    let port = net.listen(1, Instant::ZERO).expect("a free address");
    let mut server = Server::new(port, ServerConfig::new(7)).expect("a server");
    let config = ClientConfig::new(0x5e55, 0x70ce);
    let session = ClientSession::<8, _>::new(config, Instant::ZERO, vec![0u8; storage]);
    let mut client = Client::new(net.client(1), session).expect("a client");
    let mut app = Sink;
    let mut now = Instant::ZERO;
    let mut refused = Vec::new();
    client.start(now);
    for &size in sizes {
        let payload = vec![0xA5u8; size];
        match client.submit(Message::Write(&payload)) {
            Ok(_) => {}
            Err(e) => {
                refused.push((size, e));
                continue;
            }
        }
        let mut steps = 0u64;
        while client.session().outstanding() > 0 {
            client.poll(now, &mut |_: ClientEvent| {});
            server.poll(now, &mut app);
            now = common::next_step(&net, [client.poll_timeout(), server.poll_timeout()], now);
            steps += 1;
            assert!(
                steps < 100_000,
                "the {size}-byte write is never acknowledged"
            );
        }
    }
    refused
}

/// A server application that takes everything and answers reads with zeros.
struct Sink;

impl ServerHandler for Sink {
    fn deliver(&mut self, _: Delivery<'_>) {}
    fn respond(&mut self, _: ReadRequest<'_>, out: &mut [u8]) {
        out.fill(0);
    }
}

#[test]
// Was: a message over half the storage is refused forever once a smaller
// one was acknowledged, though nothing is outstanding.
fn a_large_message_fits_an_empty_storage_after_a_small_one() {
    let refused = submit_one_at_a_time(1000, &[300, 800]);
    assert!(
        refused.is_empty(),
        "with nothing outstanding in 1000 B of storage, submit refused {refused:?}"
    );
}
