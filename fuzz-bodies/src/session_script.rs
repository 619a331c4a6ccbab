//! How the `session` fuzz body reads its script: the byte cursor, byte
//! flips of frames in transit, and the well-formed frames it forges.

use std::vec;
use std::vec::Vec;

use iomsg_core::wire::{Body, IoMsg, RejectReason};

/// Reads the script; past its end every byte is 0.
pub(super) struct Cursor<'a>(pub(super) &'a [u8]);

impl<'a> Cursor<'a> {
    pub(super) fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    pub(super) fn byte(&mut self) -> u8 {
        self.next().unwrap_or(0)
    }

    pub(super) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    pub(super) fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.byte();
        }
        u64::from_le_bytes(b)
    }

    pub(super) fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Up to `max` of the remaining bytes, as the length byte says.
    pub(super) fn bytes(&mut self, max: usize) -> &'a [u8] {
        let want = usize::from(self.byte()) % (max + 1);
        let n = want.min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }
}

/// How a frame in transit is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flip {
    None,
    /// XOR `mask` (non-zero) into byte `pos`.
    Byte {
        pos: usize,
        mask: u8,
    },
}

impl Flip {
    pub(super) fn read(c: &mut Cursor<'_>, len: usize) -> Flip {
        let mask = c.byte();
        if mask == 0 || len == 0 {
            return Flip::None;
        }
        let pos = usize::from(c.u16()) % len;
        Flip::Byte { pos, mask }
    }

    pub(super) fn apply(self, frame: &mut [u8]) {
        if let Flip::Byte { pos, mask } = self {
            if let Some(b) = frame.get_mut(pos) {
                *b ^= mask;
            }
        }
    }
}

pub(super) fn emit(msg: &IoMsg<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    let len = msg.emit(&mut buf);
    assert_eq!(len, Ok(buf.len()), "emit of {msg:?}");
    buf
}

/// An sn near `base`: mostly close to it, sometimes anywhere.
fn sn_near(c: &mut Cursor<'_>, base: u64) -> u64 {
    let b = c.byte();
    match b >> 6 {
        0 => base.saturating_sub(u64::from(b & 0x3f)),
        1 | 2 => base + u64::from(b & 0x7f),
        _ => c.u64(),
    }
}

/// An epoch far from `epoch`: up to `u32::MAX`.
fn epoch_far(c: &mut Cursor<'_>, epoch: u32) -> u32 {
    let b = c.byte();
    if b & 0x80 != 0 {
        u32::MAX - u32::from(b & 0x7f)
    } else {
        epoch.wrapping_add(u32::from(b))
    }
}

/// A well-formed server frame that no server sent: for this session (mostly)
/// and the client's current epoch (mostly). Its body is checksummed when it
/// carries state (mostly), so that the client may act on it.
pub(super) fn forge_to_client(c: &mut Cursor<'_>, epoch: u32, session: u64) -> IoMsg<'static> {
    static PATTERN: [u8; 64] = [0x5A; 64];
    let b = c.byte();
    let epoch = match b >> 6 {
        0 => epoch.wrapping_sub(1),
        3 => u32::from(c.byte()),
        _ => epoch,
    };
    let session = if b & 0x20 == 0 { session } else { c.u64() };
    let ack = sn_near(c, 0);
    let sn = sn_near(c, 0);
    let body = match b % 7 {
        0 | 1 => Body::Welcome {
            instance: u64::from(c.byte() % 3),
            resume_from: sn_near(c, 0),
            incarnation: u64::from(c.byte() % 3),
            window: u32::from(c.byte()),
            known: c.bool(),
        },
        2 => Body::WriteComp,
        3 => Body::ReadComp {
            data: &PATTERN[..usize::from(c.byte()) % PATTERN.len()],
        },
        4 => Body::Ack,
        5 => Body::Bye,
        _ => Body::Reject {
            reason: RejectReason::ALL[usize::from(c.byte()) % RejectReason::ALL.len()],
            detail: u64::from(c.byte()),
        },
    };
    IoMsg {
        session,
        epoch,
        sn,
        ack,
        validate: body.carries_state() && b & 0x10 == 0,
        stream: false,
        body,
    }
}

/// What a forged client frame may claim to be.
pub(super) struct Claim {
    /// The session of the client it imitates.
    pub(super) session: u64,
    /// That client's epoch.
    pub(super) epoch: u32,
    /// That client's next sn.
    pub(super) next: u64,
    /// The real clients' tokens (a `Hello` may carry one, or another).
    pub(super) tokens: [u64; 2],
}

/// A well-formed client frame that no client sent: a `Hello` (of a stray
/// peer with its own token, or with a client's token), `Read`, `Bye`,
/// `Probe` or `Ack`, with an epoch near the client's or up to `u32::MAX`.
/// Its body is checksummed when it carries state (mostly), so that the
/// server may act on it.
pub(super) fn forge_to_server(c: &mut Cursor<'_>, claim: &Claim) -> IoMsg<'static> {
    let b = c.byte();
    let epoch = match b >> 6 {
        0 => claim.epoch.wrapping_sub(1),
        1 => claim.epoch.wrapping_add(1),
        2 => claim.epoch,
        _ => epoch_far(c, claim.epoch),
    };
    let session = if b & 0x20 == 0 {
        claim.session
    } else {
        c.u64()
    };
    let sn = sn_near(c, claim.next);
    let body = match b % 6 {
        0 | 1 => Body::Hello {
            base_sn: sn_near(c, 0),
            next_sn: sn_near(c, claim.next),
            token: match c.byte() % 4 {
                0 => claim.tokens[0],
                1 => claim.tokens[1],
                _ => c.u64(),
            },
            window: u32::from(c.byte()),
            replay: c.bool(),
        },
        2 => Body::Read {
            len: u32::from(c.u16()) % 1024,
            request: &[],
        },
        3 => Body::Bye,
        4 => Body::Probe,
        _ => Body::Ack,
    };
    IoMsg {
        session,
        epoch,
        sn,
        ack: 0,
        validate: body.carries_state() && b & 0x10 == 0,
        stream: false,
        body,
    }
}
