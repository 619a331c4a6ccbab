//! Which UCX: the version the crate was built against (what pkg-config
//! reported at build time) and the libucp loaded in this process.
//!
//! The two can differ when a binary is started with another UCX first in
//! the loader's path (`LD_LIBRARY_PATH`, `LD_PRELOAD`); the rpath that the
//! build gives tests, examples and benches makes them load the library
//! they linked.

use std::ffi::{c_void, CStr, OsStr};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The UCX version the bindings were generated from and linked to
/// (`pkg-config --modversion ucx` at build time), e.g. `"1.13.1"`.
pub const BUILT_VERSION: &str = iomsg_ucx_sys::UCX_VERSION;

/// The directory of the libucp linked at build time; binaries carry it as
/// their rpath.
pub const BUILT_LIBDIR: &str = iomsg_ucx_sys::UCX_LIBDIR;

/// The libucp loaded in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UcxVersion {
    /// Major version, from `ucp_get_version`.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Release number.
    pub release: u32,
    /// The file the dynamic loader opened for libucp (from `dladdr` on
    /// `ucp_get_version`), e.g. `/usr/lib/x86_64-linux-gnu/libucp.so.0`.
    /// `None` when the loader names no file whose name starts with
    /// `libucp` for that symbol.
    pub library_path: Option<PathBuf>,
}

impl UcxVersion {
    /// Whether this is the major.minor that the bindings were generated
    /// for (UCX keeps its ABI within a minor version).
    pub fn matches_build(&self) -> bool {
        (self.major, self.minor)
            == (
                iomsg_ucx_sys::UCX_VERSION_MAJOR,
                iomsg_ucx_sys::UCX_VERSION_MINOR,
            )
    }

    /// `"major.minor.release"`, comparable with [`BUILT_VERSION`].
    pub fn number(&self) -> String {
        format!("{}.{}.{}", self.major, self.minor, self.release)
    }
}

impl fmt::Display for UcxVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UCX {}", self.number())?;
        match &self.library_path {
            Some(path) => write!(f, " ({})", path.display()),
            None => write!(f, " (library path unknown)"),
        }
    }
}

/// The version and file of the libucp loaded in this process.
pub fn ucx_version() -> UcxVersion {
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: ucp_get_version writes one `unsigned` through each pointer
    // and keeps none of them; each points to a live local u32.
    unsafe { iomsg_ucx_sys::ucp_get_version(&mut major, &mut minor, &mut release) };
    UcxVersion {
        major,
        minor,
        release,
        library_path: library_path(),
    }
}

/// The file that defines the `ucp_get_version` this process calls.
fn library_path() -> Option<PathBuf> {
    let symbol = iomsg_ucx_sys::ucp_get_version as *const c_void;
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only looks the address up among the loaded objects
    // (it never dereferences it) and writes `info`, a live local.
    let found = unsafe { libc::dladdr(symbol, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr succeeded, so dli_fname points to the NUL-terminated
    // name of the object, owned by the loader while the object stays
    // loaded; libucp is a DT_NEEDED library, never unloaded, and the name
    // is copied before this function returns.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(OsStr::from_bytes(name.to_bytes()));
    // A non-PIE executable may own the symbol's canonical address (a PLT
    // entry): then the name is the executable's, not libucp's.
    is_libucp(&path).then_some(path)
}

fn is_libucp(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name.as_bytes().starts_with(b"libucp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_version_is_the_built_one() {
        let loaded = ucx_version();
        assert!(
            loaded.matches_build(),
            "{loaded}, built against {BUILT_VERSION}"
        );
        assert_eq!(loaded.number(), BUILT_VERSION, "{loaded}");
    }

    #[test]
    fn loaded_library_is_in_the_built_libdir() {
        let loaded = ucx_version();
        let path = loaded
            .library_path
            .as_deref()
            .unwrap_or_else(|| panic!("dladdr named no libucp: {loaded}"));
        let dir = path.parent().expect("dladdr gives a path with a directory");
        assert_eq!(
            std::fs::canonicalize(dir).expect("the loaded library's directory exists"),
            std::fs::canonicalize(BUILT_LIBDIR).expect("the build's libdir exists"),
            "{loaded}, built against {BUILT_LIBDIR}"
        );
    }

    #[test]
    fn display_names_version_and_file() {
        let v = UcxVersion {
            major: 1,
            minor: 13,
            release: 1,
            library_path: Some(PathBuf::from("/opt/ucx/lib/libucp.so.0")),
        };
        assert_eq!(v.to_string(), "UCX 1.13.1 (/opt/ucx/lib/libucp.so.0)");
        let unknown = UcxVersion {
            library_path: None,
            ..v
        };
        assert_eq!(unknown.to_string(), "UCX 1.13.1 (library path unknown)");
    }

    #[test]
    fn only_libucp_files_count_as_libucp() {
        assert!(is_libucp(Path::new(
            "/usr/lib/x86_64-linux-gnu/libucp.so.0"
        )));
        assert!(!is_libucp(Path::new(
            "/tmp/target/debug/deps/iomsg_ucx-1234"
        )));
        assert!(!is_libucp(Path::new("/")));
    }
}
