//! The file-system abstraction every ht server writes through (DESIGN.md section 6).
//!
//! [`Fs`] is an async trait with the operations Hypertable's FsBroker offered: create, open,
//! append (with a durability flag), pread, length, close, remove, rename, mkdirs, readdir, exists.
//! Backends: [`local::LocalFs`]; [`fault::FaultFs`] wraps any backend to inject failures in tests.
//! [`BlockingFs`] lets synchronous engine code (which runs on blocking threads) call any backend.
//! [`ReadAhead`] is how a networked backend answers [`FsReader::prefetch`].
//! Every backend must pass the suite in `conformance` (feature `conformance`).

pub mod broker;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod fault;
pub mod local;
pub mod objstore;
pub mod read_ahead;

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use common::ErrorKind;

pub use fault::{FaultAction, FaultFs, FaultOp, FaultRule};
pub use local::LocalFs;
pub use read_ahead::{ReadAhead, ReadAheadBudget, ReadAheadOptions, ReadAheadStats};

/// What an append must achieve before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AppendFlag {
    /// Buffered by the writer; may be lost if the process dies.
    None,
    /// Handed to the storage service (the OS page cache locally, all replicas' memory on a
    /// distributed backend): survives the death of the writing process.
    Flush,
    /// On stable storage (fsync locally, on every replica's disk on a distributed backend).
    Sync,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
    /// File length in bytes (0 for directories).
    pub length: u64,
}

/// A file-system error, naming the operation and path.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{op} {path}: no such file or directory")]
    NotFound { op: &'static str, path: String },
    #[error("{op} {path}: already exists")]
    AlreadyExists { op: &'static str, path: String },
    #[error("{op} {path}: directory not empty")]
    DirectoryNotEmpty { op: &'static str, path: String },
    #[error("{op} {path}: is a directory")]
    IsADirectory { op: &'static str, path: String },
    #[error("{op} {path}: not a directory")]
    NotADirectory { op: &'static str, path: String },
    #[error(
        "pread {path}: {len} bytes at offset {offset} is past the end of the file ({file_len} bytes)"
    )]
    ReadPastEnd {
        path: String,
        offset: u64,
        len: usize,
        file_len: u64,
    },
    #[error("{op} {path}: invalid path: {why}")]
    InvalidPath {
        op: &'static str,
        path: String,
        why: &'static str,
    },
    #[error("{op} {path}: file is closed")]
    Closed { op: &'static str, path: String },
    #[error("{op} {path}: injected fault")]
    Injected { op: &'static str, path: String },
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{op} {path}: {msg}")]
    Backend {
        op: &'static str,
        path: String,
        msg: String,
    },
}

impl FsError {
    /// The coarse kind for callers deciding what to do.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Self::DirectoryNotEmpty { .. }
            | Self::IsADirectory { .. }
            | Self::NotADirectory { .. }
            | Self::InvalidPath { .. }
            | Self::ReadPastEnd { .. } => ErrorKind::InvalidInput,
            Self::Closed { .. }
            | Self::Injected { .. }
            | Self::Io { .. }
            | Self::Backend { .. } => ErrorKind::Internal,
        }
    }

    /// True if this is a "no such file" error.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

pub type FsResult<T> = Result<T, FsError>;

/// A file system. Paths are absolute (`/ht/tables/1/default/r1/cs0`), `/`-separated, relative to
/// the backend's root.
#[async_trait]
pub trait Fs: Send + Sync + 'static {
    /// Creates a file and opens it for appending. An existing file is an error unless `overwrite`.
    /// Parent directories are created as needed.
    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>>;
    /// Opens a file for positional reads.
    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>>;
    /// The length of a file.
    async fn length(&self, path: &str) -> FsResult<u64>;
    /// Removes a file.
    async fn remove(&self, path: &str) -> FsResult<()>;
    /// Removes a directory; with `recursive`, everything below it, else it must be empty.
    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()>;
    /// Renames a file; the target must not exist.
    async fn rename(&self, from: &str, to: &str) -> FsResult<()>;
    /// Creates a directory and its parents; succeeds if it exists.
    async fn mkdirs(&self, path: &str) -> FsResult<()>;
    /// Lists a directory, sorted by name.
    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>>;
    /// True if a file or directory exists at `path`.
    async fn exists(&self, path: &str) -> FsResult<bool>;
    /// The URL naming this file system (`file:///data`, ...).
    fn url(&self) -> String;
    /// Takes an exclusive lock named by the file `path` (created if missing), held until the
    /// returned guard is dropped or the process dies, so that two processes never write one
    /// store. A lock another holder has is [`FsError::Backend`] saying so. `Ok(None)`: this
    /// backend has no locks (the object store, chunkfs, the broker: in a cluster, Hyperspace
    /// locks keep writers apart).
    fn lock_exclusive(&self, path: &str) -> FsResult<Option<FsLock>> {
        let _ = path;
        Ok(None)
    }
}

/// A lock taken with [`Fs::lock_exclusive`]; dropping it releases the lock.
pub struct FsLock(#[expect(dead_code, reason = "held only to be dropped")] Box<dyn Send + Sync>);

impl FsLock {
    /// Wraps whatever keeps the lock held.
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        FsLock(Box::new(held))
    }
}

impl std::fmt::Debug for FsLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FsLock")
    }
}

