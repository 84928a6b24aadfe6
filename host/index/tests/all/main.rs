//! Integration tests of the search index: behaviour through the public API
//! (`basics`), the evaluation set in tests/search-eval (`eval`, prints recall and MRR),
//! keeping in step with a watching registry (`follow`), and the on-disk index across
//! restarts (`persist`).

#![allow(clippy::print_stdout, reason = "the evaluation prints its figures")]

mod basics;
mod eval;
mod follow;
mod persist;
