//! The adversarial sweep: random scenarios, each checked against the
//! simulation's ground truth; failing runs print a one-line reproduction,
//! and `--shrink` reduces each violated invariant's first failing scenario.
//!
//! ```text
//! cargo run --release -p iomsg-loopback --example sweep -- \
//!     [--runs N] [--seed S] [--seconds T] [--clean | --durable] [--plant D]
//!     [--shrink] [--repro "<line>"]
//! ```
//! Exits 0 when every run passed, 1 on any violation, 2 on bad arguments.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant as WallClock};

use iomsg_core::rng::mix64;
use iomsg_loopback::sim::{DurableCounts, Invariant, Report, RestoreDefect, Scenario};
use iomsg_loopback::sweep::{self, repro, Profile, ShrinkBudget};

const USAGE: &str = "usage: sweep [--runs N] [--seed S] [--seconds T] [--clean | --durable]
             [--plant D] [--shrink]
             [--shrink-seconds T] [--repro \"<line>\"] [--verbose]

  --runs N          scenarios to run (default 200; with only --seconds, no limit)
  --seed S          seed of the sweep (default 1); run i uses scenario seed mix(S, i)
  --seconds T       stop starting new runs after T seconds of wall time
  --clean           only knobs today's core handles (see sweep::Profile::Clean)
  --durable         servers with a journal, clients with an outbox, both crashed
                    (see sweep::Profile::Durable)
  --plant D         with --durable: plant defect D in what the journal gives back
                    (restore and recall): dropholes (every hole of a record reads
                    as received), torn (a record loses its last byte), keepoldest
                    (each session's first committed record instead of its last)
                    or hidestateloss (after a tail loss, records claim the sns the
                    lost commits had); the sweep must fail
  --shrink          reduce the first failing scenario of each violated invariant
                    and print its shrunk repro line
  --shrink-seconds T  wall-time budget of each shrink (default 60)
  --repro \"<line>\"  run the one scenario a repro line describes, print its report
  --verbose         print every run, not only failing ones

Exit status: 0 every run passed, 1 some invariant was violated, 2 bad arguments.";

struct Args {
    runs: Option<u64>,
    seed: u64,
    seconds: Option<f64>,
    profile: Profile,
    shrink: bool,
    shrink_seconds: u64,
    repro: Option<String>,
    verbose: bool,
    plant: Option<RestoreDefect>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        runs: None,
        seed: 1,
        seconds: None,
        profile: Profile::Full,
        shrink: false,
        shrink_seconds: 60,
        repro: None,
        verbose: false,
        plant: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--runs" => {
                a.runs = Some(
                    value("--runs")?
                        .parse()
                        .map_err(|e| format!("--runs: {e}"))?,
                )
            }
            "--seed" => {
                a.seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--seconds" => {
                let t: f64 = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?;
                if !(t > 0.0 && t.is_finite()) {
                    return Err(format!("--seconds must be positive, not {t}"));
                }
                a.seconds = Some(t);
            }
            "--shrink-seconds" => {
                a.shrink_seconds = value("--shrink-seconds")?
                    .parse()
                    .map_err(|e| format!("--shrink-seconds: {e}"))?
            }
            "--clean" => a.profile = Profile::Clean,
            "--durable" => a.profile = Profile::Durable,
            "--plant" => {
                let v = value("--plant")?;
                a.plant = Some(RestoreDefect::from_name(&v).ok_or(format!(
                    "--plant: {v:?} is not a planted defect: {}",
                    RestoreDefect::names()
                ))?);
            }
            "--shrink" => a.shrink = true,
            "--repro" => a.repro = Some(value("--repro")?),
            "--verbose" | "-v" => a.verbose = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

/// What the servers' tables did across a sweep.
#[derive(Default)]
struct Tables {
    evicted: u64,
    forgotten: u64,
    recalled: u64,
    state_lost: u64,
    unreachable: u64,
    /// Runs with evictions, forgotten tombstones, recalls, restores that
    /// forgot tombstones, tail losses.
    runs: [u64; 5],
}

impl Tables {
    fn add(&mut self, r: &Report) {
        self.evicted += r.evicted;
        self.forgotten += r.tombs_forgotten;
        self.recalled += r.recalled;
        self.state_lost += r.state_lost;
        self.unreachable += r.state_lost_unreachable;
        let d = &r.durable;
        let seen = [
            r.evicted,
            r.tombs_forgotten,
            r.recalled,
            d.forgotten_at_restore,
            d.tail_cuts,
        ];
        for (n, s) in self.runs.iter_mut().zip(seen) {
            *n += u64::from(s > 0);
        }
    }
}

fn names(v: &[Invariant]) -> String {
    v.iter().map(|i| i.name()).collect::<Vec<_>>().join(",")
}

/// Shrinks `failing` for each invariant in `invariants` and prints the
/// shrunk repro lines.
fn shrink_and_print(failing: &[(Invariant, Scenario)], seconds: u64) {
    for (inv, s) in failing {
        let started = WallClock::now();
        let budget = ShrinkBudget {
            attempts: 2000,
            time: Duration::from_secs(seconds),
        };
        let small = sweep::shrink(s, |c| sweep::violates(c, *inv), budget);
        let out = sweep::check(&small);
        println!(
            "shrunk {inv} ({:.1} s): {}",
            started.elapsed().as_secs_f64(),
            repro::encode(&small)
        );
        if let Some(r) = &out.report {
            match r.discrepancies.iter().find(|v| v.invariant == *inv) {
                Some(v) => println!("  e.g. {v}"),
                None => println!(
                    "  ({} {inv} violations, none among the {} listed first; rerun with --repro)",
                    r.violations_of(*inv),
                    r.discrepancies.len()
                ),
            }
        }
    }
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("sweep: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(line) = &args.repro {
        let scenario = match repro::decode(line) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sweep: {e}");
                return ExitCode::from(2);
            }
        };
        if let Err(e) = scenario.validate() {
            eprintln!("sweep: --repro: {e}");
            return ExitCode::from(2);
        }
        let out = sweep::check(&scenario);
        if let Some(r) = &out.report {
            print!("{r}");
        }
        println!("repro: {}", repro::encode(&scenario));
        if out.passed() {
            println!("sweep: the scenario passed");
            return ExitCode::SUCCESS;
        }
        println!("violated: {}", names(&out.violated));
        if args.shrink {
            let failing: Vec<(Invariant, Scenario)> = out
                .violated
                .iter()
                .map(|&i| (i, scenario.clone()))
                .collect();
            shrink_and_print(&failing, args.shrink_seconds);
        }
        return ExitCode::from(1);
    }

    let runs = args.runs.unwrap_or(if args.seconds.is_some() {
        u64::MAX
    } else {
        200
    });
    let started = WallClock::now();
    // The first failing run per invariant, and the first without a stray
    // peer or shared session ids (whose failures can hide other causes).
    let mut first: BTreeMap<Invariant, (u64, Scenario)> = BTreeMap::new();
    let mut first_own: BTreeMap<Invariant, (u64, Scenario)> = BTreeMap::new();
    let mut runs_per_invariant: BTreeMap<Invariant, u64> = BTreeMap::new();
    let (mut done, mut failed) = (0u64, 0u64);
    let mut slowest = Duration::ZERO;
    // Server and client crashes, and what crash-proof state did.
    let (mut server_kills, mut durable) = (0u64, DurableCounts::default());
    let mut tables = Tables::default();
    for i in 0..runs {
        if args
            .seconds
            .is_some_and(|t| started.elapsed().as_secs_f64() >= t)
        {
            break;
        }
        let mut scenario = sweep::generate(mix64(args.seed ^ mix64(i)), args.profile);
        if let (Some(defect), Some(x)) = (args.plant, scenario.durable.as_mut()) {
            x.restore_defect = Some(defect);
        }
        let out = sweep::check(&scenario);
        done += 1;
        slowest = slowest.max(out.wall);
        if let Some(r) = &out.report {
            server_kills += r.kills;
            let d = &r.durable;
            durable.client_kills += d.client_kills;
            durable.resubmitted += d.resubmitted;
            durable.restored += d.restored;
            durable.committed += d.committed;
            durable.rolled_back += d.rolled_back;
            durable.restores += d.restores;
            durable.refused_for_room += d.refused_for_room;
            durable.forgotten_at_restore += d.forgotten_at_restore;
            durable.restore_compared += d.restore_compared;
            durable.tail_cuts += d.tail_cuts;
            durable.commits_lost += d.commits_lost;
            durable.deliveries_lost += d.deliveries_lost;
            tables.add(r);
        }
        if out.passed() {
            if args.verbose {
                println!("pass run {i} ({} ms)", out.wall.as_millis());
            }
            continue;
        }
        failed += 1;
        println!(
            "FAIL run {i} ({} ms): {}",
            out.wall.as_millis(),
            if out.report.is_none() {
                "the generated scenario did not validate".to_string()
            } else {
                names(&out.violated)
            }
        );
        println!("  repro: {}", repro::encode(&scenario));
        for inv in &out.violated {
            *runs_per_invariant.entry(*inv).or_default() += 1;
            first.entry(*inv).or_insert((i, scenario.clone()));
            if !sweep::has_foreign_peers(&scenario) {
                first_own.entry(*inv).or_insert((i, scenario.clone()));
            }
        }
    }
    println!(
        "sweep: {done} runs in {:.1} s (slowest {} ms), {} passed, {failed} failed",
        started.elapsed().as_secs_f64(),
        slowest.as_millis(),
        done - failed
    );
    if durable == DurableCounts::default() {
        println!("  crashes: {server_kills} of servers");
    } else {
        println!(
            "  crashes: {server_kills} of servers, {} of clients; {} journal records restored, \
             {} messages submitted again from outboxes, {} deliveries committed, {} lost uncommitted",
            durable.client_kills,
            durable.restored,
            durable.resubmitted,
            durable.committed,
            durable.rolled_back
        );
        println!(
            "  tables: {} sessions evicted, {} tombstones forgotten ({} at restores), {} recalled \
             from journals; {} restores, {} records without room, {} sessions compared with the \
             dead instance",
            tables.evicted,
            tables.forgotten,
            durable.forgotten_at_restore,
            tables.recalled,
            durable.restores,
            durable.refused_for_room,
            durable.restore_compared
        );
        println!(
            "  tail losses: {} ({} commits, {} committed deliveries lost); {} acknowledged sns \
             named lost (StateLost), {} lost after their client left; runs with \
             evictions/forgotten/recalled/restores that forgot/tail losses: {}/{}/{}/{}/{} \
             of {done}",
            durable.tail_cuts,
            durable.commits_lost,
            durable.deliveries_lost,
            tables.state_lost,
            tables.unreachable,
            tables.runs[0],
            tables.runs[1],
            tables.runs[2],
            tables.runs[3],
            tables.runs[4]
        );
    }
    for (inv, n) in &runs_per_invariant {
        let (run, s) = &first[inv];
        println!("  {inv}: {n} runs; first run {run}: {}", repro::encode(s));
        if let Some((run, s)) = first_own.get(inv).filter(|(r, _)| r != run) {
            println!(
                "  {inv}: first run without a stray peer or shared sessions {run}: {}",
                repro::encode(s)
            );
        }
    }
    if args.shrink && !first.is_empty() {
        let mut failing: Vec<(Invariant, Scenario)> = Vec::new();
        for (inv, (run, s)) in &first {
            failing.push((*inv, s.clone()));
            if let Some((own_run, own)) = first_own.get(inv).filter(|(r, _)| r != run) {
                let _ = own_run;
                failing.push((*inv, own.clone()));
            }
        }
        shrink_and_print(&failing, args.shrink_seconds);
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
