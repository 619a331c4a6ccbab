//! The properties of the `session` fuzz body (see its module doc) that are
//! checked at each frame the server or a client takes, on each output of
//! the server, and after every step.

use std::vec;
use std::vec::Vec;

use super::session::{Client, Server, World, CONNS, SESSION_TABLE, TOMBS, WINDOW};
use iomsg_core::session::{
    ClientState, ClientStats, Delivery, FailReason, ReadData, ReadRequest, RequestOp, ServerEvent,
    ServerHandler, CONN_REPLIES, MIN_WINDOW,
};
use iomsg_core::transport::ConnId;
use iomsg_core::wire::{self, Body, RejectReason, SN_MAX};
use iomsg_core::workload;

/// A message the server handed to its application, with a hash of its
/// bytes (a write's payload, a read's request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Delivered {
    pub(super) session: u64,
    pub(super) conn: ConnId,
    pub(super) sn: u64,
    pub(super) op: RequestOp,
    pub(super) hash: u64,
    pub(super) read_len: u32,
}

/// What the server's application heard, in order.
#[derive(Clone, Debug)]
pub(super) enum Heard {
    Delivered(Delivered),
    Event(ServerEvent),
}

/// Everything the server emitted during one call, its replies drained.
#[derive(Default)]
pub(super) struct Out {
    pub(super) frames: Vec<(ConnId, Vec<u8>)>,
    /// Connections the server closed: it forgot them (and their binding).
    /// The client learns of it from the `Reject`/`Bye` before, or from a
    /// scripted `handle_disconnected`.
    pub(super) closed: Vec<ConnId>,
    pub(super) heard: Vec<Heard>,
}

impl ServerHandler for Out {
    fn deliver(&mut self, msg: Delivery<'_>) {
        self.heard.push(Heard::Delivered(Delivered {
            session: msg.session,
            conn: msg.conn,
            sn: msg.sn,
            op: msg.op,
            hash: workload::hash(msg.data),
            read_len: if msg.op == RequestOp::Read {
                msg.read_len
            } else {
                assert_eq!(msg.read_len, 0, "a write delivered with a read length");
                0
            },
        }));
    }
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            read.len as usize,
            "respond's buffer vs the read's length"
        );
        answer(read.session, read.sn, read.request, out);
    }
    fn event(&mut self, event: ServerEvent) {
        self.heard.push(Heard::Event(event));
    }
}

/// The server application's answer to a read: the workload pattern of its
/// sn salted with its request, so that it depends on both.
pub(super) fn answer(session: u64, sn: u64, request: &[u8], out: &mut [u8]) {
    workload::fill(session ^ workload::hash(request), sn, out);
}

/// Sends every reply and close the server queued, in order, into `out`;
/// the transport refuses (`WouldBlock`) every frame to a connection whose
/// slot's bit is set in `stalled`. Only those keep replies, each at most a
/// queue's worth; every other connection's are out.
pub(super) fn drain(server: &mut Server, out: &mut Out, stalled: u64) -> u64 {
    let mut refused = 0u64;
    loop {
        if let Some(conn) = server.poll_close() {
            out.closed.push(conn);
            continue;
        }
        let Some(tx) = server.poll_transmit() else {
            break;
        };
        assert_eq!(server.poll_transmit(), Some(tx), "poll_transmit only peeks");
        if stalled & 1 << (tx.conn.slot() % 64) != 0 {
            assert!(
                refused & 1 << (tx.conn.slot() % 64) == 0,
                "a refused connection offered twice in one round: {tx:?}"
            );
            refused |= 1 << (tx.conn.slot() % 64);
            server.transmit_blocked(tx);
            continue;
        }
        let mut buf = vec![0u8; tx.len()];
        let n = server.write_transmit(tx, &mut buf, out);
        assert_eq!(
            n,
            tx.len(),
            "write_transmit wrote another length than offered"
        );
        assert!(
            wire::parse(&buf).is_ok(),
            "the server emitted a malformed frame"
        );
        out.frames.push((tx.conn, buf));
    }
    let waiting = refused.count_ones() as usize * (CONN_REPLIES + 1);
    assert!(
        server.pending_replies() <= waiting,
        "{} replies left with {} connections refused",
        server.pending_replies(),
        refused.count_ones()
    );
    if stalled == 0 {
        assert_eq!(server.pending_replies(), 0, "drained");
        assert!(!server.needs_transmit(), "nothing urgent once drained");
    }
    u64::from(refused.count_ones())
}

impl Out {
    fn events(&self) -> impl Iterator<Item = &ServerEvent> {
        self.heard.iter().filter_map(|h| match h {
            Heard::Event(e) => Some(e),
            Heard::Delivered(_) => None,
        })
    }

