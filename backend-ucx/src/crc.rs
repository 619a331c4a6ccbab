//! The CPU's CRC32C instruction, detected at run time and handed to the
//! core as a [`Crc32c`] provider.
//!
//! iomsg-core is `forbid(unsafe_code)`, so on its own it reaches the
//! instruction only when the build enables SSE 4.2 for every function, or
//! through the `crc32c` crate's per-call detection and general-purpose
//! striping (about 160 instructions of overhead on a 44-byte header). This
//! module detects SSE 4.2 once ([`crc32c_provider`]) and hands the core two
//! functions compiled with `#[target_feature(enable = "sse4.2")]`:
//!
//! - the header CRC: one chain of five 8-byte and one 4-byte `crc32`
//!   instructions over the 44 covered bytes, nothing else;
//! - the CRC of any slice: three stripes side by side (one instruction
//!   chain each, the instruction's latency is three times its throughput),
//!   combined by moving a stripe's register past the next stripe's length
//!   of zero bytes with a lookup table, then whole words and a tail.
//!
//! On other CPUs and architectures the provider is the core's own
//! ([`Crc32c::BUILTIN`]).

use iomsg_core::wire::{Crc32c, HEADER_COVERED};

/// The fastest CRC32C provider for this CPU: the SSE 4.2 instruction where
/// the CPU has it (checked once per call of this function, so call it once
/// and keep the value), the core's own otherwise. Hand it to the core
/// through `ClientConfig::crc` / `ServerConfig::crc`, or to
/// `wire::parse_with` / `IoMsg::emit_with`.
pub fn crc32c_provider() -> Crc32c {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        return Crc32c::new("sse4.2 (run-time detection)", sse42::bytes, sse42::header);
    }
    Crc32c::BUILTIN
}

/// The SSE 4.2 functions. Private: the only way to them is the provider
/// that [`crc32c_provider`] builds after detecting the feature, which is
/// what makes their `unsafe` calls sound.
#[cfg(target_arch = "x86_64")]
mod sse42 {
    use core::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};

    use super::{Shift, HEADER_COVERED, SHIFT_1024, SHIFT_256, SHIFT_64};

    /// One 8-byte `crc32` step. Used only inside the functions below that
    /// carry `#[target_feature(enable = "sse4.2")]`.
    macro_rules! step_u64 {
        ($crc:expr, $v:expr) => {{
            // SAFETY: expanded only in functions with SSE 4.2 enabled,
            // whose contract is that the CPU has it.
            #[allow(unused_unsafe)]
            let folded = unsafe { _mm_crc32_u64($crc, $v) };
            folded
        }};
    }

    /// CRC32C of the 44 covered header bytes.
    pub(super) fn header(covered: &[u8; HEADER_COVERED]) -> u32 {
        // SAFETY: `header` is reachable only through the provider that
        // `crc32c_provider` returns after `is_x86_feature_detected!("sse4.2")`
        // said yes, so the CPU running this has the instruction.
        unsafe { header_sse42(covered) }
    }

    /// CRC32C of any slice.
    pub(super) fn bytes(bytes: &[u8]) -> u32 {
        // SAFETY: as in `header`: reachable only after the detection.
        unsafe { bytes_sse42(bytes) }
    }

    /// # Safety
    ///
    /// The CPU must support SSE 4.2.
    #[target_feature(enable = "sse4.2")]
    unsafe fn header_sse42(covered: &[u8; HEADER_COVERED]) -> u32 {
        let mut crc = u64::from(!0u32);
        let (words, tail) = covered.split_at(40);
        for word in words.chunks_exact(8) {
            crc = step_u64!(crc, le_u64(word));
        }
        let tail = tail
            .first_chunk::<4>()
            .map_or(0, |t| u32::from_le_bytes(*t));
        // SAFETY: this function runs only on CPUs with SSE 4.2 (its own
        // safety contract). (The block is needless from Rust 1.87, where
        // the intrinsic is safe in a function with the feature.)
        #[allow(unused_unsafe)]
        let crc = unsafe { _mm_crc32_u32(crc as u32, tail) };
        !crc
    }

    /// # Safety
    ///
    /// The CPU must support SSE 4.2.
    #[target_feature(enable = "sse4.2")]
    unsafe fn bytes_sse42(mut bytes: &[u8]) -> u32 {
        let mut crc = u64::from(!0u32);
        // SAFETY: the CPU has SSE 4.2 (this function's contract).
        (crc, bytes) = unsafe { stripes::<1024>(crc, bytes, &SHIFT_1024) };
        // SAFETY: as above.
        (crc, bytes) = unsafe { stripes::<256>(crc, bytes, &SHIFT_256) };
        // SAFETY: as above.
        (crc, bytes) = unsafe { stripes::<64>(crc, bytes, &SHIFT_64) };
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            crc = step_u64!(crc, le_u64(word));
        }
        let mut crc = crc as u32;
        let mut tail = words.remainder();
        if let Some((word, rest)) = tail.split_first_chunk::<4>() {
            // SAFETY: this function runs only on CPUs with SSE 4.2.
            #[allow(unused_unsafe)]
            let folded = unsafe { _mm_crc32_u32(crc, u32::from_le_bytes(*word)) };
            crc = folded;
            tail = rest;
        }
        for &b in tail {
            // SAFETY: this function runs only on CPUs with SSE 4.2.
            #[allow(unused_unsafe)]
            let folded = unsafe { _mm_crc32_u8(crc, b) };
            crc = folded;
        }
        !crc
    }

    /// Folds `bytes` into `crc` in chunks of three `BLOCK`-byte stripes,
    /// one instruction chain per stripe; returns the register and the bytes
    /// left (fewer than `3 * BLOCK`).
    ///
    /// # Safety
    ///
    /// The CPU must support SSE 4.2.
    #[inline]
    #[target_feature(enable = "sse4.2")]
    unsafe fn stripes<'a, const BLOCK: usize>(
        mut crc: u64,
        mut bytes: &'a [u8],
        shift: &Shift,
    ) -> (u64, &'a [u8]) {
        while let Some((a, rest)) = bytes.split_at_checked(BLOCK) {
            let Some((b, rest)) = rest.split_at_checked(BLOCK) else {
                break;
            };
            let Some((c, rest)) = rest.split_at_checked(BLOCK) else {
                break;
            };
            let (mut crc_a, mut crc_b, mut crc_c) = (crc, 0, 0);
            let words = a
                .chunks_exact(8)
                .zip(b.chunks_exact(8))
                .zip(c.chunks_exact(8));
            for ((wa, wb), wc) in words {
                crc_a = step_u64!(crc_a, le_u64(wa));
                crc_b = step_u64!(crc_b, le_u64(wb));
                crc_c = step_u64!(crc_c, le_u64(wc));
            }
            let ab = shift.apply(shift.apply(crc_a as u32) ^ crc_b as u32);
            crc = u64::from(ab ^ crc_c as u32);
            bytes = rest;
        }
        (crc, bytes)
    }

    /// The little-endian `u64` in the first 8 bytes of `word` (0 if it is
    /// shorter, which the callers' `chunks_exact(8)` rules out).
    #[inline(always)]
    fn le_u64(word: &[u8]) -> u64 {
        word.first_chunk::<8>()
            .map_or(0, |w| u64::from_le_bytes(*w))
    }
}

