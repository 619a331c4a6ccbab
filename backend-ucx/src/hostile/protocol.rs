//! What the attack puts on the wire: what it says to open a connection,
//! by the protocol the server speaks, its active messages, its batches,
//! and headers resealed after a lie.

use super::{key_answer, key_message, Api, KeyAnswer, HEADER_CRC_AT, HEADER_LEN, KEY_EXCHANGE_LEN};
use iomsg_ucx_sys as sys;

/// Which protocol the attacked server speaks, so that the attack's
/// connections get through their opening exchange.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// iomsg's own (`iomsg server`): 8-byte keys over the stream.
    #[default]
    Iomsg,
    /// UCX io_demo's (`iomsg server --io-demo`): a 4-byte connection id
    /// each way over the stream (tag API), nothing with `-A`.
    IoDemo,
}

impl Protocol {
    /// What a connection sends on the stream to open (our key or id).
    pub(super) fn hello(self, key: u64, api: Api) -> Vec<u8> {
        match (self, api) {
            (Protocol::Iomsg, _) => key_message(key, api).to_vec(),
            (Protocol::IoDemo, Api::Tag) => io_demo_id(key).to_le_bytes().to_vec(),
            (Protocol::IoDemo, Api::Am) => Vec::new(),
        }
    }

    /// The bytes of the server's answer on the stream (0: none comes).
    pub(super) fn answer_len(self, api: Api) -> usize {
        match (self, api) {
            (Protocol::Iomsg, _) => KEY_EXCHANGE_LEN,
            (Protocol::IoDemo, Api::Tag) => 4,
            (Protocol::IoDemo, Api::Am) => 0,
        }
    }

    /// Reads the server's answer (`len` bytes of `bytes` arrived).
    pub(super) fn answer(self, bytes: &[u8; KEY_EXCHANGE_LEN], len: usize) -> KeyAnswer {
        match self {
            Protocol::Iomsg => key_answer(bytes, len),
            Protocol::IoDemo => {
                let id = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                if len == 4 && id != 0 {
                    KeyAnswer::Key(u64::from(id))
                } else {
                    KeyAnswer::Refused
                }
            }
        }
    }

    /// The flags of the attack's own active messages: io_demo's server
    /// answers on the endpoint the reply flag names.
    pub(super) fn am_flags(self) -> u32 {
        match self {
            Protocol::Iomsg => 0,
            Protocol::IoDemo => sys::UCP_AM_SEND_FLAG_REPLY,
        }
    }
}

/// An io_demo connection id from a key (never zero, bit 31 clear as
/// io_demo's).
fn io_demo_id(key: u64) -> u32 {
    ((key as u32) & 0x7fff_ffff).max(1)
}

/// An active message to send: its user header, its data and its flags.
pub(super) struct AmOut {
    pub(super) header: Vec<u8>,
    pub(super) data: AmBytes,
    pub(super) flags: u32,
}

/// An active message's data.
pub(super) enum AmBytes {
    Own(Vec<u8>),
    /// `len` bytes of the run's shared buffer at `at`.
    Shared {
        at: *const u8,
        len: usize,
    },
}

/// A batch message: each frame after its length (`u32`, little-endian).
pub(super) fn batch(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// CRC32C (Castagnoli), bit by bit: for headers that are sound except
/// where this module lies on purpose.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Seals a header whose fields were changed: its CRC is right again.
pub(super) fn reseal(frame: &mut [u8]) {
    if frame.len() >= HEADER_LEN {
        let crc = crc32c(&frame[..HEADER_CRC_AT]);
        frame[HEADER_CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
    }
}
