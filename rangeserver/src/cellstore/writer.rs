//! Writes a cell store: data blocks as cells arrive, then index, bloom filter and trailer.

use common::key::{KEY_SUFFIX_LEN, KeyRef, common_prefix};
use common::{BloomFilterMode, Compressor};
use dfs_broker::{AppendFlag, BlockingFs, BlockingWriter};

use super::CellStoreOptions;
use super::block::{
    MAGIC_BLOOM, MAGIC_DATA, MAGIC_INDEX, RESTART_INTERVAL, TAIL_LEN, encode_block, encode_tail,
    put_varint,
};
use super::bloom::{build_payload, item_hash, validate_spec};
use super::trailer::{FORMAT_VERSION, Trailer};
use crate::error::{Error, Result};

/// Largest accepted encoded key.
pub const MAX_KEY_BYTES: usize = 16 << 20;
/// Largest accepted value.
pub const MAX_VALUE_BYTES: usize = 1 << 30;
/// Block size targets are clamped to this, so that a block always fits the u32 length fields.
const MAX_BLOCKSIZE_BYTES: u32 = 64 << 20;

/// Writes one cell store. Cells must arrive in strictly ascending key order.
pub struct CellStoreWriter {
    path: String,
    file: BlockingWriter,
    opts: CellStoreOptions,
    blocksize: usize,
    /// Entries of the block being built.
    block: Vec<u8>,
    restarts: Vec<u32>,
    block_entries: u32,
    last_key: Vec<u8>,
    /// Length of the encoded row prefix of `last_key`.
    last_row_len: usize,
    /// Scratch for the framed block.
    out: Vec<u8>,
    /// Index payload built as blocks are written.
    index: Vec<u8>,
    bloom_hashes: Vec<u64>,
    offset: u64,
    cells: u64,
    deletes: u64,
    blocks: u64,
    min_ts: i64,
    max_ts: i64,
    max_rev: i64,
    key_bytes: u64,
    value_bytes: u64,
}

impl CellStoreWriter {
    /// Creates the file (fails if it exists).
    pub fn create(fs: &BlockingFs, path: &str, opts: CellStoreOptions) -> Result<Self> {
        if opts.bloom.mode != BloomFilterMode::None {
            validate_spec(&opts.bloom)
                .map_err(|e| Error::InvalidInput(format!("cell store {path}: {e}")))?;
        }
        let file = fs.create(path, false)?;
        let blocksize = opts.blocksize_bytes.clamp(1, MAX_BLOCKSIZE_BYTES) as usize;
        Ok(Self {
            path: path.to_string(),
            file,
            opts,
            blocksize,
            block: Vec::with_capacity(blocksize + blocksize / 8 + 64),
            restarts: Vec::new(),
            block_entries: 0,
            last_key: Vec::new(),
            last_row_len: 0,
            out: Vec::new(),
            index: Vec::new(),
            bloom_hashes: Vec::new(),
            offset: 0,
            cells: 0,
            deletes: 0,
            blocks: 0,
            min_ts: i64::MAX,
            max_ts: i64::MIN,
            max_rev: i64::MIN,
            key_bytes: 0,
            value_bytes: 0,
        })
    }

    /// Adds a cell; `key` must be a valid encoded key greater than the previous one.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        // Keys come from the engine's caches and checksummed stores: check structure only.
        let k = KeyRef::from_trusted(key).map_err(|e| {
            Error::InvalidInput(format!("cell store {}: invalid key: {e}", self.path))
        })?;
        if self.cells > 0 && key <= self.last_key.as_slice() {
            return Err(Error::InvalidInput(format!(
                "cell store {}: key {:?} is not greater than the previous key",
                self.path, k
            )));
        }
        if key.len() > MAX_KEY_BYTES || value.len() > MAX_VALUE_BYTES {
            return Err(Error::InvalidInput(format!(
                "cell store {}: cell of {} key bytes and {} value bytes exceeds the limits ({MAX_KEY_BYTES}, {MAX_VALUE_BYTES})",
                self.path,
                key.len(),
                value.len()
            )));
        }
        let row_len = k.row_prefix().len();
        let first = self.cells == 0;
        let new_row = first || self.last_key[..self.last_row_len] != key[..row_len];
        match self.opts.bloom.mode {
            BloomFilterMode::None => {}
            BloomFilterMode::Rows => {
                if new_row {
                    self.bloom_hashes.push(item_hash(&key[..row_len]));
                }
            }
            BloomFilterMode::RowsCols => {
                if new_row {
                    self.bloom_hashes.push(item_hash(&key[..row_len]));
                }
                let cell = &key[..key.len() - KEY_SUFFIX_LEN];
                if first || self.last_key[..self.last_key.len() - KEY_SUFFIX_LEN] != *cell {
                    self.bloom_hashes.push(item_hash(cell));
                }
            }
        }

