//! The `ht` binary's allocator: mimalloc, which also counts the bytes the process holds
//! allocated when asked to (`HT_COUNT_HEAP=1` in the environment; `ht bench dfs` then reports
//! the live heap beside the resident set). Off, the count costs one relaxed load per call.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// mimalloc, counting live bytes while [`start_counting`] was called.
pub struct Allocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicI64 = AtomicI64::new(0);

/// Starts counting live heap bytes (call first thing in `main`: what was allocated before is
/// not counted, and its frees bring the count below the truth by as much).
pub fn start_counting() {
    COUNTING.store(true, Ordering::Release);
}

/// Counts if the environment asks for it (`HT_COUNT_HEAP=1`).
pub fn count_if_asked() {
    if std::env::var_os("HT_COUNT_HEAP").is_some_and(|v| v == "1") {
        start_counting();
    }
}

/// Bytes allocated and not freed since counting started; `None` when not counting.
pub fn live_bytes() -> Option<u64> {
    COUNTING
        .load(Ordering::Acquire)
        .then(|| LIVE.load(Ordering::Relaxed).max(0) as u64)
}

fn add(n: i64) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(n, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to mimalloc unchanged; counting touches only atomics.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is mimalloc's.
        let p = unsafe { mimalloc::MiMalloc.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) };
        add(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}
