//! What the transport puts on the wire besides frames — the tag layout,
//! receiver keys and the key exchange — and the causes it reports when it
//! closes a connection itself.

use super::*;

/// The tag's low byte: what a tagged message is.
pub(crate) const KIND_BITS: u32 = 8;
pub(crate) const KIND_MASK: u64 = 0xff;
pub(crate) const KIND_FRAME: u64 = 0;
pub(crate) const KIND_HEARTBEAT: u64 = 1;
pub(crate) const KIND_BATCH: u64 = 2;
/// A key's bits (the tag's upper 56).
pub(crate) const KEY_MASK: u64 = (1 << (64 - KIND_BITS)) - 1;
/// In the key exchange: "no key, the table is full"; the low 56 bits
/// carry the table's size.
pub const FULL_MARK: u64 = 0xff << 56;

/// The tag of a message of `kind` to the connection whose receiver key is
/// `key`.
pub(crate) fn tag(key: u64, kind: u64) -> u64 {
    (key & KEY_MASK) << KIND_BITS | (kind & KIND_MASK)
}

/// The receiver key and kind of a tag.
pub(crate) fn untag(tag: u64) -> (u64, u64) {
    (tag >> KIND_BITS, tag & KIND_MASK)
}

/// In the key exchange, the top byte of a key sent by an end that uses
/// active messages ([`Api::Am`]); an end that uses tag matching sends its
/// key with a zero top byte.
pub const AM_MARK: u64 = 0x01 << 56;

/// The 8 bytes an end using `api` sends in the key exchange for `key`.
pub(crate) fn key_bytes(key: u64, api: Api) -> [u8; 8] {
    let mark = match api {
        Api::Am => AM_MARK,
        Api::Tag => 0,
    };
    ((key & KEY_MASK) | mark).to_le_bytes()
}

/// What 8 bytes of a key exchange say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyMessage {
    /// The peer's key, and the API it uses.
    Key(u64, Api),
    /// The peer's table is full; its size.
    Full(u64),
    /// Zero, a value no key has, or a short read.
    Bad,
}

/// Reads a key exchange message (`bytes` as received).
pub(crate) fn key_message(bytes: &[u8]) -> KeyMessage {
    let Ok(b) = <[u8; 8]>::try_from(bytes) else {
        return KeyMessage::Bad;
    };
    let v = u64::from_le_bytes(b);
    match v >> 56 {
        0 if v != 0 => KeyMessage::Key(v, Api::Tag),
        0x01 if v & KEY_MASK != 0 => KeyMessage::Key(v & KEY_MASK, Api::Am),
        0xff => KeyMessage::Full(v & KEY_MASK),
        _ => KeyMessage::Bad,
    }
}

/// A fresh random key: 56 bits, non-zero, from the operating system
/// ([`iomsg_endpoint::random_masked`]); `None` if it gives no bytes.
pub(crate) fn random_key() -> Option<u64> {
    iomsg_endpoint::random_masked(KEY_MASK).ok()
}

/// A line on standard error, the crate's only log.
pub(crate) fn log(line: &str) {
    eprintln!("iomsg-ucx: {line}");
}

/// An optional address, for a log line.
pub(crate) fn show(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "an unknown peer".into(), |a| a.to_string())
}

/// The cause of a connection closed for stream bytes after the handshake.
pub(crate) const STREAM_DATA: Cause = Cause {
    code: sys::UCS_ERR_INVALID_PARAM as i32,
    name: "stream data",
    text: "stream bytes after the key exchange",
};

/// The cause of a connection closed for a message larger than allowed.
pub(crate) const OVERSIZED: Cause = Cause {
    code: sys::UCS_ERR_MESSAGE_TRUNCATED as i32,
    name: "message too large",
    text: "a message larger than the connection's receive bound",
};

/// The cause of a connection closed for more received bytes queued than
/// allowed.
pub(crate) const FLOODED: Cause = Cause {
    code: sys::UCS_ERR_EXCEEDS_LIMIT as i32,
    name: "receive queue full",
    text: "more received bytes waiting than the connection's bound",
};

/// The cause of a connection closed because the transport's receive
/// memory (`UcxConfig::recv_bytes`) was full and it held the most of it.
pub(crate) const RECV_MEMORY_FULL: Cause = Cause {
    code: sys::UCS_ERR_EXCEEDS_LIMIT as i32,
    name: "receive memory full",
    text: "the transport's receive memory was full and this connection held the most of it",
};

/// The cause of a connection whose ends use different APIs.
pub(crate) const API_MISMATCH: Cause = Cause {
    code: sys::UCS_ERR_UNSUPPORTED as i32,
    name: "API mismatch",
    text: "the peer uses the other UCX API (active messages against tag matching): \
           both ends must use the same (--api)",
};

/// The cause of a connection closed for a rendezvous active message.
pub(crate) const RENDEZVOUS: Cause = Cause {
    code: sys::UCS_ERR_UNSUPPORTED as i32,
    name: "rendezvous refused",
    text: "a rendezvous message (every message must be sent eagerly: fetching one aborts \
           UCX 1.13.1 when its sender dies meanwhile)",
};

/// The cause of a bad key exchange.
pub(crate) const BAD_KEY: Cause = Cause {
    code: sys::UCS_ERR_INVALID_PARAM as i32,
    name: "bad key exchange",
    text: "the peer's key was zero, malformed or short",
};
