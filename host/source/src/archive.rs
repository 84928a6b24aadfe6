//! placeholder: archive
