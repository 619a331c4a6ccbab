//! What an endpoint keeps of what its session told until the application
//! asks: the events for `next_event` ([`EventQueue`]) and the sns given up
//! ([`GivenUp`]).
//!
//! Memory is bounded by folding, never by dropping what matters. An
//! event that names a restart, a loss, a duplicate, a give-up or the end
//! of the session is never removed: at most it is folded with the one
//! kept right before it into one event that says both (cumulative acks,
//! touching ranges). Only routine events — how connections came and went,
//! nothing about any sn's fate — are removed, the oldest first, beyond
//! `ROUTINE_KEPT` of them. Which events are routine is a list; every
//! other variant, including those a newer core adds, is kept.

use std::collections::VecDeque;
use std::ops::Range;

use iomsg_core::session::{ClientEvent, ServerEvent};

/// Routine events kept at most for an application that does not read
/// them; the oldest go first.
pub const ROUTINE_KEPT: usize = 1024;

/// How the queue treats an event.
pub trait Fold: Sized {
    /// Whether it only says how a connection came or went (removable);
    /// everything else is kept.
    fn is_routine(&self) -> bool;

    /// `self` and the `later` event that followed it, said as one event
    /// that loses nothing, if there is one.
    fn fold(&self, later: &Self) -> Option<Self>;
}

/// `a` and `b` as one range, if they overlap or touch.
fn joined(a: &Range<u64>, b: &Range<u64>) -> Option<Range<u64>> {
    (a.start <= b.end && b.start <= a.end).then(|| a.start.min(b.start)..a.end.max(b.end))
}

impl Fold for ClientEvent {
    fn is_routine(&self) -> bool {
        // Listed, not excluded: a variant this list does not name is kept.
        matches!(
            self,
            ClientEvent::Connecting { .. }
                | ClientEvent::Established { .. }
                | ClientEvent::Disconnected { .. }
        )
    }

    fn fold(&self, later: &Self) -> Option<Self> {
        match (self, later) {
            (ClientEvent::Acked { upto: a }, ClientEvent::Acked { upto: b }) => {
                Some(ClientEvent::Acked { upto: *a.max(b) })
            }
            (ClientEvent::NotReplayed { range: a }, ClientEvent::NotReplayed { range: b }) => {
                joined(a, b).map(|range| ClientEvent::NotReplayed { range })
            }
            _ => None,
        }
    }
}

impl Fold for ServerEvent {
    fn is_routine(&self) -> bool {
        // Listed, not excluded: a variant this list does not name is kept.
        // `Stale` frames are sent again in the newer epoch; an `Evicted`
        // session keeps its tombstone (`Forgotten` says when it does not).
        // A `Duplicate` was discarded, not delivered; a `Rejected` or
        // `SlowConsumer` connection is closed, its client sends again.
        // Each is counted in the stats, and a peer can send them at any
        // rate: keeping them all would let it grow the queue without bound.
        matches!(
            self,
            ServerEvent::SessionOpened { .. }
                | ServerEvent::Stale { .. }
                | ServerEvent::Evicted { .. }
                | ServerEvent::Closed { .. }
                | ServerEvent::HandshakeTimeout { .. }
                | ServerEvent::Disconnected { .. }
                | ServerEvent::Duplicate { .. }
                | ServerEvent::Rejected { .. }
                | ServerEvent::SlowConsumer { .. }
        )
    }

    fn fold(&self, later: &Self) -> Option<Self> {
        use ServerEvent::{LiveLoss, LostInFlight, LostLive};
        match (self, later) {
            (
                LiveLoss {
                    session,
                    epoch,
                    missing: a,
                },
                LiveLoss {
                    session: s,
                    epoch: e,
                    missing: b,
                },
            ) if (session, epoch) == (s, e) => joined(a, b).map(|missing| LiveLoss {
                session: *session,
                epoch: *epoch,
                missing,
            }),
            (
                LostInFlight { session, range: a },
                LostInFlight {
                    session: s,
                    range: b,
                },
            ) if session == s => joined(a, b).map(|range| LostInFlight {
                session: *session,
                range,
            }),
            (
                LostLive { session, range: a },
                LostLive {
                    session: s,
                    range: b,
                },
            ) if session == s => joined(a, b).map(|range| LostLive {
                session: *session,
                range,
            }),
            _ => None,
        }
    }
}

/// Events in the order they were told, bounded by folding: see the
/// module's doc. `ROUTINE` is how many routine events are kept at most.
///
/// Kept and routine events wait in two queues, each entry numbered by
/// when it was told; [`pop`](Self::pop) takes the older front. An event
/// folded into the last kept one takes the later number: what the two
/// said is told where the later one was, never earlier.
#[derive(Debug)]
pub struct EventQueue<E, const ROUTINE: usize = ROUTINE_KEPT> {
    kept: VecDeque<(u64, E)>,
    routine: VecDeque<(u64, E)>,
    /// Events pushed so far: the next one's number.
    pushed: u64,
    /// Events not returned one by one: folded, or routine and removed.
    folded: u64,
}

