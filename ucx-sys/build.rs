//! Build script of iomsg-ucx-sys.
//!
//! 1. Finds UCX >= 1.11 with pkg-config (`pkg-config ucx`), or, when
//!    `IOMSG_UCX_PREFIX` is set, the `ucx.pc` under that install prefix.
//! 2. Checks that the headers and pkg-config agree on the version, and
//!    takes the full version from the headers (`UCT_VERNO_STRING`):
//!    UCX 1.12's `ucx.pc` says only "1.12".
//! 3. Links libucp with an rpath to its directory, and hands that directory
//!    to dependents' build scripts (`DEP_UCP_LIBDIR`): `rustc-link-arg`
//!    reaches only this crate's own targets, so a crate whose tests or
//!    binaries call UCX repeats the rpath from `DEP_UCP_LIBDIR`.
//! 4. Generates the bindings with bindgen, every C enum as an integer type
//!    alias plus constants (a Rust enum read from a value the headers do not
//!    list is undefined behaviour), and `Default` (all zero) on structs.
//! 5. Writes what it found to `$OUT_DIR/ucx_build.rs` (`UCX_VERSION`,
//!    `UCX_LIBDIR`, ...), included by src/lib.rs.
//!
//! It runs pkg-config and libclang and nothing else: no network, no UCX
//! build. Every failure panics with what to install or which variable to set.
//!
//! On docs.rs (`DOCS_RS` set), where there is no UCX to find, it takes the
//! bindings generated from UCX 1.13.1 that the crate ships
//! (`src/pregenerated.rs`) and links nothing: the documentation builds, a
//! binary would not.

use std::env;
use std::fmt::Display;
use std::fs;
use std::path::{Path, PathBuf};

/// Names the install prefix of a UCX of the user's own.
const PREFIX_VAR: &str = "IOMSG_UCX_PREFIX";

/// Oldest UCX accepted (iomsg's requirement; tested with 1.12.1 and 1.13.1).
const MIN_VERSION: (u32, u32) = (1, 11);

/// What to do when no usable UCX is found.
const INSTALL_HINT: &str = "install UCX's development files and pkg-config \
     (Debian/Ubuntu: `apt-get install libucx-dev pkg-config`), \
     or set IOMSG_UCX_PREFIX to the install prefix of your own UCX \
     (the --prefix given to its configure: the directory holding \
     include/ucp/api/ucp.h and lib/pkgconfig/ucx.pc)";

/// The UCX this build links.
struct Ucx {
    /// `pkg-config --modversion ucx`: "1.13.1", or just "1.12" (UCX 1.12).
    pkg_version: String,
    /// The full version, `UCT_VERNO_STRING` of `uct/api/version.h`
    /// ("1.12.1"); set by [`check_headers`].
    version: String,
    /// (major, minor, release) of `version`.
    numbers: (u32, u32, u32),
    /// Where `ucp/api/ucp.h` is.
    includedir: PathBuf,
    /// `-I` directories pkg-config gives (empty for /usr/include).
    include_paths: Vec<PathBuf>,
    /// Where libucp.so is.
    libdir: PathBuf,
    /// The `ucx.pc` pkg-config read.
    pcfile: PathBuf,
    /// "pkg-config" or "IOMSG_UCX_PREFIX=<prefix>".
    found_by: String,
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-env-changed={PREFIX_VAR}");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if env::var_os("DOCS_RS").is_some() {
        docs_only(&out_dir);
        return;
    }

    let mut ucx = find_ucx();
    check_version(&ucx);
    check_headers(&mut ucx);
    check_library(&ucx);

    let libdir = ucx.libdir.display();
    // This crate's own tests; dependents read DEP_UCP_LIBDIR.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{libdir}");
    println!("cargo:version={}", ucx.version);
    println!("cargo:libdir={libdir}");
    println!("cargo:includedir={}", ucx.includedir.display());
    // A UCX upgrade rewrites its ucx.pc: build again against the new one.
    println!("cargo:rerun-if-changed={}", ucx.pcfile.display());

    generate_bindings(&ucx, &out_dir.join("bindings.rs"));
    write_build_info(&ucx, &out_dir.join("ucx_build.rs"));
}

/// Stops the build with `msg`, framed so it stands out in cargo's output.
fn fail(msg: impl Display) -> ! {
    panic!("\n\niomsg-ucx-sys: {msg}\n\n");
}

