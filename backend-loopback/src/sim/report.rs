//! The simulation's report: what the clients and servers counted (their
//! claims), what the ground truth shows, and the verdict that compares
//! them. No row mixes the two: a claim is counted as claimed, the truth as
//! found, and every disagreement is a listed violation.

use core::fmt;
use core::ops::Range;
use core::time::Duration;
use std::collections::BTreeMap;

use crate::sim::loss::SessionLoss;
use iomsg_core::session::{ClientSession, ServerStats};
use iomsg_core::wire::RejectReason;
use iomsg_core::Instant;

use super::check::{Invariant, Violation};
use super::truth::{Verdict, MAX_LISTED_LOST};
use super::Scenario;
use crate::fault::FaultCounts;
use crate::network::NetworkCounts;

pub use crate::sim::loss::LossClass;

/// A run of lost sns of one client: never delivered from its frames, and
/// no longer pending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRange {
    /// The client (index in the scenario).
    pub client: usize,
    /// Its session.
    pub session: u64,
    /// The sns.
    pub range: Range<u64>,
    /// How the network lost them (ground truth).
    pub class: LossClass,
    /// How the protocol reported them: the class of the client's
    /// `NotReplayed`, or `None` when nobody reported them (acknowledged
    /// though undelivered, or left behind by a failed client).
    pub reported: Option<LossClass>,
}

/// A latency distribution (virtual time).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    samples: Vec<u64>,
}

impl Latency {
    /// Adds a sample.
    pub fn record(&mut self, d: Duration) {
        self.samples
            .push(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    }
    /// Number of samples.
    pub fn count(&self) -> usize {
        self.samples.len()
    }
    /// The `p`-th percentile (0..=100), in microseconds.
    pub fn percentile(&self, p: u32) -> Option<u64> {
        let mut s = self.samples.clone();
        s.sort_unstable();
        let n = s.len();
        if n == 0 {
            return None;
        }
        let rank = ((u64::from(p.min(100)) * n as u64).div_ceil(100)).max(1) as usize;
        s.get(rank - 1).copied()
    }
}

/// Most live losses a report lists with their time (all are counted).
pub const MAX_LISTED_LIVE_LOSSES: usize = 1000;

/// What crash-proof state did in a run ([`Durability`](super::Durability)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurableCounts {
    /// Client processes crashed (and restarted from their outbox).
    pub client_kills: u64,
    /// Messages the restarted clients submitted again from their outbox.
    pub resubmitted: u64,
    /// New server instances restored from a journal that held records.
    pub restores: u64,
    /// Journal records new server instances took back.
    pub restored: u64,
    /// Journal records a new instance had no room for.
    pub refused_for_room: u64,
    /// Tombstones restores forgot to make room (their sessions are
    /// recalled from the journal on their `Hello`).
    pub forgotten_at_restore: u64,
    /// Sessions the restore property compared (each new instance's
    /// record against the dead instance's last committed one).
    pub restore_compared: u64,
    /// Deliveries the server applications committed.
    pub committed: u64,
    /// Deliveries lost with a crashed server's uncommitted record.
    pub rolled_back: u64,
    /// Server crashes whose journal lost its last commits.
    pub tail_cuts: u64,
    /// Commits lost so.
    pub commits_lost: u64,
    /// Committed deliveries lost with them.
    pub deliveries_lost: u64,
}

