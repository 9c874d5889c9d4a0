//! The stock `ht` binary: the command line with the built-in iterator and combiner kinds.

/// mimalloc rather than glibc's malloc: scans and key sets allocate and free many small
/// buffers, and glibc's free (with its chunk consolidation) was a fifth of a key-set query.
/// Built without transparent huge pages (`no_thp`): with them, filling the block cache faulted
/// in and zeroed 2 MiB pages for 64 KiB blocks, and a cold 1% key-set query took 1.9 s, not
/// 0.5 s. It counts live heap bytes when `HT_COUNT_HEAP=1` (`ht::heap`).
#[global_allocator]
static ALLOC: ht::heap::Allocator = ht::heap::Allocator;

fn main() -> anyhow::Result<()> {
    ht::heap::count_if_asked();
    ht::main_with(ht::Registry::builtins())
}
