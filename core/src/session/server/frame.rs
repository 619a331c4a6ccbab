//! A frame's first steps on the server: whether its connection takes it
//! at all, and what its body asks for.

use super::*;

impl<const SESSIONS: usize, const CONNS: usize, const WORDS: usize, const TOMBS: usize>
    ServerCore<SESSIONS, CONNS, WORDS, TOMBS>
{
    /// Whether a frame of `conn` is taken at all, and the session the
    /// connection is bound to: a connection the transport just accepted is
    /// let in (or refused) first; a closing one drops it (its client sends
    /// again what is not acknowledged); one whose replies no longer fit
    /// is closed as a slow consumer.
    #[inline(always)]
    pub(super) fn admit_frame(
        &mut self,
        now: Instant,
        conn: ConnId,
        sink: &mut impl ServerHandler,
    ) -> Option<Option<u64>> {
        // One lookup of the connection for everything below (nothing
        // changes it before the frame is processed or refused).
        let mut known = self.conns.get(&conn).map(Conn::state);
        if known.is_none() {
            if !self.handle_accepted(now, conn, sink) {
                return None;
            }
            known = self.conns.get(&conn).map(Conn::state);
        }
        let (closing, room_gone, bound) = known?;
        if closing {
            // Sent before the peer heard of the rejection.
            self.stats.after_close += 1;
            return None;
        }
        if room_gone {
            // Its transport took none of its replies: this connection
            // alone pays for it. The client sends the frame again.
            self.slow_consumer(conn, sink);
            return None;
        }
        Some(bound)
    }

    /// The request `msg` carries, for [`process`](Self::process); `None`
    /// when it was something else and is done with: a `Hello` or a `Bye`
    /// taken, a read past the largest refused, a frame no client sends
    /// refused.
    #[inline(always)]
    pub(super) fn request_of<'f>(
        &mut self,
        now: Instant,
        conn: ConnId,
        msg: &IoMsg<'f>,
        sink: &mut impl ServerHandler,
    ) -> Option<Data<'f>> {
        let (session, epoch, sn, validate) = (msg.session, msg.epoch, msg.sn, msg.validate);
        let data = |kind: Kind, bytes, read_len: u32| Data {
            session,
            epoch,
            sn,
            kind,
            bytes,
            read_len,
            validate,
        };
        match msg.body {
            Body::Hello {
                base_sn,
                next_sn,
                token,
                window,
                replay,
            } => {
                let hello = Hello {
                    base_sn,
                    next_sn,
                    token,
                    window,
                    replay,
                };
                self.handle_hello(now, conn, session, epoch, hello, sink);
                None
            }
            Body::Bye => {
                self.handle_bye(now, conn, session, sink);
                None
            }
            Body::Write { data: bytes } => {
                let op = if msg.stream {
                    RequestOp::StreamWrite
                } else {
                    RequestOp::Write
                };
                Some(data(Kind::Request(op), bytes, 0))
            }
            Body::Read { len, request } => {
                let max = self.max_read();
                if len as usize > max || request.len() > MAX_READ_REQUEST {
                    let too_long = RejectReason::ReadTooLong;
                    self.reject(conn, session, epoch, too_long, max as u64, sink);
                    return None;
                }
                Some(data(Kind::Request(RequestOp::Read), request, len))
            }
            Body::Probe => Some(data(Kind::Probe, &[], 0)),
            ref other => {
                let op = u64::from(other.op() as u8);
                self.reject(conn, session, epoch, RejectReason::Unexpected, op, sink);
                None
            }
        }
    }
}
