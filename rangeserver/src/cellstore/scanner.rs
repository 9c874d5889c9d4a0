//! A cursor over one cell store: index lookup to the one block that can hold a key, binary
//! search over the block's restart points, then sequential decoding.

use std::sync::Arc;

use super::block::{DataBlock, TAIL_LEN, corrupt, decode_entry, decode_tail};
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
    /// Bytes the current key kept of the previous one (its entry's shared length).
    shared: usize,
    value_start: usize,
    value_end: usize,
    valid: bool,
    /// See [`CellIter::parked`]: the last seek was of one row the bloom filter rules out.
    parked: bool,
    blocks_read: u64,
    /// The last block read from the file (not the cache), `usize::MAX` for none.
    last_miss: usize,
    /// The block after the last one the file system was asked to read ahead.
    read_ahead_to: usize,
}

/// Bytes of blocks asked for at once when a scanner reads the blocks of a store in order
/// ([`CellStoreScanner`]'s read-ahead): about 40 blocks of 64 KiB compressed to 25 KiB, in one
/// request the kernel reads with a few large I/Os.
pub const READ_AHEAD_BYTES: u64 = 1 << 20;
/// A new read-ahead request is made when fewer than this many blocks asked for are left.
const READ_AHEAD_LOW_BLOCKS: usize = 8;

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
            shared: 0,
            value_start: 0,
            value_end: 0,
            valid: false,
            parked: false,
            blocks_read: 0,
            last_miss: usize::MAX,
            read_ahead_to: 0,
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
        let (b, from_file) = self.store.load_block(idx, self.fill_cache)?;
        if from_file {
            self.read_ahead(idx);
        }
        self.blocks_read += 1;
        self.block = Some(b);
        self.block_idx = idx;
        self.next = 0;
        self.key.clear();
        Ok(())
    }

    /// After block `idx` was read from the file: when the blocks read from the file come in
    /// order, at most one block apart (a scan, or a key set dense enough to need most blocks),
    /// the file system is asked for the next [`READ_AHEAD_BYTES`] of blocks at once, so they
    /// arrive in a few large reads while this scanner decodes, instead of one small read per
    /// block as it gets there. Sparse seeks ask for nothing.
    fn read_ahead(&mut self, idx: usize) {
        let in_order =
            self.last_miss != usize::MAX && idx > self.last_miss && idx - self.last_miss <= 2;
        self.last_miss = idx;
        if in_order && self.read_ahead_to < idx + READ_AHEAD_LOW_BLOCKS {
            let from = self.read_ahead_to.max(idx + 1);
            self.read_ahead_to = self.store.prefetch_blocks(from, READ_AHEAD_BYTES);
        }
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
        let Some(e) = decode_entry(&b.data, self.next, b.entries_end, b.tails) else {
            return Err(self.corrupt("entry overruns the block"));
        };
        let unshared = &b.data[e.unshared_start..e.unshared_start + e.unshared_len];
        match e.tail {
            None => {
                if e.shared > self.key.len() {
                    return Err(self.corrupt("entry shares more bytes than the previous key has"));
                }
                self.key.truncate(e.shared);
                self.key.extend_from_slice(unshared);
            }
            Some((rev, ts)) => {
                // The timestamp and revision follow from the previous key's.
                let n = self.key.len();
                if n < TAIL_LEN || e.shared > n - TAIL_LEN {
                    return Err(self.corrupt(
                        "entry shares more bytes than the previous key has before its timestamp",
                    ));
                }
                let tail = decode_tail(&self.key[n - TAIL_LEN..], rev, ts);
                self.key.truncate(e.shared);
                self.key.extend_from_slice(unshared);
                self.key.extend_from_slice(&tail);
            }
        }
        self.shared = e.shared;
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

    /// True when a seek to `target` is forward and ends in the held block.
    fn stays_in_block(&self, target: &[u8]) -> bool {
        self.valid
            && common::key::bytes_cmp(target, &self.key).is_gt()
            && common::key::bytes_cmp(target, self.store.index_key(self.block_idx)).is_le()
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
        if !same {
            b.prefetch_search();
        }
        let start = b.restart(b.restarts_below(target).saturating_sub(1));
        if !(forward && same && start <= self.next) {
            self.next = start;
            self.key.clear();
        }
        self.step_to(target)
    }

    /// Steps from the current position to the first entry at or past `target`. Each entry's
    /// key is compared with the target from where it can first differ: an entry that keeps
    /// more of the previous key than that key had in common with the target lies below the
    /// target as well, with no comparison; otherwise only the bytes after the common ones are
    /// looked at. A seek steps over up to a restart interval of entries, so this avoids a
    /// whole-key comparison per entry.
    fn step_to(&mut self, target: &[u8]) -> Result<()> {
        // `Some(m)`: the current key lies below the target and shares its first `m` bytes.
        let mut below: Option<usize> = None;
        loop {
            if !self.decode_next()? {
                if self.block.is_none() || self.block_idx + 1 >= self.store.num_blocks() {
                    self.valid = false;
                    return Ok(());
                }
                self.set_block(self.block_idx + 1)?;
                below = None;
                continue;
            }
            self.valid = true;
            let shared = self.shared;
            let from = match below {
                // The key keeps a byte of the previous key that is below the target's.
                Some(m) if shared > m => continue,
                Some(_) => shared,
                None => 0,
            };
            let k = &self.key[from..];
            let t = &target[from.min(target.len())..];
            let l = common::key::common_prefix(k, t);
            let ge = match (k.get(l), t.get(l)) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => a > b,
            };
            if ge {
                return Ok(());
            }
            below = Some(from + l);
        }
    }
}

