//! Drives client and server session state machines through a fuzzer-chosen
//! script of events and frames; see `iomsg_fuzz_bodies::session`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_fuzz_bodies::session::session(data);
});
