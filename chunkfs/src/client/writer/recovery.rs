//! Cut-and-continue: when a server of the block fails mid-write, the streamer cuts the block at
//! its acknowledged length on the servers still alive and goes on in a new block on others.

use bytes::Bytes;
use dfs_broker::FsResult;
use futures_util::future::join_all;

use super::Streamer;
use crate::Layout;
use crate::messages::*;

impl Streamer {
    /// Finalizes every chunk of the current block at its acknowledged length on every server
    /// that answers; returns the servers per chunk that did.
    pub(super) async fn finalize_block(&self) -> Vec<WireChunk> {
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
    pub(super) async fn complete_block(&mut self, after_failure: bool) -> FsResult<()> {
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
}
