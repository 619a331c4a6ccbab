//! The stray peer: a raw client port driving hand-built frames for a
//! session that belongs to another client.

use core::time::Duration;

use iomsg_core::rng::mix64;
use iomsg_core::transport::{ConnId, Connector, Event, RxToken, Transport};
use iomsg_core::wire::{self, Body, IoMsg};
use iomsg_core::{workload, Instant};

use super::scenario::StrayPeer;
use crate::network::ClientPort;

/// Builds one of the stray peer's frames with today's wire API. This is
/// the only place that builds them: when the core adds the per-client
/// `token` to `ClientConfig` and to the `Hello` body, the stray's `Hello`
/// gets a token of its own here (never the victim's).
pub(crate) fn stray_frame(session: u64, epoch: u32, sn: u64, body: Body<'_>) -> Vec<u8> {
    let msg = IoMsg {
        session,
        epoch,
        sn,
        ack: 0,
        // Hello carries state: always checksummed, as a real client does.
        validate: matches!(body, Body::Hello { .. }),
        stream: false,
        body,
    };
    let mut buf = vec![0u8; msg.buffer_len()];
    match msg.emit(&mut buf) {
        Ok(n) => buf.truncate(n),
        Err(_) => buf.clear(),
    }
    buf
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not started yet.
    Waiting,
    /// Connection asked for; `Hello` not sent.
    Connecting,
    /// `Hello` sent; waiting for the `Welcome`.
    Hello,
    /// Finished (sent its writes, was refused, or gave up).
    Done,
}

/// How long the stray waits for the server before it gives up.
const PATIENCE: Duration = Duration::from_millis(5);

pub(crate) struct Stray {
    spec: StrayPeer,
    session: u64,
    state: State,
    port: Option<ClientPort>,
    conn: Option<ConnId>,
    epoch: u32,
    deadline: Instant,
    /// Writes it sent.
    pub(crate) writes_sent: u32,
}

impl Stray {
    pub(crate) fn new(spec: StrayPeer, session: u64) -> Stray {
        Stray {
            spec,
            session,
            state: State::Waiting,
            port: None,
            conn: None,
            epoch: 0,
            deadline: Instant::ZERO,
            writes_sent: 0,
        }
    }

    pub(crate) fn victim(&self) -> usize {
        self.spec.victim
    }

    /// Whether it is due to connect.
    pub(crate) fn due(&self, now: Instant) -> bool {
        self.state == State::Waiting && now >= Instant::ZERO + self.spec.at
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Starts: connects over `port`.
    pub(crate) fn start(&mut self, now: Instant, mut port: ClientPort) {
        match port.connect(now) {
            Ok(conn) => {
                self.conn = Some(conn);
                self.state = State::Connecting;
                self.deadline = now + PATIENCE;
            }
            Err(_) => self.state = State::Done,
        }
        self.port = Some(port);
    }

    /// When it must be polled next.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Waiting => Some(Instant::ZERO + self.spec.at),
            State::Connecting | State::Hello => Some(self.deadline),
            State::Done => None,
        }
    }

    /// Does what it can at `now`. `victim_epoch` and `victim_next_sn` are
    /// the victim's current epoch and next sn. Returns whether anything
    /// happened.
    pub(crate) fn poll(&mut self, now: Instant, victim_epoch: u32, victim_next_sn: u64) -> bool {
        let Some(port) = self.port.as_mut() else {
            return false;
        };
        let mut progress = false;
        loop {
            // The Welcome's resume_from, read where the port holds it.
            let e = match port.poll(now) {
                None => break,
                Some(Event::Received { conn, frame }) => {
                    let welcome = frame.consume(|bytes| match wire::parse(bytes) {
                        Ok(IoMsg {
                            body: Body::Welcome { resume_from, .. },
                            ..
                        }) => Some(resume_from),
                        _ => None,
                    });
                    Event::Received {
                        conn,
                        frame: welcome,
                    }
                }
                Some(Event::Connected { conn }) => Event::Connected { conn },
                Some(Event::Accepted { conn }) => Event::Accepted { conn },
                Some(Event::Disconnected { conn, reason }) => Event::Disconnected { conn, reason },
                Some(_) => continue,
            };
            progress = true;
            match e {
                Event::Connected { conn } if Some(conn) == self.conn => {
                    self.epoch = victim_epoch.saturating_add(1);
                    let next_sn = victim_next_sn.saturating_add(self.spec.ahead);
                    // It does not know the owner's token.
                    let hello = Body::Hello {
                        base_sn: 0,
                        next_sn,
                        token: mix64(self.session ^ 0x0057_24A7),
                        window: 64,
                        replay: true,
                    };
                    let frame = stray_frame(self.session, self.epoch, 0, hello);
                    let _ = port.send_frame(now, conn, &frame);
                    self.state = State::Hello;
                }
                Event::Received {
                    conn,
                    frame: welcome,
                } if Some(conn) == self.conn => {
                    if let (Some(from), State::Hello) = (welcome, self.state) {
                        let mut data = [0u8; 64];
                        for sn in from..from.saturating_add(u64::from(self.spec.writes)) {
                            workload::fill(self.session, sn, &mut data);
                            let frame = stray_frame(
                                self.session,
                                self.epoch,
                                sn,
                                Body::Write { data: &data },
                            );
                            let _ = port.send_frame(now, conn, &frame);
                            self.writes_sent += 1;
                        }
                        if self.spec.bye {
                            let frame = stray_frame(self.session, self.epoch, 0, Body::Bye);
                            let _ = port.send_frame(now, conn, &frame);
                        }
                    }
                    port.close(now, conn);
                    self.conn = None;
                    self.state = State::Done;
                }
                Event::Disconnected { conn, .. } if Some(conn) == self.conn => {
                    self.conn = None;
                    self.state = State::Done;
                }
                _ => {}
            }
        }
        if self.state != State::Done && now >= self.deadline {
            self.stop(now);
            progress = true;
        }
        progress
    }

    /// Gives up: closes its connection.
    pub(crate) fn stop(&mut self, now: Instant) {
        if let (Some(port), Some(conn)) = (self.port.as_mut(), self.conn.take()) {
            port.close(now, conn);
        }
        self.state = State::Done;
    }
}
