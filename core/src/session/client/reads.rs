//! Acks and reads: a read ends when its data reaches the application.
//!
//! An ack says the server's application took a request, not that its
//! answer arrived. A read's answer (`ReadComp`) can be lost after the read
//! was delivered: with its connection (the next `Welcome`'s `resume_from`
//! passes the read) or on a live connection (a later frame's ack passes
//! it). So the cumulative ack (`acked`) and the window's base part ways:
//! the window keeps every read below `acked` that is not answered, and the
//! client asks it again with its own sn. Below the server's cumulative
//! point such a read is a duplicate to the server, which hands it to
//! `ServerHandler::respond` again and never to `deliver`.
//!
//! When a read's answer is known to be lost:
//! - an ack passes a read that is not answered: the server sends every
//!   frame's replies in order, and the read's answer carries an ack that
//!   covers it, so any frame whose ack covers the read came after that
//!   answer (first asks only: the read was at or past `acked`);
//! - a `Welcome` resumes past it: the answer went with the old connection;
//! - a read asked again is not answered before the completion of a request
//!   sent after it on the same connection;
//! - otherwise the reply timeout ends the connection, and the next one asks
//!   again.
//!
//! With replay off a read given up at a reconnect (inside a `NotReplayed`
//! range) is settled: named, not answered.

use super::{ClientSession, RequestOp};
use crate::session::client::types::ReadData;

impl<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>> ClientSession<N, S> {
    /// Moves the cumulative ack to `ack` and returns how many sns it
    /// passed. Reads it passes that have no answer lost it: they are asked
    /// again.
    pub(super) fn ack_to(&mut self, ack: u64) -> u64 {
        if ack <= self.acked {
            return 0;
        }
        if self.unsettled_reads > 0 {
            for sn in self.acked..ack {
                self.answer_lost(sn);
            }
        }
        let passed = ack - self.acked;
        self.acked = ack;
        self.stats.acked += passed;
        self.release_settled();
        passed
    }

    /// Gives up every sn from `acked` to `end` (replay off, at a
    /// reconnect): reads among them are settled, named by the caller's
    /// `NotReplayed`, and nothing counts as acknowledged.
    pub(super) fn give_up_to(&mut self, end: u64) {
        if end <= self.acked {
            return;
        }
        if self.unsettled_reads > 0 {
            for sn in self.acked..end {
                if let Some(e) = self.window.get_mut(sn).filter(|e| !e.settled) {
                    e.settled = true;
                    self.unsettled_reads -= 1;
                }
            }
        }
        self.acked = end;
        self.release_settled();
    }

    /// Releases the window up to the ack, but not past a read whose data
    /// has not come, and frees the bytes of what it released.
    fn release_settled(&mut self) {
        let mut to = self.acked;
        if self.unsettled_reads > 0 {
            // The base is the oldest unsettled read, or the ack.
            let mut sn = self.window.base();
            while sn < self.acked && self.window.get(sn).is_some_and(|e| e.settled) {
                sn += 1;
            }
            to = sn;
        }
        // `to <= acked <= sent_hw <= window.next()`.
        let _ = self.window.release(to);
        self.free_payloads();
        if self.tx_cursor < self.acked {
            self.tx_cursor = self.acked;
        }
    }

    /// The answer of read `sn` (below the ack, or about to be) is lost, if
    /// it is a read still waiting for one: it is asked again.
    fn answer_lost(&mut self, sn: u64) {
        let Some(e) = self.window.get_mut(sn) else {
            return;
        };
        if e.op != RequestOp::Read || e.settled || e.asked == 0 {
            return;
        }
        e.asked = 0;
        if e.reasked {
            e.reasked = false;
            self.reasks_awaited -= 1;
        }
        self.reask_due += 1;
        self.reask_cursor = self.reask_cursor.min(sn);
    }

    /// After a `Welcome`: every read below the ack without its data is
    /// asked again on this connection.
    pub(super) fn schedule_reasks(&mut self) {
        self.reask_due = 0;
        self.reasks_awaited = 0;
        self.reask_cursor = self.window.base();
        if self.unsettled_reads == 0 {
            return;
        }
        for sn in self.window.base()..self.acked {
            if let Some(e) = self.window.get_mut(sn).filter(|e| !e.settled) {
                e.asked = 0;
                e.reasked = false;
                self.reask_due += 1;
            }
        }
    }

    /// The next read to ask again on this connection, if any.
    pub(super) fn next_reask(&self) -> Option<u64> {
        if self.reask_due == 0 {
            return None;
        }
        (self.reask_cursor.max(self.window.base())..self.acked).find(|&sn| {
            self.window
                .get(sn)
                .is_some_and(|e| !e.settled && e.asked == 0)
        })
    }

    /// Writes read `sn` asked again into `out`.
    pub(super) fn write_reask(&mut self, sn: u64, out: &mut [u8]) -> usize {
        let written = self.emit_request(sn, out);
        if let Some(e) = self.window.get_mut(sn) {
            e.reasked = true;
        }
        self.reask_due -= 1;
        self.reasks_awaited += 1;
        self.reask_cursor = sn + 1;
        self.stats.reads_reasked += 1;
        written
    }

    /// A completion for request `sn` came: a read asked again before it
    /// on this connection and still without its data lost its answer.
    pub(super) fn completed(&mut self, sn: u64) {
        if self.reasks_awaited == 0 {
            return;
        }
        let Some(after) = self.window.get(sn).map(|e| e.asked) else {
            return;
        };
        if after <= self.conn_start {
            return;
        }
        for read in self.window.base()..self.acked {
            let lost = self
                .window
                .get(read)
                .is_some_and(|e| e.reasked && !e.settled && e.asked < after);
            if lost {
                self.answer_lost(read);
            }
        }
    }

    /// Settles read `sn`: its answer reaches the application now
    /// (`take_read`) or did before a crash (`settle_read`). Whether it was
    /// a read waiting for its answer.
    pub(super) fn settle_answered(&mut self, sn: u64) -> bool {
        let Some(entry) = self.window.get_mut(sn) else {
            return false;
        };
        if entry.op != RequestOp::Read || entry.settled {
            return false;
        }
        entry.settled = true;
        self.unsettled_reads -= 1;
        if entry.reasked {
            entry.reasked = false;
            self.reasks_awaited -= 1;
        } else if entry.asked == 0 && sn < self.acked {
            // Its answer came (or came before a crash) before it was asked
            // again.
            self.reask_due -= 1;
        }
        if sn == self.window.base() {
            self.release_settled();
        }
        true
    }

    /// The data of a read completion for `sn`, if `sn` is a read of the
    /// window without its data yet and the data is as long as asked: each
    /// read's data reaches the application once.
    pub(super) fn take_read<'f>(&mut self, sn: u64, data: &'f [u8]) -> Option<ReadData<'f>> {
        let fits = self
            .window
            .get(sn)
            .is_some_and(|e| e.op == RequestOp::Read && data.len() == e.len as usize);
        if !fits || !self.settle_answered(sn) {
            self.stats.stray_read_data += 1;
            return None;
        }
        self.stats.reads_answered += 1;
        Some(ReadData { sn, data })
    }
}
