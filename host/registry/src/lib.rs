//! The skill registry (being written: see issue 4).
