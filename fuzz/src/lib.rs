//! ht's fuzz targets (fuzz/README.md): the target functions, one per `fuzz_targets/*.rs` binary.
//! The same file is the corpus replay test's (`ht/tests/fuzz_corpus.rs`).

mod targets;

pub use targets::*;
