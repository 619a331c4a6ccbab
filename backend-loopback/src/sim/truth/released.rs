//! What each client released and was told: acknowledgements checked
//! against the deliveries as they come, and the client events the
//! verdict judges.

use super::*;

impl Truth {
    /// Client `client` released every sn below `upto` as acknowledged.
    fn release(&mut self, i: usize, upto: u64) {
        let from = self.clients[i].acked_upto;
        if upto <= from {
            return;
        }
        let session = self.clients[i].spec.session;
        for sn in from..upto {
            let c = &self.clients[i];
            // An sn delivered only in commits a journal lost may be
            // released by an ack its instance sent before the loss: it is
            // judged at the end, named lost or not (see the verdict).
            if c.flags(sn) & (GIVEN_UP | TAIL_LOST) != 0 || c.delivered(sn) > 0 {
                continue;
            }
            if self.delivered_to_others(i, session, sn) {
                self.findings.add(
                    Invariant::AckedFromOthersFrames,
                    Some(i),
                    session,
                    Some(sn),
                    || {
                        "acknowledged, but only another peer's frame with this sn was delivered"
                            .into()
                    },
                );
            } else {
                self.findings.add(
                    Invariant::AckedUndelivered,
                    Some(i),
                    session,
                    Some(sn),
                    || "acknowledged, but no server instance delivered it".into(),
                );
            }
        }
        self.clients[i].acked_upto = upto;
    }

    /// What client `client`'s application saw.
    pub fn client_event(&mut self, client: usize, e: &ClientEvent) {
        let session = self.clients[client].spec.session;
        match e {
            ClientEvent::Connecting { epoch, .. } => {
                let c = &mut self.clients[client];
                c.seen[0] += 1;
                c.epoch = *epoch;
                c.established = None;
            }
            ClientEvent::Established {
                epoch,
                known,
                resume_from,
                ..
            } => {
                let c = &mut self.clients[client];
                c.seen[1] += 1;
                c.handshakes += 1;
                c.refused = None;
                for sn in core::mem::take(&mut c.cut_unseen) {
                    c.flag(sn..sn + 1, TAIL_DUE);
                }
                if *epoch == c.epoch {
                    c.established = Some(*epoch);
                }
                // Every sn below resume_from was delivered, known or not.
                let _ = known;
                self.release(client, *resume_from);
            }
            ClientEvent::Acked { upto } => self.release(client, *upto),
            ClientEvent::ServerRestarted { unconfirmed, .. } => {
                self.clients[client].flag(unconfirmed.clone(), ANNOUNCED);
            }
            ClientEvent::NotReplayed { range } => {
                let Truth {
                    clients, findings, ..
                } = self;
                let c = &mut clients[client];
                c.given_up += range.end - range.start;
                if !range.is_empty() {
                    c.grow(range.end - 1);
                }
                for sn in range.clone() {
                    if c.flags(sn) & GIVEN_UP != 0 {
                        findings.add(
                            Invariant::ReportedTwice,
                            Some(client),
                            session,
                            Some(sn),
                            || "given up (NotReplayed) more than once".into(),
                        );
                    }
                    c.flags[sn as usize] |= GIVEN_UP;
                }
            }
            ClientEvent::StateLost { unknown, .. } => {
                let c = &mut self.clients[client];
                c.state_lost += unknown.end - unknown.start;
                c.flag(unknown.clone(), STATE_LOST);
            }
            ClientEvent::Failed(_) => self.clients[client].failed = true,
            ClientEvent::Disconnected { cause, .. } => {
                let c = &mut self.clients[client];
                c.seen[2] += 1;
                c.refused = match *cause {
                    DisconnectCause::Rejected { reason, detail }
                        if matches!(reason, RejectReason::BadHandshake | RejectReason::Rewound) =>
                    {
                        let n = c.refused.map_or(0, |(_, _, n)| n);
                        Some((reason, detail, n + 1))
                    }
                    _ => None,
                };
            }
            ClientEvent::Closed => self.clients[client].closed = true,
            // What later core versions add.
            _ => {}
        }
    }
}
