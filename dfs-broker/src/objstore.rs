//! The `objstore` backend: an ht file system in any object store the `object_store` crate
//! reaches (`s3://`, `file://`, `memory://`, and the other schemes of `parse_url_opts`).
//!
//! Objects are immutable, so an appendable file is a series of numbered **segment** objects
//! plus a **manifest** object listing them (docs/formats/objstore.md):
//!
//! ```text
//! <prefix>/files/<path>          manifest of the file at <path> (components escaped, see below)
//! <prefix>/files/<dir>/.dir      marker of a directory that would otherwise have no objects
//! <prefix>/segments/<id>/<n>     segment n (decimal, from 0) of the file with id <id>
//! ```
//!
//! `append(None)` buffers up to [`ObjectStoreOptions::segment_bytes`], then writes a segment;
//! `append(Flush)` and `append(Sync)` both write the buffer as the next segment and then the
//! updated manifest: the store has nothing weaker than durable, so flush is as strong as sync.
//! A reader maps `pread` ranges onto segments with ranged GETs and re-reads the manifest to see
//! a writer's growth. `rename` copies the manifest only (segments are named by the file id).
//! Directories are the prefixes of objects, plus a `.dir` marker for directories that would
//! otherwise be empty. A user path component starting with `.` is stored with one more `.`, so
//! no file or directory can be named like the marker.

mod file;
mod manifest;
pub mod s3_server;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::{DirEntry, Fs, FsError, FsReader, FsResult, FsWriter, check_path};
use file::{ObjReader, ObjWriter};
use manifest::Manifest;

/// The length of the file a manifest object's bytes describe, decoded and checked as a read
/// does; for the fuzz targets (`fuzz/`).
pub fn manifest_file_length(data: &[u8]) -> FsResult<u64> {
    Ok(Manifest::decode("decode", "/", "manifest", data)?.len())
}

/// The pieces `(segment, offset in it, length)` a read of `len` bytes at `offset` maps to in the
/// file a manifest object's bytes describe; for the fuzz targets (`fuzz/`).
pub fn manifest_map_range(data: &[u8], offset: u64, len: u64) -> FsResult<Vec<(usize, u64, u64)>> {
    let m = Manifest::decode("decode", "/", "manifest", data)?;
    Ok(m.map_range(offset, len)
        .into_iter()
        .map(|p| (p.segment, p.offset, p.len))
        .collect())
}

/// Default size of the buffer of `append(None)` data, and so of a segment written without a
/// flush: 8 MiB.
pub const DEFAULT_SEGMENT_BYTES: usize = 8 << 20;

/// Name of the marker object of an otherwise empty directory.
const DIR_MARKER: &str = ".dir";
/// How many object requests one file-system operation keeps in flight.
const CONCURRENT_REQUESTS: usize = 16;

/// Options of [`ObjectStoreFs::from_url`].
///
/// For `s3://` URLs the standard `AWS_*` environment variables are read first (as
/// `AmazonS3Builder::from_env` does), then `config`, then the explicit fields, each overriding
/// the one before. For other schemes `config` goes to `object_store::parse_url_opts`.
#[derive(Debug, Clone)]
pub struct ObjectStoreOptions {
    /// Largest buffer of `append(None)` data; past it, a writer writes a segment.
    pub segment_bytes: usize,
    /// S3: the endpoint URL (`http://127.0.0.1:9000` for a local S3-compatible server).
    pub endpoint: Option<String>,
    /// S3: the region.
    pub region: Option<String>,
    /// S3: the access key id.
    pub access_key_id: Option<String>,
    /// S3: the secret access key.
    pub secret_access_key: Option<String>,
    /// S3: allow plain-HTTP endpoints (a loopback test server).
    pub allow_http: Option<bool>,
    /// Further `object_store` configuration keys and values (`aws_conditional_put`, ...).
    pub config: Vec<(String, String)>,
    /// Each reader's windows of read-ahead ([`crate::FsReader::prefetch`],
    /// `crate::read_ahead`).
    pub read_ahead: crate::ReadAheadOptions,
    /// Bytes all the readers of this file system may hold in read-ahead windows at once.
    pub read_ahead_budget_bytes: u64,
}

