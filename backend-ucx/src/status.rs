//! UCX status codes, taken as integers at the boundary.
//!
//! `ucs_status_t` is an `i8` in the bindings (a C enum would be undefined
//! behaviour for a value the headers do not list: a newer libucp's).
//! [`Status`] wraps it, names it through `ucs_status_string`, and converts
//! the status pointers that `*_nbx` calls return.

use core::ffi::{c_void, CStr};
use core::fmt;

use ucx1_sys as sys;

/// A UCX status code.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub sys::ucs_status_t);

impl Status {
    /// `UCS_OK`.
    pub const OK: Status = Status(sys::UCS_OK);
    /// `UCS_INPROGRESS`.
    pub const IN_PROGRESS: Status = Status(sys::UCS_INPROGRESS);

    /// Whether it is `UCS_OK`.
    pub fn is_ok(self) -> bool {
        self == Status::OK
    }

    /// `Ok(())` for `UCS_OK`, the status otherwise.
    ///
    /// # Errors
    ///
    /// Any status other than `UCS_OK`.
    pub fn check(self) -> Result<(), Status> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// UCX's own name for it.
    pub fn name(self) -> &'static str {
        // SAFETY: ucs_status_string accepts any value and returns a pointer
        // to a static NUL-terminated string ("Unknown error" for values it
        // does not list).
        let s = unsafe { CStr::from_ptr(sys::ucs_status_string(self.0)) };
        s.to_str().unwrap_or("(status string not UTF-8)")
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Status({}: {})", self.0, self.name())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UCX status {} ({})", self.0, self.name())
    }
}

impl std::error::Error for Status {}

/// What a `ucs_status_ptr_t` says.
pub(crate) enum Pending {
    /// Completed at once (NULL or an `UCS_OK` pointer).
    Done,
    /// Failed at once.
    Failed(Status),
    /// In progress: the request, to be freed once complete.
    Request(*mut c_void),
}

impl Pending {
    /// Reads a status pointer.
    pub(crate) fn from_ptr(ptr: sys::ucs_status_ptr_t) -> Pending {
        if sys::ucs_ptr_is_ptr(ptr) {
            Pending::Request(ptr)
        } else {
            let status = Status(sys::ucs_ptr_status(ptr));
            if status.is_ok() {
                Pending::Done
            } else {
                Pending::Failed(status)
            }
        }
    }
}
