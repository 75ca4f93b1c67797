//! One link flag for the Linux binary: its relative relocations packed as DT_RELR
//! (`-z pack-relative-relocs`, binutils 2.38 and glibc 2.36 or later). A position-independent
//! binary of this size carries about 16,000 of them; as 24-byte RELA entries they are 400 KB that
//! every start reads and that count in every firing's memory, as RELR a few KB
//! (docs/performance.md). A linker or C library too old for it ignores the flag with a warning.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