    /// The first rejection of `conn`: the answer to the frame that came on
    /// it, when that frame was refused.
    fn rejected(&self, conn: ConnId) -> Option<(RejectReason, u64)> {
        self.events().find_map(|e| match *e {
            ServerEvent::Rejected {
                conn: c,
                reason,
                detail,
            } if c == conn => Some((reason, detail)),
            _ => None,
        })
    }
}

/// The fields of a well-formed `Hello` (one that the server judges by its
/// token: checksummed, `base_sn <= next_sn <= SN_MAX`, a window).
#[derive(Clone, Copy, Debug)]
pub(super) struct Hello {
    session: u64,
    epoch: u32,
    base_sn: u64,
    next_sn: u64,
    token: u64,
}

impl Hello {
    fn parse(frame: &[u8]) -> Option<Hello> {
        let msg = wire::parse(frame).ok()?;
        match msg.body {
            Body::Hello {
                base_sn,
                next_sn,
                token,
                window,
                ..
            } if msg.validate && base_sn <= next_sn && next_sn <= SN_MAX && window > 0 => {
                Some(Hello {
                    session: msg.session,
                    epoch: msg.epoch,
                    base_sn,
                    next_sn,
                    token,
                })
            }
            _ => None,
        }
    }
}

/// Events drained from a client, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Drained {
    pub(super) connecting: u64,
    pub(super) established: u64,
    pub(super) disconnected: u64,
    pub(super) restarts: u64,
    pub(super) not_replayed: u64,
    pub(super) failed: u64,
}

impl World {
    /// The client a delivery of `session` on `conn` belongs to: the one with
    /// that session, or, when the two share it, the one whose connection
    /// carried it.
    fn attribute(&self, session: u64, conn: ConnId) -> Option<usize> {
        if self.shared {
            self.conn_owner(conn)
                .filter(|&i| self.peers[i].client.session() == session)
        } else {
            self.peers
                .iter()
                .position(|p| p.client.session() == session)
        }
    }

    /// Hands `frame` to the server on `conn` (`from` the client that sent
    /// it, if one did; `intact` if exactly as that client emitted it) and
    /// checks the properties of its answer.
    pub(super) fn server_frame(
        &mut self,
        conn: ConnId,
        frame: &[u8],
        from: Option<usize>,
        intact: bool,
        must_not_deliver: Option<&str>,
    ) {
        let hello = Hello::parse(frame);
        let owner = hello.and_then(|h| self.owners.get(&h.session).copied());
        // Property 9: another token than the owner's, on a connection that
        // did not say Hello yet (a stray peer, or a client with the same id).
        let stray = hello
            .filter(|h| owner.is_some_and(|t| t != h.token) && !self.bound.contains_key(&conn));
        let s = &self.server;
        let before = stray.map(|h| (s.session(h.session), s.session_count(), s.tomb_count()));
        let conns_full = s.conn_count() == CONNS;
        let probes = s.stats().probes;
        let unprocessed_before = s.stats().after_close + s.stats().slow_consumers;
        let mut out = Out::default();
        self.server.handle_frame(self.now, conn, frame, &mut out);
        self.summary.refused += drain(&mut self.server, &mut out, self.stalled);
        // Property 14: the application is handed the bytes that arrived.
        let carried = wire::parse(frame).ok().and_then(|m| match m.body {
            Body::Write { data } => Some((m.session, m.sn, workload::hash(data), 0)),
            Body::Read { len, request } => Some((m.session, m.sn, workload::hash(request), len)),
            _ => None,
        });
        for h in &out.heard {
            if let Heard::Delivered(d) = h {
                assert_eq!(
                    Some((d.session, d.sn, d.hash, d.read_len)),
                    carried,
                    "delivered other bytes than the frame carried"
                );
            }
        }
        let refused = out.rejected(conn);
        if let (Some(h), Some(before)) = (stray, before) {
            let s = &self.server;
            let after = (s.session(h.session), s.session_count(), s.tomb_count());
            assert_eq!(
                after, before,
                "a Hello of session {:#x} with token {:#x} (not the owner's) changed the server",
                h.session, h.token
            );
            let reject = out.frames.iter().find_map(|(c, f)| {
                let m = wire::parse(f).ok().filter(|_| *c == conn)?;
                match m.body {
                    Body::Reject { reason, .. } => Some((reason, m.session, m.epoch)),
                    _ => None,
                }
            });
            let owned = (RejectReason::SessionOwned, h.session, h.epoch);
            let table_full = conns_full && refused == Some((RejectReason::SessionTableFull, 4));
            // Its transport refuses frames: the rejection waits (or its
            // connection was closed as a slow consumer). Or the connection
            // was refused or rejected before: the Hello is not processed.
            let stalled = self.stalled & 1 << (conn.slot() % 64) != 0;
            let stats = self.server.stats();
            let unprocessed = stats.after_close + stats.slow_consumers > unprocessed_before;
            assert!(
                reject == Some(owned) || table_full || stalled || unprocessed,
                "a Hello of session {:#x} with token {:#x} (not the owner's) got {reject:?}",
                h.session,
                h.token
            );
            if reject == Some(owned) && from.is_none() {
                self.summary.stray_refusals += 1;
            }
        }
        let owned = refused.is_some_and(|(reason, _)| reason == RejectReason::SessionOwned);
        assert!(
            hello.is_some() || !owned,
            "SessionOwned answered a frame that is no Hello"
        );
        if let Some(h) = hello {
            if owned {
                assert!(
                    owner.is_some_and(|t| t != h.token),
                    "a Hello of session {:#x} with its owner's token {:#x} was refused SessionOwned",
                    h.session,
                    h.token
                );
                if from.is_some() {
                    self.summary.owned_refusals += 1;
                }
            }
            self.check_opened(conn, &h, owner, &out);
        }
        let probe = wire::parse(frame)
            .ok()
            .filter(|m| m.body == Body::Probe && refused.is_none());
        if let Some(m) = probe.filter(|_| self.server.stats().probes > probes) {
            // Answered: every sn below the probe's arrived or is a hole.
            let top = self.server.session(m.session).map_or(0, |s| s.top);
            assert!(
                top >= m.sn,
                "a probe of sn {} left session {:#x} at top {top}",
                m.sn,
                m.session
            );
        }
        // A client that acted on a forged or damaged frame (an ack no
        // server sent moves its window past the server's) may run ahead.
        if let Some(i) = from.filter(|&i| !self.peers[i].forged && !self.peers[i].tainted) {
            assert!(
                refused.is_none_or(|(reason, _)| reason != RejectReason::TooFar),
                "client {i}'s own frame refused as TooFar: {refused:?}"
            );
        }
        let own = from.filter(|_| intact);
        self.absorb(out, must_not_deliver, own);
    }

