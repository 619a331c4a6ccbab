//! What a run is made of: the [`Scenario`], its parts, and the checks that
//! refuse a scenario no run could finish ([`Scenario::validate`]).

use core::fmt;
use core::time::Duration;

use iomsg_core::rng::mix64;
use iomsg_core::session::{ClientConfig, ServerConfig};
use iomsg_core::wire::HEADER_LEN;

use crate::fault::FaultConfig;

/// The largest frame the simulation's workloads use (header and payload).
pub const MTU: usize = 4160;
/// Largest write payload (and read length) the simulation's frames carry.
pub const MAX_SIZE: u32 = (MTU - HEADER_LEN) as u32;
/// Capacity of every client's send window (the driver's const `N`); a
/// scenario's `client_window` may be smaller.
pub const CLIENT_WINDOW_MAX: usize = 4096;
/// Server receive windows (sns per session) the simulation can run.
pub const SERVER_WINDOWS: [u64; 4] = [64, 256, 2048, 4096];
/// Server session-table sizes the simulation can run (2 and 3 are a
/// table of 4 limited by `ServerConfig::max_sessions`).
pub const SERVER_SESSIONS: [usize; 5] = [2, 3, 4, 16, 64];
/// Server tombstone-table sizes the simulation can run (the core's
/// `TOMBS`; 256 is its default).
pub const SERVER_TOMBS: [usize; 4] = [2, 4, 8, 256];
/// Most committed batches a journal's tail loss may cut
/// ([`TailLoss::batches`]).
pub const MAX_TAIL_BATCHES: u32 = 256;
/// Bytes of a read's request in the workload: the read's sn.
pub const READ_REQUEST_LEN: usize = 8;
/// Largest client payload storage a scenario may ask for.
pub const MAX_STORAGE: usize = 1 << 24;
/// Most clients in one scenario.
pub const MAX_CLIENTS: usize = 1024;
/// Most servers in one scenario.
pub const MAX_SERVERS: usize = 64;
/// Longest virtual time a scenario may ask for (`duration + drain`).
pub const MAX_VIRTUAL_TIME: Duration = Duration::from_secs(100_000_000);
/// Event-loop rounds at one virtual instant past which a run is a livelock.
pub const MAX_ROUNDS_PER_INSTANT: u64 = 1_000_000;
/// The default cap on event-loop steps ([`Scenario::max_steps`]).
pub const DEFAULT_MAX_STEPS: u64 = 1 << 34;

/// What each client sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Requests per client (`u64::MAX`: until the faulty phase ends).
    pub messages: u64,
    /// Payload of a write, requested length of a read (at most [`MAX_SIZE`]).
    pub size: u32,
    /// Each write's payload is drawn from `size - size_spread ..= size`
    /// (from 0 when the spread is larger); 0: every write is `size` bytes.
    pub size_spread: u32,
    /// Bytes of each client's payload storage; 0: room for a full window
    /// of `size`-byte messages, `(client_window + 1) * size`.
    pub storage: usize,
    /// Share of reads, per mille.
    pub read_per_mille: u16,
    /// Share of streamed writes (no completion), per mille.
    pub stream_per_mille: u16,
    /// Payload CRCs on every frame.
    pub validate: bool,
    /// Least virtual time between two requests of one client (zero: as
    /// fast as the window allows).
    pub interval: Duration,
}

impl Default for Workload {
    /// 10 000 writes of 64 bytes per client.
    fn default() -> Self {
        Workload {
            messages: 10_000,
            size: 64,
            size_spread: 0,
            storage: 0,
            read_per_mille: 0,
            stream_per_mille: 0,
            validate: false,
            interval: Duration::ZERO,
        }
    }
}

/// Server crash-restarts: all server state is lost, a new instance listens
/// again after `down_for`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPlan {
    /// Uptime between crashes (at least 1 µs).
    pub every: Duration,
    /// Downtime before the new instance listens.
    pub down_for: Duration,
    /// Stop after this many crashes (across all servers).
    pub max_kills: u64,
}

