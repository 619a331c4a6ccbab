//! Bad input, and reads.

use super::*;

// ---- bad input -------------------------------------------------------------

#[test]
fn corrupt_frame_is_rejected_with_its_reason_and_the_connection_reset() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let mut frames = client_frames(&mut c, t(1));
    frames[0][30] ^= 0x04; // a bit of the sn: the header CRC no longer matches
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
    assert_eq!(out.closed, vec![cid(1)]);
    assert!(matches!(
        s.stats().last_wire_error,
        Some(wire::WireError::HeaderChecksum { .. })
    ));
    assert!(out.delivered().is_empty());
    to_client(&mut c, &mut out, 1, t(1));
    assert!(
        matches!(c.state(), ClientState::Backoff { .. }),
        "{:?}",
        c.state()
    );
    assert_eq!(c.outstanding(), 1, "kept for replay");
}

#[test]
fn a_payload_corrupted_under_its_crc_is_refused_and_never_delivered() {
    let mut cfg = config();
    cfg.validate = true;
    let (mut c, mut s, mut out) = (client(cfg), server(INSTANCE_A), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let mut frames = client_frames(&mut c, t(1));
    let last = frames[0].len() - 1;
    frames[0][last] ^= 1; // a payload byte: the header CRC still matches
    to_server(&mut s, &mut out, 1, &frames, t(1));
    assert!(out.delivered().is_empty());
    assert_eq!(
        out.last_reject(),
        Some((RejectReason::Malformed, 10)),
        "wire_error_code of PayloadChecksum"
    );
    assert!(matches!(
        s.stats().last_wire_error,
        Some(wire::WireError::PayloadChecksum { .. })
    ));
}

#[test]
fn without_a_payload_crc_the_server_delivers_the_bytes_as_they_came() {
    // The protocol carries the application's bytes and does not judge
    // them: corruption the header CRC does not cover is for the payload
    // CRC (`validate`) to catch, or for the application.
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let mut frames = client_frames(&mut c, t(1));
    let last = frames[0].len() - 1;
    frames[0][last] ^= 1;
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let mut corrupt = payload(0, 16);
    corrupt[15] ^= 1;
    assert_eq!(out.delivered(), vec![0]);
    assert_eq!(out.deliveries[0].hash, workload::hash(&corrupt));
    assert!(out.rejected().is_empty());
}

#[test]
fn client_op_from_the_wrong_direction_is_rejected_as_unexpected() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let ack = msg(1, 0, 0, Body::WriteComp);
    let buf = frame(&ack);
    serve(&mut s, &mut out, cid(3), &buf, t(0));
    assert_eq!(
        out.last_reject(),
        Some((RejectReason::Unexpected, Op::WriteComp as u64))
    );
}

#[test]
fn frame_for_another_session_on_a_bound_connection_is_rejected() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let data = [0u8; 0];
    let write = IoMsg {
        session: SESSION + 1,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Write { data: &data },
    };
    let buf = frame(&write);
    serve(&mut s, &mut out, cid(1), &buf, t(1));
    assert_eq!(out.rejected(), vec![RejectReason::SessionMismatch]);
    assert!(out.delivered().is_empty());
}

#[test]
fn a_rejected_connection_does_not_disturb_other_sessions() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    serve(
        &mut s,
        &mut out,
        cid(9),
        b"garbage that is not a frame",
        t(1),
    );
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(2));
    to_server(&mut s, &mut out, 1, &frames, t(2));
    assert_eq!(out.delivered(), vec![0, 1]);
}

// ---- reads -------------------------------------------------------------------

#[test]
fn read_is_answered_by_the_application_and_its_data_reaches_the_client_once() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let read = Message::Read {
        len: 100,
        request: b"key-0",
    };
    assert_eq!(c.submit(read), Ok(0));
    let frames = client_frames(&mut c, t(1));
    assert_eq!(
        wire::parse(&frames[0]).unwrap().body,
        Body::Read {
            len: 100,
            request: b"key-0"
        }
    );
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let d = &out.deliveries[0];
    assert_eq!(
        (d.op, d.read_len, d.hash),
        (RequestOp::Read, 100, workload::hash(b"key-0")),
        "the application sees the request"
    );
    let expected = answer_bytes(0, b"key-0", 100);
    assert_eq!(out.responses, vec![(0, workload::hash(&expected))]);
    let comp = out.frames[0].1.clone();
    assert_eq!(
        wire::parse(&comp).unwrap().body,
        Body::ReadComp { data: &expected }
    );
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(out.reads, vec![(0, expected)]);
    assert_eq!(c.stats().completions, 1);
    assert_eq!(c.stats().reads_answered, 1);
    assert_eq!(c.base_sn(), 1);
    // The same completion again: acknowledged already, no data twice.
    assert_eq!(c.handle_frame(t(2), &comp), None);
    assert_eq!(c.stats().stray_read_data, 1);
}

