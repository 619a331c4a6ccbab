//! CRC32C (Castagnoli, as in iSCSI): the checksum of the header and of a
//! validated payload.
//!
//! [`crc32c()`] takes the fastest path this build can use, and every path
//! gives the same value:
//!
//! 1. **The CPU's instruction, chosen at compile time**: on x86_64 built with
//!    SSE 4.2 (`-C target-cpu=x86-64-v2` or newer, `-C target-cpu=native`,
//!    or `-C target-feature=+sse4.2`), the `crc32` instruction in three
//!    parallel streams ([`update`]). Works in `no_std`.
//! 2. **The CPU's instruction, chosen at run time**: with the cargo feature
//!    `std`, on x86_64 and aarch64 builds that path 1 does not cover, the
//!    [`crc32c` crate](https://crates.io/crates/crc32c).
//! 3. **Portable**: the `crc` crate's 16-bytes-per-step table
//!    ([`portable`]), everywhere else.
//!
//! # Why dependencies, and these
//!
//! This crate is `#![forbid(unsafe_code)]`, and the intrinsics cannot be
//! reached without `unsafe` in it: `_mm_crc32_u64` is a safe function in
//! current Rust, but callable without `unsafe` only from a function that
//! itself carries `#[target_feature(enable = "sse4.2")]`, and rustc (1.95)
//! says in so many words that a feature enabled for the whole build
//! (`-C target-feature`) does not count. Somewhere up the chain, at the
//! latest in `parse` and `emit`, an `unsafe` call would be needed. So the
//! instruction comes through crates that wrap it safely:
//!
//! - Path 1: [`safe_arch`](https://crates.io/crates/safe_arch) 0.7
//!   (`no_std`, no dependencies, Zlib OR Apache-2.0 OR MIT, one of the most
//!   used intrinsics crates). Its `crc32_u64` exists only when the build
//!   enables SSE 4.2, which is exactly when path 1 is compiled, so the
//!   choice costs nothing at run time. 0.7 because 1.x asks for Rust 1.89
//!   and the workspace says 1.85. It has no aarch64 functions, and no
//!   maintained crate wraps the ARMv8 `crc32c*` instructions safely, so
//!   aarch64 reaches them only through path 2.
//! - Path 2: [`crc32c`](https://crates.io/crates/crc32c) 0.6 (MIT OR
//!   Apache-2.0, maintained, widely used, no run-time dependencies; its
//!   build script uses `rustc_version`). Its safe `crc32c(&[u8])` checks the
//!   CPU with std's `is_x86_feature_detected!("sse4.2")` /
//!   `is_aarch64_feature_detected!("crc")`, which cache the answer after the
//!   first call (later calls cost one relaxed atomic load and a bit test),
//!   and its x86_64 code interleaves three streams like path 1. It needs
//!   `std`, hence the off-by-default feature; `iomsg-core`'s own source
//!   stays free of `std` (`ci/check-no-std`).
//! - Passed over: `crc-fast` (carry-less-multiply folding, faster on long
//!   buffers, but a large general CRC library that needs Rust 1.89 and ships
//!   a panic handler in its `no_std` defaults); `crc32c-hw` (compile time
//!   only, untouched since 2018); `multiversion`-style macros (they expand
//!   to `unsafe` inside this crate).
//!
//! # The hardware algorithm (path 1)
//!
//! The instruction folds 8 bytes into the CRC register with a latency of 3
//! cycles but can start one every cycle, so one dependent chain uses a third
//! of it. [`update`] therefore cuts a long input into three equal stripes,
//! runs one chain per stripe side by side, and combines them: the register
//! after `a ‖ b` is the register after `a` moved past `|b|` zero bytes, XOR
//! the register of `b` alone (CRC is linear). Moving past a fixed number of
//! zero bytes is a linear map of the 32-bit register, applied as four
//! byte-indexed lookups in a [`Shift`] table that `const fn`s compute at
//! compile time. Stripes of 1024, 256 and 64 bytes cover long inputs; what is
//! left goes 8, 4 and 1 bytes at a time. The same [`update`] runs on a
//! software [`Step`] in the tests and the fuzz target, so the striping and
//! combining are checked in every build, not only in one with the
//! instruction.

