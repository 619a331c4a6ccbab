//! Which transports UCX offers on this machine: the UCT resource query
//! that `ucx_info -d` prints.
//!
//! [`transports`] walks UCT's components (`uct_query_components`), each
//! component's memory domains (`uct_component_query`), and each memory
//! domain's transport resources (`uct_md_open`,
//! `uct_md_query_tl_resources`). Every list, configuration and memory
//! domain UCX hands out is owned by a guard here whose `Drop` gives it
//! back, so each is freed exactly once on every path, errors included.

use core::ffi::{c_char, c_uint, c_void};
use core::ptr;
use core::slice;

use iomsg_ucx_sys as sys;

use crate::Status;

/// A transport UCX offers on this machine: its name and device (as
/// `ucx_info -d` lists them), e.g. `tcp` on `lo`, `posix` on `memory`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resource {
    /// The transport's name (`tl_name`), e.g. `tcp`, `self`, `posix`:
    /// the names `UCX_TLS` takes.
    pub transport: String,
    /// The device the transport runs on (`dev_name`), e.g. `lo`,
    /// `memory`, `mlx5_0:1`: the names `UCX_NET_DEVICES` takes for
    /// network devices.
    pub device: String,
    /// The UCT component whose memory domain lists it, e.g. `tcp`, `ib`.
    pub component: String,
}

