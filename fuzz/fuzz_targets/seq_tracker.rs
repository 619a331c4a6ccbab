//! Drives the sequence tracker against a model; see `iomsg_fuzz_bodies::seq`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_fuzz_bodies::seq::seq_tracker(data);
});
