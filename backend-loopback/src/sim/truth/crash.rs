//! The truth across crashes with crash-proof state: what a crashed server
//! application had not committed is taken back, and so is what a journal
//! that lost its last commits (a tail loss) had committed with them.

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

    /// Keeps what each server's last `depth` commits changed, for
    /// [`journal_cut`](Self::journal_cut) (0, the default: nothing).
    pub fn set_tail_depth(&mut self, depth: usize) {
        self.tail_depth = depth;
    }

    /// Server instance `generation` (at address `server`)'s application
    /// committed what it was handed so far (its flush), as one commit.
    pub fn committed(&mut self, server: u16, generation: u32) {
        let (batch, rest): (Vec<Undo>, Vec<Undo>) = core::mem::take(&mut self.uncommitted)
            .into_iter()
            .partition(|u| u.generation() == generation);
        self.uncommitted = rest;
        if self.tail_depth == 0 {
            return;
        }
        let kept = self.kept.entry(server).or_default();
        if kept.len() == self.tail_depth {
            kept.pop_front();
        }
        kept.push_back(batch);
    }

    /// The journal of the server at `server` lost its last `commits`
    /// commits (a tail loss), and its application's record of the
    /// deliveries committed with them: those deliveries count as never
    /// made, as before them (delivery counts, the instance that delivered
    /// last, the announcement a delivery consumed), and each sn is marked
    /// as delivered only in commits a journal lost: its acknowledgement
    /// may have reached the client, which must name it
    /// (`ClientEvent::StateLost`) unless it comes again, once it is
    /// established again (a client that left before can be told nothing).
    /// What the deliveries found stays found. Returns the deliveries taken
    /// back.
    pub fn journal_cut(&mut self, server: u16, commits: usize) -> u64 {
        let mut undone = 0;
        for _ in 0..commits {
            let Some(batch) = self.kept.get_mut(&server).and_then(VecDeque::pop_back) else {
                break;
            };
            for u in batch.into_iter().rev() {
                undone += 1;
                self.undo(u, true);
            }
        }
        undone
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
            self.undo(u, false);
        }
        keep.reverse();
        self.uncommitted = keep;
    }

    /// Takes one delivery back, as before it: at a crash (what it had not
    /// committed) or at a journal cut (`cut`: what the lost commits held,
    /// flagged as a tail loss its client must be told of at its next
    /// handshake, whatever an earlier cut made due).
    fn undo(&mut self, u: Undo, cut: bool) {
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
                if cut {
                    let own = ANNOUNCED | RECOVERED;
                    c.flags[idx] = (c.flags[idx] & !(own | TAIL_DUE)) | (flags & own) | TAIL_LOST;
                    c.cut_unseen.push(idx as u64);
                } else {
                    c.flags[idx] = flags;
                }
            }
            Undo::Stray {
                generation,
                session,
                sn,
                fresh,
            } => {
                self.deliveries_by_stray -= 1;
                if fresh {
                    self.stray_deliveries.remove(&(generation, session, sn));
                }
            }
        }
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
