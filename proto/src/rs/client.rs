//! [`RangeServerClient`]: calls one range server. A row the server does not hold comes back as
//! [`RsError::NotHere`], distinct from every other failure, so that a caller refreshes its range
//! locations and tries elsewhere.
//!
//! Nothing is retried here: an update whose answer was lost may or may not have been applied,
//! and only the caller knows whether repeating it is safe.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::{AsMutationRef, Cell, ErrorKind, ScanSpec, TableSchema};
use prost::Message as _;
use rpc::{Client, ClientOptions, ClusterCredentials, ResponseStream, RpcError};

use super::SERVER_NAME;
use super::messages::*;
use crate::error::ClientError;
use common::CompactionKind;
use common::status::{EngineStats, RangeInfo};

/// What a range server call reports.
#[derive(Debug, thiserror::Error)]
pub enum RsError {
    /// The server holds no range of `table_id` containing `row`; nothing was applied.
    #[error(
        "row {:?} of table {table_id} is not served by this range server",
        String::from_utf8_lossy(row)
    )]
    NotHere { table_id: u32, row: Vec<u8> },
    /// A batch of an ordered update stream was refused, not applied, because an earlier batch
    /// of the stream was not (or the server lost track of the stream): resend from the
    /// first unapplied batch on a new stream.
    #[error("update stream refused the batch: {0}")]
    StreamRefused(String),
    /// The request is too large or malformed before it was sent.
    #[error("invalid request: {0}")]
    InvalidInput(String),
    /// The server sent something that does not decode.
    #[error("bad answer from the range server: {0}")]
    BadReply(String),
    #[error(transparent)]
    Rpc(#[from] RpcError),
}

impl RsError {
    /// The coarse kind for callers deciding what to do.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotHere { .. } => ErrorKind::NotFound,
            Self::StreamRefused(_) => ErrorKind::Unavailable,
            Self::InvalidInput(_) => ErrorKind::InvalidInput,
            Self::BadReply(_) => ErrorKind::Corruption,
            Self::Rpc(e) => e.kind(),
        }
    }
}

/// A range server's refusal as the embedded database would report it: invalid input in the
/// engine's own words, other failures naming the server.
pub fn server_error(location: &str, e: RsError) -> ClientError {
    match e.kind() {
        ErrorKind::InvalidInput => ClientError::InvalidInput(engine_message(&e)),
        kind => ClientError::Storage {
            kind,
            message: format!("range server {location}: {e}"),
            source: Some(Box::new(e)),
        },
    }
}

/// The engine's message inside a range server error, without the rpc decoration
/// (`rpc <method> to <peer>: server error (<kind>): <method>: invalid input: <message>`).
pub fn engine_message(e: &RsError) -> String {
    let m = match e {
        RsError::Rpc(rpc::RpcError::Service { message, .. })
        | RsError::Rpc(rpc::RpcError::Remote { message, .. }) => message.as_str(),
        RsError::InvalidInput(m) => return m.clone(),
        other => return other.to_string(),
    };
    let m = match m.split_once(": ") {
        Some((method, rest)) if method.starts_with("rs.") => rest,
        _ => m,
    };
    m.strip_prefix("invalid input: ").unwrap_or(m).to_string()
}

/// A batch's place in an ordered update stream (the range server's `server::streams`); the default is no stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamPlace {
    /// The stream's id (random, chosen by the client); 0: no stream.
    pub stream: u64,
    /// The batch's number in the stream, from 0.
    pub seq: u64,
    /// How many leading batches of the stream the client has seen applied.
    pub acked: u64,
}

/// Options of a range server client.
#[derive(Debug, Clone)]
pub struct RangeServerClientOptions {
    /// Deadline of one unary call.
    pub call_timeout: Duration,
    /// Deadline of a whole scan stream.
    pub scan_timeout: Duration,
    /// Largest rpc message; must match the server's (an update batch must fit in one).
    pub max_message_bytes: usize,
    pub connect_timeout: Duration,
    /// Deadline of `recover_ranges`, which reads a dead server's whole commit log.
    pub recovery_timeout: Duration,
    /// A connection whose server is silent this long is dropped (keep-alives flow meanwhile):
    /// how soon a call to a dead server fails, so callers go find the range elsewhere.
    pub idle_timeout: Duration,
}