impl<E, const ROUTINE: usize> Default for EventQueue<E, ROUTINE> {
    fn default() -> Self {
        EventQueue {
            kept: VecDeque::new(),
            routine: VecDeque::new(),
            pushed: 0,
            folded: 0,
        }
    }
}

impl<E: Fold, const ROUTINE: usize> EventQueue<E, ROUTINE> {
    /// Queues `event` after every earlier one: folded into the last kept
    /// event if the two say one thing, and removing the oldest routine
    /// event if it is the one past `ROUTINE`.
    pub fn push(&mut self, event: E) {
        let at = self.pushed;
        self.pushed += 1;
        if event.is_routine() {
            if self.routine.len() >= ROUTINE {
                self.routine.pop_front();
                self.folded += 1;
            }
            if ROUTINE > 0 {
                self.routine.push_back((at, event));
            }
            return;
        }
        if let Some((last_at, last)) = self.kept.back_mut() {
            if let Some(both) = last.fold(&event) {
                (*last_at, *last) = (at, both);
                self.folded += 1;
                return;
            }
        }
        self.kept.push_back((at, event));
    }

    /// The oldest event queued.
    pub fn pop(&mut self) -> Option<E> {
        let kept_first = match (self.kept.front(), self.routine.front()) {
            (Some((k, _)), Some((r, _))) => k < r,
            (kept, _) => kept.is_some(),
        };
        let queue = if kept_first {
            &mut self.kept
        } else {
            &mut self.routine
        };
        queue.pop_front().map(|(_, e)| e)
    }

    /// Events queued.
    pub fn len(&self) -> usize {
        self.kept.len() + self.routine.len()
    }

    /// Whether no event is queued.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.routine.is_empty()
    }

    /// Events pushed that [`pop`](Self::pop) will not return one by one:
    /// folded into another, or routine and removed.
    pub fn folded(&self) -> u64 {
        self.folded
    }
}

/// The sns given up, as ranges in sn order, none touching another: a
/// range that touches one already held is merged into it, so memory
/// grows with the number of disjoint give-ups only, and none is dropped.
#[derive(Debug, Default)]
pub struct GivenUp(Vec<Range<u64>>);

impl GivenUp {
    /// Adds the sns of `range` (nothing if it is empty).
    pub fn insert(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        // Ranges from `first` to `past` overlap or touch `range`.
        let first = self.0.partition_point(|r| r.end < range.start);
        let past = first + self.0[first..].partition_point(|r| r.start <= range.end);
        let merged = match self.0.get(first..past) {
            Some([lo, .., hi]) => lo.start.min(range.start)..hi.end.max(range.end),
            Some([one]) => one.start.min(range.start)..one.end.max(range.end),
            _ => range,
        };
        self.0.splice(first..past, [merged]);
    }

    /// The given-up range (touching ones merged) that holds `sn`.
    pub fn find(&self, sn: u64) -> Option<&Range<u64>> {
        self.first_in(sn..sn.saturating_add(1))
    }

