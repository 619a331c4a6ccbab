//! Compares every CRC32C implementation (portable, hardware, striped) on
//! arbitrary input at arbitrary alignment; see `iomsg_fuzz_bodies::crc`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_fuzz_bodies::crc::crc32c(data);
});
