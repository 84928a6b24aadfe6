//! Release builds on x86_64 Linux hand the linker `startup-order.txt`: the functions a
//! start and the first calls run, which it then places first and side by side in the
//! binary's code (`--symbol-ordering-file`). The kernel maps code in blocks around each page
//! a process touches; spread over the whole binary, the code a start runs kept ~25 MB of it
//! resident, side by side a few MB. `scripts/startup-order.py` makes the file.
//!
//! Only where rustc links with its own lld, as it does by default on this target: with a
//! linker of the user's choosing the file is left out (bfd ld does not know the option).
//! A toolchain other than the one the file was made for gets a warning: its names will not
//! match (nothing breaks; the start keeps more code resident).

#![allow(clippy::print_stdout, reason = "cargo reads a build script's instructions from its stdout")]

use std::env;
use std::path::Path;
use std::process::Command;

const ORDER: &str = "startup-order.txt";

fn main() {
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    // a dev build does not relink when the file changes
    println!("cargo::rerun-if-changed={}", if release { ORDER } else { "build.rs" });
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    let target = env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    let own_linker = env::var_os("RUSTC_LINKER").is_some()
        || env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| {
            flags.split('\x1f').any(|f| f.contains("linker") || f.contains("link-self-contained") || f.contains("fuse-ld"))
        });
    if !release || !target || own_linker {
        return;
    }
    let order = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join(ORDER);
    let Ok(text) = std::fs::read_to_string(&order) else {
        return;
    };
    let rustc = env::var("RUSTC").ok().and_then(|rustc| Command::new(rustc).arg("-V").output().ok());
    let rustc = rustc.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned()).unwrap_or_default();
    if !text.lines().take_while(|l| l.starts_with('#')).any(|l| l.contains(&rustc)) {
        println!(
            "cargo::warning={ORDER} was made for another toolchain than {rustc}: its symbol names \
             will not match and the start keeps more code resident; run scripts/startup-order.py"
        );
    }
    println!("cargo::rustc-link-arg-bin=skillhost=-Wl,--symbol-ordering-file={}", order.display());
    println!("cargo::rustc-link-arg-bin=skillhost=-Wl,--no-warn-symbol-ordering");
}
