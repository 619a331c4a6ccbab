//! Going on with a session after its process crashed: where it stands
//! ([`ResumePoint`]), and a session built from that point.

use heapless::Deque;

use super::{ClientConfig, ClientSession, ClientState, ClientStats};
use crate::rng::SplitMix64;
use crate::seq::{PayloadRing, SendWindow};
use crate::time::Instant;
use crate::wire::MAX_DATA_LEN;

/// Where a client session stands: what an outbox keeps to
/// [`ClientSession::resume`] it after a crash of its process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResumePoint {
    /// The oldest sn the session still holds: every message below it was
    /// released (acknowledged, and a read answered).
    pub base_sn: u64,
    /// No connection attempt of the session used a larger epoch; the next
    /// uses a larger one (a server refuses a `Hello` of an epoch it has
    /// seen). An outbox that cannot write before every attempt keeps a
    /// reservation above the current epoch instead.
    pub epoch: u32,
    /// The server instance of the last `Welcome`.
    pub instance: Option<u64>,
    /// The server record (incarnation) known to have seen every frame sent
    /// so far: a restored client trusts it as the crashed one did, so a
    /// server that kept a journal resumes it without any duplicate
    /// announced.
    pub incarnation: Option<u64>,
}

impl ResumePoint {
    /// A point at `base_sn` and `epoch`, trusting no server record.
    pub const fn new(base_sn: u64, epoch: u32) -> ResumePoint {
        ResumePoint {
            base_sn,
            epoch,
            instance: None,
            incarnation: None,
        }
    }

    /// The same point, trusting `incarnation` of server `instance`.
    #[must_use]
    pub const fn trusting(self, instance: u64, incarnation: u64) -> ResumePoint {
        ResumePoint {
            instance: Some(instance),
            incarnation: Some(incarnation),
            ..self
        }
    }
}

impl<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>> ClientSession<N, S> {
    /// A session in `Idle` that goes on from `point`, as a client
    /// restarted from its outbox does: the same session id and token
    /// (in `config`), sns from `point.base_sn`, epochs above
    /// `point.epoch`, and the server record it trusted. Submit the
    /// messages the outbox still holds, in sn order, before
    /// [`start`](Self::start): they get their old sns, and the server
    /// acknowledges without delivering again what it already has (when
    /// it kept a journal). [`resume_point`](Self::resume_point) says what
    /// to keep.
    pub fn resume(config: ClientConfig, now: Instant, storage: S, point: ResumePoint) -> Self {
        let rng = SplitMix64::new(config.seed);
        let agreed = u64::from(config.window).min(N as u64).max(1);
        let base = point.base_sn;
        ClientSession {
            config,
            state: ClientState::Idle,
            epoch: point.epoch,
            window: SendWindow::new(base),
            payloads: PayloadRing::new(storage),
            acked: base,
            unsettled_reads: 0,
            reask_due: 0,
            reask_cursor: base,
            reasks_awaited: 0,
            frames_out: 0,
            conn_start: 0,
            transport_limit: MAX_DATA_LEN as usize,
            sent_hw: base,
            tx_cursor: base,
            hello_pending: false,
            hello: (base, base),
            bye_pending: false,
            probe_pending: false,
            last_probe: now,
            probed_upto: base,
            closing: false,
            resumed: base > 0 || point.epoch > 0,
            instance: point.instance,
            trusted: point.incarnation,
            agreed,
            attempt: 0,
            quick_retries: 0,
            refused: false,
            failing_since: None,
            started: now,
            last_progress: now,
            action: None,
            rng,
            events: Deque::new(),
            stats: ClientStats::default(),
        }
    }

    /// Marks read `sn` of a resumed session as answered: the crashed
    /// process handed its answer to the application (its outbox says so),
    /// so the answer is not handed over again. The read is still sent
    /// when its turn comes (the server may need its sn), and released
    /// once acknowledged, as an answered read is. Call it after
    /// submitting the held messages again, before [`start`](Self::start).
    /// Returns whether `sn` was a read waiting for its answer.
    pub fn settle_read(&mut self, sn: u64) -> bool {
        self.settle_answered(sn)
    }

    /// What a client that keeps its session durably (an outbox) must keep
    /// to [`resume`](Self::resume) it after a crash, with the messages
    /// from `base_sn` on. It changes when messages are released (acked
    /// writes, answered reads), when a connection attempt starts (the
    /// epoch) and when a `Welcome` names a server record.
    pub fn resume_point(&self) -> ResumePoint {
        ResumePoint {
            base_sn: self.window.base(),
            epoch: self.epoch,
            instance: self.instance,
            incarnation: self.trusted,
        }
    }
}
