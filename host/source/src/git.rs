//! placeholder: git