    /// Properties 8 and 11 for a `Hello` that opened its session.
    pub(super) fn check_opened(&mut self, conn: ConnId, h: &Hello, owner: Option<u64>, out: &Out) {
        for e in out.events() {
            let ServerEvent::SessionOpened {
                session,
                conn: c,
                known,
                resume_from,
                ..
            } = *e
            else {
                continue;
            };
            if c != conn || session != h.session {
                continue;
            }
            assert!(
                owner.is_none_or(|t| t == h.token),
                "session {session:#x} of token {:#x} opened for token {:#x}",
                owner.unwrap_or(0),
                h.token
            );
            self.owners.insert(session, h.token);
            assert!(
                h.base_sn <= resume_from && resume_from <= h.next_sn,
                "resume_from {resume_from} outside the Hello's [{}, {}]",
                h.base_sn,
                h.next_sn
            );
            assert!(
                known || resume_from == h.base_sn,
                "a new record resumes from {resume_from}, not base_sn {}",
                h.base_sn
            );
        }
    }

    /// Hands `frame` to client `i` and checks properties 8, 10 and 13.
    pub(super) fn client_frame(&mut self, i: usize, frame: &[u8]) {
        let p = &mut self.peers[i];
        let session = p.client.session();
        let live = matches!(
            p.client.state(),
            ClientState::Handshaking { .. } | ClientState::Established { .. }
        );
        let owned = wire::parse(frame).is_ok_and(|m| {
            m.session == session
                && m.epoch == p.client.epoch()
                && m.validate
                && matches!(
                    m.body,
                    Body::Reject {
                        reason: RejectReason::SessionOwned,
                        ..
                    }
                )
        });
        let established = p.client.stats().established;
        let read = p.client.handle_frame(self.now, frame);
        let read = read.map(|ReadData { sn, data }| (sn, data.to_vec()));
        if live && owned {
            assert_eq!(
                p.client.state(),
                ClientState::Failed(FailReason::SessionOwned { session }),
                "client {i} was told that another client owns its session"
            );
        }
        if p.client.stats().established > established && !p.tainted {
            let ClientState::Established { instance, .. } = p.client.state() else {
                panic!("client {i} established into {:?}", p.client.state());
            };
            let token = p.client.config().token;
            let owner = *self.established.entry((instance, session)).or_insert(token);
            assert_eq!(
                owner, token,
                "instance {instance} established session {session:#x} for two tokens"
            );
        }
        if let Some((sn, data)) = read {
            self.check_read(i, sn, &data);
        }
    }

