//! [`ChunkFs`]: the [`Fs`] that reaches a chunkfs file system, namespace operations at the
//! metadata server, data straight to and from the chunk servers.
//!
//! A writer buffers `append(None)` up to `packet_bytes`, then sends it to the current block's
//! servers: through a pipeline (hdfs-like), to all replicas at once (kfs-like), or as data and
//! parity cells of a Reed-Solomon stripe. Each send is acknowledged by every server before the
//! next; `Flush` and `Sync` then tell the metadata server the new length, which is what readers
//! see. When a server of the block fails, the writer cuts the block at its acknowledged length
//! on the servers still alive (they keep every acknowledged byte), and goes on in a new block on
//! other servers; the metadata server re-replicates the cut block later.
//!
//! A reader reads each range from the first replica that answers with a verified checksum (a
//! corrupt replica reports itself to the metadata server); a striped block missing a chunk is
//! rebuilt from any `data` of its chunks.

mod chunks;
mod reader;
mod writer;

pub use reader::ChunkFsReader;
pub use writer::ChunkFsWriter;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::time::{Clock, system_clock};
use dfs_broker::{
    DirEntry, Fs, FsError, FsReader, FsResult, FsWriter, ReadAheadBudget, ReadAheadOptions,
    ReadAheadStats,
};
use prost::Message;
use rpc::{ClusterCredentials, RetryPolicy, RpcError};

use crate::chunk::Peers;
use crate::messages::*;
use crate::rs::Coder;
use crate::{Flavour, Layout, META_SERVER_NAME};

/// Limits and timings of a client.
#[derive(Debug, Clone)]
pub struct ChunkFsOptions {
    pub call_timeout: Duration,
    /// Deadline of a call to a chunk server (a dead one is noticed by it).
    pub chunk_call_timeout: Duration,
    /// Retries of idempotent metadata calls (covers a metadata server restart).
    pub retry: RetryPolicy,
    /// Largest piece of data sent to the chunk servers at once (also the writer's buffer).
    pub packet_bytes: usize,
    /// Largest piece read from a chunk server in one call.
    pub max_read_bytes: usize,
    /// Chunk reads in flight per pread.
    pub max_reads_in_flight: usize,
    pub max_peer_connections: usize,
    /// Attempts at a send before the writer gives up (each failure moves to a new block).
    pub max_write_attempts: u32,
    /// How often an open writer renews its lease at the metadata server (well under the
    /// server's `lease_timeout_ms`, 60 s by default).
    pub lease_renew_interval: Duration,
    /// Packets a writer queues for its streamer before `append` waits.
    pub max_packets_in_flight: usize,
    /// Connections silent this long are dropped (keep-alives every third of it): how a dead
    /// server is noticed by calls in flight.
    pub idle_timeout: Duration,
    /// What "how long ago" is measured with (an unreachable chunk server's back-off).
    pub clock: Arc<dyn Clock>,
    /// Each reader's windows of read-ahead ([`FsReader::prefetch`], `dfs_broker::read_ahead`).
    pub read_ahead: ReadAheadOptions,
    /// Bytes all the readers of this client may hold in read-ahead windows at once.
    pub read_ahead_budget_bytes: u64,
}

impl Default for ChunkFsOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(10),
            chunk_call_timeout: Duration::from_secs(10),
            retry: RetryPolicy {
                max_attempts: 12,
                initial_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(2),
            },
            packet_bytes: 1 << 20,
            max_read_bytes: 8 << 20,
            max_reads_in_flight: 16,
            max_peer_connections: 256,
            max_write_attempts: 5,
            max_packets_in_flight: 4,
            lease_renew_interval: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(3),
            clock: system_clock(),
            read_ahead: ReadAheadOptions::default(),
            read_ahead_budget_bytes: 64 << 20,
        }
    }
}

struct Inner {
    meta: rpc::Client,
    url: String,
    flavour: Flavour,
    layout: Layout,
    peers: Peers,
    options: ChunkFsOptions,
    coder: Option<Coder>,
    read_ahead: Arc<ReadAheadBudget>,
}

/// A chunkfs file system.
#[derive(Clone)]
pub struct ChunkFs {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ChunkFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChunkFs({})", self.inner.url)
    }
}

trait Reply: Message + Default {
    fn take_error(&mut self) -> Option<WireFsError>;
}

macro_rules! reply {
    ($($t:ty),*) => {$(
        impl Reply for $t {
            fn take_error(&mut self) -> Option<WireFsError> {
                self.error.take()
            }
        }
    )*};
}
reply!(
    UnitReply,
    CreateReply,
    AddBlockReply,
    StatReply,
    ReaddirReply,
    ExistsReply
);

