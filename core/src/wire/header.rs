//! The byte layouts: the header and the fixed control-op bodies, as zerocopy
//! structs of unaligned little-endian fields; the CRC32C itself is in
//! [`super::crc32c`].
//!
//! Every struct here has alignment 1 and no padding, so converting between it
//! and a byte array of its size is infallible and checked at compile time.

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::HEADER_LEN;

/// Flag bit: the payload carries a CRC32C in `payload_crc`.
pub(super) const FLAG_VALIDATE: u16 = 1 << 0;
/// Flag bit: no per-message completion wanted (Write only).
pub(super) const FLAG_STREAM: u16 = 1 << 1;
/// Every flag bit version 1 knows.
pub(super) const KNOWN_FLAGS: u16 = FLAG_VALIDATE | FLAG_STREAM;

/// Payload length of `Hello`.
pub(super) const HELLO_BODY_LEN: usize = 32;
/// Payload length of `Welcome`.
pub(super) const WELCOME_BODY_LEN: usize = 32;
/// Payload length of `Read`.
pub(super) const READ_BODY_LEN: usize = 4;
/// Payload length of `Reject`.
pub(super) const REJECT_BODY_LEN: usize = 16;

/// Offset of `header_crc`: the header CRC covers the bytes before it.
pub(super) const HEADER_CRC_OFFSET: usize = 44;

#[cfg(test)]
pub(super) use super::crc32c::crc32c;

/// The fixed 48-byte frame header.
#[derive(Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct Header {
    pub(super) magic: [u8; 4],
    pub(super) version: u8,
    pub(super) op: u8,
    pub(super) flags: U16,
    pub(super) session: U64,
    pub(super) epoch: U32,
    pub(super) data_len: U32,
    pub(super) sn: U64,
    pub(super) ack: U64,
    pub(super) payload_crc: U32,
    pub(super) header_crc: U32,
}

const _: () = assert!(size_of::<Header>() == HEADER_LEN);
const _: () = assert!(core::mem::offset_of!(Header, header_crc) == HEADER_CRC_OFFSET);

#[cfg(test)]
impl Header {
    /// CRC32C of the header bytes before `header_crc`.
    pub(super) fn compute_crc(bytes: &[u8; HEADER_LEN]) -> u32 {
        let (covered, _) = bytes.split_at(HEADER_CRC_OFFSET);
        crc32c(covered)
    }
}

/// Payload of `Hello`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct HelloBody {
    pub(super) base_sn: U64,
    pub(super) next_sn: U64,
    pub(super) token: U64,
    pub(super) window: U32,
    pub(super) replay: u8,
    pub(super) padding: [u8; 3],
}

const _: () = assert!(size_of::<HelloBody>() == HELLO_BODY_LEN);

/// Payload of `Welcome`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct WelcomeBody {
    pub(super) instance: U64,
    pub(super) resume_from: U64,
    pub(super) incarnation: U64,
    pub(super) window: U32,
    pub(super) known: u8,
    pub(super) padding: [u8; 3],
}

const _: () = assert!(size_of::<WelcomeBody>() == WELCOME_BODY_LEN);

/// Payload of `Read`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct ReadBody {
    pub(super) len: U32,
}

const _: () = assert!(size_of::<ReadBody>() == READ_BODY_LEN);

/// Payload of `Reject`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(super) struct RejectBody {
    pub(super) reason: U16,
    pub(super) padding: [u8; 6],
    pub(super) detail: U64,
}

const _: () = assert!(size_of::<RejectBody>() == REJECT_BODY_LEN);

#[cfg(test)]
mod tests {
    use super::super::fixtures::{self, ALL};
    use super::super::IoMsg;
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The catalogue check value of CRC-32/ISCSI over "123456789".
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn header_fields_sit_at_the_documented_offsets() {
        use core::mem::offset_of;
        let offsets = [
            offset_of!(Header, magic),
            offset_of!(Header, version),
            offset_of!(Header, op),
            offset_of!(Header, flags),
            offset_of!(Header, session),
            offset_of!(Header, epoch),
            offset_of!(Header, data_len),
            offset_of!(Header, sn),
            offset_of!(Header, ack),
            offset_of!(Header, payload_crc),
            offset_of!(Header, header_crc),
        ];
        assert_eq!(offsets, [0, 4, 5, 6, 8, 16, 20, 24, 32, 40, 44]);
    }

