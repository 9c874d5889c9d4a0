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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use dfs_broker::{AppendFlag, DirEntry, Fs, FsError, FsReader, FsResult, FsWriter};
use futures_util::StreamExt as _;
use futures_util::future::join_all;
use prost::Message;
use rpc::{ClusterCredentials, RetryPolicy, RpcError};

use crate::chunk::Peers;
use crate::messages::*;
use crate::rs::{self, Coder};
use crate::{CHUNK_SERVER_NAME, Flavour, Layout, META_SERVER_NAME};

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
                ),
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

    async fn chunk_client(&self, server: &str) -> Result<Arc<rpc::Client>, String> {
        self.peers.get(server, CHUNK_SERVER_NAME).await
    }

    /// One write to one server (with the rest of the pipeline in `req.forward`).
    async fn chunk_write(&self, server: &str, req: &WriteRequest) -> Result<u64, String> {
        let client = self.chunk_client(server).await?;
        let reply: Result<WriteReply, RpcError> = client
            .call_message(method::CHUNK_WRITE, req, self.options.chunk_call_timeout)
            .await;
        match reply {
            Ok(WriteReply {
                error: None,
                length,
            }) => Ok(length),
            Ok(WriteReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                self.peers.forget(server).await;
                Err(e.to_string())
            }
        }
    }

    async fn chunk_finalize(&self, server: &str, chunk_id: u64, length: u64) -> Result<(), String> {
        let client = self.chunk_client(server).await?;
        let req = FinalizeRequest { chunk_id, length };
        let reply: Result<WriteReply, RpcError> = client
            .call_message(
                method::CHUNK_FINALIZE,
                &req,
                self.options.chunk_call_timeout,
            )
            .await;
        match reply {
            Ok(WriteReply { error: None, .. }) => Ok(()),
            Ok(WriteReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                self.peers.forget(server).await;
                Err(e.to_string())
            }
        }
    }

    /// Reads from one server.
    async fn chunk_read(
        &self,
        server: &str,
        chunk_id: u64,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, String> {
        let client = self.chunk_client(server).await?;
        let req = ReadRequest {
            chunk_id,
            offset,
            len: len as u64,
        };
        let reply: Result<ReadReply, RpcError> = client
            .call_message(method::CHUNK_READ, &req, self.options.chunk_call_timeout)
            .await;
        match reply {
            Ok(ReadReply {
                error: None, data, ..
            }) if data.len() == len => Ok(data.to_vec()),
            Ok(ReadReply {
                error: None, data, ..
            }) => Err(format!(
                "chunk server {server}: {} bytes instead of {len}",
                data.len()
            )),
            Ok(ReadReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                self.peers.forget(server).await;
                Err(e.to_string())
            }
        }
    }

    /// Reads `len` bytes at `offset` of a replicated chunk from the first replica that answers.
    async fn read_replicated(
        &self,
        chunk: &WireChunk,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, String> {
        let mut errors = Vec::new();
        for s in &chunk.servers {
            match self.chunk_read(s, chunk.chunk_id, offset, len).await {
                Ok(d) => return Ok(d),
                Err(e) => errors.push(e),
            }
        }
        Err(format!(
            "chunk {}: no replica could be read ({})",
            chunk.chunk_id,
            if errors.is_empty() {
                "no live replica known".to_string()
            } else {
                errors.join("; ")
            }
        ))
    }

    /// Reads `[from, to)` of a block's logical bytes.
    async fn read_block(&self, b: &WireBlock, from: u64, to: u64) -> Result<Vec<u8>, String> {
        let layout = b
            .layout
            .as_ref()
            .and_then(Layout::from_wire)
            .ok_or_else(|| format!("block {}: no valid layout", b.block_id))?;
        // Pieces: (chunk index, offset in chunk, length, stripe); read concurrently, in order.
        let mut pieces = Vec::new();
        match layout {
            Layout::Replicated { .. } => {
                let mut x = from;
                while x < to {
                    let n = (to - x).min(self.options.max_read_bytes as u64);
                    pieces.push((0usize, x, n as usize, 0u64));
                    x += n;
                }
            }
            Layout::Striped {
                data, cell_bytes, ..
            } => {
                let mut x = from;
                while x < to {
                    let (s, k, off) = rs::locate(data, cell_bytes, x);
                    let n = (to - x).min(u64::from(cell_bytes) - x % u64::from(cell_bytes));
                    pieces.push((k, off, n as usize, s));
                    x += n;
                }
            }
        }
        let reads = futures_util::stream::iter(pieces.into_iter().map(|(k, off, n, s)| async move {
            let chunk = b
                .chunks
                .get(k)
                .ok_or_else(|| format!("block {}: no chunk {k}", b.block_id))?;
            match layout {
                Layout::Replicated { .. } => self.read_replicated(chunk, off, n).await,
                Layout::Striped { .. } => match self.read_replicated(chunk, off, n).await {
                    Ok(d) => Ok(d),
                    Err(e) => {
                        tracing::debug!(error = %e, "chunkfs: degraded read, rebuilding the stripe");
                        self.rebuild_cell(b, layout, s, k)
                            .await
                            .map(|cell| {
                                let at = (off % u64::from(cell_len(layout))) as usize;
                                cell[at..at + n].to_vec()
                            })
                            .map_err(|r| format!("{e}; {r}"))
                    }
                },
            }
        }))
        .buffered(self.options.max_reads_in_flight.max(1));
        let results: Vec<Result<Vec<u8>, String>> = reads.collect().await;
        let mut out = Vec::with_capacity((to - from) as usize);
        for r in results {
            out.extend_from_slice(&r?);
        }
        Ok(out)
    }

    /// Rebuilds cell `k` of stripe `s` of a striped block from the other chunks.
    async fn rebuild_cell(
        &self,
        b: &WireBlock,
        layout: Layout,
        s: u64,
        k: usize,
    ) -> Result<Vec<u8>, String> {
        let Layout::Striped {
            data,
            parity,
            cell_bytes,
        } = layout
        else {
            return Err("not a striped block".into());
        };
        let coder = self
            .coder
            .as_ref()
            .ok_or_else(|| "no Reed-Solomon coder for this file system".to_string())?;
        let c = u64::from(cell_bytes);
        let total = (data + parity) as usize;
        let reads = (0..total).map(|i| async move {
            if i == k {
                return None;
            }
            let chunk = b.chunks.get(i)?;
            let have = rs::chunk_len(layout, b.length, i);
            let start = s * c;
            let n = have.saturating_sub(start).min(c) as usize;
            let mut cell = if n == 0 {
                Vec::new()
            } else {
                self.read_replicated(chunk, start, n).await.ok()?
            };
            cell.resize(c as usize, 0);
            Some(cell)
        });
        let mut shards: Vec<Option<Vec<u8>>> = join_all(reads).await;
        coder.reconstruct(&mut shards)?;
        shards[k]
            .take()
            .ok_or_else(|| format!("block {}: stripe {s} not rebuilt", b.block_id))
    }
}

fn cell_len(layout: Layout) -> u32 {
    match layout {
        Layout::Striped { cell_bytes, .. } => cell_bytes,
        Layout::Replicated { .. } => u32::MAX,
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
        let streamer = Streamer {
            inner: self.inner.clone(),
            path: path.to_string(),
            file_id: reply.file_id,
            layout,
            parallel: reply.layout.as_ref().is_some_and(|l| l.parallel),
            block_bytes,
            block: None,
            stripe: Vec::new(),
            exclude: Vec::new(),
            broken: None,
        };
        let (tx, rx) = tokio::sync::mpsc::channel(self.inner.options.max_packets_in_flight.max(1));
        let broken = Arc::new(parking_lot::Mutex::new(None));
        tokio::spawn(streamer.run(rx, broken.clone()));
        Ok(Box::new(ChunkFsWriter {
            inner: self.inner.clone(),
            path: path.to_string(),
            pos: 0,
            buf: Vec::new(),
            tx,
            broken,
            closed: false,
        }))
    }

    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        dfs_broker::check_path("open", path)?;
        let stat = self.inner.stat(path).await?;
        Ok(Arc::new(ChunkFsReader {
            inner: self.inner.clone(),
            path: path.to_string(),
            stat: tokio::sync::Mutex::new(Arc::new(stat)),
        }))
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

/// The block a writer appends to.
struct OpenBlock {
    id: u64,
    chunks: Vec<WireChunk>,
    /// Logical bytes acknowledged by every server.
    len: u64,
    /// The chunks exist on the servers (the first write creates them).
    created: bool,
}

/// What a writer asks its streamer to do, in order.
enum Cmd {
    /// Send a packet (`append(None)`); a failure shows at the next call.
    Data(Vec<u8>),
    /// Send the rest and make everything visible (`Flush`) or durable (`Sync`).
    Flush {
        data: Vec<u8>,
        sync: bool,
        reply: tokio::sync::oneshot::Sender<FsResult<()>>,
    },
    /// Send the rest, sync, finalize and close the file.
    Close {
        data: Vec<u8>,
        reply: tokio::sync::oneshot::Sender<FsResult<()>>,
    },
}

/// A file open for appending; the only writer of its file (its id is the lease). Packets of
/// `append(None)` go to a streamer task through a queue of `max_packets_in_flight`, so the
/// caller goes on while they travel (HDFS's data streamer); `Flush`, `Sync` and `close` wait
/// for everything before them.
pub struct ChunkFsWriter {
    inner: Arc<Inner>,
    path: String,
    /// Length including the buffer.
    pos: u64,
    buf: Vec<u8>,
    tx: tokio::sync::mpsc::Sender<Cmd>,
    /// Set by the streamer when a send failed for good.
    broken: Arc<parking_lot::Mutex<Option<String>>>,
    closed: bool,
}

/// The sending side of a writer, in its own task: the current block, its servers, recovery.
struct Streamer {
    inner: Arc<Inner>,
    path: String,
    file_id: u64,
    layout: Layout,
    parallel: bool,
    block_bytes: u64,
    block: Option<OpenBlock>,
    /// Striped: the data of the current block's last, partial stripe (acknowledged).
    stripe: Vec<u8>,
    /// Servers that failed this writer: not asked for again.
    exclude: Vec<String>,
    broken: Option<String>,
}

impl Streamer {
    async fn run(
        mut self,
        mut rx: tokio::sync::mpsc::Receiver<Cmd>,
        broken: Arc<parking_lot::Mutex<Option<String>>>,
    ) {
        let mut renew = tokio::time::interval(self.inner.options.lease_renew_interval);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        renew.tick().await;
        loop {
            let cmd = tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => cmd,
                    None => break,
                },
                _ = renew.tick() => {
                    self.renew().await;
                    continue;
                }
            };
            match cmd {
                Cmd::Data(data) => {
                    if self.broken.is_none()
                        && let Err(e) = self.send(&data, false).await
                    {
                        self.broken = Some(e.to_string());
                    }
                }
                Cmd::Flush { data, sync, reply } => {
                    let r = self.flush(&data, sync).await;
                    let _ = reply.send(r);
                }
                Cmd::Close { data, reply } => {
                    let r = self.close(&data).await;
                    let failed = r.is_err();
                    let _ = reply.send(r);
                    if !failed {
                        break;
                    }
                }
            }
            if let Some(why) = &self.broken {
                *broken.lock() = Some(why.clone());
            }
        }
    }

    /// Renews the lease; a failure is logged (the next write reports a lost lease).
    async fn renew(&self) {
        let req = RenewRequest {
            path: self.path.clone(),
            file_id: self.file_id,
        };
        if let Err(e) = self
            .inner
            .meta_call::<_, UnitReply>(method::META_RENEW, "append", &self.path, &req, true)
            .await
        {
            tracing::warn!(path = %self.path, error = %e, "chunkfs: lease renewal failed");
        }
    }

    fn check(&self, op: &'static str) -> FsResult<()> {
        match &self.broken {
            Some(why) => Err(self.fail(op, format!("the writer failed earlier: {why}"))),
            None => Ok(()),
        }
    }

    /// Sends `data`, then makes everything visible (and with `sync` durable) and tells the
    /// metadata server the new length.
    async fn flush(&mut self, data: &[u8], sync: bool) -> FsResult<()> {
        self.check("append")?;
        if let Err(e) = self.send(data, sync).await {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        if let Some(b) = &self.block {
            self.commit(b.len, false, false, sync, Vec::new()).await?;
        }
        Ok(())
    }

    async fn close(&mut self, data: &[u8]) -> FsResult<()> {
        self.check("close")?;
        if let Err(e) = self.send(data, true).await {
            self.broken = Some(e.to_string());
            return Err(e);
        }
        let len = self.block.as_ref().map_or(0, |b| b.len);
        if self.block.as_ref().is_some_and(|b| b.created) {
            let survivors = self.finalize_block().await;
            let changed = survivors
                .iter()
                .zip(&self.block.as_ref().expect("checked").chunks)
                .any(|(s, c)| s.servers.len() != c.servers.len());
            self.commit(
                len,
                true,
                true,
                true,
                if changed { survivors } else { Vec::new() },
            )
            .await?;
        } else {
            self.commit(len, true, true, true, Vec::new()).await?;
        }
        self.block = None;
        Ok(())
    }

    fn fail(&self, op: &'static str, msg: String) -> FsError {
        backend(op, &self.path, msg)
    }

    async fn commit(
        &self,
        block_length: u64,
        complete: bool,
        close: bool,
        sync: bool,
        survivors: Vec<WireChunk>,
    ) -> FsResult<()> {
        let req = CommitRequest {
            path: self.path.clone(),
            file_id: self.file_id,
            block_id: self.block.as_ref().map_or(0, |b| b.id),
            block_length,
            complete_block: complete,
            close,
            sync,
            survivors,
        };
        let _: UnitReply = self
            .inner
            .meta_call(
                method::META_COMMIT,
                if close { "close" } else { "append" },
                &self.path,
                &req,
                true,
            )
            .await?;
        Ok(())
    }

    async fn new_block(&mut self) -> FsResult<()> {
        let req = AddBlockRequest {
            path: self.path.clone(),
            file_id: self.file_id,
            exclude: self.exclude.clone(),
        };
        let reply: AddBlockReply = self
            .inner
            .meta_call(method::META_ADD_BLOCK, "append", &self.path, &req, false)
            .await?;
        let b = reply
            .block
            .ok_or_else(|| self.fail("append", "the metadata server gave no block".into()))?;
        if b.chunks.len() != self.layout.chunks() || b.chunks.iter().any(|c| c.servers.is_empty()) {
            return Err(self.fail(
                "append",
                format!("block {} has no servers for some chunk", b.block_id),
            ));
        }
        self.block = Some(OpenBlock {
            id: b.block_id,
            chunks: b.chunks,
            len: 0,
            created: false,
        });
        self.stripe.clear();
        Ok(())
    }

    /// The length of chunk `k` of the current block at logical length `len`.
    fn chunk_len(&self, len: u64, k: usize) -> u64 {
        rs::chunk_len(self.layout, len, k)
    }

    /// Finalizes every chunk of the current block at its acknowledged length on every server
    /// that answers; returns the servers per chunk that did.
    async fn finalize_block(&self) -> Vec<WireChunk> {
        let Some(b) = &self.block else {
            return Vec::new();
        };
        let futs = b.chunks.iter().enumerate().map(|(k, c)| {
            let len = self.chunk_len(b.len, k);
            async move {
                let results = join_all(c.servers.iter().map(|s| async move {
                    (
                        s.clone(),
                        self.inner.chunk_finalize(s, c.chunk_id, len).await,
                    )
                }))
                .await;
                let mut ok = Vec::new();
                let mut bad = Vec::new();
                for (s, r) in results {
                    match r {
                        Ok(()) => ok.push(s),
                        Err(e) => bad.push((s, e)),
                    }
                }
                (
                    WireChunk {
                        chunk_id: c.chunk_id,
                        servers: ok,
                    },
                    bad,
                )
            }
        });
        let results = join_all(futs).await;
        let mut survivors = Vec::new();
        for (c, bad) in results {
            for (s, e) in bad {
                tracing::warn!(path = %self.path, chunk = c.chunk_id, server = %s, error = %e, "chunkfs: replica lost while writing");
            }
            survivors.push(c);
        }
        survivors
    }

    /// Closes the current block (full, or cut after a failure) at its acknowledged length.
    async fn complete_block(&mut self, after_failure: bool) -> FsResult<()> {
        let Some(b) = &self.block else { return Ok(()) };
        let len = b.len;
        if after_failure && matches!(self.layout, Layout::Striped { .. }) {
            self.rewrite_last_parity().await;
        }
        // Probing every server (finalize at the acknowledged length) finds the ones alive.
        let survivors = self.finalize_block().await;
        let needed = match self.layout {
            Layout::Replicated { .. } => 1,
            Layout::Striped { data, .. } => data as usize,
        };
        let alive = survivors.iter().filter(|c| !c.servers.is_empty()).count();
        let changed = survivors
            .iter()
            .zip(&b.chunks)
            .any(|(s, c)| s.servers.len() != c.servers.len());
        if len > 0 && (alive < needed || (needed == 1 && alive == 0)) {
            let msg = format!(
                "block {}: too few servers kept its {len} acknowledged bytes",
                b.id
            );
            return Err(self.fail("append", msg));
        }
        for (s, c) in survivors.iter().zip(&b.chunks) {
            for lost in c.servers.iter().filter(|x| !s.servers.contains(x)) {
                if !self.exclude.contains(lost) {
                    self.exclude.push(lost.clone());
                }
            }
        }
        self.commit(
            len,
            true,
            false,
            false,
            if changed { survivors } else { Vec::new() },
        )
        .await?;
        self.block = None;
        self.stripe.clear();
        Ok(())
    }

    /// Striped, after a failed send: puts back the parity of the acknowledged partial stripe.
    async fn rewrite_last_parity(&self) {
        let (
            Some(b),
            Some(coder),
            Layout::Striped {
                data,
                parity,
                cell_bytes,
            },
        ) = (&self.block, &self.inner.coder, self.layout)
        else {
            return;
        };
        if self.stripe.is_empty() {
            return;
        }
        let c = cell_bytes as usize;
        let s = b.len / (c as u64 * u64::from(data));
        let cells: Vec<&[u8]> = self.stripe.chunks(c).collect();
        let par = coder.parity(&cells, c);
        let futs = (0..parity as usize).map(|p| {
            let chunk = &b.chunks[data as usize + p];
            let req = WriteRequest {
                chunk_id: chunk.chunk_id,
                offset: s * c as u64,
                data: Bytes::from(par[p].clone()),
                forward: Vec::new(),
                sync: false,
                create: false,
            };
            async move {
                for srv in &chunk.servers {
                    let _ = self.inner.chunk_write(srv, &req).await;
                }
            }
        });
        join_all(futs).await;
    }

    /// Sends `data` (and with `sync`, fsyncs everything so far) to the servers.
    async fn send(&mut self, mut data: &[u8], sync: bool) -> FsResult<()> {
        let mut attempts = 0u32;
        let mut synced = false;
        loop {
            if self
                .block
                .as_ref()
                .is_some_and(|b| b.len >= self.block_bytes)
            {
                // Finalizing syncs the block on every server.
                self.complete_block(false).await?;
            }
            if data.is_empty() && (!sync || synced || self.block.is_none()) {
                return Ok(());
            }
            if self.block.is_none() {
                self.new_block().await?;
            }
            let b = self.block.as_ref().expect("a block was just opened");
            let room = self.block_bytes - b.len;
            let n = data
                .len()
                .min(room as usize)
                .min(self.inner.options.packet_bytes);
            let this_sync = sync && n == data.len();
            match self.write_piece(&data[..n], this_sync).await {
                Ok(()) => {
                    data = &data[n..];
                    synced |= this_sync;
                }
                Err(e) => {
                    attempts += 1;
                    tracing::warn!(path = %self.path, error = %e, attempt = attempts, "chunkfs: send failed; moving to a new block");
                    if attempts >= self.inner.options.max_write_attempts {
                        return Err(self.fail(
                            "append",
                            format!("giving up after {attempts} attempts: {e}"),
                        ));
                    }
                    self.complete_block(true).await?;
                }
            }
        }
    }

    /// Writes one piece into the current block on all its servers; the block length moves only
    /// when every server acknowledged.
    async fn write_piece(&mut self, piece: &[u8], sync: bool) -> Result<(), String> {
        let inner: &Inner = &self.inner;
        let b = self.block.as_ref().expect("caller opened a block");
        let create = !b.created;
        match self.layout {
            Layout::Replicated { .. } => {
                let chunk = &b.chunks[0];
                let data = Bytes::copy_from_slice(piece);
                if self.parallel {
                    let futs = chunk.servers.iter().map(|s| {
                        let req = WriteRequest {
                            chunk_id: chunk.chunk_id,
                            offset: b.len,
                            data: data.clone(),
                            forward: Vec::new(),
                            sync,
                            create,
                        };
                        async move { inner.chunk_write(s, &req).await }
                    });
                    for r in join_all(futs).await {
                        r?;
                    }
                } else {
                    let req = WriteRequest {
                        chunk_id: chunk.chunk_id,
                        offset: b.len,
                        data,
                        forward: chunk.servers[1..].to_vec(),
                        sync,
                        create,
                    };
                    inner.chunk_write(&chunk.servers[0], &req).await?;
                }
            }
            Layout::Striped {
                data,
                parity,
                cell_bytes,
            } => {
                let c = cell_bytes as usize;
                let stripe_bytes = c * data as usize;
                let coder = inner
                    .coder
                    .as_ref()
                    .ok_or_else(|| "no Reed-Solomon coder".to_string())?;
                // Data: each data chunk gets its share of the piece appended.
                let mut per_chunk: Vec<Vec<u8>> = vec![Vec::new(); data as usize];
                let mut x = b.len;
                let mut rest = piece;
                while !rest.is_empty() {
                    let (_, k, _) = rs::locate(data, cell_bytes, x);
                    let n = (c - (x % c as u64) as usize).min(rest.len());
                    per_chunk[k].extend_from_slice(&rest[..n]);
                    x += n as u64;
                    rest = &rest[n..];
                }
                // Parity of every stripe the piece touches, from the first one's start.
                let first_stripe = b.len / stripe_bytes as u64;
                let mut combined = self.stripe.clone();
                combined.extend_from_slice(piece);
                let mut par: Vec<Vec<u8>> = vec![Vec::new(); parity as usize];
                if !combined.is_empty() {
                    for st in combined.chunks(stripe_bytes) {
                        let cells: Vec<&[u8]> = st.chunks(c).collect();
                        for (p, cell) in coder.parity(&cells, c).into_iter().enumerate() {
                            par[p].extend_from_slice(&cell);
                        }
                    }
                }
                let mut reqs = Vec::new();
                for (k, bytes) in per_chunk.into_iter().enumerate() {
                    reqs.push((k, self.chunk_len(b.len, k), bytes));
                }
                for (p, bytes) in par.into_iter().enumerate() {
                    reqs.push((data as usize + p, first_stripe * c as u64, bytes));
                }
                let futs = reqs.into_iter().map(|(k, offset, bytes)| {
                    let chunk = &b.chunks[k];
                    let req = WriteRequest {
                        chunk_id: chunk.chunk_id,
                        offset,
                        data: bytes.into(),
                        forward: Vec::new(),
                        sync,
                        create,
                    };
                    async move {
                        if req.data.is_empty() && !req.sync && !req.create {
                            return Ok(0);
                        }
                        inner.chunk_write(&chunk.servers[0], &req).await
                    }
                });
                for r in join_all(futs).await {
                    r?;
                }
                let keep = combined.len() % stripe_bytes;
                self.stripe = combined.split_off(combined.len() - keep);
            }
        }
        let b = self.block.as_mut().expect("caller opened a block");
        b.created = true;
        b.len += piece.len() as u64;
        Ok(())
    }
}

impl ChunkFsWriter {
    fn gone(&self, op: &'static str) -> FsError {
        let why = self
            .broken
            .lock()
            .clone()
            .unwrap_or_else(|| "its streamer ended".to_string());
        backend(op, &self.path, format!("the writer failed earlier: {why}"))
    }

    async fn ask(
        &mut self,
        op: &'static str,
        make: impl FnOnce(tokio::sync::oneshot::Sender<FsResult<()>>) -> Cmd,
    ) -> FsResult<()> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self.tx.send(make(reply)).await.is_err() {
            return Err(self.gone(op));
        }
        answer.await.unwrap_or_else(|_| Err(self.gone(op)))
    }
}

