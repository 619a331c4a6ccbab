//! Reads and writes served as io_demo's server serves them.
//!
//! - Tag write: the data arrives in chunks on the data tag (our id, sn);
//!   the answer is an io message (`WriteDone`) on the client's io message
//!   tag.
//! - Tag read: the data goes in chunks on the data tag (the client's id,
//!   sn), then the answer (`ReadDone`) on the same tag, as data.
//! - AM write: the data is the active message's payload (fetched if it
//!   came by rendezvous); the answer is an active message whose header is
//!   `WriteDone`.
//! - AM read: one active message, header `ReadDone`, payload the data.
//!
//! Data goes out in io_demo's pattern (seed the sn, the client's id), and
//! io messages padded with it, so a client's `-q` checks pass.

use iomsg_core::iodemo::{self as wire, IoDemoMsg, Op};

use super::io::{AmPayload, Call, What};
use super::{IoDemoEvent, IoDemoServer, Pending};
use crate::status::Status;

impl IoDemoServer {
    /// Serves an admitted request of connection `key`.
    pub(super) fn serve(
        &mut self,
        key: u64,
        msg: IoDemoMsg,
        msg_len: usize,
        check: bool,
        payload: Option<AmPayload>,
    ) {
        let pending = Pending::new(msg.op, &msg, msg_len, check);
        match (msg.op, payload) {
            (Op::Write, None) => self.receive_chunks(key, msg, pending),
            (Op::Write, Some(AmPayload::Copied(data))) => {
                self.conn_ops(key, msg.sn, pending);
                self.data_arrived(key, msg.sn, Status::OK, &data);
            }
            (Op::Write, Some(AmPayload::Rndv { desc, len })) => {
                let mut pending = pending;
                pending.left = 1;
                self.conn_ops(key, msg.sn, pending);
                let call = Call::AmData {
                    worker: self.worker.worker,
                    desc,
                };
                self.start(
                    What::Data {
                        conn: key,
                        sn: msg.sn,
                        answer: false,
                    },
                    vec![0; len],
                    Vec::new(),
                    call,
                );
            }
            (_, payload) => {
                if let Some(p) = payload {
                    self.drop_payload(p);
                }
                self.answer_read(key, &msg, msg_len);
            }
        }
    }

    fn conn_ops(&mut self, key: u64, sn: u32, p: Pending) {
        if let Some(c) = self.conns.get_mut(&key) {
            c.ops.insert(sn, p);
        }
    }

    /// Posts the receives of a tag write's chunks.
    fn receive_chunks(&mut self, key: u64, msg: IoDemoMsg, mut pending: Pending) {
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        let tag = wire::data_tag(c.id, msg.sn);
        let chunk = self.opts.chunk.clamp(1, msg.data_size.max(1));
        let mut sizes = Vec::new();
        let mut left = msg.data_size;
        while left > 0 {
            let n = left.min(chunk);
            sizes.push(n as usize);
            left -= n;
        }
        pending.left = sizes.len();
        self.conn_ops(key, msg.sn, pending);
        if sizes.is_empty() {
            return self.data_arrived(key, msg.sn, Status::OK, &[]);
        }
        for n in sizes {
            let call = Call::TagRecv {
                worker: self.worker.worker,
                tag,
                mask: u64::MAX,
            };
            self.start(
                What::Data {
                    conn: key,
                    sn: msg.sn,
                    answer: false,
                },
                vec![0; n],
                Vec::new(),
                call,
            );
        }
    }

    /// A chunk (or the payload) of write `sn` arrived, or failed.
    pub(super) fn data_arrived(&mut self, key: u64, sn: u32, status: Status, data: &[u8]) {
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        let Some(p) = c.ops.get_mut(&sn) else { return };
        if !status.is_ok() {
            if status.0 != iomsg_ucx_sys::UCS_ERR_CANCELED {
                self.close(
                    key,
                    format!("receiving the data of write sn {sn}: {status}"),
                );
            }
            return;
        }
        if p.check && p.bad.is_none() {
            if let Err(at) = wire::check(sn, p.their_id, data) {
                p.bad = Some(at);
            }
        }
        p.left = p.left.saturating_sub(1);
        if p.left > 0 {
            return;
        }
        let p = c.ops.remove(&sn).expect("looked up above");
        if let Some(offset) = p.bad {
            self.events.push_back(IoDemoEvent::Corrupt {
                conn: key,
                sn,
                offset,
            });
        }
        self.answer_write(key, sn, &p);
    }

