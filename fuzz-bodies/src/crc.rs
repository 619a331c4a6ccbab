//! Fuzz body for the CRC32C: `crc32c`.
//!
//! One property, from `iomsg_core::wire::crc32c`: every implementation gives the
//! same value on every input, wherever it starts in memory. Compared are the
//! portable table, the hardware path of this build (compile-time SSE 4.2, or
//! run-time detection with the `std` feature; none in a plain build), the
//! striped algorithm of the hardware path on its software step (so the
//! stripes and their combining are fuzzed in every build), and the
//! dispatching `crc32c` that `parse` and `emit` call.

use iomsg_core::hooks::crc32c::{crc32c as dispatched, hardware, portable, striped_software};

/// Checks the property on `data`: its first byte picks how many of the
/// following bytes to skip (0 to 7, so the checked input starts at every
/// alignment), the rest is the input.
///
/// # Panics
///
/// When two implementations disagree: that is the bug the fuzzer is looking
/// for.
pub fn crc32c(data: &[u8]) {
    let input = input(data);
    let expected = portable(input);
    let len = input.len();
    assert_eq!(striped_software(input), expected, "striped, {len} bytes");
    assert_eq!(dispatched(input), expected, "dispatched, {len} bytes");
    if let Some(crc) = hardware(input) {
        assert_eq!(crc, expected, "hardware, {len} bytes");
    }
}

/// `data` without its first byte and the `first % 8` bytes after it (empty
/// if it is shorter).
fn input(data: &[u8]) -> &[u8] {
    match data.split_first() {
        Some((&first, rest)) => rest.get(usize::from(first % 8)..).unwrap_or_default(),
        None => data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn crc32c_holds_on_a_few_inputs() {
        // Every skip with lengths around the stripe sizes (192, 768, 3072).
        for len in [0, 1, 7, 8, 9, 44, 191, 192, 193, 767, 768, 3071, 3072, 4096] {
            for skip in 0..8u8 {
                let mut data: Vec<u8> = (0..=len + 8).map(|i| (i * 131 + 7) as u8).collect();
                data[0] = skip;
                crc32c(&data);
            }
        }
        crc32c(b"");
        crc32c(b"\x07");
    }

    #[test]
    fn first_byte_skips_its_value_mod_8() {
        assert_eq!(input(b"\x0bxyz123456789"), b"123456789");
        assert_eq!(input(b"\x08123"), b"123");
        assert_eq!(input(b"\x07123"), b"");
        assert_eq!(input(b""), b"");
    }
}
