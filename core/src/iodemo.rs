//! UCX io_demo's wire format, for serving (and being) an unmodified
//! io_demo peer.
//!
//! io_demo (UCX's `test/apps/iodemo`, 1.12 and 1.13) frames each
//! operation as a packed little-endian header, [`IoDemoMsg`]: connection
//! id (u64), data size (u64), sn (u32), op (u8), 21 bytes, padded to the
//! run's io message size (its `-r`, 256 by default) with [`fill`]'s
//! pattern when the peer checks data (`-q`). There is no magic, version or
//! checksum: [`IoDemoMsg::decode`] can refuse only what is too short or
//! names no operation, and the rest is the caller's to judge (sizes
//! against its limits, connection ids against its table, sns against a
//! [`crate::seq::RecvTracker`] after [`unwrap_sn`]).
//!
//! With the tag API the io message travels on [`iomsg_tag`] (bit 63 set,
//! the receiver's connection id in bits 32..63) and the data on
//! [`data_tag`] (the receiver's connection id, then the sn); each side
//! learns the other's id as 4 bytes over the UCP stream right after the
//! endpoint is made. With active messages (`-A`) the header is the active
//! message's header (id [`AM_ID`]) and the data its payload.

use core::fmt;

/// The header's length: 8 + 8 + 4 + 1, packed.
pub const HEADER_LEN: usize = 21;

/// io_demo's io message size unless `-r` says otherwise.
pub const DEFAULT_MSG_LEN: usize = 256;

/// The tag bit of io messages (tag API).
pub const IOMSG_TAG: u64 = 1 << 63;

/// The active-message id io_demo registers (`-A`).
pub const AM_ID: u32 = 0;

/// An operation code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// The client asks for data (`IO_READ`, 0).
    Read,
    /// The client sends data (`IO_WRITE`, 1).
    Write,
    /// The server's answer to a read (`IO_READ_COMP`, 2).
    ReadDone,
    /// The server's answer to a write (`IO_WRITE_COMP`, 3).
    WriteDone,
}

impl Op {
    /// The code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Op::Read => 0,
            Op::Write => 1,
            Op::ReadDone => 2,
            Op::WriteDone => 3,
        }
    }

    /// The operation of code `code`, if any.
    pub const fn from_code(code: u8) -> Option<Op> {
        match code {
            0 => Some(Op::Read),
            1 => Some(Op::Write),
            2 => Some(Op::ReadDone),
            3 => Some(Op::WriteDone),
            _ => None,
        }
    }

    /// `read`, `write`, `read-done` or `write-done`.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::ReadDone => "read-done",
            Op::WriteDone => "write-done",
        }
    }
}

/// Why bytes are not an io_demo io message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoDemoError {
    /// Shorter than the header.
    Short {
        /// Bytes received.
        len: usize,
    },
    /// The op byte names no operation.
    BadOp {
        /// The byte.
        code: u8,
    },
}

impl fmt::Display for IoDemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoDemoError::Short { len } => write!(
                f,
                "an io_demo io message of {len} bytes: the header alone is {HEADER_LEN}"
            ),
            IoDemoError::BadOp { code } => write!(
                f,
                "io_demo op code {code}: only 0 (read), 1 (write), 2 and 3 (their answers) exist"
            ),
        }
    }
}

impl core::error::Error for IoDemoError {}

/// An io_demo io message's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoDemoMsg {
    /// The sender's own connection id (tag API) or endpoint address (AM).
    pub conn_id: u64,
    /// Bytes of data the operation moves.
    pub data_size: u64,
    /// The operation's sn.
    pub sn: u32,
    /// The operation.
    pub op: Op,
}

impl IoDemoMsg {
    /// Reads the header at the start of `bytes` (the rest is padding).
    ///
    /// # Errors
    ///
    /// Fewer than [`HEADER_LEN`] bytes, or an unknown op code.
    pub fn decode(bytes: &[u8]) -> Result<IoDemoMsg, IoDemoError> {
        let Some(h) = bytes.get(..HEADER_LEN) else {
            return Err(IoDemoError::Short { len: bytes.len() });
        };
        let op = Op::from_code(h[20]).ok_or(IoDemoError::BadOp { code: h[20] })?;
        Ok(IoDemoMsg {
            conn_id: u64::from_le_bytes(word(&h[0..8])),
            data_size: u64::from_le_bytes(word(&h[8..16])),
            sn: u32::from_le_bytes([h[16], h[17], h[18], h[19]]),
            op,
        })
    }

