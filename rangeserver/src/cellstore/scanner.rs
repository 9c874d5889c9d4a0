//! A cursor over one cell store: index lookup to the one block that can hold a key, binary
//! search over the block's restart points, then sequential decoding.

use std::sync::Arc;

use super::block::{DataBlock, corrupt, decode_entry};
use super::reader::CellStore;
use crate::error::Result;
use crate::iter::CellIter;

/// A scanner over a [`CellStore`]; unpositioned until `seek`.
pub struct CellStoreScanner {
    store: Arc<CellStore>,
    fill_cache: bool,
    block: Option<Arc<DataBlock>>,
    block_idx: usize,
    /// Offset in the block of the entry after the current one.
    next: usize,
    /// The current full key; entries overwrite only their unshared suffix.
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
    valid: bool,
    blocks_read: u64,
}

impl std::fmt::Debug for CellStoreScanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellStoreScanner")
            .field("path", &self.store.path())
            .field("block_idx", &self.block_idx)
            .field("valid", &self.valid)
            .finish()
    }
}

impl CellStoreScanner {
    pub(crate) fn new(store: Arc<CellStore>, fill_cache: bool) -> Self {
        Self {
            store,
            fill_cache,
            block: None,
            block_idx: 0,
            next: 0,
            key: Vec::new(),
            value_start: 0,
            value_end: 0,
            valid: false,
            blocks_read: 0,
        }
    }

    /// Blocks this scanner fetched (from the cache or the file).
    pub fn blocks_read(&self) -> u64 {
        self.blocks_read
    }

    /// The store this scanner reads.
    pub fn store(&self) -> &Arc<CellStore> {
        &self.store
    }

    fn set_block(&mut self, idx: usize) -> Result<()> {
        self.block = None;
        let b = self.store.load_block(idx, self.fill_cache)?;
        self.blocks_read += 1;
        self.block = Some(b);
        self.block_idx = idx;
        self.next = 0;
        self.key.clear();
        Ok(())
    }

    fn corrupt(&self, msg: &str) -> crate::error::Error {
        corrupt(
            self.store.path(),
            self.store.block_offset(self.block_idx),
            format!("data block: {msg}"),
        )
    }

    /// Decodes the entry at `self.next`; false if the block has no more entries.
    #[inline]
    fn decode_next(&mut self) -> Result<bool> {
        let Some(b) = &self.block else {
            return Ok(false);
        };
        if self.next >= b.entries_end {
            return Ok(false);
        }
        let Some(e) = decode_entry(&b.data, self.next, b.entries_end) else {
            return Err(self.corrupt("entry overruns the block"));
        };
        if e.shared > self.key.len() {
            return Err(self.corrupt("entry shares more bytes than the previous key has"));
        }
        self.key.truncate(e.shared);
        self.key
            .extend_from_slice(&b.data[e.unshared_start..e.unshared_start + e.unshared_len]);
        self.value_start = e.value_start;
        self.value_end = e.value_start + e.value_len;
        self.next = e.next;
        Ok(true)
    }

    /// Moves to the next entry, loading following blocks as needed.
    fn advance(&mut self) -> Result<()> {
        loop {
            if self.decode_next()? {
                self.valid = true;
                return Ok(());
            }
            if self.block.is_none() || self.block_idx + 1 >= self.store.num_blocks() {
                self.valid = false;
                return Ok(());
            }
            self.set_block(self.block_idx + 1)?;
        }
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        // A forward seek that stays in the held block needs no index search, and steps on from
        // where the scanner stands when no restart point lies between it and the target.
        let forward = self.valid && common::key::bytes_cmp(target, &self.key).is_gt();
        self.valid = false;
        let idx = if forward
            && common::key::bytes_cmp(target, self.store.index_key(self.block_idx)).is_le()
        {
            self.block_idx
        } else {
            self.store.find_block(target)
        };
        if idx >= self.store.num_blocks() {
            return Ok(());
        }
        let same = self.block.is_some() && self.block_idx == idx;
        if !same {
            self.set_block(idx)?;
        }
        let b = self.block.as_ref().expect("set_block succeeded");
        let start = b.restart(b.restarts_below(target).saturating_sub(1));
        if !(forward && same && start <= self.next) {
            self.next = start;
            self.key.clear();
        }
        loop {
            self.advance()?;
            if !self.valid || common::key::bytes_cmp(&self.key, target).is_ge() {
                return Ok(());
            }
        }
    }
}

impl CellIter for CellStoreScanner {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        let r = self.seek_inner(key);
        if r.is_err() {
            self.valid = false;
        }
        r
    }

    #[inline]
    fn valid(&self) -> bool {
        self.valid
    }

    #[inline]
    fn key(&self) -> &[u8] {
        &self.key
    }

    #[inline]
    fn value(&self) -> &[u8] {
        match &self.block {
            Some(b) => &b.data[self.value_start..self.value_end],
            None => &[],
        }
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let r = self.advance();
        if r.is_err() {
            self.valid = false;
        }
        r
    }

    fn origin(&self) -> Option<(String, u64)> {
        self.valid.then(|| {
            (
                self.store.path().to_string(),
                self.store.block_offset(self.block_idx),
            )
        })
    }
}
