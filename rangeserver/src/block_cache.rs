//! The shared, bounded cache of decompressed cell-store blocks.
//!
//! Keyed by (file id, block offset); a file id is unique per opened `CellStore`, so a reopened
//! or replaced file never sees another file's blocks. Weighted by decompressed size.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cellstore::DataBlock;

#[derive(Clone)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<DataBlock>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), val: &Arc<DataBlock>) -> u64 {
        val.weight()
    }
}

/// A thread-safe cache of verified, decompressed data blocks, bounded by bytes.
pub struct BlockCache {
    cache: quick_cache::sync::Cache<(u64, u64), Arc<DataBlock>, BlockWeighter>,
    capacity_bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.capacity_bytes)
            .field("used_bytes", &self.used_bytes())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of decompressed blocks.
    pub fn new(capacity_bytes: u64) -> Arc<Self> {
        // quick_cache shrinks its shard count until each shard expects >= 32 items; estimating
        // items as 64 KiB blocks keeps every shard >= 2 MiB, so default-sized blocks always fit
        // one. Shard capacities round up, so give it a multiple of 1024 (shard counts are powers
        // of two below that) to keep the total within `capacity_bytes`.
        let items = (capacity_bytes / (64 * 1024)).clamp(1, 1 << 24) as usize;
        let weight_capacity = if capacity_bytes >= 1024 {
            capacity_bytes & !1023
        } else {
            capacity_bytes
        };
        Arc::new(Self {
            cache: quick_cache::sync::Cache::with_weighter(items, weight_capacity, BlockWeighter),
            capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Bytes of blocks held now.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// True when the block is cached; counts neither a hit nor a miss.
    pub(crate) fn contains(&self, file_id: u64, offset: u64) -> bool {
        self.cache.contains_key(&(file_id, offset))
    }

    pub(crate) fn get(&self, file_id: u64, offset: u64) -> Option<Arc<DataBlock>> {
        let r = self.cache.get(&(file_id, offset));
        let counter = if r.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        r
    }

    pub(crate) fn insert(&self, file_id: u64, offset: u64, block: Arc<DataBlock>) {
        self.cache.insert((file_id, offset), block);
    }
}
