//! The sessions' outboxes around the client's loop: begun, kept before
//! and after each poll, closed at the end.

use super::*;

/// Keeps the outboxes once the sessions closed: synced, and finished
/// where everything was acknowledged and `Bye` said (the next run starts
/// a new session there rather than resume this one).
pub(super) fn close_outboxes<B: Dial>(peers: &mut [Peer<B>]) -> Result<(), String> {
    keep_outboxes(peers)?;
    for p in peers {
        let Some(o) = p.outbox.as_mut() else {
            continue;
        };
        o.sync_now()?;
        let s = p.client.session();
        if s.state() == ClientState::Closed && s.outstanding() == 0 {
            o.finished()?;
        }
    }
    Ok(())
}

/// Keeps what was submitted before a poll can send it: each outbox
/// written, then the audit records flushed, so that a message the poll
/// gets acknowledged (and the outbox then releases) always has its
/// record.
pub(super) fn keep_before_sending<B: Dial>(
    peers: &mut [Peer<B>],
    audit: &mut Option<Audit>,
) -> Result<(), String> {
    for o in peers.iter_mut().filter_map(|p| p.outbox.as_mut()) {
        o.write()?;
    }
    if let Some(a) = audit.as_mut() {
        a.flush()?;
    }
    Ok(())
}

/// Starts the outbox of a new session (its identity first), or resubmits
/// the messages a resumed one kept, in sn order and with their old sns,
/// recorded again in the audit (identical records); then keeps the point.
pub(super) fn begin_outbox<B: Dial>(
    stored: &Stored,
    p: &mut Peer<B>,
    audit: &mut Option<Audit>,
) -> Result<(), String> {
    let session = p.seen.session;
    let token = p.client.session().config().token;
    let Some(o) = p.outbox.as_mut() else {
        return Ok(());
    };
    if let Some(t) = &stored.torn {
        println!("outbox {}: {t}", o.path().display());
    }
    if stored.finished {
        o.start_over(session, token)?;
        println!(
            "outbox {}: its session {:016x} finished in an earlier run (everything \
             acknowledged); new session {session:016x}",
            o.path().display(),
            stored.identity.map_or(0, |(id, _)| id)
        );
    } else if stored.identity.is_none() {
        o.identity(session, token);
        println!("outbox {}: new session {session:016x}", o.path().display());
    } else {
        let client = &mut p.client;
        stored.resubmit(
            |msg| client.submit(msg),
            |sn, data| {
                if let Some(a) = audit.as_mut() {
                    a.record(Record {
                        session,
                        sn,
                        hash: workload::hash(data),
                    });
                }
            },
        )?;
        // Reads whose answers the crashed process handed over: not again.
        for &sn in &stored.answered {
            client.settle_read(sn);
        }
        println!("{}", stored.describe(o.path(), session));
    }
    o.note(p.client.session().resume_point());
    o.write()
}

/// Keeps each session's point (releases, server record, epoch
/// reservation) and the reads answered after a poll; syncs and compacts
/// when due.
pub(super) fn keep_outboxes<B: Dial>(peers: &mut [Peer<B>]) -> Result<(), String> {
    for p in peers {
        let Some(o) = p.outbox.as_mut() else {
            continue;
        };
        for sn in p.seen.answered.drain(..) {
            o.answered(sn);
        }
        o.note(p.client.session().resume_point());
        o.write()?;
        o.tick()?;
        if o.compact_if_large()? {
            println!("outbox compacted to {} bytes", o.len());
        }
    }
    Ok(())
}
