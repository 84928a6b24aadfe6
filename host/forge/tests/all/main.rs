//! Forge integration tests.

