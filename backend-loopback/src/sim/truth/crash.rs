//! The truth across crashes with crash-proof state: what a crashed server
//! application had not committed is taken back.

use super::*;

impl Truth {
    /// The servers keep a journal, and every instance is restored from
    /// what the instances before it committed: an sn one of them
    /// delivered is one the later instances have (losing its replay on a
    /// live connection loses nothing), and their deliveries count with
    /// the crashed instances' uncommitted ones taken back
    /// ([`undeliver`](Self::undeliver)).
    pub fn set_journal(&mut self, on: bool) {
        for c in &mut self.clients {
            c.journaled = on;
        }
    }

    /// Server instance `generation`'s application lost what it was handed
    /// of `(session, sn)` from `owner`'s frame: the instance crashed
    /// before it committed it (crash-proof state on). It counts as never
    /// delivered by that instance; what the delivery found stays found.
    pub fn undeliver(&mut self, generation: u32, owner: Owner, session: u64, sn: u64) {
        match owner {
            Owner::Client(i) if self.clients[i].spec.session == session => {
                let c = &mut self.clients[i];
                let Some(idx) = usize::try_from(sn)
                    .ok()
                    .filter(|&k| k < c.deliveries.len() && c.deliveries[k] > 0)
                else {
                    return;
                };
                c.deliveries[idx] -= 1;
                if c.deliveries[idx] == 0 {
                    c.last_gen[idx] = 0;
                    c.flags[idx] &= !RECOVERED;
                }
            }
            Owner::Stray if self.stray_deliveries.remove(&(generation, session, sn)) => {
                self.deliveries_by_stray -= 1;
            }
            _ => {}
        }
    }

    /// The findings, for checks kept outside the truth (the applications'
    /// [`Ledger`](crate::sim::ledger::Ledger)) to add theirs.
    pub fn findings_mut(&mut self) -> &mut Findings {
        &mut self.findings
    }
}
