//! [`BrokerFs`]: the [`Fs`] trait implemented by calls to a DFS broker.
//!
//! Idempotent calls (open, pread, length, exists, readdir, mkdirs) are retried on transport
//! failures; appends, creates, closes, removes and renames never are, since a lost answer
//! does not say whether the broker acted. A writer whose append failed in transit refuses
//! every later append: how much of it reached the file is unknown. Transport failures come
//! back as [`FsError::Backend`] naming the broker and the operation.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use prost::Message;
use rpc::{Client, ClientOptions, ClusterCredentials, RetryPolicy, RpcError};
use tracing::debug;

use super::messages::*;
use super::{DEFAULT_CHUNK_BYTES, SERVER_NAME, effective_chunk};
use crate::{
    AppendFlag, DirEntry, Fs, FsError, FsReader, FsResult, FsWriter, ReadAhead, ReadAheadBudget,
    ReadAheadOptions, ReadAheadStats,
};

/// Options of a broker client.
#[derive(Debug, Clone)]
pub struct BrokerFsOptions {
    /// Deadline of one call (a pread also gets `pread_bytes_per_sec` time for its data).
    pub call_timeout: Duration,
    /// Bound on setting up the connection.
    pub connect_timeout: Duration,
    /// Retries of idempotent calls.
    pub retry: RetryPolicy,
    /// Appends above this are split into pieces of this size (all but the last with
    /// `AppendFlag::None`, the last with the caller's flag).
    pub chunk_bytes: usize,
    /// Largest rpc message; must match the broker's.
    pub max_message_bytes: usize,
    /// How often the client tells the broker it is alive, so that its idle writers are not
    /// reclaimed; must be well below the broker's `writer_idle_timeout`.
    pub keepalive_interval: Duration,
    /// The slowest transfer rate a pread is given time for, on top of `call_timeout`.
    pub pread_bytes_per_sec: u64,
    /// Each reader's windows of read-ahead ([`FsReader::prefetch`], `crate::read_ahead`).
    pub read_ahead: ReadAheadOptions,
    /// Bytes all the readers of this client may hold in read-ahead windows at once.
    pub read_ahead_budget_bytes: u64,
}

impl Default for BrokerFsOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            max_message_bytes: rpc::frame::DEFAULT_MAX_MESSAGE_BYTES,
            keepalive_interval: Duration::from_secs(15),
            pread_bytes_per_sec: 8 << 20,
            read_ahead: ReadAheadOptions::default(),
            read_ahead_budget_bytes: 64 << 20,
        }
    }
}

struct Conn {
    client: Client,
    url: String,
    options: BrokerFsOptions,
    chunk: usize,
    read_ahead: Arc<ReadAheadBudget>,
}

/// A file system served by a DFS broker. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct BrokerFs {
    conn: Arc<Conn>,
}

impl std::fmt::Debug for BrokerFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BrokerFs({})", self.conn.url)
    }
}

/// Replies that carry an `FsError`.
trait Reply: Message + Default {
    fn take_error(&mut self) -> Option<WireFsError>;
}

macro_rules! replies {
    ($($t:ty),*) => {$(
        impl Reply for $t {
            fn take_error(&mut self) -> Option<WireFsError> {
                self.error.take()
            }
        }
    )*};
}
replies!(
    CreateReply,
    AppendReply,
    UnitReply,
    LengthReply,
    ReaddirReply,
    ExistsReply,
    PreadReply
);

impl BrokerFs {
    /// Connects to the broker at `addr` (certificate name `dfs-broker`) presenting
    /// `credentials`, and checks that it answers.
    pub async fn connect(
        addr: SocketAddr,
        credentials: &ClusterCredentials,
        options: BrokerFsOptions,
    ) -> FsResult<Self> {
        let config = credentials
            .client_config(rpc::ClientOptions::default().idle_timeout)
            .map_err(|e| transport_error(addr, "connect", "", &RpcError::Tls(e)))?;
        Self::connect_with_config(addr, config, options).await
    }

