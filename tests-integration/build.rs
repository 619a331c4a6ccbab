//! Gives the peer binary and the tests an rpath to the directory of the
//! libucp that iomsg-ucx-sys linked (`DEP_UCP_LIBDIR`, handed to direct
//! dependents of a `links` crate), so that a test and the binary it starts
//! load the same library.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_UCP_LIBDIR");
    let libdir = std::env::var("DEP_UCP_LIBDIR")
        .expect("DEP_UCP_LIBDIR is unset: iomsg-ucx-sys's build script sets it (links = \"ucp\")");
    if !libdir.is_empty() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
    }
}
