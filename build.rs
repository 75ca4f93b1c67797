//! One link flag for the Linux binary: its relative relocations packed as DT_RELR
//! (`-z pack-relative-relocs`). A position-independent binary of this size carries about 16,000 of
//! them; as 24-byte RELA entries they are 400 KB that every start reads and that count in every
//! firing's memory, as RELR a few KB (docs/performance.md).
//!
//! The x86-64 release binary links glibc statically (the Makefile), so the code that applies them
//! at start is the build machine's own glibc, which understands RELR from 2.36 on: with an older
//! one (or when building for another machine) the flag is left out rather than make a binary that
//! cannot start.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name| std::env::var(name).unwrap_or_default();
    let native = var("TARGET") == var("HOST");
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu" && native {
        // Asked again when the C library is replaced (an upgrade or a downgrade of glibc).
        if let Some(libc) = static_libc() {
            println!("cargo:rerun-if-changed={libc}");
        }
        if glibc_reads_relr() {
            println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        } else {
            println!("cargo:warning=glibc older than 2.36 (or unknown): relocations stay RELA");
        }
    }
}

/// Whether this machine's glibc is 2.36 or later (`getconf GNU_LIBC_VERSION` says "glibc 2.36").
fn glibc_reads_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("glibc ").unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}

/// Where the C compiler finds glibc's static library, if it does (it prints the bare name if not).
fn static_libc() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-print-file-name=libc.a")
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (path != "libc.a" && !path.is_empty()).then_some(path)
}