/// A protocol event after which a server can be killed at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KillEvent {
    /// The server's transport accepted a connection.
    Accept,
    /// A `Hello` bound a connection to a session (the `Welcome` is on the
    /// wire, so the kill loses it).
    SessionOpened,
    /// The server handed a frame to its application.
    Delivered,
    /// The server saw a live loss.
    LiveLoss,
}

impl KillEvent {
    /// Every event, in a stable order.
    pub const ALL: [KillEvent; 4] = [
        KillEvent::Accept,
        KillEvent::SessionOpened,
        KillEvent::Delivered,
        KillEvent::LiveLoss,
    ];

    /// Its name in repro lines.
    pub fn name(self) -> &'static str {
        match self {
            KillEvent::Accept => "accept",
            KillEvent::SessionOpened => "opened",
            KillEvent::Delivered => "delivered",
            KillEvent::LiveLoss => "liveloss",
        }
    }

    /// The event called `name`.
    pub fn from_name(name: &str) -> Option<KillEvent> {
        KillEvent::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// Kill the server at which the `nth` occurrence (counted from 1, across
/// all servers) of `event` happens, right after the frame that caused it;
/// a new instance listens `down_for` later. Only during the faulty phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KillOn {
    /// The event.
    pub event: KillEvent,
    /// Which occurrence (1 = the first).
    pub nth: u64,
    /// Downtime before the new instance listens.
    pub down_for: Duration,
}

/// A peer that is not one of the scenario's clients and sends a `Hello`
/// for a client's session: the next epoch, `base_sn` 0, `next_sn` far
/// ahead, then a few writes from the `Welcome`'s `resume_from` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrayPeer {
    /// The client whose session it claims.
    pub victim: usize,
    /// When it connects (virtual time from the start).
    pub at: Duration,
    /// `next_sn` of its `Hello`: the victim's next sn plus this.
    pub ahead: u64,
    /// Writes it sends after the `Welcome`.
    pub writes: u32,
    /// Whether it ends with a `Bye` (which closes the session on the
    /// server) instead of just closing its connection.
    pub bye: bool,
}

/// One simulated run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// Seeds everything: session ids, instance ids, op choice, faults, jitter.
    pub seed: u64,
    /// Number of clients.
    pub clients: usize,
    /// Number of servers; client `i` talks to server `i % servers`, except
    /// that the second client of a shared pair talks to its partner's.
    pub servers: usize,
    /// What each client sends.
    pub workload: Workload,
    /// Per-frame faults during the faulty phase.
    pub faults: FaultConfig,
    /// Server crash-restarts during the faulty phase.
    pub crash: Option<CrashPlan>,
    /// Server kills right after chosen protocol events.
    pub kill_on: Vec<KillOn>,
    /// Length of the faulty phase (virtual time).
    pub duration: Duration,
    /// Time allowed after it to finish without faults (virtual time). A
    /// run that has not finished by then fails its verdict.
    pub drain: Duration,
    /// Clients replay unacknowledged frames after reconnecting.
    pub replay: bool,
    /// Clients rebuild their whole transport after every disconnect: a
    /// fresh endpoint, and the old one closed.
    pub rebuild_transport: bool,
    /// One-way network latency.
    pub latency: Duration,
    /// Time to notice a crashed peer.
    pub detect_delay: Duration,
    /// Most unacknowledged sns a client holds (at most
    /// [`CLIENT_WINDOW_MAX`]).
    pub client_window: usize,
    /// A server's receive window per session, in sns (one of
    /// [`SERVER_WINDOWS`]).
    pub server_window: u64,
    /// A server's session table size (one of [`SERVER_SESSIONS`]).
    pub server_sessions: usize,
    /// A server's tombstone table size (one of [`SERVER_TOMBS`]): how many
    /// closed or evicted sessions it remembers.
    pub server_tombs: usize,
    /// Clients `2k` and `2k + 1`, for `k` below this, are built with the
    /// same session id (two hosts started with the same command line).
    pub shared_session_pairs: usize,
    /// A stray peer claiming a client's session.
    pub stray: Option<StrayPeer>,
    /// Event-loop steps after which the run stops and fails its verdict.
    pub max_steps: u64,
    /// Crash-proof state on both sides: a server journal and a client
    /// outbox, client crashes, and the checks of exactly once across
    /// crashes ([`Durability`]). `None`: servers lose everything when they
    /// crash and clients never crash.
    pub durable: Option<Durability>,
}

