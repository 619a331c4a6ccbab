//! Feature `tracing`: a subscriber of our own collects every event; a
//! client with replay off whose server restarts mid-stream is traced
//! established, and warned of each range it gave up.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, OnceLock};

use iomsg_ucx::ClientOptions;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

use super::support::{one_at_a_time, run, IN_FLIGHT};

/// One event as seen: level, target, fields (the message as `message`).
#[derive(Clone, Debug)]
struct Seen {
    level: Level,
    target: String,
    fields: BTreeMap<String, String>,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
    fn says(&self, message: &str) -> bool {
        self.field("message") == Some(message)
    }
    fn number(&self, name: &str) -> u64 {
        let text = self
            .field(name)
            .unwrap_or_else(|| panic!("{self:?}: no {name}"));
        text.parse()
            .unwrap_or_else(|_| panic!("{self:?}: {name} not a number"))
    }
}

impl Visit for Seen {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.fields
            .insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Every event of this process (installed once, globally, so that the
/// server threads' events are seen too).
struct Collect;

fn events() -> MutexGuard<'static, Vec<Seen>> {
    static EVENTS: Mutex<Vec<Seen>> = Mutex::new(Vec::new());
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Collect).unwrap());
    EVENTS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Subscriber for Collect {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut seen = Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields: BTreeMap::new(),
        };
        event.record(&mut seen);
        events().push(seen);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_restart_with_replay_off_is_traced_established_and_warned_given_up() {
    let _one = one_at_a_time();
    events().clear();
    let r = run(ClientOptions::default().replay(false), 2, 3000);
    let seen = events().clone();
    let client = |s: &&Seen| s.target == "iomsg_ucx::observe::client";

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
        .filter(|s| s.target == "iomsg_ucx::observe::server" && s.says("session opened"))
        .filter(|s| s.field("session") == Some(&session))
        .count() as u64;
    let heard: u64 = r.instances.iter().map(|t| t.opened).sum();
    assert_eq!(opened, heard);
}
