//! Replies waiting for the transport: one small queue per connection, a
//! few rejections to connections that never entered the table, and a fair
//! transmit order that skips a connection the transport cannot take now.
//!
//! A connection that stalls (its peer stopped reading, the transport keeps
//! answering `WouldBlock` for it) fills only its own queue. When a reply
//! finds that queue full, the connection is a *slow consumer*: its queued
//! replies are dropped, it is closed, counted and reported
//! ([`ServerEvent::SlowConsumer`]). Nothing is lost by it: an ack that was
//! not sent is not sent (the client replays what it did not see
//! acknowledged, and the server knows those sns as duplicates), and a read
//! whose completion was dropped is asked again (an ack never passes an
//! unanswered read on a connection that stays open: this one is closed).

use heapless::{Deque, Vec};

use super::{Conn, ServerCore, ServerEvent, ServerHandler, ServerTransmit, MAX_READ_REQUEST};
use crate::conn::ConnId;
use crate::wire::{Body, IoMsg, HEADER_LEN};

/// Replies one connection holds at most. A received frame queues at most
/// one reply on its own connection; an ack or a write completion folds
/// into an ack or write completion right before it (acks are cumulative,
/// and the later completion says all the earlier one did), so only read
/// completions and the handshake's replies take a slot each, and a busy
/// connection's write completions go out once a round. A driver transmits
/// whenever a queue is down to its last free slot
/// ([`ServerCore::needs_transmit`]), so a connection whose transport keeps
/// up never comes near it.
pub const CONN_REPLIES: usize = 16;

/// Rejections queued at most for connections that are not in the table
/// (refused because it was full). A driver transmits (and closes) them as
/// soon as half the room is taken; a rejection the transport cannot take
/// then is given up and its connection closed without it.
pub const STRAY_REPLIES: usize = 16;

/// A frame waiting for its connection's transport.
#[derive(Clone, Copy, Debug)]
pub(super) enum Reply {
    /// A frame without application data.
    Frame { msg: IoMsg<'static> },
    /// A read completion: the application writes the data when it goes.
    ReadComp {
        msg: IoMsg<'static>,
        len: u32,
        request: [u8; MAX_READ_REQUEST],
        request_len: u8,
    },
}

impl Reply {
    fn len(&self) -> usize {
        match self {
            Reply::Frame { msg } => msg.buffer_len(),
            Reply::ReadComp { len, .. } => HEADER_LEN + *len as usize,
        }
    }