/// Every transport resource UCX's components offer here (the UCT query:
/// components, their memory domains, each domain's transport resources),
/// sorted, without duplicates.
///
/// This is what UCT lists, which is what `ucx_info -d` prints: the
/// environment counts as UCX counts it at this level, so `UCX_MODULES`
/// decides which component modules load and each memory domain reads its
/// own `UCX_<COMPONENT>_*` settings (e.g. `UCX_SELF_NUM_DEVICES`), but
/// `UCX_TLS` and `UCX_NET_DEVICES` filter nothing here: they are UCP
/// settings, applied when `ucp_init` picks among these resources.
///
/// A memory domain whose configuration cannot be read or that fails to
/// open is left out, as `ucp_init` and `ucx_info` leave it out (e.g. a
/// device that disappeared between the listing and the open).
///
/// # Errors
///
/// The status of the first UCT call that fails otherwise: listing the
/// components, querying a component, or listing a memory domain's
/// transport resources. `UCS_ERR_NO_MEMORY` is the likely one.
pub fn transports() -> Result<Vec<Resource>, Status> {
    let components = ComponentList::query()?;
    let mut found = Vec::new();
    for &component in components.as_slice() {
        component_resources(component, &mut found)?;
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// How many more memory domains than the first query counted the buffer
/// for the second query holds (see [`component_resources`]).
const MD_SLACK: usize = 8;

/// Appends the transport resources of every memory domain of `component`.
fn component_resources(
    component: sys::uct_component_h,
    found: &mut Vec<Resource>,
) -> Result<(), Status> {
    let mut attr = sys::uct_component_attr_t {
        field_mask: u64::from(
            sys::UCT_COMPONENT_ATTR_FIELD_NAME | sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT,
        ),
        ..Default::default()
    };
    // SAFETY: `component` comes from the live list of a successful
    // uct_query_components (components are static objects of modules that
    // UCX never unloads); `attr` is a live local whose field_mask names
    // only `name` (an array UCT fills NUL-terminated within its size) and
    // `md_resource_count`, the only fields UCT writes.
    Status(unsafe { sys::uct_component_query(component, &mut attr) }).check()?;
    let name = string_from_c(&attr.name);
    let count = len(attr.md_resource_count);
    if count == 0 {
        return Ok(());
    }

    // UCT copies as many descriptors as the component lists at the time
    // of this second call, which could exceed the first call's count if
    // devices appeared in between: leave room for a few more, and ask for
    // the count again to know how many it wrote.
    let mut mds = vec![sys::uct_md_resource_desc_t::default(); count.saturating_add(MD_SLACK)];
    attr.field_mask = u64::from(
        sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT
            | sys::UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES,
    );
    attr.md_resources = mds.as_mut_ptr();
    // SAFETY: as above for `component` and `attr`; `md_resources` points to
    // `mds.len()` initialised descriptors, which outlive the call, and UCT
    // writes one per memory domain the component lists now: at most
    // `mds.len()` unless more than MD_SLACK memory domains appeared since
    // the previous call (a burst of hot-plugged devices within
    // microseconds), the same two-call protocol that ucp_init and
    // ucx_info rely on.
    Status(unsafe { sys::uct_component_query(component, &mut attr) }).check()?;
    mds.truncate(len(attr.md_resource_count));

    for md in &mds {
        md_resources(component, &name, &md.md_name, found)?;
    }
    Ok(())
}

/// Appends the transport resources of the memory domain `md_name` of
/// `component` (named `component_name`).
fn md_resources(
    component: sys::uct_component_h,
    component_name: &str,
    md_name: &[c_char],
    found: &mut Vec<Resource>,
) -> Result<(), Status> {
    // UCT fills the name NUL-terminated; copy it into a buffer one longer
    // so that it is terminated whatever it holds.
    let mut name: [c_char; sys::UCT_MD_NAME_MAX as usize + 1] =
        [0; sys::UCT_MD_NAME_MAX as usize + 1];
    for (to, &from) in name.iter_mut().zip(md_name.iter().take_while(|&&c| c != 0)) {
        *to = from;
    }

    // The configuration is only read by uct_md_open (it copies what it
    // keeps), so it is released as soon as the domain is open, as
    // ucx_info does.
    let md = MdConfig::read(component).and_then(|config| Md::open(component, &name, &config));
    let Ok(md) = md else {
        return Ok(());
    };
    let resources = TlResourceList::query(&md)?;
    found.extend(resources.as_slice().iter().map(|r| Resource {
        transport: string_from_c(&r.tl_name),
        device: string_from_c(&r.dev_name),
        component: component_name.to_owned(),
    }));
    // `resources` is dropped (released) before `md` (closed).
    Ok(())
}

/// The component list of `uct_query_components`, released on drop.
struct ComponentList {
    ptr: *mut sys::uct_component_h,
    len: usize,
}

impl ComponentList {
    fn query() -> Result<ComponentList, Status> {
        let mut ptr = ptr::null_mut();
        let mut count: c_uint = 0;
        // SAFETY: uct_query_components writes the list's address and length
        // through the two pointers, both to live locals, and keeps neither.
        let status = unsafe { sys::uct_query_components(&mut ptr, &mut count) };
        // On failure UCT hands out no list (it frees what it allocated).
        Status(status).check()?;
        Ok(ComponentList {
            ptr,
            len: len(count),
        })
    }

    fn as_slice(&self) -> &[sys::uct_component_h] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: a successful uct_query_components allocated `ptr` as an
        // array of `len` initialised component handles, which stays valid
        // and unchanged until `drop` releases it; the slice borrows `self`.
        unsafe { slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for ComponentList {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: `ptr` is the list that uct_query_components returned,
            // not yet released (this guard is its only owner and drops
            // once); no slice of it outlives `self`.
            unsafe { sys::uct_release_component_list(self.ptr) };
        }
    }
}

/// A memory domain configuration from `uct_md_config_read`, released on
/// drop.
struct MdConfig(*mut sys::uct_md_config_t);

impl MdConfig {
    /// Reads the configuration of `component`'s memory domains from the
    /// environment (the default `UCX_` prefix) and no file.
    fn read(component: sys::uct_component_h) -> Result<MdConfig, Status> {
        let mut config = ptr::null_mut();
        // SAFETY: `component` comes from a live component list (see
        // component_resources); NULL prefix and file name ask for the
        // defaults; the configuration's address is written to a live local.
        let status =
            unsafe { sys::uct_md_config_read(component, ptr::null(), ptr::null(), &mut config) };
        Status(status).check()?;
        if config.is_null() {
            return Err(Status(sys::UCS_ERR_NO_MEMORY));
        }
        Ok(MdConfig(config))
    }
}

impl Drop for MdConfig {
    fn drop(&mut self) {
        // SAFETY: the pointer is a configuration from a successful
        // uct_md_config_read (never null, see `read`), released only here,
        // once; nothing that borrowed it is still alive.
        unsafe { sys::uct_config_release(self.0.cast::<c_void>()) };
    }
}

/// An open memory domain, closed on drop.
struct Md(sys::uct_md_h);

impl Md {
    /// Opens the memory domain `name` (NUL-terminated) of `component`.
    fn open(
        component: sys::uct_component_h,
        name: &[c_char],
        config: &MdConfig,
    ) -> Result<Md, Status> {
        if name.last() != Some(&0) {
            return Err(Status(sys::UCS_ERR_INVALID_PARAM));
        }
        let mut md = ptr::null_mut();
        // SAFETY: `component` comes from a live component list; `name` ends
        // in NUL (checked above) and outlives the call; `config` is a live
        // configuration of the same component, which uct_md_open only
        // reads; the domain's handle is written to a live local.
        let status = unsafe { sys::uct_md_open(component, name.as_ptr(), config.0, &mut md) };
        Status(status).check()?;
        if md.is_null() {
            return Err(Status(sys::UCS_ERR_NO_MEMORY));
        }
        Ok(Md(md))
    }
}

impl Drop for Md {
    fn drop(&mut self) {
        // SAFETY: the handle is a memory domain that uct_md_open opened
        // (never null, see `open`), closed only here, once; the resource
        // lists queried from it are plain arrays that do not refer to it.
        unsafe { sys::uct_md_close(self.0) };
    }
}

/// A memory domain's transport resources from
/// `uct_md_query_tl_resources`, released on drop.
struct TlResourceList {
    ptr: *mut sys::uct_tl_resource_desc_t,
    len: usize,
}

impl TlResourceList {
    fn query(md: &Md) -> Result<TlResourceList, Status> {
        let mut ptr = ptr::null_mut();
        let mut count: c_uint = 0;
        // SAFETY: `md` is an open memory domain (borrowed for the call);
        // the list's address and length are written to live locals.
        let status = unsafe { sys::uct_md_query_tl_resources(md.0, &mut ptr, &mut count) };
        // On failure UCT hands out no list (it frees what it allocated).
        Status(status).check()?;
        Ok(TlResourceList {
            ptr,
            len: len(count),
        })
    }

    fn as_slice(&self) -> &[sys::uct_tl_resource_desc_t] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: a successful uct_md_query_tl_resources allocated `ptr` as
        // an array of `len` initialised descriptors, valid and unchanged
        // until `drop` releases it; the slice borrows `self`.
        unsafe { slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for TlResourceList {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: `ptr` is the list that uct_md_query_tl_resources
            // returned, released only here, once; no slice of it outlives
            // `self`.
            unsafe { sys::uct_release_tl_resource_list(self.ptr) };
        }
    }
}

// A C `unsigned` count always fits a `usize` where UCX runs.
const _: () = assert!(core::mem::size_of::<c_uint>() <= core::mem::size_of::<usize>());

/// A count from UCT as a length (lossless, see the assertion above).
fn len(count: c_uint) -> usize {
    count as usize
}

/// The text of a fixed-size C name field: up to its first NUL (all of it
/// if it has none), non-UTF-8 bytes replaced.
fn string_from_c(field: &[c_char]) -> String {
    let bytes: Vec<u8> = field
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<const N: usize>(text: &[u8]) -> [c_char; N] {
        let mut out = [0; N];
        for (to, &from) in out.iter_mut().zip(text) {
            *to = from as c_char;
        }
        out
    }

    #[test]
    fn name_fields_stop_at_the_first_nul() {
        assert_eq!(string_from_c(&field::<10>(b"tcp")), "tcp");
        assert_eq!(string_from_c(&field::<10>(b"tc\0p")), "tc");
        assert_eq!(string_from_c(&field::<10>(b"")), "");
    }

    #[test]
    fn name_fields_without_nul_are_read_whole() {
        assert_eq!(string_from_c(&field::<4>(b"self")), "self");
    }

    #[test]
    fn non_utf8_names_are_replaced_not_rejected() {
        assert_eq!(string_from_c(&field::<4>(b"a\xffb")), "a\u{fffd}b");
    }

    #[test]
    fn resources_sort_by_transport_then_device() {
        let r = |t: &str, d: &str| Resource {
            transport: t.to_owned(),
            device: d.to_owned(),
            component: "c".to_owned(),
        };
        let mut v = vec![r("tcp", "lo"), r("self", "memory0"), r("tcp", "eth0")];
        v.sort();
        assert_eq!(v, [r("self", "memory0"), r("tcp", "eth0"), r("tcp", "lo")]);
    }
}