/// The CRC32C polynomial, bit-reflected (the register shifts right).
const POLY: u32 = 0x82F6_3B78;

/// Bytes of the header that its CRC covers (everything before `header_crc`).
pub const HEADER_COVERED: usize = 44;

/// A CRC32C implementation that [`parse_with`](super::parse_with),
/// [`IoMsg::emit_with`](super::IoMsg::emit_with) and the session state
/// machines (through `ClientConfig::crc` and `ServerConfig::crc`) use for
/// every frame: two plain function pointers, chosen once.
///
/// This crate has no `unsafe` code, so it cannot select the CPU's CRC32C
/// instruction at run time itself (it would need `unsafe` to call it). A
/// backend that may (iomsg-ucx's `crc32c_provider()`) detects the
/// instruction once and hands its functions in here; everything else uses
/// [`Crc32c::BUILTIN`], the fastest path this build has on its own.
///
/// A provider must compute CRC32C (Castagnoli, reflected, initial value and
/// final XOR `!0`): a wrong one makes every frame fail to parse at the peer,
/// but cannot make this crate misbehave otherwise. [`Crc32c::check`] tests a
/// provider against the catalogue value and the portable table.
///
/// Two providers compare equal when their names are equal (function
/// pointers have no reliable identity).
#[derive(Clone, Copy)]
pub struct Crc32c {
    name: &'static str,
    bytes: fn(&[u8]) -> u32,
    header: fn(&[u8; HEADER_COVERED]) -> u32,
}

impl Crc32c {
    /// This build's own path: the
    /// instruction if enabled at compile time, else with the `std` feature
    /// the `crc32c` crate's run-time detection, else the portable table.
    pub const BUILTIN: Crc32c = Crc32c {
        name: BUILTIN_NAME,
        bytes: crc32c,
        header: builtin_header,
    };

    /// The portable table, on every build (the reference of the tests).
    pub const PORTABLE: Crc32c = Crc32c {
        name: "portable table",
        bytes: portable,
        header: portable_header,
    };

    /// A provider from its functions: `bytes` computes the CRC32C of any
    /// slice, `header` that of the 44 bytes of a header its CRC covers
    /// (a fixed length lets it skip the loops and tails of `bytes`).
    pub const fn new(
        name: &'static str,
        bytes: fn(&[u8]) -> u32,
        header: fn(&[u8; HEADER_COVERED]) -> u32,
    ) -> Crc32c {
        Crc32c {
            name,
            bytes,
            header,
        }
    }

    /// CRC32C of `bytes`.
    #[inline(always)]
    pub fn checksum(&self, bytes: &[u8]) -> u32 {
        (self.bytes)(bytes)
    }

    /// CRC32C of the covered part of a header.
    #[inline(always)]
    pub fn header(&self, covered: &[u8; HEADER_COVERED]) -> u32 {
        (self.header)(covered)
    }

    /// What computes the CRC (for logs and reports).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Whether both functions give the catalogue check value and agree
    /// with the portable table on a few inputs of every length up to 300
    /// bytes and at every start within 8 bytes; for tests and start-up.
    pub fn check(&self) -> bool {
        const CHECK: u32 = 0xE306_9283;
        let mut data = [0u8; 308];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for b in data.iter_mut() {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            *b = (state >> 56) as u8;
        }
        if self.checksum(b"123456789") != CHECK || self.checksum(b"") != 0 {
            return false;
        }
        for offset in 0..8 {
            for len in 0..=300 {
                let input = &data[offset..offset + len];
                if self.checksum(input) != portable(input) {
                    return false;
                }
            }
            let Some(head) = data[offset..].first_chunk::<HEADER_COVERED>() else {
                return false;
            };
            if self.header(head) != portable(head) {
                return false;
            }
        }
        true
    }
}

