//! The range server over `rpc`: [`RangeServerService`] serves one [`Engine`]'s ranges, and
//! `proto::rs::client::RangeServerClient` calls it.
//!
//! Methods (payloads are the prost messages of `proto::rs::messages`;
//! `docs/formats/rangeserver-rpc.md`):
//! - `rs.create_table`, `rs.drop_table`, `rs.alter_table`, `rs.load_range`, `rs.unload_range`,
//!   `rs.adopt_range`, `rs.recover_ranges`, `rs.split`, `rs.store_use`, `rs.release_stores`:
//!   from the master or a fellow range server only (their certificates), never from clients;
//! - `rs.update`: a batch of packed cells (`messages::encode_cells`), applied whole or not at
//!   all, on arrival or in its turn in an ordered update stream (`streams`); a row not held
//!   here is answered with `UpdateReply.not_here`, a batch its stream refuses with
//!   `UpdateReply.stream_refused`;
//! - `rs.scan` (server push): blocks of cells, bounded in cells and bytes, ending with the
//!   stream (or with a block carrying `not_here`); a client that reads nothing for
//!   `scan_idle_timeout` has its stream reset;
//! - `rs.ranges` (`table_id` 0: every table), `rs.status` (the engine's counters and the
//!   iterator and combiner kinds its registry holds).
//!
//! The engine is synchronous and its file system is reached through `block_on`, so every engine
//! call that may touch files runs in `spawn_blocking`, never on a runtime worker.

pub mod admin;
mod convert;
pub mod membership;
pub mod streams;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use common::{ErrorKind, ScanSpec, TableSchema};
use prost::Message as _;
use rpc::{ClusterCredentials, PeerInfo, RpcError, Server, ServerOptions, StreamSink};
use tokio::sync::Semaphore;

use streams::UpdateStreams;

use crate::engine::Engine;
use crate::error::Error;
use crate::meta::RangeRecord;
use proto::rs::messages::*;
pub use proto::rs::{MASTER_NAME, SERVER_NAME};

/// Limits of a range server.
#[derive(Debug, Clone)]
pub struct RangeServerOptions {
    /// The rpc server's limits; `max_message_bytes` also bounds an update batch.
    pub rpc: ServerOptions,
    /// Cells the engine's scanner hands over at once.
    pub scan_block_cells: usize,
    /// Bytes (about) of one pushed scan message; a single larger cell goes alone.
    pub scan_block_bytes: usize,
    /// Engine blocks queued between the scanner thread and the network: with the QUIC flow
    /// control window, the bound on memory a slow reader can cause.
    pub scan_queue_blocks: usize,
    /// Scans running at once, over all connections: each holds a blocking thread while its
    /// client reads, so more wait for a slot rather than exhaust the blocking pool.
    pub max_concurrent_scans: usize,
    /// A scan whose client takes no block for this long is abandoned.
    pub scan_idle_timeout: Duration,
    /// A scan over much data runs as up to this many pieces of rows at once, one blocking
    /// thread each, sent in order (`Engine::scan_pieces`); 1 runs every scan whole. Each piece
    /// queues up to `scan_queue_blocks` blocks, so a scan holds at most this many times as
    /// much. Default: the cores, at most 4.
    pub scan_pieces: usize,
    /// Bytes of data (stores and caches, in the scanned rows) a scan needs per piece before
    /// it is split.
    pub scan_piece_bytes: u64,
    /// Ordered update streams remembered at once (`streams`).
    pub max_update_streams: usize,
    /// How long a batch of an update stream waits for a predecessor that is not being applied
    /// before the stream fails.
    pub update_stream_missing_wait: Duration,
}

impl Default for RangeServerOptions {
    fn default() -> Self {
        Self {
            rpc: ServerOptions::default(),
            scan_block_cells: 1024,
            scan_block_bytes: 1 << 20,
            scan_queue_blocks: 4,
            max_concurrent_scans: 64,
            scan_idle_timeout: Duration::from_secs(600),
            scan_pieces: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(4),
            scan_piece_bytes: 16 << 20,
            max_update_streams: 4096,
            update_stream_missing_wait: Duration::from_secs(5),
        }
    }
}

