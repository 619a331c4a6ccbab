//! A client of an unmodified io_demo server: io_demo's own protocol from
//! the client's side, with every operation's fate reported — answered
//! (its data checked), or left unanswered when the connection ended,
//! which io_demo's own client forgets.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use iomsg_core::iodemo::{self as wire, IoDemoMsg, Op};
use iomsg_ucx_sys as sys;

use super::io::{AmIn, AmPayload, Call, Inbox, Slots, What};
use crate::sockaddr::SockAddr;
use crate::status::Status;
use crate::worker::{ErrArg, WaitMode, Worker};
use crate::UcxError;

/// The one connection's key in the requests' bookkeeping.
const CONN: u64 = 1;

/// What an [`IoDemoClient`] saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoDemoClientEvent {
    /// The connection is up (tag API: the server's id arrived).
    Connected,
    /// An operation was answered.
    Done {
        /// [`Op::Read`] or [`Op::Write`].
        op: Op,
        /// Its sn.
        sn: u32,
        /// Its data size.
        size: u64,
        /// The first byte of the read's data (or of the answer's padding)
        /// that is not io_demo's pattern, if any.
        corrupt: Option<usize>,
    },
    /// The connection ended; the operations listed were never answered
    /// (io_demo's own client forgets them).
    Closed {
        /// Why.
        reason: String,
        /// Operations in flight, oldest first.
        in_flight: Vec<(Op, u32)>,
    },
}

/// An operation in flight.
struct Op1 {
    op: Op,
    size: u64,
    /// Parts still to arrive (a tag read: its chunks and its answer).
    left: usize,
    corrupt: Option<usize>,
    /// Submission order.
    order: u64,
}

/// A client of an io_demo server over one connection; see the
/// [module](crate::iodemo). Made again (with [`connect`](Self::connect)) after it
/// closes.
pub struct IoDemoClient {
    tag: bool,
    msg_len: usize,
    chunk: u64,
    check: bool,
    ep: sys::ucp_ep_h,
    err: Option<Box<ErrArg>>,
    our_id: u32,
    their_id: Option<u32>,
    ops: HashMap<u32, Op1>,
    submitted: u64,
    events: Vec<IoDemoClientEvent>,
    closed: bool,
    slots: Slots,
    worker: Worker,
    inbox: Box<Inbox>,
}

impl IoDemoClient {
    /// Connects to an io_demo server at `addr`: `tag` for the tag API,
    /// otherwise active messages (io_demo's `-A`). `msg_len` is io_demo's
    /// io message size (`-r`, 256) and `chunk` its chunk size (`-k`).
    /// With `check` (io_demo's `-q`, which the server must be given too:
    /// without it, it sends whatever its buffers hold) every answer's
    /// bytes are checked against io_demo's pattern.
    ///
    /// # Errors
    ///
    /// UCX could not make the context, worker or endpoint.
    pub fn connect(
        addr: SocketAddr,
        tag: bool,
        msg_len: usize,
        chunk: u64,
        check: bool,
    ) -> Result<IoDemoClient, UcxError> {
        let features = if tag {
            u64::from(sys::UCP_FEATURE_TAG) | u64::from(sys::UCP_FEATURE_STREAM)
        } else {
            u64::from(sys::UCP_FEATURE_AM)
        } | u64::from(sys::UCP_FEATURE_WAKEUP);
        let settings = crate::UcxConfig::default().settings;
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let worker = Worker::with_features(WaitMode::Blocking, &settings, 1024, features).map_err(
            |status| UcxError {
                what: "creating the io_demo client's UCX context and worker",
                status,
            },
        )?;
        let inbox = Box::new(Inbox::default());
        if !tag {
            super::serve::set_am_handler(&worker, &inbox)?;
        }
        let mut c = IoDemoClient {
            tag,
            msg_len: msg_len.max(wire::HEADER_LEN),
            chunk: chunk.max(1),
            check,
            ep: core::ptr::null_mut(),
            err: None,
            our_id: 1,
            their_id: None,
            ops: HashMap::new(),
            submitted: 0,
            events: Vec::new(),
            closed: false,
            slots: Slots::new(&*inbox),
            worker,
            inbox,
        };
        c.open(addr)?;
        Ok(c)
    }

    fn open(&mut self, addr: SocketAddr) -> Result<(), UcxError> {
        let err = Box::new(ErrArg {
            shared: self.worker.shared_ptr(),
            key: CONN,
        });
        let sockaddr = SockAddr::from(addr);
        let params = crate::transport::dial_mode(&err, sockaddr.as_ucs());
        let mut ep: sys::ucp_ep_h = core::ptr::null_mut();
        // SAFETY: the worker is live; the address outlives the call; err
        // is kept until the endpoint's close completes.
        Status(unsafe { sys::ucp_ep_create(self.worker.worker, &params, &mut ep) })
            .check()
            .map_err(|status| UcxError {
                what: "connecting to the io_demo server",
                status,
            })?;
        self.ep = ep;
        self.err = Some(err);
        if self.tag {
            self.start(
                What::IdRecv { conn: CONN },
                vec![0; 4],
                Vec::new(),
                Call::StreamRecv { ep },
            );
            let id = self.our_id.to_le_bytes().to_vec();
            self.start(
                What::Send { conn: CONN },
                id,
                Vec::new(),
                Call::StreamSend { ep },
            );
            self.post_iomsg_recv();
        } else {
            // io_demo's AM client sends at once; this one waits until the
            // endpoint is wired up, so that operations go only to a
            // server that took the connection.
            self.start(
                What::IdRecv { conn: CONN },
                Vec::new(),
                Vec::new(),
                Call::Flush { ep },
            );
        }
        Ok(())
    }

