//! The io_msg wire format, version 1.
//!
//! A frame is a fixed 48-byte little-endian header followed by `data_len`
//! payload bytes. The header is one `#[repr(C)]` zerocopy struct of
//! byte-order types, so reading or writing it is a plain copy:
//!
//! ```text
//! offset size field
//!  0     4   magic        b"IOMS"
//!  4     1   version      1
//!  5     1   op           Op as u8
//!  6     2   flags        bit 0 VALIDATE (payload_crc present),
//!                         bit 1 STREAM (no per-message completion; Write only)
//!  8     8   session
//! 16     4   epoch
//! 20     4   data_len     payload bytes after the header
//! 24     8   sn
//! 32     8   ack          cumulative ack, piggybacked
//! 40     4   payload_crc  CRC32C of the payload if VALIDATE, else 0
//! 44     4   header_crc   CRC32C of bytes [0, 44)
//! ```
//!
//! The payload of the control ops has a fixed layout (all little endian):
//!
//! | op | payload |
//! |----|---------|
//! | `Hello`   | 32 bytes: u64 `base_sn`, u64 `next_sn`, u64 `token`, u32 `window`, u8 `replay` (0 or 1), 3 zero bytes |
//! | `Welcome` | 32 bytes: u64 `instance`, u64 `resume_from`, u64 `incarnation`, u32 `window`, u8 `known` (0 or 1), 3 zero bytes |
//! | `Read`    | u32 requested length (at most [`MAX_DATA_LEN`]), then the request's bytes |
//! | `Reject`  | 16 bytes: u16 [`RejectReason`], 6 zero bytes, u64 `detail` |
//! | `WriteComp`, `Ack`, `Bye`, `Probe` | empty (a `Probe` carries the client's next sn in the header's `sn`) |
//! | `Write`, `ReadComp` | the data, at most [`MAX_DATA_LEN`] bytes |
//!
//! # Contract
//!
//! In the style of smoltcp's wire modules, [`IoMsg`] is the parsed form
//! ("repr") of one frame:
//!
//! - [`parse()`] takes exactly one frame (trailing bytes are an error), never
//!   panics on any input, and checks in this order: length of the header,
//!   magic, version, header CRC, op, flags, `data_len` limit, exact frame
//!   length, payload CRC rule, body. The first failed check is reported as a
//!   [`WireError`] that carries the values that explain it.
//! - [`IoMsg::emit`] writes exactly [`IoMsg::buffer_len`] bytes at the start
//!   of the caller's buffer, never allocates and never panics; a buffer that
//!   is too small or a message that cannot be encoded is an error.
//! - Round trip: `parse(emit(m)) == m` for every `m` that emits, and
//!   `emit(parse(b)) == b` byte for byte for every `b` that parses. Every
//!   header and body byte is therefore either represented in [`IoMsg`] or
//!   required to have its one standard value.
//!
//! Sequence numbers are carried as they are; refusing those above
//! [`SN_MAX`] is the job of the sequence tracker and the session, which know
//! what an sn means.

use core::fmt;

pub(crate) mod crc32c;
mod emit;
mod error;
#[cfg(test)]
mod fixtures;
mod header;

/// Payload length of a `Hello` body.
pub const HELLO_BODY_LEN: usize = header::HELLO_BODY_LEN;
/// Payload length of a `Read` body before its request bytes.
pub const READ_BODY_LEN: usize = header::READ_BODY_LEN;
mod parse;

pub use crc32c::{Crc32c, HEADER_COVERED};
pub use error::WireError;
pub use parse::{frame_len, frame_len_with, parse, parse_with};

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"IOMS";
/// The wire format version this module reads and writes.
pub const VERSION: u8 = 1;
/// Length of the fixed header, in bytes.
pub const HEADER_LEN: usize = 48;
/// Largest payload a frame may carry.
pub const MAX_DATA_LEN: u32 = 1 << 20;
/// Largest frame: [`HEADER_LEN`] + [`MAX_DATA_LEN`].
pub const MAX_FRAME_LEN: usize = HEADER_LEN + MAX_DATA_LEN as usize;
/// Sequence numbers above this are refused everywhere (wrap-around is an
/// error, never a silent reset).
pub const SN_MAX: u64 = u64::MAX - (1 << 32);

