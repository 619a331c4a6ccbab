//! The fault soak's faults, and when they happen: a plan drawn from the
//! seed before the run starts, so that one seed gives one schedule.

use std::time::Duration;

use iomsg_core::rng::SplitMix64;

/// A fault the soak does to its processes, besides the server kills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// SIGKILL a client; a new client (new audit files; a new session,
    /// or with `--exactly-once` the same one resumed from the slot's
    /// outbox) takes its place at once.
    ClientKill,
    /// SIGSTOP a client, SIGCONT it later.
    ClientPause,
    /// SIGSTOP the server, SIGCONT it later.
    ServerPause,
    /// Take a client's link down for a while (network namespaces).
    LinkCut,
    /// Run the project's raw UCX attacker (`iomsg hostile`) against the
    /// server for a while.
    Hostile,
}

impl Fault {
    /// Every fault, in the order `--faults all` lists them.
    pub const ALL: [Fault; 5] = [
        Fault::ClientKill,
        Fault::ClientPause,
        Fault::ServerPause,
        Fault::LinkCut,
        Fault::Hostile,
    ];

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Fault::ClientKill => "client-kill",
            Fault::ClientPause => "client-pause",
            Fault::ServerPause => "server-pause",
            Fault::LinkCut => "link-cut",
            Fault::Hostile => "hostile",
        }
    }

    /// Whether it is done to one client.
    pub fn on_client(self) -> bool {
        matches!(
            self,
            Fault::ClientKill | Fault::ClientPause | Fault::LinkCut
        )
    }

    fn index(self) -> usize {
        match self {
            Fault::ClientKill => 0,
            Fault::ClientPause => 1,
            Fault::ServerPause => 2,
            Fault::LinkCut => 3,
            Fault::Hostile => 4,
        }
    }
}

/// `--faults`: `all`, `none`, or names separated by commas.
///
/// # Errors
///
/// A name that is no fault.
pub fn parse_list(s: &str) -> Result<Vec<Fault>, String> {
    let s = s.trim();
    if s == "all" {
        return Ok(Fault::ALL.to_vec());
    }
    if s == "none" || s.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let f = Fault::ALL
            .into_iter()
            .find(|f| f.name() == part)
            .ok_or_else(|| {
                format!(
                    "{part:?} is not a fault (client-kill, client-pause, server-pause, link-cut, hostile, or all)"
                )
            })?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

/// What the plan is drawn for.
#[derive(Clone, Copy, Debug)]
pub struct PlanParams {
    /// Every fault starts and ends within this time from the start.
    pub span: Duration,
    /// Mean time between two faults (each gap jittered ±30 %).
    pub every: Duration,
    /// Clients.
    pub clients: usize,
    /// The silence timeout: pauses alternate between shorter (0.3–0.6 of
    /// it) and longer (1.3–2 times it).
    pub silence: Duration,
    /// How long a link stays cut.
    pub cut_for: Duration,
    /// How long the hostile peer runs.
    pub hostile_for: Duration,
}

/// One fault of the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    /// When, from the start of the run.
    pub at: Duration,
    /// What.
    pub fault: Fault,
    /// To which client (0 for the server's faults and the hostile peer).
    pub client: usize,
    /// How long it lasts (zero for a kill).
    pub hold: Duration,
}

/// At most this many faults in a plan, whatever its span.
pub const MAX_FAULTS: usize = 100_000;

/// A target is left alone this long after its fault ends.
const SETTLE: Duration = Duration::from_secs(1);

