//! A connection's life: the handshake's answer (`Welcome`), connecting,
//! losing a connection, and retrying or failing.

use super::*;

impl<const N: usize, S: AsRef<[u8]> + AsMut<[u8]>> ClientSession<N, S> {
    pub(super) fn handle_welcome(&mut self, now: Instant, welcome: Welcome) {
        let (base_sn, next_sn) = self.hello;
        let resume_from = welcome.resume_from;
        let in_range = base_sn <= resume_from && resume_from <= next_sn;
        // A record new to the server starts at base_sn.
        if !in_range || !(welcome.known || resume_from == base_sn) {
            let e = ProtocolError::BadResume {
                base_sn,
                resume_from,
                next_sn,
            };
            return self.protocol_error(now, e);
        }
        if welcome.window == 0 {
            return self.protocol_error(now, ProtocolError::ZeroWindow);
        }
        // Every sn below `resume_from` was handed to this record's
        // application: the server never answers past an sn it did not
        // deliver.
        let proven = self.judge_record(&welcome);
        let confirmed = resume_from;
        // The Welcome acknowledges what the last connection's acks had not
        // reached yet: said as any ack is, before what is given up.
        if self.ack_to(confirmed) > 0 {
            self.push_event(ClientEvent::Acked { upto: confirmed });
        }
        if self.config.replay {
            if !proven {
                self.stats.possible_duplicates += next_sn - confirmed;
            }
            // Frames sent early (after the Hello) are at or past next_sn.
            if confirmed < next_sn {
                self.tx_cursor = confirmed;
            }
        } else if confirmed < next_sn {
            self.stats.not_replayed += next_sn - confirmed;
            self.push_event(ClientEvent::NotReplayed {
                range: confirmed..next_sn,
            });
            self.give_up_to(next_sn);
        }
        self.schedule_reasks();
        self.establish(now, &welcome);
    }

    /// What the record that answered tells of what it holds: whether it
    /// is the one that answered the last `Welcome` and so has seen every
    /// frame sent so far (`proven`). Any other (a restart, an eviction, or
    /// a record whose own first Welcome was lost) may be missing what
    /// another one processed: what is past `resume_from` may arrive twice,
    /// and is announced (`ServerRestarted`). A record younger than what
    /// was acknowledged (its journal lost commits, or the session) says
    /// where its knowledge begins: what lies between was released as
    /// acknowledged and its fate is now unknown, named (`StateLost`) the
    /// first time this incarnation is met (every Welcome of it says so,
    /// in case the first was lost).
    fn judge_record(&mut self, welcome: &Welcome) -> bool {
        let (base_sn, next_sn) = self.hello;
        let (instance, incarnation) = (welcome.instance, welcome.incarnation);
        let (ack, confirmed) = (welcome.ack, welcome.resume_from);
        let previous = self.instance;
        let regressed = ack < base_sn && self.trusted != Some(incarnation);
        if regressed {
            self.stats.state_lost += base_sn - ack;
            self.push_event(ClientEvent::StateLost {
                instance,
                unknown: ack..base_sn,
            });
        }
        let proven = welcome.known && !regressed && self.trusted == Some(incarnation);
        let changed = previous.is_some_and(|p| p != instance);
        if !proven && (confirmed < next_sn || changed) {
            // Each sn past `confirmed` is named once: here when it is
            // replayed (it may arrive twice), in `NotReplayed` when it is
            // given up. A record that lost the session while the instance
            // stayed is told only by the latter with replay off.
            let unconfirmed = if self.config.replay {
                confirmed..next_sn
            } else {
                next_sn..next_sn
            };
            if changed || !unconfirmed.is_empty() {
                self.stats.server_restarts += 1;
                self.push_event(ClientEvent::ServerRestarted {
                    previous,
                    instance,
                    unconfirmed,
                });
            }
        }
        proven
    }

    /// The connection is established on `welcome`'s terms: its instance
    /// and incarnation trusted, the window agreed, the retry counters
    /// reset, and what went out unprobed noted.
    fn establish(&mut self, now: Instant, welcome: &Welcome) {
        let (_, next_sn) = self.hello;
        let instance = welcome.instance;
        self.instance = Some(instance);
        self.trusted = Some(welcome.incarnation);
        self.agreed = u64::from(welcome.window).min(self.own_window());
        self.attempt = 0;
        self.quick_retries = 0;
        self.failing_since = None;
        self.last_progress = now;
        self.last_probe = now;
        // Frames of this connection so far: the replay from `confirmed` is
        // still to go out; eager frames from next_sn on went out unprobed.
        self.probed_upto = self.tx_cursor.min(next_sn);
        self.state = ClientState::Established {
            instance,
            since: now,
        };
        self.stats.established += 1;
        self.push_event(ClientEvent::Established {
            epoch: self.epoch,
            instance,
            known: welcome.known,
            resume_from: welcome.resume_from,
        });
        self.check_close(now);
    }

