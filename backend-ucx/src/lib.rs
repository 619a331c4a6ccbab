//! UCX transport for iomsg: the crate that holds the project's only unsafe
//! code, over the `ucx1-sys` bindings (iomsg's patched copy in
//! `vendor/ucx1-sys`, linked to the UCX that `pkg-config ucx` finds or the
//! one under `IOMSG_UCX_PREFIX`).
//!
//! So far: [`version`], which UCX the crate was built against and which
//! libucp this process loaded. The transport itself (context, worker,
//! listener, endpoints, tag send and receive) comes next.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod version;
