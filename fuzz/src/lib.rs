//! ht's fuzz targets (fuzz/README.md): the target functions, one per `fuzz_targets/*.rs` binary.
//! The same file is the corpus replay test's (`ht/tests/fuzz_corpus.rs`).

mod targets;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;

pub use targets::*;

/// Largest single allocation a target may make. Inputs are at most 64 KiB (`run-all.sh`), so
/// anything near this is an allocation sized by a field of the input, not by its length.
/// Without a sanitizer libFuzzer cannot see allocations, and a huge zeroed one costs no memory
/// until touched, so this allocator is what makes "allocates without bound" a crash.
pub const MAX_ALLOCATION_BYTES: usize = 256 << 20;

struct BoundedAlloc;

fn check(size: usize) {
    if size > MAX_ALLOCATION_BYTES {
        // No formatting: that could allocate, here of all places.
        let _ = std::io::stderr().write_all(b"ht-fuzz: an allocation of more than 256 MiB\n");
        std::process::abort();
    }
}

// SAFETY: every call is forwarded unchanged to `System`; `check` only aborts.
unsafe impl GlobalAlloc for BoundedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc;
