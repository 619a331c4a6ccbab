//! Parses arbitrary bytes as an io_msg; see `iomsg_fuzz_bodies::wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_fuzz_bodies::wire::wire_parse(data);
});