    /// Whether operations can be submitted (connected and not closed).
    pub fn ready(&self) -> bool {
        !self.closed && self.their_id.is_some()
    }

    /// Whether the connection ended.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Operations in flight.
    pub fn in_flight(&self) -> usize {
        self.ops.len()
    }

    /// Sends operation `sn` (a read or a write of `size` bytes, its data
    /// and io message in io_demo's pattern). Does nothing unless
    /// [`ready`](Self::ready), or if `sn` is in flight already.
    pub fn submit(&mut self, op: Op, sn: u32, size: u64) {
        if !self.ready() || self.ops.contains_key(&sn) {
            return;
        }
        let conn_id = if self.tag {
            u64::from(self.our_id)
        } else {
            self.ep as u64
        };
        let msg = IoDemoMsg {
            conn_id,
            data_size: size,
            sn,
            op,
        };
        let mut m = vec![0; self.msg_len];
        msg.encode(&mut m);
        let parts = self.chunks(size);
        let left = match (op, self.tag) {
            (Op::Read, true) => parts.len() + 1,
            _ => 1,
        };
        self.submitted += 1;
        self.ops.insert(
            sn,
            Op1 {
                op,
                size,
                left,
                corrupt: None,
                order: self.submitted,
            },
        );
        let ep = self.ep;
        if !self.tag {
            let data = if op == Op::Write {
                pattern(sn, conn_id, size)
            } else {
                Vec::new()
            };
            return self.start(What::Send { conn: CONN }, data, m, Call::AmSend { ep });
        }
        let their = self.their_id.unwrap_or(0);
        let send = Call::TagSend {
            ep,
            tag: wire::iomsg_tag(their),
        };
        self.start(What::Send { conn: CONN }, m, Vec::new(), send);
        let tag = wire::data_tag(if op == Op::Read { self.our_id } else { their }, sn);
        for n in parts {
            if op == Op::Write {
                let call = Call::TagSend { ep, tag };
                self.start(
                    What::Send { conn: CONN },
                    pattern(sn, conn_id, n),
                    Vec::new(),
                    call,
                );
            } else {
                self.receive_part(tag, sn, n as usize, false);
            }
        }
        if op == Op::Read {
            self.receive_part(tag, sn, self.msg_len, true);
        }
    }

    /// Posts the receive of a tag read's chunk of `len` bytes, or of its
    /// answer, which travels on the same tag.
    fn receive_part(&mut self, tag: u64, sn: u32, len: usize, answer: bool) {
        let call = Call::TagRecv {
            worker: self.worker.worker,
            tag,
            mask: u64::MAX,
        };
        let what = What::Data {
            conn: CONN,
            sn,
            answer,
        };
        self.start(what, vec![0; len], Vec::new(), call);
    }

    fn chunks(&self, size: u64) -> Vec<u64> {
        let mut v = Vec::new();
        let mut left = size;
        while left > 0 {
            let n = left.min(self.chunk);
            v.push(n);
            left -= n;
        }
        v
    }

    /// Does the work that is ready; returns whether anything happened.
    pub fn poll(&mut self) -> bool {
        let mut any = self.worker.progress();
        let failed = self.worker.shared.failed.take();
        if let Some((_, status)) = failed.first() {
            self.close(format!("the endpoint failed: {status}"));
            any = true;
        }
        for (slot, status, len, tag) in self.inbox.done.take() {
            self.finish(slot, status, len, tag);
            any = true;
        }
        for a in self.inbox.am.take() {
            self.am_arrived(a);
            any = true;
        }
        any
    }

    /// Polls until something happens or `max` passes.
    pub fn wait(&mut self, max: Duration) {
        if !self.poll() {
            super::serve::sleep_on(&self.worker, max);
            self.poll();
        }
    }

    /// The events since the last call, oldest first.
    pub fn events(&mut self) -> Vec<IoDemoClientEvent> {
        core::mem::take(&mut self.events)
    }

    /// Ends the connection: what is in flight is reported unanswered.
    pub fn close(&mut self, reason: String) {
        if self.closed {
            return;
        }
        self.closed = true;
        let mut left: Vec<(u64, Op, u32)> = self
            .ops
            .drain()
            .map(|(sn, o)| (o.order, o.op, sn))
            .collect();
        left.sort_unstable_by_key(|l| l.0);
        self.events.push(IoDemoClientEvent::Closed {
            reason,
            in_flight: left.into_iter().map(|(_, op, sn)| (op, sn)).collect(),
        });
        // The wildcard receive of io messages too: nothing more is taken.
        self.slots.cancel_all(self.worker.worker);
        if let Some(err) = self.err.take() {
            let ep = self.ep;
            self.start(
                What::Close { _err: err },
                Vec::new(),
                Vec::new(),
                Call::Close { ep },
            );
        }
    }

