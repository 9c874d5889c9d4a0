//! The broker's side: [`BrokerService`], an [`rpc::Service`] that serves any [`Fs`] backend.
//!
//! Writers are stateful: `fs.create` opens a backend writer and answers a random handle id,
//! owned by the connection (peer address) that created it; `fs.append` applies the caller's
//! flag on the backend writer before answering, so an acknowledged Flush or Sync means the
//! backend flushed or synced. A writer nobody has touched (appended to, or kept alive with
//! `fs.keepalive`) for `writer_idle_timeout` is closed and its handle reclaimed: that is how
//! the handles of a vanished client are freed, since the rpc layer reports no disconnects.
//!
//! Readers are stateless for the client (`fs.pread` names the path); the broker keeps a
//! bounded LRU of open backend readers, dropped on every mutation of their path through the
//! broker so that a removed-and-recreated file is never read through a stale reader.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use common::ErrorKind;
use parking_lot::Mutex;
use prost::Message;
use rpc::{ClusterCredentials, PeerInfo, RpcError, Server, ServerOptions, StreamSink};
use tracing::{debug, info, warn};

use super::messages::*;
use super::{BrokerOptions, SERVER_NAME};
use crate::{Fs, FsError, FsReader, FsResult, FsWriter};

/// A writer open on the broker.
struct WriterSlot {
    owner: SocketAddr,
    path: String,
    last_used: Mutex<Instant>,
    /// A tokio mutex: appends hold it across the backend's await.
    writer: tokio::sync::Mutex<Box<dyn FsWriter>>,
}

impl WriterSlot {
    fn touch(&self) {
        *self.last_used.lock() = Instant::now();
    }
}

/// A bounded LRU of open backend readers, by path.
struct ReaderCache {
    capacity: usize,
    tick: u64,
    map: HashMap<String, (Arc<dyn FsReader>, u64)>,
    order: BTreeMap<u64, String>,
    /// Bumped by every invalidation: a reader opened before one must not be cached after it.
    generation: u64,
}

impl ReaderCache {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            tick: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
            generation: 0,
        }
    }

    fn get(&mut self, path: &str) -> Option<Arc<dyn FsReader>> {
        self.tick += 1;
        let tick = self.tick;
        let (reader, used) = self.map.get_mut(path)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, path.to_string());
        Some(reader.clone())
    }

    fn insert(&mut self, path: &str, reader: Arc<dyn FsReader>, generation: u64) {
        if self.capacity == 0 || generation != self.generation {
            return;
        }
        self.tick += 1;
        if let Some((_, used)) = self.map.insert(path.to_string(), (reader, self.tick)) {
            self.order.remove(&used);
        }
        self.order.insert(self.tick, path.to_string());
        while self.map.len() > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.map.remove(&oldest);
        }
    }

    /// Drops the readers of `path` and, with `below`, of everything under it.
    fn invalidate(&mut self, path: &str, below: bool) {
        self.generation += 1;
        let prefix = if path.ends_with('/') {
            path.to_string()
        } else {
            format!("{path}/")
        };
        let doomed: Vec<(String, u64)> = self
            .map
            .iter()
            .filter(|(p, _)| p.as_str() == path || (below && p.starts_with(&prefix)))
            .map(|(p, (_, used))| (p.clone(), *used))
            .collect();
        for (p, used) in doomed {
            self.map.remove(&p);
            self.order.remove(&used);
        }
    }
}

struct Inner<F: Fs + ?Sized> {
    backend: Arc<F>,
    options: BrokerOptions,
    chunk: usize,
    writers: Mutex<HashMap<u64, Arc<WriterSlot>>>,
    readers: Mutex<ReaderCache>,
}

/// Serves a file-system backend over rpc (methods: `docs/formats/dfs-broker.md`). Cheap to
/// clone: clones share the tables. Must be created inside a tokio runtime (it starts the task
/// that reclaims idle writers, which ends when the last clone is dropped).
pub struct BrokerService<F: Fs + ?Sized = dyn Fs> {
    inner: Arc<Inner<F>>,
}

