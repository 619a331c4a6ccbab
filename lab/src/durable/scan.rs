//! Finding a file's first bad frame, and telling a torn tail (cut at
//! the last good frame) from damage (refused).

use super::*;

/// What is wrong with the first bad frame of a file (see the module's
/// docs for which flaws are a torn tail).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flaw {
    /// The file ends inside the frame: fewer than [`FRAME_HEADER`] bytes
    /// remain (beginning like the magic), or its header claims more bytes
    /// than the file holds.
    Incomplete {
        /// Bytes from the frame's start to the end of the file.
        have: u64,
        /// Bytes it needs: a header's, or the header's claim.
        need: u64,
    },
    /// Its first bytes are not the magic (garbage or zeros).
    BadMagic {
        /// Its first bytes (up to four).
        found: Vec<u8>,
    },
    /// Its magic is wrong, but its length and CRC hold: the magic was
    /// changed.
    MagicChanged {
        /// Its first four bytes.
        found: [u8; 4],
    },
    /// Its length claims more than any frame holds ([`MAX_PAYLOAD`]).
    TooLong {
        /// The length claimed.
        claimed: u32,
    },
    /// Its length claims more than the file holds, but the bytes to the
    /// end of the file match its CRC: the length was changed.
    LengthChanged {
        /// The length claimed.
        claimed: u32,
        /// The payload's bytes to the end of the file.
        actual: u64,
    },
    /// Complete, but the CRC32C of its payload is not the one its header
    /// holds: changed after it was written.
    Checksum {
        /// The CRC its header holds.
        stored: u32,
        /// The CRC of its payload.
        computed: u32,
    },
    /// Its CRC holds but its payload does not parse.
    Malformed {
        /// What the reader found wrong.
        why: String,
    },
}

impl Flaw {
    /// Whether the frame was changed after it was written: no tear leaves
    /// such a frame, wherever it is.
    pub fn is_change(&self) -> bool {
        !matches!(self, Flaw::Incomplete { .. } | Flaw::BadMagic { .. })
    }
}

impl core::fmt::Display for Flaw {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Flaw::Incomplete { have, need } => {
                write!(f, "an incomplete frame ({have} of its {need} bytes)")
            }
            Flaw::BadMagic { found } => {
                write!(f, "bad magic (\"{}\")", found.escape_ascii())
            }
            Flaw::MagicChanged { found } => write!(
                f,
                "a changed magic (\"{}\", while its length and checksum hold)",
                found.escape_ascii()
            ),
            Flaw::TooLong { claimed } => write!(
                f,
                "a length of {claimed} bytes, more than any frame's {MAX_PAYLOAD}"
            ),
            Flaw::LengthChanged { claimed, actual } => write!(
                f,
                "a changed length ({claimed} bytes claimed; the {actual} to the end of the file \
                 match its checksum)"
            ),
            Flaw::Checksum { stored, computed } => write!(
                f,
                "a checksum mismatch in a complete frame (CRC32C {computed:08x}, its header \
                 holds {stored:08x}): changed after it was written"
            ),
            Flaw::Malformed { why } => {
                write!(f, "a frame whose checksum holds but {why}")
            }
        }
    }
}

/// The valid frames found after a bad one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct After {
    /// Valid frames (magic, a length that fits, CRC).
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The offset of the first.
    pub first: Option<u64>,
    /// The search ran out of work before the end of the file.
    pub gave_up: bool,
}

impl core::fmt::Display for After {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.first {
            Some(first) => write!(
                f,
                "{} ({} bytes) {} it, the first at offset {first}",
                frames(self.frames, "valid"),
                self.bytes,
                if self.frames == 1 {
                    "follows"
                } else {
                    "follow"
                }
            )?,
            None => f.write_str("no valid frame follows it")?,
        }
        if self.gave_up {
            f.write_str(" (the search for more stopped: too many frame-like bytes to check)")?;
        }
        Ok(())
    }
}

/// How a file's bytes end, as [`scan`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tail {
    /// Every byte belongs to a good frame.
    Clean,
    /// A torn tail from the first bad frame on: cut it.
    Torn(Flaw),
    /// Damage at the first bad frame: refuse the file.
    Damaged {
        /// What is wrong with it.
        flaw: Flaw,
        /// The valid frames after it.
        after: After,
    },
}

/// The good frames of a file and how it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scan {
    /// The length of the good frames: the offset of the first bad one.
    pub end: usize,
    /// Good frames.
    pub frames: u64,
    /// How the rest is taken.
    pub tail: Tail,
}