    fn start(&mut self, what: What, buf: Vec<u8>, header: Vec<u8>, call: Call) {
        let (slot, now) = self.slots.start(what, buf, header, call);
        if let Some((status, len, tag)) = now {
            self.finish(slot, status, len, tag);
        }
    }

    fn post_iomsg_recv(&mut self) {
        if self.closed {
            return;
        }
        let call = Call::TagRecv {
            worker: self.worker.worker,
            tag: wire::IOMSG_TAG,
            mask: wire::IOMSG_TAG,
        };
        self.start(What::IoMsg, vec![0; 64 << 10], Vec::new(), call);
    }

    fn finish(&mut self, slot: usize, status: Status, len: usize, _tag: u64) {
        let Some(s) = self.slots.take(slot) else {
            return;
        };
        let canceled = status.0 == sys::UCS_ERR_CANCELED;
        match s.what {
            What::IdRecv { .. } if status.is_ok() => {
                let id = s
                    .buf
                    .get(..4)
                    .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                self.their_id = Some(id);
                self.events.push(IoDemoClientEvent::Connected);
            }
            What::IoMsg if status.is_ok() => {
                self.answer(&s.buf[..len.min(s.buf.len())], None);
                self.post_iomsg_recv();
            }
            What::Data { sn, answer, .. } if status.is_ok() => {
                self.part_arrived(sn, &s.buf[..len.min(s.buf.len())], answer);
            }
            _ if !status.is_ok() && !canceled => {
                self.close(format!("a request failed: {status}"));
            }
            _ => {}
        }
    }

    /// A tag read's chunk or answer arrived (or an AM read's payload).
    fn part_arrived(&mut self, sn: u32, bytes: &[u8], is_answer: bool) {
        let conn_id = if self.tag {
            u64::from(self.our_id)
        } else {
            self.ep as u64
        };
        let Some(o) = self.ops.get_mut(&sn) else {
            return;
        };
        let bad = if is_answer {
            match IoDemoMsg::decode(bytes) {
                Ok(m) if m.sn == sn => m.check_padding(bytes).err(),
                _ => Some(0),
            }
        } else {
            wire::check(sn, conn_id, bytes).err()
        };
        if self.check {
            o.corrupt = o.corrupt.or(bad);
        }
        o.left = o.left.saturating_sub(1);
        if o.left == 0 {
            self.done(sn);
        }
    }

    /// An io message (tag) or active message header from the server.
    fn answer(&mut self, bytes: &[u8], payload: Option<AmPayload>) {
        let Ok(m) = IoDemoMsg::decode(bytes) else {
            return self.close("the server sent an io message that is not io_demo's".into());
        };
        let pad = m.check_padding(bytes).err();
        match (m.op, payload) {
            (Op::WriteDone, _) => {
                if let Some(o) = self.ops.get_mut(&m.sn) {
                    if self.check {
                        o.corrupt = o.corrupt.or(pad);
                    }
                    self.done(m.sn);
                }
            }
            (Op::ReadDone, Some(AmPayload::Copied(data))) => self.part_arrived(m.sn, &data, false),
            (Op::ReadDone, Some(AmPayload::Rndv { desc, len })) => {
                let call = Call::AmData {
                    worker: self.worker.worker,
                    desc,
                };
                let what = What::Data {
                    conn: CONN,
                    sn: m.sn,
                    answer: false,
                };
                self.start(what, vec![0; len], Vec::new(), call);
            }
            _ => self.close(format!("the server sent {}", m.op.name())),
        }
    }

    fn am_arrived(&mut self, a: AmIn) {
        self.answer(&a.header, Some(a.data));
    }

    fn done(&mut self, sn: u32) {
        if let Some(o) = self.ops.remove(&sn) {
            self.events.push(IoDemoClientEvent::Done {
                op: o.op,
                sn,
                size: o.size,
                corrupt: o.corrupt,
            });
        }
    }
}

fn pattern(sn: u32, conn_id: u64, n: u64) -> Vec<u8> {
    let mut v = vec![0; n as usize];
    wire::fill(sn, conn_id, &mut v);
    v
}

impl Drop for IoDemoClient {
    fn drop(&mut self) {
        self.close("the client is dropped".into());
        let end = std::time::Instant::now() + Duration::from_secs(2);
        while self.slots.busy() > 0 && std::time::Instant::now() < end {
            self.poll();
        }
        for s in self.slots.slots.drain(..).flatten() {
            if !s.req.is_null() {
                // UCX still holds it: its buffers stay for good.
                core::mem::forget(s);
            }
        }
        super::serve::release_arrivals(&self.worker, &self.inbox);
    }
}
