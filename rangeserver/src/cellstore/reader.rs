//! An open cell store: trailer, block index and bloom filter in memory, data blocks read on
//! demand through the shared block cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::BloomFilterMode;
use dfs_broker::{BlockingFs, BlockingReader};

use super::block::{
    DataBlock, HEADER_LEN, MAGIC_BLOOM, MAGIC_DATA, MAGIC_INDEX, corrupt, decode_block,
    get_varint32, read_u32, read_u64,
};
use super::bloom::Bloom;
use super::scanner::CellStoreScanner;
use super::trailer::{TRAILER_LEN, Trailer};
use crate::block_cache::BlockCache;
use crate::error::Result;

/// Source of file ids for block-cache keys: unique per opened store within the process.
static NEXT_FILE_ID: AtomicU64 = AtomicU64::new(1);

/// The first 8 bytes of `rest` as a big-endian number, zero-padded: `a < b` implies
/// `index_tag(a) <= index_tag(b)`.
fn index_tag(rest: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = rest.len().min(8);
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

/// One block of the index: its last key (in `CellStore::index_keys`), offset and stored size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IndexEntry {
    key_start: usize,
    key_len: usize,
    pub offset: u64,
    pub size: u32,
}

/// An open, immutable cell store; shared as `Arc<CellStore>`.
pub struct CellStore {
    path: String,
    reader: BlockingReader,
    cache: Arc<BlockCache>,
    file_id: u64,
    trailer: Trailer,
    index_keys: Vec<u8>,
    index: Vec<IndexEntry>,
    /// Bytes every index key starts with (those of the first and last key in common).
    index_lead: usize,
    /// Per index entry, the 8 bytes of its key after `index_lead` as a big-endian number
    /// (zero-padded): [`CellStore::find_block`] searches these, dense in memory, and compares
    /// whole keys only among entries with the target's tag.
    index_tags: Vec<u64>,
    /// The last tag of every run of [`TAG_RUN`] tags: small enough to stay in the CPU's caches,
    /// so a search touches the large `index_tags` in one run only (a few cache lines).
    tag_runs: Vec<u64>,
    bloom: Option<Bloom>,
    /// The first key, read from the first block when first asked for ([`CellStore::key_span`]).
    first_key: std::sync::OnceLock<Vec<u8>>,
}

impl CellStore {
    /// Bytes this open store keeps in memory: its block index (keys, entries, tags) and its
    /// bloom filter.
    pub fn memory_bytes(&self) -> u64 {
        (self.index_keys.capacity()
            + self.index.capacity() * std::mem::size_of::<IndexEntry>()
            + (self.index_tags.capacity() + self.tag_runs.capacity()) * 8
            + self.bloom.as_ref().map_or(0, Bloom::memory_bytes)
            + self.first_key.get().map_or(0, Vec::capacity)) as u64
    }
}

/// Tags per run of [`CellStore::tag_runs`] (two cache lines of tags).
const TAG_RUN: usize = 16;

/// The last tag of every run of `TAG_RUN` tags (the last run may be shorter).
fn tag_runs(tags: &[u64]) -> Vec<u64> {
    tags.chunks(TAG_RUN)
        .map(|c| *c.last().expect("chunks are not empty"))
        .collect()
}

/// The first position in `tags` (sorted) whose tag is `>= t`, through `runs` ([`tag_runs`]).
fn first_tag_at_least(tags: &[u64], runs: &[u64], t: u64) -> usize {
    let run = runs.partition_point(|&x| x < t);
    let from = run * TAG_RUN;
    if from >= tags.len() {
        return tags.len();
    }
    let to = (from + TAG_RUN).min(tags.len());
    from + tags[from..to].partition_point(|&x| x < t)
}

/// The end of the run of `t` starting at `lo` in `tags` (sorted): galloping, so that the usual
/// run of one or two touches the cache lines next to `lo` only.
fn end_of_tag(tags: &[u64], lo: usize, t: u64) -> usize {
    let mut step = 1;
    let mut known = lo; // tags[lo..known] all equal t
    loop {
        let probe = known + step;
        if probe >= tags.len() {
            return known + tags[known..].partition_point(|&x| x == t);
        }
        if tags[probe] != t {
            return known + tags[known..probe].partition_point(|&x| x == t);
        }
        known = probe;
        step *= 2;
    }
}

