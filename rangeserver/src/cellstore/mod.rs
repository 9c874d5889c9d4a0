//! Cell store format v1: writer, reader and scanner (docs/formats/cellstore.md).
//!
//! A cell store is an immutable sorted file of (encoded key, value) cells: prefix-compressed data
//! blocks, a block index, an optional bloom filter and a fixed-size trailer, each checksummed.

mod block;
mod bloom;
mod reader;
mod scanner;
mod trailer;
mod writer;

pub use block::DataBlock;
pub use bloom::xxh64;
pub use reader::CellStore;
pub use scanner::CellStoreScanner;
pub use trailer::{FORMAT_VERSION, TRAILER_LEN, TRAILER_MAGIC, Trailer};
pub use writer::{CellStoreWriter, MAX_KEY_BYTES, MAX_VALUE_BYTES};

use common::{BloomFilterSpec, Compressor};

/// How a cell store is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellStoreOptions {
    /// Target uncompressed size of a data block.
    pub blocksize_bytes: u32,
    pub compressor: Compressor,
    pub bloom: BloomFilterSpec,
}

impl Default for CellStoreOptions {
    /// 64 KiB blocks, lz4, a rows bloom filter with a 1% false-positive rate.
    fn default() -> Self {
        Self {
            blocksize_bytes: 64 * 1024,
            compressor: Compressor::Lz4,
            bloom: BloomFilterSpec::default(),
        }
    }
}

impl CellStoreOptions {
    /// The options an access group asks for.
    pub fn from_access_group(ag: &common::AccessGroupSpec) -> Self {
        Self {
            blocksize_bytes: ag.blocksize_bytes,
            compressor: ag.compressor,
            bloom: ag.bloom_filter,
        }
    }
}