/// Reads `bytes` as `magic` frames, each payload handed to `good` (which
/// says why it does not parse, if it does not), and decides what follows
/// the last good frame (see the module's docs). Never panics.
pub fn scan(
    magic: [u8; 4],
    bytes: &[u8],
    mut good: impl FnMut(&[u8]) -> Result<(), String>,
) -> Scan {
    let (mut at, mut frames) = (0, 0);
    while at < bytes.len() {
        let flaw = match check(magic, bytes, at) {
            Ok((payload, next)) => match good(payload) {
                Ok(()) => {
                    (at, frames) = (next, frames + 1);
                    continue;
                }
                Err(why) => Flaw::Malformed { why },
            },
            Err(flaw) => flaw,
        };
        let after = valid_after(magic, bytes, at + 1);
        let tail = if flaw.is_change() || after.frames > 0 || after.gave_up {
            Tail::Damaged { flaw, after }
        } else {
            Tail::Torn(flaw)
        };
        return Scan {
            end: at,
            frames,
            tail,
        };
    }
    Scan {
        end: at,
        frames,
        tail: Tail::Clean,
    }
}

/// The frame at `bytes[at..]` (`at < bytes.len()`): its payload and where
/// the next one starts, or what is wrong with it.
pub(super) fn check(magic: [u8; 4], bytes: &[u8], at: usize) -> Result<(&[u8], usize), Flaw> {
    let rest = bytes.get(at..).unwrap_or_default();
    let Some(head) = rest.get(..FRAME_HEADER) else {
        let n = rest.len().min(4);
        return Err(if rest[..n] == magic[..n] {
            Flaw::Incomplete {
                have: rest.len() as u64,
                need: FRAME_HEADER as u64,
            }
        } else {
            Flaw::BadMagic {
                found: rest[..n].to_vec(),
            }
        });
    };
    let claimed = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let stored = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    let body = &rest[FRAME_HEADER..];
    let len = claimed as usize;
    if head[..4] != magic {
        let found = [head[0], head[1], head[2], head[3]];
        // An empty payload's CRC is 0: zeros would pass for a frame.
        let holds =
            len > 0 && len <= MAX_PAYLOAD && body.get(..len).is_some_and(|p| crc(p) == stored);
        return Err(if holds {
            Flaw::MagicChanged { found }
        } else {
            Flaw::BadMagic {
                found: found.to_vec(),
            }
        });
    }
    if len > MAX_PAYLOAD {
        return Err(Flaw::TooLong { claimed });
    }
    let Some(payload) = body.get(..len) else {
        return Err(if !body.is_empty() && crc(body) == stored {
            Flaw::LengthChanged {
                claimed,
                actual: body.len() as u64,
            }
        } else {
            Flaw::Incomplete {
                have: rest.len() as u64,
                need: (FRAME_HEADER + len) as u64,
            }
        });
    };
    let computed = crc(payload);
    if computed != stored {
        return Err(Flaw::Checksum { stored, computed });
    }
    Ok((payload, at + FRAME_HEADER + len))
}

/// The valid frames that start at `from` or later: every offset tried,
/// a frame found skipped whole; at most [`SCAN_WORK`] times the file's
/// bytes checksummed.
pub(super) fn valid_after(magic: [u8; 4], bytes: &[u8], from: usize) -> After {
    let mut budget = bytes
        .len()
        .saturating_mul(SCAN_WORK)
        .saturating_add(SCAN_SLACK);
    let mut after = After::default();
    let mut q = from;
    while q.saturating_add(FRAME_HEADER) <= bytes.len() {
        if bytes[q..q + 4] != magic {
            q += 1;
            continue;
        }
        let len = u32_at(bytes, q + 4).map_or(0, |n| n as usize);
        if len <= bytes.len() - q - FRAME_HEADER {
            if len > budget {
                after.gave_up = true;
                break;
            }
            budget -= len;
        }
        match next_frame(magic, bytes, q) {
            Some((_, next)) => {
                after.frames += 1;
                after.bytes += (next - q) as u64;
                after.first.get_or_insert(q as u64);
                q = next;
            }
            None => q += 1,
        }
    }
    after
}

/// "1 good frame", "2 good frames".
pub(super) fn frames(n: u64, what: &str) -> String {
    format!("{n} {what} frame{}", if n == 1 { "" } else { "s" })
}
