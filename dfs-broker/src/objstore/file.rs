//! Writers and readers of object-store files: a writer turns appends into segment objects and
//! manifest updates, a reader maps positional reads onto ranged GETs of segments.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use object_store::ObjectStoreExt;
use object_store::path::Path;
use parking_lot::Mutex;

use super::manifest::Manifest;
use super::{CONCURRENT_REQUESTS, Inner, store_err};
use crate::{AppendFlag, FsError, FsReader, FsResult, FsWriter, ReadAhead};

/// A file open for appending.
pub(crate) struct ObjWriter {
    inner: Arc<Inner>,
    path: String,
    /// The manifest object.
    key: Path,
    /// The segments written so far (some maybe not yet in the stored manifest).
    manifest: Manifest,
    id_hex: String,
    /// How many segments the stored manifest lists.
    published: usize,
    /// `append(None)` data not yet in a segment.
    buf: Vec<u8>,
    closed: bool,
    /// Set when a put failed: what the store holds is then unknown to this writer, so every
    /// later append or close fails.
    failed: Option<String>,
}

impl ObjWriter {
    /// A writer of the file whose (empty) manifest `manifest` is stored at `key`.
    pub(crate) fn new(inner: Arc<Inner>, path: String, key: Path, manifest: Manifest) -> Self {
        let published = manifest.segments();
        Self {
            inner,
            path,
            key,
            id_hex: manifest.id_hex(),
            manifest,
            published,
            buf: Vec::new(),
            closed: false,
            failed: None,
        }
    }

    fn usable(&self, op: &'static str) -> FsResult<()> {
        if let Some(msg) = &self.failed {
            return Err(FsError::Backend {
                op,
                path: self.path.clone(),
                msg: format!("an earlier write failed: {msg}"),
            });
        }
        if self.closed {
            return Err(FsError::Closed {
                op,
                path: self.path.clone(),
            });
        }
        Ok(())
    }

    fn poison(&mut self, op: &'static str, e: object_store::Error) -> FsError {
        self.failed = Some(e.to_string());
        store_err(op, &self.path, e)
    }

    /// Writes the buffered bytes as the next segment.
    async fn write_segment(&mut self, op: &'static str) -> FsResult<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let key = self
            .inner
            .segment_key(&self.id_hex, self.manifest.segments());
        let data = Bytes::from(std::mem::take(&mut self.buf));
        let len = data.len() as u64;
        if let Err(e) = self.inner.store().put(&key, data.into()).await {
            return Err(self.poison(op, e));
        }
        self.manifest.push(len);
        Ok(())
    }

    /// Writes the manifest if it lacks segments.
    async fn publish(&mut self, op: &'static str) -> FsResult<()> {
        if self.published == self.manifest.segments() {
            return Ok(());
        }
        let data = Bytes::from(self.manifest.encode());
        if let Err(e) = self.inner.store().put(&self.key, data.into()).await {
            return Err(self.poison(op, e));
        }
        self.published = self.manifest.segments();
        Ok(())
    }
}

#[async_trait]
impl FsWriter for ObjWriter {
    async fn append(&mut self, data: &[u8], flag: AppendFlag) -> FsResult<()> {
        self.usable("append")?;
        self.buf.extend_from_slice(data);
        match flag {
            AppendFlag::None => {
                if self.buf.len() >= self.inner.segment_bytes() {
                    self.write_segment("append").await?;
                }
                Ok(())
            }
            // Both are a durable put: the store offers nothing weaker.
            AppendFlag::Flush | AppendFlag::Sync => {
                self.write_segment("append").await?;
                self.publish("append").await
            }
        }
    }

    fn position(&self) -> u64 {
        self.manifest.len() + self.buf.len() as u64
    }