/// Serves an engine's ranges.
pub struct RangeServerService {
    engine: Engine,
    options: RangeServerOptions,
    scans: Arc<Semaphore>,
    paused: Arc<std::sync::atomic::AtomicBool>,
    streams: UpdateStreams,
}

impl RangeServerService {
    pub fn new(engine: Engine, options: RangeServerOptions) -> Self {
        let scans = Arc::new(Semaphore::new(options.max_concurrent_scans.max(1)));
        let streams = UpdateStreams::new(
            options.max_update_streams,
            options.update_stream_missing_wait,
        );
        Self {
            engine,
            options,
            scans,
            paused: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            streams,
        }
    }

    /// A switch that makes the server refuse updates and scans (as unavailable, so clients
    /// retry) while it is on: a range server in Hyperspace jeopardy must not acknowledge a
    /// write its ranges' next holder would not see.
    pub fn pause_switch(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.paused.clone()
    }

    fn check_serving(&self, method: &str) -> Result<(), RpcError> {
        if self.paused.load(std::sync::atomic::Ordering::Acquire) {
            return Err(RpcError::service(
                ErrorKind::Unavailable,
                format!(
                    "{method}: the range server is paused (its hyperspace session is in doubt)"
                ),
            ));
        }
        Ok(())
    }

    /// Binds `addr` and serves, presenting `credentials` (issued to [`SERVER_NAME`]).
    pub fn bind(
        self,
        addr: SocketAddr,
        credentials: &ClusterCredentials,
    ) -> Result<Server, RpcError> {
        let rpc = self.options.rpc.clone();
        Server::bind_with(addr, credentials, self, rpc)
    }