fn find_ucx() -> Ucx {
    let Some(prefix) = env::var_os(PREFIX_VAR).filter(|p| !p.is_empty()) else {
        return probe("ucx", "pkg-config".to_owned());
    };
    let prefix = PathBuf::from(prefix);
    let found_by = format!("{PREFIX_VAR}={}", prefix.display());
    if !prefix.is_dir() {
        fail(format_args!(
            "{found_by} is not a directory: set it to the --prefix given to UCX's \
             configure (the directory holding include/ucp and lib/pkgconfig/ucx.pc), \
             or unset it to use the UCX that pkg-config finds"
        ));
    }
    let Some(pcdir) = pkgconfig_dirs(&prefix)
        .into_iter()
        .find(|d| d.join("ucx.pc").is_file())
    else {
        fail(format_args!(
            "{found_by} has no ucx.pc in lib/pkgconfig, lib64/pkgconfig or \
             lib/<arch>/pkgconfig: set it to the --prefix given to UCX's configure \
             (the directory holding include/ucp and lib/libucp.so)"
        ));
    };
    // pkg-config reads a package from a .pc file named by its path: the
    // prefix's, whatever PKG_CONFIG_PATH says, and without changing this
    // process's environment.
    let pc = pcdir.join("ucx.pc");
    let ucx = probe(&pc.display().to_string(), found_by);
    if canonical(&ucx.pcfile) != canonical(&pc) {
        fail(format_args!(
            "{} is set, but pkg-config read {} instead of {}/ucx.pc",
            ucx.found_by,
            ucx.pcfile.display(),
            pcdir.display()
        ));
    }
    ucx
}

/// Where an install prefix may keep its `ucx.pc`.
fn pkgconfig_dirs(prefix: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![prefix.join("lib/pkgconfig"), prefix.join("lib64/pkgconfig")];
    // Debian-style multiarch: lib/x86_64-linux-gnu/pkgconfig.
    if let Ok(entries) = fs::read_dir(prefix.join("lib")) {
        let mut arch: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("pkgconfig"))
            .filter(|d| d.is_dir())
            .collect();
        arch.sort();
        dirs.extend(arch);
    }
    dirs
}

fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// Runs pkg-config for `package` (`ucx`, or the path of a `ucx.pc`),
/// printing the link flags for cargo.
fn probe(package: &str, found_by: String) -> Ucx {
    let lib = pkg_config::Config::new()
        .cargo_metadata(true)
        .probe(package)
        .unwrap_or_else(|e| {
            let under = match found_by.as_str() {
                "pkg-config" => String::new(),
                prefix => format!(" under {prefix}"),
            };
            fail(format_args!(
                "pkg-config did not find UCX{under}: {e}\n\n{INSTALL_HINT}"
            ))
        });
    let var = |name: &str| {
        pkg_config::get_variable(package, name).unwrap_or_else(|e| {
            fail(format_args!(
                "pkg-config found UCX but not its `{name}` variable ({found_by}): {e}"
            ))
        })
    };
    let libdir = PathBuf::from(var("libdir"));
    let includedir = PathBuf::from(var("includedir"));
    let pcfile = PathBuf::from(var("pcfiledir")).join("ucx.pc");
    Ucx {
        pkg_version: lib.version,
        version: String::new(),
        numbers: (0, 0, 0),
        includedir,
        include_paths: lib.include_paths,
        libdir,
        pcfile,
        found_by,
    }
}