/// Exactly once across crashes: what survives a crash on each side, and
/// how often clients crash.
///
/// * Servers keep a journal ([`ServerConfig::journal`]) and the
///   application's record of what it was handed. Both are committed at
///   each flush (the driver's `flush`, right before replies leave): a
///   crashed server loses exactly the deliveries and the journal records
///   since its last flush, and its next instance is restored from the
///   committed records ([`ServerCore::restore`]) before it listens.
/// * Each client keeps an outbox: the resume point and the messages it
///   has not released. It writes it after every `submit` (the message is
///   durable before the application counts it as submitted), after every
///   poll that released messages (`base_sn` moved by `outbox_lag` or more
///   since the last write) or changed the server record it trusts, and
///   when its epoch comes within [`EPOCH_RESERVE`]` / 2` of the
///   reservation it wrote (the outbox keeps `epoch + EPOCH_RESERVE`, as
///   `ResumePoint::epoch` allows, so that no connection attempt needs a
///   write of its own). A crashed client restarts from its outbox with
///   `ClientSession::resume` and submits the held messages again, in sn
///   order, before it starts.
///
/// [`ServerConfig::journal`]: iomsg_core::session::ServerConfig::journal
/// [`ServerCore::restore`]: iomsg_core::session::ServerCore::restore
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Durability {
    /// Servers keep a journal and restore their next instance from it.
    pub journal: bool,
    /// Client crash-restarts during the faulty phase: every `every` one
    /// client (in turn) crashes and restarts from its outbox `down_for`
    /// later, at most `max_kills` times in all.
    pub client_crash: Option<CrashPlan>,
    /// Sns a client releases before it writes its outbox for them alone
    /// (1: after every release; more: a crash can find the outbox behind,
    /// and the restarted client submits messages the server has already
    /// delivered).
    pub outbox_lag: u64,
    /// Server crashes that also cut the crashed server's journal back to
    /// an earlier commit (a power cut under a lazy sync, an older copy
    /// restored); `None`: a crash loses only what was not committed.
    pub tail_loss: Option<TailLoss>,
    /// A defect planted in the journal on its way back to a new instance,
    /// to show that the checks find what it breaks.
    pub restore_defect: Option<RestoreDefect>,
}

impl Default for Durability {
    /// The journal on, no client crashes, the outbox written at every
    /// release, no tail loss, no defect.
    fn default() -> Self {
        Durability {
            journal: true,
            client_crash: None,
            outbox_lag: 1,
            tail_loss: None,
            restore_defect: None,
        }
    }
}

/// A journal that loses its last commits (a power cut under a lazy sync,
/// an older copy restored): the crashed server's committed journal is cut
/// back by its last `batches` commits (as many as it keeps, if fewer). A
/// commit holds the journal records and the application's record of
/// deliveries of one flush, so both go back together: the deliveries of
/// the lost commits count as never made (in the ground truth and the
/// applications' records alike), although their acknowledgements may
/// have reached the clients. What the clients were told was acknowledged
/// and is lost now must be named to them (`ClientEvent::StateLost`);
/// nothing else may be lost, and no client may be locked out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailLoss {
    /// Every `every`-th server crash of the faulty phase (1: each one)
    /// cuts the crashed server's journal; 0: none does.
    pub every: u64,
    /// Commits lost at each cut (1 to [`MAX_TAIL_BATCHES`]).
    pub batches: u32,
    /// Near the end of the faulty phase every server loses power: it
    /// crashes, its journal is cut, and it starts again after the crash
    /// plan's downtime. The faults (and kills, and client crashes) end
    /// with the power cut, a quarter of the phase before its end; the
    /// workload goes on to the end, so the clients come back to be told.
    pub at_end: bool,
    /// A commit that holds a session's first record is synced at once
    /// (the application's policy): a cut never reaches past one, so the
    /// journal never loses all of a session.
    pub synced_openings: bool,
}