/// Everything a run did, and whether the protocol told the truth about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The scenario's seed.
    pub seed: u64,
    /// Whether clients replayed.
    pub replay: bool,
    /// Virtual time the run took.
    pub virtual_time: Duration,
    /// Event-loop steps.
    pub steps: u64,
    /// Server crashes (planned and triggered).
    pub kills: u64,
    /// Times a server (re)started listening.
    pub listens: Vec<Instant>,
    /// Client crashes, journals and outboxes (crash-proof state on).
    pub durable: DurableCounts,

    // --- What the clients counted (their claims) ---
    /// First transmissions, as the clients counted them.
    pub sent: u64,
    /// Retransmissions, as the clients counted them.
    pub replayed: u64,
    /// Sns the clients announced as possible duplicates.
    pub possible_duplicates: u64,
    /// Times a client had more to send and its window was full.
    pub backpressure: u64,
    /// Unacknowledged sns at each client when it learnt that its
    /// connection broke, summed: all that the breaks can have lost.
    pub unacked_at_disconnects: u64,
    /// Transports rebuilt.
    pub transport_rebuilds: u64,
    /// Client endpoints (transports) whose frames reached a server.
    pub client_endpoints: u64,
    /// From a client's disconnect to its next handshake.
    pub reconnect_latency: Latency,

    // --- What the servers counted (their claims) ---
    /// Duplicates the servers' trackers discarded.
    pub duplicates_discarded: u64,
    /// Stale-epoch frames the servers discarded.
    pub stale_discarded: u64,
    /// Replies the servers dropped because their connection ended first.
    pub replies_discarded: u64,
    /// Idle sessions the servers evicted to make room.
    pub evicted: u64,
    /// Tombstones the servers forgot to make room (a restore's included).
    pub tombs_forgotten: u64,
    /// Sessions the servers took back from their journal on a `Hello`.
    pub recalled: u64,
    /// Rejections by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Live losses as reported, with when (the first
    /// [`MAX_LISTED_LIVE_LOSSES`]).
    pub live_losses: Vec<(Instant, u64, Range<u64>)>,
    /// Live losses reported, listed or not.
    pub live_losses_total: u64,

    // --- Ground truth (network, server deliveries, client releases) ---
    /// Requests the clients' `submit` accepted.
    pub submitted: u64,
    /// Frames the network handed to server endpoints.
    pub carried_frames: u64,
    /// Sns the network carried to a server at least once.
    pub carried: u64,
    /// Distinct sns handed to a server application from their client's
    /// own frames.
    pub delivered_unique: u64,
    /// All such deliveries, duplicates included.
    pub deliveries: u64,
    /// Deliveries beyond the first of each sn.
    pub duplicates_after_restart: u64,
    /// Deliveries from a stray peer's frames.
    pub deliveries_by_stray: u64,
    /// Sns the clients released as acknowledged (from their events).
    pub acknowledged: u64,
    /// Sns the clients gave up (`NotReplayed`).
    pub given_up: u64,
    /// Of those, classed by the servers' claims as live losses.
    pub reported_live: u64,
    /// Of those, classed as in flight at a disconnect.
    pub reported_in_flight: u64,
    /// Sns the servers claimed as live gaps.
    pub live_gap_sns: u64,
    /// Of those, delivered after the claim (by any instance).
    pub recovered: u64,
    /// Submitted sns never delivered and no longer pending.
    pub truth_lost: u64,
    /// Of those, lost by the network on a live connection.
    pub lost_live: u64,
    /// Of those, lost in flight at a disconnect.
    pub lost_in_flight: u64,
    /// Undelivered sns of clients that failed and said so.
    pub failed_reported: u64,
    /// Submitted sns neither delivered nor reported lost when the run
    /// ended (never-sent sns included).
    pub pending: u64,
    /// The lost sns, named (the first 10 000 ranges).
    pub lost: Vec<LostRange>,
    /// All lost ranges, listed or not.
    pub lost_ranges: u64,
    /// Each session with losses, and its losses by class (the core's
    /// `SessionLoss`), from the ground truth.
    pub sessions: BTreeMap<u64, SessionLoss>,
    /// Handshakes completed after each client's first.
    pub reconnects: u64,
    /// Clients that gave up.
    pub failed_clients: u64,
    /// Acknowledged sns the clients named lost with their server's state
    /// (`StateLost`: the server's journal went back in time).
    pub state_lost: u64,
    /// Acknowledged sns a journal lost after their client left (it was
    /// never established again, so no instance could name them to it).
    pub state_lost_unreachable: u64,
    /// Payloads the workload's checker found corrupt (writes delivered,
    /// reads answered) where payload CRCs were off and corruption faults
    /// on: reported, not a violation.
    pub corrupt: u64,
    /// Client events the sessions dropped.
    pub events_dropped: u64,
    /// Reads the clients submitted.
    pub reads: u64,
    /// Of those, reads whose data reached the client's application.
    pub reads_answered: u64,
    /// What the fault injector did.
    pub faults: FaultCounts,
    /// What the network threw away.
    pub network: NetworkCounts,

    // --- Verdict ---
    /// The violations found (the first 100; consecutive sns merged).
    pub discrepancies: Vec<Violation>,
    /// Violations per invariant (sns, or occurrences), all of them.
    pub violations: BTreeMap<Invariant, u64>,
    /// Violations (ranges) not listed in `discrepancies`.
    pub discrepancies_unlisted: u64,
}

