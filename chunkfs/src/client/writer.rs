//! [`ChunkFsWriter`]: a file open for appending and its streamer task, which sends packets to
//! the current block's servers through a pipeline (hdfs-like), to all replicas at once
//! (kfs-like), or as the data and parity cells of a Reed-Solomon stripe.

mod recovery;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use dfs_broker::{AppendFlag, FsError, FsResult, FsWriter};
use futures_util::future::join_all;

use super::{Inner, backend};
use crate::Layout;
use crate::messages::*;
use crate::rs;

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

    /// Asks the metadata server for the next block, away from the servers this client could
    /// not reach lately (a server killed a moment ago is still live to the metadata server
    /// until its heartbeats are missed); if that leaves too few, from all it counts live.
    async fn new_block(&mut self) -> FsResult<()> {
        let mut exclude = self.exclude.clone();
        for a in self.inner.peers.recently_unreachable() {
            if !exclude.contains(&a) {
                exclude.push(a);
            }
        }
        let mut req = AddBlockRequest {
            path: self.path.clone(),
            file_id: self.file_id,
            exclude,
        };
        let mut reply = self
            .inner
            .meta_call::<_, AddBlockReply>(
                method::META_ADD_BLOCK,
                "append",
                &self.path,
                &req,
                false,
            )
            .await;
        // Only the placement's refusal is asked again: any other failure may have allocated
        // the block (the call is not idempotent).
        let too_few = |r: &FsResult<AddBlockReply>| matches!(r, Err(FsError::Backend { msg, .. }) if msg.contains("live chunk servers"));
        if too_few(&reply) && req.exclude.len() > self.exclude.len() {
            req.exclude = self.exclude.clone();
            reply = self
                .inner
                .meta_call(method::META_ADD_BLOCK, "append", &self.path, &req, false)
                .await;
        }
        let reply = reply?;
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
    /// Opens the writer of a file just created (its id is the lease) and spawns its streamer.
    pub(super) fn start(
        inner: Arc<Inner>,
        path: &str,
        file_id: u64,
        layout: Layout,
        parallel: bool,
        block_bytes: u64,
    ) -> Self {
        let streamer = Streamer {
            inner: inner.clone(),
            path: path.to_string(),
            file_id,
            layout,
            parallel,
            block_bytes,
            block: None,
            stripe: Vec::new(),
            exclude: Vec::new(),
            broken: None,
        };
        let (tx, rx) = tokio::sync::mpsc::channel(inner.options.max_packets_in_flight.max(1));
        let broken = Arc::new(parking_lot::Mutex::new(None));
        tokio::spawn(streamer.run(rx, broken.clone()));
        Self {
            inner,
            path: path.to_string(),
            pos: 0,
            buf: Vec::new(),
            tx,
            broken,
            closed: false,
        }
    }

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
