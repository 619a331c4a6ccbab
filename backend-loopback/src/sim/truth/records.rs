//! What the truth records are made of: frames as the recorder parses
//! them, who owns a connection, what the truth knows of a client up
//! front, and what a server application was handed.

use iomsg_core::wire::{self, Op};

/// Who owns a connection's client end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Owner {
    /// One of the scenario's clients (its index).
    Client(usize),
    /// The stray peer.
    Stray,
    /// Nobody the simulation knows.
    Unknown,
}

/// The header fields of a frame, as the recorder parses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// Session.
    pub session: u64,
    /// Epoch.
    pub epoch: u32,
    /// Sn.
    pub sn: u64,
    /// Op.
    pub op: Op,
    /// A `Hello`'s `(base_sn, next_sn, replay)`.
    pub hello: Option<(u64, u64, bool)>,
}

impl FrameInfo {
    /// Parses a raw frame with `iomsg_core::wire::parse`; `None` when it
    /// does not parse (a corrupted frame).
    pub fn parse(frame: &[u8]) -> Option<FrameInfo> {
        wire::parse(frame).ok().map(|m| FrameInfo {
            session: m.session,
            epoch: m.epoch,
            sn: m.sn,
            op: m.body.op(),
            hello: match m.body {
                wire::Body::Hello {
                    base_sn,
                    next_sn,
                    replay,
                    ..
                } => Some((base_sn, next_sn, replay)),
                _ => None,
            },
        })
    }

    /// Whether it carries an sn (`Write` or `Read`).
    pub fn is_data(&self) -> bool {
        matches!(self.op, Op::Write | Op::Read)
    }
}

/// What the truth needs to know of a client up front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientSpec {
    /// Its session id.
    pub session: u64,
    /// The server address it talks to.
    pub server: u16,
    /// Whether it replays.
    pub replay: bool,
}

/// What a server application was handed: a session's sn and
/// [`workload::hash`](iomsg_core::workload::hash) of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The session.
    pub session: u64,
    /// The sn.
    pub sn: u64,
    /// The hash of its bytes (a read's: of its request).
    pub hash: u64,
}
