//! How an endpoint waits when it has nothing to do: [`Progress`], and
//! [`Idle`], which tells a loop when it may sleep.
//!
//! Sleeping on the transport's fd at the first idle poll costs a wakeup
//! (a system call and a scheduler hop) on every message that arrives a
//! moment later; spinning forever costs a core. The default spins for
//! [`SPIN_FOR`] after the last work, then sleeps: a stream of messages
//! keeps the loop spinning, an idle endpoint sleeps.

use std::time::{Duration, Instant as Wall};

/// How long an adaptive loop keeps polling after its last work before it
/// sleeps.
pub const SPIN_FOR: Duration = Duration::from_millis(1);

/// How an endpoint waits when it has nothing to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Progress {
    /// Poll for [`SPIN_FOR`] after the last work, then sleep on the
    /// transport until work comes or a timer is due (the default).
    #[default]
    Adaptive,
    /// Sleep at the first poll that found nothing to do.
    Sleep,
    /// Never sleep: lowest latency, one core busy.
    BusyPoll,
}

impl Progress {
    /// Whether the transport must be able to sleep (an event fd).
    #[must_use]
    pub fn sleeps(self) -> bool {
        self != Progress::BusyPoll
    }
}

/// Since when a loop found nothing to do.
#[derive(Clone, Copy, Debug, Default)]
pub struct Idle {
    since: Option<Wall>,
}

impl Idle {
    /// The last poll did something.
    pub fn busy(&mut self) {
        self.since = None;
    }

    /// The last poll did nothing: whether the loop may sleep now under
    /// `progress`.
    pub fn may_sleep(&mut self, progress: Progress) -> bool {
        match progress {
            Progress::BusyPoll => false,
            Progress::Sleep => true,
            Progress::Adaptive => {
                let since = *self.since.get_or_insert_with(Wall::now);
                since.elapsed() >= SPIN_FOR
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_sleeps_only_after_spinning_and_busy_starts_over() {
        let mut idle = Idle::default();
        assert!(
            !idle.may_sleep(Progress::Adaptive),
            "the first idle poll spins"
        );
        std::thread::sleep(SPIN_FOR * 2);
        assert!(idle.may_sleep(Progress::Adaptive));
        idle.busy();
        assert!(
            !idle.may_sleep(Progress::Adaptive),
            "work starts the spin over"
        );
        assert!(idle.may_sleep(Progress::Sleep));
        assert!(!idle.may_sleep(Progress::BusyPoll));
        assert!(!Progress::BusyPoll.sleeps() && Progress::Adaptive.sleeps());
    }
}
