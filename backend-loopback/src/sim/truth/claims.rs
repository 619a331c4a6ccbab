//! The servers' claims about sessions, and what is recorded at the end
//! of a run.

use super::*;

impl Truth {
    /// A server's claim about a session's sns (`Delivered` goes to
    /// [`delivered`](Self::delivered)). Applies to the clients of that
    /// session at that server.
    pub fn server_event(&mut self, server: u16, e: &ServerEvent) {
        let (session, range, flag) = match e {
            ServerEvent::LiveLoss {
                session, missing, ..
            } => (*session, missing.clone(), LIVE_CLAIM),
            ServerEvent::LostLive { session, range } => (*session, range.clone(), LOST_LIVE_CLAIM),
            ServerEvent::LostInFlight { session, range } => {
                (*session, range.clone(), LOST_IN_FLIGHT_CLAIM)
            }
            _ => return,
        };
        let mut clients = self.by_session.get(&session).cloned().unwrap_or_default();
        if let Some(&owner) = self.owners.get(&(server, session)) {
            // Clients that share a session id: the one that owns it there.
            clients.retain(|&i| i == owner);
        }
        for i in clients {
            if self.clients[i].spec.server != server {
                continue;
            }
            if flag == LOST_IN_FLIGHT_CLAIM {
                for sn in range.clone() {
                    if self.clients[i].flags(sn) & LIVE_CLAIM != 0 {
                        self.findings.add(
                            Invariant::LiveReclassified,
                            Some(i),
                            session,
                            Some(sn),
                            || "reported as a live loss, later as lost in flight".into(),
                        );
                    }
                }
            }
            self.clients[i].flag(range.clone(), flag);
        }
    }

    /// Server instance `generation` forgot `session`'s tombstone
    /// (`ServerEvent::Forgotten`): from then on it may deliver the
    /// session's sns again, from any peer's frames, as a new instance
    /// would; its client must have announced them first.
    pub fn forgotten(&mut self, generation: u32, session: u64) {
        self.forgotten.insert((generation, session));
    }

    /// Holes still open in a running server at the end: claimed lost on a
    /// live connection.
    pub fn open_holes(&mut self, client: usize, holes: &[Range<u64>]) {
        let spec = self.clients[client].spec;
        if self
            .owners
            .get(&(spec.server, spec.session))
            .is_some_and(|&owner| owner != client)
        {
            return;
        }
        for h in holes {
            self.clients[client].flag(h.clone(), OPEN_HOLE);
        }
    }

    /// Client `client` at the end: its oldest unacknowledged sn and the
    /// events its session dropped.
    ///
    /// `counted` is what the client's counters say it queued: `Connecting`,
    /// `Established` and `Disconnected` events (`connects`, `established`,
    /// `disconnects`); the events seen must match them.
    pub fn client_final(&mut self, client: usize, base_sn: u64, counted: [u64; 3]) {
        let c = &mut self.clients[client];
        c.final_base = Some(base_sn);
        c.counted = counted;
    }

    /// The run did not finish: why.
    pub fn not_finished(&mut self, why: String) {
        self.findings
            .add(Invariant::NotFinished, None, 0, None, move || why);
    }
}