    async fn close(&mut self) -> FsResult<()> {
        if self.closed {
            return Ok(());
        }
        let res = match self.usable("close") {
            Ok(()) => match self.write_segment("close").await {
                Ok(()) => self.publish("close").await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        // A failed close still closes: retrying cannot tell what reached the store.
        self.closed = true;
        res
    }

    fn path(&self) -> &str {
        &self.path
    }
}

/// A file open for positional reads.
pub(crate) struct ObjReader {
    inner: Arc<Inner>,
    path: String,
    /// The manifest last read: segments are immutable, so reads within its length need no
    /// new manifest.
    manifest: Mutex<Arc<Manifest>>,
    ahead: ReadAhead,
}

/// Why reading segments failed.
enum ReadErr {
    /// A segment object is gone (the file was overwritten or removed).
    Missing(FsError),
    Other(FsError),
}

impl ObjReader {
    pub(crate) fn new(inner: Arc<Inner>, path: String, manifest: Manifest) -> Self {
        let ahead = ReadAhead::new(inner.read_ahead, inner.read_ahead_budget.clone());
        Self {
            inner,
            path,
            manifest: Mutex::new(Arc::new(manifest)),
            ahead,
        }
    }

    /// Reads the manifest again; keeps it unless it is older than the one held.
    async fn refresh(&self, op: &'static str) -> FsResult<Arc<Manifest>> {
        let Some(m) = self.inner.manifest(op, &self.path).await? else {
            return Err(FsError::NotFound {
                op,
                path: self.path.clone(),
            });
        };
        let m = Arc::new(m);
        let mut held = self.manifest.lock();
        // Concurrent refreshes may finish out of order: never go back to a shorter version of
        // the same file.
        if held.id != m.id || m.len() >= held.len() {
            *held = m.clone();
        }
        Ok(m)
    }

    /// The manifest to read `offset..end` with: the held one if it covers the range, else a
    /// fresh one, else `ReadPastEnd`.
    async fn covering(&self, offset: u64, len: usize, fresh: bool) -> FsResult<Arc<Manifest>> {
        let end = offset.checked_add(len as u64);
        let fits = |m: &Manifest| end.is_some_and(|e| e <= m.len());
        if !fresh {
            let held = self.manifest.lock().clone();
            if fits(&held) {
                return Ok(held);
            }
        }
        let m = self.refresh("pread").await?;
        if fits(&m) {
            Ok(m)
        } else {
            Err(FsError::ReadPastEnd {
                path: self.path.clone(),
                offset,
                len,
                file_len: m.len(),
            })
        }
    }
}

/// Reads `[offset, offset + len)` of the file `m` describes, its segments' ranges at once.
async fn read_pieces(
    inner: &Inner,
    path: &str,
    m: &Manifest,
    offset: u64,
    len: usize,
) -> Result<Vec<u8>, ReadErr> {
    let id_hex = m.id_hex();
    let pieces = m.map_range(offset, len as u64);
    let id = &id_hex;
    let parts: Vec<Bytes> = stream::iter(pieces)
        .map(|p| async move {
            let key = inner.segment_key(id, p.segment);
            let got = inner
                .store()
                .get_range(&key, p.offset..p.offset + p.len)
                .await;
            match got {
                Ok(b) if b.len() as u64 == p.len => Ok(b),
                Ok(b) => Err(ReadErr::Other(FsError::Backend {
                    op: "pread",
                    path: path.to_string(),
                    msg: format!(
                        "segment object {key}: asked for {} bytes at {}, got {}",
                        p.len,
                        p.offset,
                        b.len()
                    ),
                })),
                Err(object_store::Error::NotFound { .. }) => {
                    Err(ReadErr::Missing(FsError::Backend {
                        op: "pread",
                        path: path.to_string(),
                        msg: format!("segment object {key} is missing"),
                    }))
                }
                Err(e) => Err(ReadErr::Other(store_err("pread", path, e))),
            }
        })
        .buffered(CONCURRENT_REQUESTS)
        .try_collect()
        .await?;
    let mut out = Vec::with_capacity(len);
    for p in parts {
        out.extend_from_slice(&p);
    }
    Ok(out)
}

#[async_trait]
impl FsReader for ObjReader {
    async fn pread(&self, offset: u64, len: usize) -> FsResult<Vec<u8>> {
        // Bounds are checked before anything is allocated: a corrupt length is ReadPastEnd.
        let m = self.covering(offset, len, false).await?;
        if len == 0 {
            return Ok(Vec::new());
        }
        if let Some(d) = self.ahead.read(offset, len).await {
            return Ok(d);
        }
        match read_pieces(&self.inner, &self.path, &m, offset, len).await {
            Ok(v) => Ok(v),
            Err(ReadErr::Other(e)) => Err(e),
            Err(ReadErr::Missing(e)) => {
                // The file was overwritten (new id) or removed since the manifest was read.
                let fresh = self.covering(offset, len, true).await?;
                if fresh.id == m.id {
                    return Err(e);
                }
                match read_pieces(&self.inner, &self.path, &fresh, offset, len).await {
                    Ok(v) => Ok(v),
                    Err(ReadErr::Missing(e) | ReadErr::Other(e)) => Err(e),
                }
            }
        }
    }

    async fn length(&self) -> FsResult<u64> {
        Ok(self.refresh("length").await?.len())
    }

    fn path(&self) -> &str {
        &self.path
    }

    /// Reads the range in the background into a window a later pread takes it from
    /// (`crate::read_ahead`), with the manifest held: segments never change.
    fn prefetch(&self, offset: u64, len: usize) {
        let m = self.manifest.lock().clone();
        let (inner, path) = (self.inner.clone(), self.path.clone());
        self.ahead
            .start(offset, len, m.len(), move |offset, len| async move {
                read_pieces(&inner, &path, &m, offset, len)
                    .await
                    .map_err(|(ReadErr::Missing(e) | ReadErr::Other(e))| e)
            });
    }
}
