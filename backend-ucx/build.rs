//! Gives this crate's tests, examples and benches an rpath to the directory
//! of the libucp that ucx1-sys linked, so that `cargo test` and a binary
//! started by hand load the same library. ucx1-sys's own
//! `cargo:rustc-link-arg` reaches only its own targets, never its
//! dependents', so it hands the directory over as `DEP_UCP_LIBDIR`
//! (`links = "ucp"`). A crate with binaries of its own that call UCX
//! depends on ucx1-sys and repeats these lines.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_UCP_LIBDIR");
    let libdir = std::env::var("DEP_UCP_LIBDIR").expect(
        "DEP_UCP_LIBDIR is unset: ucx1-sys is not iomsg's patched copy; \
         the root Cargo.toml's [patch.crates-io] must point it at vendor/ucx1-sys",
    );
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
}
