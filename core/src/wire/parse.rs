//! Bytes → [`IoMsg`].

use zerocopy::transmute_ref;

use super::crc32c::{Crc32c, HEADER_COVERED};
use super::header::{
    Header, HelloBody, ReadBody, RejectBody, WelcomeBody, FLAG_STREAM, FLAG_VALIDATE,
    HELLO_BODY_LEN, KNOWN_FLAGS, READ_BODY_LEN, REJECT_BODY_LEN, WELCOME_BODY_LEN,
};
use super::{Body, IoMsg, Op, RejectReason, WireError, HEADER_LEN, MAGIC, MAX_DATA_LEN, VERSION};

/// The length of the whole frame whose header starts `buf`, for a stream
/// transport that must know where a frame ends before it has all of it.
///
/// Needs the first [`HEADER_LEN`] bytes and checks them as [`parse`] does
/// up to the length limit (magic, version, header CRC, op, flags,
/// `data_len`), so a corrupted length is never trusted.
///
/// # Errors
///
/// [`WireError::Truncated`] with fewer than [`HEADER_LEN`] bytes; the
/// header errors of [`parse`] otherwise.
pub fn frame_len(buf: &[u8]) -> Result<usize, WireError> {
    frame_len_with(buf, &Crc32c::BUILTIN)
}

/// [`frame_len`] with the header CRC computed by `crc`.
///
/// # Errors
///
/// As [`frame_len`].
pub fn frame_len_with(buf: &[u8], crc: &Crc32c) -> Result<usize, WireError> {
    let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
        return Err(WireError::Truncated {
            need: HEADER_LEN,
            have: buf.len(),
        });
    };
    let header = check_header(head, crc)?;
    Ok(HEADER_LEN + header.data_len.get() as usize)
}

/// The checks of a header on its own.
fn check_header<'h>(head: &'h [u8; HEADER_LEN], crc: &Crc32c) -> Result<&'h Header, WireError> {
    let header: &Header = transmute_ref!(head);
    if header.magic != MAGIC {
        return Err(WireError::BadMagic(header.magic));
    }
    if header.version != VERSION {
        return Err(WireError::UnsupportedVersion(header.version));
    }
    let carried = header.header_crc.get();
    let computed = crc.header(covered(head));
    if carried != computed {
        return Err(WireError::HeaderChecksum {
            expected: carried,
            actual: computed,
        });
    }
    let op = Op::from_u8(header.op).ok_or(WireError::UnknownOp(header.op))?;
    let flags = header.flags.get();
    if flags & !KNOWN_FLAGS != 0 || (flags & FLAG_STREAM != 0 && op != Op::Write) {
        return Err(WireError::BadFlags { op, flags });
    }
    let data_len = header.data_len.get();
    if data_len > MAX_DATA_LEN {
        return Err(WireError::TooLong {
            len: u64::from(data_len),
            max: MAX_DATA_LEN,
        });
    }
    Ok(header)
}

/// The bytes of a header that its CRC covers.
#[inline(always)]
fn covered(head: &[u8; HEADER_LEN]) -> &[u8; HEADER_COVERED] {
    let (covered, _) = head
        .split_first_chunk::<HEADER_COVERED>()
        .unwrap_or((&[0; HEADER_COVERED], &[]));
    covered
}

/// Parses exactly one frame.
///
/// `buf` must hold one whole frame and nothing else: missing bytes are
/// [`WireError::Truncated`], extra bytes [`WireError::LengthMismatch`]. The
/// checks run in the order listed in the [module documentation](super), and
/// the first one that fails is returned.
///
/// Never panics, whatever `buf` holds. The CRCs are this build's own
/// ([`Crc32c::BUILTIN`]); [`parse_with`] takes them from a provider.
pub fn parse(buf: &[u8]) -> Result<IoMsg<'_>, WireError> {
    parse_with(buf, &Crc32c::BUILTIN)
}

/// The magic and the version: the first five header bytes, little endian.
const PREFIX: u64 = u32::from_le_bytes(MAGIC) as u64 | (VERSION as u64) << 32;