/// How far above the current epoch a client's outbox reserves epochs.
pub const EPOCH_RESERVE: u32 = 16;

/// A defect planted in the journal records the server application gives
/// back, to a new instance ([`ServerCore::restore`]) and on a `Hello`
/// (`ServerHandler::recall`); records are rewritten from the documented
/// format, checksum recomputed, so the instance takes them.
///
/// [`ServerCore::restore`]: iomsg_core::session::ServerCore::restore
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RestoreDefect {
    /// Every sn in `[cumulative, top)` reads as received: the open holes
    /// are dropped (the record's cumulative point moves to its top).
    DropHoles,
    /// The record's last byte is lost (a torn write): the new instance
    /// must refuse it.
    Torn,
    /// Each session's *first* committed record is given back instead of
    /// its last: a journal reader that keeps the first record of a
    /// session it meets and skips the later ones, so an older state stays
    /// (the restored table is not the dead instance's).
    KeepOldest,
    /// After a tail loss, each session's record is given back with its
    /// cumulative point raised to where the lost commits had taken it (an
    /// application that "repairs" its journal from a high-water mark it
    /// kept apart): the server then vouches for sns no commit kept, and
    /// the client is never told that they are lost.
    HideStateLoss,
}

impl RestoreDefect {
    /// Every defect.
    pub const ALL: [RestoreDefect; 4] = [
        RestoreDefect::DropHoles,
        RestoreDefect::Torn,
        RestoreDefect::KeepOldest,
        RestoreDefect::HideStateLoss,
    ];

    /// Its name in repro lines and on the sweep's command line.
    pub fn name(self) -> &'static str {
        match self {
            RestoreDefect::DropHoles => "dropholes",
            RestoreDefect::Torn => "torn",
            RestoreDefect::KeepOldest => "keepoldest",
            RestoreDefect::HideStateLoss => "hidestateloss",
        }
    }

    /// The defect called `name`.
    pub fn from_name(name: &str) -> Option<RestoreDefect> {
        RestoreDefect::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Every defect's name, for messages: `dropholes, torn, ...`.
    pub fn names() -> String {
        let names: Vec<&str> = RestoreDefect::ALL.iter().map(|d| d.name()).collect();
        names.join(", ")
    }
}

impl Scenario {
    /// One client, one server, no crashes: `messages` writes as fast as a
    /// window of 8 allows, `faults` for the first 50 ms (seed 5). The
    /// tests' basic shape.
    pub fn one_client(messages: u64, faults: FaultConfig, replay: bool) -> Scenario {
        Scenario {
            seed: 5,
            clients: 1,
            workload: Workload {
                messages,
                ..Workload::default()
            },
            faults,
            replay,
            duration: Duration::from_millis(50),
            client_window: 8,
            ..Scenario::default()
        }
    }

    /// The field reproduction: one server crashed and restarted every 2 ms
    /// of uptime (down 500 µs), two clients reconnecting, replay on.
    pub fn field_repro(seed: u64, kills: u64) -> Scenario {
        let every = Duration::from_millis(2);
        let down_for = Duration::from_micros(500);
        let cycle = every + down_for;
        Scenario {
            seed,
            workload: Workload {
                messages: u64::MAX,
                ..Workload::default()
            },
            crash: Some(CrashPlan {
                every,
                down_for,
                max_kills: kills,
            }),
            duration: cycle * (kills.min(u64::from(u32::MAX)) as u32) + every,
            ..Scenario::default()
        }
    }

    /// The session id of client `i`.
    pub fn session_of(&self, i: usize) -> u64 {
        let owner = if i < 2 * self.shared_session_pairs {
            i & !1
        } else {
            i
        };
        mix64(self.seed.wrapping_add(owner as u64 + 1)) | 1
    }

    /// The server address client `i` talks to.
    pub fn server_of(&self, i: usize) -> u16 {
        let i = if i < 2 * self.shared_session_pairs {
            i & !1
        } else {
            i
        };
        (i % self.servers.max(1)) as u16
    }

