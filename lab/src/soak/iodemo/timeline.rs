//! The io_demo soak's timeline picture, the same kind as the regular
//! soak's: each client's completed operations per second (from io_demo's
//! own status reports), the server's kills and restarts, the clients'
//! reconnects, and at each disconnect the operations io_demo forgot.

use std::path::Path;

use crate::audit::iodemo::IoDemoJudged;
use crate::plot::{write_svg, ClientSeries, Timeline};

/// What the picture needs of the run: when it started, when each kill
/// and each restart happened (µs since the epoch), and each client's
/// name and log.
pub struct Run<'a> {
    /// The first instance's start.
    pub start_us: u64,
    /// The kills.
    pub kills_us: &'a [u64],
    /// Each instance's start.
    pub restarts_us: &'a [u64],
    /// (name, log file) per client.
    pub clients: Vec<(String, std::path::PathBuf)>,
}

/// Writes the picture to `path`.
///
/// # Errors
///
/// A client log could not be read, or the picture not written.
pub fn write(
    run: &Run<'_>,
    judged: &IoDemoJudged,
    title: String,
    path: &Path,
) -> Result<(), String> {
    let secs = |us: u64| us.saturating_sub(run.start_us) as f64 / 1e6;
    let mut t = Timeline {
        title,
        kills: run.kills_us.iter().map(|&u| secs(u)).collect(),
        restarts: run.restarts_us.iter().skip(1).map(|&u| secs(u)).collect(),
        ..Timeline::default()
    };
    for (name, log) in &run.clients {
        let text =
            String::from_utf8_lossy(&std::fs::read(log).map_err(|e| e.to_string())?).into_owned();
        let mut s = ClientSeries {
            name: name.clone(),
            ..ClientSeries::default()
        };
        let mut prev: Option<u64> = None;
        for line in text.lines() {
            let Some(us) = stamp_us(line) else { continue };
            if line.contains("[DEMO] total min:") {
                if let (Some(p), Some(total)) = (prev, report_total(line)) {
                    let dt = us.saturating_sub(p) as f64 / 1e6;
                    if dt > 0.0 {
                        s.rate.push((secs(us), total as f64 / dt));
                    }
                }
                prev = Some(us);
            } else if line.contains("[DEMO] Connected to server") {
                s.reconnects.push(secs(us));
                prev = Some(us);
            }
        }
        s.losses = judged
            .disconnects
            .iter()
            .filter(|d| &d.client == name && d.forgotten > 0)
            .map(|d| (secs(d.at_us), d.forgotten))
            .collect();
        t.seconds = t.seconds.max(s.rate.last().map_or(0.0, |r| r.0));
        t.clients.push(s);
    }
    t.seconds = t.seconds.max(t.kills.last().copied().unwrap_or(0.0)) + 1.0;
    write_svg(&t, path)
}

/// The time an io_demo log line starts with, `[SECONDS.MICROS]`.
fn stamp_us(line: &str) -> Option<u64> {
    let t = line.strip_prefix('[')?.split(']').next()?;
    let (s, us) = t.split_once('.')?;
    let us = format!("{us:0<6}");
    Some(s.parse::<u64>().ok()? * 1_000_000 + us.get(..6)?.parse::<u64>().ok()?)
}

/// `T` of a status report's `total min:… max:… total:T |`.
fn report_total(line: &str) -> Option<u64> {
    let first = line.split('|').next()?;
    first
        .split("total:")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_demos_status_lines_give_a_time_and_a_total() {
        let l = "[1796312683.561627] [DEMO] total min:4 max:4 total:4000 | read 14.7 MBs \
                 min:2(127.0.0.1:24570) max:2 total:2 | write 1 MBs total:2 | active:1/1";
        assert_eq!(stamp_us(l), Some(1_796_312_683_561_627));
        assert_eq!(report_total(l), Some(4000));
        assert_eq!(stamp_us("no stamp"), None);
    }
}
