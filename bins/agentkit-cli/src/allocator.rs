//! What an idle server gives back to the operating system once its
//! agents let go of their caches (the host calls [`release`] through
//! [`agentkit::MemoryRelease`]). Both binaries allocate with jemalloc
//! (prefixed: its symbols are `_rjem_*`), which returns freed pages only
//! as it decays them on later allocations, so an idle process keeps them;
//! SQLite allocates with the C library's `malloc`.

#![allow(unsafe_code)]

/// jemalloc's `MALLCTL_ARENAS_ALL`: `arena.<i>.purge` for every arena.
const PURGE_ALL_ARENAS: &std::ffi::CStr = c"arena.4096.purge";

/// Purges every jemalloc arena's unused pages, then trims glibc's heaps.
pub(crate) fn release() {
    let code = purge_arenas();
    if code != 0 {
        tracing::debug!(code, "jemalloc did not purge its arenas");
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes a byte count to keep and has no other
    // precondition; glibc locks each arena while it trims it.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `arena.<all>.purge`: jemalloc's answer (0, or an errno such as
/// `ENOENT` for a control it does not know).
fn purge_arenas() -> std::ffi::c_int {
    // SAFETY: `mallctl` reads `name`, a NUL-terminated string that lives
    // for the whole program. `arena.<i>.purge` is a void control: it reads
    // and writes no value, so null `oldp`, `oldlenp` and `newp` with a zero
    // `newlen` are what it takes. jemalloc locks each arena it purges, so
    // other threads may allocate meanwhile.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL_ARENAS.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    /// The control exists in the jemalloc linked in (a misspelt name
    /// answers `ENOENT`, which `release` would only log).
    #[test]
    fn the_purge_control_is_known_to_jemalloc() {
        assert_eq!(super::purge_arenas(), 0);
        super::release();
    }
}
