//! The async server's journal: a [`Keeper`] that keeps each batch of
//! what the server took with the journal records that cover it.

use std::collections::VecDeque;

use iomsg_core::session::Unkept;

use super::Delivered;
#[cfg(doc)]
use super::Server;

/// Where an async server with a journal keeps what it takes, so that a
/// message is handed to the application exactly once across crashes (see
/// the crate's guarantees): [`Server::bind_keeping`].
///
/// Called on the server's task: it must not block longer than the
/// storage it writes to.
pub trait Keeper: Send + 'static {
    /// One batch: the messages taken since the last batch, in the order
    /// taken, and the journal records of the sessions they changed. Keep
    /// both durably, in one commit, before returning: the
    /// acknowledgements of the batch leave after it, and only then do
    /// its messages reach the stream ([`Server::next`]). Give the records
    /// back (the latest of each session) to the next instance's
    /// [`Server::bind_keeping`].
    ///
    /// # Errors
    ///
    /// The batch could not be kept. The server halts: nothing of the
    /// batch is acknowledged or reaches the stream, every client is
    /// refused, the stream ends, and [`Server::halted`] returns the
    /// error.
    fn commit(&mut self, batch: Batch<'_>) -> std::io::Result<()>;

    /// The latest journal record kept for `session`, which the server
    /// does not hold (see
    /// [`ServerHandler::recall`](iomsg_core::session::ServerHandler::recall));
    /// `None` if none was ever kept.
    fn recall(&mut self, session: u64) -> Option<Vec<u8>>;
}

/// What a [`Keeper`] keeps in one commit.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Batch<'a> {
    /// The messages taken, in order.
    pub delivered: &'a [Delivered],
    /// The journal records (one per session that changed; the last of a
    /// session replaces the ones before).
    pub records: &'a [Vec<u8>],
}

/// A [`Keeper`] and the batch it has not kept yet.
pub(super) struct Kept {
    keeper: Box<dyn Keeper>,
    delivered: Vec<Delivered>,
    records: Vec<Vec<u8>>,
    /// Why the last commit failed: the server halted.
    pub(super) failed: Option<std::io::Error>,
}

impl Kept {
    /// With `keeper`, nothing waiting yet.
    pub(super) fn new(keeper: Box<dyn Keeper>) -> Kept {
        Kept {
            keeper,
            delivered: Vec::new(),
            records: Vec::new(),
            failed: None,
        }
    }

    /// A message taken: it waits for the next commit.
    pub(super) fn take(&mut self, d: Delivered) {
        self.delivered.push(d);
    }

    /// A journal record: it waits for the next commit.
    pub(super) fn journal(&mut self, record: &[u8]) {
        self.records.push(record.to_vec());
    }

    /// Keeps what waits in one commit; once kept, its messages go to
    /// `stream`. A failed commit is kept for [`Server::halted`](Server::halted).
    pub(super) fn commit(&mut self, stream: &mut VecDeque<Delivered>) -> Result<(), Unkept> {
        if self.delivered.is_empty() && self.records.is_empty() {
            return Ok(());
        }
        let batch = Batch {
            delivered: &self.delivered,
            records: &self.records,
        };
        if let Err(e) = self.keeper.commit(batch) {
            self.failed = Some(e);
            return Err(Unkept);
        }
        self.records.clear();
        stream.extend(self.delivered.drain(..));
        Ok(())
    }

    /// The keeper's latest record of `session`, written into `out`.
    pub(super) fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        let record = self.keeper.recall(session)?;
        out.get_mut(..record.len())?.copy_from_slice(&record);
        Some(record.len())
    }
}