impl Default for Crc32c {
    fn default() -> Crc32c {
        Crc32c::BUILTIN
    }
}

impl core::fmt::Debug for Crc32c {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("Crc32c").field(&self.name).finish()
    }
}

impl PartialEq for Crc32c {
    fn eq(&self, other: &Crc32c) -> bool {
        self.name == other.name
    }
}

impl Eq for Crc32c {}

#[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
const BUILTIN_NAME: &str = "sse4.2 (compile time)";
#[cfg(all(
    feature = "std",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    not(all(target_arch = "x86_64", target_feature = "sse4.2"))
))]
const BUILTIN_NAME: &str = "crc32c crate (run-time detection)";
#[cfg(not(any(
    all(target_arch = "x86_64", target_feature = "sse4.2"),
    all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64"))
)))]
const BUILTIN_NAME: &str = "portable table";

/// The header CRC by this build's own path. With the instruction compiled
/// in: one chain of five 8-byte steps and a 4-byte one. Otherwise the
/// covered bytes are first copied to an 8-byte aligned place, so that the
/// `crc32c` crate, which steps byte by byte up to the first 8-byte boundary,
/// takes whole words from the start.
#[inline]
fn builtin_header(covered: &[u8; HEADER_COVERED]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
    {
        use instruction::Crc32c as I;
        let mut crc = !0u32;
        let (words, tail) = covered.split_at(40);
        for word in words.chunks_exact(8) {
            crc = <I as Step>::u64(crc, le_u64(word));
        }
        let tail = tail
            .first_chunk::<4>()
            .map_or(0, |t| u32::from_le_bytes(*t));
        !<I as Step>::u32(crc, tail)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.2")))]
    {
        #[repr(C, align(8))]
        struct Aligned([u8; HEADER_COVERED]);
        let aligned = Aligned(*covered);
        crc32c(&aligned.0)
    }
}

fn portable_header(covered: &[u8; HEADER_COVERED]) -> u32 {
    portable(covered)
}

/// CRC32C of `bytes`: by the CPU's instruction where this build can use it
/// (see the [module documentation](self)), by table otherwise.
#[inline]
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    match hardware(bytes) {
        Some(crc) => crc,
        None => portable(bytes),
    }
}

/// The table-driven CRC32C (`crc` crate, 16 bytes per step); the reference
/// the hardware paths are tested against.
pub(crate) fn portable(bytes: &[u8]) -> u32 {
    static TABLE: crc::Crc<u32, crc::Table<16>> =
        crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
    TABLE.checksum(bytes)
}

/// CRC32C of `bytes` with the CPU's CRC32C instruction, chosen at compile
/// time (path 1 of the [module documentation](self)).
#[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
#[inline]
pub(crate) fn hardware(bytes: &[u8]) -> Option<u32> {
    Some(!update::<instruction::Crc32c>(!0, bytes))
}

/// CRC32C of `bytes` with the CPU's CRC32C instruction, chosen at run time
/// by the `crc32c` crate (path 2 of the [module documentation](self)). On a
/// CPU without the instruction that crate falls back to its own table, so
/// the value is then still an independent check of [`portable`].
#[cfg(all(
    feature = "std",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    not(all(target_arch = "x86_64", target_feature = "sse4.2"))
))]
#[inline]
pub(crate) fn hardware(bytes: &[u8]) -> Option<u32> {
    Some(::crc32c::crc32c(bytes))
}

/// `None`: this build has no path to the CPU's CRC32C instruction (neither
/// enabled at compile time nor, with the `std` feature, detectable at run
/// time on this architecture).
#[cfg(not(any(
    all(target_arch = "x86_64", target_feature = "sse4.2"),
    all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64"))
)))]
#[inline]
pub(crate) fn hardware(_bytes: &[u8]) -> Option<u32> {
    None
}