impl Report {
    pub(crate) fn new(scenario: &Scenario) -> Report {
        Report {
            seed: scenario.seed,
            replay: scenario.replay,
            virtual_time: Duration::ZERO,
            steps: 0,
            kills: 0,
            listens: Vec::new(),
            durable: DurableCounts::default(),
            sent: 0,
            replayed: 0,
            possible_duplicates: 0,
            backpressure: 0,
            unacked_at_disconnects: 0,
            transport_rebuilds: 0,
            client_endpoints: 0,
            reconnect_latency: Latency::default(),
            duplicates_discarded: 0,
            stale_discarded: 0,
            replies_discarded: 0,
            evicted: 0,
            tombs_forgotten: 0,
            recalled: 0,
            rejected: BTreeMap::new(),
            live_losses: Vec::new(),
            live_losses_total: 0,
            submitted: 0,
            carried_frames: 0,
            carried: 0,
            delivered_unique: 0,
            deliveries: 0,
            duplicates_after_restart: 0,
            deliveries_by_stray: 0,
            acknowledged: 0,
            given_up: 0,
            reported_live: 0,
            reported_in_flight: 0,
            live_gap_sns: 0,
            recovered: 0,
            truth_lost: 0,
            lost_live: 0,
            lost_in_flight: 0,
            failed_reported: 0,
            pending: 0,
            lost: Vec::new(),
            lost_ranges: 0,
            sessions: BTreeMap::new(),
            reconnects: 0,
            failed_clients: 0,
            state_lost: 0,
            state_lost_unreachable: 0,
            corrupt: 0,
            reads: 0,
            reads_answered: 0,
            events_dropped: 0,
            faults: FaultCounts::default(),
            network: NetworkCounts::default(),
            discrepancies: Vec::new(),
            violations: BTreeMap::new(),
            discrepancies_unlisted: 0,
        }
    }

    /// Whether every invariant held: nothing pending, the run finished,
    /// and the protocol's claims agree with the ground truth.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The invariants violated.
    pub fn violated(&self) -> Vec<Invariant> {
        self.violations.keys().copied().collect()
    }

    /// Violations of one invariant.
    pub fn violations_of(&self, invariant: Invariant) -> u64 {
        self.violations.get(&invariant).copied().unwrap_or(0)
    }

    /// All lost sns (ground truth), both classes.
    pub fn lost_total(&self) -> u64 {
        self.truth_lost
    }

    /// Whether `lost` names only the first of the lost ranges.
    pub fn lost_list_cut(&self) -> bool {
        self.lost_ranges > self.lost.len() as u64
    }

    /// Rejections for one reason.
    pub fn rejected(&self, reason: RejectReason) -> u64 {
        self.rejected.get(reason.name()).copied().unwrap_or(0)
    }

    pub(crate) fn live_loss(&mut self, at: Instant, session: u64, missing: Range<u64>) {
        self.live_losses_total += 1;
        if self.live_losses.len() < MAX_LISTED_LIVE_LOSSES {
            self.live_losses.push((at, session, missing));
        }
    }

    pub(crate) fn absorb_server(&mut self, s: &ServerStats) {
        self.duplicates_discarded += s.duplicates;
        self.stale_discarded += s.stale;
        self.replies_discarded += s.replies_discarded;
        self.evicted += s.evicted;
        self.tombs_forgotten += s.tombs_forgotten;
        self.recalled += s.recalled;
        for reason in RejectReason::ALL {
            let n = s.rejects(reason);
            if n > 0 {
                *self.rejected.entry(reason.name().to_string()).or_default() += n;
            }
        }
    }

    pub(crate) fn absorb_client<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>>(
        &mut self,
        c: &ClientSession<N, S>,
    ) {
        let s = c.stats();
        self.sent += s.sent;
        self.replayed += s.replayed;
        self.possible_duplicates += s.possible_duplicates;
    }