impl Default for ObjectStoreOptions {
    fn default() -> Self {
        Self {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            allow_http: None,
            config: Vec::new(),
            read_ahead: crate::ReadAheadOptions::default(),
            read_ahead_budget_bytes: 64 << 20,
        }
    }
}

/// An object store used as an ht file system.
#[derive(Clone)]
pub struct ObjectStoreFs {
    inner: Arc<Inner>,
    url: String,
}

impl std::fmt::Debug for ObjectStoreFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectStoreFs({})", self.url)
    }
}

/// What files and the file system share: the store and the layout of keys in it.
pub(crate) struct Inner {
    store: Arc<dyn ObjectStore>,
    /// `<prefix>/files`
    files: Path,
    /// `<prefix>/segments`
    segments: Path,
    segment_bytes: usize,
    /// Cleared when the store answers `PutMode::Create` with "not implemented" (S3 without
    /// conditional puts): existence is then checked with a HEAD before an unconditional put.
    create_mode: AtomicBool,
    read_ahead: crate::ReadAheadOptions,
    read_ahead_budget: Arc<crate::ReadAheadBudget>,
}

fn backend(op: &'static str, path: &str, msg: impl std::fmt::Display) -> FsError {
    FsError::Backend {
        op,
        path: path.to_string(),
        msg: msg.to_string(),
    }
}

/// Maps a store error to the `FsError` of the same kind.
pub(crate) fn store_err(op: &'static str, path: &str, e: object_store::Error) -> FsError {
    match e {
        object_store::Error::NotFound { .. } => FsError::NotFound {
            op,
            path: path.to_string(),
        },
        object_store::Error::AlreadyExists { .. } => FsError::AlreadyExists {
            op,
            path: path.to_string(),
        },
        e => backend(op, path, e),
    }
}

/// The stored name of a user path component: one more leading `.` if it starts with `.`.
fn escape(component: &str) -> String {
    if component.starts_with('.') {
        format!(".{component}")
    } else {
        component.to_string()
    }
}

/// The user name of a stored (percent-encoded) path part; `None` for the directory marker and
/// names no user component maps to.
fn unescape(part: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(part)
        .decode_utf8()
        .ok()?
        .into_owned();
    if decoded == DIR_MARKER {
        None
    } else if let Some(rest) = decoded.strip_prefix('.') {
        rest.starts_with('.').then(|| rest.to_string())
    } else {
        Some(decoded)
    }
}

/// The parent directory of a checked path other than `/`.
fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The proper ancestors of a checked path, excluding `/`: `/a/b/c` gives `/a`, `/a/b`.
fn ancestors(path: &str) -> Vec<&str> {
    path.match_indices('/')
        .skip(1)
        .map(|(i, _)| &path[..i])
        .collect()
}

impl Inner {
    /// The key of the manifest of `path`, also the prefix of everything below it if it is a
    /// directory (`<prefix>/files` for `/`).
    fn key(&self, path: &str) -> Path {
        let mut key = self.files.clone();
        for c in path.split('/').filter(|c| !c.is_empty()) {
            key = key.join(escape(c));
        }
        key
    }

    fn marker(&self, dir: &str) -> Path {
        self.key(dir).join(DIR_MARKER)
    }

    pub(crate) fn segment_prefix(&self, id_hex: &str) -> Path {
        self.segments.clone().join(id_hex)
    }

    pub(crate) fn segment_key(&self, id_hex: &str, n: usize) -> Path {
        self.segment_prefix(id_hex).join(n.to_string())
    }

    pub(crate) fn store(&self) -> &dyn ObjectStore {
        &*self.store
    }

