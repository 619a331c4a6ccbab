//! What a `UcxTransport` is built with.

use super::*;

/// When a silent peer is declared dead (see the module's "Liveness").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// A connection that sent nothing for this long sends a heartbeat.
    pub interval: Duration,
    /// A connection from which nothing arrived for this long is closed
    /// (`Disconnected(PeerSilent)`); a connection still opening after it
    /// is closed as `ConnectFailed`.
    pub timeout: Duration,
}

impl Default for Liveness {
    /// A heartbeat after 250 ms without sending; dead after 3 s of
    /// silence (twelve heartbeats missed).
    fn default() -> Liveness {
        Liveness {
            interval: Duration::from_millis(250),
            timeout: Duration::from_secs(3),
        }
    }
}

/// What a UCX transport is built with.
#[derive(Clone, Debug)]
pub struct UcxConfig {
    /// How the worker waits.
    pub mode: WaitMode,
    /// The largest frame carried (header and payload).
    pub max_frame: usize,
    /// UCX context settings applied unless the environment sets them
    /// (`UCX_<NAME>` wins).
    pub settings: Vec<(String, String)>,
    /// After a connection's socket-address handshake, exchange worker
    /// addresses and carry its frames on endpoints made from them, as
    /// `ucx_perftest` does: endpoints made from a socket address get tcp
    /// lanes only, these may use shared memory (`posix`, `sysv`, `cma`)
    /// when both ends are on one host and `UCX_TLS` allows it. Both ends
    /// must agree. The socket-address endpoint stays open.
    pub shared_memory: bool,
    /// Heartbeats and the silence timeout; `None` turns them off (then a
    /// peer gone without a reset may go unnoticed for minutes). Both ends
    /// must agree: an end with it on closes a peer that sends none.
    pub liveness: Option<Liveness>,
    /// Send the small frames a driver emits between two polls in one UCX
    /// message per connection (see the module's tag layout). Every
    /// receiver takes batches, whatever its own setting.
    pub coalesce: bool,
}

impl Default for UcxConfig {
    /// Busy polling; frames up to the wire's largest; UCX keepalive every
    /// 200 ms (a peer whose socket is reset noticed without traffic); every
    /// message sent by copy (`ZCOPY_THRESH` and `RNDV_THRESH` infinite: UCX
    /// 1.13.1's zero-copy paths can abort the process when a peer dies);
    /// heartbeats with a 3 s silence timeout ([`Liveness::default`]); a
    /// restarted server may listen on its port again at once.
    fn default() -> UcxConfig {
        UcxConfig {
            mode: WaitMode::BusyPoll,
            max_frame: MAX_FRAME_LEN,
            settings: vec![
                ("KEEPALIVE_INTERVAL".into(), "200ms".into()),
                // Every message by copy, in fragments: UCX 1.13.1's tcp
                // zero-copy and rendezvous paths abort the process when a
                // peer dies mid-transfer (assertions at tcp_ep.c:939 and
                // uct_iface.h:884, seen in soaks with 16-64 KiB messages).
                ("ZCOPY_THRESH".into(), "inf".into()),
                ("RNDV_THRESH".into(), "inf".into()),
            ],
            shared_memory: false,
            liveness: Some(Liveness::default()),
            coalesce: true,
        }
    }
}