fn backend(op: &'static str, path: &str, msg: String) -> FsError {
    FsError::Backend {
        op,
        path: path.to_string(),
        msg,
    }
}

impl ChunkFs {
    /// Connects to the metadata server at `meta` with a node certificate of the cluster.
    pub async fn connect(
        meta: SocketAddr,
        credentials: &ClusterCredentials,
        options: ChunkFsOptions,
    ) -> FsResult<Self> {
        let fail = |e: String| {
            backend(
                "connect",
                "/",
                format!("chunkfs metadata server {meta}: {e}"),
            )
        };
        let client_options = rpc::ClientOptions {
            idle_timeout: options.idle_timeout,
            connect_timeout: Duration::from_secs(5),
            ..Default::default()
        };
        let config = credentials
            .client_config(options.idle_timeout)
            .map_err(|e| fail(e.to_string()))?;
        let client = rpc::Client::connect_with(meta, META_SERVER_NAME, config, client_options)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status: MetaStatusReply = client
            .call_message(
                method::META_STATUS,
                &PathRequest::default(),
                options.call_timeout,
            )
            .await
            .map_err(|e| fail(e.to_string()))?;
        let flavour = Flavour::parse(&status.flavour)
            .ok_or_else(|| fail(format!("unknown flavour {:?}", status.flavour)))?;
        let layout = status
            .layout
            .as_ref()
            .and_then(Layout::from_wire)
            .ok_or_else(|| fail("no valid layout in the status".into()))?;
        let coder = match layout {
            Layout::Striped { data, parity, .. } => {
                Some(Coder::new(data as usize, parity as usize).map_err(fail)?)
            }
            Layout::Replicated { .. } => None,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                meta: client,
                url: format!("{}://{meta}", flavour.name()),
                flavour,
                layout,
                peers: Peers::new(
                    credentials.clone(),
                    options.max_peer_connections,
                    options.idle_timeout,
                    options.clock.clone(),
                ),
                read_ahead: ReadAheadBudget::new(options.read_ahead_budget_bytes),
                options,
                coder,
            }),
        })
    }

    pub fn flavour(&self) -> Flavour {
        self.inner.flavour
    }

    pub fn layout(&self) -> Layout {
        self.inner.layout
    }

    /// What this client's readers did with read-ahead hints.
    pub fn read_ahead_stats(&self) -> ReadAheadStats {
        self.inner.read_ahead.stats()
    }

    /// The metadata server's status (servers, under-replicated chunks, repairs).
    pub async fn status(&self) -> FsResult<MetaStatusReply> {
        let payload = self
            .inner
            .meta
            .call_idempotent(
                method::META_STATUS,
                Bytes::new(),
                self.inner.options.call_timeout,
                &self.inner.options.retry,
            )
            .await
            .map_err(|e| backend("status", "/", format!("{}: {e}", self.inner.url)))?;
        MetaStatusReply::decode(payload).map_err(|e| {
            backend(
                "status",
                "/",
                format!("{}: undecodable status: {e}", self.inner.url),
            )
        })
    }

    /// Reads `len` bytes at `offset` of one replica of a chunk on one server, checksums
    /// verified there (tests and tools check each replica with it).
    pub async fn read_replica(
        &self,
        server: &str,
        chunk_id: u64,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, String> {
        self.inner.chunk_read(server, chunk_id, offset, len).await
    }

    /// The blocks of a file and the servers of each chunk.
    pub async fn stat(&self, path: &str) -> FsResult<StatReply> {
        self.inner.stat(path).await
    }
}

impl Inner {
    async fn meta_call<Req: Message, Resp: Reply>(
        &self,
        method: &'static str,
        op: &'static str,
        path: &str,
        req: &Req,
        idempotent: bool,
    ) -> FsResult<Resp> {
        let payload: Bytes = req.encode_to_vec().into();
        let deadline = self.options.call_timeout;
        let result = if idempotent {
            self.meta
                .call_idempotent(method, payload, deadline, &self.options.retry)
                .await
        } else {
            // Not idempotent: retried only when it never reached the server.
            let mut attempt = 0;
            loop {
                match self.meta.call(method, payload.clone(), deadline).await {
                    Err(RpcError::Connect { .. })
                        if attempt + 1 < self.options.retry.max_attempts =>
                    {
                        tokio::time::sleep(self.options.retry.backoff(attempt)).await;
                        attempt += 1;
                    }
                    other => break other,
                }
            }
        };
        let payload = result.map_err(|e| {
            backend(
                op,
                path,
                format!("chunkfs metadata server {}: {e}", self.url),
            )
        })?;
        let mut reply = Resp::decode(payload).map_err(|e| {
            backend(
                op,
                path,
                format!("{}: undecodable {method} reply: {e}", self.url),
            )
        })?;
        match reply.take_error() {
            None => Ok(reply),
            Some(mut w) => {
                if w.path.is_empty() {
                    w.path = path.to_string();
                }
                Err(error_from_wire(w, op))
            }
        }
    }

