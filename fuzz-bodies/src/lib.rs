//! The core's fuzz target bodies and their reference models, shared by the
//! cargo-fuzz crate (`fuzz/`) and the tests, which replay the committed
//! seeds in `fuzz/seeds/<target>/` through them on the stable toolchain.
//! Each body panics when a property it checks is violated. They reach the
//! core through its API and, for the CRC32C's separate implementations,
//! its `fuzzing` hooks; the core carries no model.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
#![allow(missing_docs)]

pub mod crc;
pub mod journal;
pub mod seq;
pub mod session;
mod session_checks;
mod session_script;
pub mod wire;

use std::path::PathBuf;
use std::vec::Vec;

/// Every committed seed of a fuzz target (`fuzz/seeds/<target>/`), sorted by
/// path, with its bytes. Panics (a test failure) if the folder is missing or
/// empty.
pub fn seed_files(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", dir.display());
    out
}

#[cfg(test)]
mod tests {
    fn replay(target: &str, body: fn(&[u8])) {
        for (path, bytes) in super::seed_files(target) {
            let result = std::panic::catch_unwind(|| body(&bytes));
            assert!(
                result.is_ok(),
                "{target} seed {} violates a property",
                path.display()
            );
        }
    }

    #[test]
    fn wire_parse_seeds_replay_clean() {
        replay("wire_parse", super::wire::wire_parse);
    }

    #[test]
    fn seq_tracker_seeds_replay_clean() {
        replay("seq_tracker", super::seq::seq_tracker);
    }

    #[test]
    fn session_seeds_replay_clean() {
        replay("session", super::session::session);
    }

    #[test]
    fn journal_seeds_replay_clean() {
        replay("journal", super::journal::journal);
    }

    #[test]
    fn crc32c_seeds_replay_clean() {
        replay("crc32c", super::crc::crc32c);
    }
}
