//! Examples live in `examples/*.rs`; this library is empty.