impl std::fmt::Debug for CellStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellStore")
            .field("path", &self.path)
            .field("file_id", &self.file_id)
            .field("trailer", &self.trailer)
            .finish()
    }
}

impl CellStore {
    /// Opens `path`, verifying the trailer, index and bloom filter.
    pub fn open(fs: &BlockingFs, path: &str, cache: Arc<BlockCache>) -> Result<Arc<Self>> {
        let reader = fs.open(path)?;
        let file_size = reader.length()?;
        if file_size < TRAILER_LEN as u64 {
            return Err(corrupt(
                path,
                0,
                format!("file of {file_size} bytes is too short for a cell store"),
            ));
        }
        let t = reader.pread(file_size - TRAILER_LEN as u64, TRAILER_LEN)?;
        let trailer = Trailer::decode(&t, path, file_size)?;

        let index_len = usize::try_from(trailer.index_len)
            .map_err(|_| corrupt(path, trailer.index_offset, "index too long"))?;
        let buf = reader.pread(trailer.index_offset, index_len)?;
        let (count, payload) = decode_block(path, trailer.index_offset, buf, MAGIC_INDEX)?;
        let (index_keys, index) = parse_index(&payload, count, &trailer, path)?;
        let key_of = |e: &IndexEntry| &index_keys[e.key_start..e.key_start + e.key_len];
        let index_lead = match (index.first(), index.last()) {
            (Some(a), Some(b)) => common::key::common_prefix(key_of(a), key_of(b)),
            _ => 0,
        };
        let index_tags = index
            .iter()
            .map(|e| index_tag(&key_of(e)[index_lead.min(e.key_len)..]))
            .collect::<Vec<u64>>();
        let tag_runs = tag_runs(&index_tags);

        let bloom = if trailer.bloom_mode == BloomFilterMode::None {
            None
        } else {
            let len = usize::try_from(trailer.bloom_len)
                .map_err(|_| corrupt(path, trailer.bloom_offset, "bloom too long"))?;
            let buf = reader.pread(trailer.bloom_offset, len)?;
            let (_, payload) = decode_block(path, trailer.bloom_offset, buf, MAGIC_BLOOM)?;
            let b = Bloom::parse(payload, path, trailer.bloom_offset)?;
            if b.mode != trailer.bloom_mode {
                return Err(corrupt(
                    path,
                    trailer.bloom_offset,
                    "bloom mode differs from the trailer's",
                ));
            }
            Some(b)
        };
        Ok(Arc::new(Self {
            path: path.to_string(),
            reader,
            cache,
            file_id: NEXT_FILE_ID.fetch_add(1, Ordering::Relaxed),
            trailer,
            index_keys,
            index,
            index_lead,
            index_tags,
            tag_runs,
            bloom,
            first_key: std::sync::OnceLock::new(),
        }))
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn trailer(&self) -> &Trailer {
        &self.trailer
    }

    /// True when the store has a bloom filter.
    pub fn has_bloom(&self) -> bool {
        self.bloom.is_some()
    }

    /// Like [`CellStore::may_contain_row`] for a row already encoded as `key::row_start(row)`.
    /// A row past the store's last key, or before its first key once that was read
    /// ([`CellStore::key_span`]), is ruled out before the bloom filter is asked.
    pub fn may_contain_row_prefix(&self, row_start: &[u8]) -> bool {
        // Every key of the row starts with `row_start` and so sorts at or after it.
        let Some(last) = self.index.len().checked_sub(1) else {
            return false;
        };
        if self.index_key(last) < row_start {
            return false;
        }
        if let Some(first) = self.first_key.get()
            && first.as_slice() > row_start
            && !first.starts_with(row_start)
        {
            return false;
        }
        match &self.bloom {
            None => true,
            Some(b) => b.may_contain(row_start),
        }
    }

    /// False only if the store's key span or its bloom filter proves the row absent
    /// ([`CellStore::may_contain_row_prefix`]).
    pub fn may_contain_row(&self, row: &[u8]) -> bool {
        self.may_contain_row_prefix(&common::key::row_start(row))
    }

    /// With a rows+cols filter, false only if the cell is provably absent; with a rows filter
    /// this is `may_contain_row`.
    pub fn may_contain_cell(&self, row: &[u8], family: u8, qualifier: &[u8]) -> bool {
        match &self.bloom {
            Some(b) if b.mode == BloomFilterMode::RowsCols => {
                b.may_contain(&common::key::cell_start(row, family, qualifier))
            }
            _ => self.may_contain_row(row),
        }
    }

    /// The last key of the block that straddles the middle of the data by bytes.
    pub fn middle_key(&self) -> Option<Vec<u8>> {
        let half = self.trailer.index_offset / 2;
        let i = self
            .index
            .partition_point(|e| e.offset + u64::from(e.size) <= half);
        let i = i.min(self.index.len().checked_sub(1)?);
        Some(self.index_key(i).to_vec())
    }

    /// A new unpositioned scanner; call `seek` before use.
    pub fn scanner(self: &Arc<Self>, fill_cache: bool) -> CellStoreScanner {
        CellStoreScanner::new(self.clone(), fill_cache)
    }

    pub(crate) fn num_blocks(&self) -> usize {
        self.index.len()
    }

    /// The first and last keys (`None` for a store without cells). The first is read from the
    /// first block once and kept.
    pub(crate) fn key_span(self: &Arc<Self>) -> Result<Option<(&[u8], &[u8])>> {
        let Some(last) = self.index.len().checked_sub(1) else {
            return Ok(None);
        };
        let first = match self.first_key.get() {
            Some(k) => k,
            None => {
                let mut sc = self.scanner(false);
                crate::iter::CellIter::seek(&mut sc, b"")?;
                // A store whose first block held no cell (none is written so) gets the empty
                // key, below every key: it then rules nothing out.
                let k = if crate::iter::CellIter::valid(&sc) {
                    crate::iter::CellIter::key(&sc).to_vec()
                } else {
                    Vec::new()
                };
                self.first_key.get_or_init(|| k)
            }
        };
        Ok(Some((first.as_slice(), self.index_key(last))))
    }

    /// True when the store's first key is known ([`CellStore::key_span`]) and not below `end`:
    /// nothing before `end` is stored here.
    pub(crate) fn starts_at_or_after(&self, end: &[u8]) -> bool {
        self.first_key.get().is_some_and(|k| k.as_slice() >= end)
    }

    /// Per data block, its last key and stored size, in key order.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = (&[u8], u64)> {
        (0..self.index.len()).map(|i| (self.index_key(i), u64::from(self.index[i].size)))
    }

