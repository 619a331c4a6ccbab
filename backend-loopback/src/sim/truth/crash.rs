//! The truth across crashes with crash-proof state: what a crashed server
//! application had not committed is taken back.

use super::*;

impl Truth {
    /// The servers keep a journal, and every instance is restored from
    /// what the instances before it committed: an sn one of them
    /// delivered is one the later instances have (losing its replay on a
    /// live connection loses nothing), and their deliveries count with
    /// the crashed instances' uncommitted ones taken back
    /// ([`crashed`](Self::crashed)).
    pub fn set_journal(&mut self, on: bool) {
        for c in &mut self.clients {
            c.journaled = on;
        }
    }

    /// Crash-proof state on: each delivery counts only once its instance
    /// commits it ([`committed`](Self::committed)); an instance that
    /// crashes first loses it ([`crashed`](Self::crashed)).
    pub fn set_crash_proof(&mut self, on: bool) {
        self.rollback = on;
    }

    /// Server instance `generation`'s application committed what it was
    /// handed so far (its flush).
    pub fn committed(&mut self, generation: u32) {
        self.uncommitted.retain(|u| u.generation() != generation);
    }

    /// Server instance `generation` crashed: what its application was
    /// handed since its last flush counts as never delivered, exactly as
    /// before it (delivery counts, the instance that delivered last, the
    /// announcement a delivery consumed). What the deliveries found stays
    /// found.
    pub fn crashed(&mut self, generation: u32) {
        let mut keep = Vec::with_capacity(self.uncommitted.len());
        for u in core::mem::take(&mut self.uncommitted).into_iter().rev() {
            if u.generation() != generation {
                keep.push(u);
                continue;
            }
            match u {
                Undo::Client {
                    client,
                    idx,
                    deliveries,
                    last_gen,
                    flags,
                    ..
                } => {
                    let c = &mut self.clients[client];
                    c.deliveries[idx] = deliveries;
                    c.last_gen[idx] = last_gen;
                    c.flags[idx] = flags;
                }
                Undo::Stray {
                    session, sn, fresh, ..
                } => {
                    self.deliveries_by_stray -= 1;
                    if fresh {
                        self.stray_deliveries.remove(&(generation, session, sn));
                    }
                }
            }
        }
        keep.reverse();
        self.uncommitted = keep;
    }

    /// The findings, for checks kept outside the truth (the applications'
    /// [`Ledger`](crate::sim::ledger::Ledger)) to add theirs.
    pub fn findings_mut(&mut self) -> &mut Findings {
        &mut self.findings
    }
}

/// What one uncommitted delivery changed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Undo {
    /// A client's sn: its record before the delivery.
    Client {
        generation: u32,
        client: usize,
        idx: usize,
        deliveries: u32,
        last_gen: u32,
        flags: u16,
    },
    /// A stray peer's frame; `fresh`: first delivered by that instance.
    Stray {
        generation: u32,
        session: u64,
        sn: u64,
        fresh: bool,
    },
}

impl Undo {
    fn generation(&self) -> u32 {
        match *self {
            Undo::Client { generation, .. } | Undo::Stray { generation, .. } => generation,
        }
    }
}
