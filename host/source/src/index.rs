//! placeholder: index
