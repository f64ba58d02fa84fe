//! Enables the VAES path of `aes::AesCipher` (cfg `secinfer_vaes`) when the compiler has the
//! `vaes` target feature and its intrinsics, stable since Rust 1.89; the workspace's declared
//! minimum is older, and there the `aes` crate's AES-NI path is the only one.
use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(secinfer_vaes)");
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let minor = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            // "rustc 1.95.0 (...)": the minor version.
            let ver = v.split_whitespace().nth(1)?.to_string();
            let mut parts = ver.split('.');
            let major: u32 = parts.next()?.parse().ok()?;
            let minor: u32 = parts.next()?.parse().ok()?;
            (major == 1).then_some(minor)
        });
    if minor.is_some_and(|m| m >= 89) {
        println!("cargo:rustc-cfg=secinfer_vaes");
    }
}
