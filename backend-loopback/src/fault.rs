//! Seeded fault injection on the network's send path.

use core::time::Duration;

use iomsg_core::rng::SplitMix64;

/// Which frames a scheduled fault may hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    ToServer,
    /// Server to client.
    ToClient,
    /// Either.
    Any,
}

/// What can happen to one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFault {
    /// Lost, and the connection resets (what a real transport does when it
    /// cannot deliver).
    Drop,
    /// Lost while the connection stays up: a transport bug.
    SilentDrop,
    /// Delivered twice.
    Duplicate,
    /// Delivered after up to `reorder_depth` later frames of its connection.
    Reorder,
    /// One bit flipped.
    Corrupt,
    /// Delivered `delay` late (its connection keeps its order).
    Delay,
    /// The connection breaks right after this frame was sent.
    Disconnect,
}

impl FrameFault {
    /// Every fault kind.
    pub const ALL: [FrameFault; 7] = [
        FrameFault::Drop,
        FrameFault::SilentDrop,
        FrameFault::Duplicate,
        FrameFault::Reorder,
        FrameFault::Corrupt,
        FrameFault::Delay,
        FrameFault::Disconnect,
    ];
}

/// A fault bound to the `nth` frame (counted from 0, per direction filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledFault {
    /// Index of the frame among those matching `direction`.
    pub nth: u64,
    /// Which frames count.
    pub direction: Direction,
    /// Only data frames (`Write`/`Read`) count.
    pub data_only: bool,
    /// What happens to it.
    pub fault: FrameFault,
}

/// Fault rates (per million frames) and a schedule. The default injects
/// nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Frame lost, connection reset.
    pub drop_ppm: u32,
    /// Frame lost, connection stays up.
    pub silent_drop_ppm: u32,
    /// Frame delivered twice.
    pub duplicate_ppm: u32,
    /// Frame held back behind later ones.
    pub reorder_ppm: u32,
    /// Bit flip.
    pub corrupt_ppm: u32,
    /// Extra latency.
    pub delay_ppm: u32,
    /// Connection breaks.
    pub disconnect_ppm: u32,
    /// How many later frames a reordered frame waits for (at least 1).
    pub reorder_depth: u8,
    /// Extra latency of a delayed frame.
    pub delay: Duration,
    /// Faults on chosen frames, in addition to the rates.
    pub schedule: Vec<ScheduledFault>,
}

impl FaultConfig {
    /// The rates, in the order of [`FrameFault::ALL`].
    pub fn rates(&self) -> [u32; 7] {
        [
            self.drop_ppm,
            self.silent_drop_ppm,
            self.duplicate_ppm,
            self.reorder_ppm,
            self.corrupt_ppm,
            self.delay_ppm,
            self.disconnect_ppm,
        ]
    }

    /// The rate of one fault kind.
    pub fn rate_mut(&mut self, fault: FrameFault) -> &mut u32 {
        match fault {
            FrameFault::Drop => &mut self.drop_ppm,
            FrameFault::SilentDrop => &mut self.silent_drop_ppm,
            FrameFault::Duplicate => &mut self.duplicate_ppm,
            FrameFault::Reorder => &mut self.reorder_ppm,
            FrameFault::Corrupt => &mut self.corrupt_ppm,
            FrameFault::Delay => &mut self.delay_ppm,
            FrameFault::Disconnect => &mut self.disconnect_ppm,
        }
    }
}

/// Counts of what the injector did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Frames that passed through.
    pub frames: u64,
    /// Dropped with a reset.
    pub dropped: u64,
    /// Dropped silently.
    pub silent_dropped: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Reordered.
    pub reordered: u64,
    /// Corrupted.
    pub corrupted: u64,
    /// Delayed.
    pub delayed: u64,
    /// Connections broken by the injector.
    pub disconnects: u64,
    /// Held (delayed or reordered) frames whose connection ended before
    /// they could go: lost in flight.
    pub held_lost: u64,
}

/// Decides, frame by frame, which fault (if any) applies.
#[derive(Clone, Debug)]
pub struct FaultInjector {
    config: FaultConfig,
    rng: SplitMix64,
    seen_to_server: u64,
    seen_to_client: u64,
    seen_data_to_server: u64,
    seen_data_to_client: u64,
    counts: FaultCounts,
}

