//! The fixed-size trailer at the end of every cell store: where the index and bloom blocks are,
//! and statistics about the cells.

use common::{BloomFilterMode, Compressor};

use super::block::{COMPRESSION_LZ4, COMPRESSION_NONE, corrupt, read_u32, read_u64};
use super::bloom::{mode_from_u8, mode_to_u8};
use crate::error::{Error, Result};

/// Length of the trailer in bytes.
pub const TRAILER_LEN: usize = 128;
/// The last 8 bytes of every cell store.
pub const TRAILER_MAGIC: [u8; 8] = *b"HTCELLST";
/// The format version this code writes: 2, whose data-block entries may store the timestamp
/// and revision as deltas (docs/formats/cellstore.md).
pub const FORMAT_VERSION: u32 = 2;
/// The oldest format version this code reads.
pub const MIN_FORMAT_VERSION: u32 = 1;

/// What the trailer records. `file_size` is not stored: it is the file length.
#[derive(Debug, Clone, PartialEq)]
pub struct Trailer {
    pub version: u32,
    pub cell_count: u64,
    /// Cells whose flag is one of the delete kinds.
    pub delete_count: u64,
    pub block_count: u64,
    /// Smallest and largest cell timestamp; both 0 when the store is empty.
    pub min_timestamp: i64,
    pub max_timestamp: i64,
    /// Largest revision; 0 when the store is empty.
    pub max_revision: i64,
    /// Sum of encoded key lengths (before prefix compression).
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub file_size: u64,
    /// Offset and stored length (header included) of the index block.
    pub index_offset: u64,
    pub index_len: u64,
    /// Offset and stored length of the bloom block; both 0 without a filter.
    pub bloom_offset: u64,
    pub bloom_len: u64,
    /// Distinct items in the bloom filter.
    pub bloom_items: u64,
    pub compressor: Compressor,
    pub bloom_mode: BloomFilterMode,
}

impl Trailer {
    pub(crate) fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut t = [0u8; TRAILER_LEN];
        let fields: [u64; 13] = [
            self.index_offset,
            self.index_len,
            self.bloom_offset,
            self.bloom_len,
            self.block_count,
            self.cell_count,
            self.delete_count,
            self.min_timestamp as u64,
            self.max_timestamp as u64,
            self.max_revision as u64,
            self.key_bytes,
            self.value_bytes,
            self.bloom_items,
        ];
        for (i, f) in fields.iter().enumerate() {
            t[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        t[104] = match self.compressor {
            Compressor::None => COMPRESSION_NONE,
            Compressor::Lz4 => COMPRESSION_LZ4,
        };
        t[105] = mode_to_u8(self.bloom_mode);
        t[116..120].copy_from_slice(&self.version.to_le_bytes());
        t[120..128].copy_from_slice(&TRAILER_MAGIC);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&t[..112]), &t[116..]);
        t[112..116].copy_from_slice(&crc.to_le_bytes());
        t
    }

    /// Parses and verifies the trailer of `file`, which is `file_size` bytes long.
    pub(crate) fn decode(t: &[u8], file: &str, file_size: u64) -> Result<Self> {
        let offset = file_size - TRAILER_LEN as u64;
        if t[120..128] != TRAILER_MAGIC {
            return Err(corrupt(
                file,
                offset,
                "not a cell store (bad trailer magic)",
            ));
        }
        let version = read_u32(t, 116);
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                file: file.to_string(),
                version,
            });
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&t[..112]), &t[116..]);
        if crc != read_u32(t, 112) {
            return Err(Error::Checksum {
                file: file.to_string(),
                offset,
                what: "trailer".into(),
            });
        }
        let f = |i: usize| read_u64(t, i * 8);
        let compressor = match t[104] {
            COMPRESSION_NONE => Compressor::None,
            COMPRESSION_LZ4 => Compressor::Lz4,
            c => {
                return Err(corrupt(
                    file,
                    offset,
                    format!("trailer: unknown compression {c}"),
                ));
            }
        };
        let bloom_mode = mode_from_u8(t[105]).ok_or_else(|| {
            corrupt(
                file,
                offset,
                format!("trailer: unknown bloom mode {}", t[105]),
            )
        })?;
        let tr = Self {
            version,
            index_offset: f(0),
            index_len: f(1),
            bloom_offset: f(2),
            bloom_len: f(3),
            block_count: f(4),
            cell_count: f(5),
            delete_count: f(6),
            min_timestamp: f(7) as i64,
            max_timestamp: f(8) as i64,
            max_revision: f(9) as i64,
            key_bytes: f(10),
            value_bytes: f(11),
            bloom_items: f(12),
            file_size,
            compressor,
            bloom_mode,
        };
        // Layout: data blocks | index | bloom | trailer, with no gaps.
        let index_end = tr.index_offset.checked_add(tr.index_len);
        let ok = match bloom_mode {
            BloomFilterMode::None => {
                tr.bloom_offset == 0 && tr.bloom_len == 0 && index_end == Some(offset)
            }
            _ => {
                index_end == Some(tr.bloom_offset)
                    && tr.bloom_offset.checked_add(tr.bloom_len) == Some(offset)
            }
        };
        if !ok {
            return Err(corrupt(
                file,
                offset,
                "trailer: index and bloom blocks do not tile the file",
            ));
        }
        Ok(tr)
    }
}