/// Draws the plan: faults of the kinds asked, taken in a shuffled cycle
/// (each kind once per cycle), about every `every`; each client fault on
/// a client drawn at random; two faults on one target (a client, or the
/// server: its pauses and the hostile peer) never overlap, and every fault ends within
/// the span. Sorted by time; the same seed gives the same plan.
pub fn plan(seed: u64, faults: &[Fault], p: &PlanParams) -> Vec<Planned> {
    let mut out = Vec::new();
    if faults.is_empty() || p.clients == 0 || p.every.is_zero() {
        return out;
    }
    // A stream apart from the kill times', so that asking for faults does
    // not move the kills.
    let mut rng = SplitMix64::new(seed ^ 0x6661_756c_7473_2131);
    let mut unit = move || rng.below(1_000_000) as f64 / 1_000_000.0;
    let mut busy = vec![Duration::ZERO; p.clients + 1];
    let mut count = [0u32; 5];
    let mut cycle: Vec<Fault> = Vec::new();
    let mut t = p.every.mul_f64(0.5 * (0.7 + 0.6 * unit()));
    // Each round either places a fault or moves time on, so the loop ends
    // by the span or the count.
    for _ in 0..MAX_FAULTS.saturating_mul(4) {
        if t >= p.span || out.len() >= MAX_FAULTS {
            break;
        }
        if cycle.is_empty() {
            cycle = faults.to_vec();
            for i in (1..cycle.len()).rev() {
                let j = (unit() * (i + 1) as f64) as usize;
                cycle.swap(i, j.min(i));
            }
        }
        let Some(fault) = cycle.pop() else { break };
        let client = if fault.on_client() {
            ((unit() * p.clients as f64) as usize).min(p.clients - 1)
        } else {
            0
        };
        let n = count[fault.index()];
        let hold = match fault {
            Fault::ClientKill => Duration::ZERO,
            Fault::ClientPause | Fault::ServerPause => {
                if n % 2 == 0 {
                    p.silence.mul_f64(0.3 + 0.3 * unit())
                } else {
                    p.silence.mul_f64(1.3 + 0.7 * unit())
                }
            }
            Fault::LinkCut => p.cut_for,
            Fault::Hostile => p.hostile_for,
        };
        // The hostile peer is never started against a paused server (it
        // needs one key exchange to begin), so the two share a target.
        let target = match fault {
            Fault::ServerPause | Fault::Hostile => p.clients,
            _ => client,
        };
        let at = t.max(busy[target]);
        if at + hold <= p.span {
            busy[target] = at + hold + SETTLE;
            count[fault.index()] += 1;
            out.push(Planned {
                at,
                fault,
                client,
                hold,
            });
        }
        t += p.every.mul_f64(0.7 + 0.6 * unit());
    }
    out.sort_by_key(|f| f.at);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(span_s: u64) -> PlanParams {
        PlanParams {
            span: Duration::from_secs(span_s),
            every: Duration::from_secs(5),
            clients: 2,
            silence: Duration::from_secs(3),
            cut_for: Duration::from_secs(4),
            hostile_for: Duration::from_secs(8),
        }
    }

    #[test]
    fn lists_parse_and_refuse_unknown_faults() {
        assert_eq!(parse_list("all"), Ok(Fault::ALL.to_vec()));
        assert_eq!(parse_list("none"), Ok(vec![]));
        assert_eq!(
            parse_list("client-kill,server-pause,client-kill"),
            Ok(vec![Fault::ClientKill, Fault::ServerPause])
        );
        assert!(parse_list("client-kill,meteor").is_err());
    }

    #[test]
    fn a_seed_gives_one_plan_and_another_seed_another() {
        let all = Fault::ALL;
        let a = plan(7, &all, &params(60));
        assert_eq!(a, plan(7, &all, &params(60)));
        assert_ne!(a, plan(8, &all, &params(60)));
        assert!(plan(7, &[], &params(60)).is_empty());
    }

    #[test]
    fn plans_are_bounded_sorted_and_never_overlap_on_one_target() {
        for seed in 0..200 {
            let p = params(70);
            let plan = plan(seed, &Fault::ALL, &p);
            assert!(
                !plan.is_empty() && plan.len() <= 30,
                "seed {seed}: {plan:?}"
            );
            assert!(plan.windows(2).all(|w| w[0].at <= w[1].at));
            for f in &plan {
                assert!(f.at + f.hold <= p.span, "seed {seed}: {f:?} past the span");
                assert!(f.client < p.clients);
            }
            for (i, a) in plan.iter().enumerate() {
                for b in &plan[i + 1..] {
                    let target = |f: &Planned| match f.fault {
                        Fault::ServerPause | Fault::Hostile => 100,
                        _ => f.client,
                    };
                    if target(a) == target(b) {
                        assert!(a.at + a.hold < b.at, "seed {seed}: {a:?} overlaps {b:?}");
                    }
                }
            }
        }
        // A long span stops at the cap.
        let mut p = params(1);
        p.span = Duration::from_secs(100_000_000);
        p.every = Duration::from_millis(1);
        p.hostile_for = Duration::ZERO;
        assert!(plan(1, &[Fault::ClientKill], &p).len() <= MAX_FAULTS);
    }

    #[test]
    fn pauses_are_both_shorter_and_longer_than_the_silence_timeout() {
        let p = params(70);
        for seed in 0..50 {
            let plan = plan(seed, &[Fault::ServerPause, Fault::ClientPause], &p);
            for kind in [Fault::ServerPause, Fault::ClientPause] {
                let holds: Vec<_> = plan
                    .iter()
                    .filter(|f| f.fault == kind)
                    .map(|f| f.hold)
                    .collect();
                assert!(holds.len() >= 2, "seed {seed}: {plan:?}");
                assert!(holds.iter().any(|&h| h < p.silence.mul_f64(0.61)));
                assert!(holds.iter().any(|&h| h > p.silence.mul_f64(1.29)));
                assert!(holds.iter().all(|&h| h <= p.silence * 2));
            }
        }
    }

    #[test]
    fn every_kind_asked_shows_up_in_a_soak_length_plan() {
        for seed in 0..100 {
            let plan = plan(seed, &Fault::ALL, &params(70));
            for kind in Fault::ALL {
                assert!(
                    plan.iter().any(|f| f.fault == kind),
                    "seed {seed}: no {kind:?} in {plan:?}"
                );
            }
        }
    }
}
