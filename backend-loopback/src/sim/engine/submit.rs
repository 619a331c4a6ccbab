//! The workload's side of the event loop: what each client submits, and
//! what the truth records of it.

use iomsg_core::rng::SplitMix64;
use iomsg_core::session::{RequestOp, SubmitError};
use iomsg_core::{workload, Instant};

use super::durable::Held;
use super::ClientSlot;
use crate::sim::ledger::Ledger;
use crate::sim::scenario::{Scenario, READ_REQUEST_LEN};
use crate::sim::truth::Truth;

/// What submitting needs of the run: the scenario, its one source of
/// randomness, the truth that records every submission, and the
/// report's backpressure count.
pub(super) struct Workload<'a> {
    /// The scenario.
    pub(super) scenario: &'a Scenario,
    /// The run's generator.
    pub(super) rng: &'a mut SplitMix64,
    /// The ground truth.
    pub(super) truth: &'a mut Truth,
    /// The applications' records.
    pub(super) ledger: &'a mut Ledger,
    /// Submissions refused for a full window or storage.
    pub(super) backpressure: &'a mut u64,
}

impl Workload<'_> {
    /// Submits client `i`'s requests due at `now` until its window or
    /// storage is full; returns whether any was submitted.
    pub(super) fn submit_due(
        &mut self,
        i: usize,
        c: &mut ClientSlot,
        now: Instant,
        submitting: bool,
    ) -> bool {
        let s = self.scenario;
        let w = &s.workload;
        let unbounded = w.messages == u64::MAX;
        let mut submitted_any = false;
        while c.driver.session().next_sn() < w.messages
            && !c.closing
            && now >= c.next_submit
            && !c.driver.session().is_terminal()
            && (submitting || !unbounded)
        {
            if c.driver.session().outstanding() >= s.client_window {
                *self.backpressure += 1;
                break;
            }
            if !self.submit_one(i, c) {
                *self.backpressure += 1;
                break;
            }
            submitted_any = true;
            c.next_submit = now + w.interval;
        }
        submitted_any
    }

    /// The next request's op, drawn from the workload's mix.
    fn op(&mut self) -> RequestOp {
        let w = &self.scenario.workload;
        let roll = self.rng.below(1000) as u16;
        if roll < w.read_per_mille {
            RequestOp::Read
        } else if roll < w.read_per_mille + w.stream_per_mille {
            RequestOp::StreamWrite
        } else {
            RequestOp::Write
        }
    }

    /// A write's payload length: `size`, or drawn from the spread below it.
    fn write_size(&mut self) -> usize {
        let w = &self.scenario.workload;
        if w.size_spread == 0 {
            return w.size as usize;
        }
        let spread = u64::from(w.size_spread.min(w.size));
        (u64::from(w.size) - self.rng.below(spread + 1)) as usize
    }

    /// Submits one request, its bytes (a write's payload, or a read's
    /// request: its sn) written straight into the client's storage.
    /// Returns `false` when the client refused it; a refusal for want of
    /// storage goes to the truth with what was outstanding.
    fn submit_one(&mut self, i: usize, c: &mut ClientSlot) -> bool {
        let op = self.op();
        let (bytes, read_len) = match op {
            RequestOp::Read => (READ_REQUEST_LEN, Some(self.scenario.workload.size)),
            _ => (self.write_size(), None),
        };
        let session = c.driver.session();
        let (id, next) = (session.session(), session.next_sn());
        let mut hash = 0;
        let submitted = c.driver.submit_with(op, bytes, read_len, |buf| {
            if op == RequestOp::Read {
                buf.copy_from_slice(&next.to_le_bytes());
            } else {
                workload::fill(id, next, buf);
            }
            hash = workload::hash(buf);
        });
        match submitted {
            Ok(sn) => {
                self.truth.submitted(i, sn, hash);
                self.ledger.submitted(i, sn);
                if let Some(life) = c.life.as_mut() {
                    let held = Held {
                        sn,
                        op,
                        len: bytes,
                        read_len,
                    };
                    life.outbox.submitted(held, c.driver.session());
                }
                if op == RequestOp::Read {
                    self.truth.read_submitted(i, sn);
                }
                true
            }
            Err(SubmitError::BufferFull(full)) => {
                let outstanding = c.driver.session().outstanding();
                self.truth.refused_for_storage(i, next, outstanding, full);
                false
            }
            Err(_) => false,
        }
    }
}
