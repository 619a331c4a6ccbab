//! Fuzz target bodies, shared by the cargo-fuzz crate (`fuzz/`) and the unit
//! tests, which replay the committed seeds in `fuzz/seeds/<target>/` through
//! them on the stable toolchain. Each body panics when a property it checks
//! is violated. Compiled only for tests and with the `fuzzing` feature.
#![allow(clippy::std_instead_of_core, clippy::alloc_instead_of_core)]
#![allow(missing_docs)]

pub mod seq;
pub mod session;
pub mod wire;

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::vec::Vec;

    /// Every committed seed file of a fuzz target, read from `fuzz/seeds/<target>/`.
    fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/seeds")
            .join(target);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            out.push((path, bytes));
        }
        out.sort();
        assert!(!out.is_empty(), "no seeds in {}", dir.display());
        out
    }

    fn replay(target: &str, body: fn(&[u8])) {
        for (path, bytes) in seeds(target) {
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
}