    /// Connects with an explicit quinn client config (tests use one without a certificate).
    pub async fn connect_with_config(
        addr: SocketAddr,
        config: quinn::ClientConfig,
        options: BrokerFsOptions,
    ) -> FsResult<Self> {
        let client_options = ClientOptions {
            max_message_bytes: options.max_message_bytes,
            connect_timeout: options.connect_timeout,
            ..ClientOptions::default()
        };
        let client = Client::connect_with(addr, SERVER_NAME, config, client_options)
            .await
            .map_err(|e| transport_error(addr, "connect", "", &e))?;
        let conn = Arc::new(Conn {
            client,
            url: format!("broker://{addr}"),
            chunk: effective_chunk(options.chunk_bytes, options.max_message_bytes),
            read_ahead: ReadAheadBudget::new(options.read_ahead_budget_bytes),
            options,
        });
        let fs = Self { conn };
        // A refused client (no or foreign certificate) learns it here, not at its first use.
        let status = fs.status().await?;
        debug!(broker = %fs.conn.url, backend = %status.backend_url, "dfs broker client connected");
        tokio::spawn(keepalive(Arc::downgrade(&fs.conn)));
        Ok(fs)
    }

    /// The broker's address.
    pub fn addr(&self) -> SocketAddr {
        self.conn.client.peer()
    }

    /// What this client's readers did with read-ahead hints.
    pub fn read_ahead_stats(&self) -> ReadAheadStats {
        self.conn.read_ahead.stats()
    }

    /// The broker's status: its backend's URL and table sizes.
    pub async fn status(&self) -> FsResult<StatusReply> {
        let payload = self
            .conn
            .client
            .call_idempotent(
                method::STATUS,
                Bytes::new(),
                self.conn.options.call_timeout,
                &self.conn.options.retry,
            )
            .await
            .map_err(|e| self.conn.transport(method::STATUS, "", &e))?;
        StatusReply::decode(payload).map_err(|e| self.conn.undecodable(method::STATUS, "", e))
    }

    /// Closes the connection; calls in flight fail. A later call connects again from the same
    /// local address, so writers this client left open stay its own until the broker's idle
    /// timeout reclaims them.
    pub async fn close(&self) {
        self.conn.client.close().await;
    }
}

/// Refreshes this client's writer handles on the broker until the client is dropped.
async fn keepalive(conn: Weak<Conn>) {
    loop {
        let Some(interval) = conn.upgrade().map(|c| c.options.keepalive_interval) else {
            return;
        };
        tokio::time::sleep(interval).await;
        let Some(c) = conn.upgrade() else {
            return;
        };
        if let Err(e) = c
            .client
            .call(method::KEEPALIVE, Bytes::new(), c.options.call_timeout)
            .await
        {
            debug!(broker = %c.url, error = %e, "dfs broker keep-alive failed");
        }
    }
}

fn transport_error(addr: SocketAddr, op: &'static str, path: &str, e: &RpcError) -> FsError {
    FsError::Backend {
        op,
        path: path.to_string(),
        msg: format!("dfs broker broker://{addr}: {op} failed: {e}"),
    }
}

/// The client-side name of an operation, for errors.
fn op_of(method: &str) -> &'static str {
    match method {
        method::CREATE => "create",
        method::APPEND => "append",
        method::CLOSE => "close",
        method::OPEN => "open",
        method::PREAD => "pread",
        method::READER_LENGTH | method::LENGTH => "length",
        method::REMOVE => "remove",
        method::RMDIR => "rmdir",
        method::RENAME => "rename",
        method::MKDIRS => "mkdirs",
        method::READDIR => "readdir",
        method::EXISTS => "exists",
        _ => "status",
    }
}

impl Conn {
    fn transport(&self, method: &str, path: &str, e: &RpcError) -> FsError {
        transport_error(self.client.peer(), op_of(method), path, e)
    }

    fn undecodable(&self, method: &str, path: &str, e: prost::DecodeError) -> FsError {
        FsError::Backend {
            op: op_of(method),
            path: path.to_string(),
            msg: format!("dfs broker {}: undecodable {method} reply: {e}", self.url),
        }
    }

    /// One unary call, its reply's embedded error turned into `Err`. `path` names the file in
    /// errors that the broker could not name it in.
    async fn call<Req: Message, Resp: Reply>(
        &self,
        method: &'static str,
        path: &str,
        req: &Req,
        idempotent: bool,
    ) -> FsResult<Resp> {
        self.call_split(method, path, req, idempotent).await?
    }

    /// Like [`Conn::call`], but tells failures in transit (the outer `Err`: the broker may or
    /// may not have acted) from the broker's answers (the inner result).
    async fn call_split<Req: Message, Resp: Reply>(
        &self,
        method: &'static str,
        path: &str,
        req: &Req,
        idempotent: bool,
    ) -> Result<FsResult<Resp>, FsError> {
        let payload: Bytes = req.encode_to_vec().into();
        let deadline = self.options.call_timeout;
        let result = if idempotent {
            self.client
                .call_idempotent(method, payload, deadline, &self.options.retry)
                .await
        } else {
            self.client.call(method, payload, deadline).await
        };
        let payload = result.map_err(|e| self.transport(method, path, &e))?;
        let mut reply = Resp::decode(payload).map_err(|e| self.undecodable(method, path, e))?;
        Ok(match reply.take_error() {
            None => Ok(reply),
            Some(mut w) => {
                if w.path.is_empty() {
                    w.path = path.to_string();
                }
                Err(error_from_wire(w, op_of(method)))
            }
        })
    }

