//! Rust FFI bindings to UCX (`ucp`, `uct`, `ucs`, `ucm`), linked to the UCX
//! that `pkg-config ucx` finds: the bindings under `iomsg-ucx`.
//!
//! It grew from ucx1-sys 0.1.0 (MIT, by Runji Wang; its LICENSE is kept in
//! this crate) and differs from it where that crate was unsafe to build or
//! to use:
//!
//! - **Which UCX.** ucx1-sys always built its bundled UCX 1.12.1 (no verbs,
//!   no multi-threading), ignored the exit status of autogen, configure and
//!   make (falling back silently to whatever libucp the linker found), and
//!   linked libucp without an rpath, so `cargo test` loaded one libucp and
//!   the same binary started by hand another. This crate links the UCX that
//!   `pkg-config ucx` finds, or the one under `IOMSG_UCX_PREFIX`, needs
//!   1.11 or newer, fails the build with what to install when there is
//!   none, and records the library's directory as an rpath
//!   ([`UCX_LIBDIR`]; dependents repeat it from `DEP_UCP_LIBDIR`, as
//!   `links = "ucp"` hands it to their build scripts). There is no bundled
//!   build: a UCX of one's own is built once, outside cargo, and named by
//!   its install prefix. On docs.rs the crate documents the bindings it
//!   ships, generated from UCX 1.13.1, and links nothing.
//! - **Enums are integers.** Every C enum is an integer type alias with one
//!   constant per enumerator, named as in C (`ucs_status_t` is `i8`,
//!   `UCS_OK`, `UCS_ERR_NO_MEMORY`, `UCP_FEATURE_TAG`, ...). The published
//!   crate made them Rust enums, and a status that a newer UCX returns but
//!   the headers did not list is undefined behaviour when read as one.
//! - **Status pointers never panic.** [`ucs_ptr_is_ptr`],
//!   [`ucs_ptr_is_err`], [`ucs_ptr_status`] replace `UCS_PTR_IS_PTR` and
//!   friends, which computed `ptr - 1` and panicked (debug builds) on the
//!   NULL that `*_nbx` calls return when they complete at once.
//! - **`Default`** is derived for the structs (all zero, valid now that no
//!   field is a Rust enum), so a parameter struct needs only the fields its
//!   `field_mask` names:
//!   `ucp_params_t { field_mask, features, ..Default::default() }`.
//! - **`ucp_init`**, a `static inline` in C that bindgen cannot bind, is
//!   here as a Rust function calling `ucp_init_version`.
//!
//! [`check_ucx_version`] compares the libucp loaded at run time with the
//! one the crate was built against.

use core::ffi::c_void;
use std::fmt;

pub use bindings::*;

/// What bindgen generated from wrapper.h, C names and C doc comments
/// (Doxygen, which rustdoc misreads) included; re-exported at the crate
/// root. The lints are off here only: it is not our code.
#[allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#[allow(missing_docs, clippy::all, clippy::undocumented_unsafe_blocks)]
#[allow(rustdoc::all)]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

include!(concat!(env!("OUT_DIR"), "/ucx_build.rs"));

/// `ucp_init` of `ucp/api/ucp.h`: [`ucp_init_version`] with the API version
/// of the headers these bindings were generated from.
///
/// # Safety
///
/// As for `ucp_init_version`: `params` points to an initialised
/// [`ucp_params_t`] whose `field_mask` names the fields that are set, and
/// whose pointers (name, callbacks) are valid for the context's lifetime;
/// `config` is NULL or a live configuration from `ucp_config_read`;
/// `context_p` is valid for writing one [`ucp_context_h`].
pub unsafe fn ucp_init(
    params: *const ucp_params_t,
    config: *const ucp_config_t,
    context_p: *mut ucp_context_h,
) -> ucs_status_t {
    // SAFETY: the caller upholds ucp_init_version's contract (see # Safety).
    unsafe { ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, context_p) }
}

/// `ucp_dt_make_contig`: the datatype of contiguous elements of
/// `elem_size` bytes.
pub const fn ucp_dt_make_contig(elem_size: usize) -> ucp_datatype_t {
    ((elem_size as ucp_datatype_t) << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG as ucp_datatype_t
}

/// `UCS_ERR_LAST` as the address C compares status pointers with
/// (`(uintptr_t)UCS_ERR_LAST`).
const ERR_LAST_ADDR: usize = UCS_ERR_LAST as isize as usize;

/// `UCS_PTR_IS_ERR`: `ptr` encodes an error status (not NULL, not a
/// request). Never panics.
pub fn ucs_ptr_is_err(ptr: ucs_status_ptr_t) -> bool {
    ptr.addr() >= ERR_LAST_ADDR
}

/// `UCS_PTR_IS_PTR`: `ptr` is a request (neither NULL nor an error
/// status). Never panics: NULL is not a request.
pub fn ucs_ptr_is_ptr(ptr: ucs_status_ptr_t) -> bool {
    ptr.addr().wrapping_sub(1) < ERR_LAST_ADDR.wrapping_sub(1)
}

/// `UCS_PTR_STATUS`: [`UCS_INPROGRESS`] for a request, [`UCS_OK`] for NULL
/// (completed at once), else the error status `ptr` encodes. Never panics;
/// the result is a plain integer, so a status the headers do not list is
/// still a valid value.
pub fn ucs_ptr_status(ptr: ucs_status_ptr_t) -> ucs_status_t {
    if ucs_ptr_is_ptr(ptr) {
        UCS_INPROGRESS
    } else {
        // `(ucs_status_t)(intptr_t)ptr`: NULL is 0 (UCS_OK), an error
        // status pointer is the sign-extended status.
        ptr.addr() as isize as ucs_status_t
    }
}

/// `UCS_STATUS_PTR`: `status` encoded as a status pointer.
pub fn ucs_status_ptr(status: ucs_status_t) -> ucs_status_ptr_t {
    core::ptr::without_provenance_mut::<c_void>(status as isize as usize)
}

/// `UCS_STATUS_IS_ERR`: `status` is an error (negative).
pub fn ucs_status_is_err(status: ucs_status_t) -> bool {
    status < 0
}

/// A UCX version as (major, minor, release).
pub type VersionNumbers = (u32, u32, u32);

/// The UCX this crate was built against and the libucp loaded at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UcxVersions {
    /// [`UCX_VERSION`]'s numbers: pkg-config's version at build time.
    pub built: VersionNumbers,
    /// What `ucp_get_version` of the loaded libucp reports.
    pub loaded: VersionNumbers,
}