impl<F: Fs + ?Sized> Clone for BrokerService<F> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<F: Fs + ?Sized> BrokerService<F> {
    pub fn new(backend: Arc<F>, options: BrokerOptions) -> Self {
        let chunk = options.effective_chunk_bytes();
        let inner = Arc::new(Inner {
            backend,
            readers: Mutex::new(ReaderCache::new(options.max_cached_readers)),
            options,
            chunk,
            writers: Mutex::new(HashMap::new()),
        });
        tokio::spawn(reclaim_idle_writers(Arc::downgrade(&inner)));
        Self { inner }
    }

    /// Binds `addr` and serves this broker there, with the message and connection limits of
    /// its options, presenting `credentials` (normally those of node `dfs-broker`).
    pub fn bind(
        &self,
        addr: SocketAddr,
        credentials: &ClusterCredentials,
    ) -> Result<Server, RpcError> {
        let o = &self.inner.options;
        let server_options = ServerOptions {
            max_message_bytes: o.max_message_bytes,
            max_concurrent_streams_per_connection: o.max_concurrent_calls_per_connection,
            idle_timeout: o.connection_idle_timeout,
            ..ServerOptions::default()
        };
        Server::bind_with(addr, credentials, self.clone(), server_options)
    }

    /// The backend served.
    pub fn backend(&self) -> &Arc<F> {
        &self.inner.backend
    }

    /// Writers open now.
    pub fn open_writers(&self) -> usize {
        self.inner.writers.lock().len()
    }

    /// Backend readers cached now.
    pub fn cached_readers(&self) -> usize {
        self.inner.readers.lock().map.len()
    }

    /// Closes every open writer (a graceful shutdown, after the server stopped taking calls).
    pub async fn close_all_writers(&self) {
        let slots: Vec<(u64, Arc<WriterSlot>)> = self.inner.writers.lock().drain().collect();
        for (handle, slot) in slots {
            if let Err(e) = slot.writer.lock().await.close().await {
                warn!(handle, path = %slot.path, error = %e, "dfs broker: close at shutdown failed");
            }
        }
    }
}

/// Closes writers idle past the timeout; ends when the service is gone.
async fn reclaim_idle_writers<F: Fs + ?Sized>(inner: Weak<Inner<F>>) {
    let period = match inner.upgrade() {
        Some(i) => (i.options.writer_idle_timeout / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(5)),
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let timeout = inner.options.writer_idle_timeout;
        let idle: Vec<(u64, Arc<WriterSlot>)> = {
            let mut writers = inner.writers.lock();
            let doomed: Vec<u64> = writers
                .iter()
                // A writer busy in a long append is in use, however long ago it started.
                .filter(|(_, s)| {
                    s.last_used.lock().elapsed() > timeout && s.writer.try_lock().is_ok()
                })
                .map(|(h, _)| *h)
                .collect();
            doomed
                .into_iter()
                .filter_map(|h| writers.remove(&h).map(|s| (h, s)))
                .collect()
        };
        for (handle, slot) in idle {
            info!(handle, path = %slot.path, owner = %slot.owner, "dfs broker: reclaiming idle writer");
            if let Err(e) = slot.writer.lock().await.close().await {
                warn!(handle, path = %slot.path, error = %e, "dfs broker: close of idle writer failed");
            }
        }
    }
}

fn decode<M: Message + Default>(method: &str, payload: Bytes) -> Result<M, RpcError> {
    M::decode(payload).map_err(|e| {
        RpcError::service(
            ErrorKind::InvalidInput,
            format!("{method}: undecodable request: {e}"),
        )
    })
}

fn wire_err<T>(r: &FsResult<T>) -> Option<WireFsError> {
    r.as_ref().err().map(error_to_wire)
}

fn handle_error(op: &'static str, msg: String) -> FsError {
    // The path is filled in by the client, which knows its writer's path.
    FsError::Backend {
        op,
        path: String::new(),
        msg,
    }
}