/// "1.13.1" -> [1, 13, 1]; "1.12" -> [1, 12]; "1.17.0-rc1" -> [1, 17, 0];
/// empty when it does not start with a number.
fn version_numbers(version: &str) -> Vec<u32> {
    version
        .split('.')
        .map_while(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .take(3)
        .collect()
}

/// pkg-config's version must be a version, and at least [`MIN_VERSION`].
fn check_version(ucx: &Ucx) {
    let (major, minor) = match version_numbers(&ucx.pkg_version)[..] {
        [major, minor, ..] => (major, minor),
        _ => fail(format_args!(
            "pkg-config reports UCX version {:?} ({}, {}), which is not \
             major.minor[.release]",
            ucx.pkg_version,
            ucx.found_by,
            ucx.pcfile.display()
        )),
    };
    if (major, minor) < MIN_VERSION {
        fail(format_args!(
            "UCX {} ({}, {}) is older than {}.{}, the oldest these bindings support; \
             install a newer UCX and point {PREFIX_VAR} at its prefix",
            ucx.pkg_version,
            ucx.found_by,
            ucx.pcfile.display(),
            MIN_VERSION.0,
            MIN_VERSION.1
        ));
    }
}

/// The headers bindgen reads must be the library's, and they name its full
/// version: `uct/api/version.h`'s `UCT_VERNO_STRING` and `ucp_version.h`'s
/// UCP_API_MAJOR/MINOR must agree with every number pkg-config gives.
/// Sets `ucx.version` and `ucx.numbers` from `UCT_VERNO_STRING`.
fn check_headers(ucx: &mut Ucx) {
    let read = |name: &str| -> (PathBuf, String) {
        let path = ucx.includedir.join(name);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| {
            fail(format_args!(
                "cannot read {} ({e}), a header of the UCX that pkg-config found ({}, {}); \
                 {INSTALL_HINT}",
                path.display(),
                ucx.found_by,
                ucx.pcfile.display()
            ))
        });
        println!("cargo:rerun-if-changed={}", path.display());
        (path, text)
    };
    let (ucp_header, ucp_text) = read("ucp/api/ucp_version.h");
    let (uct_header, uct_text) = read("uct/api/version.h");

    let verno = define(&uct_text, "UCT_VERNO_STRING")
        .map(|v| v.trim_matches('"').to_owned())
        .unwrap_or_default();
    let numbers = version_numbers(&verno);
    let [major, minor, release] = numbers[..] else {
        fail(format_args!(
            "{} has no UCT_VERNO_STRING of the form \"major.minor.release\" (found {verno:?}); \
             is {} a UCX install? {INSTALL_HINT}",
            uct_header.display(),
            ucx.includedir.display()
        ));
    };
    let api = [
        define(&ucp_text, "UCP_API_MAJOR").and_then(|v| v.parse().ok()),
        define(&ucp_text, "UCP_API_MINOR").and_then(|v| v.parse().ok()),
    ];
    let pkg = version_numbers(&ucx.pkg_version);
    let agree = api == [Some(major), Some(minor)]
        && pkg.len() >= 2
        && pkg.iter().zip(&numbers).all(|(a, b)| a == b);
    if !agree {
        fail(format_args!(
            "the UCX headers and pkg-config disagree: {} says {verno:?}, {} says API \
             {:?}.{:?}, pkg-config says {:?} ({}, {}). The headers and the library come \
             from different UCX installs: remove one, or set {PREFIX_VAR} to the prefix \
             that has both",
            uct_header.display(),
            ucp_header.display(),
            api[0],
            api[1],
            ucx.pkg_version,
            ucx.found_by,
            ucx.pcfile.display()
        ));
    }
    ucx.version = format!("{major}.{minor}.{release}");
    ucx.numbers = (major, minor, release);
}

/// The value of `#define NAME value` in a header's text.
fn define<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("#define") && words.next() == Some(name))
            .then(|| words.next())
            .flatten()
    })
}

/// pkg-config's libdir must hold the shared libucp the rpath points at.
fn check_library(ucx: &Ucx) {
    let so = ucx.libdir.join("libucp.so");
    if !so.exists() {
        fail(format_args!(
            "{} does not exist, but pkg-config's UCX ({}, {}) says its libraries are in {}; \
             reinstall that UCX (Debian: libucx-dev), or set {PREFIX_VAR} to a complete install",
            so.display(),
            ucx.found_by,
            ucx.pcfile.display(),
            ucx.libdir.display()
        ));
    }
}

