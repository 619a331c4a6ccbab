//! What each client application asked for and was handed, apart from
//! the protocol: its reads and their answers, and the messages its
//! storage refused.
//!
//! Two rules are checked here:
//!
//! * every read a client released (its cumulative ack or its `base_sn`
//!   passed it, or the run ended) had its data handed to the client's
//!   application ([`ClientHandler::read_data`]), or a client event named
//!   it: a `NotReplayed` range held it, or the client failed
//!   ([`Invariant::ReadUnanswered`]). The check runs at the end of the
//!   run, over everything released by then: a client that keeps an
//!   acknowledged read until its answer comes is judged on that answer,
//!   whatever order its `Acked` and its read data took;
//! * `submit` never refuses a message for want of storage while nothing
//!   is outstanding ([`Invariant::BufferFullWhileIdle`]).
//!
//! [`ClientHandler::read_data`]: iomsg_core::transport::ClientHandler::read_data

use iomsg_core::seq::RingFull;
use iomsg_core::workload;

use super::super::check::Invariant;
use super::{ClientTruth, Truth, ANSWERED, CORRUPT_FOUND, GIVEN_UP, READ};
use crate::sim::Verdict;

impl Truth {
    /// Client `client`'s `submit` returned `sn` for a read (recorded with
    /// [`submitted`](Self::submitted) as well).
    pub fn read_submitted(&mut self, client: usize, sn: u64) {
        self.clients[client].flag(sn..sn + 1, READ);
    }

    /// Client `client`'s application got the data of its read `sn`; the
    /// workload's checker judged it.
    pub fn read_answered(&mut self, client: usize, sn: u64, check: workload::Check) {
        self.clients[client].flag(sn..sn + 1, ANSWERED);
        if check == workload::Check::Intact {
            return;
        }
        let session = self.clients[client].spec.session;
        if self.undetectable_corruption {
            self.clients[client].corrupt += 1;
        } else {
            self.findings.add(
                Invariant::ReadMismatch,
                Some(client),
                session,
                Some(sn),
                || format!("the read's data is not what the server's application wrote: its {CORRUPT_FOUND}"),
            );
        }
    }

    /// Client `client`'s `submit` of the message that would have been
    /// `sn` was refused for want of storage (`full`) while `outstanding`
    /// messages were unacknowledged. With none outstanding it is a
    /// violation, reported once per client.
    pub fn refused_for_storage(
        &mut self,
        client: usize,
        sn: u64,
        outstanding: usize,
        full: RingFull,
    ) {
        let c = &mut self.clients[client];
        if outstanding > 0 || c.refused_idle {
            return;
        }
        c.refused_idle = true;
        let session = c.spec.session;
        self.findings.add(
            Invariant::BufferFullWhileIdle,
            Some(client),
            session,
            Some(sn),
            || {
                format!(
                    "a {}-byte message refused (BufferFull) with nothing outstanding: \
                     {} of {} bytes of storage counted as used",
                    full.need, full.used, full.capacity
                )
            },
        );
    }
}

/// Judges client `i`'s read `sn` (its `flags`) at the end of the run.
pub(super) fn judge_read(i: usize, c: &ClientTruth, sn: u64, flags: u16, v: &mut Verdict) {
    if flags & READ == 0 {
        return;
    }
    v.reads += 1;
    if flags & ANSWERED != 0 {
        v.reads_answered += 1;
        return;
    }
    let released = sn < c.acked_upto.max(c.final_base.unwrap_or(0));
    if !released || flags & GIVEN_UP != 0 || c.failed {
        return;
    }
    v.findings.add(
        Invariant::ReadUnanswered,
        Some(i),
        c.spec.session,
        Some(sn),
        || {
            if c.delivered(sn) > 0 {
                "a server's application answered it, the client released it, \
                 its data never reached the client's application and no event named it"
                    .into()
            } else {
                "released by the client, never answered, and no event named it".into()
            }
        },
    );
}
