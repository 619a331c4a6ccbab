#[test]
fn a_clean_run_counts_exactly_what_was_sent_and_taken() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let r = run(ClientOptions::default(), 1, 3000);
    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    let sent = r.sent.len() as u64;
    assert_eq!(sent, 3000);
    // Ground truth: the test sent 3000, one server instance took them all.
    assert_eq!(r.instances.len(), 1);
    assert_eq!(r.instances[0].messages.len() as u64, sent);
    assert_eq!(grew("iomsg_client_submitted_total"), sent);
    assert_eq!(grew("iomsg_client_acked_total"), sent);
    assert_eq!(grew("iomsg_server_delivered_total"), r.delivered());
    assert_eq!(grew("iomsg_server_delivered_total"), sent);
    assert_eq!(grew("iomsg_client_not_replayed_total"), 0);
    assert_eq!(grew("iomsg_client_replayed_total"), 0);
    assert_eq!(grew("iomsg_client_reconnects_total"), 0);
    assert_eq!(grew("iomsg_server_duplicates_total"), 0);
    assert_eq!(grew("iomsg_server_live_loss_sns_total"), 0);
    assert_eq!(grew("iomsg_server_in_flight_loss_sns_total"), 0);
    assert_eq!(grew("iomsg_server_sessions_opened_total"), 1);
    assert_eq!(
        grew("iomsg_server_sessions_opened_total"),
        r.instances[0].opened
    );
    assert_eq!(grew("iomsg_server_rejected_total"), 0);
    let handshakes = after.new_samples(&before, "iomsg_client_handshake_seconds");
    assert_eq!(handshakes.len(), 1, "{handshakes:?}");
    assert!(
        handshakes[0] > 0.0 && handshakes[0] < 10.0,
        "{handshakes:?}"
    );
    // One sample per acknowledged message: the window fits the ring.
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    assert_eq!(latencies.len() as u64, sent);
    assert!(latencies.iter().all(|&s| (0.0..30.0).contains(&s)));
}

#[test]
fn with_replay_off_and_restarts_the_counts_match_each_instances_record() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let r = run(ClientOptions::default().replay(false), 3, 2000);
    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    let sent = r.sent.len() as u64;
    assert_eq!(grew("iomsg_client_submitted_total"), sent);
    assert_eq!(grew("iomsg_server_delivered_total"), r.delivered());
    let opened: u64 = r.instances.iter().map(|t| t.opened).sum();
    assert_eq!(grew("iomsg_server_sessions_opened_total"), opened);
    let rejected: u64 = r.instances.iter().map(|t| t.rejected).sum();
    assert_eq!(grew("iomsg_server_rejected_total"), rejected);
    // Every sn ended: acknowledged (taken by some instance) or given up.
    let acked = grew("iomsg_client_acked_total");
    let given_up = grew("iomsg_client_not_replayed_total");
    assert_eq!(acked, r.acked);
    assert_eq!(given_up, r.lost.len() as u64);
    assert_eq!(acked + given_up, sent);
    assert!(acked <= r.taken_by_any() as u64, "acked {acked}");
    // Twice a parked server went away with messages it never took.
    let taken_by_none = sent - r.taken_by_any() as u64;
    assert!(taken_by_none >= 2 * IN_FLIGHT, "{taken_by_none}");
    assert!(given_up >= taken_by_none, "{given_up} < {taken_by_none}");
    assert_eq!(grew("iomsg_client_replayed_total"), 0, "replay is off");
    // Four instances, each reached: at least three reconnects.
    let reconnects = grew("iomsg_client_reconnects_total");
    let reached = r.instances.iter().filter(|t| t.opened > 0).count() as u64;
    assert!(reached >= 3 && reconnects + 1 >= reached, "{reconnects}");
    assert_eq!(reconnects + 1, r.established);
    let handshakes = after.new_samples(&before, "iomsg_client_handshake_seconds");
    assert_eq!(handshakes.len() as u64, r.established);
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    assert_eq!(latencies.len() as u64, acked);
}

#[test]
fn with_replay_on_a_restart_counts_replays_and_every_message_acknowledged() {
    let _one = one_at_a_time();
    let before = Snapshot::take();
    let r = run(ClientOptions::default(), 2, 3000);
    let after = Snapshot::take();
    let grew = |name| after.grew(&before, name);
    let sent = r.sent.len() as u64;
    assert!(r.lost.is_empty());
    assert_eq!(r.taken_by_any() as u64, sent, "replay brings every sn");
    assert_eq!(grew("iomsg_client_submitted_total"), sent);
    assert_eq!(grew("iomsg_client_acked_total"), sent);
    assert_eq!(grew("iomsg_client_not_replayed_total"), 0);
    assert_eq!(grew("iomsg_server_delivered_total"), r.delivered());
    // An sn both instances took was sent twice.
    let twice = r.sent.keys().filter(|&&sn| r.taken_by(sn) == 2).count() as u64;
    let replayed = grew("iomsg_client_replayed_total");
    assert!(replayed >= twice, "{replayed} < {twice}");
    // The messages the parked server never took went out to it, and again
    // to the next instance, which took them.
    assert!(replayed >= IN_FLIGHT, "{replayed}");
    assert!(grew("iomsg_client_reconnects_total") >= 1);
    let latencies = after.new_samples(&before, "iomsg_client_ack_latency_seconds");
    assert_eq!(latencies.len() as u64, sent);
}