    /// Runs an engine call off the runtime's workers.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine) -> crate::Result<T> + Send + 'static,
    ) -> Result<crate::Result<T>, RpcError> {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || f(&engine))
            .await
            .map_err(|e| RpcError::service(ErrorKind::Internal, format!("engine task failed: {e}")))
    }

    /// `rs.update`: a batch on its own, or in its turn in an ordered update stream.
    async fn update(&self, req: UpdateRequest) -> Result<UpdateReply, RpcError> {
        if req.stream == 0 {
            return self.update_now(req).await;
        }
        if req.acked > req.seq {
            return Err(RpcError::service(
                ErrorKind::InvalidInput,
                format!(
                    "{}: batch {} of update stream {:#x} says {} batches were applied",
                    method::UPDATE,
                    req.seq,
                    req.stream,
                    req.acked
                ),
            ));
        }
        let turn = match self.streams.turn(req.stream, req.seq, req.acked).await {
            Ok(turn) => turn,
            Err(why) => {
                return Ok(UpdateReply {
                    not_here: None,
                    stream_refused: Some(why),
                });
            }
        };
        // Paused while waiting: not applied, and the stream fails with it.
        let outcome = match self.check_serving(method::UPDATE) {
            Ok(()) => self.update_now(req).await,
            Err(e) => Err(e),
        };
        turn.finish(match &outcome {
            Ok(UpdateReply {
                not_here: Some(n), ..
            }) => Err(format!(
                "batch not applied: row {:?} of table {} is not here",
                String::from_utf8_lossy(&n.row),
                n.table_id
            )),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("batch failed: {e}")),
        });
        outcome
    }

    /// Applies one batch (its cells read in place) and answers once it is durable; refused if
    /// the server paused meanwhile.
    async fn update_now(&self, req: UpdateRequest) -> Result<UpdateReply, RpcError> {
        let table_id = req.table_id;
        let (cells, count) = (req.cells, req.count);
        // Read in place on the blocking thread: the cells borrow the message's bytes.
        match self
            .blocking(move |e| {
                let mutations = decode_cells(&cells, count).map_err(Error::InvalidInput)?;
                e.apply(table_id, &mutations)
            })
            .await?
        {
            Ok(()) => Ok(UpdateReply::default()),
            Err(Error::NotHere { table_id, row }) => Ok(UpdateReply {
                not_here: Some(NotHere { table_id, row }),
                stream_refused: None,
            }),
            Err(e) => Err(engine_error(method::UPDATE, e)),
        }
        .and_then(|reply| {
            // An update that was applied while the pause began is not acknowledged.
            self.check_serving(method::UPDATE)?;
            Ok(reply)
        })
    }

    /// Pushes one block of a scan; a client that takes nothing for `scan_idle_timeout` loses
    /// its scan (its stream is reset; the scan slot and thread it held are freed).
    async fn push(&self, sink: &mut StreamSink, block: Bytes) -> Result<(), RpcError> {
        sink.send_within(block, self.options.scan_idle_timeout)
            .await
    }

    async fn scan(&self, req: ScanRequest, sink: &mut StreamSink) -> Result<(), RpcError> {
        let spec =
            ScanSpec::try_from(req.spec.unwrap_or_default()).map_err(invalid(method::SCAN))?;
        // Held until the scan ends (or its client goes away).
        let _slot = self.scans.acquire().await.map_err(|_| {
            RpcError::service(ErrorKind::Unavailable, "the range server is shutting down")
        })?;
        // The scanner thread packs cells straight from the engine's keys into messages (no cell
        // is built as owned vectors on the way).
        let block_cells = self.options.scan_block_cells.max(1);
        let block_bytes = self.options.scan_block_bytes.max(1);
        // A scan over much data runs in pieces at once, all at one snapshot, sent in order; the
        // later pieces wait when their queues are full.
        let (table_id, max, piece_bytes) = (
            req.table_id,
            self.options.scan_pieces,
            self.options.scan_piece_bytes,
        );
        let (pieces, snapshot) = self
            .blocking(move |e| {
                // An aggregating scan is checked, and folds each piece into one partial.
                let spec = match &spec.aggregate {
                    Some(_) => {
                        crate::scan::aggregate::check(&spec)?;
                        crate::scan::aggregate::narrowed(&spec, &e.schema(table_id)?)
                    }
                    None => spec,
                };
                let pieces = e.scan_pieces(table_id, &spec, max, piece_bytes);
                Ok((pieces, Some(e.pin_snapshot())))
            })
            .await?
            .map_err(|e| engine_error(method::SCAN, e))?;
        let queue = self.options.scan_queue_blocks.max(1);
        let receivers: Vec<_> = pieces
            .into_iter()
            .map(|piece| match piece.aggregate.clone() {
                Some(agg) => {
                    self.engine
                        .scan_stream_at(table_id, piece, snapshot, queue, fold_piece(agg))
                }
                None => self
                    .engine
                    .scan_stream_at(table_id, piece, snapshot, queue, move |sc| {
                        pack_scan_block(sc, block_cells, block_bytes)
                    }),
            })
            .collect();
        // Dropping a receiver (on return, also when a send fails because the client went away)
        // makes its scanner thread's next send fail, so it stops and drops its scanner.
        for mut rx in receivers {
            while let Some(block) = rx.recv().await {
                let block = match block {
                    Ok(block) => block,
                    Err(Error::NotHere { table_id, row }) => {
                        let last = ScanBlock {
                            not_here: Some(NotHere { table_id, row }),
                            ..Default::default()
                        };
                        return self.push(sink, last.encode_to_vec().into()).await;
                    }
                    Err(e) => return Err(engine_error(method::SCAN, e)),
                };
                self.push(sink, block).await?;
            }
        }
        Ok(())
    }
}

/// The next `ScanBlock` message of a scan: up to `max_cells` cells and about `max_bytes` bytes
/// (a single larger cell goes alone); `None` at the end of the scan.
fn pack_scan_block(
    sc: &mut crate::engine::TableScanner,
    max_cells: usize,
    max_bytes: usize,
) -> Result<Option<Bytes>, Error> {
    let mut packed = Vec::with_capacity(max_bytes.min(64 << 10));
    let mut count = 0u32;
    while (count as usize) < max_cells {
        let more = sc.peek_size().is_some_and(|size| {
            count == 0 || packed.len() + size + PACKED_SCAN_CELL_OVERHEAD <= max_bytes
        });
        if !more {
            break;
        }
        sc.next_ref(|key, value| encode_scan_cell(&key, value, &mut packed))?;
        count += 1;
    }
    Ok((count > 0).then(|| {
        ScanBlock {
            not_here: None,
            cells: packed.into(),
            count,
            aggregate: None,
        }
        .encode_to_vec()
        .into()
    }))
}

