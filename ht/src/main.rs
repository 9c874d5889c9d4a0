//! The stock `ht` binary: the command line with the built-in iterator and combiner kinds.

/// mimalloc rather than glibc's malloc: scans and key sets allocate and free many small
/// buffers, and glibc's free (with its chunk consolidation) was a fifth of a key-set query.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    ht::main_with(ht::Registry::builtins())
}
