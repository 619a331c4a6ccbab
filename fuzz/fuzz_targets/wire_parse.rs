//! Parses arbitrary bytes as an io_msg; see `iomsg_core::fuzzing::wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_core::fuzzing::wire::wire_parse(data);
});
