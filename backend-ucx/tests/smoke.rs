//! Smoke test of the UCX that the build linked: a context with tag
//! matching, a single-threaded worker and its address, released in the
//! reverse order, and the loaded libucp checked against the build's.

use std::ffi::CStr;
use std::ptr;

use iomsg_ucx::version::{ucx_version, BUILT_VERSION};
use iomsg_ucx_sys::{
    ucp_cleanup, ucp_context_h, ucp_init_version, ucp_params_t, ucp_worker_attr_t,
    ucp_worker_create, ucp_worker_destroy, ucp_worker_get_address, ucp_worker_h,
    ucp_worker_params_t, ucp_worker_query, ucp_worker_release_address, ucs_status_string,
    ucs_status_t, UCP_API_MAJOR, UCP_API_MINOR, UCP_FEATURE_TAG, UCP_PARAM_FIELD_FEATURES,
    UCP_WORKER_ATTR_FIELD_THREAD_MODE, UCP_WORKER_PARAM_FIELD_THREAD_MODE, UCS_OK,
    UCS_THREAD_MODE_SINGLE,
};

/// `ucs_status_string` as an owned string, for assertion messages.
fn status_text(status: ucs_status_t) -> String {
    // SAFETY: ucs_status_string takes any integer and returns a pointer to a
    // static NUL-terminated string (a generic text for unknown codes).
    let text = unsafe { CStr::from_ptr(ucs_status_string(status)) };
    format!("{status} ({})", text.to_string_lossy())
}

#[test]
fn context_worker_and_address_on_the_linked_ucx() {
    let params = ucp_params_t {
        field_mask: u64::from(UCP_PARAM_FIELD_FEATURES),
        features: u64::from(UCP_FEATURE_TAG),
        ..Default::default()
    };
    let mut context: ucp_context_h = ptr::null_mut();
    // SAFETY: `params` is initialised and its field_mask names only
    // `features`; a NULL config makes UCX read its environment; `context`
    // is a live local that ucp_init_version writes once.
    let status = unsafe {
        ucp_init_version(
            UCP_API_MAJOR,
            UCP_API_MINOR,
            &params,
            ptr::null(),
            &mut context,
        )
    };
    assert_eq!(status, UCS_OK, "ucp_init_version: {}", status_text(status));
    assert!(!context.is_null());

    let worker_params = ucp_worker_params_t {
        field_mask: u64::from(UCP_WORKER_PARAM_FIELD_THREAD_MODE),
        thread_mode: UCS_THREAD_MODE_SINGLE,
        ..Default::default()
    };
    let mut worker: ucp_worker_h = ptr::null_mut();
    // SAFETY: `context` is the live context created above; `worker_params`
    // is initialised and its field_mask names only `thread_mode`; `worker`
    // is a live local.
    let status = unsafe { ucp_worker_create(context, &worker_params, &mut worker) };
    assert_eq!(status, UCS_OK, "ucp_worker_create: {}", status_text(status));
    assert!(!worker.is_null());

    let mut attr = ucp_worker_attr_t {
        field_mask: u64::from(UCP_WORKER_ATTR_FIELD_THREAD_MODE),
        ..Default::default()
    };
    // SAFETY: `worker` is live; `attr` is a live local whose field_mask
    // asks for the thread mode only.
    let status = unsafe { ucp_worker_query(worker, &mut attr) };
    assert_eq!(status, UCS_OK, "ucp_worker_query: {}", status_text(status));
    assert_eq!(attr.thread_mode, UCS_THREAD_MODE_SINGLE);

    let mut address = ptr::null_mut();
    let mut address_len = 0usize;
    // SAFETY: `worker` is live; `address` and `address_len` are live locals
    // that UCX fills with a buffer it owns until ucp_worker_release_address.
    let status = unsafe { ucp_worker_get_address(worker, &mut address, &mut address_len) };
    assert_eq!(
        status,
        UCS_OK,
        "ucp_worker_get_address: {}",
        status_text(status)
    );
    assert!(!address.is_null());
    assert!(address_len > 0, "an empty worker address");
    // SAFETY: UCX returned `address` with `address_len` readable bytes,
    // valid until the release below; the slice is copied at once.
    let bytes = unsafe { std::slice::from_raw_parts(address.cast::<u8>(), address_len) }.to_vec();
    assert!(
        bytes.iter().any(|&b| b != 0),
        "a worker address of {address_len} zero bytes"
    );

    // Release in the reverse order of creation: the address belongs to the
    // worker, the worker to the context.
    // SAFETY: `address` came from ucp_worker_get_address on this live
    // worker and is released once, and not used afterwards.
    unsafe { ucp_worker_release_address(worker, address) };
    // SAFETY: `worker` is live, has no endpoints or requests, and is not
    // used afterwards.
    unsafe { ucp_worker_destroy(worker) };
    // SAFETY: `context` is live, its only worker is destroyed, and it is
    // not used afterwards.
    unsafe { ucp_cleanup(context) };

    let loaded = ucx_version();
    assert_eq!(
        loaded.number(),
        BUILT_VERSION,
        "the loaded libucp ({loaded}) is not the UCX pkg-config gave the build"
    );
}