    /// The virtual time after which the run stops, finished or not.
    pub fn end(&self) -> Duration {
        self.duration.saturating_add(self.drain)
    }

    /// Bytes of each client's payload storage: the workload's `storage`,
    /// or room for a full window of the largest messages plus what a
    /// message that would wrap leaves unused.
    pub fn client_storage(&self) -> usize {
        let w = &self.workload;
        if w.storage > 0 {
            return w.storage;
        }
        (self.client_window + 1) * (w.size as usize).max(READ_REQUEST_LEN)
    }

    /// Checks that a run of this scenario can be built and can end.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        use ScenarioError as E;
        if self.clients == 0 || self.clients > MAX_CLIENTS {
            return Err(E::Clients(self.clients));
        }
        if self.servers == 0 || self.servers > MAX_SERVERS {
            return Err(E::Servers(self.servers));
        }
        let w = &self.workload;
        if w.size > MAX_SIZE {
            return Err(E::Size(w.size));
        }
        if u32::from(w.read_per_mille) + u32::from(w.stream_per_mille) > 1000 {
            return Err(E::OpMix {
                read: w.read_per_mille,
                stream: w.stream_per_mille,
            });
        }
        let f = &self.faults;
        let rates = f.rates();
        let total: u64 = rates.iter().map(|&r| u64::from(r)).sum();
        if total > 1_000_000 {
            return Err(E::FaultRates(total));
        }
        if self.end() > MAX_VIRTUAL_TIME {
            return Err(E::TooLong(self.end()));
        }
        if w.messages == u64::MAX
            && w.interval.is_zero()
            && self.latency.is_zero()
            && !self.duration.is_zero()
        {
            return Err(E::UnboundedAtOneInstant);
        }
        if let Some(c) = self.crash {
            if c.every.is_zero() && c.max_kills > 0 {
                return Err(E::CrashEveryZero);
            }
        }
        if let Some(k) = self.kill_on.iter().find(|k| k.nth == 0) {
            return Err(E::KillOnZero(k.event));
        }
        if self.client_window == 0 || self.client_window > CLIENT_WINDOW_MAX {
            return Err(E::ClientWindow(self.client_window));
        }
        if !SERVER_WINDOWS.contains(&self.server_window) {
            return Err(E::ServerWindow(self.server_window));
        }
        if !SERVER_SESSIONS.contains(&self.server_sessions) {
            return Err(E::ServerSessions(self.server_sessions));
        }
        if !SERVER_TOMBS.contains(&self.server_tombs) {
            return Err(E::ServerTombs(self.server_tombs));
        }
        let least = (w.size as usize).max(READ_REQUEST_LEN);
        if w.storage != 0 && !(least..=MAX_STORAGE).contains(&w.storage) {
            return Err(E::Storage {
                storage: w.storage,
                least,
            });
        }
        if self.shared_session_pairs > self.clients / 2 {
            return Err(E::SharedPairs {
                pairs: self.shared_session_pairs,
                clients: self.clients,
            });
        }
        if let Some(s) = self.stray {
            if s.victim >= self.clients {
                return Err(E::StrayVictim {
                    victim: s.victim,
                    clients: self.clients,
                });
            }
        }
        if self.max_steps == 0 {
            return Err(E::MaxSteps);
        }
        if let Some(d) = self.durable {
            if d.client_crash
                .is_some_and(|c| c.every.is_zero() && c.max_kills > 0)
            {
                return Err(E::CrashEveryZero);
            }
            if d.outbox_lag == 0 {
                return Err(E::OutboxLag);
            }
            if let Some(t) = d.tail_loss {
                let never = t.every == 0 && !t.at_end;
                if never || t.batches == 0 || t.batches > MAX_TAIL_BATCHES {
                    return Err(E::TailLoss(t));
                }
            }
        }
        Ok(())
    }
}