/// The block maker of one piece of an aggregating scan: it folds the piece's cells (across
/// yields) and then makes one `ScanBlock` carrying the partial and no cells.
fn fold_piece(
    agg: common::aggregate::Aggregate,
) -> impl FnMut(&mut crate::engine::TableScanner) -> Result<Option<Bytes>, Error> + Send + 'static {
    let mut fold = Some(common::aggregate::AggregateFold::new(&agg));
    move |sc| {
        let Some(f) = fold.as_mut() else {
            return Ok(None);
        };
        crate::scan::aggregate::fold_scanner(sc, f)?;
        if sc.yielded() {
            return Ok(None);
        }
        let partial = fold.take().expect("folding until now").finish();
        Ok(Some(
            ScanBlock {
                aggregate: Some(WireAggregatePartial::from(&partial)),
                ..Default::default()
            }
            .encode_to_vec()
            .into(),
        ))
    }
}

/// True for the callers that may change tables and ranges: the master and range servers.
fn is_cluster_node(peer: &PeerInfo) -> bool {
    peer.is_node(MASTER_NAME) || peer.is_node(SERVER_NAME)
}

fn invalid(method: &'static str) -> impl Fn(String) -> RpcError {
    move |why| RpcError::service(ErrorKind::InvalidInput, format!("{method}: {why}"))
}

fn engine_error(method: &str, e: Error) -> RpcError {
    RpcError::service(e.kind(), format!("{method}: {e}"))
}

fn decode<M: prost::Message + Default>(method: &str, payload: Bytes) -> Result<M, RpcError> {
    M::decode(payload).map_err(|e| {
        RpcError::service(
            ErrorKind::InvalidInput,
            format!("{method}: undecodable request: {e}"),
        )
    })
}

fn decode_schema(method: &'static str, payload: Bytes) -> Result<TableSchema, RpcError> {
    let req: SchemaRequest = decode(method, payload)?;
    TableSchema::from_json(&req.schema_json)
        .map_err(|e| invalid(method)(format!("bad schema: {e}")))
}

fn decode_item(
    method: &'static str,
    item: &AdoptRangeRequest,
) -> Result<(TableSchema, RangeRecord), RpcError> {
    let schema = TableSchema::from_json(&item.schema_json)
        .map_err(|e| invalid(method)(format!("bad schema: {e}")))?;
    let rec = item
        .record
        .as_ref()
        .map(RangeRecord::from)
        .ok_or_else(|| invalid(method)("no range record".to_string()))?;
    Ok((schema, rec))
}

fn unit() -> Bytes {
    UnitReply {}.encode_to_vec().into()
}

