#[test]
fn a_restart_with_replay_off_is_traced_established_and_warned_given_up() {
    let _one = one_at_a_time();
    events().clear();
    let r = run(ClientOptions::default().replay(false), 2, 3000);
    let seen = events().clone();
    let client = |s: &&Seen| s.target == "iomsg_endpoint::observe::client";

    let established: Vec<&Seen> = seen
        .iter()
        .filter(client)
        .filter(|s| s.says("established"))
        .collect();
    assert!(established.len() >= 2, "{seen:#?}");
    for e in &established {
        assert_eq!(e.level, Level::INFO);
        assert_eq!(e.field("instance").map(str::len), Some(16), "{e:?}");
        assert!(e.field("known").is_some() && e.field("resume_from").is_some());
    }

    // Ground truth: the sns no instance took were given up, and a warning
    // names a range holding each; every range warned of is one the client
    // reported lost.
    let warned: Vec<std::ops::Range<u64>> = seen
        .iter()
        .filter(client)
        .filter(|s| s.says("not replayed: sns given up"))
        .map(|s| {
            assert_eq!(s.level, Level::WARN);
            let range = s.number("start")..s.number("end");
            assert_eq!(s.number("sns"), range.end - range.start);
            range
        })
        .collect();
    let taken_by_none: Vec<u64> = r
        .sent
        .keys()
        .copied()
        .filter(|&sn| r.taken_by(sn) == 0)
        .collect();
    assert!(taken_by_none.len() as u64 >= IN_FLIGHT);
    for &sn in &taken_by_none {
        assert!(
            warned.iter().any(|w| w.contains(&sn)),
            "sn {sn} taken by no instance, and no warning names it: {warned:?}"
        );
    }
    for w in &warned {
        for sn in w.clone() {
            assert_eq!(r.lost.get(&sn), Some(w), "sn {sn} warned, not reported");
        }
    }
    let warned_sns: u64 = warned.iter().map(|w| w.end - w.start).sum();
    assert_eq!(
        warned_sns,
        r.lost.len() as u64,
        "each given-up sn warned once"
    );

    // The server side: each instance traced the session it opened.
    let session = format!("{:016x}", r.session);
    let opened = seen
        .iter()
        .filter(|s| s.target == "iomsg_endpoint::observe::server" && s.says("session opened"))
        .filter(|s| s.field("session") == Some(&session))
        .count() as u64;
    let heard: u64 = r.instances.iter().map(|t| t.opened).sum();
    assert_eq!(opened, heard);
}
