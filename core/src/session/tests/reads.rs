//! Reads end with their data at the application, or named: an ack or a
//! resume point alone never releases a read whose answer was lost.

use super::*;

const REQUEST: &[u8] = b"key-17";
const LEN: u32 = 48;

fn submit_read(c: &mut Client) -> u64 {
    let sn = c.next_sn();
    let read = Message::Read {
        len: LEN,
        request: REQUEST,
    };
    assert_eq!(c.submit(read), Ok(sn));
    sn
}

/// The server's frames on `conn` to the client, but for the read
/// completions of the sns in `drop`.
fn to_client_dropping(c: &mut Client, out: &mut Out, conn: u32, drop: &[u64], now: Instant) {
    for (to, f) in out.take() {
        let m = wire::parse(&f).unwrap();
        let read_comp = matches!(m.body, Body::ReadComp { .. });
        if to != cid(conn) || (read_comp && drop.contains(&m.sn)) {
            continue;
        }
        if let Some(read) = c.handle_frame(now, &f) {
            out.reads.push((read.sn, read.data.to_vec()));
        }
    }
}

/// A client connected on connection 1 sends a read and a write; the
/// read's answer is dropped, the write's completion acknowledges both.
fn read_then_write_answer_dropped() -> (Client, Server, Out, u64) {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let read = submit_read(&mut c);
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    to_client_dropping(&mut c, &mut out, 1, &[read], t(1));
    (c, s, out, read)
}

fn read_sns(frames: &[Vec<u8>]) -> Vec<u64> {
    frames
        .iter()
        .filter_map(|f| match wire::parse(f).unwrap() {
            IoMsg {
                sn,
                body: Body::Read { .. },
                ..
            } => Some(sn),
            _ => None,
        })
        .collect()
}

fn assert_answered_once(out: &Out, sn: u64) {
    let answers: Vec<&(u64, Vec<u8>)> = out.reads.iter().filter(|(s, _)| *s == sn).collect();
    assert_eq!(
        answers.len(),
        1,
        "read {sn}'s data reached the application once"
    );
    assert_eq!(answers[0].1, answer_bytes(sn, REQUEST, LEN as usize));
}

#[test]
fn a_read_whose_answer_is_dropped_on_a_live_connection_is_asked_again() {
    let (mut c, mut s, mut out, read) = read_then_write_answer_dropped();
    assert_eq!(c.base_sn(), 2, "the write's completion acknowledged both");
    assert_eq!(c.reads_unanswered(), 1, "but the read has no data");
    assert_eq!(c.outstanding(), 2, "the write stays behind the read");
    let again = client_frames(&mut c, t(2));
    assert_eq!(read_sns(&again), vec![read], "asked again at once");
    to_server(&mut s, &mut out, 1, &again, t(2));
    to_client(&mut c, &mut out, 1, t(2));
    assert_answered_once(&out, read);
    assert_eq!(
        out.delivered(),
        vec![0, 1],
        "delivered once, answered twice"
    );
    assert_eq!(out.responses.len(), 2);
    assert_eq!((c.outstanding(), c.stats().reads_reasked), (0, 1));
    assert_eq!(c.stats().reads_answered, 1);
}