    pub(crate) fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    /// The manifest object of `path` as stored, or `None` if there is none.
    async fn manifest_bytes(&self, op: &'static str, path: &str) -> FsResult<Option<Bytes>> {
        let key = self.key(path);
        let res = match self.store.get(&key).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_err(op, path, e)),
        };
        if res.meta.size > manifest::MAX_MANIFEST_BYTES {
            return Err(backend(
                op,
                path,
                format!(
                    "corrupt manifest object {key}: {} bytes is too large",
                    res.meta.size
                ),
            ));
        }
        match res.bytes().await {
            Ok(b) => Ok(Some(b)),
            // Removed between the response headers and the body.
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(op, path, e)),
        }
    }

    /// The manifest of `path`, or `None` if there is none.
    pub(crate) async fn manifest(
        &self,
        op: &'static str,
        path: &str,
    ) -> FsResult<Option<Manifest>> {
        match self.manifest_bytes(op, path).await? {
            Some(b) => Manifest::decode(op, path, self.key(path).as_ref(), &b).map(Some),
            None => Ok(None),
        }
    }

    /// The manifest of a file that must exist: `NotFound`, or `IsADirectory` for a directory.
    pub(crate) async fn existing_manifest(
        &self,
        op: &'static str,
        path: &str,
    ) -> FsResult<Manifest> {
        match self.manifest(op, path).await? {
            Some(m) => Ok(m),
            None => Err(self.missing_file(op, path).await),
        }
    }

    /// The error for a path that has no manifest.
    async fn missing_file(&self, op: &'static str, path: &str) -> FsError {
        match self.is_dir(op, path).await {
            Ok(true) => FsError::IsADirectory {
                op,
                path: path.to_string(),
            },
            Ok(false) => FsError::NotFound {
                op,
                path: path.to_string(),
            },
            Err(e) => e,
        }
    }

    /// True if a file (manifest) exists at `path`.
    async fn is_file(&self, op: &'static str, path: &str) -> FsResult<bool> {
        if path == "/" {
            return Ok(false);
        }
        match self.store.head(&self.key(path)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(store_err(op, path, e)),
        }
    }

    /// True if a directory exists at `path`: the root, or any object below it.
    async fn is_dir(&self, op: &'static str, path: &str) -> FsResult<bool> {
        if path == "/" {
            return Ok(true);
        }
        let prefix = self.key(path);
        let below = prefix.clone();
        let first = self
            .store
            .list(Some(&prefix))
            .try_filter(move |m| futures_util::future::ready(m.location != below))
            .try_next()
            .await
            .map_err(|e| store_err(op, path, e))?;
        Ok(first.is_some())
    }

    /// Fails with `NotADirectory` if any proper ancestor of `path` is a file.
    async fn check_ancestors(&self, op: &'static str, path: &str) -> FsResult<()> {
        let found: Vec<(&str, bool)> = futures_util::future::try_join_all(
            ancestors(path)
                .into_iter()
                .map(|a| async move { self.is_file(op, a).await.map(|f| (a, f)) }),
        )
        .await?;
        match found.into_iter().find(|(_, is_file)| *is_file) {
            Some((a, _)) => Err(FsError::NotADirectory {
                op,
                path: a.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Writes the marker of directory `dir` (nothing for `/`), so that it outlives its last
    /// entry.
    async fn keep_dir(&self, op: &'static str, dir: &str) -> FsResult<()> {
        if dir == "/" {
            return Ok(());
        }
        self.store
            .put(&self.marker(dir), PutPayload::new())
            .await
            .map(|_| ())
            .map_err(|e| store_err(op, dir, e))
    }

    /// Puts `data` at `key` unless an object is there (`AlreadyExists`, naming `path`).
    async fn put_new(&self, op: &'static str, path: &str, key: &Path, data: Bytes) -> FsResult<()> {
        if self.create_mode.load(Ordering::Relaxed) {
            let opts = PutOptions::from(PutMode::Create);
            match self.store.put_opts(key, data.clone().into(), opts).await {
                Ok(_) => return Ok(()),
                Err(object_store::Error::NotImplemented { .. })
                | Err(object_store::Error::NotSupported { .. }) => {
                    self.create_mode.store(false, Ordering::Relaxed);
                }
                Err(e) => return Err(store_err(op, path, e)),
            }
        }
        // No conditional put: check, then put (a race with another creator is not detected).
        if self.is_file(op, path).await? {
            return Err(FsError::AlreadyExists {
                op,
                path: path.to_string(),
            });
        }
        self.store
            .put(key, data.into())
            .await
            .map(|_| ())
            .map_err(|e| store_err(op, path, e))
    }

    /// Deletes objects, ignoring ones already gone.
    async fn delete_all(&self, op: &'static str, path: &str, keys: Vec<Path>) -> FsResult<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let locations = stream::iter(keys.into_iter().map(Ok)).boxed();
        let mut results = self.store.delete_stream(locations);
        while let Some(r) = results.next().await {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(store_err(op, path, e)),
            }
        }
        Ok(())
    }

    /// Deletes every object below `prefix`.
    async fn delete_prefix(&self, op: &'static str, path: &str, prefix: &Path) -> FsResult<()> {
        let keys: Vec<Path> = self
            .store
            .list(Some(prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| store_err(op, path, e))?;
        self.delete_all(op, path, keys).await
    }

    /// Deletes the segments of a file.
    pub(crate) async fn delete_segments(
        &self,
        op: &'static str,
        path: &str,
        m: &Manifest,
    ) -> FsResult<()> {
        self.delete_prefix(op, path, &self.segment_prefix(&m.id_hex()))
            .await
    }
}

impl ObjectStoreFs {
    /// A file system in the object store named by `url`: `memory://`, `file:///abs/dir`,
    /// `s3://bucket/prefix`, or any other URL `object_store::parse_url_opts` understands. The
    /// path of the URL is the prefix of every key. A `file://` directory is created if missing.
    pub fn from_url(url: &str, options: ObjectStoreOptions) -> FsResult<Self> {
        let op = "open file system";
        let parsed = url::Url::parse(url).map_err(|e| backend(op, url, e))?;
        let (store, prefix): (Arc<dyn ObjectStore>, Path) = match parsed.scheme() {
            "memory" => {
                let prefix = Path::from_url_path(parsed.path()).map_err(|e| backend(op, url, e))?;
                (Arc::new(object_store::memory::InMemory::new()), prefix)
            }
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| backend(op, url, "not an absolute local path"))?;
                std::fs::create_dir_all(&dir).map_err(|e| FsError::Io {
                    op,
                    path: url.to_string(),
                    source: e,
                })?;
                // Removing empty directories keeps `readdir` from listing what is gone; fsync
                // makes a put as durable as an S3 put.
                let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| backend(op, url, e))?
                    .with_automatic_cleanup(true)
                    .with_fsync(true);
                (Arc::new(store), Path::default())
            }
            "s3" | "s3a" => {
                let mut b = object_store::aws::AmazonS3Builder::from_env().with_url(url);
                for (k, v) in &options.config {
                    let key = k
                        .to_ascii_lowercase()
                        .parse()
                        .map_err(|e| backend(op, url, e))?;
                    b = b.with_config(key, v);
                }
                if let Some(v) = &options.endpoint {
                    b = b.with_endpoint(v);
                }
                if let Some(v) = &options.region {
                    b = b.with_region(v);
                }
                if let Some(v) = &options.access_key_id {
                    b = b.with_access_key_id(v);
                }
                if let Some(v) = &options.secret_access_key {
                    b = b.with_secret_access_key(v);
                }
                if let Some(v) = options.allow_http {
                    b = b.with_allow_http(v);
                }
                let store = b.build().map_err(|e| backend(op, url, e))?;
                let (_, prefix) = object_store::ObjectStoreScheme::parse(&parsed)
                    .map_err(|e| backend(op, url, e))?;
                (Arc::new(store), prefix)
            }
            _ => {
                let (store, prefix) = object_store::parse_url_opts(&parsed, options.config.clone())
                    .map_err(|e| backend(op, url, e))?;
                (Arc::from(store), prefix)
            }
        };
        Ok(Self::with_store(store, prefix, url, &options))
    }

    /// A file system on an existing store, its keys below `prefix`; `url` names it (of
    /// `options`, only the segment size and read-ahead apply).
    pub fn with_store(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        url: &str,
        options: &ObjectStoreOptions,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                files: prefix.clone().join("files"),
                segments: prefix.join("segments"),
                segment_bytes: options.segment_bytes.max(1),
                create_mode: AtomicBool::new(true),
                read_ahead: options.read_ahead,
                read_ahead_budget: crate::ReadAheadBudget::new(options.read_ahead_budget_bytes),
            }),
            url: url.to_string(),
        }
    }

    /// What this file system's readers did with read-ahead hints.
    pub fn read_ahead_stats(&self) -> crate::ReadAheadStats {
        self.inner.read_ahead_budget.stats()
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }
}

