//! placeholder: lock