    pub(super) fn begin_connect(&mut self, now: Instant) {
        let Some(epoch) = self.epoch.checked_add(1) else {
            return self.fail(FailReason::EpochExhausted);
        };
        self.epoch = epoch;
        let attempt = self.attempt + 1;
        self.hello_pending = false;
        self.bye_pending = false;
        self.probe_pending = false;
        self.state = ClientState::Connecting {
            attempt,
            deadline: now + self.config.connect_timeout,
        };
        self.action = Some(Action::Connect);
        self.stats.connects += 1;
        self.push_event(ClientEvent::Connecting { epoch, attempt });
    }

    pub(super) fn lose_connection(&mut self, now: Instant, cause: DisconnectCause, close: bool) {
        let last = self.final_failure(cause);
        self.refused = last.is_none()
            && matches!(self.state, ClientState::Connecting { .. })
            && matches!(
                cause,
                DisconnectCause::Transport(DisconnectReason::ConnectFailed(_))
            );
        if close {
            self.action = Some(Action::Close);
        }
        self.stats.disconnects += 1;
        self.hello_pending = false;
        self.bye_pending = false;
        self.probe_pending = false;
        self.push_event(ClientEvent::Disconnected {
            epoch: self.epoch,
            cause,
        });
        if let Some(reason) = last {
            return self.fail(reason);
        }
        self.state = ClientState::Disconnected { cause };
        self.schedule_retry(now, cause);
    }

    /// The failure that makes `cause` final, if it does: a refusal that
    /// every later attempt would meet again. Called before the state
    /// leaves the attempt that `cause` ended.
    pub(super) fn final_failure(&self, cause: DisconnectCause) -> Option<FailReason> {
        let session = self.config.session;
        // A client let in before has a session on the server, and a full
        // table frees as peers leave.
        let wait_for_room = self.config.retry_full_table || self.instance.is_some();
        let reason = match cause {
            DisconnectCause::Transport(DisconnectReason::Refused(cause)) => {
                FailReason::Refused { cause }
            }
            DisconnectCause::Transport(DisconnectReason::TableFull { size }) if !wait_for_room => {
                FailReason::TableFull { size, last: cause }
            }
            DisconnectCause::Rejected { reason, detail } => match reason {
                // Another client owns this session id, or this client
                // restarted it: retrying would only be refused again (or,
                // worse, take it from its owner).
                RejectReason::SessionOwned => FailReason::SessionOwned { session },
                RejectReason::Rewound => FailReason::Rewound {
                    session,
                    seen: detail,
                },
                RejectReason::StaleEpoch => FailReason::StaleEpoch {
                    session,
                    epoch: self.epoch,
                    seen: detail,
                },
                RejectReason::SessionTableFull if !wait_for_room => FailReason::TableFull {
                    size: detail,
                    last: cause,
                },
                RejectReason::Malformed => version_refused(detail)?,
                _ => return None,
            },
            // The server's first frame is of another version: how a
            // server that does not speak this one answers the Hello. (On
            // an established connection the server spoke this version.)
            DisconnectCause::Protocol(ProtocolError::Malformed(WireError::UnsupportedVersion(
                theirs,
            ))) if matches!(self.state, ClientState::Handshaking { .. }) => {
                FailReason::WireVersion {
                    ours: VERSION,
                    theirs: Some(theirs),
                }
            }
            _ => return None,
        };
        Some(reason)
    }

    pub(super) fn schedule_retry(&mut self, now: Instant, cause: DisconnectCause) {
        let refused = core::mem::take(&mut self.refused);
        if self.closing && self.window.is_empty() {
            self.state = ClientState::Closed;
            self.push_event(ClientEvent::Closed);
            return;
        }
        self.attempt += 1;
        let since = *self.failing_since.get_or_insert(now);
        let over = now.saturating_since(since);
        // Quick retries count neither as retries nor for the backoff.
        let counted = self.attempt.saturating_sub(self.quick_retries);
        if refused && self.quick_retries < self.config.refused_retries {
            // Refused at once: nothing listens yet. Try again shortly,
            // never later than the backoff would.
            self.quick_retries += 1;
            let step = self.config.backoff.delay(counted, &mut self.rng);
            let quick = self
                .config
                .backoff
                .jittered(self.config.refused_retry, &mut self.rng);
            self.state = ClientState::Backoff {
                until: now + quick.min(step),
            };
            return;
        }
        if counted > self.config.max_retries && over >= self.config.retry_for {
            return self.fail(FailReason::RetriesExceeded {
                attempts: self.attempt,
                over,
                last: cause,
            });
        }
        let delay = self.config.backoff.delay(counted, &mut self.rng);
        self.state = ClientState::Backoff { until: now + delay };
    }

    /// Gives up for good. The messages not acknowledged stay in the
    /// window ([`outstanding`](Self::outstanding), from
    /// [`base_sn`](Self::base_sn)): the `Failed` event stands for all of
    /// them.
    pub(super) fn fail(&mut self, reason: FailReason) {
        self.state = ClientState::Failed(reason);
        self.push_event(ClientEvent::Failed(reason));
    }
}
