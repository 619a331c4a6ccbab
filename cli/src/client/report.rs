//! What `iomsg client` reports: each session's figures, why a session
//! did not finish, and the report on stdout, in the audit and in
//! `--report-json`.

use serde::Serialize;

use super::*;

/// One session's figures, for the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SessionReport {
    /// The server.
    pub server: String,
    /// The session id.
    pub session: String,
    /// Messages submitted.
    pub submitted: u64,
    /// Acknowledged (every sn below this).
    pub acked: u64,
    /// Frames sent again after reconnects.
    pub replayed: u64,
    /// Sns given up at disconnects (replay off).
    pub not_replayed: u64,
    /// Sns a restarted server may have processed twice (announced).
    pub announced_duplicates: u64,
    /// Sns acknowledged earlier whose delivery a server could no longer
    /// vouch for (its journal went back in time).
    pub state_lost: u64,
    /// Server restarts seen.
    pub server_restarts: u64,
    /// Connections lost.
    pub disconnects: u64,
    /// Handshakes completed.
    pub established: u64,
    /// Reads answered with the right bytes.
    pub reads_ok: u64,
    /// Reads answered with wrong bytes.
    pub reads_corrupt: u64,
    /// Why the session failed, if it did.
    pub failed: Option<String>,
    /// Why the session ended with messages unacknowledged though it did
    /// not fail (the run ended first), if it did.
    pub unfinished: Option<String>,
}

/// The client's report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClientReport {
    /// Seconds run.
    pub seconds: f64,
    /// Acknowledged operations per second.
    pub ops_per_second: f64,
    /// Bytes submitted per second (writes and reads; all acknowledged
    /// when `ok`).
    pub bytes_per_second: f64,
    /// Whether everything submitted was acknowledged, no read was
    /// corrupt and no session failed.
    pub ok: bool,
    /// Per server.
    pub sessions: Vec<SessionReport>,
}

/// The report from the sessions' figures.
pub(super) fn report<B: Dial>(
    peers: &[Peer<B>],
    seconds: f64,
    bytes_submitted: u64,
    drain: Duration,
) -> ClientReport {
    let mut report = ClientReport {
        seconds,
        ..ClientReport::default()
    };
    let mut all_acked = true;
    for p in peers {
        let st = p.client.session().stats();
        all_acked &= p.seen.acked == p.client.session().next_sn();
        report.sessions.push(SessionReport {
            server: p.addr.to_string(),
            session: format!("{:016x}", p.seen.session),
            submitted: st.submitted,
            acked: p.seen.acked,
            replayed: st.replayed,
            not_replayed: p.seen.not_replayed,
            announced_duplicates: p.seen.announced,
            state_lost: p.seen.state_lost,
            server_restarts: p.seen.restarts,
            disconnects: st.disconnects,
            established: st.established,
            reads_ok: p.seen.reads_ok,
            reads_corrupt: p.seen.reads_corrupt,
            failed: p.seen.failed.map(|f| f.to_string()),
            unfinished: unfinished(p, drain),
        });
    }
    let acked: u64 = report.sessions.iter().map(|s| s.acked).sum();
    report.ops_per_second = acked as f64 / seconds.max(1e-9);
    report.bytes_per_second = bytes_submitted as f64 / seconds.max(1e-9);
    report.ok = all_acked
        && report
            .sessions
            .iter()
            .all(|s| s.reads_corrupt == 0 && s.failed.is_none());
    report
}

/// Why a session that did not fail still holds unacknowledged messages
/// at the end: the run ended first (`--drain` after the last submission,
/// or a signal), with what its connections last did.
fn unfinished<B: Dial>(p: &Peer<B>, drain: Duration) -> Option<String> {
    let session = p.client.session();
    let missing = session.next_sn().checked_sub(p.seen.acked)?;
    if missing == 0 || p.seen.failed.is_some() {
        return None;
    }
    let mut why = format!(
        "{missing} messages unacknowledged when the run ended (--drain {} after the last \
         submission, or a signal)",
        iomsg_lab::common::human(drain)
    );
    let st = session.stats();
    match p.seen.last_cause {
        Some(cause) if st.established == 0 => {
            why += &format!(
                "; no connection was ever established: {} attempts, the last ended with {cause}; \
             a server that accepts the connection and never answers may speak another \
             transport (client and server need the same --transport)",
                st.connects
            )
        }
        Some(cause) => why += &format!("; the last connection ended with {cause}"),
        None => {}
    }
    Some(why)
}

/// Puts the report in the audit, on stdout and in `--report-json`.
pub(super) fn finish(
    job: &ClientJob,
    report: &ClientReport,
    audit: &mut Option<Audit>,
) -> Result<(), String> {
    if let Some(a) = audit.as_mut() {
        for s in &report.sessions {
            a.event(format_args!(
                "done {} submitted {} acked {} replayed {} not_replayed {} announced {} state_lost {}",
                s.session,
                s.submitted,
                s.acked,
                s.replayed,
                s.not_replayed,
                s.announced_duplicates,
                s.state_lost
            ));
        }
        a.flush()?;
    }
    for s in &report.sessions {
        if let Some(reason) = &s.failed {
            eprintln!(
                "iomsg client: session {} to {} failed: {reason}",
                s.session, s.server
            );
        }
        if let Some(why) = &s.unfinished {
            eprintln!(
                "iomsg client: session {} to {} did not finish: {why}",
                s.session, s.server
            );
        }
        println!(
            "done {} session {}: submitted={} acked={} replayed={} not_replayed={} restarts={} announced={} state_lost={} reads_corrupt={}{}",
            s.server,
            s.session,
            s.submitted,
            s.acked,
            s.replayed,
            s.not_replayed,
            s.server_restarts,
            s.announced_duplicates,
            s.state_lost,
            s.reads_corrupt,
            s.failed.as_ref().map_or(String::new(), |f| format!(" FAILED: {f}"))
        );
    }
    println!(
        "rate {:.0} ops/s, {:.1} MB/s over {:.2} s",
        report.ops_per_second,
        report.bytes_per_second / 1e6,
        report.seconds
    );
    if let Some(path) = &job.report {
        let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}