    pub(crate) fn absorb_verdict(&mut self, v: Verdict) {
        self.submitted = v.submitted;
        self.carried_frames = v.carried_frames;
        self.carried = v.carried_sns;
        self.delivered_unique = v.delivered_unique;
        self.deliveries = v.deliveries;
        self.duplicates_after_restart = v.duplicates;
        self.deliveries_by_stray = v.deliveries_by_stray;
        self.acknowledged = v.acknowledged;
        self.given_up = v.given_up;
        self.reported_live = v.reported_live;
        self.reported_in_flight = v.reported_in_flight;
        self.live_gap_sns = v.live_gap_sns;
        self.recovered = v.recovered;
        self.truth_lost = v.truth_lost;
        self.lost_live = v.lost_live;
        self.lost_in_flight = v.lost_in_flight;
        self.failed_reported = v.failed_reported;
        self.pending = v.pending;
        self.lost = v.lost;
        self.lost_ranges = v.lost_ranges;
        self.sessions = v.sessions;
        self.reconnects = v.reconnects;
        self.failed_clients = v.failed_clients;
        self.state_lost = v.state_lost;
        self.state_lost_unreachable = v.state_lost_unreachable;
        self.corrupt = v.corrupt;
        self.events_dropped = v.events_dropped;
        self.reads = v.reads;
        self.reads_answered = v.reads_answered;
        self.violations = v.findings.counts;
        self.discrepancies = v.findings.listed;
        self.discrepancies_unlisted = v.findings.unlisted;
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_run(f)?;
        self.fmt_clients(f)?;
        self.fmt_servers(f)?;
        self.fmt_truth(f)?;
        self.fmt_faults(f)?;
        self.fmt_losses(f)?;
        self.fmt_verdict(f)
    }
}

/// One row of the report: a name and a value.
fn row(f: &mut fmt::Formatter<'_>, k: &str, v: &dyn fmt::Display) -> fmt::Result {
    writeln!(f, "  {k:<38} {v:>14}")
}

