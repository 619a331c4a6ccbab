// Feature `tracing`: a subscriber of our own collects every event, for
// each backend's tests.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event as seen: level, target, fields (the message as `message`).
#[derive(Clone, Debug)]
pub struct Seen {
    pub level: Level,
    pub target: String,
    pub fields: BTreeMap<String, String>,
}

impl Seen {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
    pub fn says(&self, message: &str) -> bool {
        self.field("message") == Some(message)
    }
    pub fn number(&self, name: &str) -> u64 {
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

pub fn events() -> MutexGuard<'static, Vec<Seen>> {
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