impl FaultInjector {
    /// An injector with its own seeded generator.
    pub fn new(config: FaultConfig, seed: u64) -> FaultInjector {
        FaultInjector {
            config,
            rng: SplitMix64::new(seed),
            seen_to_server: 0,
            seen_to_client: 0,
            seen_data_to_server: 0,
            seen_data_to_client: 0,
            counts: FaultCounts::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// Replaces the configuration; counts and schedule positions carry on.
    pub fn set_config(&mut self, config: FaultConfig) {
        self.config = config;
    }

    /// What was done so far.
    pub fn counts(&self) -> FaultCounts {
        self.counts
    }

    /// The fault for the next frame, if any. `to_server` is its direction,
    /// `data` whether it carries a `Write` or `Read`.
    pub fn next(&mut self, to_server: bool, data: bool) -> Option<FrameFault> {
        self.counts.frames += 1;
        let (all, data_n) = if to_server {
            (&mut self.seen_to_server, &mut self.seen_data_to_server)
        } else {
            (&mut self.seen_to_client, &mut self.seen_data_to_client)
        };
        let index_all = *all;
        *all += 1;
        let index_data = *data_n;
        if data {
            *data_n += 1;
        }
        let scheduled = self.config.schedule.iter().find(|s| {
            let dir_ok = match s.direction {
                Direction::ToServer => to_server,
                Direction::ToClient => !to_server,
                Direction::Any => true,
            };
            let index = if s.data_only { index_data } else { index_all };
            dir_ok && (!s.data_only || data) && s.nth == index
        });
        let fault = match scheduled {
            Some(s) => Some(s.fault),
            None => self.roll(),
        };
        if let Some(f) = fault {
            let c = &mut self.counts;
            match f {
                FrameFault::Drop => c.dropped += 1,
                FrameFault::SilentDrop => c.silent_dropped += 1,
                FrameFault::Duplicate => c.duplicated += 1,
                FrameFault::Reorder => c.reordered += 1,
                FrameFault::Corrupt => c.corrupted += 1,
                FrameFault::Delay => c.delayed += 1,
                FrameFault::Disconnect => c.disconnects += 1,
            }
        }
        fault
    }

    /// Counts a held frame lost with its connection.
    pub fn count_held_lost(&mut self) {
        self.counts.held_lost += 1;
    }

    /// A seeded choice in `0..bound`, for the corruption's bit position.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.rng.below(bound)
    }

    fn roll(&mut self) -> Option<FrameFault> {
        let c = &self.config;
        let table = [
            (c.drop_ppm, FrameFault::Drop),
            (c.silent_drop_ppm, FrameFault::SilentDrop),
            (c.duplicate_ppm, FrameFault::Duplicate),
            (c.reorder_ppm, FrameFault::Reorder),
            (c.corrupt_ppm, FrameFault::Corrupt),
            (c.delay_ppm, FrameFault::Delay),
            (c.disconnect_ppm, FrameFault::Disconnect),
        ];
        let total: u64 = table.iter().map(|(p, _)| u64::from(*p)).sum();
        if total == 0 {
            return None;
        }
        let mut x = self.rng.below(1_000_000);
        for (ppm, fault) in table {
            let p = u64::from(ppm);
            if x < p {
                return Some(fault);
            }
            x -= p;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rates_and_no_schedule_inject_nothing() {
        let mut f = FaultInjector::new(FaultConfig::default(), 1);
        assert!((0..10_000).all(|i| f.next(i % 2 == 0, true).is_none()));
        assert_eq!(f.counts().frames, 10_000);
    }

    #[test]
    fn scheduled_fault_hits_exactly_the_nth_matching_frame() {
        let config = FaultConfig {
            schedule: vec![ScheduledFault {
                nth: 2,
                direction: Direction::ToServer,
                data_only: true,
                fault: FrameFault::SilentDrop,
            }],
            ..FaultConfig::default()
        };
        let mut f = FaultInjector::new(config, 1);
        // to_server data frames: 0, 1, 2 <- this one; control and to_client frames do not count.
        let seq = [
            (true, false),
            (true, true),
            (false, true),
            (true, true),
            (true, true),
            (true, true),
        ];
        let got: Vec<Option<FrameFault>> = seq.iter().map(|&(s, d)| f.next(s, d)).collect();
        assert_eq!(
            got,
            vec![None, None, None, None, Some(FrameFault::SilentDrop), None]
        );
    }

    #[test]
    fn rates_are_honoured_roughly_and_reproducibly() {
        let config = FaultConfig {
            duplicate_ppm: 100_000,
            corrupt_ppm: 50_000,
            ..FaultConfig::default()
        };
        let run = |seed| {
            let mut f = FaultInjector::new(config.clone(), seed);
            for _ in 0..100_000 {
                let _ = f.next(true, true);
            }
            f.counts()
        };
        let a = run(9);
        assert_eq!(a, run(9), "same seed, same faults");
        assert!((9_000..11_000).contains(&a.duplicated), "{a:?}");
        assert!((4_300..5_700).contains(&a.corrupted), "{a:?}");
        assert_eq!(a.dropped + a.silent_dropped + a.reordered + a.delayed, 0);
    }
}