    pub(crate) fn index_key(&self, i: usize) -> &[u8] {
        let e = &self.index[i];
        &self.index_keys[e.key_start..e.key_start + e.key_len]
    }

    pub(crate) fn block_offset(&self, i: usize) -> u64 {
        self.index[i].offset
    }

    /// The first block whose last key is `>= key` (`num_blocks()` if none).
    pub(crate) fn find_block(&self, key: &[u8]) -> usize {
        let Some(first) = self.index.first() else {
            return 0;
        };
        let lead = &self.index_keys[first.key_start..first.key_start + self.index_lead];
        match key[..key.len().min(lead.len())].cmp(lead) {
            std::cmp::Ordering::Less => return 0,
            std::cmp::Ordering::Greater => return self.index.len(),
            std::cmp::Ordering::Equal => {}
        }
        // Tags order as their keys do: a smaller tag is a smaller key, a larger a larger.
        let t = index_tag(&key[lead.len()..]);
        let lo = first_tag_at_least(&self.index_tags, &self.tag_runs, t);
        let hi = end_of_tag(&self.index_tags, lo, t);
        lo + self.index[lo..hi].partition_point(|e| {
            common::key::bytes_cmp(&self.index_keys[e.key_start..e.key_start + e.key_len], key)
                .is_lt()
        })
    }

    /// Fetches data block `i` from the cache or the file; true when it came from the file.
    pub(crate) fn load_block(&self, i: usize, fill_cache: bool) -> Result<(Arc<DataBlock>, bool)> {
        let e = self.index[i];
        if let Some(b) = self.cache.get(self.file_id, e.offset) {
            return Ok((b, false));
        }
        let buf = self.reader.pread(e.offset, e.size as usize)?;
        let (count, payload) = decode_block(&self.path, e.offset, buf, MAGIC_DATA)?;
        let tails = self.trailer.version >= 2;
        let b = Arc::new(DataBlock::parse(
            payload, count, tails, &self.path, e.offset,
        )?);
        if fill_cache {
            self.cache.insert(self.file_id, e.offset, b.clone());
        }
        Ok((b, true))
    }