/// The operation a frame carries.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Client → server: open or resume a session (epoch, base_sn, next_sn).
    Hello = 1,
    /// Server → client: answer to `Hello` (instance, resume_from).
    Welcome = 2,
    /// Client → server: data to store.
    Write = 3,
    /// Server → client: a `Write` was processed.
    WriteComp = 4,
    /// Client → server: request for data.
    Read = 5,
    /// Server → client: the data a `Read` asked for.
    ReadComp = 6,
    /// Either way: a pure cumulative acknowledgement.
    Ack = 7,
    /// Either way: orderly end of the session.
    Bye = 8,
    /// Server → client: the frame or connection was refused.
    Reject = 9,
    /// Client → server: "every sn below this frame's `sn` has been sent on
    /// this connection"; the server reports the ones it never got as lost
    /// on a live connection and answers with an `Ack`.
    Probe = 10,
}

impl Op {
    /// Every op, in wire-value order.
    pub const ALL: [Op; 10] = [
        Op::Hello,
        Op::Welcome,
        Op::Write,
        Op::WriteComp,
        Op::Read,
        Op::ReadComp,
        Op::Ack,
        Op::Bye,
        Op::Reject,
        Op::Probe,
    ];

    /// The op with wire value `v`, or `None` if there is none.
    pub const fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Hello,
            2 => Op::Welcome,
            3 => Op::Write,
            4 => Op::WriteComp,
            5 => Op::Read,
            6 => Op::ReadComp,
            7 => Op::Ack,
            8 => Op::Bye,
            9 => Op::Reject,
            10 => Op::Probe,
            _ => return None,
        })
    }

    /// The op's name as used in code, logs and reports (e.g. `"WriteComp"`).
    pub const fn name(self) -> &'static str {
        match self {
            Op::Hello => "Hello",
            Op::Welcome => "Welcome",
            Op::Write => "Write",
            Op::WriteComp => "WriteComp",
            Op::Read => "Read",
            Op::ReadComp => "ReadComp",
            Op::Ack => "Ack",
            Op::Bye => "Bye",
            Op::Reject => "Reject",
            Op::Probe => "Probe",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a server refused a frame or a connection (body of [`Op::Reject`]).
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The frame failed to parse.
    Malformed = 1,
    /// `Hello` with an epoch at or below the session's current epoch.
    StaleEpoch = 2,
    /// Too many frames arrived before the handshake completed.
    BacklogOverflow = 3,
    /// The server's session table is full.
    SessionTableFull = 4,
    /// A frame for another session arrived on a bound connection.
    SessionMismatch = 5,
    /// `Hello` whose base_sn/next_sn contradict the server's state.
    BadHandshake = 6,
    /// The sn lies beyond the receive window.
    TooFar = 7,
    /// The server is shutting down.
    ShuttingDown = 8,
    /// The op is not valid in this direction or state.
    Unexpected = 9,
    /// A `Read` asked for more bytes than the server answers.
    ReadTooLong = 10,
    /// A `Hello` for a session that another client owns: its token differs
    /// from the one that opened the session. Nothing about the session
    /// changed. Fatal for the client: two clients share a session id.
    SessionOwned = 11,
    /// The session's owner connected again: this older connection is closed.
    Superseded = 12,
    /// A data frame before the connection's `Hello`: frames of a
    /// connection arrive in order and the `Hello` comes first.
    NotBound = 13,
    /// A `Hello` for a session this instance does not know, on a connection
    /// accepted before the instance forgot a closed session's tombstone:
    /// it may be a delayed `Hello` of that session, whose sns the instance
    /// may have delivered. Nothing changed; the client connects again (a
    /// new connection is judged).
    StaleConnection = 14,
    /// A `Hello` whose sns move backwards under the session's token: the
    /// server has seen sns up to `detail` of this session, the `Hello`
    /// says fewer were ever sent. A client restarted with the same session
    /// id and token; its new sns would be taken for the old ones. Fatal
    /// for the client: a restarted client needs a new session id.
    Rewound = 15,
}

impl RejectReason {
    /// Every reason, in wire-value order.
    pub const ALL: [RejectReason; 15] = [
        RejectReason::Malformed,
        RejectReason::StaleEpoch,
        RejectReason::BacklogOverflow,
        RejectReason::SessionTableFull,
        RejectReason::SessionMismatch,
        RejectReason::BadHandshake,
        RejectReason::TooFar,
        RejectReason::ShuttingDown,
        RejectReason::Unexpected,
        RejectReason::ReadTooLong,
        RejectReason::SessionOwned,
        RejectReason::Superseded,
        RejectReason::NotBound,
        RejectReason::StaleConnection,
        RejectReason::Rewound,
    ];