impl<F: Fs + ?Sized> Inner<F> {
    /// The writer `handle`, if `peer` owns it.
    fn writer(&self, op: &'static str, peer: &PeerInfo, handle: u64) -> FsResult<Arc<WriterSlot>> {
        let slot = self.writers.lock().get(&handle).cloned().ok_or_else(|| {
            handle_error(
                op,
                format!(
                    "no writer handle {handle} on the broker (closed, reclaimed after {}ms idle, \
                     or the broker restarted)",
                    self.options.writer_idle_timeout.as_millis()
                ),
            )
        })?;
        if slot.owner != peer.addr {
            return Err(FsError::Backend {
                op,
                path: slot.path.clone(),
                msg: format!(
                    "writer handle {handle} belongs to another client ({}), not {}",
                    slot.owner, peer.addr
                ),
            });
        }
        slot.touch();
        Ok(slot)
    }

    async fn create(&self, peer: &PeerInfo, req: CreateRequest) -> FsResult<u64> {
        if self.writers.lock().len() >= self.options.max_open_writers {
            return Err(FsError::Backend {
                op: "create",
                path: req.path,
                msg: format!(
                    "the broker has {} writers open, its limit",
                    self.options.max_open_writers
                ),
            });
        }
        let writer = self.backend.create(&req.path, req.overwrite).await?;
        // An overwrite truncated (or replaced) the file a cached reader may have open.
        self.readers.lock().invalidate(&req.path, false);
        let slot = Arc::new(WriterSlot {
            owner: peer.addr,
            path: req.path,
            last_used: Mutex::new(Instant::now()),
            writer: tokio::sync::Mutex::new(writer),
        });
        let mut writers = self.writers.lock();
        loop {
            // Random ids: a handle of another client cannot be guessed by counting.
            let handle = rand::random::<u64>();
            if handle != 0 && !writers.contains_key(&handle) {
                writers.insert(handle, slot);
                return Ok(handle);
            }
        }
    }

    async fn append(&self, peer: &PeerInfo, req: AppendRequest) -> FsResult<u64> {
        let slot = self.writer("append", peer, req.handle)?;
        let Some(flag) = flag_from_wire(req.flag) else {
            return Err(FsError::Backend {
                op: "append",
                path: slot.path.clone(),
                msg: format!("unknown append flag {}", req.flag),
            });
        };
        let mut writer = slot.writer.lock().await;
        let result = writer.append(&req.data, flag).await;
        let position = writer.position();
        drop(writer);
        slot.touch();
        result.map(|()| position)
    }

    async fn close(&self, peer: &PeerInfo, handle: u64) -> FsResult<()> {
        let slot = self.writer("close", peer, handle)?;
        self.writers.lock().remove(&handle);
        let mut writer = slot.writer.lock().await;
        writer.close().await
    }

    /// A backend reader of `path`, from the cache or opened (and cached).
    async fn reader(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        let generation = {
            let mut cache = self.readers.lock();
            if let Some(r) = cache.get(path) {
                return Ok(r);
            }
            cache.generation
        };
        let reader = self.backend.open(path).await?;
        self.readers.lock().insert(path, reader.clone(), generation);
        Ok(reader)
    }

    async fn open(&self, path: &str) -> FsResult<u64> {
        // Always opened afresh: `open` is where a missing or replaced file must show.
        let generation = self.readers.lock().generation;
        let reader = self.backend.open(path).await?;
        let length = reader.length().await?;
        self.readers.lock().insert(path, reader, generation);
        Ok(length)
    }

