//! What can be wrong with a frame.

use core::fmt;

use super::Op;

/// Why a frame did not parse or a message could not be emitted.
///
/// For the checksum variants, `expected` is the CRC the frame carries and
/// `actual` the CRC of the bytes that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the header, or than the header's `data_len`, asks for.
    Truncated {
        /// Bytes the frame needs.
        need: usize,
        /// Bytes there are.
        have: usize,
    },
    /// The frame does not start with [`MAGIC`](super::MAGIC).
    BadMagic([u8; 4]),
    /// The version byte is not [`VERSION`](super::VERSION).
    UnsupportedVersion(u8),
    /// The header CRC does not match the header bytes.
    HeaderChecksum {
        /// The CRC in the header.
        expected: u32,
        /// The CRC of the header bytes received.
        actual: u32,
    },
    /// The op byte names no [`Op`].
    UnknownOp(u8),
    /// Unknown flag bits, or STREAM on an op other than `Write`.
    BadFlags {
        /// The frame's op.
        op: Op,
        /// The flags word.
        flags: u16,
    },
    /// `data_len`, a payload or a `Read` length is over [`MAX_DATA_LEN`](super::MAX_DATA_LEN).
    TooLong {
        /// The length asked for.
        len: u64,
        /// The limit.
        max: u32,
    },
    /// More bytes follow the header than its `data_len` declares.
    LengthMismatch {
        /// The header's `data_len`.
        declared: u32,
        /// Bytes after the header.
        actual: usize,
    },
    /// A control op whose payload is not its fixed size.
    BodyLength {
        /// The frame's op.
        op: Op,
        /// The payload length received.
        len: u32,
        /// The op's payload length.
        expected: u32,
    },
    /// The payload CRC does not match the payload (flag VALIDATE).
    PayloadChecksum {
        /// The CRC in the header.
        expected: u32,
        /// The CRC of the payload received.
        actual: u32,
    },
    /// A nonzero `payload_crc` in a frame without flag VALIDATE.
    UnexpectedPayloadChecksum(u32),
    /// Padding bytes in a control body are not zero.
    NonZeroPadding {
        /// The frame's op.
        op: Op,
    },
    /// A boolean byte in a control body is neither 0 nor 1.
    BadBool {
        /// The frame's op.
        op: Op,
        /// The byte.
        value: u8,
    },
    /// A `Reject` with a reason code this version does not know.
    UnknownRejectReason(u16),
    /// The buffer given to `emit` is smaller than `buffer_len()`.
    BufferTooSmall {
        /// Bytes the frame needs.
        need: usize,
        /// Bytes in the buffer.
        have: usize,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WireError::Truncated { need, have } => {
                write!(f, "frame truncated: need {need} bytes, have {have}")
            }
            WireError::BadMagic(m) => write!(
                f,
                "bad magic {:02x} {:02x} {:02x} {:02x}: not an io_msg frame (expected \"IOMS\")",
                m[0], m[1], m[2], m[3]
            ),
            WireError::UnsupportedVersion(v) => write!(
                f,
                "unsupported wire version {v} (this build speaks version {})",
                super::VERSION
            ),
            WireError::HeaderChecksum { expected, actual } => write!(
                f,
                "header CRC32C mismatch: frame carries {expected:#010x}, header bytes give {actual:#010x}"
            ),
            WireError::UnknownOp(op) => write!(f, "unknown op {op}"),
            WireError::BadFlags { op, flags } => {
                write!(f, "flags {flags:#06x} are not valid on {op}")
            }
            WireError::TooLong { len, max } => {
                write!(f, "length {len} is over the limit of {max} bytes")
            }
            WireError::LengthMismatch { declared, actual } => write!(
                f,
                "header declares {declared} payload bytes but {actual} follow it"
            ),
            WireError::BodyLength { op, len, expected } => write!(
                f,
                "{op} payload is {len} bytes, it must be {expected}"
            ),
            WireError::PayloadChecksum { expected, actual } => write!(
                f,
                "payload CRC32C mismatch: frame carries {expected:#010x}, payload gives {actual:#010x}"
            ),
            WireError::UnexpectedPayloadChecksum(crc) => write!(
                f,
                "payload CRC {crc:#010x} present without the VALIDATE flag (must be 0)"
            ),
            WireError::NonZeroPadding { op } => {
                write!(f, "{op} payload has nonzero padding bytes")
            }
            WireError::BadBool { op, value } => {
                write!(f, "{op} payload has boolean byte {value}, must be 0 or 1")
            }
            WireError::UnknownRejectReason(code) => {
                write!(f, "Reject carries unknown reason code {code}")
            }
            WireError::BufferTooSmall { need, have } => write!(
                f,
                "emit buffer too small: frame needs {need} bytes, buffer has {have}"
            ),
        }
    }
}

impl core::error::Error for WireError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn display_names_the_values_of_each_variant() {
        let cases = [
            (
                WireError::Truncated { need: 48, have: 7 },
                "need 48 bytes, have 7",
            ),
            (WireError::BadMagic(*b"HTTP"), "48 54 54 50"),
            (WireError::UnsupportedVersion(2), "version 2"),
            (
                WireError::HeaderChecksum {
                    expected: 0xdead_beef,
                    actual: 1,
                },
                "0xdeadbeef, header bytes give 0x00000001",
            ),
            (WireError::UnknownOp(200), "unknown op 200"),
            (
                WireError::BadFlags {
                    op: Op::Ack,
                    flags: 2,
                },
                "flags 0x0002 are not valid on Ack",
            ),
            (
                WireError::TooLong {
                    len: 1 << 21,
                    max: 1 << 20,
                },
                "length 2097152 is over the limit of 1048576",
            ),
            (
                WireError::LengthMismatch {
                    declared: 3,
                    actual: 4,
                },
                "declares 3 payload bytes but 4 follow",
            ),
            (
                WireError::BodyLength {
                    op: Op::Hello,
                    len: 23,
                    expected: 24,
                },
                "Hello payload is 23 bytes, it must be 24",
            ),
            (
                WireError::PayloadChecksum {
                    expected: 5,
                    actual: 6,
                },
                "carries 0x00000005, payload gives 0x00000006",
            ),
            (WireError::UnexpectedPayloadChecksum(9), "CRC 0x00000009"),
            (
                WireError::NonZeroPadding { op: Op::Reject },
                "Reject payload",
            ),
            (
                WireError::BadBool {
                    op: Op::Welcome,
                    value: 2,
                },
                "Welcome payload has boolean byte 2",
            ),
            (WireError::UnknownRejectReason(77), "reason code 77"),
            (
                WireError::BufferTooSmall { need: 52, have: 50 },
                "needs 52 bytes, buffer has 50",
            ),
        ];
        for (err, needle) in cases {
            let text = err.to_string();
            assert!(text.contains(needle), "{text:?} lacks {needle:?}");
        }
    }
}