impl Default for RangeServerClientOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(60),
            scan_timeout: Duration::from_secs(3600),
            max_message_bytes: rpc::frame::DEFAULT_MAX_MESSAGE_BYTES,
            connect_timeout: Duration::from_secs(10),
            recovery_timeout: Duration::from_secs(30 * 60),
            idle_timeout: Duration::from_secs(4),
        }
    }
}

/// A connection to one range server.
pub struct RangeServerClient {
    client: Client,
    options: RangeServerClientOptions,
}

impl RangeServerClient {
    /// Connects to the range server at `addr`, presenting `credentials` (the `client`
    /// certificate for data calls; `master` or `rangeserver` also for table and range changes).
    pub async fn connect(
        addr: SocketAddr,
        credentials: &ClusterCredentials,
    ) -> Result<Self, RsError> {
        Self::connect_with(addr, credentials, RangeServerClientOptions::default()).await
    }

    pub async fn connect_with(
        addr: SocketAddr,
        credentials: &ClusterCredentials,
        options: RangeServerClientOptions,
    ) -> Result<Self, RsError> {
        let rpc_options = ClientOptions {
            max_message_bytes: options.max_message_bytes,
            connect_timeout: options.connect_timeout,
            idle_timeout: options.idle_timeout,
            ..ClientOptions::default()
        };
        let config = credentials
            .client_config(rpc_options.idle_timeout)
            .map_err(RpcError::from)?;
        let client = Client::connect_with(addr, SERVER_NAME, config, rpc_options).await?;
        Ok(Self { client, options })
    }

    /// The server's address.
    pub fn peer(&self) -> SocketAddr {
        self.client.peer()
    }

