//! The global allocator: mimalloc. A pass allocates and frees a few small JSON nodes per
//! event, millions per GiB of log; glibc's malloc/free took ~19% of validate's instructions
//! on a format-0 log, mimalloc about half of that. Its arenas are not committed eagerly
//! (`.cargo/config.toml`), so freed pages go back to the OS and peak RSS stays small.
//!
//! The `mimalloc` crate routes every allocation through `mi_malloc_aligned`, which costs more
//! than the plain entry points; like std's `System`, plain `mi_malloc` serves every layout
//! whose alignment it already guarantees.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// What `mi_malloc` guarantees on 64-bit targets (`MI_MAX_ALIGN_SIZE`), for blocks of at
/// least this size.
const PLAIN_ALIGN: usize = 16;

pub struct MiMalloc;

fn plain(layout: &Layout) -> bool {
    layout.align() <= PLAIN_ALIGN && layout.align() <= layout.size()
}

// SAFETY: every method forwards to mimalloc's allocator, which hands out blocks of at least
// `size` bytes aligned as asked (plain entry points only where `plain` holds), frees any
// block it gave out with `mi_free`, and keeps the contents on `realloc`.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(&layout) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(&layout) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`.
        unsafe {
            if layout.align() <= PLAIN_ALIGN && layout.align() <= new_size {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}
