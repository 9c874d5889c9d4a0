//! The chunk server: stores chunk files ([`store::ChunkStore`]), serves writes (forwarding them
//! down an hdfs-like pipeline), checksummed reads, finalization and copies to other servers
//! (re-replication), and reports to the metadata server: a heartbeat every `heartbeat_ms`, a
//! full block report after every start and when asked, a sweep of its chunk list every
//! `block_report_ms` (the metadata server answers the chunks no file owns, whose delete was
//! lost, so they do not stay on disk for ever), and every replica whose checksum fails (found
//! by a read or by the background scanner), so that the metadata server repairs it.

mod drop_behind;
pub mod store;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::ErrorKind;
use common::time::{Clock, system_clock};
use parking_lot::Mutex;
use prost::Message;
use rpc::{ClusterCredentials, PeerInfo, RpcError, Service};
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::messages::*;
use crate::{CHUNK_SERVER_NAME, META_SERVER_NAME};
use store::{ChunkStore, StoreError};

/// Limits and timings of a chunk server.
#[derive(Debug, Clone)]
pub struct ChunkServerOptions {
    /// Where the chunk files go (`<data_dir>/chunks`).
    pub data_dir: PathBuf,
    /// The metadata server.
    pub meta: SocketAddr,
    pub heartbeat_ms: u64,
    /// Every chunk is listed to the metadata server this often (a sweep: chunks no file owns
    /// are deleted; 0: only the full report after start).
    pub block_report_ms: u64,
    /// The background scanner verifies every chunk this often (0: never).
    pub scan_interval_ms: u64,
    /// Largest chunk; writes past it are refused.
    pub max_chunk_bytes: u64,
    /// What a chunk server writes is dropped from the page cache this far behind the writes
    /// (HDFS's drop-behind with its 8 MiB lag; `drop_behind.rs`); 0 keeps it cached.
    pub drop_behind_bytes: u64,
    /// Largest read answered in one message.
    pub max_read_bytes: u64,
    /// Copies to other servers running at once.
    pub max_concurrent_replications: usize,
    /// Connections to other servers kept open (pipeline and copies).
    pub max_peer_connections: usize,
    pub call_timeout: Duration,
    /// Connections to peers silent this long are dropped (a dead peer is noticed by it).
    pub peer_idle_timeout: Duration,
    /// What "how long ago" is measured with (an unreachable peer's back-off).
    pub clock: Arc<dyn Clock>,
}

impl ChunkServerOptions {
    pub fn new(data_dir: PathBuf, meta: SocketAddr) -> Self {
        Self {
            data_dir,
            meta,
            heartbeat_ms: 500,
            block_report_ms: 60_000,
            scan_interval_ms: 300_000,
            max_chunk_bytes: 1 << 30,
            drop_behind_bytes: 8 << 20,
            max_read_bytes: 16 << 20,
            max_concurrent_replications: 4,
            max_peer_connections: 256,
            call_timeout: Duration::from_secs(5),
            peer_idle_timeout: Duration::from_secs(3),
            clock: system_clock(),
        }
    }
}

/// Connections to other servers by address, bounded: QUIC to the metadata server, TCP + TLS
/// to chunk servers (`rpc::tcp`: every replicated byte crosses these, and TCP costs a third of
/// QUIC's CPU per byte).
pub(crate) struct Peers {
    credentials: ClusterCredentials,
    max: usize,
    /// A connection silent this long is closed (keep-alives every third of it): how a dead
    /// peer is noticed.
    idle_timeout: Duration,
    clients: tokio::sync::Mutex<HashMap<String, Arc<rpc::Client>>>,
    chunk_servers: tokio::sync::Mutex<HashMap<String, Arc<rpc::TcpClient>>>,
    /// Servers whose last connection attempt failed, and when.
    unreachable: Mutex<HashMap<String, std::time::Instant>>,
    clock: Arc<dyn Clock>,
}

