//! Drives the sequence tracker against a model; see `iomsg_core::fuzzing::seq`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_core::fuzzing::seq::seq_tracker(data);
});
