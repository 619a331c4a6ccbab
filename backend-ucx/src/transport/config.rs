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

/// Which UCX API carries the frames. Both ends must use the same one: the
/// key exchange says which each end uses, and a connection whose ends
/// differ fails with `ConnectFailed` naming both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// Active messages (`ucp_am_send_nbx`): a small frame is handed to the
    /// driver from UCX's own receive buffer, without a copy into the
    /// transport's.
    Am,
    /// Tag matching (`ucp_tag_send_nbx`, probed and received into the
    /// transport's buffers).
    #[default]
    Tag,
}

impl Api {
    /// Its name on a command line: `am` or `tag`.
    pub fn name(self) -> &'static str {
        match self {
            Api::Am => "am",
            Api::Tag => "tag",
        }
    }
}

impl core::fmt::Display for Api {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Api {
    type Err = String;

    fn from_str(s: &str) -> Result<Api, String> {
        match s {
            "am" => Ok(Api::Am),
            "tag" => Ok(Api::Tag),
            _ => Err(format!("unknown UCX API '{s}': expected am or tag")),
        }
    }
}

/// What a UCX transport is built with: [`UcxConfig::default`] and the
/// setters below (`#[non_exhaustive]`: a new setting is not a breaking
/// change).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct UcxConfig {
    /// Which UCX API carries the frames (both ends must agree).
    pub api: Api,
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
    /// The connection table's size (a server's): a connection request
    /// past it is refused at once, and the client's connect fails with
    /// `TableFull` (`connection table full (N)`). UCX's own
    /// limits must allow it: see [`UcxConfig::environment`].
    pub max_connections: usize,
    /// Sends in flight on one connection at most: past it `transmit` on
    /// that connection (only) is `WouldBlock`.
    pub conn_send_frames: usize,
    /// Bytes of sends in flight on one connection at most (a connection
    /// with nothing in flight may still send one frame of `max_frame`).
    pub conn_send_bytes: usize,
    /// Bytes of sends in flight over all connections at most (a memory
    /// bound; larger than one connection's, so that one connection whose
    /// peer stopped reading cannot take it all).
    pub send_bytes: usize,
    /// Received bytes waiting in one connection's queue at most (its
    /// frames not yet taken, and a message still arriving): past it the
    /// connection is closed as flooding.
    pub conn_recv_bytes: usize,
    /// Received bytes waiting over all connections at most (a memory
    /// bound): a message that would pass it closes the connection holding
    /// the most received bytes (itself, when that is the receiver), so
    /// that peers stalled mid-message cannot together take the memory of
    /// the others. At least `conn_recv_bytes`.
    pub recv_bytes: usize,
}

/// The variable by which UCX sizes its asynchronous event table (one
/// event per socket it watches: each connection's, and each socket
/// accepted on a listener before anyone could refuse it). Past the table,
/// UCX 1.13.1's listener corrupts its list of connections (sockets closed
/// twice, then an abort). UCX reads it from the environment when the
/// library loads; the transport raises the option itself
/// (`ucs_global_opts_set_value`) before it makes a worker, to
/// [`UcxConfig::async_max_events`] and at least the open-file limit (the
/// most sockets a peer can make it hold), unless the environment sets it,
/// which then wins: a value below the open-file limit brings the crash
/// back.
pub const ASYNC_MAX_EVENTS: &str = "UCX_ASYNC_MAX_EVENTS";

/// Setters, one per field, for building a configuration from
/// [`UcxConfig::default`] without naming every field:
/// `UcxConfig::default().api(Api::Am).shared_memory(true)`.
impl UcxConfig {
    /// Sets [`api`](UcxConfig::api).
    #[must_use]
    pub fn api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }
    /// Sets [`mode`](UcxConfig::mode).
    #[must_use]
    pub fn mode(mut self, mode: WaitMode) -> Self {
        self.mode = mode;
        self
    }
    /// Sets [`max_frame`](UcxConfig::max_frame).
    #[must_use]
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }
    /// Adds (or replaces) one UCX context setting, `NAME` without the
    /// `UCX_` prefix (see [`settings`](UcxConfig::settings)).
    #[must_use]
    pub fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.retain(|(n, _)| n != name);
        self.settings.push((name.to_owned(), value.to_owned()));
        self
    }
    /// Sets [`shared_memory`](UcxConfig::shared_memory).
    #[must_use]
    pub fn shared_memory(mut self, on: bool) -> Self {
        self.shared_memory = on;
        self
    }
    /// Sets [`liveness`](UcxConfig::liveness).
    #[must_use]
    pub fn liveness(mut self, liveness: Option<Liveness>) -> Self {
        self.liveness = liveness;
        self
    }
    /// Sets [`coalesce`](UcxConfig::coalesce).
    #[must_use]
    pub fn coalesce(mut self, on: bool) -> Self {
        self.coalesce = on;
        self
    }
    /// Sets [`max_connections`](UcxConfig::max_connections).
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
    /// Sets [`conn_send_frames`](UcxConfig::conn_send_frames).
    #[must_use]
    pub fn conn_send_frames(mut self, n: usize) -> Self {
        self.conn_send_frames = n;
        self
    }
    /// Sets [`conn_send_bytes`](UcxConfig::conn_send_bytes).
    #[must_use]
    pub fn conn_send_bytes(mut self, bytes: usize) -> Self {
        self.conn_send_bytes = bytes;
        self
    }
    /// Sets [`send_bytes`](UcxConfig::send_bytes).
    #[must_use]
    pub fn send_bytes(mut self, bytes: usize) -> Self {
        self.send_bytes = bytes;
        self
    }
    /// Sets [`conn_recv_bytes`](UcxConfig::conn_recv_bytes).
    #[must_use]
    pub fn conn_recv_bytes(mut self, bytes: usize) -> Self {
        self.conn_recv_bytes = bytes;
        self
    }
    /// Sets [`recv_bytes`](UcxConfig::recv_bytes).
    #[must_use]
    pub fn recv_bytes(mut self, bytes: usize) -> Self {
        self.recv_bytes = bytes;
        self
    }
}

