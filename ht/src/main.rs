//! The stock `ht` binary: the command line with the built-in iterator and combiner kinds.

/// mimalloc rather than glibc's malloc: scans and key sets allocate and free many small
/// buffers, and glibc's free (with its chunk consolidation) was a fifth of a key-set query.
/// Built without transparent huge pages (`no_thp`): with them, filling the block cache faulted
/// in and zeroed 2 MiB pages for 64 KiB blocks, and a cold 1% key-set query took 1.9 s, not
/// 0.5 s.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    ht::main_with(ht::Registry::builtins())
}
