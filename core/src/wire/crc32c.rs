//! CRC32C (Castagnoli, as in iSCSI): the checksum of the header and of a
//! validated payload.

/// CRC32C of `bytes`.
#[inline]
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    portable(bytes)
}

/// The table-driven CRC32C (`crc` crate, 16 bytes per step).
pub(crate) fn portable(bytes: &[u8]) -> u32 {
    static TABLE: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
    TABLE.checksum(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalogue check value of CRC-32/ISCSI over "123456789".
    const CHECK: u32 = 0xE306_9283;

    #[test]
    fn every_path_gives_the_check_value() {
        assert_eq!(portable(b"123456789"), CHECK);
        assert_eq!(crc32c(b"123456789"), CHECK);
    }

    #[test]
    fn every_path_gives_zero_for_no_bytes() {
        assert_eq!(portable(b""), 0);
        assert_eq!(crc32c(b""), 0);
    }
}
