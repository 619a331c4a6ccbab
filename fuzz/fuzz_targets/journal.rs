//! Reads and restores journal records; see `iomsg_fuzz_bodies::journal`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_fuzz_bodies::journal::journal(data);
});
