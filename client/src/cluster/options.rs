//! [`ClusterOptions`]: the settings of the cluster client.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ::proto::rs::client::RangeServerClientOptions;
use common::time::Clock;
use hyperspace::client::ClientOptions as HsOptions;

/// Settings of the cluster client.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The Hyperspace replicas.
    pub hyperspace: Vec<SocketAddr>,
    /// A mutator sends its buffer once it holds this many cells...
    pub mutator_buffer_cells: usize,
    /// ... or this many bytes of rows, qualifiers and values.
    pub mutator_buffer_bytes: usize,
    /// Buffers a mutator has on their way to the servers at once (at least 1).
    pub mutator_in_flight: usize,
    /// Bytes of one update message to a range server (a buffer is sent as several).
    pub batch_bytes: usize,
    /// Blocks of cells (each at most one range-server message, `scan_block_bytes`) a scanner
    /// holds between the network and its reader, besides the one it reads from.
    pub scan_queue_blocks: usize,
    /// Most row intervals of a key set sent to a range server in one scan request, and most
    /// bytes of their rows.
    pub scan_intervals_per_request: usize,
    pub scan_interval_bytes_per_request: usize,
    /// Parts of a batched scan (a key set, or an unlimited scan over many ranges: one request
    /// per run of ranges on one server) fetched at once, so that servers work in parallel; they
    /// are read in row order (at least 1: one after the other).
    pub scan_parallel_parts: usize,
    /// Blocks each part fetched ahead of the one being read may hold: a batched scan holds at
    /// most `scan_parallel_parts` times this many blocks besides `scan_queue_blocks`.
    pub scan_part_queue_blocks: usize,
    /// How long a call keeps retrying while ranges move or are recovered.
    pub retry_for: Duration,
    /// Table ids and schemas the client keeps (each kind), emptied by any table operation
    /// (`names.rs`); 0: every call reads them from Hyperspace.
    pub table_cache_entries: usize,
    pub hyperspace_options: HsOptions,
    pub range_server: RangeServerClientOptions,
    /// The clock that retry deadlines are read from (tests pass a `ManualClock`).
    pub clock: Arc<dyn Clock>,
    /// The seed of the client's random source (update stream ids, backoff jitter), so that a
    /// run can be repeated; `None`: a fresh one (`entropy_seed`).
    pub seed: Option<u64>,
}

impl ClusterOptions {
    pub fn new(hyperspace: Vec<SocketAddr>) -> Self {
        Self {
            hyperspace,
            mutator_buffer_cells: 100_000,
            mutator_buffer_bytes: 1 << 20,
            mutator_in_flight: 3,
            batch_bytes: 4 << 20,
            scan_queue_blocks: 4,
            scan_intervals_per_request: 4096,
            scan_interval_bytes_per_request: 4 << 20,
            scan_parallel_parts: 4,
            scan_part_queue_blocks: 4,
            retry_for: Duration::from_secs(90),
            table_cache_entries: 1024,
            hyperspace_options: HsOptions::default(),
            range_server: RangeServerClientOptions {
                connect_timeout: Duration::from_secs(2),
                call_timeout: Duration::from_secs(30),
                ..Default::default()
            },
            clock: common::time::system_clock(),
            seed: None,
        }
    }
}
