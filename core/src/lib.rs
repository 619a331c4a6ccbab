//! iomsg-core: the io_msg protocol without IO.
//!
//! Everything that decides whether an io_msg was delivered lives here and
//! nowhere else: the version-1 wire format ([`wire`]), the receiver's
//! sequence tracker and the sender's window ([`seq`]), the client and server
//! session state machines ([`session`]) and the [`transport::Transport`]
//! trait with the `Client` / `Server` drivers that tie a backend to them.
//!
//! The crate is `#![no_std]`, never allocates and contains no unsafe code.
//! Time is passed in as [`time::Instant`]; nothing here reads a clock or an
//! RNG of its own, so every run is reproducible from its inputs.
//!
//! # Features
//!
//! - `std`: run-time detection of the CPU's CRC32C instruction (through
//!   the `crc32c` crate) for [`wire::Crc32c::BUILTIN`], and
//!   `Instant::since(std::time::Instant)`, the protocol's clock read from
//!   std's. The protocol itself stays `no_std`.
//! - `fuzzing`: the hooks the repository's fuzz target bodies and their
//!   reference models (the `iomsg-fuzz-bodies` crate) need (the CRC32C's
//!   implementations one by one; hidden from these docs). Not for
//!   applications.
#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

#[cfg(any(test, feature = "std"))]
extern crate std;

mod conn;
pub mod iodemo;
pub mod rng;
pub mod seq;
pub mod session;
pub mod time;
pub mod transport;
pub mod wire;
pub mod workload;

/// What the repository's fuzz target bodies (`iomsg-fuzz-bodies`) reach
/// that the API does not show: the CRC32C's implementations one by one.
/// Not for applications.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod hooks {
    /// The CRC32C's implementations, each on its own.
    pub mod crc32c {
        use crate::wire::crc32c as imp;

        /// What `parse` and `emit` use: the instruction when there is
        /// one, the table otherwise.
        #[must_use]
        pub fn crc32c(bytes: &[u8]) -> u32 {
            imp::crc32c(bytes)
        }
        /// The portable table.
        #[must_use]
        pub fn portable(bytes: &[u8]) -> u32 {
            imp::portable(bytes)
        }
        /// The instruction, if this build or this CPU has it.
        #[must_use]
        pub fn hardware(bytes: &[u8]) -> Option<u32> {
            imp::hardware(bytes)
        }
        /// The instruction path's striped algorithm on a software step.
        #[must_use]
        pub fn striped_software(bytes: &[u8]) -> u32 {
            imp::striped_software(bytes)
        }
    }
}

pub use time::Instant;