#[test]
fn read_data_of_another_length_than_asked_is_not_taken() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let read = Message::Read {
        len: 10,
        request: &[],
    };
    c.submit(read).unwrap();
    let _ = client_frames(&mut c, t(1));
    let short = [7u8; 9];
    let comp = frame(&msg(1, 0, 0, Body::ReadComp { data: &short }));
    assert_eq!(c.handle_frame(t(2), &comp), None);
    assert_eq!(c.stats().stray_read_data, 1);
    assert_eq!(c.stats().reads_answered, 0);
}

#[test]
fn hello_without_a_body_checksum_is_rejected_so_a_flipped_bit_cannot_steer_the_session() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let hello = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Hello {
            base_sn: 0,
            next_sn: 1 << 40, // as if a bit of next_sn had flipped on the way
            token: TOKEN,
            window: 128,
            replay: false,
        },
    };
    let buf = frame(&hello);
    serve(&mut s, &mut out, cid(1), &buf, t(0));
    assert_eq!(
        out.last_reject(),
        Some((RejectReason::Malformed, UNCHECKED_BODY))
    );
    assert_eq!(
        s.session_count(),
        0,
        "no session created from an unchecked body"
    );
}

#[test]
fn welcome_without_a_body_checksum_is_a_protocol_error() {
    let mut c = client(config());
    c.start(t(0));
    assert_eq!(c.poll_action(), Some(Action::Connect));
    c.handle_connected(t(0));
    let hello = client_frames(&mut c, t(0));
    assert!(
        wire::parse(&hello[0]).unwrap().validate,
        "the client checksums its Hello"
    );
    let welcome = IoMsg {
        session: SESSION,
        epoch: 1,
        sn: 0,
        ack: 0,
        validate: false,
        stream: false,
        body: Body::Welcome {
            instance: INSTANCE_A,
            resume_from: 0,
            incarnation: 0,
            window: 128,
            known: false,
        },
    };
    let buf = frame(&welcome);
    c.handle_frame(t(1), &buf);
    let e = DisconnectCause::Protocol(ProtocolError::UncheckedBody(Op::Welcome));
    assert!(events(&mut c).contains(&ClientEvent::Disconnected { epoch: 1, cause: e }));
}

#[test]
fn read_longer_than_the_server_answers_is_rejected_with_the_limit() {
    let mut cfg = ServerConfig::new(INSTANCE_A);
    cfg.max_read = 1000;
    let (mut c, mut s, mut out) = (client(config()), Server::new(cfg), Out::default());
    connect(&mut c, &mut s, &mut out, 1, t(0));
    assert_eq!(s.max_read(), 1000);
    let read = frame(&msg(
        1,
        0,
        0,
        Body::Read {
            len: 1001,
            request: &[],
        },
    ));
    serve(&mut s, &mut out, cid(1), &read, t(1));
    assert_eq!(out.last_reject(), Some((RejectReason::ReadTooLong, 1000)));
    assert!(out.delivered().is_empty());
}

#[test]
fn read_request_longer_than_the_server_keeps_is_refused_at_submit_and_on_the_wire() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let long = [1u8; MAX_READ_REQUEST + 1];
    let read = Message::Read {
        len: 8,
        request: &long,
    };
    assert_eq!(
        c.submit(read),
        Err(SubmitError::RequestTooLong {
            len: MAX_READ_REQUEST + 1,
            max: MAX_READ_REQUEST
        })
    );
    assert_eq!(c.next_sn(), 0, "nothing changed");
    let forged = frame(&msg(
        1,
        0,
        0,
        Body::Read {
            len: 8,
            request: &long,
        },
    ));
    serve(&mut s, &mut out, cid(1), &forged, t(1));
    assert_eq!(out.rejected(), vec![RejectReason::ReadTooLong]);
    assert!(out.delivered().is_empty());
}