    fn answer_write(&mut self, key: u64, sn: u32, p: &Pending) {
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        let (ep, tag) = (c.ep, c.tag == Some(true));
        let msg = IoDemoMsg {
            conn_id: if tag { u64::from(c.id) } else { ep as u64 },
            data_size: p.size,
            sn,
            op: Op::WriteDone,
        };
        let mut m = vec![0; p.msg_len];
        msg.encode(&mut m);
        if tag {
            let to = wire::iomsg_tag(c.their_id.unwrap_or(0));
            self.queue(key, Some(to), m, Vec::new());
        } else {
            self.queue(key, None, Vec::new(), m);
        }
        self.events.push_back(IoDemoEvent::Answered {
            conn: key,
            op: Op::Write,
            sn,
            size: p.size,
        });
    }

    fn answer_read(&mut self, key: u64, req: &IoDemoMsg, msg_len: usize) {
        let Some(c) = self.conns.get(&key) else {
            return;
        };
        let (tag, id) = (c.tag == Some(true), c.id);
        let their = c.their_id.unwrap_or(0);
        let (sn, size) = (req.sn, req.data_size);
        let mut m = vec![0; msg_len];
        if tag {
            let to = wire::data_tag(their, sn);
            let chunk = self.opts.chunk.clamp(1, size.max(1));
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk);
                let mut data = vec![0; n as usize];
                wire::fill(sn, req.conn_id, &mut data);
                self.queue(key, Some(to), data, Vec::new());
                left -= n;
            }
            let done = IoDemoMsg {
                conn_id: u64::from(id),
                data_size: 0,
                sn,
                op: Op::ReadDone,
            };
            done.encode(&mut m);
            self.queue(key, Some(to), m, Vec::new());
        } else {
            let done = IoDemoMsg {
                conn_id: req.conn_id,
                data_size: size,
                sn,
                op: Op::ReadDone,
            };
            done.encode(&mut m);
            let mut data = vec![0; size as usize];
            wire::fill(sn, req.conn_id, &mut data);
            self.queue(key, None, data, m);
        }
        self.events.push_back(IoDemoEvent::Answered {
            conn: key,
            op: Op::Read,
            sn,
            size,
        });
    }
}

/// An answer waiting for the next poll.
pub(super) struct Queued {
    conn: u64,
    /// The tag to send it on; `None`: an active message.
    tag: Option<u64>,
    buf: Vec<u8>,
    header: Vec<u8>,
}

impl IoDemoServer {
    /// Queues an answer: it goes out at the start of the next poll, after
    /// the application took the events that report it.
    fn queue(&mut self, conn: u64, tag: Option<u64>, buf: Vec<u8>, header: Vec<u8>) {
        self.charge(Some(conn), (buf.len() + header.len()) as u64, true);
        self.queued.push(Queued {
            conn,
            tag,
            buf,
            header,
        });
    }

    /// Sends the queued answers of connections still open.
    pub(super) fn send_answers(&mut self) -> bool {
        let queued = core::mem::take(&mut self.queued);
        let any = !queued.is_empty();
        for q in queued {
            self.charge(Some(q.conn), (q.buf.len() + q.header.len()) as u64, false);
            let Some(ep) = self.conns.get(&q.conn).map(|c| c.ep) else {
                continue;
            };
            let call = match q.tag {
                Some(tag) => Call::TagSend { ep, tag },
                None => Call::AmSend { ep },
            };
            self.start(What::Send { conn: q.conn }, q.buf, q.header, call);
        }
        any
    }
}
