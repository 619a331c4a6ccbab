//! The observers (`iomsg_endpoint::observe`) on every backend: with
//! feature `metrics` their counters equal what the test itself sent and
//! what each server instance's handler took; with feature `tracing` the
//! connection's life and every given-up range are traced. The same test
//! source runs once per backend (UCX over tcp on the loopback device; TCP
//! streams), one test at a time: the recorder and the subscriber are
//! global, and counts are taken as differences.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]
// One source runs over a Copy address (UCX's) and one that is not.
#![allow(clippy::clone_on_copy)]

#[path = "endpoint/metrics_recorder.rs"]
mod metrics_recorder;
#[path = "endpoint/tracing_subscriber.rs"]
mod tracing_subscriber;

/// One test at a time (the recorder and the subscriber are global).
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// UCX on the loopback device over tcp.
mod ucx {
    pub mod backend {
        #[allow(unused_imports)] // each test module uses part of it
        pub use iomsg_ucx::{
            Client, ClientEvent, ClientOptions, Delivery, Error, ReadRequest, Server, ServerEvent,
            ServerHandler, ServerOptions, Unkept,
        };
        /// The backend's address.
        pub type Addr = std::net::SocketAddr;

        /// Loopback device and tcp only, and a port that a restarted
        /// server binds again at once: set before any UCX context exists.
        pub fn prepare() {
            static ENV: std::sync::Once = std::sync::Once::new();
            ENV.call_once(|| {
                std::env::set_var("UCX_NET_DEVICES", "lo");
                std::env::set_var("UCX_TLS", "tcp");
                std::env::set_var(iomsg_ucx::REUSE_ADDRESS.0, iomsg_ucx::REUSE_ADDRESS.1);
            });
        }

        /// Any free port on loopback.
        pub fn any_addr() -> Addr {
            prepare();
            "127.0.0.1:0".parse().unwrap()
        }
    }

    pub mod support {
        use super::backend::*;
        include!("endpoint/support.rs");
    }

    mod metrics {
        use super::support::{run, IN_FLIGHT};
        use crate::metrics_recorder::Snapshot;
        use crate::one_at_a_time;
        use iomsg_ucx::ClientOptions;
        include!("endpoint/metrics.rs");
    }

    mod tracing {
        use super::support::{run, IN_FLIGHT};
        use crate::one_at_a_time;
        use crate::tracing_subscriber::{events, Seen};
        use ::tracing::Level;
        use iomsg_ucx::ClientOptions;
        include!("endpoint/tracing.rs");
    }
}

/// TCP streams on loopback.
mod stream {
    pub mod backend {
        #[allow(unused_imports)] // each test module uses part of it
        pub use iomsg_stream::{
            Addr, Client, ClientEvent, ClientOptions, Delivery, Error, ReadRequest, Server,
            ServerEvent, ServerHandler, ServerOptions, Unkept,
        };

        /// Any free port on loopback.
        pub fn any_addr() -> Addr {
            "127.0.0.1:0".parse().unwrap()
        }
    }

    pub mod support {
        use super::backend::*;
        include!("endpoint/support.rs");
    }

    mod metrics {
        use super::support::{run, IN_FLIGHT};
        use crate::metrics_recorder::Snapshot;
        use crate::one_at_a_time;
        use iomsg_stream::ClientOptions;
        include!("endpoint/metrics.rs");
    }

    mod tracing {
        use super::support::{run, IN_FLIGHT};
        use crate::one_at_a_time;
        use crate::tracing_subscriber::{events, Seen};
        use ::tracing::Level;
        use iomsg_stream::ClientOptions;
        include!("endpoint/tracing.rs");
    }
}