#[async_trait]
impl FsWriter for ChunkFsWriter {
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        if self.closed {
            return Err(FsError::Closed {
                op: "append",
                path: self.path.clone(),
            });
        }
        if self.broken.lock().is_some() {
            return Err(self.gone("append"));
        }
        self.pos += data.len() as u64;
        self.buf.extend_from_slice(data);
        if flag == AppendFlag::None {
            // Whole packets go to the streamer; the rest stays buffered.
            let packet = self.inner.options.packet_bytes.max(1);
            while self.buf.len() >= packet {
                let rest = self.buf.split_off(packet);
                let full = std::mem::replace(&mut self.buf, rest);
                if self.tx.send(Cmd::Data(full)).await.is_err() {
                    return Err(self.gone("append"));
                }
            }
            return Ok(());
        }
        let data = std::mem::take(&mut self.buf);
        let sync = flag == AppendFlag::Sync;
        self.ask("append", move |reply| Cmd::Flush { data, sync, reply })
            .await
    }

    fn position(&self) -> u64 {
        self.pos
    }

    async fn close(&mut self) -> FsResult<()> {
        if self.closed {
            return Ok(());
        }
        let data = std::mem::take(&mut self.buf);
        self.ask("close", move |reply| Cmd::Close { data, reply })
            .await?;
        self.closed = true;
        Ok(())
    }

    fn path(&self) -> &str {
        &self.path
    }
}