    /// The reason with wire value `v`, or `None` if there is none.
    pub const fn from_u16(v: u16) -> Option<RejectReason> {
        Some(match v {
            1 => RejectReason::Malformed,
            2 => RejectReason::StaleEpoch,
            3 => RejectReason::BacklogOverflow,
            4 => RejectReason::SessionTableFull,
            5 => RejectReason::SessionMismatch,
            6 => RejectReason::BadHandshake,
            7 => RejectReason::TooFar,
            8 => RejectReason::ShuttingDown,
            9 => RejectReason::Unexpected,
            10 => RejectReason::ReadTooLong,
            11 => RejectReason::SessionOwned,
            12 => RejectReason::Superseded,
            13 => RejectReason::NotBound,
            14 => RejectReason::StaleConnection,
            15 => RejectReason::Rewound,
            _ => return None,
        })
    }

    /// The reason's wire value.
    pub const fn as_u16(self) -> u16 {
        self as u16
    }

    /// The reason's name as used in code, logs and reports (e.g. `"StaleEpoch"`).
    pub const fn name(self) -> &'static str {
        match self {
            RejectReason::Malformed => "Malformed",
            RejectReason::StaleEpoch => "StaleEpoch",
            RejectReason::BacklogOverflow => "BacklogOverflow",
            RejectReason::SessionTableFull => "SessionTableFull",
            RejectReason::SessionMismatch => "SessionMismatch",
            RejectReason::BadHandshake => "BadHandshake",
            RejectReason::TooFar => "TooFar",
            RejectReason::ShuttingDown => "ShuttingDown",
            RejectReason::Unexpected => "Unexpected",
            RejectReason::ReadTooLong => "ReadTooLong",
            RejectReason::SessionOwned => "SessionOwned",
            RejectReason::Superseded => "Superseded",
            RejectReason::NotBound => "NotBound",
            RejectReason::StaleConnection => "StaleConnection",
            RejectReason::Rewound => "Rewound",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The op-specific part of an io_msg (the payload, decoded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// Open or resume a session.
    Hello {
        /// The client's oldest unacknowledged sn.
        base_sn: u64,
        /// The sn the client will send next.
        next_sn: u64,
        /// The client's random token: only the session's owner knows it.
        token: u64,
        /// The most unacknowledged sns the client will ever have
        /// outstanding (its send window).
        window: u32,
        /// The client will replay unacknowledged messages after a reconnect.
        replay: bool,
    },
    /// Answer to `Hello`.
    Welcome {
        /// Random per server process start: a new value means lost state.
        instance: u64,
        /// Every sn in `[base_sn, resume_from)` was handed to the server's
        /// application; the client resends from here.
        resume_from: u64,
        /// Names this server's record of the session: new whenever the
        /// server (re)creates it, so a client sees that the record which
        /// answers is not the one that saw its earlier frames.
        incarnation: u64,
        /// The window agreed: at most this many sns past the cumulative
        /// ack may be outstanding.
        window: u32,
        /// The server knew the session (else it started it at `base_sn`).
        known: bool,
    },
    /// Data to store.
    Write {
        /// The data, at most [`MAX_DATA_LEN`] bytes.
        data: &'a [u8],
    },
    /// A `Write` was processed.
    WriteComp,
    /// Request for data.
    Read {
        /// Requested length, at most [`MAX_DATA_LEN`].
        len: u32,
        /// What the application asks for (a key, an offset): opaque bytes
        /// after the length, possibly none.
        request: &'a [u8],
    },
    /// The data a `Read` asked for.
    ReadComp {
        /// The data, at most [`MAX_DATA_LEN`] bytes.
        data: &'a [u8],
    },
    /// A pure cumulative acknowledgement.
    Ack,
    /// Orderly end of the session.
    Bye,
    /// The frame or connection was refused.
    Reject {
        /// Why.
        reason: RejectReason,
        /// A value that explains it (e.g. the offending sn or epoch).
        detail: u64,
    },
    /// The client's position on this connection (in the header's `sn`).
    Probe,
}

impl Body<'_> {
    /// The op that carries this body.
    pub fn op(&self) -> Op {
        match self {
            Body::Hello { .. } => Op::Hello,
            Body::Welcome { .. } => Op::Welcome,
            Body::Write { .. } => Op::Write,
            Body::WriteComp => Op::WriteComp,
            Body::Read { .. } => Op::Read,
            Body::ReadComp { .. } => Op::ReadComp,
            Body::Ack => Op::Ack,
            Body::Bye => Op::Bye,
            Body::Reject { .. } => Op::Reject,
            Body::Probe => Op::Probe,
        }
    }

    /// Whether the body carries protocol state (`Hello`, `Welcome`,
    /// `Read`, `Reject`). The header CRC does not cover a body, so the
    /// session layer sends these with VALIDATE and refuses them without.
    pub fn carries_state(&self) -> bool {
        matches!(
            self,
            Body::Hello { .. } | Body::Welcome { .. } | Body::Read { .. } | Body::Reject { .. }
        )
    }

    /// Number of payload bytes this body takes on the wire.
    pub fn payload_len(&self) -> usize {
        match self {
            Body::Hello { .. } => header::HELLO_BODY_LEN,
            Body::Welcome { .. } => header::WELCOME_BODY_LEN,
            Body::Write { data } | Body::ReadComp { data } => data.len(),
            Body::Read { request, .. } => header::READ_BODY_LEN + request.len(),
            Body::Reject { .. } => header::REJECT_BODY_LEN,
            Body::WriteComp | Body::Ack | Body::Bye | Body::Probe => 0,
        }
    }
}

/// One io_msg, parsed (the "repr").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoMsg<'a> {
    /// The session id, chosen by the client.
    pub session: u64,
    /// The connection count within the session.
    pub epoch: u32,
    /// The sequence number.
    pub sn: u64,
    /// Cumulative ack, piggybacked.
    pub ack: u64,
    /// The payload carries a CRC32C (flag VALIDATE).
    pub validate: bool,
    /// No per-message completion wanted (flag STREAM; only on Write).
    pub stream: bool,
    /// The op and its payload.
    pub body: Body<'a>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_from_u8_inverts_as_u8_and_refuses_others() {
        for op in Op::ALL {
            assert_eq!(Op::from_u8(op as u8), Some(op));
        }
        for v in 0..=u8::MAX {
            let known = (1..=10).contains(&v);
            assert_eq!(Op::from_u8(v).is_some(), known, "value {v}");
        }
    }

    #[test]
    fn op_name_matches_debug_and_display() {
        for op in Op::ALL {
            assert_eq!(op.name(), std::format!("{op:?}"));
            assert_eq!(std::format!("{op}"), op.name());
        }
    }

    #[test]
    fn reject_reason_from_u16_inverts_as_u16_and_refuses_others() {
        for reason in RejectReason::ALL {
            assert_eq!(RejectReason::from_u16(reason.as_u16()), Some(reason));
        }
        for v in 0..=u16::MAX {
            let known = (1..=15).contains(&v);
            assert_eq!(RejectReason::from_u16(v).is_some(), known, "value {v}");
        }
    }

    #[test]
    fn reject_reason_name_matches_debug_and_display() {
        for reason in RejectReason::ALL {
            assert_eq!(reason.name(), std::format!("{reason:?}"));
            assert_eq!(std::format!("{reason}"), reason.name());
        }
    }

    #[test]
    fn body_op_and_payload_len_follow_the_layout_table() {
        let data = [7u8; 5];
        let cases = [
            (
                Body::Hello {
                    base_sn: 1,
                    next_sn: 2,
                    token: 3,
                    window: 4,
                    replay: true,
                },
                Op::Hello,
                32,
            ),
            (
                Body::Welcome {
                    instance: 1,
                    resume_from: 2,
                    incarnation: 3,
                    window: 4,
                    known: false,
                },
                Op::Welcome,
                32,
            ),
            (Body::Write { data: &data }, Op::Write, 5),
            (Body::WriteComp, Op::WriteComp, 0),
            (
                Body::Read {
                    len: 9,
                    request: b"key",
                },
                Op::Read,
                7,
            ),
            (Body::ReadComp { data: &data[..2] }, Op::ReadComp, 2),
            (Body::Ack, Op::Ack, 0),
            (Body::Bye, Op::Bye, 0),
            (Body::Probe, Op::Probe, 0),
            (
                Body::Reject {
                    reason: RejectReason::TooFar,
                    detail: 3,
                },
                Op::Reject,
                16,
            ),
        ];
        for (body, op, len) in cases {
            assert_eq!(body.op(), op);
            assert_eq!(body.payload_len(), len, "{op}");
        }
    }

    #[test]
    fn max_frame_len_is_header_plus_max_data() {
        assert_eq!(MAX_FRAME_LEN, 48 + (1 << 20));
        assert_eq!(SN_MAX, 0xFFFF_FFFE_FFFF_FFFF);
    }
}