    /// The first given-up range with an sn in `within`.
    pub fn first_in(&self, within: Range<u64>) -> Option<&Range<u64>> {
        let i = self.0.partition_point(|r| r.end <= within.start);
        self.0
            .get(i)
            .filter(|r| r.start < within.end && !within.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iomsg_core::session::{DisconnectCause, FailReason};
    use iomsg_core::transport::{ConnId, DisconnectReason};
    use iomsg_core::wire::RejectReason;

    fn acked(upto: u64) -> ClientEvent {
        ClientEvent::Acked { upto }
    }
    fn not_replayed(range: Range<u64>) -> ClientEvent {
        ClientEvent::NotReplayed { range }
    }
    fn restarted(unconfirmed: Range<u64>) -> ClientEvent {
        ClientEvent::ServerRestarted {
            previous: Some(1),
            instance: 2,
            unconfirmed,
        }
    }
    fn connecting(attempt: u32) -> ClientEvent {
        ClientEvent::Connecting { epoch: 1, attempt }
    }
    fn disconnected(epoch: u32) -> ClientEvent {
        ClientEvent::Disconnected {
            epoch,
            cause: DisconnectCause::ReplyTimeout,
        }
    }

    fn drain<E: Fold, const R: usize>(q: &mut EventQueue<E, R>) -> Vec<E> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn acks_fold_into_one_and_a_restart_between_them_stays_in_its_place() {
        let mut q = EventQueue::<ClientEvent>::default();
        for upto in 1..=10_000 {
            q.push(acked(upto));
        }
        q.push(restarted(9_000..10_000));
        for upto in 10_001..=20_000 {
            q.push(acked(upto));
        }
        assert_eq!(q.folded(), 20_001 - 3, "all but three of 20,001 folded");
        assert_eq!(
            drain(&mut q),
            [acked(10_000), restarted(9_000..10_000), acked(20_000)]
        );
    }

    #[test]
    fn events_naming_sns_outlive_any_number_of_routine_events() {
        let mut q = EventQueue::<ClientEvent>::default();
        let kept = [
            restarted(10..20),
            not_replayed(30..40),
            not_replayed(50..60),
            ClientEvent::Failed(FailReason::EpochExhausted),
            ClientEvent::Closed,
        ];
        let mut pushed = 0;
        for event in &kept {
            for attempt in 0..ROUTINE_KEPT as u32 {
                q.push(connecting(attempt));
                q.push(disconnected(attempt));
                pushed += 2;
            }
            q.push(event.clone());
            pushed += 1;
        }
        let out = drain(&mut q);
        let (routine, named): (Vec<_>, Vec<_>) = out.iter().cloned().partition(Fold::is_routine);
        assert_eq!(named, kept, "every event naming sns or the end, in order");
        assert_eq!(routine.len(), ROUTINE_KEPT, "the newest routine events");
        assert_eq!(out.len() as u64 + q.folded(), pushed);
        // The newest routine events are the ones kept: the last two
        // before `Closed` are the last attempt's.
        let last = ROUTINE_KEPT as u32 - 1;
        assert_eq!(
            out[out.len() - 3..],
            [connecting(last), disconnected(last), ClientEvent::Closed]
        );
    }

    #[test]
    fn touching_given_up_ranges_fold_and_apart_ones_do_not() {
        let mut q = EventQueue::<ClientEvent>::default();
        q.push(not_replayed(0..10));
        q.push(not_replayed(10..20));
        q.push(not_replayed(25..30));
        q.push(acked(30));
        q.push(not_replayed(30..35));
        assert_eq!(q.folded(), 1);
        assert_eq!(
            drain(&mut q),
            [
                not_replayed(0..20),
                not_replayed(25..30),
                acked(30),
                not_replayed(30..35)
            ]
        );
    }

    #[test]
    fn a_fold_past_routine_events_is_told_where_the_later_event_was() {
        let mut q = EventQueue::<ClientEvent>::default();
        q.push(acked(5));
        q.push(disconnected(1));
        q.push(connecting(2));
        q.push(acked(9));
        assert_eq!(
            drain(&mut q),
            [disconnected(1), connecting(2), acked(9)],
            "progress is never told before it was made"
        );
    }

    /// The queue's rules, said the plain way: one list; a kept event
    /// folds into the last kept one (which moves to the end), a routine
    /// event past `ROUTINE` removes the oldest routine one.
    fn plain<const R: usize>(events: &[ClientEvent]) -> (Vec<ClientEvent>, u64) {
        let mut list: Vec<ClientEvent> = Vec::new();
        let mut folded = 0;
        for e in events {
            if e.is_routine() {
                list.push(e.clone());
                if list.iter().filter(|e| e.is_routine()).count() > R {
                    let oldest = list.iter().position(Fold::is_routine);
                    list.remove(oldest.expect("a routine event"));
                    folded += 1;
                }
                continue;
            }
            let last = list.iter().rposition(|e| !e.is_routine());
            match last.and_then(|i| list[i].fold(e).map(|both| (i, both))) {
                Some((i, both)) => {
                    list.remove(i);
                    list.push(both);
                    folded += 1;
                }
                None => list.push(e.clone()),
            }
        }
        (list, folded)
    }

    /// Every sequence of up to six events drawn from routine ones, acks,
    /// touching and apart give-ups, a restart and the end: the queue
    /// (two routine events kept) pops what the plain list holds.
    #[test]
    fn the_queue_pops_what_a_plain_list_would_hold() {
        let kinds = 6u32;
        let event = |kind: u32, i: u64| match kind {
            0 => connecting(i as u32),
            1 => acked(10 * i),
            2 => not_replayed(10 * i..10 * i + 10),
            3 => not_replayed(10 * i + 2..10 * i + 8),
            4 => restarted(0..10 * i),
            _ => ClientEvent::Closed,
        };
        let mut checked = 0;
        for len in 0..=6u32 {
            for code in 0..kinds.pow(len) {
                let events: Vec<ClientEvent> = (0..len)
                    .map(|i| event(code / kinds.pow(i) % kinds, u64::from(i)))
                    .collect();
                let mut q = EventQueue::<ClientEvent, 2>::default();
                events.iter().cloned().for_each(|e| q.push(e));
                let (want, folded) = plain::<2>(&events);
                assert_eq!(q.folded(), folded, "{events:?}");
                assert_eq!(q.len(), want.len(), "{events:?}");
                assert_eq!(drain(&mut q), want, "{events:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, (0..=6).map(|n| 6u32.pow(n)).sum::<u32>());
    }

    #[test]
    fn server_losses_are_kept_and_routine_events_bounded() {
        let conn = ConnId::new(1, 1);
        let lost = |session, range| ServerEvent::LostLive { session, range };
        let named = [
            ServerEvent::LiveLoss {
                session: 7,
                epoch: 1,
                missing: 3..5,
            },
            ServerEvent::Recovered { session: 7, sn: 3 },
            lost(7, 4..5),
            ServerEvent::LostInFlight {
                session: 8,
                range: 0..4,
            },
            ServerEvent::Forgotten { session: 9 },
        ];
        let mut q = EventQueue::<ServerEvent, 4>::default();
        for event in &named {
            for session in 0..10 {
                q.push(ServerEvent::SessionOpened {
                    session,
                    epoch: 1,
                    conn,
                    known: false,
                    resume_from: 0,
                });
                q.push(ServerEvent::Disconnected {
                    conn,
                    reason: DisconnectReason::PeerClosed,
                });
            }
            q.push(event.clone());
        }
        let out = drain(&mut q);
        let kept: Vec<_> = out.iter().filter(|e| !e.is_routine()).cloned().collect();
        assert_eq!(kept, named, "every loss, in order");
        assert_eq!(out.len(), named.len() + 4);
        // What a peer can send at any rate stays bounded: counted in the
        // stats, folded away here.
        let mut q = EventQueue::<ServerEvent, 4>::default();
        for sn in 0..10_000 {
            q.push(ServerEvent::Duplicate { session: 7, sn });
            q.push(ServerEvent::Rejected {
                conn,
                reason: RejectReason::Malformed,
                detail: 0,
            });
            q.push(ServerEvent::SlowConsumer {
                conn,
                session: None,
                dropped: 1,
            });
        }
        assert_eq!(q.len(), 4);
        assert_eq!(q.folded(), 30_000 - 4);
    }

    #[test]
    fn server_ranges_fold_only_within_one_session_and_kind() {
        let mut q = EventQueue::<ServerEvent>::default();
        let lost = |session, range| ServerEvent::LostLive { session, range };
        q.push(lost(1, 0..4));
        q.push(lost(1, 4..8));
        q.push(lost(2, 8..9));
        q.push(ServerEvent::LostInFlight {
            session: 2,
            range: 9..12,
        });
        q.push(ServerEvent::LostInFlight {
            session: 2,
            range: 12..13,
        });
        assert_eq!(
            drain(&mut q),
            [
                lost(1, 0..8),
                lost(2, 8..9),
                ServerEvent::LostInFlight {
                    session: 2,
                    range: 9..13
                }
            ]
        );
    }

    /// Every sequence of up to three ranges within 0..6 (empty ones too):
    /// the set answers as a list of bools over the sns does, and holds
    /// its ranges in order, none touching another.
    #[test]
    fn given_up_answers_as_a_list_of_bools() {
        const N: u64 = 6;
        let ranges: Vec<Range<u64>> = (0..=N).flat_map(|s| (s..=N).map(move |e| s..e)).collect();
        let count = ranges.len();
        for len in 0..=3u32 {
            for code in 0..count.pow(len) {
                let picked: Vec<Range<u64>> = (0..len)
                    .map(|i| ranges[code / count.pow(i) % count].clone())
                    .collect();
                check_given_up(&picked, N);
            }
        }
    }

    fn check_given_up(picked: &[Range<u64>], n: u64) {
        let mut set = GivenUp::default();
        let mut bools = vec![false; n as usize + 1];
        for r in picked {
            set.insert(r.clone());
            r.clone().for_each(|sn| bools[sn as usize] = true);
        }
        assert!(
            set.0.windows(2).all(|w| w[0].end < w[1].start),
            "{picked:?}: {:?}",
            set.0
        );
        assert!(set.0.iter().all(|r| !r.is_empty()), "{picked:?}");
        // The maximal run of given-up sns around `sn`.
        let run = |sn: u64| {
            let given = |s: &u64| bools[*s as usize];
            let start = (0..=sn).rev().take_while(given).last();
            let end = (sn..=n).take_while(given).last();
            start.zip(end).map(|(s, e)| s..e + 1)
        };
        for sn in 0..=n {
            assert_eq!(set.find(sn).cloned(), run(sn), "{picked:?} sn {sn}");
        }
        for a in 0..=n + 1 {
            for b in a..=n + 1 {
                let first = (a..b.min(n + 1)).find(|&sn| bools[sn as usize]);
                let want = first.and_then(run);
                assert_eq!(set.first_in(a..b).cloned(), want, "{picked:?} {a}..{b}");
            }
        }
    }
}