    /// Writes the header into `out` and fills the rest of `out` with the
    /// pattern io_demo checks (`-q`): seed the sn, and this header's
    /// connection id. `out` shorter than the header gets what fits.
    pub fn encode(&self, out: &mut [u8]) {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&self.conn_id.to_le_bytes());
        h[8..16].copy_from_slice(&self.data_size.to_le_bytes());
        h[16..20].copy_from_slice(&self.sn.to_le_bytes());
        h[20] = self.op.code();
        let n = out.len().min(HEADER_LEN);
        out[..n].copy_from_slice(&h[..n]);
        if let Some(tail) = out.get_mut(HEADER_LEN..) {
            fill(self.sn, self.conn_id, tail);
        }
    }

    /// Whether the padding after the header in `bytes` is the pattern
    /// [`encode`](Self::encode) writes (what io_demo's `-q` checks): the
    /// first byte that differs, if any.
    pub fn check_padding(&self, bytes: &[u8]) -> Result<(), usize> {
        match bytes.get(HEADER_LEN..) {
            Some(tail) => check(self.sn, self.conn_id, tail).map_err(|at| at + HEADER_LEN),
            None => Ok(()),
        }
    }
}

fn word(b: &[u8]) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    w
}

/// The 8 bytes io_demo writes at word `i` of a buffer: the word's index
/// (u16), the connection id's low 16 bits, the seed (u32).
fn pattern_word(seed: u32, conn_id: u64, i: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w[0..2].copy_from_slice(&(i as u16).to_le_bytes());
    w[2..4].copy_from_slice(&(conn_id as u16).to_le_bytes());
    w[4..8].copy_from_slice(&seed.to_le_bytes());
    w
}

/// Fills `buf` with io_demo's data pattern: whole 8-byte words (word i:
/// i as u16, the connection id's low 16 bits, the seed, little-endian),
/// then the tail bytes counting 0, 1, 2, …. The data of
/// an operation is filled with seed = its sn and the client's connection
/// id; io_demo fills each chunk (`-k`) from its own start.
pub fn fill(seed: u32, conn_id: u64, buf: &mut [u8]) {
    let mut words = buf.chunks_exact_mut(8);
    for (i, w) in words.by_ref().enumerate() {
        w.copy_from_slice(&pattern_word(seed, conn_id, i));
    }
    for (i, b) in words.into_remainder().iter_mut().enumerate() {
        *b = i as u8;
    }
}

/// Checks `buf` against [`fill`]'s pattern: `Err(offset)` of the first
/// word (or tail byte) that differs.
pub fn check(seed: u32, conn_id: u64, buf: &[u8]) -> Result<(), usize> {
    let words = buf.chunks_exact(8);
    let tail = words.remainder();
    for (i, w) in words.enumerate() {
        if w != pattern_word(seed, conn_id, i) {
            return Err(i * 8);
        }
    }
    let body = buf.len() - tail.len();
    match tail.iter().enumerate().find(|&(i, &b)| b != i as u8) {
        Some((i, _)) => Err(body + i),
        None => Ok(()),
    }
}

/// The tag io_demo's io messages to connection `conn` carry.
pub const fn iomsg_tag(conn: u32) -> u64 {
    IOMSG_TAG | ((conn as u64) << 32)
}

/// The tag of operation `sn`'s data (and of a read's answer) to
/// connection `conn`.
pub const fn data_tag(conn: u32, sn: u32) -> u64 {
    ((conn as u64) << 32) | sn as u64
}

/// The receiving connection's id in an io message's tag.
pub const fn tag_conn(tag: u64) -> u32 {
    ((tag & !IOMSG_TAG) >> 32) as u32
}

