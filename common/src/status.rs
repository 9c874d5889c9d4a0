//! What a storage engine reports about itself: its ranges and its counters, read by the
//! range server, clients, the master's balancer and `ht status`.

/// A range as reported to callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeInfo {
    pub id: u64,
    pub table_id: u32,
    pub start_row: Option<Vec<u8>>,
    pub end_row: Option<Vec<u8>>,
    pub size_bytes: u64,
    pub stores: usize,
    pub cache_bytes: u64,
    /// Cells written since the range was loaded here (a counter: the master's load balancer
    /// turns its growth into a rate).
    pub cells_written: u64,
    /// Cells scans stepped over since the range was loaded here.
    pub cells_read: u64,
    /// Seeks scans made into the range since it was loaded here.
    pub seeks: u64,
}

/// Counters for reports and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub cache_bytes: u64,
    pub ranges: usize,
    pub stores: usize,
    pub minor_compactions: u64,
    pub merging_compactions: u64,
    pub major_compactions: u64,
    pub splits: u64,
    pub replayed_cells: u64,
    pub purged_fragments: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Seeks scans made into the ranges held now ([`RangeInfo::seeks`], summed).
    pub seeks: u64,
    /// Writes that waited for the cell caches to shrink below their limit (minor compactions
    /// not keeping up), and the milliseconds they waited together.
    pub memory_waits: u64,
    pub memory_wait_ms: u64,
    /// Bytes of blocks the block cache holds now.
    pub block_cache_bytes: u64,
    /// Bytes the open cell stores keep in memory: block indexes and bloom filters.
    pub store_memory_bytes: u64,
}