fn generate_bindings(ucx: &Ucx, out: &Path) {
    let builder = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_args(
            ucx.include_paths
                .iter()
                .map(|dir| format!("-I{}", dir.display())),
        )
        // Reruns this script when any header it read changes.
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .allowlist_function("uc[tsmp]_.*")
        .allowlist_var("uc[tsmp]_.*")
        .allowlist_var("UC[TSMP]_.*")
        .allowlist_type("uc[tsmp]_.*")
        // Every C enum becomes `pub type name = <integer>;` plus one
        // `pub const VARIANT: name` per enumerator, named as in C: any
        // value a newer UCX returns is a valid integer, where a Rust enum
        // (the published crate's `rustified_enum(".*")`) would be UB.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        // `..Default::default()` (all zero) for the parameter structs, whose
        // `field_mask` says which fields UCX reads.
        .derive_default(true);
    // bindgen panics when it cannot load libclang; say what to install.
    let generated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.generate()));
    let bindings = match generated {
        Ok(Ok(bindings)) => bindings,
        Ok(Err(e)) => fail(format_args!(
            "bindgen could not generate the bindings from wrapper.h with the headers in {} \
             ({}): {e}",
            ucx.includedir.display(),
            ucx.found_by
        )),
        Err(_) => fail(
            "bindgen panicked (see its message above); if it could not find libclang, \
             install it (Debian/Ubuntu: `apt-get install libclang-dev`) or set LIBCLANG_PATH \
             to the directory holding libclang.so",
        ),
    };
    bindings
        .write_to_file(out)
        .unwrap_or_else(|e| fail(format_args!("cannot write {}: {e}", out.display())));
}

/// The docs.rs build: the shipped bindings and a build record that says
/// they were not linked to anything.
fn docs_only(out_dir: &Path) {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let shipped = manifest.join("src/pregenerated.rs");
    println!("cargo:rerun-if-changed={}", shipped.display());
    fs::copy(&shipped, out_dir.join("bindings.rs"))
        .unwrap_or_else(|e| fail(format_args!("cannot copy {}: {e}", shipped.display())));
    let [major, minor, release] = version_numbers(PREGENERATED_VERSION)[..] else {
        fail("PREGENERATED_VERSION is not major.minor.release");
    };
    let ucx = Ucx {
        pkg_version: PREGENERATED_VERSION.to_owned(),
        version: PREGENERATED_VERSION.to_owned(),
        numbers: (major, minor, release),
        includedir: PathBuf::new(),
        include_paths: Vec::new(),
        libdir: PathBuf::new(),
        pcfile: PathBuf::new(),
        found_by: "DOCS_RS (shipped bindings, nothing linked)".to_owned(),
    };
    println!("cargo:version={PREGENERATED_VERSION}");
    println!("cargo:libdir=");
    println!("cargo:includedir=");
    write_build_info(&ucx, &out_dir.join("ucx_build.rs"));
}

/// The UCX `src/pregenerated.rs` was generated from (`bash ci/ucx-bindings`
/// regenerates it).
const PREGENERATED_VERSION: &str = "1.13.1";

/// `$OUT_DIR/ucx_build.rs`: what this build found, as constants.
fn write_build_info(ucx: &Ucx, out: &Path) {
    let (major, minor, release) = ucx.numbers;
    let text = format!(
        "/// Version of the UCX these bindings were generated from and linked to, \
         \"major.minor.release\" (its headers' `UCT_VERNO_STRING`, checked against \
         `pkg-config --modversion ucx`).\n\
         pub const UCX_VERSION: &str = {version:?};\n\
         /// Major number of [`UCX_VERSION`].\n\
         pub const UCX_VERSION_MAJOR: u32 = {major};\n\
         /// Minor number of [`UCX_VERSION`].\n\
         pub const UCX_VERSION_MINOR: u32 = {minor};\n\
         /// Release number of [`UCX_VERSION`].\n\
         pub const UCX_VERSION_RELEASE: u32 = {release};\n\
         /// Directory of the libucp linked (`pkg-config --variable=libdir ucx`); \
         binaries carry it as their rpath.\n\
         pub const UCX_LIBDIR: &str = {libdir:?};\n\
         /// Directory of the UCX headers the bindings were generated from.\n\
         pub const UCX_INCLUDEDIR: &str = {includedir:?};\n\
         /// How the build found UCX: `\"pkg-config\"` or `\"IOMSG_UCX_PREFIX=<prefix>\"`.\n\
         pub const UCX_FOUND_BY: &str = {found_by:?};\n",
        version = ucx.version,
        libdir = ucx.libdir.display().to_string(),
        includedir = ucx.includedir.display().to_string(),
        found_by = ucx.found_by,
    );
    fs::write(out, text)
        .unwrap_or_else(|e| fail(format_args!("cannot write {}: {e}", out.display())));
}