impl Peers {
    pub(crate) fn new(
        credentials: ClusterCredentials,
        max: usize,
        idle_timeout: Duration,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            credentials,
            max: max.max(1),
            idle_timeout,
            clients: tokio::sync::Mutex::new(HashMap::new()),
            chunk_servers: tokio::sync::Mutex::new(HashMap::new()),
            unreachable: Mutex::new(HashMap::new()),
            clock,
        }
    }

    /// A QUIC client for `addr`, presenting `server_name` (the metadata server). A server that
    /// could not be reached is not tried again for `idle_timeout / 3`: callers fail over at
    /// once meanwhile.
    pub(crate) async fn get(
        &self,
        addr: &str,
        server_name: &str,
    ) -> Result<Arc<rpc::Client>, String> {
        if let Some(c) = self.clients.lock().await.get(addr) {
            return Ok(c.clone());
        }
        let sock = self.reachable(addr)?;
        let options = rpc::ClientOptions {
            connect_timeout: Duration::from_secs(3),
            idle_timeout: self.idle_timeout,
            ..Default::default()
        };
        let config = self
            .credentials
            .client_config(options.idle_timeout)
            .map_err(|e| e.to_string())?;
        // Connecting happens outside the lock: one dead server must not hold up the others.
        let client = rpc::Client::connect_with(sock, server_name, config, options)
            .await
            .map_err(|e| self.failed(addr, e))?;
        self.unreachable.lock().remove(addr);
        Ok(insert(
            &mut *self.clients.lock().await,
            self.max,
            addr,
            client,
        ))
    }

    /// A client for the chunk server at `addr`, over TCP; the same back-off as [`Peers::get`].
    pub(crate) async fn chunk_server(&self, addr: &str) -> Result<Arc<rpc::TcpClient>, String> {
        if let Some(c) = self.chunk_servers.lock().await.get(addr) {
            return Ok(c.clone());
        }
        let sock = self.reachable(addr)?;
        let options = rpc::TcpClientOptions {
            connect_timeout: Duration::from_secs(3),
            ..Default::default()
        };
        let client = rpc::TcpClient::connect(sock, CHUNK_SERVER_NAME, &self.credentials, options)
            .await
            .map_err(|e| self.failed(addr, e))?;
        self.unreachable.lock().remove(addr);
        Ok(insert(
            &mut *self.chunk_servers.lock().await,
            self.max,
            addr,
            client,
        ))
    }

    /// `addr` parsed, unless its last connection attempt failed within `idle_timeout / 3`.
    fn reachable(&self, addr: &str) -> Result<SocketAddr, String> {
        if let Some(at) = self.unreachable.lock().get(addr)
            && self.clock.now().saturating_duration_since(*at) < self.idle_timeout / 3
        {
            return Err(format!(
                "{addr} was unreachable {}ms ago",
                self.clock.now().saturating_duration_since(*at).as_millis()
            ));
        }
        let sock = addr
            .parse()
            .map_err(|e| format!("bad server address {addr:?}: {e}"))?;
        Ok(sock)
    }

    /// The servers whose last connection attempt failed within the back-off (`idle_timeout /
    /// 3`): a writer asks the metadata server for blocks elsewhere until it notices them dead.
    pub(crate) fn recently_unreachable(&self) -> Vec<String> {
        let now = self.clock.now();
        self.unreachable
            .lock()
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) < self.idle_timeout / 3)
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Notes a failed connection attempt to `addr`.
    fn failed(&self, addr: &str, e: RpcError) -> String {
        let mut unreachable = self.unreachable.lock();
        if unreachable.len() >= self.max {
            unreachable.clear();
        }
        unreachable.insert(addr.to_string(), self.clock.now());
        e.to_string()
    }

    /// Forgets a connection that failed, so the next call sets up a new one.
    pub(crate) async fn forget(&self, addr: &str) {
        self.clients.lock().await.remove(addr);
        self.chunk_servers.lock().await.remove(addr);
    }
}

/// Adds `client` for `addr` (unless another task got there first: that one is kept), evicting
/// one entry when `max` are held; returns the client now held.
fn insert<C>(map: &mut HashMap<String, Arc<C>>, max: usize, addr: &str, client: C) -> Arc<C> {
    if let Some(c) = map.get(addr) {
        return c.clone();
    }
    if map.len() >= max
        && let Some(k) = map.keys().next().cloned()
    {
        map.remove(&k);
    }
    let client = Arc::new(client);
    map.insert(addr.to_string(), client.clone());
    client
}

struct Shared {
    store: Arc<ChunkStore>,
    addr: String,
    options: ChunkServerOptions,
    peers: Peers,
    replications: Semaphore,
}

