//! Reads and restores journal records; see `iomsg_core::fuzzing::journal`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_core::fuzzing::journal::journal(data);
});
