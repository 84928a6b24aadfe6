//! The wit-bindgen bindings of `wit/skill.wit` (`skillhost:skill@0.1.0`).
//!
//! Nothing here is part of the SDK's API: the crate wraps every import in a
//! plain function (`log`, `progress`) and `skill!` implements the export.
//! Off wasm, wit-bindgen stubs the imports out, so the SDK still builds (and
//! its tests run) on the host target.

#![allow(unsafe_code, missing_docs, unreachable_pub, clippy::all)]

wit_bindgen::generate!({
    world: "skill",
    path: "../wit",
    pub_export_macro: true,
    export_macro_name: "__export_skill",
    default_bindings_module: "skillhost_sdk::__bindings",
    runtime_path: "skillhost_sdk::__private::wit_bindgen::rt",
});
