//! Links libaccel: from ACCEL_LIB_DIR when it is set (e.g. build/lib of the CMake build), else from
//! what `pkg-config --libs accel` says about an installed copy.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=ACCEL_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    match env::var_os("ACCEL_LIB_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if !holds_libaccel(&dir) {
                fail(&format!("ACCEL_LIB_DIR is {} but there is no libaccel.so in it", dir.display()));
            }
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        None => {
            for dir in pkg_config_search_dirs().unwrap_or_else(|why| fail(&why)) {
                println!("cargo:rustc-link-search=native={}", dir.display());
            }
        }
    }
    println!("cargo:rustc-link-lib=dylib=accel");
}

/// The -L directories of `pkg-config --libs accel` (none when the library is in the linker's default
/// path), refusing a .pc file whose directories hold no libaccel.so: the linker's own error would not
/// say where the path came from.
fn pkg_config_search_dirs() -> Result<Vec<PathBuf>, String> {
    let output =
        Command::new("pkg-config").args(["--libs", "accel"]).output().map_err(|error| format!("cannot run pkg-config ({})", error))?;
    if !output.status.success() {
        return Err(format!("`pkg-config --libs accel` failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    let flags = String::from_utf8_lossy(&output.stdout).into_owned();
    let dirs: Vec<PathBuf> = flags.split_whitespace().filter_map(|flag| flag.strip_prefix("-L")).map(PathBuf::from).collect();
    if !dirs.is_empty() && !dirs.iter().any(|dir| holds_libaccel(dir)) {
        return Err(format!("`pkg-config --libs accel` gives `{}`, but none of its directories holds libaccel.so", flags.trim()));
    }
    Ok(dirs)
}

fn holds_libaccel(dir: &Path) -> bool {
    dir.join("libaccel.so").exists()
}

fn fail(why: &str) -> ! {
    eprintln!(
        "accel-sys: cannot find libaccel: {}.\n\
         Set ACCEL_LIB_DIR to the directory that holds libaccel.so (build/lib in a CMake build tree), \
         or install accel where `pkg-config --libs accel` finds it (PKG_CONFIG_PATH).",
        why
    );
    std::process::exit(1);
}