/// A running chunk server; its background tasks end when it is shut down or dropped.
pub struct ChunkServer {
    server: rpc::Server,
    shared: Arc<Shared>,
    _tasks: AbortOnDrop,
}

impl ChunkServer {
    /// Opens the store and serves on `listen` (its address is the server's identity).
    pub async fn start(
        listen: SocketAddr,
        credentials: &ClusterCredentials,
        options: ChunkServerOptions,
    ) -> Result<Self, String> {
        let dir = options.data_dir.join("chunks");
        let (max, behind) = (options.max_chunk_bytes, options.drop_behind_bytes);
        let store = tokio::task::spawn_blocking(move || {
            ChunkStore::open(&dir, max).map(|s| s.with_drop_behind(behind))
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.message)?;
        let replications = Semaphore::new(options.max_concurrent_replications.max(1));
        let peers = Peers::new(
            credentials.clone(),
            options.max_peer_connections,
            options.peer_idle_timeout,
            options.clock.clone(),
        );
        // The identity must be known before binding when port 0 is asked for: bind first.
        let holder: Arc<Mutex<Option<Arc<Shared>>>> = Arc::new(Mutex::new(None));
        let server = rpc::Server::bind_with(
            listen,
            credentials,
            ChunkService {
                shared: holder.clone(),
            },
            rpc::ServerOptions {
                tcp: true,
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            store: Arc::new(store),
            addr: server.local_addr().to_string(),
            options,
            peers,
            replications,
        });
        *holder.lock() = Some(shared.clone());
        let mut tasks = vec![tokio::spawn(heartbeat_loop(shared.clone()))];
        if shared.options.scan_interval_ms > 0 {
            tasks.push(tokio::spawn(scan_loop(shared.clone())));
        }
        info!(addr = %shared.addr, chunks = shared.store.list().len(), "chunk server started");
        Ok(Self {
            server,
            shared,
            _tasks: AbortOnDrop(tasks),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The data file of chunk `chunk_id` in this server's store (tests corrupt it).
    pub fn chunk_file(&self, chunk_id: u64) -> PathBuf {
        ChunkStore::chunk_data_path(&self.shared.options.data_dir.join("chunks"), chunk_id)
    }

    /// Chunks held and their lengths.
    pub fn chunks(&self) -> Vec<(u64, u64)> {
        self.shared.store.list()
    }

    pub async fn shutdown(self) {
        drop(self._tasks);
        self.server.shutdown(Duration::from_secs(2)).await;
    }
}

/// Background tasks, aborted when their owner goes.
pub(crate) struct AbortOnDrop(pub(crate) Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

struct ChunkService {
    shared: Arc<Mutex<Option<Arc<Shared>>>>,
}

fn decode<M: Message + Default>(method: &str, payload: Bytes) -> Result<M, RpcError> {
    M::decode(payload).map_err(|e| {
        RpcError::service(
            ErrorKind::InvalidInput,
            format!("undecodable {method} request: {e}"),
        )
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(StoreError {
            code: chunk_code::IO,
            message: format!("chunk task failed: {e}"),
        })
    })
}

#[async_trait]
impl Service for ChunkService {
    async fn call(
        &self,
        _peer: &PeerInfo,
        method: &str,
        payload: Bytes,
    ) -> Result<Bytes, RpcError> {
        let Some(shared) = self.shared.lock().clone() else {
            return Err(RpcError::service(
                ErrorKind::Unavailable,
                "chunk server starting",
            ));
        };
        let reply = match method {
            method::CHUNK_WRITE => write(&shared, decode(method, payload)?)
                .await
                .encode_to_vec(),
            method::CHUNK_READ => read(&shared, decode(method, payload)?)
                .await
                .encode_to_vec(),
            method::CHUNK_FINALIZE => {
                let req: FinalizeRequest = decode(method, payload)?;
                let store = shared.store.clone();
                match blocking(move || store.finalize(req.chunk_id, req.length)).await {
                    Ok(length) => WriteReply {
                        error: None,
                        length,
                    },
                    Err(e) => WriteReply {
                        error: Some(e.to_wire(&shared.addr)),
                        length: 0,
                    },
                }
                .encode_to_vec()
            }
            method::CHUNK_REPLICATE => {
                let req: ReplicateRequest = decode(method, payload)?;
                let error = replicate(&shared, &req)
                    .await
                    .err()
                    .map(|message| ChunkError {
                        code: chunk_code::IO,
                        message,
                    });
                WriteReply { error, length: 0 }.encode_to_vec()
            }
            method::CHUNK_RECONSTRUCT => {
                let req: ReconstructRequest = decode(method, payload)?;
                let error = reconstruct(&shared, &req)
                    .await
                    .err()
                    .map(|message| ChunkError {
                        code: chunk_code::IO,
                        message: format!("chunk server {}: {message}", shared.addr),
                    });
                WriteReply { error, length: 0 }.encode_to_vec()
            }
            method::CHUNK_STATUS => ChunkStatusReply {
                chunks: shared
                    .store
                    .list()
                    .into_iter()
                    .map(|(chunk_id, length)| ChunkInfo { chunk_id, length })
                    .collect(),
            }
            .encode_to_vec(),
            other => {
                return Err(RpcError::service(
                    ErrorKind::NotFound,
                    format!("chunk server: no method {other:?}"),
                ));
            }
        };
        Ok(reply.into())
    }
}

/// Writes locally and, at the same time, forwards down the pipeline; answers when both are done.
async fn write(shared: &Arc<Shared>, req: WriteRequest) -> WriteReply {
    let forward = async {
        let Some((next, rest)) = req.forward.split_first() else {
            return Ok(());
        };
        let fwd = WriteRequest {
            forward: rest.to_vec(),
            ..req.clone()
        };
        let client = shared
            .peers
            .chunk_server(next)
            .await
            .map_err(|e| format!("pipeline to {next}: {e}"))?;
        let reply: Result<WriteReply, RpcError> = client
            .call_message(method::CHUNK_WRITE, &fwd, shared.options.call_timeout)
            .await;
        match reply {
            Ok(WriteReply { error: None, .. }) => Ok(()),
            Ok(WriteReply { error: Some(e), .. }) => Err(e.message),
            Err(e) => {
                shared.peers.forget(next).await;
                Err(format!("pipeline to {next}: {e}"))
            }
        }
    };
    let store = shared.store.clone();
    let (id, offset, data, create, sync) = (
        req.chunk_id,
        req.offset,
        req.data.clone(),
        req.create,
        req.sync,
    );
    let local = blocking(move || store.write(id, offset, &data, create, sync));
    let (local, forwarded) = tokio::join!(local, forward);
    match (local, forwarded) {
        (Err(e), _) => WriteReply {
            error: Some(e.to_wire(&shared.addr)),
            length: 0,
        },
        (Ok(_), Err(message)) => WriteReply {
            error: Some(ChunkError {
                code: chunk_code::PIPELINE,
                message,
            }),
            length: 0,
        },
        (Ok(length), Ok(())) => WriteReply {
            error: None,
            length,
        },
    }
}

async fn read(shared: &Arc<Shared>, req: ReadRequest) -> ReadReply {
    if req.len > shared.options.max_read_bytes {
        return ReadReply {
            error: Some(ChunkError {
                code: chunk_code::INVALID,
                message: format!(
                    "chunk server {}: read of {} bytes is over the limit of {}",
                    shared.addr, req.len, shared.options.max_read_bytes
                ),
            }),
            ..Default::default()
        };
    }
    let store = shared.store.clone();
    let id = req.chunk_id;
    let result = blocking(move || {
        let data = store.read(id, req.offset, req.len as usize)?;
        Ok((data, store.length(id)?))
    })
    .await;
    match result {
        Ok((data, length)) => ReadReply {
            error: None,
            data: data.into(),
            length,
        },
        Err(e) => {
            if e.code == chunk_code::CORRUPT {
                report_bad(shared.clone(), id, e.message.clone());
            }
            ReadReply {
                error: Some(e.to_wire(&shared.addr)),
                ..Default::default()
            }
        }
    }
}

/// Tells the metadata server that our replica of `chunk_id` is corrupt (in the background).
fn report_bad(shared: Arc<Shared>, chunk_id: u64, detail: String) {
    warn!(server = %shared.addr, chunk = chunk_id, %detail, "chunk server: corrupt replica");
    tokio::spawn(async move {
        let req = BadChunkRequest {
            server: shared.addr.clone(),
            chunk_id,
            detail,
        };
        let meta = shared.options.meta.to_string();
        match shared.peers.get(&meta, META_SERVER_NAME).await {
            Ok(c) => {
                let r: Result<UnitReply, _> = c
                    .call_message(method::META_BAD_CHUNK, &req, shared.options.call_timeout)
                    .await;
                if let Err(e) = r {
                    shared.peers.forget(&meta).await;
                    warn!(error = %e, "chunk server: cannot report a corrupt replica");
                }
            }
            Err(e) => warn!(error = %e, "chunk server: cannot reach the metadata server"),
        }
    });
}

/// Copies the first `length` bytes of a chunk to `target` (re-replication).
async fn replicate(shared: &Arc<Shared>, req: &ReplicateRequest) -> Result<(), String> {
    let _permit = shared
        .replications
        .acquire()
        .await
        .map_err(|e| e.to_string())?;
    let client = shared.peers.chunk_server(&req.target).await?;
    let piece = (4u64 << 20).min(shared.options.max_read_bytes);
    let mut off = 0u64;
    loop {
        let n = (req.length - off).min(piece);
        let store = shared.store.clone();
        let id = req.chunk_id;
        let data = blocking(move || store.read(id, off, n as usize))
            .await
            .map_err(|e| {
                if e.code == chunk_code::CORRUPT {
                    report_bad(shared.clone(), id, e.message.clone());
                }
                format!("copy of chunk {id} to {}: {}", req.target, e.message)
            })?;
        let w = WriteRequest {
            chunk_id: req.chunk_id,
            offset: off,
            data: data.into(),
            forward: Vec::new(),
            sync: false,
            create: off == 0,
        };
        let r: WriteReply = client
            .call_message(method::CHUNK_WRITE, &w, shared.options.call_timeout)
            .await
            .map_err(|e| e.to_string())?;
        if let Some(e) = r.error {
            return Err(e.message);
        }
        off += n;
        if off >= req.length {
            break;
        }
    }
    let f = FinalizeRequest {
        chunk_id: req.chunk_id,
        length: req.length,
    };
    let r: WriteReply = client
        .call_message(method::CHUNK_FINALIZE, &f, shared.options.call_timeout)
        .await
        .map_err(|e| e.to_string())?;
    match r.error {
        Some(e) => Err(e.message),
        None => Ok(()),
    }
}

/// Reads `len` bytes at `offset` of a chunk from the first of its servers that answers.
async fn read_remote(
    shared: &Arc<Shared>,
    chunk: &WireChunk,
    offset: u64,
    len: usize,
) -> Result<Vec<u8>, String> {
    let mut last = String::from("no server known");
    for s in &chunk.servers {
        let client = match shared.peers.chunk_server(s).await {
            Ok(c) => c,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let req = ReadRequest {
            chunk_id: chunk.chunk_id,
            offset,
            len: len as u64,
        };
        match client
            .call_message::<_, ReadReply>(method::CHUNK_READ, &req, shared.options.call_timeout)
            .await
        {
            Ok(ReadReply {
                error: None, data, ..
            }) if data.len() == len => return Ok(data.to_vec()),
            Ok(ReadReply { error: Some(e), .. }) => last = e.message,
            Ok(_) => last = format!("{s}: short read"),
            Err(e) => {
                shared.peers.forget(s).await;
                last = e.to_string();
            }
        }
    }
    Err(format!("chunk {}: {last}", chunk.chunk_id))
}

/// Rebuilds a lost chunk of a striped block here, stripe by stripe, from any `data` siblings.
async fn reconstruct(shared: &Arc<Shared>, req: &ReconstructRequest) -> Result<(), String> {
    let _permit = shared
        .replications
        .acquire()
        .await
        .map_err(|e| e.to_string())?;
    let layout = req
        .layout
        .as_ref()
        .and_then(crate::Layout::from_wire)
        .ok_or("no valid layout")?;
    let crate::Layout::Striped {
        data,
        parity,
        cell_bytes,
    } = layout
    else {
        return Err("not a striped block".into());
    };
    let total = (data + parity) as usize;
    let k = req.index as usize;
    if req.chunks.len() != total || k >= total {
        return Err(format!(
            "{} chunks for a {data}+{parity} block",
            req.chunks.len()
        ));
    }
    let coder = crate::rs::Coder::new(data as usize, parity as usize)?;
    let c = u64::from(cell_bytes);
    let want = crate::rs::chunk_len(layout, req.block_length, k);
    let target = req.chunks[k].chunk_id;
    let stripes = want.div_ceil(c);
    let mut written = 0u64;
    for s in 0..stripes.max(1) {
        let reads = (0..total).map(|i| async move {
            if i == k {
                return None;
            }
            let have = crate::rs::chunk_len(layout, req.block_length, i);
            let n = have.saturating_sub(s * c).min(c) as usize;
            let mut cell = if n == 0 {
                Vec::new()
            } else {
                read_remote(shared, &req.chunks[i], s * c, n).await.ok()?
            };
            cell.resize(c as usize, 0);
            Some(cell)
        });
        let mut shards: Vec<Option<Vec<u8>>> = futures_util::future::join_all(reads).await;
        coder.reconstruct(&mut shards)?;
        let mut cell = shards[k].take().ok_or("stripe not rebuilt")?;
        cell.truncate(want.saturating_sub(s * c).min(c) as usize);
        let store = shared.store.clone();
        let (create, offset) = (s == 0, written);
        let n = cell.len() as u64;
        blocking(move || store.write(target, offset, &cell, create, false))
            .await
            .map_err(|e| e.message)?;
        written += n;
    }
    let store = shared.store.clone();
    blocking(move || store.finalize(target, want))
        .await
        .map_err(|e| e.message)?;
    Ok(())
}

async fn heartbeat_loop(shared: Arc<Shared>) {
    let meta = shared.options.meta.to_string();
    let heartbeat_ms = shared.options.heartbeat_ms.max(10);
    let period = Duration::from_millis(heartbeat_ms);
    // Sweeps are paced in heartbeats (no clock read).
    let sweep_every = match shared.options.block_report_ms {
        0 => u64::MAX,
        ms => ms.div_ceil(heartbeat_ms).max(1),
    };
    // The first report after a start is a full one even when the metadata server does not ask
    // (it may not have noticed the restart): deletes it sent before are lost with the process.
    let mut reported = false;
    let mut beats = 0u64;
    loop {
        tokio::time::sleep(period).await;
        let client = match shared.peers.get(&meta, META_SERVER_NAME).await {
            Ok(c) => c,
            Err(e) => {
                debug!(error = %e, "chunk server: metadata server unreachable");
                continue;
            }
        };
        let hb = HeartbeatRequest {
            server: shared.addr.clone(),
            chunks: shared.store.list().len() as u64,
            used_bytes: shared.store.used_bytes(),
        };
        let reply: HeartbeatReply = match client
            .call_message(method::META_HEARTBEAT, &hb, shared.options.call_timeout)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                debug!(error = %e, "chunk server: heartbeat failed");
                shared.peers.forget(&meta).await;
                continue;
            }
        };
        delete(&shared, reply.delete).await;
        beats = beats.saturating_add(1);
        let full = reply.need_report || !reported;
        if full || beats >= sweep_every {
            // Listed after the deletes above ran: a chunk deleted since is not reported.
            let report = BlockReportRequest {
                server: shared.addr.clone(),
                chunks: shared
                    .store
                    .list()
                    .into_iter()
                    .map(|(chunk_id, length)| ChunkInfo { chunk_id, length })
                    .collect(),
                sweep: !full,
            };
            match client
                .call_message::<_, BlockReportReply>(
                    method::META_BLOCK_REPORT,
                    &report,
                    shared.options.call_timeout,
                )
                .await
            {
                Ok(r) => {
                    reported |= full;
                    beats = 0;
                    delete(&shared, r.delete).await;
                }
                Err(e) => debug!(error = %e, "chunk server: block report failed"),
            }
        }
    }
}

async fn delete(shared: &Arc<Shared>, ids: Vec<u64>) {
    if ids.is_empty() {
        return;
    }
    let store = shared.store.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for id in ids {
            store.delete(id);
        }
    })
    .await;
}

async fn scan_loop(shared: Arc<Shared>) {
    let period = Duration::from_millis(shared.options.scan_interval_ms);
    loop {
        tokio::time::sleep(period).await;
        for (id, _) in shared.store.list() {
            let store = shared.store.clone();
            if let Err(e) = blocking(move || store.verify(id)).await
                && e.code == chunk_code::CORRUPT
            {
                report_bad(shared.clone(), id, e.message);
            }
        }
    }
}
