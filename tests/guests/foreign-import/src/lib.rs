//! A generic component that imports `test:foreign/clock`, which skillhost does not
//! provide: the host must refuse to load it, naming the import.

// The generated bindings use `unsafe` and `export_name` for the canonical ABI.
#![allow(missing_docs, unsafe_code)]

wit_bindgen::generate!({ world: "app", path: "wit" });

struct App;

impl Guest for App {
    fn uptime() -> u64 {
        test::foreign::clock::now()
    }
}

export!(App);
