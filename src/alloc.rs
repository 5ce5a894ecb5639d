//! Tuning for the global allocator, mimalloc (the `mimalloc` crate, `src/main.rs`). A pass
//! allocates and frees a few small JSON nodes per event, millions per GiB of log, which
//! glibc's malloc serves at about twice mimalloc's cost. Its arenas are not committed eagerly
//! (`.cargo/config.toml`), so freed pages go back to the OS and peak RSS stays small.

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (mimalloc.h, v3; the crate exports no
/// constant for it).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

unsafe extern "C" {
    fn mi_option_set_default(option: std::ffi::c_int, value: std::ffi::c_long);
    #[cfg(test)]
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
}

/// Give freed pages back after 1 ms instead of a second. With parsing threads each thread
/// keeps its own pages; purging them sooner keeps peak RSS near that of one thread (~13 MB
/// instead of ~17–24 MB on a 1 GiB format-3 log), and on logs with lines of hundreds of KB
/// (whose blocks and trees are freed soon after) it matters more: 4 GB logs peaked at 23 MB
/// (format 3) and 16 MB (format 0) at 1 ms, 28 MB and 21–24 MB at 10 ms, for no measurable
/// difference in time since rows stopped allocating per line (a 1 GiB format 3 log, four
/// runs each: 1.09–1.16 s at 1, 3 and 10 ms). `MIMALLOC_PURGE_DELAY` still overrides it.
/// Call before any thread starts.
pub fn tune() {
    // SAFETY: plain option setters of the linked mimalloc; the option id is checked by the
    // test below against mimalloc's default for it (1000 ms, options.c).
    unsafe { mi_option_set_default(MI_OPTION_PURGE_DELAY, 1) }
}

/// The purge delay in effect (for the test).
#[cfg(test)]
fn purge_delay() -> std::ffi::c_long {
    // SAFETY: a plain option getter.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_id_is_the_purge_delay() {
        // Before `tune`, the option holds mimalloc's default of 1000 ms (unless the
        // environment sets it); after, the new default.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(super::purge_delay(), 1000);
            super::tune();
            assert_eq!(super::purge_delay(), 1);
        }
    }
}