/// True when `key` is a row's first key (`key::row_start`) and `end` lies at or before the
/// row's end (`key::row_end`: `key` with its last byte 1 made 2), so that a seek bounded by
/// `end` reads that one row.
fn one_row(key: &[u8], end: &[u8]) -> bool {
    let n = key.len();
    if n < 2 || key[n - 2..] != [0, 1] || crate::scan::visible::row_prefix_len(key) != n {
        return false;
    }
    let head = &key[..n - 1];
    if end.len() < n - 1 {
        return end <= &head[..end.len()];
    }
    match end[..n - 1].cmp(head) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => match end.get(n - 1) {
            None => true,
            Some(&b) => b < 2 || (b == 2 && end.len() == n),
        },
    }
}

impl CellIter for CellStoreScanner {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.parked = false;
        let r = self.seek_inner(key);
        if r.is_err() {
            self.valid = false;
        }
        r
    }

    /// A seek of one row (`key` its first key, `end` not past its last) that the store's bloom
    /// filter rules out reads nothing and parks the scanner ([`CellIter::parked`]). The filter
    /// is asked only when the seek would leave the held block: inside it a seek reads nothing
    /// anyway, and a probe (a few cache misses) would cost more than it saves.
    fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
        // A seek that ends before the store's first key reads nothing either (stores of
        // disjoint spans, which are not merged, meet many such seeks).
        if end.is_some_and(|e| self.store.starts_at_or_after(e)) {
            self.valid = false;
            self.parked = true;
            return Ok(());
        }
        if let Some(end) = end
            && self.store.has_bloom()
            && !self.stays_in_block(key)
            && one_row(key, end)
            && !self.store.may_contain_row_prefix(key)
        {
            self.valid = false;
            self.parked = true;
            return Ok(());
        }
        self.seek(key)
    }

    fn parked(&self) -> bool {
        self.parked
    }

    /// The trailer counts every delete (cell deletes too): a store without any holds no wide
    /// one.
    fn may_hold_wide_deletes(&self) -> bool {
        self.store.trailer().delete_count > 0
    }

    fn may_hold_deletes(&self) -> bool {
        self.store.trailer().delete_count > 0
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
