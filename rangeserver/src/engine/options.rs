//! Engine settings (`EngineOptions`: every limit) and the wall clock it reads.

use std::sync::Arc;

use crate::commitlog::CommitLogOptions;

/// A source of wall-clock time, injectable for tests of TTL and timestamps.
pub trait Clock: Send + Sync {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0)
    }
}

/// Engine settings; every queue, cache and buffer limit is here.
#[derive(Clone)]
pub struct EngineOptions {
    /// Bound on all cell caches together; writers wait while it is exceeded.
    pub cell_cache_limit_bytes: u64,
    /// One access group's active cache is written out past this size. Half the limit
    /// (128 MiB) was measured against this quarter: a replicated file system with the
    /// commit-log flush on made half the stores and rewrote 790 MiB less in merges (`ht bench
    /// dfs`, 5M lines x 4 loaders), but `ht bench engine --num 50000000` lost 11% on
    /// fillrandom and 27% on readseq (bigger caches left to read, writers waiting on a frozen
    /// cache of half the limit).
    pub cell_cache_flush_bytes: u64,
    /// Shared block cache size.
    pub block_cache_bytes: u64,
    pub commit_log: CommitLogOptions,
    /// A range is split once it holds more than this; 0 disables automatic splits.
    pub split_size_bytes: u64,
    /// Tables whose ranges are never split, automatically or on request: a cluster's
    /// METADATA, which clients and the master read as the one range `/ht/root` names (a split
    /// half recovered onto another server would leave the other half unreachable).
    pub unsplit_tables: Vec<u32>,
    /// A merging compaction runs when more than this many of a group's cell stores overlap at
    /// one key, or the group holds over 4 times this many (stores of disjoint key spans, what
    /// a load in key order writes; then this many of them, next in age, are merged).
    pub max_stores_per_group: usize,
    /// Which stores that merge takes: from the oldest store no bigger than this many times
    /// the newer ones together, to the newest (`maintenance::policy::select_merge`). Lower rewrites
    /// less and leaves more stores for reads to merge; 0 merges only the two newest.
    pub merge_ratio: f64,
    /// Background maintenance threads (compactions, splits): the bound on their concurrency.
    pub maintenance_threads: usize,
    /// Bound on the maintenance task queue.
    pub maintenance_queue_limit: usize,
    pub clock: Arc<dyn Clock>,
    /// The iterator and combiner kinds this engine can run.
    pub registry: Arc<crate::iterators::Registry>,
    /// Cells a scan's iterators may step over per block before the scan yields its thread.
    pub scan_work_per_block: u64,
    /// A flush of an access group holding combiner families runs as a major compaction (the
    /// cache and every store into one store, versions combined: what a counter table wants)
    /// while the group's stores hold at most this many times the bytes of its cache, so the
    /// rewrite costs at most that much more than the flush; 0 never.
    pub combined_flush_ratio: f64,
    /// While an access group holding combiner families has at most this many bytes of stores,
    /// its cache is flushed (and, by `combined_flush_ratio`, folded into its stores by a major
    /// compaction) once it holds this much rather than `cell_cache_flush_bytes`: the cells of
    /// such a cache are mostly versions waiting to be combined, and every read of a column
    /// combines all of its versions there. 0 disables.
    pub combined_flush_bytes: u64,
    /// Threads an aggregate run in this process ([`Engine::aggregate`]) may use: its scan is
    /// split into at most this many pieces ([`Engine::scan_pieces`]) folded at once; 1 runs it
    /// whole.
    ///
    /// [`Engine::aggregate`]: crate::engine::Engine::aggregate
    /// [`Engine::scan_pieces`]: crate::engine::Engine::scan_pieces
    pub aggregate_pieces: usize,
    /// Bytes of data (stores and caches, in the scanned rows) such a scan needs per piece
    /// before it is split.
    pub aggregate_piece_bytes: u64,
    /// Bytes of cell-store blocks a scan of a key set (several row intervals) asks the file
    /// system for ahead of reading them, per store and piece (`engine/prefetch.rs`); 0 turns
    /// the prefetch off. The blocks go to the operating system's page cache, not to ht's.
    pub key_set_prefetch_bytes: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            cell_cache_limit_bytes: 256 << 20,
            cell_cache_flush_bytes: 64 << 20,
            block_cache_bytes: 128 << 20,
            // Room for the largest batch a client may send (see `apply`).
            commit_log: CommitLogOptions {
                max_block_bytes: 32 << 20,
                ..CommitLogOptions::default()
            },
            split_size_bytes: 512 << 20,
            unsplit_tables: Vec::new(),
            max_stores_per_group: 6,
            merge_ratio: 1.2,
            maintenance_threads: 2,
            maintenance_queue_limit: 1024,
            clock: Arc::new(SystemClock),
            registry: Arc::new(crate::iterators::Registry::builtins()),
            scan_work_per_block: 1_000_000,
            combined_flush_ratio: 1.0,
            combined_flush_bytes: 8 << 20,
            aggregate_pieces: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(4),
            aggregate_piece_bytes: 16 << 20,
            key_set_prefetch_bytes: 64 << 20,
        }
    }
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("cell_cache_limit_bytes", &self.cell_cache_limit_bytes)
            .field("cell_cache_flush_bytes", &self.cell_cache_flush_bytes)
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("split_size_bytes", &self.split_size_bytes)
            .field("unsplit_tables", &self.unsplit_tables)
            .field("max_stores_per_group", &self.max_stores_per_group)
            .field("merge_ratio", &self.merge_ratio)
            .field("maintenance_threads", &self.maintenance_threads)
            .field("combined_flush_ratio", &self.combined_flush_ratio)
            .field("combined_flush_bytes", &self.combined_flush_bytes)
            .field("aggregate_pieces", &self.aggregate_pieces)
            .field("aggregate_piece_bytes", &self.aggregate_piece_bytes)
            .field("key_set_prefetch_bytes", &self.key_set_prefetch_bytes)
            .finish()
    }
}