#[async_trait]
impl Fs for ObjectStoreFs {
    async fn create(&self, path: &str, overwrite: bool) -> FsResult<Box<dyn FsWriter>> {
        let op = "create";
        check_path(op, path)?;
        let is_dir = |p: &str| FsError::IsADirectory {
            op,
            path: p.to_string(),
        };
        if path == "/" {
            return Err(is_dir(path));
        }
        let inner = &self.inner;
        inner.check_ancestors(op, path).await?;
        if inner.is_dir(op, path).await? {
            return Err(is_dir(path));
        }
        let key = inner.key(path);
        let manifest = Manifest::new(rand::random());
        let data = Bytes::from(manifest.encode());
        if overwrite {
            // The old segments go once the new manifest is in place; a corrupt old manifest
            // is simply replaced.
            let old = inner.manifest(op, path).await.ok().flatten();
            inner
                .store
                .put(&key, data.into())
                .await
                .map_err(|e| store_err(op, path, e))?;
            if let Some(old) = old
                && let Err(e) = inner.delete_segments(op, path, &old).await
            {
                tracing::warn!("{e}: the overwritten file's segments stay behind");
            }
        } else {
            inner.put_new(op, path, &key, data).await?;
        }
        Ok(Box::new(ObjWriter::new(
            self.inner.clone(),
            path.to_string(),
            key,
            manifest,
        )))
    }

