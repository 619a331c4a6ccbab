//! UCX status codes, taken as integers at the boundary.
//!
//! `ucs_status_t` is an `i8` in the bindings (a C enum would be undefined
//! behaviour for a value the headers do not list: a newer libucp's).
//! [`Status`] wraps it, names it through `ucs_status_string`, and converts
//! the status pointers that `*_nbx` calls return.

use core::ffi::{c_void, CStr};
use core::fmt;

use iomsg_core::transport::Cause;
use iomsg_ucx_sys as sys;

/// UCX 1.13.1's status codes (`ucs/type/status.h`): name and the text
/// `ucs_status_string` gives.
const STATUSES: &[(i8, &str, &str)] = &[
    (0, "UCS_OK", "Success"),
    (1, "UCS_INPROGRESS", "Operation in progress"),
    (-1, "UCS_ERR_NO_MESSAGE", "No pending message"),
    (
        -2,
        "UCS_ERR_NO_RESOURCE",
        "No resources are available to initiate the operation",
    ),
    (-3, "UCS_ERR_IO_ERROR", "Input/output error"),
    (-4, "UCS_ERR_NO_MEMORY", "Out of memory"),
    (-5, "UCS_ERR_INVALID_PARAM", "Invalid parameter"),
    (-6, "UCS_ERR_UNREACHABLE", "Destination is unreachable"),
    (-7, "UCS_ERR_INVALID_ADDR", "Address not valid"),
    (-8, "UCS_ERR_NOT_IMPLEMENTED", "Function not implemented"),
    (-9, "UCS_ERR_MESSAGE_TRUNCATED", "Message truncated"),
    (-10, "UCS_ERR_NO_PROGRESS", "No progress"),
    (
        -11,
        "UCS_ERR_BUFFER_TOO_SMALL",
        "Provided buffer is too small",
    ),
    (-12, "UCS_ERR_NO_ELEM", "No such element"),
    (
        -13,
        "UCS_ERR_SOME_CONNECTS_FAILED",
        "Failed to connect some of the requested endpoints",
    ),
    (-14, "UCS_ERR_NO_DEVICE", "No such device"),
    (-15, "UCS_ERR_BUSY", "Device is busy"),
    (-16, "UCS_ERR_CANCELED", "Request canceled"),
    (-17, "UCS_ERR_SHMEM_SEGMENT", "Shared memory error"),
    (-18, "UCS_ERR_ALREADY_EXISTS", "Element already exists"),
    (-19, "UCS_ERR_OUT_OF_RANGE", "Index out of range"),
    (-20, "UCS_ERR_TIMED_OUT", "Operation timed out"),
    (
        -21,
        "UCS_ERR_EXCEEDS_LIMIT",
        "User-defined limit was reached",
    ),
    (-22, "UCS_ERR_UNSUPPORTED", "Unsupported operation"),
    (-23, "UCS_ERR_REJECTED", "Operation rejected by remote peer"),
    (-24, "UCS_ERR_NOT_CONNECTED", "Endpoint is not connected"),
    (
        -25,
        "UCS_ERR_CONNECTION_RESET",
        "Connection reset by remote peer",
    ),
    (-80, "UCS_ERR_ENDPOINT_TIMEOUT", "Endpoint timeout"),
];

/// The name and text of `code`, or `("", "")`; the ranges UCX reserves
/// for link and endpoint failures get their range's name.
fn describe(code: sys::ucs_status_t) -> (&'static str, &'static str) {
    if let Some(&(_, name, text)) = STATUSES.iter().find(|s| s.0 == code) {
        return (name, text);
    }
    match code {
        -59..=-40 => ("UCS_ERR_LINK_FAILURE", "Link failure"),
        -89..=-60 => ("UCS_ERR_ENDPOINT_FAILURE", "Endpoint failure"),
        _ => ("", ""),
    }
}

/// A UCX status code (`ucs_status_t`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub(crate) sys::ucs_status_t);

impl Status {
    /// The C value (`UCS_ERR_NO_MEMORY` is -4, ...).
    #[must_use]
    pub const fn code(self) -> i8 {
        self.0
    }

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

    /// The name UCX's headers give it (`UCS_ERR_UNREACHABLE`), from a
    /// table of UCX 1.13.1's codes; `""` for a code it does not list.
    pub fn code_name(self) -> &'static str {
        describe(self.0).0
    }

    /// What UCX says it means (`ucs_status_string`'s text, from the same
    /// table); `""` for a code it does not list.
    pub fn text(self) -> &'static str {
        describe(self.0).1
    }

    /// The core's view of it: code, name and text.
    pub fn cause(self) -> Cause {
        let (name, text) = describe(self.0);
        Cause {
            code: i32::from(self.0),
            name,
            text,
        }
    }

    /// UCX's own text for it (`ucs_status_string` of the loaded libucs).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_agrees_with_the_linked_ucx_and_fills_causes() {
        for &(code, name, text) in STATUSES {
            assert!(name.starts_with("UCS_"), "{name}");
            assert_eq!(Status(code).name(), text, "{name}");
        }
        let c = Status(sys::UCS_ERR_UNREACHABLE).cause();
        assert_eq!(
            (c.code, c.name, c.text),
            (-6, "UCS_ERR_UNREACHABLE", "Destination is unreachable")
        );
        assert_eq!(Status(-45).code_name(), "UCS_ERR_LINK_FAILURE");
        assert_eq!(
            Status(-99).cause(),
            Cause {
                code: -99,
                name: "",
                text: ""
            }
        );
    }
}
