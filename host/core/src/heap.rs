//! Giving freed heap memory back to the kernel (and, [`drop_cached_pages`], a file's pages
//! the host wrote and will map).
//!
//! glibc's allocator keeps the pages of freed blocks for later allocations, so a process
//! that once read large files (a skill's 18 MB component, a 22 MB model) stays that large
//! in resident memory after it let go of them. Two calls return them:
//!
//! - [`give_back_freed_memory`] (`malloc_trim`), which the host calls when a burst of such
//!   work is over (its skills loaded, a model released), never on a call's path;
//! - [`trim_as_freed`], for a process that wants it (the `skillhost` binary calls it
//!   first): glibc otherwise raises its trim and mmap thresholds each time a large block
//!   is freed (up to 64 MiB), and from then on every thread's arena keeps that much freed
//!   memory at its top, which `malloc_trim` does not return. Fixed thresholds keep a
//!   compile on a blocking thread from leaving its peak behind for the life of the process.

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

/// Drop `file`'s clean pages from the kernel's page cache (`posix_fadvise(DONTNEED)`): a
/// file the host just wrote and will map is then read back from the disk as it is
/// touched, not taken as the large folios the writes left, which a mapping takes whole.
/// Sync it first: dirty pages stay.
pub fn drop_cached_pages(file: &std::fs::File) -> std::io::Result<()> {
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed).map_err(std::io::Error::from)
}

/// The block size from which glibc maps a block on its own (unmapped when freed), and the
/// free memory at an arena's top above which it gives it back: glibc's starting values,
/// kept fixed by [`trim_as_freed`].
const TRIM_THRESHOLD: usize = 128 * 1024;

/// Fix glibc's trim and mmap thresholds at [`TRIM_THRESHOLD`] for this process (glibc
/// would raise them after each large free): blocks of that size or more are mapped and
/// unmapped on their own, and free memory over it at the top of any arena goes back to
/// the kernel when it is freed. Process-wide, so an embedder decides for its own process;
/// a no-op where the C library is not glibc. Returns whether the allocator took both.
#[allow(unsafe_code, reason = "mallopt has no safe wrapper")]
pub fn trim_as_freed() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let threshold = libc::c_int::try_from(TRIM_THRESHOLD).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets the allocator's parameters under its own lock.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, threshold) == 1 && libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use std::process::Command;

    /// Set in the child process that [`measure`] runs in, to `fixed` or `glibc`.
    const CHILD: &str = "SKILLHOST_HEAP_TEST_CHILD";
    const MIB: usize = 1024 * 1024;

    fn rss_anon_kib() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The child's half: a large block freed (which raises glibc's thresholds unless they
    /// are fixed), then 24 MiB of small blocks made and freed on another thread (its own
    /// arena), then `malloc_trim`; prints how much of the 24 MiB stayed resident.
    #[test]
    #[ignore = "run by the test below, in a process of its own"]
    #[allow(clippy::print_stdout, reason = "the figure goes to the parent test on stdout")]
    fn measure() {
        let Ok(mode) = std::env::var(CHILD) else { return };
        if mode == "fixed" {
            assert!(super::trim_as_freed());
        }
        drop(std::hint::black_box(vec![1u8; 16 * MIB]));
        let before = rss_anon_kib();
        std::thread::spawn(|| {
            let blocks: Vec<Vec<u8>> = (0..1536).map(|i| vec![u8::try_from(i % 251).unwrap() | 1; 16 * 1024]).collect();
            drop(std::hint::black_box(blocks));
        })
        .join()
        .unwrap();
        super::give_back_freed_memory();
        println!("retained-kib={}", rss_anon_kib().saturating_sub(before));
    }

    fn retained_kib(mode: &str) -> usize {
        let exe = std::env::current_exe().unwrap();
        let out = Command::new(exe)
            .args(["heap::tests::measure", "--exact", "--include-ignored", "--nocapture", "--test-threads", "1"])
            .env(CHILD, mode)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "the child failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        let value = stdout.split("retained-kib=").nth(1).unwrap_or_else(|| panic!("no figure in {stdout}"));
        value.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
    }

    #[test]
    fn with_fixed_thresholds_what_a_thread_freed_goes_back_after_a_large_free() {
        let fixed = retained_kib("fixed");
        let glibc = retained_kib("glibc");
        assert!(fixed < 4 * 1024, "with fixed thresholds {fixed} KiB of 24 MiB freed stayed resident (glibc's own: {glibc} KiB)");
    }
}