impl Default for Scenario {
    /// Two clients, one server, no faults, 100 ms, then up to 1 s to drain;
    /// client window 64, server window 2048, 16 sessions and 256
    /// tombstones per server.
    fn default() -> Self {
        Scenario {
            seed: 1,
            clients: 2,
            servers: 1,
            workload: Workload::default(),
            faults: FaultConfig::default(),
            crash: None,
            kill_on: Vec::new(),
            duration: Duration::from_millis(100),
            drain: Duration::from_secs(1),
            replay: true,
            rebuild_transport: false,
            latency: Duration::from_micros(5),
            detect_delay: Duration::from_micros(50),
            client_window: 64,
            server_window: 2048,
            server_sessions: 16,
            server_tombs: 256,
            shared_session_pairs: 0,
            stray: None,
            max_steps: DEFAULT_MAX_STEPS,
            durable: None,
        }
    }
}

/// Why a scenario cannot be run. Each says what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioError {
    /// `clients` is 0 or above [`MAX_CLIENTS`].
    Clients(usize),
    /// `servers` is 0 or above [`MAX_SERVERS`].
    Servers(usize),
    /// The workload's size exceeds [`MAX_SIZE`].
    Size(u32),
    /// Reads and streamed writes add up to more than 1000 per mille.
    OpMix {
        /// `read_per_mille`.
        read: u16,
        /// `stream_per_mille`.
        stream: u16,
    },
    /// The fault rates add up to more than 1 000 000 ppm.
    FaultRates(u64),
    /// `duration + drain` exceeds [`MAX_VIRTUAL_TIME`].
    TooLong(Duration),
    /// An unbounded workload with no interval and no latency: time would
    /// never pass.
    UnboundedAtOneInstant,
    /// A crash plan (servers' or clients') with kills and `every` zero.
    CrashEveryZero,
    /// A `kill_on` entry with `nth` 0 (occurrences count from 1).
    KillOnZero(KillEvent),
    /// `client_window` is 0 or above [`CLIENT_WINDOW_MAX`].
    ClientWindow(usize),
    /// `server_window` is not one of [`SERVER_WINDOWS`].
    ServerWindow(u64),
    /// `server_sessions` is not one of [`SERVER_SESSIONS`].
    ServerSessions(usize),
    /// `server_tombs` is not one of [`SERVER_TOMBS`].
    ServerTombs(usize),
    /// The workload's `storage` cannot hold its largest message (or a
    /// read's request), or exceeds [`MAX_STORAGE`].
    Storage {
        /// `storage`.
        storage: usize,
        /// The least it must be: the workload's size, at least a read's
        /// request.
        least: usize,
    },
    /// More shared-session pairs than the clients can form.
    SharedPairs {
        /// `shared_session_pairs`.
        pairs: usize,
        /// `clients`.
        clients: usize,
    },
    /// The stray peer's victim is not a client.
    StrayVictim {
        /// The victim's index.
        victim: usize,
        /// `clients`.
        clients: usize,
    },
    /// `max_steps` is 0.
    MaxSteps,
    /// The outbox's `outbox_lag` is 0.
    OutboxLag,
    /// A tail loss that never happens (`every` 0 and not `at_end`), or
    /// with `batches` 0 or above [`MAX_TAIL_BATCHES`].
    TailLoss(TailLoss),
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ScenarioError as E;
        match self {
            E::Clients(n) => write!(f, "{n} clients: use 1 to {MAX_CLIENTS}"),
            E::Servers(n) => write!(f, "{n} servers: use 1 to {MAX_SERVERS}"),
            E::Size(n) => write!(
                f,
                "workload size {n} does not fit the simulation's {MTU}-byte frames: use at most {MAX_SIZE}"
            ),
            E::OpMix { read, stream } => write!(
                f,
                "read_per_mille {read} + stream_per_mille {stream} exceed 1000: lower one of them"
            ),
            E::FaultRates(t) => write!(
                f,
                "fault rates add up to {t} ppm: keep their sum at most 1000000"
            ),
            E::TooLong(d) => write!(
                f,
                "duration + drain is {} s of virtual time: keep it at most {} s",
                d.as_secs(),
                MAX_VIRTUAL_TIME.as_secs()
            ),
            E::UnboundedAtOneInstant => write!(
                f,
                "an unbounded workload (messages u64::MAX) with interval 0 and latency 0 never lets \
                 virtual time pass: set an interval, a latency or a message count"
            ),
            E::CrashEveryZero => write!(
                f,
                "crash plan with kills and `every` 0: give the servers (or clients) at least 1 µs of uptime"
            ),
            E::KillOnZero(e) => write!(
                f,
                "kill_on {} with nth 0: occurrences count from 1",
                e.name()
            ),
            E::ClientWindow(n) => write!(
                f,
                "client_window {n}: use 1 to {CLIENT_WINDOW_MAX}"
            ),
            E::ServerWindow(n) => write!(
                f,
                "server_window {n} is not one the simulation runs: use one of {SERVER_WINDOWS:?}"
            ),
            E::ServerSessions(n) => write!(
                f,
                "server_sessions {n} is not one the simulation runs: use one of {SERVER_SESSIONS:?}"
            ),
            E::ServerTombs(n) => write!(
                f,
                "server_tombs {n} is not one the simulation runs: use one of {SERVER_TOMBS:?}"
            ),
            E::Storage { storage, least } => write!(
                f,
                "client storage of {storage} bytes: use 0 (room for a full window) or \
                 {least} to {MAX_STORAGE} bytes, enough for the largest message"
            ),
            E::SharedPairs { pairs, clients } => write!(
                f,
                "{pairs} shared-session pairs need {} clients, there are {clients}",
                2 * pairs
            ),
            E::StrayVictim { victim, clients } => write!(
                f,
                "stray peer victim {victim} is not a client (there are {clients})"
            ),
            E::MaxSteps => write!(f, "max_steps 0: allow the run at least one step"),
            E::OutboxLag => write!(
                f,
                "outbox_lag 0: use 1 (write the outbox at every release) or more"
            ),
            E::TailLoss(t) => write!(
                f,
                "tail loss every {} crashes{} of {} commits: cut at every 1 or more crashes or \
                 near the end of the faulty phase, 1 to {MAX_TAIL_BATCHES} commits",
                t.every,
                if t.at_end { " and at the end" } else { "" },
                t.batches
            ),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Client configuration used by the simulation: timers scaled to a
/// network with microsecond latency.
pub fn sim_client_config(
    session: u64,
    token: u64,
    replay: bool,
    validate: bool,
    size: u32,
) -> ClientConfig {
    let mut c = ClientConfig::new(session, token);
    c.connect_timeout = Duration::from_millis(1);
    c.reply_timeout = Duration::from_millis(2);
    c.backoff.initial = Duration::from_micros(50);
    c.backoff.max = Duration::from_millis(1);
    c.max_retries = 100_000;
    // Scenarios run more clients than the server's table holds on
    // purpose: a client started into a full table waits for room.
    c.retry_full_table = true;
    c.replay = replay;
    c.validate = validate;
    c.max_payload = size.max(64);
    c.seed = mix64(session);
    c
}

/// The one place where a scenario becomes the core's configurations:
/// every client gets a token of its own (clients of a shared pair share a
/// session id, not a token), the window `client_window`, and the servers
/// offer `server_window` and hold `server_sessions` sessions. The servers
/// are also built with those as their capacities, and `server_tombs`
/// tombstones (`sim::server::build`).
pub fn configs(scenario: &Scenario, client: usize, instance: u64) -> (ClientConfig, ServerConfig) {
    let w = &scenario.workload;
    let token = mix64(scenario.seed ^ mix64(0x70CE_0000 + client as u64));
    let mut client_config = sim_client_config(
        scenario.session_of(client),
        token,
        scenario.replay,
        w.validate,
        w.size,
    );
    client_config.window = u32::try_from(scenario.client_window).unwrap_or(u32::MAX);
    let mut server_config = ServerConfig::new(instance);
    server_config.validate = w.validate;
    server_config.window = u32::try_from(scenario.server_window).unwrap_or(u32::MAX);
    server_config.max_sessions = scenario.server_sessions;
    server_config.journal = scenario.durable.is_some_and(|d| d.journal);
    (client_config, server_config)
}