/// [`parse`] with the CRCs computed by `crc`.
///
/// A frame that passes every header check at once (a single branch over
/// all of them, the usual case) is decoded straight away; any failure goes
/// to the check-by-check path, which finds the first failed check in the
/// documented order. Both accept exactly the same frames.
///
/// # Errors
///
/// As [`parse`].
pub fn parse_with<'a>(buf: &'a [u8], crc: &Crc32c) -> Result<IoMsg<'a>, WireError> {
    let Some((head, payload)) = buf.split_first_chunk::<HEADER_LEN>() else {
        return Err(WireError::Truncated {
            need: HEADER_LEN,
            have: buf.len(),
        });
    };
    // The CRC first: the header's fields are read after the call, instead
    // of being kept across it.
    let header_crc = crc.header(covered(head));
    let header: &Header = transmute_ref!(head);
    let first = head
        .first_chunk::<8>()
        .map_or(0, |w| u64::from_le_bytes(*w));
    let op_byte = header.op;
    let flags = header.flags.get();
    let data_len = header.data_len.get();
    let payload_crc = header.payload_crc.get();
    let validate = flags & FLAG_VALIDATE != 0;
    // Every header check of `check_header` and the length rules of `parse`,
    // without branches between them.
    let fine = (first & 0xFF_FFFF_FFFF == PREFIX)
        & (header.header_crc.get() == header_crc)
        & (op_byte.wrapping_sub(1) < Op::ALL.len() as u8)
        & (flags & !KNOWN_FLAGS == 0)
        & ((flags & FLAG_STREAM == 0) | (op_byte == Op::Write as u8))
        & (data_len <= MAX_DATA_LEN)
        & (data_len as usize == payload.len())
        & (validate | (payload_crc == 0));
    let op = Op::from_u8(op_byte);
    let (true, Some(op)) = (fine, op) else {
        return parse_checked(buf, crc);
    };
    if validate {
        let computed = crc.checksum(payload);
        if payload_crc != computed {
            return Err(WireError::PayloadChecksum {
                expected: payload_crc,
                actual: computed,
            });
        }
    }
    Ok(IoMsg {
        session: header.session.get(),
        epoch: header.epoch.get(),
        sn: header.sn.get(),
        ack: header.ack.get(),
        validate,
        stream: flags & FLAG_STREAM != 0,
        body: match op {
            Op::Write => Body::Write { data: payload },
            Op::Ack if payload.is_empty() => Body::Ack,
            _ => parse_body(op, payload)?,
        },
    })
}

/// [`parse_with`] check by check, in the documented order: the frames the
/// single branch of `parse_with` refuses come here for their exact error.
#[cold]
#[inline(never)]
fn parse_checked<'a>(buf: &'a [u8], crc: &Crc32c) -> Result<IoMsg<'a>, WireError> {
    let Some((head, payload)) = buf.split_first_chunk::<HEADER_LEN>() else {
        return Err(WireError::Truncated {
            need: HEADER_LEN,
            have: buf.len(),
        });
    };
    let header = check_header(head, crc)?;
    let op = Op::from_u8(header.op).ok_or(WireError::UnknownOp(header.op))?;
    let flags = header.flags.get();
    let data_len = header.data_len.get();
    let declared = data_len as usize;
    if payload.len() < declared {
        return Err(WireError::Truncated {
            need: HEADER_LEN + declared,
            have: buf.len(),
        });
    }
    if payload.len() > declared {
        return Err(WireError::LengthMismatch {
            declared: data_len,
            actual: payload.len(),
        });
    }
    let validate = flags & FLAG_VALIDATE != 0;
    let payload_crc = header.payload_crc.get();
    if validate {
        let computed = crc.checksum(payload);
        if payload_crc != computed {
            return Err(WireError::PayloadChecksum {
                expected: payload_crc,
                actual: computed,
            });
        }
    } else if payload_crc != 0 {
        return Err(WireError::UnexpectedPayloadChecksum(payload_crc));
    }

    Ok(IoMsg {
        session: header.session.get(),
        epoch: header.epoch.get(),
        sn: header.sn.get(),
        ack: header.ack.get(),
        validate,
        stream: flags & FLAG_STREAM != 0,
        body: parse_body(op, payload)?,
    })
}