impl UcxConfig {
    /// UCX's asynchronous events this configuration needs: two per
    /// connection (its own, a refused one's and a closed one's still
    /// flushing), and room for the listener and UCX's own.
    pub fn async_max_events(&self) -> usize {
        self.max_connections
            .saturating_add(MAX_REFUSING + MAX_LINGERING)
            .saturating_mul(2)
            .saturating_add(256)
    }

    /// The environment a process that runs this configuration needs, as
    /// (variable, value): [`REUSE_ADDRESS`] (UCX's event table is sized
    /// without the environment: see [`ASYNC_MAX_EVENTS`]). The library
    /// never changes the environment; a binary applies these first thing
    /// in `main`, before any thread (setting a variable while another thread
    /// reads the environment is undefined behaviour), where it is not set
    /// already; with [`raise_open_files`]`(config.open_files())`:
    ///
    /// ```no_run
    /// // fn main() {
    /// let config = iomsg_ucx::UcxConfig::default();
    /// for (name, value) in config.environment() {
    ///     if std::env::var_os(name).is_none() {
    ///         std::env::set_var(name, value);
    ///     }
    /// }
    /// iomsg_ucx::raise_open_files(config.open_files());
    /// // ... parse arguments, build the transport ...
    /// // }
    /// ```
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        vec![(REUSE_ADDRESS.0, REUSE_ADDRESS.1.to_string())]
    }

    /// The file descriptors this configuration may hold at most: a few per
    /// connection (its socket-address and data sockets, UCX's event fds)
    /// and UCX's own.
    pub fn open_files(&self) -> u64 {
        (self
            .max_connections
            .saturating_add(MAX_REFUSING + MAX_LINGERING) as u64)
            .saturating_mul(4)
            .saturating_add(256)
    }

    /// The most memory, in bytes, the transport itself holds for frames
    /// with this configuration, whatever its peers send:
    ///
    /// - receives: `recv_bytes` waiting over all connections, and
    ///   `conn_recv_bytes` on one (a message that would pass either closes
    ///   a connection, see [`recv_bytes`](UcxConfig::recv_bytes));
    /// - per connection, one batch being emitted (`BATCH_CAP`, 32 KiB);
    /// - sends in flight: `send_bytes` over all connections, plus one
    ///   frame (`max_frame`) or batch past it;
    /// - the buffer pool: 256 buffers of at most 64 KiB, and 8 of at most
    ///   `max_frame`;
    /// - refused connections still closing and closed ones still flushing
    ///   (see [`LINGER`]): 256 each, a few bytes each.
    ///
    /// UCX's own buffers (its unexpected-message queue, socket buffers)
    /// and the application's are not included. Messages that no receive
    /// is posted for (oversized, strays, heartbeats) are received into no
    /// buffer; the buffers of receives UCX cannot cancel (a message cut
    /// mid-way by its sender's death) are given back to the system.
    pub fn memory_bound(&self) -> u64 {
        let conns = self.max_connections as u64;
        let recv = (self.recv_bytes as u64).min(conns.saturating_mul(self.conn_recv_bytes as u64));
        let batches = conns.saturating_mul(BATCH_CAP as u64);
        let sends = (self.send_bytes as u64).saturating_add(self.max_frame.max(BATCH_CAP) as u64);
        let pool = (POOL_LEN * POOL_BUF_CAP) as u64
            + (POOL_LARGE_LEN as u64).saturating_mul(self.max_frame.max(BATCH_CAP) as u64);
        recv.saturating_add(batches)
            .saturating_add(sends)
            .saturating_add(pool)
            .saturating_add(((MAX_REFUSING + MAX_LINGERING) * 256) as u64)
    }
}

/// Raises the soft `RLIMIT_NOFILE` to `want` (at most the hard limit);
/// returns the soft limit then.
pub fn raise_open_files(want: u64) -> u64 {
    // SAFETY: all-zero is a valid rlimit to fill.
    let mut lim: libc::rlimit = unsafe { mem::zeroed() };
    // SAFETY: lim is a live out-struct for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    if lim.rlim_cur < want {
        let raised = libc::rlimit {
            rlim_cur: want.min(lim.rlim_max),
            rlim_max: lim.rlim_max,
        };
        // SAFETY: raised is a valid rlimit within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    lim.rlim_cur
}

impl Default for UcxConfig {
    /// Busy polling; frames up to the wire's largest; UCX keepalive every
    /// 200 ms (a peer whose socket is reset noticed without traffic); every
    /// message sent by copy (`ZCOPY_THRESH` and `RNDV_THRESH` infinite: UCX
    /// 1.13.1's zero-copy paths can abort the process when a peer dies);
    /// heartbeats with a 3 s silence timeout ([`Liveness::default`]); a
    /// restarted server may listen on its port again at once; 1,024
    /// connections; per connection 256 sends or 4 MiB in flight and 4 MiB
    /// received waiting, 64 MiB of sends in flight in all (a memory bound
    /// of about 4.1 GiB at 1,024 connections: [`UcxConfig::memory_bound`]).
    fn default() -> UcxConfig {
        UcxConfig {
            api: Api::default(),
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
            max_connections: 1024,
            conn_send_frames: 256,
            conn_send_bytes: 4 << 20,
            send_bytes: 64 << 20,
            conn_recv_bytes: 4 << 20,
            recv_bytes: 64 << 20,
        }
    }
}
