//! The `tracing` events of the observers (feature `tracing`): connection
//! life at info, losses at warn, the rest at debug.

use core::fmt;
use core::ops::Range;

use iomsg_core::session::{ClientEvent, ServerEvent};
use tracing::field::display;
use tracing::{debug, info, warn};

/// A session id or server instance as 16 hex digits.
struct Hex(u64);

impl fmt::Display for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// How many sns `range` holds.
fn sns(range: &Range<u64>) -> u64 {
    range.end.saturating_sub(range.start)
}

/// Traces one client event (the connection's life, losses, replays).
pub(super) fn client_event(event: &ClientEvent) {
    const T: &str = "iomsg_endpoint::observe::client";
    match event {
        ClientEvent::Connecting { epoch, attempt, .. } => {
            info!(target: T, epoch, attempt, "connecting");
        }
        ClientEvent::Established {
            epoch,
            instance,
            known,
            resume_from,
            ..
        } => {
            let instance = Hex(*instance);
            info!(target: T, epoch, %instance, known, resume_from, "established");
        }
        ClientEvent::ServerRestarted {
            previous,
            instance,
            unconfirmed,
            ..
        } => {
            let previous = previous.map(|p| display(Hex(p)));
            let instance = Hex(*instance);
            let (start, end) = (unconfirmed.start, unconfirmed.end);
            let what = "server restarted: unconfirmed sns replayed or given up";
            info!(target: T, previous, %instance, start, end, "{what}");
        }
        ClientEvent::NotReplayed { range } => {
            let (start, end, sns) = (range.start, range.end, sns(range));
            warn!(target: T, start, end, sns, "not replayed: sns given up");
        }
        ClientEvent::Disconnected { epoch, cause, .. } => {
            info!(target: T, epoch, %cause, "disconnected");
        }
        ClientEvent::Failed(reason) => warn!(target: T, %reason, "failed"),
        ClientEvent::Closed => info!(target: T, "closed"),
        _ => {}
    }
}

/// Traces one server event (sessions, losses, rejections).
pub(super) fn server_event(event: &ServerEvent) {
    match event {
        ServerEvent::SessionOpened { .. }
        | ServerEvent::Closed { .. }
        | ServerEvent::Disconnected { .. }
        | ServerEvent::HandshakeTimeout { .. }
        | ServerEvent::Forgotten { .. } => server_life(event),
        ServerEvent::LiveLoss { .. }
        | ServerEvent::LostLive { .. }
        | ServerEvent::LostInFlight { .. }
        | ServerEvent::Rejected { .. }
        | ServerEvent::SlowConsumer { .. } => server_trouble(event),
        _ => server_detail(event),
    }
}

const S: &str = "iomsg_endpoint::observe::server";

/// Sessions and connections coming and going: info.
fn server_life(event: &ServerEvent) {
    match event {
        ServerEvent::SessionOpened {
            session,
            epoch,
            conn,
            known,
            resume_from,
            ..
        } => {
            let session = Hex(*session);
            info!(target: S, %session, epoch, %conn, known, resume_from, "session opened");
        }
        ServerEvent::Closed { session } => info!(target: S, session = %Hex(*session), "closed"),
        ServerEvent::Disconnected { conn, reason } => {
            info!(target: S, %conn, %reason, "disconnected");
        }
        ServerEvent::HandshakeTimeout { conn, timeout } => {
            info!(target: S, %conn, ?timeout, "handshake timeout");
        }
        ServerEvent::Forgotten { session } => {
            info!(target: S, session = %Hex(*session), "forgotten: its sns may be delivered again");
        }
        _ => {}
    }
}

/// Losses and refusals: warn.
fn server_trouble(event: &ServerEvent) {
    let loss = |session: u64, range: &Range<u64>, what: &str| {
        let (start, end, sns) = (range.start, range.end, sns(range));
        warn!(target: S, session = %Hex(session), start, end, sns, "{what}");
    };
    match event {
        ServerEvent::LiveLoss {
            session, missing, ..
        } => loss(
            *session,
            missing,
            "live gap: sns jumped over on a live connection",
        ),
        ServerEvent::LostLive { session, range } => {
            loss(*session, range, "lost on a live connection");
        }
        ServerEvent::LostInFlight { session, range } => {
            loss(
                *session,
                range,
                "lost in flight at a disconnect, not replayed",
            );
        }
        ServerEvent::Rejected {
            conn,
            reason,
            detail,
        } => warn!(target: S, %conn, %reason, detail, "rejected"),
        ServerEvent::SlowConsumer {
            conn,
            session,
            dropped,
        } => {
            let session = session.map(|s| display(Hex(s)));
            warn!(target: S, %conn, session, dropped, "slow consumer: closed");
        }
        _ => {}
    }
}

/// Everything else: debug.
fn server_detail(event: &ServerEvent) {
    match event {
        ServerEvent::Recovered { session, sn } => {
            debug!(target: S, session = %Hex(*session), sn, "recovered");
        }
        ServerEvent::Duplicate { session, sn } => {
            debug!(target: S, session = %Hex(*session), sn, "duplicate");
        }
        ServerEvent::Stale { session, epoch, sn } => {
            debug!(target: S, session = %Hex(*session), epoch, sn, "stale");
        }
        ServerEvent::Evicted { session } => {
            debug!(target: S, session = %Hex(*session), "evicted");
        }
        _ => {}
    }
}