/// Decodes the payload of `op`; `payload.len() <= MAX_DATA_LEN` already holds.
fn parse_body(op: Op, payload: &[u8]) -> Result<Body<'_>, WireError> {
    Ok(match op {
        Op::Hello => {
            let body: &HelloBody = transmute_ref!(fixed::<HELLO_BODY_LEN>(op, payload)?);
            let replay = bool_byte(op, body.replay)?;
            if body.padding != [0; 3] {
                return Err(WireError::NonZeroPadding { op });
            }
            Body::Hello {
                base_sn: body.base_sn.get(),
                next_sn: body.next_sn.get(),
                token: body.token.get(),
                window: body.window.get(),
                replay,
            }
        }
        Op::Welcome => {
            let body: &WelcomeBody = transmute_ref!(fixed::<WELCOME_BODY_LEN>(op, payload)?);
            let known = bool_byte(op, body.known)?;
            if body.padding != [0; 3] {
                return Err(WireError::NonZeroPadding { op });
            }
            Body::Welcome {
                instance: body.instance.get(),
                resume_from: body.resume_from.get(),
                incarnation: body.incarnation.get(),
                window: body.window.get(),
                known,
            }
        }
        Op::Write => Body::Write { data: payload },
        Op::ReadComp => Body::ReadComp { data: payload },
        Op::Read => {
            let Some((fixed_part, request)) = payload.split_first_chunk::<READ_BODY_LEN>() else {
                return Err(WireError::BodyLength {
                    op,
                    len: payload.len() as u32,
                    expected: READ_BODY_LEN as u32,
                });
            };
            let body: &ReadBody = transmute_ref!(fixed_part);
            let len = body.len.get();
            if len > MAX_DATA_LEN {
                return Err(WireError::TooLong {
                    len: u64::from(len),
                    max: MAX_DATA_LEN,
                });
            }
            Body::Read { len, request }
        }
        Op::Reject => {
            let body: &RejectBody = transmute_ref!(fixed::<REJECT_BODY_LEN>(op, payload)?);
            let code = body.reason.get();
            let reason =
                RejectReason::from_u16(code).ok_or(WireError::UnknownRejectReason(code))?;
            if body.padding != [0; 6] {
                return Err(WireError::NonZeroPadding { op });
            }
            Body::Reject {
                reason,
                detail: body.detail.get(),
            }
        }
        Op::WriteComp => {
            fixed::<0>(op, payload)?;
            Body::WriteComp
        }
        Op::Ack => {
            fixed::<0>(op, payload)?;
            Body::Ack
        }
        Op::Bye => {
            fixed::<0>(op, payload)?;
            Body::Bye
        }
        Op::Probe => {
            fixed::<0>(op, payload)?;
            Body::Probe
        }
    })
}

/// `payload` as an array of the fixed size `N` of `op`'s body.
fn fixed<const N: usize>(op: Op, payload: &[u8]) -> Result<&[u8; N], WireError> {
    payload.try_into().map_err(|_| WireError::BodyLength {
        op,
        // Both lengths are at most MAX_DATA_LEN, which fits a u32.
        len: payload.len() as u32,
        expected: N as u32,
    })
}