    /// True when data block `i` is in the block cache (no hit or miss is counted).
    pub(crate) fn block_cached(&self, i: usize) -> bool {
        self.cache.contains(self.file_id, self.index[i].offset)
    }

    /// Stored bytes of data block `i`.
    pub(crate) fn block_size(&self, i: usize) -> u64 {
        u64::from(self.index[i].size)
    }

    /// Asks the file system to fetch data blocks `first..last` in the background
    /// ([`dfs_broker::FsReader::prefetch`]).
    pub(crate) fn prefetch_span(&self, first: usize, last: usize) {
        let last = last.min(self.index.len());
        if first >= last {
            return;
        }
        let start = self.index[first].offset;
        let e = self.index[last - 1];
        if let Ok(len) = usize::try_from(e.offset + u64::from(e.size) - start) {
            self.reader.prefetch(start, len);
        }
    }

    /// Asks the file system to fetch blocks `from..` in the background, about `bytes` of them
    /// in one request ([`dfs_broker::FsReader::prefetch`]); returns the block after the last
    /// one asked for.
    pub(crate) fn prefetch_blocks(&self, from: usize, bytes: u64) -> usize {
        let Some(first) = self.index.get(from) else {
            return from;
        };
        let mut to = from;
        let mut len = 0u64;
        while to < self.index.len() && len < bytes {
            len += u64::from(self.index[to].size);
            to += 1;
        }
        if let Ok(len) = usize::try_from(len) {
            self.reader.prefetch(first.offset, len);
        }
        to
    }
}

/// Parses a verified index payload and checks it against the trailer.
fn parse_index(
    p: &[u8],
    count: u32,
    trailer: &Trailer,
    path: &str,
) -> Result<(Vec<u8>, Vec<IndexEntry>)> {
    let at = trailer.index_offset;
    let bad = |msg: &str| corrupt(path, at, format!("index block: {msg}"));
    if u64::from(count) != trailer.block_count {
        return Err(bad("entry count differs from the trailer's block count"));
    }
    let mut keys = Vec::new();
    let mut index = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut pos = 0usize;
    let mut next_offset = 0u64;
    for _ in 0..count {
        let key_len = get_varint32(p, &mut pos).ok_or_else(|| bad("truncated entry"))? as usize;
        if p.len().saturating_sub(pos) < key_len + 12 {
            return Err(bad("truncated entry"));
        }
        let key = &p[pos..pos + key_len];
        if let Some(prev) = index.last() {
            let prev: &IndexEntry = prev;
            if keys[prev.key_start..prev.key_start + prev.key_len] >= *key {
                return Err(bad("keys out of order"));
            }
        }
        let offset = read_u64(p, pos + key_len);
        let size = read_u32(p, pos + key_len + 8);
        // Data blocks tile the file from offset 0 up to the index.
        if offset != next_offset || (size as usize) < HEADER_LEN {
            return Err(bad("block offsets do not tile the data region"));
        }
        next_offset = offset + u64::from(size);
        index.push(IndexEntry {
            key_start: keys.len(),
            key_len,
            offset,
            size,
        });
        keys.extend_from_slice(key);
        pos += key_len + 12;
    }
    if pos != p.len() || next_offset != trailer.index_offset {
        return Err(bad("entries do not fill the index or the data region"));
    }
    Ok((keys, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two-level search finds what one binary search over all tags finds, for runs of equal
    /// tags of every length, at every length of the array around the run size.
    #[test]
    fn tag_runs_find_what_a_full_search_finds() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        for len in (0..70).chain([255, 256, 257, 1000]) {
            for spread in [2u64, 5, 1000] {
                let mut tags: Vec<u64> = (0..len).map(|_| next() % spread).collect();
                tags.sort_unstable();
                let runs = tag_runs(&tags);
                for t in 0..=spread {
                    let lo = tags.partition_point(|&x| x < t);
                    let hi = lo + tags[lo..].partition_point(|&x| x == t);
                    assert_eq!(first_tag_at_least(&tags, &runs, t), lo, "{tags:?} {t}");
                    assert_eq!(end_of_tag(&tags, lo, t), hi, "{tags:?} {t}");
                }
            }
        }
    }
}
