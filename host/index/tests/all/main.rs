//! Integration tests of the search index: behaviour through the public API
//! (`basics`), the evaluation set in tests/search-eval (`eval`, prints recall and MRR),
//! and keeping in step with a watching registry (`follow`).

#![allow(clippy::print_stdout, reason = "the evaluation prints its figures")]

mod basics;
mod eval;
mod follow;
