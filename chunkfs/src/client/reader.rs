//! [`ChunkFsReader`]: reads of a file's blocks, each range from the first replica that answers
//! with a verified checksum, a striped block's missing cell rebuilt from the others.

use std::sync::Arc;

use async_trait::async_trait;
use dfs_broker::{FsError, FsReader, FsResult, ReadAhead};
use futures_util::StreamExt as _;
use futures_util::future::join_all;

use super::{Inner, backend};
use crate::Layout;
use crate::messages::*;
use crate::rs;

impl Inner {
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

/// A file open for reads; follows the file as its writer flushes.
pub struct ChunkFsReader {
    inner: Arc<Inner>,
    path: String,
    stat: tokio::sync::Mutex<Arc<StatReply>>,
    ahead: ReadAhead,
}

impl ChunkFsReader {
    pub(super) fn new(inner: Arc<Inner>, path: &str, stat: StatReply) -> Self {
        let ahead = ReadAhead::new(inner.options.read_ahead, inner.read_ahead.clone());
        Self {
            inner,
            path: path.to_string(),
            stat: tokio::sync::Mutex::new(Arc::new(stat)),
            ahead,
        }
    }

    async fn refresh(&self) -> FsResult<Arc<StatReply>> {
        let stat = Arc::new(self.inner.stat(&self.path).await?);
        let mut cur = self.stat.lock().await;
        if stat.length >= cur.length {
            *cur = stat;
        }
        Ok(cur.clone())
    }
}

impl Inner {
    /// Reads `[offset, offset + len)` of the file `stat` describes, block by block.
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
                out.extend(self.read_block(b, from, to).await?);
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
        if let Some(d) = self.ahead.read(offset, len).await {
            return Ok(d);
        }
        match self.inner.read_range(&stat, offset, len).await {
            Ok(d) => Ok(d),
            Err(first) => {
                // Locations may have moved (a dead server, a repaired replica): look again.
                let stat = self.refresh().await?;
                self.inner
                    .read_range(&stat, offset, len)
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

    /// Reads the range in the background into a window a later pread takes it from
    /// (`dfs_broker::read_ahead`); a file's bytes below its length never change, so a
    /// window read with the reader's last stat stays true.
    fn prefetch(&self, offset: u64, len: usize) {
        let Ok(stat) = self.stat.try_lock().map(|s| s.clone()) else {
            return;
        };
        let inner = self.inner.clone();
        let path = self.path.clone();
        self.ahead
            .start(offset, len, stat.length, move |offset, len| async move {
                inner
                    .read_range(&stat, offset, len)
                    .await
                    .map_err(|e| backend("prefetch", &path, e))
            });
    }
}