    pub(super) fn assert_window_unmoved(&self, i: usize, before: &ClientStats, what: &str) {
        let after = self.peers[i].client.stats();
        assert_eq!(after.acked, before.acked, "{what} acknowledged sns");
        assert_eq!(
            after.not_replayed, before.not_replayed,
            "{what} gave sns up"
        );
        assert_eq!(after.established, before.established, "{what} established");
    }

    /// A frame that parses and claims a client's session did not come from
    /// that client.
    pub(super) fn mark_forged(&mut self, frame: &[u8]) {
        if let Ok(m) = wire::parse(frame) {
            for p in &mut self.peers {
                if m.session == p.client.session() {
                    p.forged = true;
                    p.tainted = true;
                }
            }
        }
    }

    /// Routes the server's output and checks what its application heard;
    /// `own` is the client whose intact frame the server took, if any.
    pub(super) fn absorb(&mut self, out: Out, must_not_deliver: Option<&str>, own: Option<usize>) {
        let instance = self.server_config.instance;
        for h in &out.heard {
            let e = match h {
                Heard::Delivered(d) => {
                    self.delivered_one(d, must_not_deliver, own);
                    continue;
                }
                Heard::Event(e) => e,
            };
            match *e {
                ServerEvent::SessionOpened { session, conn, .. } => {
                    self.bound.insert(conn, session);
                }
                ServerEvent::LiveLoss {
                    session,
                    ref missing,
                    ..
                } => {
                    self.summary.live_losses += 1;
                    let mine = self.peers.iter().filter(|p| p.client.session() == session);
                    if mine.clone().all(|p| !p.forged) {
                        let sent = mine.map(|p| p.client.sent_sn()).max().unwrap_or(u64::MAX);
                        assert!(
                            missing.end <= sent,
                            "session {session:#x}: live loss of {missing:?}, only {sent} sent"
                        );
                    }
                }
                ServerEvent::Forgotten { session } => {
                    // Only now may the session start over.
                    self.forgotten_events += 1;
                    self.delivered.retain(|&(s, _)| s != session);
                    self.owners.remove(&session);
                    self.established.remove(&(instance, session));
                }
                _ => {}
            }
        }
        for conn in &out.closed {
            self.bound.remove(conn);
        }
        for (conn, frame) in out.frames {
            if let Some(p) = self.peers.iter_mut().find(|p| p.conn == Some(conn)) {
                p.inbox.push_back(frame);
            }
        }
    }

    /// Properties 4, 5, 6 and 14 for one delivery.
    fn delivered_one(&mut self, d: &Delivered, must_not_deliver: Option<&str>, own: Option<usize>) {
        let instance = self.server_config.instance;
        let (session, sn) = (d.session, d.sn);
        if let Some(what) = must_not_deliver {
            panic!("{what} was delivered: session {session:#x} sn {sn}");
        }
        assert!(
            self.delivered.insert((session, sn)),
            "session {session:#x} sn {sn} delivered twice by instance {instance}"
        );
        self.delivered_events += 1;
        self.summary.delivered += 1;
        let Some(i) = self.attribute(session, d.conn) else {
            return;
        };
        let p = &mut self.peers[i];
        assert!(
            p.forged || sn < p.client.next_sn(),
            "client {i}: session {session:#x} sn {sn} delivered, only {} submitted",
            p.client.next_sn()
        );
        p.delivered.insert(sn);
        if own == Some(i) && !p.forged {
            let s = &p.submitted[sn as usize];
            assert!(
                (d.op, d.hash, d.read_len) == (s.op, s.hash, s.read_len),
                "client {i}: sn {sn} delivered with other bytes than it submitted"
            );
            self.summary.bytes_checked += 1;
        }
    }

    /// Property 13 for the read data client `i` returned for `sn`.
    pub(super) fn check_read(&mut self, i: usize, sn: u64, data: &[u8]) {
        let p = &mut self.peers[i];
        let s = p
            .submitted
            .get(sn as usize)
            .filter(|s| s.op == RequestOp::Read);
        let Some(s) = s else {
            panic!("client {i}: read data for sn {sn}, which is no read it submitted");
        };
        assert_eq!(
            data.len(),
            s.read_len as usize,
            "client {i}: sn {sn} read data length"
        );
        assert!(
            p.reads.insert(sn),
            "client {i}: read data for sn {sn} twice"
        );
        self.summary.reads += 1;
        if !p.tainted {
            let mut expected = vec![0u8; data.len()];
            answer(p.client.session(), sn, &s.request, &mut expected);
            assert!(
                data == expected,
                "client {i}: sn {sn} read data is not what the server's application answered"
            );
        }
    }

