//! What a session's events leave for the client's loop: its counters,
//! the reads it checked, and the lines for the audit and `--verbose`.

use super::*;

/// What a session's events leave for the loop.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) session: u64,
    pub(super) acked: u64,
    pub(super) announced: u64,
    /// Sns acknowledged earlier that a server can no longer vouch for.
    pub(super) state_lost: u64,
    /// Reads answered since the outbox last took them.
    pub(super) answered: Vec<u64>,
    pub(super) not_replayed: u64,
    pub(super) restarts: u64,
    pub(super) reads_ok: u64,
    pub(super) reads_corrupt: u64,
    /// An `Established` with no ack progress since.
    pub(super) awaiting_first_ack: bool,
    /// A connection ended since the loop last looked.
    pub(super) disconnected: bool,
    pub(super) failed: Option<FailReason>,
    /// Why the last connection ended (or the last attempt failed).
    pub(super) last_cause: Option<iomsg_core::session::DisconnectCause>,
    /// Event lines for the audit and `--verbose`.
    pub(super) lines: Vec<String>,
    /// The library's metrics and tracing of this session (see
    /// `iomsg_ucx::observe`), and the time of the poll under way.
    pub(super) observer: iomsg_endpoint::observe::ClientObserver,
    pub(super) now: iomsg_core::time::Instant,
}

impl ClientHandler for Seen {
    fn event(&mut self, event: ClientEvent) {
        self.observer.on_event(&event, self.now);
        let s = self.session;
        let line = match event {
            ClientEvent::Acked { upto } => {
                self.acked = upto;
                if !std::mem::take(&mut self.awaiting_first_ack) {
                    return;
                }
                format!("first_ack {s:016x} {upto}")
            }
            ClientEvent::Established {
                epoch,
                instance,
                known,
                resume_from,
            } => {
                self.awaiting_first_ack = true;
                format!("established {s:016x} epoch {epoch} instance {instance:016x} known {known} resume {resume_from}")
            }
            ClientEvent::ServerRestarted {
                instance,
                unconfirmed,
                ..
            } => {
                self.restarts += 1;
                self.announced += unconfirmed.end - unconfirmed.start;
                format!(
                    "restarted {s:016x} {} {} instance {instance:016x}",
                    unconfirmed.start, unconfirmed.end
                )
            }
            ClientEvent::StateLost { instance, unknown } => {
                // Always said: acknowledged messages may be gone.
                eprintln!(
                    "iomsg client: session {s:016x}: server instance {instance:016x} lost \
                     state it had acknowledged (its journal went back in time): sns {}..{} \
                     were acknowledged, and their delivery is now unknown",
                    unknown.start, unknown.end
                );
                self.state_lost += unknown.end - unknown.start;
                format!(
                    "state_lost {s:016x} {} {} instance {instance:016x}",
                    unknown.start, unknown.end
                )
            }
            ClientEvent::NotReplayed { range } => {
                self.not_replayed += range.end - range.start;
                format!("not_replayed {s:016x} {} {}", range.start, range.end)
            }
            ClientEvent::Disconnected { epoch, cause } => {
                self.disconnected = true;
                self.last_cause = Some(cause);
                format!("disconnected {s:016x} epoch {epoch} {cause:?}")
            }
            ClientEvent::Failed(reason) => {
                self.failed = Some(reason);
                format!("failed {s:016x} {reason}")
            }
            ClientEvent::Connecting { epoch, attempt } => {
                format!("connecting {s:016x} epoch {epoch} attempt {attempt}")
            }
            ClientEvent::Closed => return,
            other => format!("{other:?}"),
        };
        self.lines.push(line);
    }

    fn read_data(&mut self, data: ReadData<'_>) {
        self.answered.push(data.sn);
        if workload::matches(self.session, data.sn, data.data) {
            self.reads_ok += 1;
        } else {
            self.reads_corrupt += 1;
            self.lines.push(format!(
                "read_corrupt {:016x} {} {}",
                self.session,
                data.sn,
                data.data.len()
            ));
        }
    }
}
