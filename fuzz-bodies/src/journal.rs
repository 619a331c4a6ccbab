//! The journal record reader and the restore: any bytes are refused with
//! a named error or taken back, never a panic; a record taken back is
//! written out again with the same meaning.

use iomsg_core::session::{JournalError, JournalRecord, ServerConfig, ServerCore, JOURNAL_FIXED};
use iomsg_core::time::Instant;
use iomsg_core::wire::Crc32c;

/// Two sessions, connections and tombstones; a window of 128 sns.
type Small = ServerCore<2, 2, 3, 2>;
/// The default window (2,048 sns).
type Wide = ServerCore<2, 2, 33, 2>;

/// The bytes as they are, then with their checksum made right (so the
/// field checks behind it are reached).
pub fn journal(data: &[u8]) {
    check(data);
    if data.len() >= JOURNAL_FIXED {
        let mut fixed = data.to_vec();
        let n = fixed.len();
        let sum = Crc32c::BUILTIN.checksum(&fixed[..n - 4]);
        fixed[n - 4..].copy_from_slice(&sum.to_le_bytes());
        check(&fixed);
    }
}

fn check(bytes: &[u8]) {
    let decoded = JournalRecord::decode(bytes, &Crc32c::BUILTIN);
    let mut small = Small::new(ServerConfig::new(1));
    let mut wide = std::boxed::Box::new(Wide::new(ServerConfig::new(2)));
    match decoded {
        Err(e) => {
            // A record the reader refuses is refused by every restore, and
            // changes nothing.
            assert_eq!(small.restore(Instant::ZERO, bytes), Err(e));
            assert_eq!(small.session_count() + small.tomb_count(), 0);
        }
        Ok(r) => {
            round_trip(&r, small.restore(Instant::ZERO, bytes), &small);
            round_trip(&r, wide.restore(Instant::ZERO, bytes), &*wide);
        }
    }
}

/// A restored record, written out again, reads as the one given.
fn round_trip<const S: usize, const C: usize, const W: usize, const T: usize>(
    r: &JournalRecord<'_>,
    restored: Result<u64, JournalError>,
    core: &ServerCore<S, C, W, T>,
) {
    match restored {
        Err(JournalError::TooWide { .. } | JournalError::Inconsistent(_)) => {
            assert_eq!(core.session_count() + core.tomb_count(), 0);
        }
        Err(e) => panic!("an empty server refused a readable record: {e}"),
        Ok(id) => {
            assert_eq!(id, r.session);
            let mut out = std::vec::Vec::new();
            core.journal_all(|b| out.push(b.to_vec()));
            assert_eq!(out.len(), 1, "one session, one record");
            let again = JournalRecord::decode(&out[0], &Crc32c::BUILTIN)
                .unwrap_or_else(|e| panic!("its own record refused: {e}"));
            assert_eq!(
                (again.session, again.token, again.incarnation, again.epoch),
                (r.session, r.token, r.incarnation, r.epoch)
            );
            assert_eq!((again.cumulative, again.top), (r.cumulative, r.top));
            assert_eq!(again.announced, r.announced.max(r.top));
            assert_eq!(again.given_up_from, r.given_up_from);
            for sn in r.cumulative..r.top {
                assert_eq!(again.received(sn), r.received(sn), "sn {sn}");
            }
        }
    }
}