/// The CRC32C polynomial, bit-reflected.
#[cfg(target_arch = "x86_64")]
const POLY: u32 = 0x82F6_3B78;

/// The linear map "fold in N zero bytes" of the raw CRC register, as four
/// byte-indexed tables: `apply(r) = t[0][r₀] ^ t[1][r₁] ^ t[2][r₂] ^ t[3][r₃]`.
#[cfg(target_arch = "x86_64")]
struct Shift([[u32; 256]; 4]);

#[cfg(target_arch = "x86_64")]
static SHIFT_1024: Shift = Shift::zero_bytes(1024);
#[cfg(target_arch = "x86_64")]
static SHIFT_256: Shift = Shift::zero_bytes(256);
#[cfg(target_arch = "x86_64")]
static SHIFT_64: Shift = Shift::zero_bytes(64);

#[cfg(target_arch = "x86_64")]
impl Shift {
    /// The register after folding `crc` past the table's zero bytes.
    #[inline(always)]
    fn apply(&self, crc: u32) -> u32 {
        let [b0, b1, b2, b3] = crc.to_le_bytes();
        self.0[0][usize::from(b0)]
            ^ self.0[1][usize::from(b1)]
            ^ self.0[2][usize::from(b2)]
            ^ self.0[3][usize::from(b3)]
    }