    async fn pread(&self, req: PreadRequest, sink: &mut StreamSink) -> Result<(), RpcError> {
        let result = self.pread_pieces(&req, sink).await;
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                let reply = PreadReply {
                    error: Some(error_to_wire(&e)),
                    data: Bytes::new(),
                };
                sink.send(reply.encode_to_vec().into()).await
            }
            Err(e) => Err(e),
        }
    }

    /// Pushes the range in pieces of at most `chunk` bytes; the inner result is the backend's.
    async fn pread_pieces(
        &self,
        req: &PreadRequest,
        sink: &mut StreamSink,
    ) -> Result<FsResult<()>, RpcError> {
        let past_end = |file_len| FsError::ReadPastEnd {
            path: req.path.clone(),
            offset: req.offset,
            len: usize::try_from(req.len).unwrap_or(usize::MAX),
            file_len,
        };
        let reader = match self.reader(&req.path).await {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let Ok(len) = usize::try_from(req.len) else {
            return Ok(reader.length().await.and_then(|l| Err(past_end(l))));
        };
        if len > self.chunk {
            // Check the whole range first, so that a read past the end fails as one.
            let file_len = match reader.length().await {
                Ok(l) => l,
                Err(e) => return Ok(Err(e)),
            };
            match req.offset.checked_add(req.len) {
                Some(end) if end <= file_len => {}
                _ => return Ok(Err(past_end(file_len))),
            }
        }
        let mut done = 0usize;
        loop {
            let n = (len - done).min(self.chunk);
            let data = match reader.pread(req.offset + done as u64, n).await {
                Ok(d) => d,
                // A piece past the end: the file shrank since the check; report the whole range.
                Err(FsError::ReadPastEnd { file_len, .. }) => return Ok(Err(past_end(file_len))),
                Err(e) => return Ok(Err(e)),
            };
            let reply = PreadReply {
                error: None,
                data: data.into(),
            };
            sink.send(reply.encode_to_vec().into()).await?;
            done += n;
            if done >= len {
                return Ok(Ok(()));
            }
        }
    }

    async fn reader_length(&self, path: &str) -> FsResult<u64> {
        self.reader(path).await?.length().await
    }

    async fn remove(&self, path: &str) -> FsResult<()> {
        let r = self.backend.remove(path).await;
        self.readers.lock().invalidate(path, false);
        r
    }

    async fn rmdir(&self, req: RmdirRequest) -> FsResult<()> {
        let r = self.backend.rmdir(&req.path, req.recursive).await;
        self.readers.lock().invalidate(&req.path, true);
        r
    }

    async fn rename(&self, req: RenameRequest) -> FsResult<()> {
        let r = self.backend.rename(&req.from, &req.to).await;
        let mut cache = self.readers.lock();
        cache.invalidate(&req.from, true);
        cache.invalidate(&req.to, true);
        r
    }

    fn keepalive(&self, peer: &PeerInfo) -> u64 {
        let writers = self.writers.lock();
        let mut n = 0;
        for slot in writers.values().filter(|s| s.owner == peer.addr) {
            slot.touch();
            n += 1;
        }
        n
    }
}