    pub(crate) async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        request: &Req,
    ) -> Result<Resp, RsError> {
        Ok(self
            .client
            .call_message(method, request, self.options.call_timeout)
            .await?)
    }

    pub async fn create_table(&self, schema: &TableSchema) -> Result<(), RsError> {
        let req = SchemaRequest {
            schema_json: schema.to_json(),
        };
        let _: UnitReply = self.call(method::CREATE_TABLE, &req).await?;
        Ok(())
    }

    pub async fn alter_table(&self, schema: &TableSchema) -> Result<(), RsError> {
        let req = SchemaRequest {
            schema_json: schema.to_json(),
        };
        let _: UnitReply = self.call(method::ALTER_TABLE, &req).await?;
        Ok(())
    }

    pub async fn drop_table(&self, table_id: u32) -> Result<(), RsError> {
        let _: UnitReply = self
            .call(method::DROP_TABLE, &TableRequest { table_id })
            .await?;
        Ok(())
    }

    /// Makes the server hold the empty range `[start_row, end_row)` (`None`: unbounded).
    /// Returns the range's id.
    pub async fn load_range(
        &self,
        table_id: u32,
        start_row: Option<&[u8]>,
        end_row: Option<&[u8]>,
    ) -> Result<u64, RsError> {
        // The wire spells an unbounded end as an empty row, so an empty row cannot be a bound.
        if start_row.is_some_and(<[u8]>::is_empty) || end_row.is_some_and(<[u8]>::is_empty) {
            return Err(RsError::InvalidInput(
                "a range bound must not be the empty row (use None for unbounded)".into(),
            ));
        }
        let req = LoadRangeRequest {
            table_id,
            start_row: start_row.map(<[u8]>::to_vec).unwrap_or_default(),
            end_row: end_row.map(<[u8]>::to_vec).unwrap_or_default(),
        };
        let reply: LoadRangeReply = self.call(method::LOAD_RANGE, &req).await?;
        Ok(reply.range_id)
    }

    /// Makes the server stop holding the range of `table_id` ending at `end_row` (`None`:
    /// unbounded) and returns its record, for another server's [`Self::adopt_range`]. An
    /// unknown range is an error of kind NotFound naming table and end row.
    pub async fn unload_range(
        &self,
        table_id: u32,
        end_row: Option<&[u8]>,
    ) -> Result<RangeRecord, RsError> {
        if end_row.is_some_and(<[u8]>::is_empty) {
            return Err(RsError::InvalidInput(
                "a range's end row must not be the empty row (use None for unbounded)".into(),
            ));
        }
        let req = UnloadRangeRequest {
            table_id,
            end_row: end_row.map(<[u8]>::to_vec).unwrap_or_default(),
        };
        let reply: RangeRecordReply = self.call(method::UNLOAD_RANGE, &req).await?;
        reply
            .record
            .ok_or_else(|| RsError::BadReply("rs.unload_range: no range record".into()))
    }

    /// Makes the server hold the range a record describes (from [`Self::unload_range`] of
    /// another server), registering the table from `schema` if it does not know it. Returns
    /// the range's new id there.
    pub async fn adopt_range(
        &self,
        schema: &TableSchema,
        record: &RangeRecord,
    ) -> Result<u64, RsError> {
        let req = AdoptRangeRequest {
            schema_json: schema.to_json(),
            record: Some(record.clone()),
        };
        let reply: LoadRangeReply = self.call(method::ADOPT_RANGE, &req).await?;
        Ok(reply.range_id)
    }

    /// Makes the server recover a dead server's ranges (records from
    /// [`the engine's `meta::read_state``] of `<dead_root>/meta`): it replays `<dead_root>/log` once and
    /// serves the ranges. Returns their ids there, in the order of `items`. Repeating the call
    /// with the same items is harmless. Deadline: `recovery_timeout`.
    pub async fn recover_ranges(
        &self,
        dead_root: &str,
        items: &[(TableSchema, RangeRecord)],
    ) -> Result<Vec<u64>, RsError> {
        let req = RecoverRangesRequest {
            dead_root: dead_root.to_string(),
            items: items
                .iter()
                .map(|(s, r)| AdoptRangeRequest {
                    schema_json: s.to_json(),
                    record: Some(r.clone()),
                })
                .collect(),
        };
        let reply: RecoverRangesReply = self
            .client
            .call_message(method::RECOVER_RANGES, &req, self.options.recovery_timeout)
            .await?;
        if reply.range_ids.len() != items.len() {
            return Err(RsError::BadReply(format!(
                "{} range ids for {} recovered ranges",
                reply.range_ids.len(),
                items.len()
            )));
        }
        Ok(reply.range_ids)
    }

    /// Splits the range of `table_id` holding `row` so that `row` starts the upper half.
    pub async fn split(&self, table_id: u32, row: &[u8]) -> Result<(), RsError> {
        let req = SplitRequest {
            table_id,
            row: row.to_vec(),
        };
        let _: UnitReply = self.call(method::SPLIT, &req).await?;
        Ok(())
    }

    /// Applies one batch, whole or not at all. A batch must fit in one message
    /// (`max_message_bytes`) and in the server's commit-log block; split larger ones.
    pub async fn update<M: AsMutationRef>(
        &self,
        table_id: u32,
        mutations: &[M],
    ) -> Result<(), RsError> {
        self.update_in_stream(table_id, mutations, StreamPlace::default())
            .await
    }

    /// [`RangeServerClient::update`] as batch `place.seq` of the ordered update stream
    /// `place.stream` (`server::streams`): the server applies it after batch `seq - 1` of the
    /// stream, and refuses it (Unavailable, not applied) if an earlier batch of the stream was
    /// not applied. Stream 0 is no stream.
    pub async fn update_in_stream<M: AsMutationRef>(
        &self,
        table_id: u32,
        mutations: &[M],
        place: StreamPlace,
    ) -> Result<(), RsError> {
        let size: usize = mutations
            .iter()
            .map(|m| {
                let m = m.as_mutation_ref();
                m.row.len() + m.qualifier.len() + m.value.len() + PACKED_CELL_OVERHEAD
            })
            .sum();
        let mut cells = Vec::with_capacity(size);
        encode_cells(mutations, &mut cells);
        let req = UpdateRequest {
            table_id,
            cells: cells.into(),
            count: u32::try_from(mutations.len()).map_err(|_| {
                RsError::InvalidInput(format!(
                    "a batch of {} mutations is above the limit of {} cells",
                    mutations.len(),
                    u32::MAX
                ))
            })?,
            stream: place.stream,
            seq: place.seq,
            acked: place.acked,
        };
        // The request envelope adds the method name and a few bytes of framing.
        let len = req.encoded_len() + 64;
        if len > self.options.max_message_bytes {
            return Err(RsError::InvalidInput(format!(
                "a batch of {} mutations encodes to about {len} bytes, above the message limit of {} bytes; send smaller batches",
                mutations.len(),
                self.options.max_message_bytes
            )));
        }
        let reply: UpdateReply = self.call(method::UPDATE, &req).await?;
        match (reply.not_here, reply.stream_refused) {
            (Some(n), _) => Err(RsError::NotHere {
                table_id: n.table_id,
                row: n.row,
            }),
            (None, Some(why)) => Err(RsError::StreamRefused(why)),
            (None, None) => Ok(()),
        }
    }

    /// Starts a scan; cells arrive in blocks as [`CellStream::next`] asks for them. Dropping the
    /// stream cancels the scan on the server.
    pub async fn scan(&self, table_id: u32, spec: &ScanSpec) -> Result<CellStream, RsError> {
        let req = ScanRequest {
            table_id,
            spec: Some(WireScanSpec::from(spec)),
        };
        let stream = self
            .client
            .call_stream(
                method::SCAN,
                req.encode_to_vec().into(),
                self.options.scan_timeout,
            )
            .await?;
        Ok(CellStream {
            stream,
            block: PackedCells::new(Bytes::new(), 0),
            blocks: 0,
            partial: None,
        })
    }

    /// The ranges of a table the server holds.
    pub async fn ranges(&self, table_id: u32) -> Result<Vec<RangeInfo>, RsError> {
        let reply: RangesReply = self
            .call(method::RANGES, &TableRequest { table_id })
            .await?;
        Ok(reply.ranges.into_iter().map(RangeInfo::from).collect())
    }

    /// The ranges of every table the server holds (the master learns of splits from this).
    pub async fn all_ranges(&self) -> Result<Vec<RangeInfo>, RsError> {
        self.ranges(0).await
    }

    /// The server engine's counters.
    pub async fn status(&self) -> Result<EngineStats, RsError> {
        let reply: StatusReply = self.call(method::STATUS, &UnitReply {}).await?;
        Ok(reply.into())
    }

    /// The server engine's counters and the iterator and combiner kinds it can run
    /// (`iterator:NAME`, `combiner:NAME`, sorted).
    pub async fn status_and_kinds(&self) -> Result<(EngineStats, Vec<String>), RsError> {
        let mut reply: StatusReply = self.call(method::STATUS, &UnitReply {}).await?;
        let kinds = std::mem::take(&mut reply.kinds);
        Ok((reply.into(), kinds))
    }

    /// Closes the connection.
    pub async fn close(&self) {
        self.client.close().await;
    }
}