    /// One attempt at a pread: `Err` for transport failures (retryable), `Ok(Err)` for the
    /// backend's answer.
    async fn pread_once(
        &self,
        path: &str,
        offset: u64,
        len: usize,
    ) -> Result<FsResult<Vec<u8>>, RpcError> {
        let req = PreadRequest {
            path: path.to_string(),
            offset,
            len: len as u64,
        };
        let transfer =
            Duration::from_secs_f64(len as f64 / self.options.pread_bytes_per_sec.max(1) as f64);
        let deadline = self.options.call_timeout.saturating_add(transfer);
        let mut stream = self
            .client
            .call_stream(method::PREAD, req.encode_to_vec().into(), deadline)
            .await?;
        let mut out: Vec<u8> = Vec::new();
        let mut first = true;
        while let Some(payload) = stream.next().await? {
            let mut reply = match PreadReply::decode(payload) {
                Ok(r) => r,
                Err(e) => return Ok(Err(self.undecodable(method::PREAD, path, e))),
            };
            if let Some(w) = reply.take_error() {
                return Ok(Err(error_from_wire(w, "pread")));
            }
            if first {
                // Data arriving means the broker checked the range: now it is safe to
                // allocate all of it (never before: `len` may be garbage from a corrupt file).
                out.reserve_exact(len);
                first = false;
            }
            if out.len() + reply.data.len() > len {
                break;
            }
            out.extend_from_slice(&reply.data);
        }
        if out.len() != len {
            return Ok(Err(FsError::Backend {
                op: "pread",
                path: path.to_string(),
                msg: format!(
                    "dfs broker {}: asked for {len} bytes at {offset}, got {}",
                    self.url,
                    out.len()
                ),
            }));
        }
        Ok(Ok(out))
    }
}

impl BrokerFs {
    /// [`Fs::create`], answering the concrete writer (whose handle tests and tools can see).
    pub async fn create_writer(&self, path: &str, overwrite: bool) -> FsResult<BrokerWriter> {
        let req = CreateRequest {
            path: path.to_string(),
            overwrite,
        };
        let reply: CreateReply = self.conn.call(method::CREATE, path, &req, false).await?;
        Ok(BrokerWriter {
            conn: self.conn.clone(),
            handle: reply.handle,
            path: path.to_string(),
            position: 0,
            closed: false,
            failed: None,
        })
    }
}

#[async_trait]
impl Fs for BrokerFs {
    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        Ok(Box::new(self.create_writer(path, overwrite).await?))
    }

    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        let req = PathRequest {
            path: path.to_string(),
        };
        let _: LengthReply = self.conn.call(method::OPEN, path, &req, true).await?;
        Ok(Arc::new(BrokerReader {
            conn: self.conn.clone(),
            path: path.to_string(),
            ahead: ReadAhead::new(self.conn.options.read_ahead, self.conn.read_ahead.clone()),
        }))
    }

    async fn length(&self, path: &str) -> FsResult<u64> {
        let req = PathRequest {
            path: path.to_string(),
        };
        let reply: LengthReply = self.conn.call(method::LENGTH, path, &req, true).await?;
        Ok(reply.length)
    }

    async fn remove(&self, path: &str) -> FsResult<()> {
        let req = PathRequest {
            path: path.to_string(),
        };
        let _: UnitReply = self.conn.call(method::REMOVE, path, &req, false).await?;
        Ok(())
    }

    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        let req = RmdirRequest {
            path: path.to_string(),
            recursive,
        };
        let _: UnitReply = self.conn.call(method::RMDIR, path, &req, false).await?;
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        let req = RenameRequest {
            from: from.to_string(),
            to: to.to_string(),
        };
        let _: UnitReply = self.conn.call(method::RENAME, from, &req, false).await?;
        Ok(())
    }

    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        let req = PathRequest {
            path: path.to_string(),
        };
        let _: UnitReply = self.conn.call(method::MKDIRS, path, &req, true).await?;
        Ok(())
    }

    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        let req = PathRequest {
            path: path.to_string(),
        };
        let reply: ReaddirReply = self.conn.call(method::READDIR, path, &req, true).await?;
        Ok(reply.entries.into_iter().map(entry_from_wire).collect())
    }

    async fn exists(&self, path: &str) -> FsResult<bool> {
        let req = PathRequest {
            path: path.to_string(),
        };
        let reply: ExistsReply = self.conn.call(method::EXISTS, path, &req, true).await?;
        Ok(reply.exists)
    }

    fn url(&self) -> String {
        self.conn.url.clone()
    }
}

