//! The integration tests of `skillhost-source`, one binary: real registries, repositories
//! and servers started by each test on loopback.

mod git;
mod hostile;
mod index;
mod loopback;
mod oci;
mod oci_hostile;