    /// An `Ack` or a `WriteComp`: what a later one may fold into.
    pub(super) fn acks_only(&self) -> bool {
        matches!(
            self,
            Reply::Frame {
                msg: IoMsg {
                    body: Body::Ack | Body::WriteComp,
                    ..
                }
            }
        )
    }
}

/// A rejection to a connection outside the table, then its close.
#[derive(Clone, Copy, Debug)]
pub(super) struct Stray {
    conn: ConnId,
    /// The rejection; `None` once sent or given up: its close is due.
    msg: Option<IoMsg<'static>>,
    /// The transport refused it for now in this transmit round.
    blocked: bool,
}

/// The reply state of one connection.
#[derive(Clone, Debug)]
pub(super) struct ReplyQueue {
    pub(super) replies: Deque<Reply, CONN_REPLIES>,
    /// The connection closes once its replies are out.
    pub(super) close: bool,
    /// The transport answered `WouldBlock` for it in this round.
    pub(super) blocked: bool,
}

impl ReplyQueue {
    pub(super) const fn new() -> ReplyQueue {
        ReplyQueue {
            replies: Deque::new(),
            close: false,
            blocked: false,
        }
    }
}

/// What became of a reply handed to a connection's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Queued {
    /// Queued (or folded into the last ack).
    Yes,
    /// The queue was full: the connection was closed as a slow consumer.
    Overflow,
    /// The connection is not in the table (or already closing).
    NoConn,
}

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    /// Replies waiting for the transport, over all connections.
    pub fn pending_replies(&self) -> usize {
        self.queued + self.strays.iter().filter(|s| s.msg.is_some()).count()
    }

    /// Whether a connection close is due: a driver closes it (through
    /// [`poll_close`](Self::poll_close)) before taking more frames, so
    /// that a rejected connection carries nothing further.
    pub fn close_pending(&self) -> bool {
        self.closes_due > 0 || self.strays.iter().any(|s| s.msg.is_none())
    }

    /// Whether the driver must transmit (and close) before it takes the
    /// next frame from its transport: a connection's queue is down to its
    /// last free slot, a close is due, or a rejection to a connection
    /// outside the table waits. A driver that does so
    /// never overflows a queue of a connection whose transport keeps up,
    /// and keeps reading for every other connection while one stalls.
    pub fn needs_transmit(&self) -> bool {
        self.urgent
            || self.close_pending()
            || self.strays.iter().any(|s| !s.blocked)
            || self.strays.len() > STRAY_REPLIES / 2
    }

    /// The next frame to send, if any: its connection and length, for the
    /// transport's transmit buffer. Connections take turns, one frame
    /// each; one the transport refused in this round
    /// ([`transmit_blocked`](Self::transmit_blocked)) is skipped. `None`
    /// ends the round: the next call offers the skipped ones again.
    ///
    /// Only looks: nothing leaves its queue until
    /// [`write_transmit`](Self::write_transmit) writes it. Closes due come
    /// first (see [`poll_close`](Self::poll_close)).
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<ServerTransmit> {
        if let Some(s) = self.strays.iter().find(|s| !s.blocked && s.msg.is_some()) {
            let len = s.msg.map_or(0, |m| m.buffer_len());
            return Some(ServerTransmit {
                conn: s.conn,
                len,
                stray: true,
            });
        }
        if self.queued > 0 {
            let n = self.conns.len();
            let start = self.turn.min(n);
            let found = self
                .conns
                .iter()
                .enumerate()
                .skip(start)
                .chain(self.conns.iter().enumerate().take(start))
                .find(|(_, (_, c))| !c.out.blocked && !c.out.replies.is_empty())
                .and_then(|(i, (&conn, c))| c.out.replies.front().map(|r| (i, conn, r.len())));
            if let Some((i, conn, len)) = found {
                self.offered = i;
                return Some(ServerTransmit {
                    conn,
                    len,
                    stray: false,
                });
            }
        }
        self.end_round();
        None
    }

    /// The transport answered `WouldBlock` for the frame
    /// [`poll_transmit`](Self::poll_transmit) offered: its connection is
    /// skipped for the rest of this round, the others go on. A connection
    /// that is closing anyway gives up its replies and closes now; so does
    /// a rejection to a connection outside the table when their queue is
    /// half full.
    pub fn transmit_blocked(&mut self, t: ServerTransmit) {
        if t.stray {
            let crowded = self.strays.len() > STRAY_REPLIES / 2;
            if let Some(s) = self
                .strays
                .iter_mut()
                .find(|s| s.conn == t.conn && s.msg.is_some())
            {
                if crowded {
                    s.msg = None;
                    self.stats.rejects_unsent += 1;
                } else {
                    s.blocked = true;
                }
            }
            return;
        }
        let Some(c) = self.conns.get_mut(&t.conn) else {
            return;
        };
        if c.closing {
            let dropped = c.out.replies.len();
            c.out.replies.clear();
            self.queued -= dropped;
            self.stats.replies_discarded += dropped as u64;
        } else if !c.out.blocked {
            c.out.blocked = true;
            self.blocked += 1;
        }
    }

    /// The next connection to close, if one is due: its replies are out
    /// (or given up). It leaves the table.
    #[must_use]
    pub fn poll_close(&mut self) -> Option<ConnId> {
        if let Some(i) = self.strays.iter().position(|s| s.msg.is_none()) {
            return Some(self.strays.remove(i).conn);
        }
        if self.closes_due == 0 {
            return None;
        }
        let conn = self
            .conns
            .iter()
            .find(|(_, c)| c.out.close && c.out.replies.is_empty())
            .map(|(&conn, _)| conn)?;
        self.drop_conn(conn);
        Some(conn)
    }

    /// Writes the frame [`poll_transmit`](Self::poll_transmit) offered into
    /// `out` (the transport's buffer of exactly `t.len()` bytes). A read's
    /// data is written in place by the application (`sink.respond`).
    /// Returns the bytes written: `t.len()`, or 0 for a `t` that is no
    /// longer offered (nothing is written then).
    pub fn write_transmit(
        &mut self,
        t: ServerTransmit,
        out: &mut [u8],
        sink: &mut impl ServerHandler,
    ) -> usize {
        if t.stray {
            let Some(s) = self
                .strays
                .iter_mut()
                .find(|s| s.conn == t.conn && s.msg.is_some())
            else {
                return 0;
            };
            let crc = self.config.crc;
            let written = s.msg.take().map(|m| m.emit_with(out, &crc));
            return self.sent(written.unwrap_or(Ok(0)), t);
        }
        let Some(c) = self.conns.get_mut(&t.conn) else {
            return 0;
        };
        if c.out.replies.front().map(Reply::len) != Some(t.len) {
            return 0;
        }
        let Some(reply) = c.out.replies.pop_front() else {
            return 0;
        };
        self.queued -= 1;
        // The next turn is the next connection's.
        self.turn = self.offered + 1;
        let written = match reply {
            Reply::Frame { msg } => msg.emit_with(out, &self.config.crc),
            Reply::ReadComp {
                msg,
                len,
                request,
                request_len,
            } => msg.emit_payload_with(out, len as usize, &self.config.crc, |data| {
                let read = super::ReadRequest {
                    session: msg.session,
                    sn: msg.sn,
                    len,
                    request: &request[..usize::from(request_len)],
                };
                sink.respond(read, data);
            }),
        };
        self.sent(written, t)
    }

    fn sent(&mut self, written: Result<usize, crate::wire::WireError>, t: ServerTransmit) -> usize {
        match written {
            Ok(n) => {
                self.stats.frames_sent += 1;
                debug_assert_eq!(n, t.len);
                n
            }
            Err(e) => {
                // A reply the core built itself always encodes.
                self.stats.last_wire_error = Some(e);
                0
            }
        }
    }

    /// Drops the frame [`poll_transmit`](Self::poll_transmit) offered: the
    /// transport can never send it on its connection, which is treated as
    /// ended (the client resends what is not acknowledged).
    pub fn discard_transmit(&mut self, t: ServerTransmit) {
        if t.stray {
            if let Some(i) = self.strays.iter().position(|s| s.conn == t.conn) {
                self.strays.remove(i);
                self.stats.rejects_unsent += 1;
            }
            return;
        }
        self.drop_conn(t.conn);
    }

    /// Queues a reply on `conn`. A full queue takes an ack or a write
    /// completion into its last entry when that is one too; otherwise the
    /// connection is a slow consumer and is closed.
    pub(super) fn push_reply(
        &mut self,
        conn: ConnId,
        reply: Reply,
        sink: &mut impl ServerHandler,
    ) -> Queued {
        let Some(c) = self.conns.get_mut(&conn) else {
            return Queued::NoConn;
        };
        // An ack or a write completion folds into one right before it:
        // acks are cumulative, and the later completion says all the
        // earlier one did. So a queue fills only with what cannot fold (a
        // read's answer, the handshake's replies), and a busy connection's
        // replies, and the flush before them, come once a round.
        if fold(&mut c.out.replies, &reply) {
            return Queued::Yes;
        }
        if c.out.replies.push_back(reply).is_err() {
            self.slow_consumer(conn, sink);
            return Queued::Overflow;
        }
        self.queued += 1;
        if c.out.replies.len() + 1 >= CONN_REPLIES {
            self.urgent = true;
        }
        Queued::Yes
    }

    /// Closes `conn` because its replies do not fit: they are dropped, and
    /// the event says so.
    pub(super) fn slow_consumer(&mut self, conn: ConnId, sink: &mut impl ServerHandler) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let dropped = c.out.replies.len();
        c.out.replies.clear();
        self.queued -= dropped;
        self.stats.replies_discarded += dropped as u64;
        self.stats.slow_consumers += 1;
        let session = c.session;
        self.retire_conn(conn);
        sink.event(ServerEvent::SlowConsumer {
            conn,
            session,
            dropped,
        });
    }

    /// Whether `conn` was refused a place in the table and waits for its
    /// rejection and close.
    pub(super) fn is_stray(&self, conn: ConnId) -> bool {
        self.strays.iter().any(|s| s.conn == conn)
    }

    /// Queues a rejection to a connection outside the table, then its
    /// close.
    pub(super) fn push_stray(
        &mut self,
        conn: ConnId,
        msg: IoMsg<'static>,
        sink: &mut impl ServerHandler,
    ) {
        if self.is_stray(conn) {
            // Its rejection is queued already.
            return;
        }
        let stray = Stray {
            conn,
            msg: Some(msg),
            blocked: false,
        };
        if self.strays.push(stray).is_err() {
            // Only a driver that never transmits gets here: the rejection
            // and its close are given up, loudly.
            self.stats.rejects_unsent += 1;
            sink.event(ServerEvent::SlowConsumer {
                conn,
                session: None,
                dropped: 1,
            });
        }
    }

    /// Drops what a connection leaving the table still held.
    pub(super) fn forget_outbox(&mut self, c: &Conn) {
        let n = c.out.replies.len();
        self.queued -= n;
        self.stats.replies_discarded += n as u64;
        if c.out.close {
            self.closes_due -= 1;
        }
        if c.out.blocked {
            self.blocked -= 1;
        }
    }

    /// Marks `conn`'s close as due once its replies are out.
    pub(super) fn close_after_replies(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if !c.out.close {
                c.out.close = true;
                self.closes_due += 1;
            }
        }
    }

    /// The end of a transmit round: every connection may be offered again.
    fn end_round(&mut self) {
        self.urgent = false;
        for s in self.strays.iter_mut() {
            s.blocked = false;
        }
        if self.blocked > 0 {
            for c in self.conns.values_mut() {
                c.out.blocked = false;
            }
            self.blocked = 0;
        }
    }

    pub(super) fn clear_replies(&mut self) {
        self.strays.clear();
        self.queued = 0;
        self.closes_due = 0;
        self.blocked = 0;
        self.urgent = false;
        self.turn = 0;
        self.offered = 0;
    }
}

/// Folds an ack or a write completion into the queue's last entry when
/// that is one too: acks are cumulative, and a later completion on a
/// connection says everything an earlier one did. Returns whether it did.
fn fold(replies: &mut Deque<Reply, CONN_REPLIES>, reply: &Reply) -> bool {
    let (Some(last), Reply::Frame { msg: new }) = (replies.back_mut(), reply) else {
        return false;
    };
    let Reply::Frame { msg: old } = last else {
        return false;
    };
    match (old.body, new.body) {
        (Body::Ack | Body::WriteComp, Body::Ack) => {
            old.ack = old.ack.max(new.ack);
            true
        }
        (Body::Ack | Body::WriteComp, Body::WriteComp) => {
            let ack = old.ack.max(new.ack);
            *old = IoMsg { ack, ..*new };
            true
        }
        _ => false,
    }
}

/// The queue of rejections to connections outside the table.
pub(super) type Strays = Vec<Stray, STRAY_REPLIES>;
