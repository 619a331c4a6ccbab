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
    assert_eq!(out.closed, vec![1]);
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
fn payload_that_does_not_match_the_pattern_is_never_delivered() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    submit_writes(&mut c, 1);
    let frames = client_frames(&mut c, t(1));
    let msg = wire::parse(&frames[0]).unwrap();
    let mut data = [0u8; 16];
    if let Body::Write { data: d } = msg.body {
        data.copy_from_slice(d);
    }
    data[3] ^= 1; // corrupt, then re-emit with valid CRCs
    let bad = IoMsg {
        body: Body::Write { data: &data },
        ..msg
    };
    let buf = frame(&bad);
    s.handle_frame(t(1), 1, &buf, &mut out);
    assert!(out.delivered().is_empty());
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
}

#[test]
fn client_op_from_the_wrong_direction_is_rejected_as_unexpected() {
    let (mut s, mut out) = (server(INSTANCE_A), Out::default());
    let ack = msg(1, 0, 0, Body::WriteComp);
    let buf = frame(&ack);
    s.handle_frame(t(0), 3, &buf, &mut out);
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
    s.handle_frame(t(1), 1, &buf, &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::SessionMismatch]);
    assert!(out.delivered().is_empty());
}

#[test]
fn a_rejected_connection_does_not_disturb_other_sessions() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    s.handle_frame(t(1), 9, b"garbage that is not a frame", &mut out);
    assert_eq!(out.rejected(), vec![RejectReason::Malformed]);
    submit_writes(&mut c, 2);
    let frames = client_frames(&mut c, t(2));
    to_server(&mut s, &mut out, 1, &frames, t(2));
    assert_eq!(out.delivered(), vec![0, 1]);
}

// ---- reads -------------------------------------------------------------------

#[test]
fn read_is_answered_with_pattern_data_that_the_client_verifies() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    c.submit(RequestOp::Read, 100).unwrap();
    let frames = client_frames(&mut c, t(1));
    to_server(&mut s, &mut out, 1, &frames, t(1));
    let comp = wire::parse(&out.frames[0].1).unwrap();
    assert!(matches!(comp.body, Body::ReadComp { data } if data.len() == 100));
    to_client(&mut c, &mut out, 1, t(1));
    assert_eq!(c.stats().completions, 1);
    assert_eq!(c.stats().read_mismatches, 0);
    assert_eq!(c.base_sn(), 1);
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
    s.handle_frame(t(0), 1, &buf, &mut out);
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
    let mut c = Client::new(config(), t(0));
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
fn read_longer_than_the_server_answers_is_rejected_with_its_length() {
    let (mut c, mut s, mut out) = setup();
    connect(&mut c, &mut s, &mut out, 1, t(0));
    let len = MAX_READ_LEN as u32 + 1;
    let read = frame(&msg(1, 0, 0, Body::Read { len }));
    s.handle_frame(t(1), 1, &read, &mut out);
    assert_eq!(
        out.last_reject(),
        Some((RejectReason::ReadTooLong, u64::from(len)))
    );
    assert!(out.delivered().is_empty());
}