#[async_trait]
impl rpc::Service for RangeServerService {
    async fn call(&self, peer: &PeerInfo, method: &str, payload: Bytes) -> Result<Bytes, RpcError> {
        let admin = matches!(
            method,
            method::CREATE_TABLE
                | method::DROP_TABLE
                | method::ALTER_TABLE
                | method::LOAD_RANGE
                | method::UNLOAD_RANGE
                | method::ADOPT_RANGE
                | method::RECOVER_RANGES
                | method::SPLIT
                | method::STORE_USE
                | method::RELEASE_STORES
        );
        if admin && !is_cluster_node(peer) {
            return Err(RpcError::service(
                ErrorKind::InvalidInput,
                format!(
                    "{method} from {}: only the master or a range server may call it",
                    peer.addr
                ),
            ));
        }
        let done = |method: &str, r: crate::Result<()>| {
            r.map(|()| unit()).map_err(|e| engine_error(method, e))
        };
        match method {
            method::CREATE_TABLE => {
                let schema = decode_schema(method::CREATE_TABLE, payload)?;
                let r = self.blocking(move |e| e.register_table(schema)).await?;
                done(method, r)
            }
            method::ALTER_TABLE => {
                let schema = decode_schema(method::ALTER_TABLE, payload)?;
                let r = self.blocking(move |e| e.alter_table(schema)).await?;
                done(method, r)
            }
            method::DROP_TABLE => {
                let req: TableRequest = decode(method, payload)?;
                let r = self.blocking(move |e| e.drop_table(req.table_id)).await?;
                done(method, r)
            }
            method::LOAD_RANGE => {
                let req: LoadRangeRequest = decode(method, payload)?;
                let (start, end) = (
                    row_or_unbounded(req.start_row),
                    row_or_unbounded(req.end_row),
                );
                let range_id = self
                    .blocking(move |e| e.create_range(req.table_id, start, end))
                    .await?
                    .map_err(|e| engine_error(method::LOAD_RANGE, e))?;
                Ok(LoadRangeReply { range_id }.encode_to_vec().into())
            }
            method::UNLOAD_RANGE => {
                let req: UnloadRangeRequest = decode(method, payload)?;
                let end = row_or_unbounded(req.end_row);
                let rec = self
                    .blocking(move |e| e.unload_range(req.table_id, end.as_deref()))
                    .await?
                    .map_err(|e| engine_error(method::UNLOAD_RANGE, e))?;
                let reply = RangeRecordReply {
                    record: Some((&rec).into()),
                };
                Ok(reply.encode_to_vec().into())
            }
            method::ADOPT_RANGE => {
                let req: AdoptRangeRequest = decode(method, payload)?;
                let (schema, rec) = decode_item(method::ADOPT_RANGE, &req)?;
                let range_id = self
                    .blocking(move |e| e.load_range_record(&schema, &rec))
                    .await?
                    .map_err(|e| engine_error(method::ADOPT_RANGE, e))?;
                Ok(LoadRangeReply { range_id }.encode_to_vec().into())
            }
            method::RECOVER_RANGES => {
                let req: RecoverRangesRequest = decode(method, payload)?;
                let mut items = Vec::with_capacity(req.items.len());
                for item in &req.items {
                    items.push(decode_item(method::RECOVER_RANGES, item)?);
                }
                let dead_root = req.dead_root;
                let range_ids = self
                    .blocking(move |e| e.recover_ranges(&dead_root, &items))
                    .await?
                    .map_err(|e| engine_error(method::RECOVER_RANGES, e))?;
                Ok(RecoverRangesReply { range_ids }.encode_to_vec().into())
            }
            method::SPLIT => {
                let req: SplitRequest = decode(method, payload)?;
                let r = self
                    .blocking(move |e| e.split(req.table_id, &req.row))
                    .await?;
                done(method, r)
            }
            method::UPDATE => {
                self.check_serving(method)?;
                let req: UpdateRequest = decode(method, payload)?;
                let reply = self.update(req).await?;
                Ok(reply.encode_to_vec().into())
            }
            method::RANGES => {
                let req: TableRequest = decode(method, payload)?;
                // Only in-memory state: no need to leave the runtime. Table ids start at 1, so
                // 0 asks for every table.
                let ranges = if req.table_id == 0 {
                    self.engine.all_ranges()
                } else {
                    self.engine.ranges(req.table_id)
                };
                let reply = RangesReply {
                    ranges: ranges.iter().map(WireRange::from).collect(),
                };
                Ok(reply.encode_to_vec().into())
            }
            method::STATUS => {
                let stats = self.engine.stats();
                let reply = StatusReply {
                    kinds: self.engine.registry().kind_names(),
                    ..StatusReply::from(&stats)
                };
                Ok(reply.encode_to_vec().into())
            }
            other => match self.admin_call(other, payload).await {
                Some(r) => r,
                None => Err(RpcError::service(
                    ErrorKind::NotFound,
                    format!("the range server has no method {other:?}"),
                )),
            },
        }
    }

    async fn call_stream(
        &self,
        _peer: &PeerInfo,
        method: &str,
        payload: Bytes,
        sink: &mut StreamSink,
    ) -> Result<(), RpcError> {
        match method {
            method::SCAN => {
                self.check_serving(method)?;
                let req: ScanRequest = decode(method, payload)?;
                self.scan(req, sink).await
            }
            other => Err(RpcError::service(
                ErrorKind::NotFound,
                format!("the range server has no streaming method {other:?}"),
            )),
        }
    }
}
