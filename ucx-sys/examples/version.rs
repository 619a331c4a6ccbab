//! Prints the UCX these bindings were built against and the libucp this
//! process loaded, and whether they agree:
//!
//!     cargo run -p iomsg-ucx-sys --example version

fn main() {
    println!(
        "built against UCX {} ({}, {})",
        iomsg_ucx_sys::UCX_VERSION,
        iomsg_ucx_sys::UCX_FOUND_BY,
        iomsg_ucx_sys::UCX_LIBDIR
    );
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: ucp_get_version writes three unsigned ints through valid
    // pointers to locals and has no other effect.
    unsafe { iomsg_ucx_sys::ucp_get_version(&mut major, &mut minor, &mut release) };
    println!("loaded libucp {major}.{minor}.{release}");
    match iomsg_ucx_sys::check_ucx_version() {
        Ok(v) => println!("they agree: {v:?}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
