//! Drives client and server session state machines through a fuzzer-chosen
//! script of events and frames; see `iomsg_core::fuzzing::session`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_core::fuzzing::session::session(data);
});
