//! Compares every CRC32C implementation (portable, hardware, striped) on
//! arbitrary input at arbitrary alignment; see `iomsg_core::fuzzing::crc`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iomsg_core::fuzzing::crc::crc32c(data);
});
