//! Fuzz body for the wire format: `wire_parse`.
//!
//! Two properties, both from the contract of [`iomsg_core::wire`]:
//! 1. [`parse()`] never panics, and a frame that parses re-emits to exactly the
//!    same bytes (`emit(parse(b)) == b`).
//! 2. A valid [`IoMsg`] built from the fuzz bytes emits, parses back to
//!    itself and re-emits to the same bytes (`parse(emit(m)) == m`).

use std::string::ToString;
use std::vec;

use iomsg_core::wire::{parse, Body, IoMsg, RejectReason, WireError, HEADER_LEN, MAX_DATA_LEN};

/// Runs both properties on `data`.
///
/// # Panics
///
/// When a property does not hold: that is the bug the fuzzer is looking for.
pub fn wire_parse(data: &[u8]) {
    match parse(data) {
        Ok(m) => {
            let mut out = vec![0u8; m.buffer_len()];
            assert_eq!(m.emit(&mut out), Ok(data.len()), "re-emit of {m:?}");
            assert_eq!(out, data, "re-emit of {m:?} differs from the input");
        }
        Err(e) => assert!(!e.to_string().is_empty(), "{e:?} displays as nothing"),
    }

    let mut cursor = Cursor(data);
    let m = msg_from(&mut cursor);
    let len = m.buffer_len();
    let mut frame = vec![0u8; len];
    assert_eq!(m.emit(&mut frame), Ok(len), "emit of {m:?}");
    assert_eq!(parse(&frame), Ok(m), "parse(emit(m)) != m");
    let mut again = vec![0u8; len];
    assert_eq!(parse(&frame).and_then(|p| p.emit(&mut again)), Ok(len));
    assert_eq!(again, frame, "second emit of {m:?} differs");
    let short = len - 1 - (cursor.byte() as usize % HEADER_LEN);
    assert_eq!(
        m.emit(&mut frame[..short]),
        Err(WireError::BufferTooSmall {
            need: len,
            have: short
        })
    );
}

/// Reads fields from the fuzz input; past its end every byte is 0.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Up to `MAX_DATA_LEN` of the remaining bytes, as the length byte says.
    fn data(&mut self) -> &'a [u8] {
        let want = usize::from(self.byte()) * 16;
        let n = want.min(self.0.len()).min(MAX_DATA_LEN as usize);
        let (data, rest) = self.0.split_at(n);
        self.0 = rest;
        data
    }
}

/// A valid message chosen by the fuzz bytes.
fn msg_from<'a>(c: &mut Cursor<'a>) -> IoMsg<'a> {
    let body = match c.byte() % 10 {
        0 => Body::Hello {
            base_sn: c.u64(),
            next_sn: c.u64(),
            token: c.u64(),
            window: c.u32(),
            replay: c.bool(),
        },
        1 => Body::Welcome {
            instance: c.u64(),
            resume_from: c.u64(),
            incarnation: c.u64(),
            window: c.u32(),
            known: c.bool(),
        },
        2 => Body::Write { data: c.data() },
        3 => Body::WriteComp,
        4 => Body::Read {
            len: c.u32() % (MAX_DATA_LEN + 1),
            request: c.data(),
        },
        5 => Body::ReadComp { data: c.data() },
        6 => Body::Ack,
        7 => Body::Bye,
        8 => Body::Probe,
        _ => Body::Reject {
            reason: RejectReason::ALL[usize::from(c.byte()) % RejectReason::ALL.len()],
            detail: c.u64(),
        },
    };
    let flags = c.byte();
    IoMsg {
        session: c.u64(),
        epoch: c.u32(),
        sn: c.u64(),
        ack: c.u64(),
        validate: flags & 1 == 1,
        stream: matches!(body, Body::Write { .. }) && flags & 2 == 2,
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn wire_parse_holds_on_seeded_random_inputs() {
        let mut state = 0x00f0_22ed_u64;
        for len in 0..2_000 {
            let bytes: Vec<u8> = (0..len % 300)
                .map(|_| {
                    // xorshift64
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            wire_parse(&bytes);
        }
    }

    #[test]
    fn committed_seeds_hold_valid_and_broken_frames() {
        let seeds = crate::seed_files("wire_parse");
        assert!((4..=8).contains(&seeds.len()), "{} seeds", seeds.len());
        let valid = seeds.iter().filter(|(_, b)| parse(b).is_ok()).count();
        assert!(valid >= 4, "only {valid} seeds parse");
        assert!(valid < seeds.len(), "no broken seed");
        for (path, bytes) in &seeds {
            wire_parse(bytes);
            let name = path.file_name().unwrap().to_string_lossy();
            assert!(
                name.starts_with("seed-") && name.ends_with(".bin"),
                "{name}"
            );
        }
    }
}
