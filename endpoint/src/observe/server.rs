//! [`ServerObserver`]: what one server's metrics and traces see.

use iomsg_core::session::{Delivery, ServerEvent};
#[cfg(any(feature = "metrics", feature = "tracing"))]
use iomsg_core::session::{ReadRequest, ServerHandler};

/// One server's observer: counts deliveries, duplicates, losses,
/// handshakes and rejections (feature `metrics`), traces sessions and
/// losses (feature `tracing`). Empty without either feature.
///
/// Make one per server, after installing the metrics recorder.
#[derive(Debug, Default)]
pub struct ServerObserver {
    #[cfg(feature = "metrics")]
    meter: super::meter::ServerMeter,
}

impl ServerObserver {
    /// An observer for a new server (registers its metrics with the
    /// installed recorder).
    #[must_use]
    pub fn new() -> ServerObserver {
        ServerObserver::default()
    }

    /// The application took `delivery` (its handler's `deliver`
    /// returned).
    #[inline]
    pub fn on_deliver(&mut self, delivery: &Delivery<'_>) {
        #[cfg(feature = "metrics")]
        self.meter.deliver();
        let _ = delivery;
    }

    /// The server told `event`.
    #[inline]
    pub fn on_event(&mut self, event: &ServerEvent) {
        #[cfg(feature = "metrics")]
        self.meter.event(event);
        #[cfg(feature = "tracing")]
        super::trace::server_event(event);
        let _ = event;
    }
}

/// The application's handler with the observer beside it: each delivery
/// and event goes to both.
#[cfg(any(feature = "metrics", feature = "tracing"))]
pub(crate) struct Observed<'a, H> {
    pub(crate) handler: &'a mut H,
    pub(crate) observer: &'a mut ServerObserver,
}

#[cfg(any(feature = "metrics", feature = "tracing"))]
impl<H: ServerHandler> ServerHandler for Observed<'_, H> {
    #[inline]
    fn deliver(&mut self, msg: Delivery<'_>) {
        self.handler.deliver(msg);
        self.observer.on_deliver(&msg);
    }

    #[inline]
    fn respond(&mut self, read: ReadRequest<'_>, out: &mut [u8]) {
        self.handler.respond(read, out);
    }

    #[inline]
    fn event(&mut self, event: ServerEvent) {
        self.observer.on_event(&event);
        self.handler.event(event);
    }

    #[inline]
    fn flush(&mut self) -> Result<(), iomsg_core::session::Unkept> {
        self.handler.flush()
    }

    #[inline]
    fn journal(&mut self, record: &[u8]) {
        self.handler.journal(record);
    }

    #[inline]
    fn recall(&mut self, session: u64, out: &mut [u8]) -> Option<usize> {
        self.handler.recall(session, out)
    }
}