#[test]
fn a_read_whose_answer_went_with_its_connection_is_asked_on_the_next() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let read = submit_read(&mut c);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    out.take(); // the answer dies with the connection
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(60));
    assert_eq!(c.base_sn(), 1, "the Welcome resumes past the read");
    let again = client_frames(&mut c, t(60));
    assert_eq!(read_sns(&again), vec![read]);
    to_server(&mut s, &mut out, 2, &again, t(60));
    to_client(&mut c, &mut out, 2, t(60));
    assert_answered_once(&out, read);
    assert_eq!(
        out.delivered(),
        vec![read],
        "the server's application took it once"
    );
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn a_read_acknowledged_but_unanswered_is_answered_by_a_restarted_server() {
    let (mut c, _dead, _, read) = read_then_write_answer_dropped();
    // The server dies before the read asked again reaches it.
    let _lost = client_frames(&mut c, t(2));
    c.handle_disconnected(
        t(3),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    let (mut s, mut out2) = (server(INSTANCE_B), Out::default());
    connect(&mut c, &mut s, &mut out2, 1, t(60));
    let again = client_frames(&mut c, t(60));
    assert_eq!(read_sns(&again), vec![read]);
    to_server(&mut s, &mut out2, 1, &again, t(60));
    to_client(&mut c, &mut out2, 1, t(60));
    assert_answered_once(&out2, read);
    assert!(out2.delivered().is_empty(), "answered, not delivered again");
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn a_read_asked_again_whose_answer_is_dropped_is_asked_once_more() {
    let (mut c, mut s, mut out, read) = read_then_write_answer_dropped();
    // The read asked again and a new write; the read's answer is dropped
    // again, the write's completion comes after it.
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(2));
    assert_eq!(sns(&frames), vec![read, 2]);
    to_server(&mut s, &mut out, 1, &frames, t(2));
    to_client_dropping(&mut c, &mut out, 1, &[read], t(2));
    assert_eq!(c.reads_unanswered(), 1);
    let again = client_frames(&mut c, t(3));
    assert_eq!(
        read_sns(&again),
        vec![read],
        "the later completion proves it lost"
    );
    to_server(&mut s, &mut out, 1, &again, t(3));
    to_client(&mut c, &mut out, 1, t(3));
    assert_answered_once(&out, read);
    assert_eq!((c.outstanding(), c.stats().reads_reasked), (0, 2));
}

#[test]
fn a_read_asked_again_with_nothing_after_it_is_asked_on_a_new_connection() {
    let (mut c, mut s, mut out, read) = read_then_write_answer_dropped();
    let again = client_frames(&mut c, t(2));
    to_server(&mut s, &mut out, 1, &again, t(2));
    to_client_dropping(&mut c, &mut out, 1, &[read], t(2));
    // Nothing else is in flight: the reply timeout gives the connection
    // up (after a probe), and the next one asks again.
    let mut now = t(2);
    while matches!(c.state(), ClientState::Established { .. }) {
        now = c.poll_timeout().expect("a reply timer runs");
        c.handle_timeout(now);
        let probes = client_frames(&mut c, now);
        to_server(&mut s, &mut out, 1, &probes, now);
        to_client(&mut c, &mut out, 1, now);
    }
    assert!(now < t(2) + 2 * c.config().reply_timeout);
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, now);
    let again = client_frames(&mut c, now);
    assert_eq!(read_sns(&again), vec![read]);
    to_server(&mut s, &mut out, 2, &again, now);
    to_client(&mut c, &mut out, 2, now);
    assert_answered_once(&out, read);
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn without_replay_a_read_lost_in_flight_is_named_and_a_delivered_one_answered() {
    let mut cfg = config();
    cfg.replay = false;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let delivered = submit_read(&mut c);
    let in_flight = submit_read(&mut c);
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames[..1], t(1));
    out.take();
    c.handle_disconnected(
        t(2),
        DisconnectReason::PeerFailed(crate::conn::Cause::UNKNOWN),
    );
    s.handle_disconnected(cid(1));
    connect(&mut c, &mut s, &mut out, 2, t(60));
    assert!(events(&mut c).contains(&ClientEvent::NotReplayed {
        range: in_flight..in_flight + 1
    }));
    let again = client_frames(&mut c, t(60));
    assert_eq!(read_sns(&again), vec![delivered], "named, not asked again");
    to_server(&mut s, &mut out, 2, &again, t(60));
    to_client(&mut c, &mut out, 2, t(60));
    assert_answered_once(&out, delivered);
    assert_eq!(c.outstanding(), 0);
}

#[test]
fn close_waits_for_the_data_of_an_acknowledged_read() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let read = submit_read(&mut c);
    submit_writes(&mut c, 1);
    c.close(t(1));
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    to_client_dropping(&mut c, &mut out, 1, &[read], t(1));
    assert!(!c.is_terminal(), "no Bye before the read's data");
    exchange(&mut c, &mut s, &mut out, 1, t(2));
    assert_answered_once(&out, read);
    let bye = client_frames(&mut c, t(3));
    assert_eq!(wire::parse(&bye[0]).unwrap().body, Body::Bye);
    assert_eq!(c.state(), ClientState::Closed);
}
