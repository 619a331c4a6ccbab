//! The field reproduction in simulation: one server killed and restarted
//! again and again while clients reconnect; prints the report as a table.
//!
//! ```text
//! cargo run --release -p iomsg-loopback --example field_repro -- \
//!     [--seed N] [--kills N] [--clients N] [--replay on|off] [--rebuild] [--storm]
//! ```
//! Exits 0 when every kill happened, the verdict passes (every invariant
//! holds against the ground truth, nothing pending) and (with replay on)
//! nothing was lost; 1 otherwise (also when `--list-lost` cannot name every
//! lost range); 2 on bad arguments.

use std::process::ExitCode;
use std::time::Duration;
use std::time::Instant as WallClock;

use iomsg_loopback::sim::{self, lost_line, Scenario};

const USAGE: &str =
    "usage: field_repro [--seed N] [--kills N] [--clients N] [--replay on|off] [--rebuild]
                   [--storm] [--uptime-us N] [--down-us N] [--interval-us N] [--list-lost]

  --seed N        seed of the whole run (default 1)
  --kills N       server crash-restarts to simulate (default 1000)
  --clients N     clients reconnecting (default 2)
  --replay on|off replay unacknowledged io_msgs after reconnect (default on)
  --rebuild       clients rebuild their whole transport after each disconnect
  --uptime-us N   server uptime between crashes, µs of virtual time (default 2000)
  --down-us N     downtime before the new instance listens, µs (default 500)
  --interval-us N least time between two io_msgs of one client, µs (default 0: window-bound)
  --storm         many short kill cycles: --uptime-us 100 --down-us 20 --interval-us 10
  --list-lost     name every lost sn range (the table shows the first 20); exits 1
                  if the report had to cut the list";

fn parse() -> Result<(Scenario, bool), String> {
    let mut seed = 1u64;
    let mut kills = 1000u64;
    let mut clients = 2usize;
    let mut replay = true;
    let mut rebuild = false;
    let mut list_lost = false;
    let mut uptime_us: Option<u64> = None;
    let mut down_us: Option<u64> = None;
    let mut interval_us: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--seed" => {
                seed = value("--seed")?
                    .parse()
                    .map_err(|e| format!("--seed: {e}"))?
            }
            "--kills" => {
                kills = value("--kills")?
                    .parse()
                    .map_err(|e| format!("--kills: {e}"))?
            }
            "--clients" => {
                clients = value("--clients")?
                    .parse()
                    .map_err(|e| format!("--clients: {e}"))?;
                if clients == 0 {
                    return Err("--clients must be at least 1".into());
                }
            }
            "--replay" => {
                replay = match value("--replay")?.as_str() {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("--replay takes on or off, not {other:?}")),
                }
            }
            "--rebuild" => rebuild = true,
            "--list-lost" => list_lost = true,
            "--storm" => {
                uptime_us = Some(100);
                down_us = Some(20);
                interval_us = Some(10);
            }
            "--uptime-us" => {
                uptime_us = Some(
                    value("--uptime-us")?
                        .parse()
                        .map_err(|e| format!("--uptime-us: {e}"))?,
                )
            }
            "--down-us" => {
                down_us = Some(
                    value("--down-us")?
                        .parse()
                        .map_err(|e| format!("--down-us: {e}"))?,
                )
            }
            "--interval-us" => {
                interval_us = Some(
                    value("--interval-us")?
                        .parse()
                        .map_err(|e| format!("--interval-us: {e}"))?,
                )
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let mut s = Scenario::field_repro(seed, kills);
    if let Some(plan) = s.crash.as_mut() {
        if let Some(u) = uptime_us {
            plan.every = Duration::from_micros(u.max(1));
        }
        if let Some(d) = down_us {
            plan.down_for = Duration::from_micros(d);
        }
        let cycle = plan.every + plan.down_for;
        s.duration = cycle * u32::try_from(kills).unwrap_or(u32::MAX) + plan.every;
    }
    if let Some(i) = interval_us {
        s.workload.interval = Duration::from_micros(i);
    }
    s.clients = clients;
    s.replay = replay;
    s.rebuild_transport = rebuild;
    Ok((s, list_lost))
}

fn main() -> ExitCode {
    let (scenario, list_lost) = match parse() {
        Ok(parsed) => parsed,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("field_repro: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let started = WallClock::now();
    let report = match sim::run(&scenario) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("field_repro: {e}");
            return ExitCode::from(2);
        }
    };
    let wall = started.elapsed().as_secs_f64();
    print!("{report}");
    let mut list_cut = false;
    if list_lost {
        for l in &report.lost {
            println!("  {}", lost_line(l));
        }
        if report.lost_list_cut() {
            list_cut = true;
            eprintln!(
                "field_repro: --list-lost: the report kept only the first {} of {} lost ranges; \
                 the list above is cut (use fewer --kills, or replay on)",
                report.lost.len(),
                report.lost_ranges
            );
        }
    }
    println!(
        "  wall time {:.2} s: {:.0} kill cycles/s, {:.0} io_msgs/s simulated",
        wall,
        report.kills as f64 / wall,
        report.sent as f64 / wall
    );
    let kills = scenario.crash.map_or(0, |c| c.max_kills);
    if report.kills != kills {
        eprintln!(
            "field_repro: only {} of {kills} kills happened before the run ended",
            report.kills
        );
    }
    let ok = report.kills == kills
        && report.passed()
        && !list_cut
        && (!scenario.replay || report.lost_total() == 0);
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
