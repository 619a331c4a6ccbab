//! Named byte fixtures, one frame per op, with the repr each one parses to,
//! and small helpers for the tests of [`parse()`](super::parse()) and
//! [`IoMsg::emit`]. Test-only.
//!
//! The frames are spelled out field by field; the CRC fields hold the
//! CRC32C of the bytes they cover, computed once and pasted in.

use super::header::{crc32c, HEADER_CRC_OFFSET};
use super::{Body, IoMsg, RejectReason, HEADER_LEN, MAX_DATA_LEN};

/// The session id all fixtures use.
pub(super) const SESSION: u64 = 0x0123_4567_89ab_cdef;

/// Hello: see [`HELLO`] for the fields.
#[rustfmt::skip]
pub(super) const HELLO_FRAME: [u8; 80] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x01, // op Hello
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x20, 0x00, 0x00, 0x00, // data_len 32
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 0
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0xc4, 0x2e, 0xfa, 0x99, // header_crc CRC32C of bytes [0, 44)
    0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // base_sn 100
    0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // next_sn 105
    0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f, // token 0x0f1e2d3c4b5a6978
    0x00, 0x08, 0x00, 0x00, // window 2048
    0x01, // replay true
    0x00, 0x00, 0x00, // padding
];

/// Welcome: see [`WELCOME`] for the fields.
#[rustfmt::skip]
pub(super) const WELCOME_FRAME: [u8; 80] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x02, // op Welcome
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x20, 0x00, 0x00, 0x00, // data_len 32
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 0
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x46, 0x2d, 0xf8, 0xf8, // header_crc CRC32C of bytes [0, 44)
    0xe5, 0xa5, 0x5e, 0xd1, 0x0d, 0xf0, 0xfe, 0xca, // instance 0xcafef00dd15ea5e5
    0x67, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // resume_from 103
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // incarnation 0x1122334455667788
    0x00, 0x04, 0x00, 0x00, // window 1024
    0x01, // known true
    0x00, 0x00, 0x00, // padding
];

/// Write: see [`WRITE`] for the fields.
#[rustfmt::skip]
pub(super) const WRITE_FRAME: [u8; 52] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x03, // op Write
    0x03, 0x00, // flags: VALIDATE | STREAM
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x04, 0x00, 0x00, 0x00, // data_len 4
    0x68, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 104
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 0
    0x5c, 0xfa, 0x13, 0xe7, // payload_crc CRC32C of the payload
    0x0d, 0x9e, 0x0a, 0x0f, // header_crc CRC32C of bytes [0, 44)
    0x69, 0x6f, 0x6d, 0x21, // data b"iom!"
];

/// WriteComp: see [`WRITE_COMP`] for the fields.
#[rustfmt::skip]
pub(super) const WRITE_COMP_FRAME: [u8; 48] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x04, // op WriteComp
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x00, 0x00, 0x00, 0x00, // data_len 0
    0x68, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 104
    0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 105
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x0c, 0x78, 0x86, 0x7b, // header_crc CRC32C of bytes [0, 44)
];

/// Read: see [`READ`] for the fields.
#[rustfmt::skip]
pub(super) const READ_FRAME: [u8; 52] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x05, // op Read
    0x01, 0x00, // flags: VALIDATE
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x04, 0x00, 0x00, 0x00, // data_len 4
    0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 105
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 0
    0x4d, 0x36, 0xc5, 0x38, // payload_crc CRC32C of the payload
    0xf5, 0x19, 0xa0, 0x7c, // header_crc CRC32C of bytes [0, 44)
    0x00, 0x10, 0x00, 0x00, // len 4096
];

/// ReadComp: see [`READ_COMP`] for the fields.
#[rustfmt::skip]
pub(super) const READ_COMP_FRAME: [u8; 51] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x06, // op ReadComp
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x03, 0x00, 0x00, 0x00, // data_len 3
    0x69, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 105
    0x6a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 106
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x7e, 0xc0, 0x97, 0x95, // header_crc CRC32C of bytes [0, 44)
    0x78, 0x79, 0x7a, // data b"xyz"
];