/// The u64 sn nearest `near` whose low 32 bits are `sn`: io_demo's sns
/// wrap at 2³², the tracker's do not. Sns within 2³¹ of `near` either way
/// map to themselves; `near` is the last sn placed on the same line.
pub fn unwrap_sn(near: u64, sn: u32) -> u64 {
    let delta = i64::from(sn.wrapping_sub(near as u32) as i32);
    match near.checked_add_signed(delta) {
        Some(v) => v,
        // Below zero: the line starts above 2³² - 2³¹ and this sn is
        // ahead of it across the edge.
        None => near.wrapping_add_signed(delta).wrapping_add(1 << 32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_its_padding_is_the_pattern() {
        let m = IoDemoMsg {
            conn_id: 0x1234_5678_9abc,
            data_size: 4096,
            sn: 0xfffffff0,
            op: Op::Write,
        };
        let mut buf = [0u8; 256];
        m.encode(&mut buf);
        assert_eq!(IoDemoMsg::decode(&buf), Ok(m));
        assert_eq!(m.check_padding(&buf), Ok(()));
        buf[100] ^= 1;
        let at = m.check_padding(&buf).unwrap_err();
        assert!((93..=100).contains(&at), "{at}");
    }

    #[test]
    fn the_pattern_is_io_demos_layout() {
        let mut buf = [0u8; 19];
        fill(7, 0x1_0002, &mut buf);
        // Word 1: segment 1, conn id's low 16 bits (2), seed 7; then 3
        // tail bytes counting from 0.
        assert_eq!(&buf[8..16], &[1, 0, 2, 0, 7, 0, 0, 0]);
        assert_eq!(&buf[16..], &[0, 1, 2]);
        assert_eq!(check(7, 2, &buf), Ok(()));
        assert_eq!(check(8, 2, &buf), Err(0));
        buf[17] = 9;
        assert_eq!(check(7, 2, &buf), Err(17));
    }

    #[test]
    fn short_or_unknown_messages_are_refused_by_name() {
        assert_eq!(
            IoDemoMsg::decode(&[0; 20]),
            Err(IoDemoError::Short { len: 20 })
        );
        let mut b = [0u8; 21];
        b[20] = 9;
        assert_eq!(IoDemoMsg::decode(&b), Err(IoDemoError::BadOp { code: 9 }));
    }

    #[test]
    fn tags_carry_the_receivers_id_and_the_sn() {
        let t = iomsg_tag(5);
        assert_eq!(t & IOMSG_TAG, IOMSG_TAG);
        assert_eq!(tag_conn(t), 5);
        assert_eq!(data_tag(5, 9), (5 << 32) | 9);
        assert_eq!(tag_conn(data_tag(5, 9)), 5);
    }

    #[test]
    fn any_bytes_decode_or_are_refused_and_decoded_headers_round_trip() {
        let mut rng = crate::rng::SplitMix64::new(7);
        for _ in 0..20_000 {
            let mut buf = [0u8; 40];
            let len = rng.below(41) as usize;
            for b in buf.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            if rng.below(2) == 0 {
                buf[20] = rng.below(4) as u8;
            }
            match IoDemoMsg::decode(&buf[..len]) {
                Ok(m) => {
                    assert!(len >= HEADER_LEN);
                    let mut out = [0u8; 40];
                    m.encode(&mut out[..len]);
                    assert_eq!(out[..HEADER_LEN], buf[..HEADER_LEN]);
                    assert_eq!(m.check_padding(&out[..len]), Ok(()));
                }
                Err(IoDemoError::Short { len: l }) => assert!(l < HEADER_LEN && l == len),
                Err(IoDemoError::BadOp { code }) => assert!(code > 3 && code == buf[20]),
            }
        }
    }

    #[test]
    fn sns_unwrap_across_the_32_bit_edge() {
        assert_eq!(unwrap_sn(0xffff_fffe, 1), 0x1_0000_0001);
        assert_eq!(unwrap_sn(0x1_0000_0001, 0xffff_fffe), 0xffff_fffe);
        assert_eq!(unwrap_sn(5, 3), 3);
        assert_eq!(unwrap_sn(5, 0xffff_fff0), 0xffff_fff0);
        assert_eq!(unwrap_sn(0x7_0000_0010, 0x20), 0x7_0000_0020);
    }
}