/// A file open for reads; follows the file as its writer flushes.
pub struct ChunkFsReader {
    inner: Arc<Inner>,
    path: String,
    stat: tokio::sync::Mutex<Arc<StatReply>>,
}

impl ChunkFsReader {
    async fn refresh(&self) -> FsResult<Arc<StatReply>> {
        let stat = Arc::new(self.inner.stat(&self.path).await?);
        let mut cur = self.stat.lock().await;
        if stat.length >= cur.length {
            *cur = stat;
        }
        Ok(cur.clone())
    }

    async fn read_range(
        &self,
        stat: &StatReply,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, String> {
        let end = offset + len as u64;
        let mut out = Vec::with_capacity(len);
        let mut start = 0u64;
        for b in &stat.blocks {
            let b_end = start + b.length;
            if b_end > offset && start < end {
                let from = offset.max(start) - start;
                let to = end.min(b_end) - start;
                out.extend(self.inner.read_block(b, from, to).await?);
            }
            start = b_end;
            if start >= end {
                break;
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl FsReader for ChunkFsReader {
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        let past_end = |file_len: u64| FsError::ReadPastEnd {
            path: self.path.clone(),
            offset,
            len,
            file_len,
        };
        let Some(end) = offset.checked_add(len as u64) else {
            let file_len = self.stat.lock().await.length;
            return Err(past_end(file_len));
        };
        let mut stat = self.stat.lock().await.clone();
        if end > stat.length {
            stat = self.refresh().await?;
            if end > stat.length {
                return Err(past_end(stat.length));
            }
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        match self.read_range(&stat, offset, len).await {
            Ok(d) => Ok(d),
            Err(first) => {
                // Locations may have moved (a dead server, a repaired replica): look again.
                let stat = self.refresh().await?;
                self.read_range(&stat, offset, len)
                    .await
                    .map_err(|e| backend("pread", &self.path, format!("{e} (before: {first})")))
            }
        }
    }

    async fn length(&self) -> FsResult<u64> {
        Ok(self.refresh().await?.length)
    }

    fn path(&self) -> &str {
        &self.path
    }
}
