//! Runs whole loopback simulations with fuzzer-chosen scenarios and faults
//! and checks the report against the ground truth; see
//! `iomsg_loopback::fuzzing`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_loopback::fuzzing::loopback_e2e(data);
});
