//! Gives this crate's tests, examples and benches an rpath to the directory
//! of the libucp that iomsg-ucx-sys linked, so that `cargo test` and a binary
//! started by hand load the same library. iomsg-ucx-sys's own
//! `cargo:rustc-link-arg` reaches only its own targets, never its
//! dependents', so it hands the directory over as `DEP_UCP_LIBDIR`
//! (`links = "ucp"`). A crate with binaries of its own that call UCX
//! repeats these lines in its build script (the directory is empty on
//! docs.rs, where nothing is linked).

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_UCP_LIBDIR");
    let libdir = std::env::var("DEP_UCP_LIBDIR")
        .expect("DEP_UCP_LIBDIR is unset: iomsg-ucx-sys's build script sets it (links = \"ucp\")");
    if !libdir.is_empty() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
    }
}