/// A file open for appending. Dropping it without `close` loses what `append(None)` buffered.
#[async_trait]
pub trait FsWriter: Send + Sync {
    /// Appends `data`, then makes everything appended so far as durable as `flag` says.
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()>;
    /// The file length including buffered appends.
    fn position(&self) -> u64;
    /// Flushes buffered data (syncing it) and closes the file.
    async fn close(&mut self) -> FsResult<()>;
    /// The path this writer appends to.
    fn path(&self) -> &str;
}

/// A file open for positional reads; may be shared by many readers.
#[async_trait]
pub trait FsReader: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; reading past the end is [`FsError::ReadPastEnd`].
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>>;
    /// The current length of the file (it may grow while a writer appends).
    async fn length(&self) -> FsResult<u64>;
    /// The path this reader reads.
    fn path(&self) -> &str;
    /// A hint that `len` bytes at `offset` are about to be read: a backend that can fetch
    /// them in the background (the local file system, into the page cache) starts to, and
    /// returns at once; the others ignore it. Never an error: a later read fails on its own.
    fn prefetch(&self, offset: u64, len: usize) {
        let _ = (offset, len);
    }
}

/// Opens the backend a URL names: `file:///abs/path` is a [`LocalFs`] rooted there;
/// `memory://`, `s3://bucket/prefix` (S3 settings from the `AWS_*` environment variables),
/// `gs://`, `az://` and the other object_store schemes are an [`objstore::ObjectStoreFs`].
/// Every server and the broker accept the same URLs; `broker://` needs credentials
/// ([`open_url`]).
pub fn open_backend(url: &str) -> FsResult<Arc<dyn Fs>> {
    let bad = |why: String| FsError::Backend {
        op: "open_backend",
        path: url.to_string(),
        msg: why,
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("not a URL (expected scheme://...)".into()));
    };
    match scheme {
        "file" => {
            if !rest.starts_with('/') {
                return Err(bad(
                    "a file:// URL needs an absolute path (file:///abs/path)".into(),
                ));
            }
            Ok(Arc::new(LocalFs::new(rest)?))
        }
        "memory" | "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss" | "http"
        | "https" => Ok(Arc::new(objstore::ObjectStoreFs::from_url(
            url,
            objstore::ObjectStoreOptions::default(),
        )?)),
        "broker" => Err(bad(
            "a broker:// URL needs cluster credentials (use open_url)".into(),
        )),
        other => Err(bad(format!(
            "unknown file system scheme {other:?} (supported: file, broker, memory, s3, gs, az)"
        ))),
    }
}

/// Opens the file system a URL names, as [`open_backend`] does, plus `broker://host:port`: a
/// DFS broker reached with `credentials` (a node certificate of the cluster).
pub async fn open_url(
    url: &str,
    credentials: Option<&rpc::ClusterCredentials>,
) -> FsResult<Arc<dyn Fs>> {
    let Some(addr) = url.strip_prefix("broker://") else {
        return open_backend(url);
    };
    let bad = |why: String| FsError::Backend {
        op: "open_url",
        path: url.to_string(),
        msg: why,
    };
    let addr: std::net::SocketAddr = addr
        .trim_end_matches('/')
        .parse()
        .map_err(|e| bad(format!("bad broker address: {e}")))?;
    let credentials =
        credentials.ok_or_else(|| bad("a broker:// URL needs cluster credentials".into()))?;
    let fs =
        broker::BrokerFs::connect(addr, credentials, broker::BrokerFsOptions::default()).await?;
    Ok(Arc::new(fs))
}

