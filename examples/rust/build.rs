//! Links libsandlet.so.
//!
//! SANDLET_LIB_DIR: the directory holding libsandlet.so (a CMake build directory, or an install prefix's
//! lib/). When set, it is added to the link search path and recorded as the binary's run-time search path
//! (rpath), so the example runs without LD_LIBRARY_PATH. Give it as an absolute path (a relative one is
//! taken relative to this package's directory). When unset, the linker's and the loader's default paths
//! are used: that works when libsandlet is installed system-wide (e.g. under /usr/local/lib, then ldconfig).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SANDLET_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(dir) = env::var_os("SANDLET_LIB_DIR").filter(|d| !d.is_empty()) {
        let mut dir = PathBuf::from(dir);
        if dir.is_relative() {
            // Cargo runs build scripts in the package's directory.
            dir = env::current_dir().expect("current directory").join(dir);
            println!(
                "cargo:warning=SANDLET_LIB_DIR is relative; using {}",
                dir.display()
            );
        }
        if !dir.join("libsandlet.so").exists() {
            println!(
                "cargo:warning=SANDLET_LIB_DIR={}: no libsandlet.so there",
                dir.display()
            );
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
        // cargo:rustc-link-arg (stable since Rust 1.50) applies to the binary and the test executables.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=sandlet");
}