    /// The table for `n` zero bytes, by squaring the one-bit map (a 32×32
    /// matrix over GF(2), stored as the images of the 32 unit vectors).
    const fn zero_bytes(n: usize) -> Shift {
        let mut one_bit = [0u32; 32];
        let mut j = 0;
        while j < 32 {
            let v = 1u32 << j;
            one_bit[j] = if v & 1 == 1 { (v >> 1) ^ POLY } else { v >> 1 };
            j += 1;
        }
        let mut power = one_bit;
        let mut map = [0u32; 32];
        let mut j = 0;
        while j < 32 {
            map[j] = 1 << j;
            j += 1;
        }
        let mut bits = n * 8;
        while bits > 0 {
            if bits & 1 == 1 {
                map = compose(&power, &map);
            }
            power = compose(&power, &power);
            bits >>= 1;
        }
        let mut table = [[0u32; 256]; 4];
        let mut k = 0;
        while k < 4 {
            let mut v = 0;
            while v < 256 {
                table[k][v] = apply_matrix(&map, (v as u32) << (8 * k));
                v += 1;
            }
            k += 1;
        }
        Shift(table)
    }
}

/// `m · v` over GF(2): the XOR of the columns of `m` picked by the bits of `v`.
#[cfg(target_arch = "x86_64")]
const fn apply_matrix(m: &[u32; 32], mut v: u32) -> u32 {
    let mut out = 0;
    let mut j = 0;
    while v != 0 {
        if v & 1 == 1 {
            out ^= m[j];
        }
        v >>= 1;
        j += 1;
    }
    out
}

/// `a · b`: first `b`, then `a`.
#[cfg(target_arch = "x86_64")]
const fn compose(a: &[u32; 32], b: &[u32; 32]) -> [u32; 32] {
    let mut m = [0u32; 32];
    let mut j = 0;
    while j < 32 {
        m[j] = apply_matrix(a, b[j]);
        j += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes: a 64-bit LCG from a fixed seed.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (state >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn provider_passes_the_cores_check() {
        let crc = crc32c_provider();
        assert!(crc.check(), "{crc:?}");
        assert_eq!(crc.checksum(b"123456789"), 0xE306_9283);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn provider_is_the_instruction_on_a_cpu_with_sse42() {
        if std::is_x86_feature_detected!("sse4.2") {
            assert!(crc32c_provider().name().contains("sse4.2"));
        } else {
            assert_eq!(crc32c_provider(), Crc32c::BUILTIN);
        }
    }

    #[test]
    fn provider_equals_portable_at_every_length_and_alignment() {
        let crc = crc32c_provider();
        let data = bytes(13_000, 0x5EED_C3C3);
        // Every length to 400, and around each stripe size's multiples and
        // their sums (3·64, 3·256, 3·1024, combinations), at every start
        // within 8 bytes.
        let edges = [
            3 * 64,
            2 * 3 * 64,
            3 * 256,
            3 * 256 + 3 * 64,
            3 * 1024,
            3 * 1024 + 3 * 256 + 3 * 64 + 63,
            4096,
            2 * 3 * 1024,
            12_288,
        ];
        let lengths = (0..=400).chain(edges.into_iter().flat_map(|e| e - 9..=e + 9));
        for len in lengths {
            for offset in 0..8 {
                let input = &data[offset..offset + len];
                assert_eq!(
                    crc.checksum(input),
                    Crc32c::PORTABLE.checksum(input),
                    "len {len} offset {offset}"
                );
            }
        }
    }

    #[test]
    fn header_equals_portable_on_many_headers_and_alignments() {
        let crc = crc32c_provider();
        let data = bytes(HEADER_COVERED * 65, 0xBEEF);
        for start in 0..HEADER_COVERED * 64 {
            let covered = data[start..]
                .first_chunk::<HEADER_COVERED>()
                .expect("data is long enough");
            assert_eq!(
                crc.header(covered),
                Crc32c::PORTABLE.checksum(covered),
                "start {start}"
            );
            assert_eq!(crc.header(covered), crc.checksum(covered), "start {start}");
        }
    }

    #[test]
    fn frames_sealed_by_the_provider_parse_with_the_builtin_and_back() {
        use iomsg_core::wire::{parse, parse_with, Body, IoMsg};
        let data = bytes(300, 7);
        let crc = crc32c_provider();
        for len in [0, 1, 44, 64, 193, 300] {
            let msg = IoMsg {
                session: 7,
                epoch: 1,
                sn: len as u64,
                ack: 3,
                validate: true,
                stream: false,
                body: Body::Write { data: &data[..len] },
            };
            let mut frame = vec![0u8; msg.buffer_len()];
            assert_eq!(msg.emit_with(&mut frame, &crc), Ok(frame.len()));
            assert_eq!(parse(&frame), Ok(msg));
            let mut again = vec![0u8; msg.buffer_len()];
            assert_eq!(msg.emit(&mut again), Ok(frame.len()));
            assert_eq!(again, frame);
            assert_eq!(parse_with(&frame, &crc), Ok(msg));
        }
    }
}
