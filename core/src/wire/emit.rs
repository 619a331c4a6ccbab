//! [`IoMsg`] → bytes.

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use super::crc32c::{Crc32c, HEADER_COVERED};
use super::header::{
    HelloBody, ReadBody, RejectBody, WelcomeBody, FLAG_STREAM, FLAG_VALIDATE, READ_BODY_LEN,
};
use super::{Body, IoMsg, Op, WireError, HEADER_LEN, MAGIC, MAX_DATA_LEN, VERSION};

impl IoMsg<'_> {
    /// Length of the frame [`emit`](Self::emit) writes: [`HEADER_LEN`] plus
    /// the body's payload length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.body.payload_len()
    }

    /// Writes the frame: exactly [`buffer_len`](Self::buffer_len) bytes at
    /// the start of `buf`, and returns that length. Bytes of `buf` after the
    /// frame are left as they were.
    ///
    /// Fails, writing nothing, with
    /// - [`WireError::TooLong`] if the data of `Write` / `ReadComp` or the
    ///   length of `Read` is over [`MAX_DATA_LEN`],
    /// - [`WireError::BadFlags`] if `stream` is set on an op other than `Write`,
    /// - [`WireError::BufferTooSmall`] if `buf` is shorter than `buffer_len()`.
    ///
    /// Never panics and never allocates. The CRCs are this build's own
    /// ([`Crc32c::BUILTIN`]); [`emit_with`](Self::emit_with) takes them
    /// from a provider.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.emit_with(buf, &Crc32c::BUILTIN)
    }

    /// [`emit`](Self::emit) with the CRCs computed by `crc`.
    ///
    /// # Errors
    ///
    /// As [`emit`](Self::emit).
    pub fn emit_with(&self, buf: &mut [u8], crc: &Crc32c) -> Result<usize, WireError> {
        // The frequent bodies first, each with its length and filling known
        // here instead of matched again in `emit_inner`.
        match self.body {
            Body::WriteComp | Body::Ack | Body::Bye | Body::Probe => {
                return self.emit_inner(buf, self.body.op(), 0, crc, |_, _| {});
            }
            Body::Write { data } | Body::ReadComp { data } => {
                return self.emit_inner(buf, self.body.op(), data.len(), crc, |payload, _| {
                    payload.copy_from_slice(data)
                });
            }
            _ => {}
        }
        self.emit_inner(
            buf,
            self.body.op(),
            self.body.payload_len(),
            crc,
            |payload, body| match *body {
                Body::Hello {
                    base_sn,
                    next_sn,
                    token,
                    window,
                    replay,
                } => payload.copy_from_slice(
                    HelloBody {
                        base_sn: U64::new(base_sn),
                        next_sn: U64::new(next_sn),
                        token: U64::new(token),
                        window: U32::new(window),
                        replay: u8::from(replay),
                        padding: [0; 3],
                    }
                    .as_bytes(),
                ),
                Body::Welcome {
                    instance,
                    resume_from,
                    incarnation,
                    window,
                    known,
                } => payload.copy_from_slice(
                    WelcomeBody {
                        instance: U64::new(instance),
                        resume_from: U64::new(resume_from),
                        incarnation: U64::new(incarnation),
                        window: U32::new(window),
                        known: u8::from(known),
                        padding: [0; 3],
                    }
                    .as_bytes(),
                ),
                Body::Write { data } | Body::ReadComp { data } => payload.copy_from_slice(data),
                Body::Read { len, request } => {
                    let (head, rest) = payload.split_at_mut(READ_BODY_LEN);
                    head.copy_from_slice(ReadBody { len: U32::new(len) }.as_bytes());
                    rest.copy_from_slice(request);
                }
                Body::Reject { reason, detail } => payload.copy_from_slice(
                    RejectBody {
                        reason: U16::new(reason.as_u16()),
                        padding: [0; 6],
                        detail: U64::new(detail),
                    }
                    .as_bytes(),
                ),
                Body::WriteComp | Body::Ack | Body::Bye | Body::Probe => {}
            },
        )
    }

    /// Writes a `Write` or `ReadComp` frame whose `len` payload bytes
    /// `fill` writes in place, straight into `buf` (the body's own `data`
    /// is ignored): the way to put a payload into a lent transmit buffer
    /// without an intermediate copy. Returns the frame's length,
    /// `HEADER_LEN + len`.
    ///
    /// Fails, writing nothing, as [`emit`](Self::emit) does, and with
    /// [`WireError::BadFlags`] (flags 0) if the body is not `Write` or
    /// `ReadComp`.
    pub fn emit_with_payload(
        &self,
        buf: &mut [u8],
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<usize, WireError> {
        self.emit_payload_with(buf, len, &Crc32c::BUILTIN, fill)
    }

    /// [`emit_with_payload`](Self::emit_with_payload) with the CRCs
    /// computed by `crc`.
    ///
    /// # Errors
    ///
    /// As [`emit_with_payload`](Self::emit_with_payload).
    pub fn emit_payload_with(
        &self,
        buf: &mut [u8],
        len: usize,
        crc: &Crc32c,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<usize, WireError> {
        let op = self.body.op();
        if !matches!(op, Op::Write | Op::ReadComp) {
            return Err(WireError::BadFlags { op, flags: 0 });
        }
        self.emit_inner(buf, op, len, crc, |payload, _| fill(payload))
    }

    /// Checks the frame of `op` (the body's), lets `fill` write the
    /// `payload_len` payload bytes and seals the header over them.
    #[inline(always)]
    fn emit_inner(
        &self,
        buf: &mut [u8],
        op: Op,
        payload_len: usize,
        crc: &Crc32c,
        fill: impl FnOnce(&mut [u8], &Body<'_>),
    ) -> Result<usize, WireError> {
        let too_long = |len: u64| WireError::TooLong {
            len,
            max: MAX_DATA_LEN,
        };
        // A payload that does not even fit a u32 is certainly too long.
        let Ok(data_len) = u32::try_from(payload_len) else {
            return Err(too_long(payload_len as u64));
        };
        if data_len > MAX_DATA_LEN {
            return Err(too_long(u64::from(data_len)));
        }
        if let Body::Read { len, .. } = self.body {
            if len > MAX_DATA_LEN {
                return Err(too_long(u64::from(len)));
            }
        }
        let flags =
            (u16::from(self.validate) * FLAG_VALIDATE) | (u16::from(self.stream) * FLAG_STREAM);
        if self.stream && op != Op::Write {
            return Err(WireError::BadFlags { op, flags });
        }
        let need = HEADER_LEN + payload_len;
        let have = buf.len();
        let too_small = WireError::BufferTooSmall { need, have };
        let (head, rest) = buf.split_first_chunk_mut::<HEADER_LEN>().ok_or(too_small)?;
        let payload = rest.get_mut(..payload_len).ok_or(too_small)?;
        // `payload` is exactly `payload_len` bytes long.
        fill(payload, &self.body);

        let payload_crc = if self.validate {
            crc.checksum(payload)
        } else {
            0
        };
        // Written in place as six 8-byte words, then sealed: the CRC reads
        // the bytes just stored word by word, so every load is served by
        // exactly one store (a word stored as several narrower fields
        // would stall each load until the stores reach the cache).
        let words = [
            u64::from(u32::from_le_bytes(MAGIC))
                | u64::from(VERSION) << 32
                | u64::from(op as u8) << 40
                | u64::from(flags) << 48,
            self.session,
            u64::from(self.epoch) | u64::from(data_len) << 32,
            self.sn,
            self.ack,
            u64::from(payload_crc),
        ];
        for (chunk, word) in head.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        let (covered, seal) = head.split_at_mut(HEADER_COVERED);
        if let (Some(covered), Some(seal)) = (
            covered.first_chunk::<HEADER_COVERED>(),
            seal.first_chunk_mut::<4>(),
        ) {
            *seal = crc.header(covered).to_le_bytes();
        }
        Ok(need)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{self, random_msg, SplitMix, ALL};
    use super::super::{parse, RejectReason, MAX_FRAME_LEN};
    use super::*;
    use std::vec;

    macro_rules! emit_fixture_tests {
        ($($name:ident: $repr:ident => $frame:ident,)*) => {$(
            #[test]
            fn $name() {
                let mut buf = [0u8; fixtures::$frame.len()];
                assert_eq!(fixtures::$repr.buffer_len(), buf.len());
                assert_eq!(fixtures::$repr.emit(&mut buf), Ok(buf.len()));
                assert_eq!(buf, fixtures::$frame);
            }
        )*};
    }

    emit_fixture_tests! {
        emit_hello: HELLO => HELLO_FRAME,
        emit_welcome: WELCOME => WELCOME_FRAME,
        emit_write: WRITE => WRITE_FRAME,
        emit_write_comp: WRITE_COMP => WRITE_COMP_FRAME,
        emit_read: READ => READ_FRAME,
        emit_read_comp: READ_COMP => READ_COMP_FRAME,
        emit_ack: ACK => ACK_FRAME,
        emit_bye: BYE => BYE_FRAME,
        emit_probe: PROBE => PROBE_FRAME,
        emit_reject: REJECT => REJECT_FRAME,
    }

    #[test]
    fn emit_writes_exactly_buffer_len_bytes_and_leaves_the_rest() {
        for (frame, m) in ALL {
            let mut buf = vec![0xaa; frame.len() + 9];
            assert_eq!(m.emit(&mut buf), Ok(frame.len()));
            assert_eq!(&buf[..frame.len()], frame);
            assert!(
                buf[frame.len()..].iter().all(|&b| b == 0xaa),
                "{}",
                m.body.op()
            );
        }
    }

    #[test]
    fn short_buffer_gives_buffer_too_small_and_writes_nothing() {
        for (frame, m) in ALL {
            for have in 0..frame.len() {
                let mut buf = vec![0xaa; have];
                assert_eq!(
                    m.emit(&mut buf),
                    Err(WireError::BufferTooSmall {
                        need: frame.len(),
                        have
                    })
                );
                assert!(buf.iter().all(|&b| b == 0xaa));
            }
        }
    }

    #[test]
    fn data_over_max_gives_too_long() {
        let data = vec![0u8; MAX_DATA_LEN as usize + 1];
        let mut buf = vec![0u8; data.len() + HEADER_LEN];
        for body in [Body::Write { data: &data }, Body::ReadComp { data: &data }] {
            let m = IoMsg {
                body,
                ..fixtures::ACK
            };
            assert_eq!(
                m.emit(&mut buf),
                Err(WireError::TooLong {
                    len: u64::from(MAX_DATA_LEN) + 1,
                    max: MAX_DATA_LEN
                })
            );
        }
    }

    #[test]
    fn data_of_exactly_max_round_trips() {
        let data: std::vec::Vec<u8> = (0..MAX_DATA_LEN).map(|i| i as u8).collect();
        let m = IoMsg {
            body: Body::Write { data: &data },
            ..fixtures::WRITE
        };
        let mut buf = vec![0u8; MAX_FRAME_LEN];
        assert_eq!(m.emit(&mut buf), Ok(MAX_FRAME_LEN));
        assert_eq!(parse(&buf), Ok(m));
    }

    #[test]
    fn read_len_over_max_gives_too_long() {
        let m = IoMsg {
            body: Body::Read {
                len: MAX_DATA_LEN + 1,
                request: &[],
            },
            ..fixtures::READ
        };
        let mut buf = [0u8; 52];
        assert_eq!(
            m.emit(&mut buf),
            Err(WireError::TooLong {
                len: u64::from(MAX_DATA_LEN) + 1,
                max: MAX_DATA_LEN
            })
        );
    }

    #[test]
    fn stream_on_any_op_but_write_gives_bad_flags() {
        for (_, m) in ALL {
            let op = m.body.op();
            let m = IoMsg { stream: true, ..m };
            let mut buf = [0u8; 128];
            let flags = FLAG_STREAM | if m.validate { FLAG_VALIDATE } else { 0 };
            if op == Op::Write {
                assert_eq!(m.emit(&mut buf), Ok(m.buffer_len()));
            } else {
                assert_eq!(
                    m.emit(&mut buf),
                    Err(WireError::BadFlags { op, flags }),
                    "{op}"
                );
            }
        }
    }

    #[test]
    fn validate_on_an_empty_payload_round_trips() {
        let m = IoMsg {
            validate: true,
            ..fixtures::ACK
        };
        let mut buf = [0u8; HEADER_LEN];
        assert_eq!(m.emit(&mut buf), Ok(HEADER_LEN));
        assert_eq!(&buf[40..44], &[0, 0, 0, 0]); // CRC32C of nothing
        assert_eq!(parse(&buf), Ok(m));
    }

    #[test]
    fn every_reject_reason_round_trips() {
        for reason in RejectReason::ALL {
            let m = IoMsg {
                body: Body::Reject {
                    reason,
                    detail: u64::MAX,
                },
                ..fixtures::REJECT
            };
            let mut buf = [0u8; 64];
            assert_eq!(m.emit(&mut buf), Ok(64));
            assert_eq!(parse(&buf), Ok(m), "{reason}");
        }
    }

    #[test]
    fn seeded_random_reprs_round_trip_both_ways() {
        let mut rng = SplitMix(0x1057_0c0d_e5ee_d5ee);
        let data: std::vec::Vec<u8> = (0..300).map(|_| rng.next() as u8).collect();
        // A Read carries its request after the length.
        let mut buf = vec![0u8; HEADER_LEN + READ_BODY_LEN + data.len()];
        for i in 0..20_000 {
            let m = random_msg(&mut rng, &data);
            let n = m.emit(&mut buf).expect("a valid repr emits");
            assert_eq!(n, m.buffer_len());
            let frame = &buf[..n];
            assert_eq!(parse(frame), Ok(m), "iteration {i}");
            let mut again = vec![0u8; n];
            assert_eq!(parse(frame).and_then(|p| p.emit(&mut again)), Ok(n));
            assert_eq!(again, frame, "iteration {i}");
        }
    }
}