/// Ack: see [`ACK`] for the fields.
#[rustfmt::skip]
pub(super) const ACK_FRAME: [u8; 48] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x07, // op Ack
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x00, 0x00, 0x00, 0x00, // data_len 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 0
    0xc8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 200
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x62, 0x20, 0xcf, 0x76, // header_crc CRC32C of bytes [0, 44)
];

/// Bye: see [`BYE`] for the fields.
#[rustfmt::skip]
pub(super) const BYE_FRAME: [u8; 48] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x08, // op Bye
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x04, 0x00, 0x00, 0x00, // epoch 4
    0x00, 0x00, 0x00, 0x00, // data_len 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 0
    0xc8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 200
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x86, 0x71, 0x75, 0xf6, // header_crc CRC32C of bytes [0, 44)
];

/// Reject: see [`REJECT`] for the fields.
#[rustfmt::skip]
pub(super) const REJECT_FRAME: [u8; 64] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x09, // op Reject
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x02, 0x00, 0x00, 0x00, // epoch 2
    0x10, 0x00, 0x00, 0x00, // data_len 16
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 0
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x8d, 0xa2, 0xe2, 0xb2, // header_crc CRC32C of bytes [0, 44)
    0x02, 0x00, // reason 2 (StaleEpoch)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // padding
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // detail 7
];

/// Probe: see [`PROBE`] for the fields.
#[rustfmt::skip]
pub(super) const PROBE_FRAME: [u8; 48] = [
    b'I', b'O', b'M', b'S', // magic
    0x01, // version 1
    0x0a, // op Probe
    0x00, 0x00, // flags: none
    0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, // session 0x123456789abcdef
    0x03, 0x00, 0x00, 0x00, // epoch 3
    0x00, 0x00, 0x00, 0x00, // data_len 0
    0x6a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // sn 106
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ack 0
    0x00, 0x00, 0x00, 0x00, // payload_crc 0 (no VALIDATE)
    0x58, 0x3e, 0xfe, 0x3c, // header_crc CRC32C of bytes [0, 44)
];

/// Parsed [`HELLO_FRAME`].
pub(super) const HELLO: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 0,
    ack: 0,
    validate: false,
    stream: false,
    body: Body::Hello {
        base_sn: 100,
        next_sn: 105,
        token: 0x0f1e_2d3c_4b5a_6978,
        window: 2048,
        replay: true,
    },
};

/// Parsed [`WELCOME_FRAME`].
pub(super) const WELCOME: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 0,
    ack: 0,
    validate: false,
    stream: false,
    body: Body::Welcome {
        instance: 0xcafe_f00d_d15e_a5e5,
        resume_from: 103,
        incarnation: 0x1122_3344_5566_7788,
        window: 1024,
        known: true,
    },
};

/// Parsed [`WRITE_FRAME`].
pub(super) const WRITE: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 104,
    ack: 0,
    validate: true,
    stream: true,
    body: Body::Write { data: b"iom!" },
};

/// Parsed [`WRITE_COMP_FRAME`].
pub(super) const WRITE_COMP: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 104,
    ack: 105,
    validate: false,
    stream: false,
    body: Body::WriteComp,
};

/// Parsed [`READ_FRAME`].
pub(super) const READ: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 105,
    ack: 0,
    validate: true,
    stream: false,
    body: Body::Read {
        len: 4096,
        request: &[],
    },
};

/// Parsed [`READ_COMP_FRAME`].
pub(super) const READ_COMP: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 105,
    ack: 106,
    validate: false,
    stream: false,
    body: Body::ReadComp { data: b"xyz" },
};

/// Parsed [`ACK_FRAME`].
pub(super) const ACK: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 0,
    ack: 200,
    validate: false,
    stream: false,
    body: Body::Ack,
};