/// The striped algorithm of [`update`] on the software [`Step`]
/// ([`ByteTable`]): the same stripes, combines and tails as the hardware
/// path, so tests and fuzzing check them in a build without the instruction.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn striped_software(bytes: &[u8]) -> u32 {
    !update::<ByteTable>(!0, bytes)
}

/// One CRC32C instruction: folds 8, 4 or 1 little-endian bytes into the raw
/// (not inverted) register.
trait Step {
    fn u64(crc: u32, v: u64) -> u32;
    fn u32(crc: u32, v: u32) -> u32;
    fn u8(crc: u32, v: u8) -> u32;
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
mod instruction {
    /// SSE 4.2 `crc32`, through `safe_arch`'s safe wrappers.
    pub(super) struct Crc32c;

    impl super::Step for Crc32c {
        #[inline(always)]
        fn u64(crc: u32, v: u64) -> u32 {
            // The instruction clears the upper half of its 64-bit result.
            safe_arch::crc32_u64(u64::from(crc), v) as u32
        }
        #[inline(always)]
        fn u32(crc: u32, v: u32) -> u32 {
            safe_arch::crc32_u32(crc, v)
        }
        #[inline(always)]
        fn u8(crc: u32, v: u8) -> u32 {
            safe_arch::crc32_u8(crc, v)
        }
    }
}

/// The software [`Step`]: one lookup in a 256-entry table per byte. Slow,
/// but independent of both the instruction and the `crc` crate.
#[cfg(any(test, feature = "fuzzing"))]
struct ByteTable;

#[cfg(any(test, feature = "fuzzing"))]
impl ByteTable {
    const TABLE: [u32; 256] = {
        let mut table = [0; 256];
        let mut i = 0;
        while i < 256 {
            table[i] = zero_bits(i as u32, 8);
            i += 1;
        }
        table
    };
}

#[cfg(any(test, feature = "fuzzing"))]
impl Step for ByteTable {
    fn u64(crc: u32, v: u64) -> u32 {
        v.to_le_bytes().iter().fold(crc, |crc, &b| Self::u8(crc, b))
    }
    fn u32(crc: u32, v: u32) -> u32 {
        v.to_le_bytes().iter().fold(crc, |crc, &b| Self::u8(crc, b))
    }
    fn u8(crc: u32, v: u8) -> u32 {
        (crc >> 8) ^ Self::TABLE[usize::from((crc as u8) ^ v)]
    }
}

/// The raw register after folding `bytes` into `crc`, three stripes at a
/// time where the input is long enough (see the
/// [module documentation](self)). `crc32c(b) == !update(!0, b)`, and
/// `update(update(r, a), b) == update(r, a ‖ b)`.
#[cfg_attr(
    not(any(
        test,
        feature = "fuzzing",
        all(target_arch = "x86_64", target_feature = "sse4.2")
    )),
    expect(dead_code, reason = "only the hardware path and the tests stripe")
)]
#[inline]
fn update<S: Step>(mut crc: u32, mut bytes: &[u8]) -> u32 {
    (crc, bytes) = stripes::<S, 1024>(crc, bytes, &SHIFT_1024);
    (crc, bytes) = stripes::<S, 256>(crc, bytes, &SHIFT_256);
    (crc, bytes) = stripes::<S, 64>(crc, bytes, &SHIFT_64);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        crc = S::u64(crc, le_u64(word));
    }
    let mut tail = words.remainder();
    if let Some((word, rest)) = tail.split_first_chunk::<4>() {
        crc = S::u32(crc, u32::from_le_bytes(*word));
        tail = rest;
    }
    for &b in tail {
        crc = S::u8(crc, b);
    }
    crc
}

