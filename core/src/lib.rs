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
//! - `fuzzing`: the fuzz targets' bodies and their reference models
//!   (`iomsg_core::fuzzing`, hidden from these docs; pulls in `std`), for
//!   the repository's cargo-fuzz crate. Not for applications.
#![no_std]
#![forbid(unsafe_code)]
#![warn(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]

#[cfg(any(test, feature = "fuzzing", feature = "std"))]
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

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

pub use time::Instant;