#[async_trait]
impl<F: Fs + ?Sized> rpc::Service for BrokerService<F> {
    async fn call(&self, peer: &PeerInfo, method: &str, payload: Bytes) -> Result<Bytes, RpcError> {
        let inner = &*self.inner;
        let reply = match method {
            method::CREATE => {
                let req: CreateRequest = decode(method, payload)?;
                let r = inner.create(peer, req).await;
                CreateReply {
                    error: wire_err(&r),
                    handle: r.unwrap_or(0),
                }
                .encode_to_vec()
            }
            method::APPEND => {
                let req: AppendRequest = decode(method, payload)?;
                let r = inner.append(peer, req).await;
                AppendReply {
                    error: wire_err(&r),
                    position: r.unwrap_or(0),
                }
                .encode_to_vec()
            }
            method::CLOSE => {
                let req: HandleRequest = decode(method, payload)?;
                let r = inner.close(peer, req.handle).await;
                UnitReply {
                    error: wire_err(&r),
                }
                .encode_to_vec()
            }
            method::OPEN | method::READER_LENGTH | method::LENGTH => {
                let req: PathRequest = decode(method, payload)?;
                let r = match method {
                    method::OPEN => inner.open(&req.path).await,
                    method::READER_LENGTH => inner.reader_length(&req.path).await,
                    _ => inner.backend.length(&req.path).await,
                };
                LengthReply {
                    error: wire_err(&r),
                    length: r.unwrap_or(0),
                }
                .encode_to_vec()
            }
            method::REMOVE | method::MKDIRS => {
                let req: PathRequest = decode(method, payload)?;
                let r = if method == method::REMOVE {
                    inner.remove(&req.path).await
                } else {
                    inner.backend.mkdirs(&req.path).await
                };
                UnitReply {
                    error: wire_err(&r),
                }
                .encode_to_vec()
            }
            method::RMDIR => {
                let req: RmdirRequest = decode(method, payload)?;
                let r = inner.rmdir(req).await;
                UnitReply {
                    error: wire_err(&r),
                }
                .encode_to_vec()
            }
            method::RENAME => {
                let req: RenameRequest = decode(method, payload)?;
                let r = inner.rename(req).await;
                UnitReply {
                    error: wire_err(&r),
                }
                .encode_to_vec()
            }
            method::READDIR => {
                let req: PathRequest = decode(method, payload)?;
                let r = inner.backend.readdir(&req.path).await;
                let error = wire_err(&r);
                ReaddirReply {
                    error,
                    entries: r
                        .map(|v| v.into_iter().map(entry_to_wire).collect())
                        .unwrap_or_default(),
                }
                .encode_to_vec()
            }
            method::EXISTS => {
                let req: PathRequest = decode(method, payload)?;
                let r = inner.backend.exists(&req.path).await;
                ExistsReply {
                    error: wire_err(&r),
                    exists: r.unwrap_or(false),
                }
                .encode_to_vec()
            }
            method::KEEPALIVE => KeepAliveReply {
                handles: inner.keepalive(peer),
            }
            .encode_to_vec(),
            method::STATUS => StatusReply {
                backend_url: inner.backend.url(),
                open_writers: inner.writers.lock().len() as u64,
                cached_readers: inner.readers.lock().map.len() as u64,
                chunk_bytes: inner.chunk as u64,
            }
            .encode_to_vec(),
            other => {
                return Err(RpcError::service(
                    ErrorKind::NotFound,
                    format!("{SERVER_NAME} has no method {other:?}"),
                ));
            }
        };
        debug!(peer = %peer.addr, method, "dfs broker: call served");
        Ok(reply.into())
    }

    async fn call_stream(
        &self,
        peer: &PeerInfo,
        method: &str,
        payload: Bytes,
        sink: &mut StreamSink,
    ) -> Result<(), RpcError> {
        match method {
            method::PREAD => {
                let req: PreadRequest = decode(method, payload)?;
                self.inner.pread(req, sink).await
            }
            other => Err(RpcError::service(
                ErrorKind::NotFound,
                format!(
                    "{SERVER_NAME} has no streaming method {other:?} (caller {})",
                    peer.addr
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoReader;

    #[async_trait]
    impl FsReader for NoReader {
        async fn pread(&self, _offset: u64, _len: usize) -> FsResult<Vec<u8>> {
            Ok(Vec::new())
        }
        async fn length(&self) -> FsResult<u64> {
            Ok(0)
        }
        fn path(&self) -> &str {
            ""
        }
    }

    #[test]
    fn reader_cache_is_a_bounded_lru_with_invalidation() {
        let mut c = ReaderCache::new(2);
        let r = || -> Arc<dyn FsReader> { Arc::new(NoReader) };
        c.insert("/a", r(), 0);
        c.insert("/b", r(), 0);
        assert!(c.get("/a").is_some());
        c.insert("/c", r(), 0);
        assert!(c.get("/b").is_none(), "least recently used not evicted");
        assert!(c.get("/a").is_some() && c.get("/c").is_some());
        c.insert("/d/x", r(), 0);
        c.invalidate("/d", true);
        assert!(c.get("/d/x").is_none());
        // A reader opened before an invalidation is not cached after it.
        let generation = c.generation;
        c.invalidate("/e", false);
        c.insert("/e", r(), generation);
        assert!(c.get("/e").is_none());
        assert!(c.map.len() <= 2 && c.map.len() == c.order.len());
    }
}