/// The cells of one scan, read block by block from the server (one block buffered at a time).
pub struct CellStream {
    stream: ResponseStream,
    /// What is left of the last block received.
    block: PackedCells,
    blocks: u64,
    /// The partials of an aggregating scan received so far, merged.
    partial: Option<common::aggregate::AggregatePartial>,
}

impl CellStream {
    /// The next cell; `Ok(None)` at the end of the scan.
    pub async fn next(&mut self) -> Result<Option<Cell>, RsError> {
        loop {
            if let Some(c) = self.block.next_cell().map_err(RsError::BadReply)? {
                return Ok(Some(c));
            }
            match self.next_block().await? {
                Some(block) => self.block = block,
                None => return Ok(None),
            }
        }
    }

    /// Merges a block's aggregate partial (which comes without cells) into those received.
    fn add_partial(&mut self, p: WireAggregatePartial, count: u32) -> Result<(), RsError> {
        if count > 0 {
            return Err(RsError::BadReply(
                "a block carries both cells and an aggregate partial".into(),
            ));
        }
        let p = common::aggregate::AggregatePartial::try_from(p).map_err(RsError::BadReply)?;
        match &mut self.partial {
            Some(mine) => mine.merge(&p).map_err(RsError::BadReply)?,
            None => self.partial = Some(p),
        }
        Ok(())
    }

