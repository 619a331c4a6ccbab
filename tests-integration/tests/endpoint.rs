//! The application layer (`iomsg-endpoint`) on every backend, from one
//! set of tests: exactly once across a crash of each side (journal and
//! resume) and the async server's journal. Each test module below is
//! compiled once per backend (UCX over tcp on the loopback device; TCP
//! streams) from the same source, judged against what the test itself
//! sent and what each server instance's handler or keeper took, never
//! against the protocol's own counters. The observers' tests, on every
//! backend too, are `tests/observe.rs`.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]
// One source runs over a Copy address (UCX's) and one that is not.
#![allow(clippy::clone_on_copy)]

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

    mod exactly_once {
        use super::backend::*;
        include!("endpoint/exactly_once.rs");
    }

    mod async_journal {
        use super::backend::prepare;
        use iomsg_ucx::tokio::{Batch, Client, Keeper, Server};
        use iomsg_ucx::{ClientOptions, ServerOptions};
        include!("endpoint/async_journal.rs");
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

        /// Nothing to set up.
        pub fn prepare() {}

        /// Any free port on loopback.
        pub fn any_addr() -> Addr {
            "127.0.0.1:0".parse().unwrap()
        }
    }

    mod exactly_once {
        use super::backend::*;
        include!("endpoint/exactly_once.rs");
    }

    mod async_journal {
        use super::backend::prepare;
        use iomsg_stream::tokio::{Batch, Client, Keeper, Server};
        use iomsg_stream::{ClientOptions, ServerOptions};
        include!("endpoint/async_journal.rs");
    }
}