/// Parsed [`BYE_FRAME`].
pub(super) const BYE: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 4,
    sn: 0,
    ack: 200,
    validate: false,
    stream: false,
    body: Body::Bye,
};

/// Parsed [`REJECT_FRAME`].
pub(super) const REJECT: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 2,
    sn: 0,
    ack: 0,
    validate: false,
    stream: false,
    body: Body::Reject {
        reason: RejectReason::StaleEpoch,
        detail: 7,
    },
};

/// Parsed [`PROBE_FRAME`].
pub(super) const PROBE: IoMsg<'static> = IoMsg {
    session: SESSION,
    epoch: 3,
    sn: 106,
    ack: 0,
    validate: false,
    stream: false,
    body: Body::Probe,
};

/// Every fixture frame with its repr, one per op in wire-value order.
pub(super) const ALL: [(&[u8], IoMsg<'static>); 10] = [
    (&HELLO_FRAME, HELLO),
    (&WELCOME_FRAME, WELCOME),
    (&WRITE_FRAME, WRITE),
    (&WRITE_COMP_FRAME, WRITE_COMP),
    (&READ_FRAME, READ),
    (&READ_COMP_FRAME, READ_COMP),
    (&ACK_FRAME, ACK),
    (&BYE_FRAME, BYE),
    (&REJECT_FRAME, REJECT),
    (&PROBE_FRAME, PROBE),
];

/// Recomputes the payload CRC (if `validate`) and the header CRC of `frame`
/// in place, after a test edited some of its bytes.
pub(super) fn reseal(frame: &mut [u8], validate: bool) {
    if validate {
        let crc = crc32c(&frame[HEADER_LEN..]);
        frame[40..44].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32c(&frame[..HEADER_CRC_OFFSET]);
    frame[HEADER_CRC_OFFSET..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

/// A seeded splitmix64 generator: tests are reproducible.
pub(super) struct SplitMix(pub(super) u64);

impl SplitMix {
    /// The next 64 random bits.
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A u64 biased towards the edges (0, 1, max, SN_MAX) half of the time.
    pub(super) fn edgy(&mut self) -> u64 {
        match self.below(8) {
            0 => 0,
            1 => 1,
            2 => u64::MAX,
            3 => super::SN_MAX,
            _ => self.next(),
        }
    }
}

/// A random valid message; `data` supplies the bytes of `Write`/`ReadComp`.
pub(super) fn random_msg<'a>(rng: &mut SplitMix, data: &'a [u8]) -> IoMsg<'a> {
    let data = &data[..rng.below(data.len() as u64 + 1) as usize];
    let body = match rng.below(10) {
        0 => Body::Hello {
            base_sn: rng.edgy(),
            next_sn: rng.edgy(),
            token: rng.edgy(),
            window: rng.edgy() as u32,
            replay: rng.below(2) == 1,
        },
        1 => Body::Welcome {
            instance: rng.edgy(),
            resume_from: rng.edgy(),
            incarnation: rng.edgy(),
            window: rng.edgy() as u32,
            known: rng.below(2) == 1,
        },
        2 => Body::Write { data },
        3 => Body::WriteComp,
        4 => Body::Read {
            len: rng.below(u64::from(MAX_DATA_LEN) + 1) as u32,
            request: data,
        },
        5 => Body::ReadComp { data },
        6 => Body::Ack,
        7 => Body::Bye,
        8 => Body::Probe,
        _ => Body::Reject {
            reason: RejectReason::ALL[rng.below(RejectReason::ALL.len() as u64) as usize],
            detail: rng.edgy(),
        },
    };
    IoMsg {
        session: rng.edgy(),
        epoch: rng.edgy() as u32,
        sn: rng.edgy(),
        ack: rng.edgy(),
        validate: rng.below(2) == 1,
        stream: matches!(body, Body::Write { .. }) && rng.below(2) == 1,
        body,
    }
}