    /// The merged partials of an aggregating scan (`ScanSpec.aggregate`), once
    /// [`CellStream::next_block`] has returned `Ok(None)`; `None` if the server sent none (a
    /// server that does not know aggregates sends the scan's cells instead).
    pub fn take_partial(&mut self) -> Option<common::aggregate::AggregatePartial> {
        self.partial.take()
    }

    /// The rest of the current block, or the next block the server sends (never empty), its
    /// cells still packed; `Ok(None)` at the end of the scan. Aggregate partials are kept
    /// aside ([`CellStream::take_partial`]).
    pub async fn next_block(&mut self) -> Result<Option<PackedCells>, RsError> {
        if self.block.remaining() > 0 {
            let empty = PackedCells::new(Bytes::new(), 0);
            return Ok(Some(std::mem::replace(&mut self.block, empty)));
        }
        loop {
            let Some(payload) = self.stream.next().await? else {
                return Ok(None);
            };
            let block = ScanBlock::decode(payload).map_err(|e| RsError::BadReply(e.to_string()))?;
            self.blocks += 1;
            if let Some(n) = block.not_here {
                return Err(RsError::NotHere {
                    table_id: n.table_id,
                    row: n.row,
                });
            }
            if let Some(p) = block.aggregate {
                self.add_partial(p, block.count)?;
                continue;
            }
            let mut cells = PackedCells::new(block.cells, block.count);
            if cells.remaining() > 0 {
                return Ok(Some(cells));
            }
            // A block of no cells must hold no bytes either.
            cells.next_ref().map_err(RsError::BadReply)?;
        }
    }

    /// Messages received so far (for tests and reports).
    pub fn blocks_received(&self) -> u64 {
        self.blocks
    }

    /// Reads the rest of the scan into memory (bounded by the scan, not by this call: use
    /// [`CellStream::next`] for large scans).
    pub async fn collect(mut self) -> Result<Vec<Cell>, RsError> {
        let mut out = Vec::new();
        while let Some(c) = self.next().await? {
            out.push(c);
        }
        Ok(out)
    }
}

impl RangeServerClient {
    /// Compacts every range of a table (`None`: of every table) and waits for it.
    pub async fn compact(
        &self,
        table_id: Option<u32>,
        kind: CompactionKind,
    ) -> Result<(), RsError> {
        let req = CompactRequest {
            table_id: table_id.unwrap_or(0),
            kind: kind.code(),
        };
        let _: UnitReply = self.call(method::COMPACT, &req).await?;
        Ok(())
    }

    /// The server's root, the cell stores it uses and those it exported (the master's garbage
    /// collection of shared stores).
    pub async fn store_use(&self) -> Result<StoreUseReply, RsError> {
        self.call(method::STORE_USE, &UnitReply {}).await
    }

    /// Makes the server remove and forget exported stores no server uses; returns (removed,
    /// skipped).
    pub async fn release_stores(&self, paths: Vec<String>) -> Result<(u64, u64), RsError> {
        let reply: ReleaseStoresReply = self
            .call(method::RELEASE_STORES, &ReleaseStoresRequest { paths })
            .await?;
        Ok((reply.removed, reply.skipped))
    }

    /// Waits until the server's background maintenance is idle.
    pub async fn wait_for_maintenance(&self) -> Result<(), RsError> {
        let _: UnitReply = self
            .call(method::WAIT_FOR_MAINTENANCE, &UnitReply {})
            .await?;
        Ok(())
    }
}