/// A writer open on the broker.
pub struct BrokerWriter {
    conn: Arc<Conn>,
    handle: u64,
    path: String,
    position: u64,
    closed: bool,
    /// Set when an append failed part-way or in transit: what reached the file is unknown.
    failed: Option<String>,
}

impl BrokerWriter {
    /// The broker's handle of this writer.
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// One append call: the outer `Err` is a failure in transit, the inner the broker's answer.
    async fn append_piece(
        &mut self,
        data: &[u8],
        flag: AppendFlag,
    ) -> Result<FsResult<()>, FsError> {
        let req = AppendRequest {
            handle: self.handle,
            data: Bytes::copy_from_slice(data),
            flag: flag_to_wire(flag),
        };
        let reply: FsResult<AppendReply> = self
            .conn
            .call_split(method::APPEND, &self.path, &req, false)
            .await?;
        Ok(reply.map(|_| self.position += data.len() as u64))
    }
}

#[async_trait]
impl FsWriter for BrokerWriter {
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        if self.closed {
            return Err(FsError::Closed {
                op: "append",
                path: self.path.clone(),
            });
        }
        if let Some(msg) = &self.failed {
            return Err(FsError::Backend {
                op: "append",
                path: self.path.clone(),
                msg: format!("an earlier append failed: {msg}"),
            });
        }
        let chunk = self.conn.chunk;
        let pieces: Vec<&[u8]> = if data.is_empty() {
            vec![data]
        } else {
            data.chunks(chunk).collect()
        };
        let count = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let piece_flag = if i + 1 == count {
                flag
            } else {
                AppendFlag::None
            };
            let failure = match self.append_piece(piece, piece_flag).await {
                Ok(Ok(())) => continue,
                // A backend refusal of the first piece changed nothing; the writer stays usable
                // as far as the backend allows.
                Ok(Err(e)) if i == 0 => return Err(e),
                Ok(Err(e)) | Err(e) => e,
            };
            // A lost answer, or a failure after some pieces landed: the file's end is unknown.
            self.failed = Some(failure.to_string());
            return Err(failure);
        }
        Ok(())
    }

    fn position(&self) -> u64 {
        self.position
    }

    async fn close(&mut self) -> FsResult<()> {
        if self.closed {
            return Ok(());
        }
        // A failed close still closes: retrying cannot tell what reached the file.
        self.closed = true;
        let req = HandleRequest {
            handle: self.handle,
        };
        let _: UnitReply = self
            .conn
            .call(method::CLOSE, &self.path, &req, false)
            .await?;
        Ok(())
    }

    fn path(&self) -> &str {
        &self.path
    }
}

/// A file opened for reads through the broker; reads name the path, so it holds no state on
/// the broker.
pub struct BrokerReader {
    conn: Arc<Conn>,
    path: String,
    ahead: ReadAhead,
}

impl Conn {
    /// A pread, retried on transport failures.
    async fn pread(&self, path: &str, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        let attempt = || self.pread_once(path, offset, len);
        match rpc::retry(&self.options.retry, attempt).await {
            Ok(result) => result,
            Err(e) => Err(self.transport(method::PREAD, path, &e)),
        }
    }
}

#[async_trait]
impl FsReader for BrokerReader {
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        if let Some(d) = self.ahead.read(offset, len).await {
            return Ok(d);
        }
        self.conn.pread(&self.path, offset, len).await
    }

    /// Reads the range in the background into a window a later pread takes it from
    /// (`crate::read_ahead`). The reader does not know the file's length: a window past the
    /// end fails and answers nothing.
    fn prefetch(&self, offset: u64, len: usize) {
        let conn = self.conn.clone();
        let path = self.path.clone();
        self.ahead
            .start(offset, len, u64::MAX, move |offset, len| async move {
                conn.pread(&path, offset, len).await
            });
    }

    async fn length(&self) -> FsResult<u64> {
        let req = PathRequest {
            path: self.path.clone(),
        };
        let reply: LengthReply = self
            .conn
            .call(method::READER_LENGTH, &self.path, &req, true)
            .await?;
        Ok(reply.length)
    }

    fn path(&self) -> &str {
        &self.path
    }
}