impl Report {
    /// The title, the run's length and kills, the durable counts, the reconnects.
    fn fmt_run(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "iomsg simulation report (seed {}, replay {})",
            self.seed,
            if self.replay { "on" } else { "off" }
        )?;
        row(
            f,
            "virtual time",
            &format_args!("{:.3} s", self.virtual_time.as_secs_f64()),
        )?;
        row(f, "event-loop steps", &self.steps)?;
        row(f, "server kills", &self.kills)?;
        if self.durable != DurableCounts::default() {
            self.fmt_durable(f)?;
        }
        row(f, "reconnects", &self.reconnects)?;
        row(f, "transport rebuilds", &self.transport_rebuilds)?;
        row(
            f,
            "client endpoints seen by servers",
            &self.client_endpoints,
        )?;
        if let (Some(p50), Some(p99), Some(max)) = (
            self.reconnect_latency.percentile(50),
            self.reconnect_latency.percentile(99),
            self.reconnect_latency.percentile(100),
        ) {
            row(
                f,
                "reconnect latency p50/p99/max",
                &format_args!("{p50}/{p99}/{max} µs"),
            )?;
        }
        Ok(())
    }

    /// What the journals and outboxes did.
    fn fmt_durable(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.durable;
        row(f, "client kills (restarted from outbox)", &d.client_kills)?;
        row(f, "messages submitted again", &d.resubmitted)?;
        row(
            f,
            "restores (sessions compared)",
            &format_args!("{} ({})", d.restores, d.restore_compared),
        )?;
        row(f, "journal records restored", &d.restored)?;
        row(f, "journal records without room", &d.refused_for_room)?;
        row(
            f,
            "tombstones forgotten at restore",
            &d.forgotten_at_restore,
        )?;
        row(f, "deliveries committed", &d.committed)?;
        row(f, "deliveries lost uncommitted", &d.rolled_back)?;
        row(
            f,
            "tail losses (commits/deliveries lost)",
            &format_args!("{} ({}/{})", d.tail_cuts, d.commits_lost, d.deliveries_lost),
        )?;
        row(f, "acked sns named lost state", &self.state_lost)?;
        row(
            f,
            "acked sns lost after their client left",
            &self.state_lost_unreachable,
        )?;
        Ok(())
    }

    /// The clients' counts.
    fn fmt_clients(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, " clients' counts:")?;
        row(f, "sent", &self.sent)?;
        row(f, "replayed", &self.replayed)?;
        row(
            f,
            "possible duplicates announced",
            &self.possible_duplicates,
        )?;
        row(f, "window full (backpressure)", &self.backpressure)?;
        row(
            f,
            "unacknowledged at disconnects",
            &self.unacked_at_disconnects,
        )?;
        row(f, "clients failed", &self.failed_clients)?;
        row(f, "corrupt payloads (checker, no CRC)", &self.corrupt)?;
        row(f, "events dropped", &self.events_dropped)?;
        Ok(())
    }

    /// The servers' counts.
    fn fmt_servers(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, " servers' counts:")?;
        row(f, "duplicates discarded", &self.duplicates_discarded)?;
        row(f, "stale frames discarded", &self.stale_discarded)?;
        row(
            f,
            "replies dropped with their connection",
            &self.replies_discarded,
        )?;
        row(
            f,
            "sessions evicted/forgotten/recalled",
            &format_args!(
                "{}/{}/{}",
                self.evicted, self.tombs_forgotten, self.recalled
            ),
        )?;
        for (reason, n) in &self.rejected {
            row(f, &format!("rejected: {reason}"), n)?;
        }
        row(f, "live gaps (sns, reported at once)", &self.live_gap_sns)?;
        row(f, "  of which recovered (delivered later)", &self.recovered)?;
        Ok(())
    }

    /// The ground truth: submitted, carried, delivered, acknowledged, lost.
    fn fmt_truth(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, " ground truth:")?;
        row(f, "submitted", &self.submitted)?;
        row(f, "frames received by servers", &self.carried_frames)?;
        row(f, "sns received by servers", &self.carried)?;
        row(f, "delivered (distinct sns)", &self.delivered_unique)?;
        row(f, "deliveries (with duplicates)", &self.deliveries)?;
        row(f, "duplicate deliveries", &self.duplicates_after_restart)?;
        if self.deliveries_by_stray > 0 {
            row(
                f,
                "deliveries of a stray peer's frames",
                &self.deliveries_by_stray,
            )?;
        }
        row(f, "acknowledged to clients", &self.acknowledged)?;
        if self.reads > 0 {
            row(
                f,
                "reads submitted/answered",
                &format_args!("{}/{}", self.reads, self.reads_answered),
            )?;
        }
        row(f, "given up by clients", &self.given_up)?;
        row(f, "  reported as live losses", &self.reported_live)?;
        row(f, "  reported as in flight", &self.reported_in_flight)?;
        row(f, "lost (never delivered)", &self.truth_lost)?;
        row(f, "  on a live connection", &self.lost_live)?;
        row(f, "  in flight at disconnect", &self.lost_in_flight)?;
        row(f, "  left by failed clients", &self.failed_reported)?;
        row(f, "still pending at the end", &self.pending)?;
        Ok(())
    }

    /// The faults injected and what the network discarded.
    fn fmt_faults(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fc = &self.faults;
        row(
            f,
            "faults: drop/silent/dup/reorder",
            &format_args!(
                "{}/{}/{}/{}",
                fc.dropped, fc.silent_dropped, fc.duplicated, fc.reordered
            ),
        )?;
        row(
            f,
            "faults: corrupt/delay/disconnect",
            &format_args!("{}/{}/{}", fc.corrupted, fc.delayed, fc.disconnects),
        )?;
        row(f, "faults: held frames lost", &fc.held_lost)?;
        row(
            f,
            "network: discarded/to dead endpoint",
            &format_args!(
                "{}/{}",
                self.network.discarded, self.network.to_dead_endpoint
            ),
        )?;
        Ok(())
    }

    /// The sessions' losses and the lost ranges (the first 20 of each).
    fn fmt_losses(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (session, loss) in self.sessions.iter().take(20) {
            writeln!(f, "  session {session:#018x}: {loss}")?;
        }
        for r in self.lost.iter().take(20) {
            writeln!(f, "  {}", lost_line(r))?;
        }
        if self.lost_ranges > 20 {
            write!(f, "  ... {} more lost ranges", self.lost_ranges - 20)?;
            if self.lost_list_cut() {
                write!(
                    f,
                    " (the list keeps the first {MAX_LISTED_LOST} of {})",
                    self.lost_ranges
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }

    /// The verdict, and with a failure the invariants broken and the
    /// discrepancies found.
    fn fmt_verdict(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.passed() {
            return writeln!(
                f,
                "  verdict: PASS: every invariant holds against the ground truth"
            );
        }
        let total: u64 = self.violations.values().sum();
        writeln!(f, "  verdict: FAIL: {total} violations")?;
        for (inv, n) in &self.violations {
            writeln!(f, "    {inv}: {n}")?;
        }
        for d in &self.discrepancies {
            writeln!(f, "    {d}")?;
        }
        if self.discrepancies_unlisted > 0 {
            writeln!(
                f,
                "    ... {} more (the list keeps the first {})",
                self.discrepancies_unlisted,
                self.discrepancies.len()
            )?;
        }
        Ok(())
    }
}

/// One lost range as a report line.
pub fn lost_line(r: &LostRange) -> String {
    let reported = match r.reported {
        Some(c) => format!("reported {c}"),
        None => "not reported".to_string(),
    };
    format!(
        "lost: client {} session {:#018x} sns {}..{} ({}; {reported})",
        r.client, r.session, r.range.start, r.range.end, r.class
    )
}