    /// The header a fixture's repr should produce, built field by field.
    fn construct(m: &IoMsg<'_>, payload: &[u8]) -> [u8; HEADER_LEN] {
        let flags =
            if m.validate { FLAG_VALIDATE } else { 0 } | if m.stream { FLAG_STREAM } else { 0 };
        let mut header = Header {
            magic: *b"IOMS",
            version: 1,
            op: m.body.op() as u8,
            flags: U16::new(flags),
            session: U64::new(m.session),
            epoch: U32::new(m.epoch),
            data_len: U32::new(payload.len() as u32),
            sn: U64::new(m.sn),
            ack: U64::new(m.ack),
            payload_crc: U32::new(if m.validate { crc32c(payload) } else { 0 }),
            header_crc: U32::ZERO,
        };
        let bytes: [u8; HEADER_LEN] = zerocopy::transmute!(header);
        header.header_crc = U32::new(Header::compute_crc(&bytes));
        zerocopy::transmute!(header)
    }

    #[test]
    fn construct_header_of_each_fixture_gives_its_bytes() {
        for (frame, m) in ALL {
            let (head, payload) = frame.split_at(HEADER_LEN);
            assert_eq!(construct(&m, payload), head, "{}", m.body.op());
        }
    }

    #[test]
    fn deconstruct_header_of_each_fixture_shows_its_fields() {
        for (frame, m) in ALL {
            let op = m.body.op();
            let (head, payload) = frame.split_first_chunk::<HEADER_LEN>().unwrap();
            let h: &Header = zerocopy::transmute_ref!(head);
            assert_eq!(h.magic, *b"IOMS", "{op}");
            assert_eq!(h.version, 1, "{op}");
            assert_eq!(h.op, op as u8, "{op}");
            assert_eq!(h.flags.get() & FLAG_VALIDATE != 0, m.validate, "{op}");
            assert_eq!(h.flags.get() & FLAG_STREAM != 0, m.stream, "{op}");
            assert_eq!(h.session.get(), m.session, "{op}");
            assert_eq!(h.epoch.get(), m.epoch, "{op}");
            assert_eq!(h.data_len.get() as usize, payload.len(), "{op}");
            assert_eq!(h.sn.get(), m.sn, "{op}");
            assert_eq!(h.ack.get(), m.ack, "{op}");
            let payload_crc = if m.validate { crc32c(payload) } else { 0 };
            assert_eq!(h.payload_crc.get(), payload_crc, "{op}");
            assert_eq!(h.header_crc.get(), crc32c(&frame[..44]), "{op}");
        }
    }

    #[test]
    fn deconstruct_control_bodies_shows_their_fields() {
        let hello: &HelloBody =
            zerocopy::transmute_ref!(fixtures::HELLO_FRAME[48..].first_chunk::<32>().unwrap());
        assert_eq!(
            (
                hello.base_sn.get(),
                hello.next_sn.get(),
                hello.token.get(),
                hello.window.get(),
                hello.replay,
                hello.padding
            ),
            (100, 105, 0x0f1e_2d3c_4b5a_6978, 2048, 1, [0; 3])
        );
        let welcome: &WelcomeBody =
            zerocopy::transmute_ref!(fixtures::WELCOME_FRAME[48..].first_chunk::<32>().unwrap());
        assert_eq!(
            (
                welcome.instance.get(),
                welcome.resume_from.get(),
                welcome.incarnation.get(),
                welcome.window.get(),
                welcome.known,
                welcome.padding
            ),
            (
                0xcafe_f00d_d15e_a5e5,
                103,
                0x1122_3344_5566_7788,
                1024,
                1,
                [0; 3]
            )
        );
        let read: &ReadBody =
            zerocopy::transmute_ref!(fixtures::READ_FRAME[48..].first_chunk::<4>().unwrap());
        assert_eq!(read.len.get(), 4096);
        let reject: &RejectBody =
            zerocopy::transmute_ref!(fixtures::REJECT_FRAME[48..].first_chunk::<16>().unwrap());
        assert_eq!(
            (reject.reason.get(), reject.padding, reject.detail.get()),
            (2, [0; 6], 7)
        );
    }

    #[test]
    fn body_fields_sit_at_the_documented_offsets() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(HelloBody, next_sn), 8);
        assert_eq!(offset_of!(HelloBody, token), 16);
        assert_eq!(offset_of!(HelloBody, window), 24);
        assert_eq!(offset_of!(HelloBody, replay), 28);
        assert_eq!(offset_of!(HelloBody, padding), 29);
        assert_eq!(offset_of!(WelcomeBody, resume_from), 8);
        assert_eq!(offset_of!(WelcomeBody, incarnation), 16);
        assert_eq!(offset_of!(WelcomeBody, window), 24);
        assert_eq!(offset_of!(WelcomeBody, known), 28);
        assert_eq!(offset_of!(WelcomeBody, padding), 29);
        assert_eq!(offset_of!(RejectBody, padding), 2);
        assert_eq!(offset_of!(RejectBody, detail), 8);
    }
}