    async fn open(&self, path: &str) -> FsResult<Arc<dyn FsReader>> {
        let op = "open";
        check_path(op, path)?;
        let m = self.inner.existing_manifest(op, path).await?;
        Ok(Arc::new(ObjReader::new(
            self.inner.clone(),
            path.to_string(),
            m,
        )))
    }

    async fn length(&self, path: &str) -> FsResult<u64> {
        check_path("length", path)?;
        Ok(self.inner.existing_manifest("length", path).await?.len())
    }

    async fn remove(&self, path: &str) -> FsResult<()> {
        let op = "remove";
        check_path(op, path)?;
        let inner = &self.inner;
        // A manifest that does not decode is removed all the same; its segments stay.
        let m = match inner.manifest(op, path).await {
            Ok(Some(m)) => Some(m),
            Ok(None) => return Err(inner.missing_file(op, path).await),
            Err(e) => {
                tracing::warn!("{e}: removing it, its segments stay behind");
                None
            }
        };
        inner.keep_dir(op, parent(path)).await?;
        inner
            .store
            .delete(&inner.key(path))
            .await
            .map_err(|e| store_err(op, path, e))?;
        if let Some(m) = m {
            inner.delete_segments(op, path, &m).await?;
        }
        Ok(())
    }

    async fn rmdir(&self, path: &str, recursive: bool) -> FsResult<()> {
        let op = "rmdir";
        check_path(op, path)?;
        let inner = &self.inner;
        if inner.is_file(op, path).await? {
            return Err(FsError::NotADirectory {
                op,
                path: path.to_string(),
            });
        }
        if !inner.is_dir(op, path).await? {
            return Err(FsError::NotFound {
                op,
                path: path.to_string(),
            });
        }
        let prefix = inner.key(path);
        let own_marker = inner.marker(path);
        let objects: Vec<Path> = inner
            .store
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| store_err(op, path, e))?;
        let (markers, manifests): (Vec<Path>, Vec<Path>) = objects
            .into_iter()
            .partition(|k| k.filename() == Some(DIR_MARKER));
        if !recursive && (!manifests.is_empty() || markers.iter().any(|k| *k != own_marker)) {
            return Err(FsError::DirectoryNotEmpty {
                op,
                path: path.to_string(),
            });
        }
        if path != "/" {
            inner.keep_dir(op, parent(path)).await?;
        }
        // The manifests first, then their segments: no manifest is left naming a missing
        // segment. A manifest that does not decode loses its segments to the root's sweep only.
        let ids: Vec<Option<String>> = stream::iter(manifests.iter().cloned())
            .map(|key| async move {
                let bytes = match inner.store.get(&key).await {
                    Ok(r) => r.bytes().await,
                    Err(e) => Err(e),
                };
                match bytes {
                    Ok(b) => Ok(Manifest::decode(op, path, key.as_ref(), &b)
                        .map(|m| m.id_hex())
                        .ok()),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(store_err(op, path, e)),
                }
            })
            .buffer_unordered(CONCURRENT_REQUESTS)
            .try_collect()
            .await?;
        inner.delete_all(op, path, manifests).await?;
        if path == "/" {
            inner.delete_prefix(op, path, &inner.segments).await?;
        } else {
            for id in ids.into_iter().flatten() {
                inner
                    .delete_prefix(op, path, &inner.segment_prefix(&id))
                    .await?;
            }
        }
        inner.delete_all(op, path, markers).await
    }

    async fn rename(&self, from: &str, to: &str) -> FsResult<()> {
        let op = "rename";
        check_path(op, from)?;
        check_path(op, to)?;
        let inner = &self.inner;
        // Renaming copies the manifest as stored (it holds no path).
        let data = match inner.manifest_bytes(op, from).await? {
            Some(d) => d,
            None => return Err(inner.missing_file(op, from).await),
        };
        Manifest::decode(op, from, inner.key(from).as_ref(), &data)?;
        if to == "/" || inner.is_dir(op, to).await? {
            return Err(FsError::AlreadyExists {
                op,
                path: to.to_string(),
            });
        }
        inner.check_ancestors(op, to).await?;
        inner.put_new(op, to, &inner.key(to), data).await?;
        inner.keep_dir(op, parent(from)).await?;
        inner
            .store
            .delete(&inner.key(from))
            .await
            .map_err(|e| store_err(op, from, e))
    }

    async fn mkdirs(&self, path: &str) -> FsResult<()> {
        let op = "mkdirs";
        check_path(op, path)?;
        let inner = &self.inner;
        if inner.is_file(op, path).await? {
            return Err(FsError::AlreadyExists {
                op,
                path: path.to_string(),
            });
        }
        inner.check_ancestors(op, path).await?;
        if inner.is_dir(op, path).await? {
            return Ok(());
        }
        inner.keep_dir(op, path).await
    }

    async fn readdir(&self, path: &str) -> FsResult<Vec<DirEntry>> {
        let op = "readdir";
        check_path(op, path)?;
        let inner = &self.inner;
        let prefix = inner.key(path);
        let list = inner
            .store
            .list_with_delimiter(Some(&prefix))
            .await
            .map_err(|e| store_err(op, path, e))?;
        let objects: Vec<&Path> = list
            .objects
            .iter()
            .map(|m| &m.location)
            .filter(|k| **k != prefix)
            .collect();
        if path != "/" && objects.is_empty() && list.common_prefixes.is_empty() {
            return Err(if inner.is_file(op, path).await? {
                FsError::NotADirectory {
                    op,
                    path: path.to_string(),
                }
            } else {
                FsError::NotFound {
                    op,
                    path: path.to_string(),
                }
            });
        }
        let mut out: Vec<DirEntry> = list
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().and_then(unescape))
            .map(|name| DirEntry {
                name,
                is_dir: true,
                length: 0,
            })
            .collect();
        let files: Vec<String> = objects
            .iter()
            .filter_map(|k| k.filename().and_then(unescape))
            .collect();
        let lengths: Vec<Option<u64>> = stream::iter(files.clone())
            .map(|name: String| {
                let file = crate::join(path, &name);
                let inner = self.inner.clone();
                async move {
                    // A file removed since the listing is left out.
                    Ok::<_, FsError>(inner.manifest(op, &file).await?.map(|m| m.len()))
                }
            })
            .buffered(CONCURRENT_REQUESTS)
            .try_collect()
            .await?;
        for (name, len) in files.into_iter().zip(lengths) {
            if let Some(length) = len {
                out.push(DirEntry {
                    name,
                    is_dir: false,
                    length,
                });
            }
        }
        out.sort();
        Ok(out)
    }

    async fn exists(&self, path: &str) -> FsResult<bool> {
        check_path("exists", path)?;
        Ok(self.inner.is_file("exists", path).await? || self.inner.is_dir("exists", path).await?)
    }

    fn url(&self) -> String {
        self.url.clone()
    }
}

#[cfg(test)]
mod tests;
