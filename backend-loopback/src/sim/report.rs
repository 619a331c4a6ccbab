//! The simulation's report: protocol counts, ground truth, discrepancies.

use core::fmt;
use core::ops::Range;
use core::time::Duration;
use std::collections::BTreeMap;

use iomsg_core::session::{ClientEvent, ClientSession, ServerEvent, ServerStats};
use iomsg_core::wire::RejectReason;
use iomsg_core::Instant;

use super::truth::{self, Truth};
use super::Scenario;
use crate::fault::FaultCounts;

/// Why an sn was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LossClass {
    /// Unacknowledged when its connection broke, and not replayed.
    InFlightAtDisconnect,
    /// Jumped over on a live connection and never filled: a transport bug.
    LiveConnection,
}

impl fmt::Display for LossClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossClass::InFlightAtDisconnect => "in flight at disconnect",
            LossClass::LiveConnection => "lost on a live connection",
        })
    }
}

/// A run of lost sns of one session, with their class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRange {
    /// The session.
    pub session: u64,
    /// The sns.
    pub range: Range<u64>,
    /// Why.
    pub class: LossClass,
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

/// Everything a run did, and whether the protocol told the truth about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The scenario's seed.
    pub seed: u64,
    /// Whether clients replayed.
    pub replay: bool,
    /// Virtual time the run took.
    pub virtual_time: Duration,
    /// Event-loop iterations.
    pub steps: u64,
    /// Server crashes.
    pub kills: u64,
    /// Times a server (re)started listening.
    pub listens: Vec<Instant>,
    /// Requests accepted by clients.
    pub submitted: u64,
    /// Sns transmitted at least once.
    pub sent: u64,
    /// Sns acknowledged by a server's cumulative ack.
    pub acknowledged: u64,
    /// Distinct sns handed to a server application (ground truth).
    pub delivered_unique: u64,
    /// All deliveries, duplicates after restarts included (ground truth).
    pub deliveries: u64,
    /// Retransmissions.
    pub replayed: u64,
    /// Deliveries of an sn a killed instance had already processed.
    pub duplicates_after_restart: u64,
    /// Duplicates the servers' trackers discarded.
    pub duplicates_discarded: u64,
    /// Stale-epoch frames the servers discarded.
    pub stale_discarded: u64,
    /// Sns the clients announced as possible duplicates.
    pub possible_duplicates: u64,
    /// Rejections by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Sns jumped over on live connections (reported at once).
    pub live_gap_sns: u64,
    /// Of those, filled later (by reordering or replay).
    pub recovered: u64,
    /// Lost sns by class, as the protocol reported them.
    pub lost_in_flight: u64,
    /// Lost on a live connection, as reported.
    pub lost_live: u64,
    /// Given up by a client, though a (killed) server had processed them.
    pub unconfirmed_delivered: u64,
    /// Lost sns that the ground truth sees (never delivered anywhere).
    pub truth_lost: u64,
    /// Sent, unacknowledged and not given up when the run ended (the drain
    /// did not finish): neither delivered nor lost yet.
    pub pending: u64,
    /// Every lost sn, named (the first 10 000 ranges).
    pub lost: Vec<LostRange>,
    /// Frames servers held before their connection's handshake.
    pub backlogged: u64,
    /// Times a client's window was full when it had more to send.
    pub backpressure: u64,
    /// Unacknowledged sns at each client when it learnt that its
    /// connection broke, summed: all that the breaks can have lost.
    pub unacked_at_disconnects: u64,
    /// Live losses as reported, with when (the first 1000).
    pub live_losses: Vec<(Instant, u64, Range<u64>)>,
    /// Handshakes completed after the first of each client.
    pub reconnects: u64,
    /// Transports rebuilt.
    pub transport_rebuilds: u64,
    /// From a client's disconnect to its next handshake.
    pub reconnect_latency: Latency,
    /// Clients that gave up.
    pub failed_clients: u64,
    /// What the fault injector did.
    pub faults: FaultCounts,
    /// Where the protocol's report and the ground truth disagree.
    pub discrepancies: Vec<String>,
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
            submitted: 0,
            sent: 0,
            acknowledged: 0,
            delivered_unique: 0,
            deliveries: 0,
            replayed: 0,
            duplicates_after_restart: 0,
            duplicates_discarded: 0,
            stale_discarded: 0,
            possible_duplicates: 0,
            rejected: BTreeMap::new(),
            live_gap_sns: 0,
            recovered: 0,
            lost_in_flight: 0,
            lost_live: 0,
            unconfirmed_delivered: 0,
            truth_lost: 0,
            pending: 0,
            lost: Vec::new(),
            backlogged: 0,
            backpressure: 0,
            unacked_at_disconnects: 0,
            live_losses: Vec::new(),
            reconnects: 0,
            transport_rebuilds: 0,
            reconnect_latency: Latency::default(),
            failed_clients: 0,
            faults: FaultCounts::default(),
            discrepancies: Vec::new(),
        }
    }

    /// All lost sns, both classes.
    pub fn lost_total(&self) -> u64 {
        self.lost_in_flight + self.lost_live
    }

    /// Rejections for one reason.
    pub fn rejected(&self, reason: RejectReason) -> u64 {
        self.rejected.get(reason.name()).copied().unwrap_or(0)
    }

    pub(crate) fn client_event(&mut self, client: usize, e: &ClientEvent, truth: &mut Truth) {
        match e {
            ClientEvent::ServerRestarted { unconfirmed, .. } => {
                truth.flag(client, unconfirmed.clone(), truth::UNCONFIRMED);
            }
            ClientEvent::NotReplayed { range } => {
                truth.flag(client, range.clone(), truth::NOT_REPLAYED);
            }
            ClientEvent::Failed(_) => self.failed_clients += 1,
            _ => {}
        }
    }

    pub(crate) fn server_event(
        &mut self,
        e: &ServerEvent,
        truth: &mut Truth,
        generation: u32,
        now: Instant,
    ) {
        match e {
            ServerEvent::Delivered { session, sn, .. } => {
                truth.delivered(*session, *sn, generation)
            }
            ServerEvent::LiveLoss {
                session, missing, ..
            } => {
                if self.live_losses.len() < 1000 {
                    self.live_losses.push((now, *session, missing.clone()));
                }
                truth.flag_session(*session, missing.clone(), truth::LIVE_GAP);
            }
            ServerEvent::Recovered { session, sn } => {
                truth.flag_session(*session, *sn..*sn + 1, truth::RECOVERED);
            }
            ServerEvent::LostInFlight { session, range } => {
                truth.flag_session(*session, range.clone(), truth::LOST_IN_FLIGHT);
            }
            ServerEvent::LostLive { session, range } => {
                truth.flag_session(*session, range.clone(), truth::LOST_LIVE);
            }
            _ => {}
        }
    }

    pub(crate) fn absorb_server(&mut self, s: &ServerStats) {
        self.duplicates_discarded += s.duplicates;
        self.stale_discarded += s.stale;
        self.live_gap_sns += s.live_gap_sns;
        self.recovered += s.recovered;
        self.backlogged += s.backlogged;
        for reason in RejectReason::ALL {
            let n = s.rejects(reason);
            if n > 0 {
                *self.rejected.entry(reason.name().to_string()).or_default() += n;
            }
        }
    }

    pub(crate) fn absorb_client<const N: usize>(&mut self, c: &ClientSession<N>) {
        let s = c.stats();
        self.submitted += s.submitted;
        self.sent += s.sent;
        self.acknowledged += s.acked;
        self.replayed += s.replayed;
        self.possible_duplicates += s.possible_duplicates;
        self.reconnects += s.established.saturating_sub(1);
    }

    /// Classifies every sn from the protocol's claims, compares with the
    /// ground truth and records every disagreement.
    pub(crate) fn finish(&mut self, truth: &Truth) {
        for c in &truth.clients {
            let sent = usize::try_from(c.sent)
                .unwrap_or(usize::MAX)
                .min(c.delivered.len());
            let mut run: Option<LostRange> = None;
            for i in 0..sent {
                let (n, flags) = (c.delivered[i], c.flags[i]);
                let sn = i as u64;
                if n > 0 {
                    self.delivered_unique += 1;
                    self.deliveries += u64::from(n);
                }
                // A hole a server gave up, or one still open at the end. A
                // hole in a server that was killed is not a claim: the
                // client replays it to the next instance.
                let live = flags & (truth::LOST_LIVE | truth::OPEN_HOLE) != 0;
                let given_up = flags & (truth::NOT_REPLAYED | truth::LOST_IN_FLIGHT) != 0;
                let class = if live {
                    Some(LossClass::LiveConnection)
                } else if given_up {
                    Some(LossClass::InFlightAtDisconnect)
                } else {
                    None
                };
                if n == 0 && class.is_none() && sn >= c.final_base {
                    // Still in the client's window: not lost, not finished.
                    self.pending += 1;
                } else if n == 0 {
                    self.truth_lost += 1;
                    if class.is_none() {
                        self.discrepancy(format!(
                            "session {:#x} sn {sn}: never delivered, never reported lost",
                            c.session
                        ));
                    }
                }
                let server_says_lost =
                    flags & (truth::LOST_IN_FLIGHT | truth::LOST_LIVE) != 0 || live;
                if n > 0 && server_says_lost {
                    self.discrepancy(format!(
                        "session {:#x} sn {sn}: a server reported it lost, yet it was delivered",
                        c.session
                    ));
                }
                match class {
                    Some(_) if n > 0 => self.unconfirmed_delivered += 1,
                    Some(LossClass::LiveConnection) => self.lost_live += 1,
                    Some(LossClass::InFlightAtDisconnect) => self.lost_in_flight += 1,
                    None => {}
                }
                // Name the lost sns (delivered ones given up are not lost).
                let class = class.filter(|_| n == 0);
                match (&mut run, class) {
                    (Some(r), Some(k)) if r.class == k && r.range.end == sn => r.range.end += 1,
                    (_, k) => {
                        if let Some(r) = run.take() {
                            self.push_lost(r);
                        }
                        run = k.map(|class| LostRange {
                            session: c.session,
                            range: sn..sn + 1,
                            class,
                        });
                    }
                }
            }
            if let Some(r) = run.take() {
                self.push_lost(r);
            }
            self.duplicates_after_restart += c.dup_after_restart;
            for sn in c.dup_same_instance.iter().take(20) {
                self.discrepancy(format!(
                    "session {:#x} sn {sn}: delivered twice by one server instance",
                    c.session
                ));
            }
            for sn in c.dup_unexplained.iter().take(20) {
                self.discrepancy(format!(
                    "session {:#x} sn {sn}: duplicate after restart that the client never announced",
                    c.session
                ));
            }
        }
        if self.acknowledged > self.delivered_unique {
            self.discrepancy(format!(
                "{} sns acknowledged but only {} delivered",
                self.acknowledged, self.delivered_unique
            ));
        }
    }

    fn push_lost(&mut self, r: LostRange) {
        if self.lost.len() < 10_000 {
            self.lost.push(r);
        }
    }

    fn discrepancy(&mut self, s: String) {
        if self.discrepancies.len() < 100 {
            self.discrepancies.push(s);
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |f: &mut fmt::Formatter<'_>, k: &str, v: &dyn fmt::Display| {
            writeln!(f, "  {k:<34} {v:>14}")
        };
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
        row(f, "server kills", &self.kills)?;
        row(f, "reconnects", &self.reconnects)?;
        row(f, "transport rebuilds", &self.transport_rebuilds)?;
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
        row(f, "submitted", &self.submitted)?;
        row(f, "sent", &self.sent)?;
        row(f, "acknowledged", &self.acknowledged)?;
        row(f, "delivered (distinct sns)", &self.delivered_unique)?;
        row(f, "deliveries (with duplicates)", &self.deliveries)?;
        row(f, "replayed", &self.replayed)?;
        row(
            f,
            "possible duplicates announced",
            &self.possible_duplicates,
        )?;
        row(
            f,
            "duplicates after restart",
            &self.duplicates_after_restart,
        )?;
        row(f, "duplicates discarded", &self.duplicates_discarded)?;
        row(f, "stale frames discarded", &self.stale_discarded)?;
        row(f, "frames held before handshake", &self.backlogged)?;
        row(f, "window full (backpressure)", &self.backpressure)?;
        row(
            f,
            "unacknowledged at disconnects",
            &self.unacked_at_disconnects,
        )?;
        for (reason, n) in &self.rejected {
            row(f, &format!("rejected: {reason}"), n)?;
        }
        row(f, "live gaps (sns, reported at once)", &self.live_gap_sns)?;
        row(f, "  of which recovered", &self.recovered)?;
        row(f, "lost: in flight at disconnect", &self.lost_in_flight)?;
        row(f, "lost: on a live connection", &self.lost_live)?;
        row(f, "given up, yet delivered", &self.unconfirmed_delivered)?;
        row(f, "lost according to ground truth", &self.truth_lost)?;
        row(f, "still pending at the end", &self.pending)?;
        row(f, "clients failed", &self.failed_clients)?;
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
        for r in self.lost.iter().take(20) {
            writeln!(
                f,
                "  lost: session {:#018x} sns {}..{} ({})",
                r.session, r.range.start, r.range.end, r.class
            )?;
        }
        if self.lost.len() > 20 {
            writeln!(f, "  ... {} more lost ranges", self.lost.len() - 20)?;
        }
        if self.discrepancies.is_empty() {
            writeln!(f, "  verdict: the report matches the ground truth")
        } else {
            writeln!(f, "  verdict: {} DISCREPANCIES", self.discrepancies.len())?;
            for d in &self.discrepancies {
                writeln!(f, "    {d}")?;
            }
            Ok(())
        }
    }
}