    async fn stat(&self, path: &str) -> FsResult<StatReply> {
        self.meta_call(
            method::META_STAT,
            "open",
            path,
            &PathRequest {
                path: path.to_string(),
            },
            true,
        )
        .await
    }
}

#[async_trait]
impl Fs for ChunkFs {
    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        dfs_broker::check_path("create", path)?;
        let reply: CreateReply = self
            .inner
            .meta_call(
                method::META_CREATE,
                "create",
                path,
                &CreateRequest {
                    path: path.to_string(),
                    overwrite,
                },
                false,
            )
            .await?;
        let layout = reply
            .layout
            .as_ref()
            .and_then(Layout::from_wire)
            .ok_or_else(|| backend("create", path, "no valid layout in the reply".into()))?;
        let block_bytes = match layout {
            // A striped block holds whole stripes.
            Layout::Striped {
                data, cell_bytes, ..
            } => {
                let stripe = u64::from(data) * u64::from(cell_bytes);
                (reply.block_bytes / stripe).max(1) * stripe
            }
            Layout::Replicated { .. } => reply.block_bytes.max(1),
        };
        Ok(Box::new(ChunkFsWriter::start(
            self.inner.clone(),
            path,
            reply.file_id,
            layout,
            reply.layout.as_ref().is_some_and(|l| l.parallel),
            block_bytes,
        )))
    }

    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        dfs_broker::check_path("open", path)?;
        let stat = self.inner.stat(path).await?;
        Ok(Arc::new(ChunkFsReader::new(self.inner.clone(), path, stat)))
    }

    async fn length(&self, path: &str) -> FsResult<u64> {
        dfs_broker::check_path("length", path)?;
        let stat: StatReply = self
            .inner
            .meta_call(
                method::META_STAT,
                "length",
                path,
                &PathRequest {
                    path: path.to_string(),
                },
                true,
            )
            .await?;
        Ok(stat.length)
    }

    async fn remove(&self, path: &str) -> FsResult<()> {
        dfs_broker::check_path("remove", path)?;
        let req = PathRequest {
            path: path.to_string(),
        };
        let _: UnitReply = self
            .inner
            .meta_call(method::META_REMOVE, "remove", path, &req, false)
            .await?;
        Ok(())
    }

    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        dfs_broker::check_path("rmdir", path)?;
        let req = RmdirRequest {
            path: path.to_string(),
            recursive,
        };
        let _: UnitReply = self
            .inner
            .meta_call(method::META_RMDIR, "rmdir", path, &req, false)
            .await?;
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        dfs_broker::check_path("rename", from)?;
        dfs_broker::check_path("rename", to)?;
        let req = RenameRequest {
            from: from.to_string(),
            to: to.to_string(),
        };
        let _: UnitReply = self
            .inner
            .meta_call(method::META_RENAME, "rename", from, &req, false)
            .await?;
        Ok(())
    }

    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        dfs_broker::check_path("mkdirs", path)?;
        let req = PathRequest {
            path: path.to_string(),
        };
        let _: UnitReply = self
            .inner
            .meta_call(method::META_MKDIRS, "mkdirs", path, &req, true)
            .await?;
        Ok(())
    }

    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        dfs_broker::check_path("readdir", path)?;
        let req = PathRequest {
            path: path.to_string(),
        };
        let reply: ReaddirReply = self
            .inner
            .meta_call(method::META_READDIR, "readdir", path, &req, true)
            .await?;
        Ok(reply.entries.into_iter().map(entry_from_wire).collect())
    }

    async fn exists(&self, path: &str) -> FsResult<bool> {
        dfs_broker::check_path("exists", path)?;
        let req = PathRequest {
            path: path.to_string(),
        };
        let reply: ExistsReply = self
            .inner
            .meta_call(method::META_EXISTS, "exists", path, &req, true)
            .await?;
        Ok(reply.exists)
    }

    fn url(&self) -> String {
        self.inner.url.clone()
    }
}