        // A restart entry stores its key whole; the others keep the bytes they share with the
        // previous key and, in v2, store the timestamp and revision as deltas from its.
        let restart = self.block_entries.is_multiple_of(RESTART_INTERVAL);
        if restart {
            self.restarts.push(self.block.len() as u32);
        }
        let stem = key.len() - TAIL_LEN;
        let last_stem = self.last_key.len().saturating_sub(TAIL_LEN);
        let tail = if restart {
            None
        } else {
            encode_tail(&self.last_key[last_stem..], &key[stem..])
        };
        let shared = match (restart, tail) {
            (true, _) => 0,
            (false, Some(_)) => common_prefix(&self.last_key[..last_stem], &key[..stem]),
            (false, None) => common_prefix(&self.last_key, key),
        };
        put_varint(&mut self.block, shared as u64);
        match tail {
            Some((rev, ts)) => {
                put_varint(&mut self.block, ((stem - shared) as u64) << 1);
                put_varint(&mut self.block, value.len() as u64);
                self.block.extend_from_slice(&key[shared..stem]);
                put_varint(&mut self.block, rev);
                put_varint(&mut self.block, ts);
            }
            None => {
                put_varint(&mut self.block, (((key.len() - shared) as u64) << 1) | 1);
                put_varint(&mut self.block, value.len() as u64);
                self.block.extend_from_slice(&key[shared..]);
            }
        }
        self.block.extend_from_slice(value);
        self.block_entries += 1;
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.last_row_len = row_len;

        self.cells += 1;
        if k.flag().is_delete() {
            self.deletes += 1;
        }
        let ts = k.timestamp();
        self.min_ts = self.min_ts.min(ts);
        self.max_ts = self.max_ts.max(ts);
        self.max_rev = self.max_rev.max(k.revision());
        self.key_bytes += key.len() as u64;
        self.value_bytes += value.len() as u64;

        if self.block.len() + 4 * self.restarts.len() + 4 >= self.blocksize {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Cells added so far.
    pub fn cells(&self) -> u64 {
        self.cells
    }

    /// Approximate file size so far (written blocks plus the block being built).
    pub fn bytes_written(&self) -> u64 {
        self.offset + self.block.len() as u64
    }

    fn append(&mut self) -> Result<()> {
        self.file.append(&self.out, AppendFlag::None)?;
        self.offset += self.out.len() as u64;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        for r in &self.restarts {
            self.block.extend_from_slice(&r.to_le_bytes());
        }
        self.block
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        let compress = self.opts.compressor == Compressor::Lz4;
        encode_block(
            &mut self.out,
            MAGIC_DATA,
            compress,
            self.block_entries,
            &self.block,
        );
        let offset = self.offset;
        let size = self.out.len() as u32;
        self.append()?;
        put_varint(&mut self.index, self.last_key.len() as u64);
        self.index.extend_from_slice(&self.last_key);
        self.index.extend_from_slice(&offset.to_le_bytes());
        self.index.extend_from_slice(&size.to_le_bytes());
        self.blocks += 1;
        self.block.clear();
        self.restarts.clear();
        self.block_entries = 0;
        Ok(())
    }

    /// Writes the last block, index, bloom filter and trailer, then closes (and syncs) the file.
    pub fn finish(mut self) -> Result<Trailer> {
        if self.block_entries > 0 {
            self.flush_block()?;
        }
        let block_count = u32::try_from(self.blocks).map_err(|_| {
            Error::InvalidInput(format!("cell store {}: too many blocks", self.path))
        })?;
        let compress = self.opts.compressor == Compressor::Lz4;
        let index_offset = self.offset;
        let index = std::mem::take(&mut self.index);
        encode_block(&mut self.out, MAGIC_INDEX, compress, block_count, &index);
        self.append()?;
        let index_len = self.offset - index_offset;

        let (mut bloom_offset, mut bloom_len) = (0, 0);
        let bloom_items = self.bloom_hashes.len() as u64;
        if self.opts.bloom.mode != BloomFilterMode::None {
            bloom_offset = self.offset;
            let payload = build_payload(&self.opts.bloom, &self.bloom_hashes);
            let items = u32::try_from(bloom_items).unwrap_or(u32::MAX);
            encode_block(&mut self.out, MAGIC_BLOOM, false, items, &payload);
            self.append()?;
            bloom_len = self.offset - bloom_offset;
        }
        let empty = self.cells == 0;
        let mut trailer = Trailer {
            version: FORMAT_VERSION,
            cell_count: self.cells,
            delete_count: self.deletes,
            block_count: self.blocks,
            min_timestamp: if empty { 0 } else { self.min_ts },
            max_timestamp: if empty { 0 } else { self.max_ts },
            max_revision: if empty { 0 } else { self.max_rev },
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            file_size: 0,
            index_offset,
            index_len,
            bloom_offset,
            bloom_len,
            bloom_items,
            compressor: self.opts.compressor,
            bloom_mode: self.opts.bloom.mode,
        };
        self.out.clear();
        self.out.extend_from_slice(&trailer.encode());
        self.append()?;
        self.file.close()?;
        trailer.file_size = self.offset;
        Ok(trailer)
    }
}