    pub(super) fn check(&mut self) {
        for (i, p) in self.peers.iter_mut().enumerate() {
            check_client(&p.client);
            let state = p.client.state();
            match p.terminal {
                Some(t) => assert_eq!(state, t, "client {i} left its final state"),
                None if p.client.is_terminal() => p.terminal = Some(state),
                None => {}
            }
            assert_eq!(
                p.reads.len() as u64,
                p.client.stats().reads_answered,
                "client {i}: reads whose data was returned vs reads_answered"
            );
            if !p.tainted {
                let base = p.client.base_sn();
                let delivered = p.delivered.range(..base).count() as u64;
                let acked = p.client.stats().acked;
                assert!(
                    acked <= delivered,
                    "client {i}: {acked} sns acknowledged, only {delivered} of its own below base_sn {base} delivered"
                );
            }
        }
        let s = &self.server;
        let max_sessions = self.server_config.max_sessions.clamp(1, SESSION_TABLE);
        assert_eq!(s.max_sessions(), max_sessions, "max_sessions");
        assert!(
            s.session_count() <= max_sessions,
            "{} sessions, at most {max_sessions}",
            s.session_count()
        );
        assert!(s.conn_count() <= CONNS, "{} connections", s.conn_count());
        assert!(s.tomb_count() <= TOMBS, "{} tombstones", s.tomb_count());
        let window = s.window();
        assert!(
            (u64::from(MIN_WINDOW)..=Server::WINDOW).contains(&window),
            "server window {window}"
        );
        for p in &self.peers {
            if let Some(info) = s.session(p.client.session()) {
                assert!((1..=window).contains(&info.window), "{info:?}");
                assert!(info.cumulative <= info.top, "{info:?}");
            }
        }
        assert_eq!(
            s.stats().delivered,
            self.delivered_events,
            "server delivered count vs its deliveries"
        );
        assert_eq!(
            s.stats().tombs_forgotten,
            self.forgotten_events,
            "server forgotten count vs its Forgotten events"
        );
    }
}

pub(super) fn check_client(c: &Client) {
    let (base, sent, next) = (c.base_sn(), c.sent_sn(), c.next_sn());
    let s = c.stats();
    assert!(
        base <= sent && sent <= next,
        "base_sn {base}, sent_sn {sent}, next_sn {next}"
    );
    // Beyond the unacknowledged sns, the session holds the acknowledged
    // reads whose data has not come (and what follows them).
    let held = c.outstanding() as u64 - (next - base).min(c.outstanding() as u64);
    assert!(c.outstanding() as u64 >= next - base, "outstanding");
    assert!(
        (held == 0) == (c.reads_unanswered() == 0) && c.reads_unanswered() as u64 <= held,
        "{held} acknowledged sns held, {} reads unanswered",
        c.reads_unanswered()
    );
    assert!(c.outstanding() <= WINDOW, "outstanding {}", c.outstanding());
    let own = u64::from(c.config().window).clamp(1, WINDOW as u64);
    assert!(
        sent - base <= own,
        "{} sns in flight, own window {own}",
        sent - base
    );
    let agreed = c.agreed_window();
    assert!(
        (1..=own).contains(&agreed),
        "agreed window {agreed}, own {own}"
    );
    assert_eq!(s.submitted, next, "submitted vs next_sn");
    assert_eq!(s.sent, sent, "first transmissions vs sent_sn");
    assert_eq!(
        s.acked + s.not_replayed,
        base,
        "every sn below base_sn was acknowledged or given up, once: {s:?}"
    );
    assert_eq!(u64::from(c.epoch()), s.connects, "epoch vs connects");
    assert!(s.established <= s.connects, "{s:?}");
    assert!(s.disconnects <= s.connects, "{s:?}");
    assert!(s.rejects + s.protocol_errors <= s.disconnects, "{s:?}");
    assert!(s.server_restarts <= s.established, "{s:?}");
    assert!(
        s.reads_answered + s.stray_read_data <= s.completions,
        "every read's data comes with a completion: {s:?}"
    );
    if !c.config().replay {
        assert_eq!(s.replayed, 0, "replay is off: {s:?}");
        assert_eq!(s.possible_duplicates, 0, "replay is off: {s:?}");
    } else {
        assert_eq!(s.not_replayed, 0, "replay is on: {s:?}");
    }
}