/// Checks that `path` is absolute and has no empty, `.` or `..` components.
pub fn check_path(op: &'static str, path: &str) -> FsResult<()> {
    let bad = |why| {
        Err(FsError::InvalidPath {
            op,
            path: path.to_string(),
            why,
        })
    };
    if !path.starts_with('/') {
        return bad("not absolute");
    }
    if path.len() > 1 {
        for c in path[1..].split('/') {
            if c.is_empty() || c == "." || c == ".." {
                return bad("empty, '.' or '..' component");
            }
        }
    }
    Ok(())
}

/// Joins a directory path and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Synchronous access to an [`Fs`] for engine code running on blocking (non-runtime) threads.
///
/// Every call runs the backend's future to completion on the given runtime handle. Calling it
/// from inside an async task panics (tokio forbids `block_on` there): engine entry points move
/// work onto blocking threads first.
#[derive(Clone)]
pub struct BlockingFs {
    fs: Arc<dyn Fs>,
    handle: tokio::runtime::Handle,
}

impl std::fmt::Debug for BlockingFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockingFs({})", self.fs.url())
    }
}

impl BlockingFs {
    pub fn new(fs: Arc<dyn Fs>, handle: tokio::runtime::Handle) -> Self {
        Self { fs, handle }
    }

    /// The wrapped async file system.
    pub fn inner(&self) -> &Arc<dyn Fs> {
        &self.fs
    }

    /// The runtime handle calls run on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Runs any future to completion on the runtime.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.handle.block_on(f)
    }

    pub fn create(&self, path: &str, overwrite: bool) -> FsResult<BlockingWriter> {
        let w = self.block_on(self.fs.create(path, overwrite))?;
        Ok(BlockingWriter {
            inner: w,
            handle: self.handle.clone(),
        })
    }

    pub fn open(&self, path: &str) -> FsResult<BlockingReader> {
        let r = self.block_on(self.fs.open(path))?;
        Ok(BlockingReader {
            inner: r,
            handle: self.handle.clone(),
        })
    }

    pub fn length(&self, path: &str) -> FsResult<u64> {
        self.block_on(self.fs.length(path))
    }

    pub fn remove(&self, path: &str) -> FsResult<()> {
        self.block_on(self.fs.remove(path))
    }

    pub fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        self.block_on(self.fs.rmdir(path, recursive))
    }

    pub fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        self.block_on(self.fs.rename(from, to))
    }

    pub fn mkdirs(&self, path: &str) -> FsResult<()> {
        self.block_on(self.fs.mkdirs(path))
    }

    pub fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        self.block_on(self.fs.readdir(path))
    }

    pub fn exists(&self, path: &str) -> FsResult<bool> {
        self.block_on(self.fs.exists(path))
    }

    pub fn lock_exclusive(&self, path: &str) -> FsResult<Option<FsLock>> {
        self.fs.lock_exclusive(path)
    }
}

/// Blocking wrapper of an [`FsWriter`].
pub struct BlockingWriter {
    inner: Box<dyn FsWriter>,
    handle: tokio::runtime::Handle,
}

impl BlockingWriter {
    pub fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        self.handle.block_on(self.inner.append(data, flag))
    }

    pub fn position(&self) -> u64 {
        self.inner.position()
    }

    pub fn close(&mut self) -> FsResult<()> {
        self.handle.block_on(self.inner.close())
    }

    pub fn path(&self) -> &str {
        self.inner.path()
    }
}

/// Blocking wrapper of an [`FsReader`]; cheap to clone.
#[derive(Clone)]
pub struct BlockingReader {
    inner: Arc<dyn FsReader>,
    handle: tokio::runtime::Handle,
}

impl BlockingReader {
    pub fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        self.handle.block_on(self.inner.pread(offset, len))
    }

    pub fn length(&self) -> FsResult<u64> {
        self.handle.block_on(self.inner.length())
    }

    /// See [`FsReader::prefetch`].
    pub fn prefetch(&self, offset: u64, len: usize) {
        self.inner.prefetch(offset, len)
    }

    pub fn path(&self) -> &str {
        self.inner.path()
    }
}