/// Folds `bytes` into `crc` in chunks of three `BLOCK`-byte stripes, one
/// instruction chain per stripe; returns the register and the bytes left
/// (fewer than `3 * BLOCK`). `shift` moves a register past `BLOCK` zero bytes.
#[inline(always)]
fn stripes<'a, S: Step, const BLOCK: usize>(
    mut crc: u32,
    mut bytes: &'a [u8],
    shift: &Shift,
) -> (u32, &'a [u8]) {
    while bytes.len() >= 3 * BLOCK {
        let (a, rest) = bytes.split_at(BLOCK);
        let (b, rest) = rest.split_at(BLOCK);
        let (c, rest) = rest.split_at(BLOCK);
        let (mut crc_a, mut crc_b, mut crc_c) = (crc, 0, 0);
        let words = a
            .chunks_exact(8)
            .zip(b.chunks_exact(8))
            .zip(c.chunks_exact(8));
        for ((wa, wb), wc) in words {
            crc_a = S::u64(crc_a, le_u64(wa));
            crc_b = S::u64(crc_b, le_u64(wb));
            crc_c = S::u64(crc_c, le_u64(wc));
        }
        crc = shift.apply(shift.apply(crc_a) ^ crc_b) ^ crc_c;
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

/// The linear map "fold in N zero bytes" of the raw register, as four
/// byte-indexed tables: `apply(r) = t[0][r₀] ^ t[1][r₁] ^ t[2][r₂] ^ t[3][r₃]`.
struct Shift([[u32; 256]; 4]);

static SHIFT_1024: Shift = Shift::zero_bytes(1024);
static SHIFT_256: Shift = Shift::zero_bytes(256);
static SHIFT_64: Shift = Shift::zero_bytes(64);

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
            one_bit[j] = zero_bits(1 << j, 1);
            j += 1;
        }
        let mut power = one_bit; // the map for 2^k bits
        let mut map = identity();
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

/// The register after shifting `bits` zero bits into `crc`, one at a time.
const fn zero_bits(mut crc: u32, bits: u32) -> u32 {
    let mut i = 0;
    while i < bits {
        crc = if crc & 1 == 1 {
            (crc >> 1) ^ POLY
        } else {
            crc >> 1
        };
        i += 1;
    }
    crc
}

const fn identity() -> [u32; 32] {
    let mut m = [0u32; 32];
    let mut j = 0;
    while j < 32 {
        m[j] = 1 << j;
        j += 1;
    }
    m
}

/// `m · v` over GF(2): the XOR of the columns of `m` picked by the bits of `v`.
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
    use std::vec::Vec;

    /// The catalogue check value of CRC-32/ISCSI over "123456789".
    const CHECK: u32 = 0xE306_9283;

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

    /// Lengths 0..=300 and the edges of each stripe size and of 4 KiB.
    fn lengths() -> impl Iterator<Item = usize> {
        let edges = [
            3 * 64,
            3 * 256,
            3 * 1024,
            4096,
            3 * 1024 + 3 * 256 + 3 * 64 + 63,
        ];
        (0..=300).chain(edges.into_iter().flat_map(|e| e - 9..=e + 9))
    }

    #[test]
    fn every_path_gives_the_check_value() {
        assert_eq!(portable(b"123456789"), CHECK);
        assert_eq!(striped_software(b"123456789"), CHECK);
        assert_eq!(crc32c(b"123456789"), CHECK);
        if let Some(crc) = hardware(b"123456789") {
            assert_eq!(crc, CHECK);
        }
    }

    #[test]
    fn the_cores_providers_pass_their_check_and_a_wrong_one_does_not() {
        assert!(Crc32c::BUILTIN.check());
        assert!(Crc32c::PORTABLE.check());
        assert_eq!(Crc32c::default(), Crc32c::BUILTIN);
        fn off_by_one(b: &[u8]) -> u32 {
            portable(b) ^ 1
        }
        fn header_off(b: &[u8; HEADER_COVERED]) -> u32 {
            portable(b) ^ 1
        }
        assert!(!Crc32c::new("x", off_by_one, portable_header).check());
        assert!(!Crc32c::new("x", portable, header_off).check());
    }

    #[test]
    fn builtin_header_equals_portable_at_every_alignment() {
        let data = bytes(HEADER_COVERED * 40, 0xABCD);
        for start in 0..HEADER_COVERED * 39 {
            let head = data[start..].first_chunk::<HEADER_COVERED>().unwrap();
            assert_eq!(builtin_header(head), portable(head), "start {start}");
        }
    }

    #[test]
    fn every_path_gives_zero_for_no_bytes() {
        assert_eq!(portable(b""), 0);
        assert_eq!(striped_software(b""), 0);
        assert_eq!(crc32c(b""), 0);
        assert!(hardware(b"").is_none_or(|crc| crc == 0));
    }

    #[test]
    #[cfg_attr(
        not(any(
            all(target_arch = "x86_64", target_feature = "sse4.2"),
            all(feature = "std", any(target_arch = "x86_64", target_arch = "aarch64"))
        )),
        ignore = "no hardware path in this build: run with --features std or \
                  RUSTFLAGS='-C target-feature=+sse4.2'"
    )]
    fn hardware_matches_portable_at_every_length_and_misalignment() {
        let data = bytes(4200, 0x5EED_C3C3);
        for len in lengths() {
            for offset in 0..8 {
                let input = &data[offset..offset + len];
                assert_eq!(
                    hardware(input),
                    Some(portable(input)),
                    "len {len} offset {offset}"
                );
                assert_eq!(crc32c(input), portable(input), "len {len} offset {offset}");
            }
        }
    }

    #[test]
    fn striped_software_matches_portable_at_every_length_and_misalignment() {
        let data = bytes(4200, 0x00DD_BA11);
        for len in lengths() {
            for offset in 0..8 {
                let input = &data[offset..offset + len];
                assert_eq!(
                    striped_software(input),
                    portable(input),
                    "len {len} offset {offset}"
                );
            }
        }
    }

    #[test]
    fn update_in_two_parts_equals_update_in_one() {
        let data = bytes(3 * 256 + 77, 0xFEED);
        let whole = update::<ByteTable>(!0, &data);
        for split in 0..=data.len() {
            let (a, b) = data.split_at(split);
            let parts = update::<ByteTable>(update::<ByteTable>(!0, a), b);
            assert_eq!(parts, whole, "split at {split}");
        }
        assert_eq!(update::<ByteTable>(0x1234_5678, b""), 0x1234_5678);
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
    #[test]
    fn instruction_update_in_two_parts_equals_update_in_one() {
        use super::instruction::Crc32c;
        let data = bytes(3 * 1024 + 3 * 64 + 13, 0xBEEF);
        let whole = update::<Crc32c>(!0, &data);
        assert_eq!(whole, update::<ByteTable>(!0, &data));
        for split in 0..=data.len() {
            let (a, b) = data.split_at(split);
            let parts = update::<Crc32c>(update::<Crc32c>(!0, a), b);
            assert_eq!(parts, whole, "split at {split}");
        }
        assert_eq!(update::<Crc32c>(0x1234_5678, b""), 0x1234_5678);
    }

    #[test]
    fn shift_table_equals_folding_in_zero_bytes() {
        let zeros = [0u8; 1024];
        for (shift, n) in [(&SHIFT_64, 64), (&SHIFT_256, 256), (&SHIFT_1024, 1024)] {
            for seed in 0..64u64 {
                let reg = bytes(4, seed)
                    .iter()
                    .fold(0u32, |r, &b| (r << 8) | u32::from(b));
                let folded = zeros[..n].iter().fold(reg, |r, &b| ByteTable::u8(r, b));
                assert_eq!(shift.apply(reg), folded, "{n} zero bytes from {reg:#010x}");
            }
        }
    }
}