impl UcxVersions {
    /// Both versions, the loaded one asked of libucp now.
    pub fn current() -> Self {
        let (mut major, mut minor, mut release) = (0, 0, 0);
        // SAFETY: ucp_get_version only writes one unsigned through each
        // pointer, and each points to a live local u32 (`unsigned`).
        unsafe { ucp_get_version(&mut major, &mut minor, &mut release) };
        Self {
            built: (UCX_VERSION_MAJOR, UCX_VERSION_MINOR, UCX_VERSION_RELEASE),
            loaded: (major, minor, release),
        }
    }

    /// Whether the loaded libucp has the major.minor the bindings were
    /// generated for (UCX keeps its ABI within a minor version).
    pub fn same_minor(&self) -> bool {
        self.built.0 == self.loaded.0 && self.built.1 == self.loaded.1
    }
}

/// The libucp loaded at run time is another major.minor than the UCX the
/// crate was built against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VersionMismatch(pub UcxVersions);

impl fmt::Display for VersionMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let UcxVersions { built, loaded } = self.0;
        write!(
            f,
            "the libucp loaded at run time is UCX {}.{}.{}, but iomsg-ucx-sys was built against \
             UCX {}.{}.{} from {}: unset LD_LIBRARY_PATH/LD_PRELOAD entries that point at \
             another UCX, or rebuild (cargo clean -p iomsg-ucx-sys) against the UCX you mean to run",
            loaded.0, loaded.1, loaded.2, built.0, built.1, built.2, UCX_LIBDIR
        )
    }
}

impl std::error::Error for VersionMismatch {}

/// Compares the loaded libucp's major.minor with the build's; returns both
/// versions either way.
pub fn check_ucx_version() -> Result<UcxVersions, VersionMismatch> {
    let versions = UcxVersions::current();
    if versions.same_minor() {
        Ok(versions)
    } else {
        Err(VersionMismatch(versions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(a: usize) -> ucs_status_ptr_t {
        core::ptr::without_provenance_mut(a)
    }

    #[test]
    fn null_is_ok_not_ptr_not_err() {
        let null = core::ptr::null_mut();
        assert!(!ucs_ptr_is_ptr(null));
        assert!(!ucs_ptr_is_err(null));
        assert_eq!(ucs_ptr_status(null), UCS_OK);
    }

    #[test]
    fn request_pointers_are_in_progress() {
        for a in [1, 0x1000, usize::MAX / 2, ERR_LAST_ADDR - 1] {
            assert!(ucs_ptr_is_ptr(addr(a)), "{a:#x}");
            assert!(!ucs_ptr_is_err(addr(a)), "{a:#x}");
            assert_eq!(ucs_ptr_status(addr(a)), UCS_INPROGRESS, "{a:#x}");
        }
    }

    #[test]
    fn error_status_pointers_round_trip_including_unlisted_ones() {
        // -1 ... -100 (UCS_ERR_LAST), listed in the headers or not.
        for status in UCS_ERR_LAST..0 {
            let p = ucs_status_ptr(status);
            assert!(ucs_ptr_is_err(p), "{status}");
            assert!(!ucs_ptr_is_ptr(p), "{status}");
            assert_eq!(ucs_ptr_status(p), status);
            assert!(ucs_status_is_err(status));
        }
        assert_eq!(ucs_status_ptr(UCS_OK), core::ptr::null_mut());
        assert!(!ucs_status_is_err(UCS_OK));
        assert!(!ucs_status_is_err(UCS_INPROGRESS));
    }

    #[test]
    fn status_is_a_plain_integer() {
        // Any i8 is a valid ucs_status_t, including ones no header lists.
        let unlisted: ucs_status_t = -77;
        assert!(ucs_status_is_err(unlisted));
        assert_eq!(core::mem::size_of::<ucs_status_t>(), 1);
    }

    #[test]
    fn contig_datatype_matches_c() {
        // UCP_DT_MAKE_CONTIG(_elem_size):
        // ((ucp_datatype_t)(_elem_size) << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG
        let contig = u64::from(UCP_DATATYPE_CONTIG);
        assert_eq!(ucp_dt_make_contig(1), (1 << UCP_DATATYPE_SHIFT) | contig);
        assert_eq!(ucp_dt_make_contig(8), (8 << UCP_DATATYPE_SHIFT) | contig);
        assert_ne!(ucp_dt_make_contig(1), ucp_dt_make_contig(8));
    }

    #[test]
    fn loaded_libucp_is_the_built_one() {
        let versions = check_ucx_version().unwrap_or_else(|e| panic!("{e}"));
        // The rpath makes the test binary load the very library it linked.
        assert_eq!(
            versions.loaded, versions.built,
            "built against {UCX_VERSION}"
        );
    }
}
