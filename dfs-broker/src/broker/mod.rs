//! The DFS broker: any [`Fs`](crate::Fs) backend served over ht's rpc layer
//! ([`BrokerService`]), and [`BrokerFs`], the client that implements `Fs` through it.
//!
//! A broker lets every ht server reach one file system through one process, as Hypertable's
//! FsBroker did. The methods and messages are in `docs/formats/dfs-broker.md`. What a client
//! sees is what the backend does: every [`FsError`](crate::FsError) variant crosses the wire
//! with its fields, and an acknowledged `append(Flush)` or `append(Sync)` means the backend
//! flushed or synced before the broker answered.

mod client;
pub mod messages;
mod service;

use std::time::Duration;

pub use client::{BrokerFs, BrokerFsOptions, BrokerReader, BrokerWriter};
pub use service::BrokerService;

/// The certificate name the broker presents (`ht init` issues it).
pub const SERVER_NAME: &str = "dfs-broker";

/// Default largest piece of data in one message: appends and reads above it are split.
pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

/// Room kept in a message for everything but the data (envelope, fields).
const MESSAGE_OVERHEAD_BYTES: usize = 64 << 10;

/// Limits of a broker. Every table it keeps is bounded by one of them.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// Writers open at once, over all clients; `create` past it fails.
    pub max_open_writers: usize,
    /// Backend readers kept open for `pread` (least recently used dropped first).
    pub max_cached_readers: usize,
    /// Largest rpc message in either direction.
    pub max_message_bytes: usize,
    /// Largest piece of data the broker puts in one pushed `fs.pread` message.
    pub chunk_bytes: usize,
    /// A writer neither used nor kept alive for this long is closed and its handle freed.
    pub writer_idle_timeout: Duration,
    /// Calls in flight per client connection.
    pub max_concurrent_calls_per_connection: u32,
    /// A client connection with no traffic (not even QUIC keep-alives) for this long is closed.
    pub connection_idle_timeout: Duration,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        Self {
            max_open_writers: 4096,
            max_cached_readers: 1024,
            max_message_bytes: rpc::frame::DEFAULT_MAX_MESSAGE_BYTES,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            writer_idle_timeout: Duration::from_secs(120),
            max_concurrent_calls_per_connection: 256,
            connection_idle_timeout: Duration::from_secs(30),
        }
    }
}

impl BrokerOptions {
    /// The chunk size actually used: never so large that a piece and its envelope overflow a
    /// message.
    pub fn effective_chunk_bytes(&self) -> usize {
        effective_chunk(self.chunk_bytes, self.max_message_bytes)
    }
}

fn effective_chunk(chunk: usize, max_message_bytes: usize) -> usize {
    chunk
        .min(max_message_bytes.saturating_sub(MESSAGE_OVERHEAD_BYTES))
        .max(4096)
}