/// A boolean byte: 0 or 1, anything else is an error.
fn bool_byte(op: Op, value: u8) -> Result<bool, WireError> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(WireError::BadBool { op, value }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{self, reseal, SplitMix, ALL};
    use super::super::header::crc32c;
    use super::super::MAX_FRAME_LEN;
    use super::*;
    use std::vec::Vec;

    macro_rules! parse_fixture_tests {
        ($($name:ident: $frame:ident => $repr:ident,)*) => {$(
            #[test]
            fn $name() {
                assert_eq!(parse(&fixtures::$frame), Ok(fixtures::$repr));
            }
        )*};
    }

    parse_fixture_tests! {
        parse_hello: HELLO_FRAME => HELLO,
        parse_welcome: WELCOME_FRAME => WELCOME,
        parse_write: WRITE_FRAME => WRITE,
        parse_write_comp: WRITE_COMP_FRAME => WRITE_COMP,
        parse_read: READ_FRAME => READ,
        parse_read_comp: READ_COMP_FRAME => READ_COMP,
        parse_ack: ACK_FRAME => ACK,
        parse_bye: BYE_FRAME => BYE,
        parse_probe: PROBE_FRAME => PROBE,
        parse_reject: REJECT_FRAME => REJECT,
    }

    /// `frame` with its `data_len` set to `len`, resealed.
    fn with_data_len(frame: &[u8], len: u32, validate: bool) -> Vec<u8> {
        let mut f = frame.to_vec();
        f[20..24].copy_from_slice(&len.to_le_bytes());
        reseal(&mut f, validate);
        f
    }

    #[test]
    fn short_header_gives_truncated() {
        assert_eq!(
            parse(&fixtures::ACK_FRAME[..47]),
            Err(WireError::Truncated { need: 48, have: 47 })
        );
        assert_eq!(parse(&[]), Err(WireError::Truncated { need: 48, have: 0 }));
    }

    #[test]
    fn short_payload_gives_truncated_with_the_declared_length() {
        assert_eq!(
            parse(&fixtures::WRITE_FRAME[..51]),
            Err(WireError::Truncated { need: 52, have: 51 })
        );
    }

    #[test]
    fn truncation_at_every_length_gives_truncated() {
        for (frame, m) in ALL {
            for n in 0..frame.len() {
                let need = if n < HEADER_LEN {
                    HEADER_LEN
                } else {
                    frame.len()
                };
                assert_eq!(
                    parse(&frame[..n]),
                    Err(WireError::Truncated { need, have: n }),
                    "{} cut to {n}",
                    m.body.op()
                );
            }
        }
    }

    #[test]
    fn bad_magic_gives_bad_magic() {
        let mut f = fixtures::BYE_FRAME;
        f[..4].copy_from_slice(b"IOMT");
        assert_eq!(parse(&f), Err(WireError::BadMagic(*b"IOMT")));
    }

    #[test]
    fn other_version_gives_unsupported_version() {
        for version in [0, 2, 255] {
            let mut f = fixtures::BYE_FRAME;
            f[4] = version;
            reseal(&mut f, false);
            assert_eq!(parse(&f), Err(WireError::UnsupportedVersion(version)));
        }
    }

    #[test]
    fn edited_header_gives_header_checksum_with_both_values() {
        let mut f = fixtures::ACK_FRAME;
        let carried = u32::from_le_bytes([f[44], f[45], f[46], f[47]]);
        f[24] ^= 1; // sn 0 -> 1
        let actual = crc32c(&f[..44]);
        assert_ne!(carried, actual);
        assert_eq!(
            parse(&f),
            Err(WireError::HeaderChecksum {
                expected: carried,
                actual
            })
        );
    }

    #[test]
    fn unassigned_op_gives_unknown_op() {
        for op in [0, 11, 0x80, 255] {
            let mut f = fixtures::ACK_FRAME;
            f[5] = op;
            reseal(&mut f, false);
            assert_eq!(parse(&f), Err(WireError::UnknownOp(op)));
        }
    }

    #[test]
    fn unknown_flag_bits_give_bad_flags() {
        for bit in 2..16 {
            let flags = 1u16 << bit;
            let mut f = fixtures::WRITE_COMP_FRAME;
            f[6..8].copy_from_slice(&flags.to_le_bytes());
            reseal(&mut f, false);
            assert_eq!(
                parse(&f),
                Err(WireError::BadFlags {
                    op: Op::WriteComp,
                    flags
                })
            );
        }
    }

    #[test]
    fn stream_flag_on_any_op_but_write_gives_bad_flags() {
        for (frame, m) in ALL {
            let mut f = frame.to_vec();
            let flags = u16::from_le_bytes([f[6], f[7]]) | FLAG_STREAM;
            f[6..8].copy_from_slice(&flags.to_le_bytes());
            reseal(&mut f, m.validate);
            let op = m.body.op();
            if op == Op::Write {
                assert_eq!(parse(&f), Ok(IoMsg { stream: true, ..m }));
            } else {
                assert_eq!(parse(&f), Err(WireError::BadFlags { op, flags }), "{op}");
            }
        }
    }

    #[test]
    fn data_len_over_max_gives_too_long_before_the_length_check() {
        for len in [MAX_DATA_LEN + 1, u32::MAX] {
            let f = with_data_len(&fixtures::WRITE_FRAME[..HEADER_LEN], len, false);
            assert_eq!(
                parse(&f),
                Err(WireError::TooLong {
                    len: u64::from(len),
                    max: MAX_DATA_LEN
                })
            );
        }
    }

    #[test]
    fn read_len_over_max_gives_too_long() {
        let mut f = fixtures::READ_FRAME;
        f[48..52].copy_from_slice(&(MAX_DATA_LEN + 1).to_le_bytes());
        reseal(&mut f, true);
        assert_eq!(
            parse(&f),
            Err(WireError::TooLong {
                len: u64::from(MAX_DATA_LEN) + 1,
                max: MAX_DATA_LEN
            })
        );
        f[48..52].copy_from_slice(&MAX_DATA_LEN.to_le_bytes());
        reseal(&mut f, true);
        assert_eq!(
            parse(&f).map(|m| m.body),
            Ok(Body::Read {
                len: MAX_DATA_LEN,
                request: &[]
            })
        );
    }

    #[test]
    fn read_bytes_after_the_length_are_its_request() {
        let mut f = fixtures::READ_FRAME.to_vec();
        f.extend_from_slice(b"key");
        f[20..24].copy_from_slice(&(READ_BODY_LEN as u32 + 3).to_le_bytes());
        reseal(&mut f, true);
        let m = parse(&f).unwrap();
        assert!(
            matches!(
                m.body,
                Body::Read {
                    request: b"key",
                    ..
                }
            ),
            "{m:?}"
        );
        let mut again = std::vec![0u8; f.len()];
        assert_eq!(m.emit(&mut again), Ok(f.len()));
        assert_eq!(again, f);
    }

    #[test]
    fn trailing_bytes_give_length_mismatch() {
        let mut f = fixtures::WRITE_FRAME.to_vec();
        f.push(0);
        assert_eq!(
            parse(&f),
            Err(WireError::LengthMismatch {
                declared: 4,
                actual: 5
            })
        );
    }

    #[test]
    fn largest_write_parses_and_one_more_byte_does_not() {
        let mut f = with_data_len(&fixtures::WRITE_COMP_FRAME, MAX_DATA_LEN, false);
        f[5] = Op::Write as u8;
        f.resize(MAX_FRAME_LEN, 0x5a);
        reseal(&mut f, false);
        let m = parse(&f).expect("largest frame parses");
        assert_eq!(m.body.payload_len(), MAX_DATA_LEN as usize);
        f.push(0);
        assert_eq!(
            parse(&f),
            Err(WireError::LengthMismatch {
                declared: MAX_DATA_LEN,
                actual: MAX_DATA_LEN as usize + 1
            })
        );
    }

    #[test]
    fn control_op_with_wrong_payload_size_gives_body_length() {
        for (frame, m) in ALL {
            let op = m.body.op();
            if matches!(op, Op::Write | Op::ReadComp) {
                continue;
            }
            let expected = m.body.payload_len() as u32;
            let lens = if op == Op::Read {
                // Bytes past the length are the request: only a short
                // payload is wrong.
                [0, 1, READ_BODY_LEN as u32 - 1]
            } else {
                [expected.wrapping_sub(1), expected + 1, expected + 8]
            };
            for len in lens {
                if len > 64 {
                    continue; // expected was 0
                }
                let mut f = with_data_len(&frame[..HEADER_LEN], len, m.validate);
                f.resize(HEADER_LEN + len as usize, 0);
                reseal(&mut f, m.validate);
                assert_eq!(
                    parse(&f),
                    Err(WireError::BodyLength { op, len, expected }),
                    "{op} with {len} payload bytes"
                );
            }
        }
    }

    #[test]
    fn edited_payload_with_validate_gives_payload_checksum() {
        let mut f = fixtures::WRITE_FRAME;
        let carried = crc32c(b"iom!");
        f[51] = b'?';
        assert_eq!(
            parse(&f),
            Err(WireError::PayloadChecksum {
                expected: carried,
                actual: crc32c(b"iom?")
            })
        );
    }

    #[test]
    fn payload_crc_without_validate_gives_unexpected_payload_checksum() {
        let mut f = fixtures::READ_COMP_FRAME;
        f[40..44].copy_from_slice(&crc32c(b"xyz").to_le_bytes());
        reseal(&mut f, false);
        assert_eq!(
            parse(&f),
            Err(WireError::UnexpectedPayloadChecksum(crc32c(b"xyz")))
        );
    }

    #[test]
    fn nonzero_padding_gives_non_zero_padding() {
        let cases: [(&[u8], Op, core::ops::Range<usize>); 3] = [
            (&fixtures::HELLO_FRAME, Op::Hello, 77..80),
            (&fixtures::WELCOME_FRAME, Op::Welcome, 77..80),
            (&fixtures::REJECT_FRAME, Op::Reject, 50..56),
        ];
        for (frame, op, padding) in cases {
            for i in padding {
                let mut f = frame.to_vec();
                f[i] = 0x01;
                reseal(&mut f, false);
                assert_eq!(parse(&f), Err(WireError::NonZeroPadding { op }), "byte {i}");
            }
        }
    }

    #[test]
    fn boolean_byte_other_than_0_or_1_gives_bad_bool() {
        for (frame, op) in [
            (fixtures::HELLO_FRAME, Op::Hello),
            (fixtures::WELCOME_FRAME, Op::Welcome),
        ] {
            for value in [2, 0x80, 255] {
                let mut f = frame;
                f[76] = value;
                reseal(&mut f, false);
                assert_eq!(parse(&f), Err(WireError::BadBool { op, value }));
            }
            let mut f = frame;
            f[76] = 0;
            reseal(&mut f, false);
            assert!(parse(&f).is_ok(), "{op} with false");
        }
    }

    #[test]
    fn unassigned_reject_reason_gives_unknown_reject_reason() {
        for code in [0, 16, u16::MAX] {
            let mut f = fixtures::REJECT_FRAME;
            f[48..50].copy_from_slice(&code.to_le_bytes());
            reseal(&mut f, false);
            assert_eq!(parse(&f), Err(WireError::UnknownRejectReason(code)));
        }
    }

    #[test]
    fn flipping_any_header_bit_or_byte_makes_parse_fail() {
        for (frame, m) in ALL {
            for i in 0..HEADER_LEN {
                for mask in [1u8, 2, 4, 8, 16, 32, 64, 128, 0xff] {
                    let mut f = frame.to_vec();
                    f[i] ^= mask;
                    assert!(
                        parse(&f).is_err(),
                        "{} parsed with byte {i} ^ {mask:#x}",
                        m.body.op()
                    );
                }
            }
        }
    }

    #[test]
    fn flipping_any_payload_bit_of_a_validated_frame_makes_parse_fail() {
        for (frame, m) in ALL.iter().filter(|(_, m)| m.validate) {
            for i in HEADER_LEN..frame.len() {
                for bit in 0..8 {
                    let mut f = frame.to_vec();
                    f[i] ^= 1 << bit;
                    assert!(
                        matches!(parse(&f), Err(WireError::PayloadChecksum { .. })),
                        "{} payload byte {i} bit {bit}",
                        m.body.op()
                    );
                }
            }
        }
    }

    #[test]
    fn the_single_branch_and_the_check_by_check_path_agree_on_every_mutant() {
        let mut rng = SplitMix(0x5eed_0002);
        let crc = Crc32c::BUILTIN;
        let mut fast_ok = 0;
        for _ in 0..50_000 {
            let (frame, m) = ALL[rng.below(ALL.len() as u64) as usize];
            let mut f = frame.to_vec();
            for _ in 0..=rng.below(2) {
                let i = rng.below(f.len() as u64) as usize;
                // Mostly the header, where the single branch decides.
                let i = if rng.below(4) == 0 { i } else { i % HEADER_LEN };
                f[i] = rng.next() as u8;
            }
            if rng.below(2) == 0 {
                reseal(&mut f, m.validate);
            }
            if rng.below(4) == 0 {
                f.truncate(rng.below(f.len() as u64 + 1) as usize);
            }
            let fast = parse_with(&f, &crc);
            fast_ok += u32::from(fast.is_ok());
            assert_eq!(fast, parse_checked(&f, &crc), "{f:02x?}");
        }
        for (frame, m) in ALL {
            assert_eq!(parse_with(frame, &crc), Ok(m));
            assert_eq!(parse_checked(frame, &crc), Ok(m));
        }
        assert!(fast_ok > 1000, "only {fast_ok} mutants parsed");
    }

    #[test]
    fn random_mutations_never_panic_and_reemit_when_they_parse() {
        let mut rng = SplitMix(0x5eed_0001);
        let mut parsed = 0;
        for _ in 0..20_000 {
            let (frame, m) = ALL[rng.below(9) as usize];
            let mut f = frame.to_vec();
            for _ in 0..=rng.below(3) {
                let i = rng.below(f.len() as u64) as usize;
                f[i] = rng.next() as u8;
            }
            // Half the time make the CRCs right, so the body checks run.
            if rng.below(2) == 0 {
                reseal(&mut f, m.validate);
            }
            if let Ok(p) = parse(&f) {
                parsed += 1;
                let mut out = std::vec![0; p.buffer_len()];
                assert_eq!(p.emit(&mut out), Ok(f.len()));
                assert_eq!(out, f);
            }
        }
        assert!(parsed > 100, "only {parsed} mutants parsed");
    }
}
