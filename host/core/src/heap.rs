//! Giving freed heap memory back to the kernel.
//!
//! glibc's allocator keeps the pages of freed blocks for later allocations, so a process
//! that once read large files (a skill's 18 MB component, a 22 MB model) stays that large
//! in resident memory after it let go of them. [`give_back_freed_memory`] returns them;
//! the host calls it when a burst of such work is over (its skills loaded, a model
//! released), never on a call's path.

/// Return the heap pages freed so far to the kernel (`malloc_trim(0)`); a no-op where
/// the C library is not glibc.
#[allow(unsafe_code, reason = "malloc_trim has no safe wrapper")]
pub fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own locks and touches no memory of ours.
    unsafe {
        libc::malloc_trim(0);
    }
}
