//! Host bindings of the `skillhost:skill@0.1.0` world, generated from `wit/`.
//!
//! One module per frozen WIT version: when `@0.2.0` ships, it gets its own module and
//! this one stays to run older skills.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    world: "skill",
    path: "../../wit",
    exports: { default: async },
});

pub use skillhost::skill::{host, types};
