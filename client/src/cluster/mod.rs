//! The cluster client: the [`Client`] interface over a cluster of processes. Names and schemas
//! are read from Hyperspace; DDL goes to the master; cells go straight to the range servers,
//! found through ROOT (a Hyperspace attribute) -> METADATA (a table on a range server) -> the
//! range, cached per table and refreshed when a server answers "not here" or cannot be reached.
//!
//! Writes and scans ride over range moves, splits and recoveries by retrying for
//! [`ClusterOptions::retry_for`]. A batch a server refused as "not here" was not applied and is
//! sent again; a batch whose answer was lost with its server may have been applied, and is sent
//! again too (cells with client-set timestamps are idempotent; server-assigned ones may then
//! appear twice, as in Hypertable).

pub use ::proto::layout;
pub use ::proto::master as proto;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::proto::rs::client::{RangeServerClient, RangeServerClientOptions, RsError, StreamPlace};
pub use ::proto::rs::client::{engine_message, server_error};
use ::proto::rs::messages::{PackedCells, ScanCellRef};
use common::key::{self, Cell};
use common::scan_spec::{CellInterval, CellPos, RowInterval};
use common::{ErrorKind, Mutation, ScanSpec, TableSchema};
use hyperspace::client::{ClientOptions as HsOptions, Hyperspace};
use hyperspace::command::ErrorCode;
use parking_lot::Mutex;
use rpc::ClusterCredentials;
use tokio::sync::mpsc;

use crate::{
    Client, ClientError, CompactionKind, ListingEntry, Result, TableMutator, TableScanner,
    normalize_path, split_path,
};
use layout::*;
use proto::{DdlReply, DdlRequest, MASTER_NAME, MasterStatus, method};

/// Settings of the cluster client.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The Hyperspace replicas.
    pub hyperspace: Vec<SocketAddr>,
    /// A mutator sends its buffer once it holds this many cells...
    pub mutator_buffer_cells: usize,
    /// ... or this many bytes of rows, qualifiers and values.
    pub mutator_buffer_bytes: usize,
    /// Buffers a mutator has on their way to the servers at once (at least 1).
    pub mutator_in_flight: usize,
    /// Bytes of one update message to a range server (a buffer is sent as several).
    pub batch_bytes: usize,
    /// Blocks of cells (each at most one range-server message, `scan_block_bytes`) a scanner
    /// holds between the network and its reader, besides the one it reads from.
    pub scan_queue_blocks: usize,
    /// How long a call keeps retrying while ranges move or are recovered.
    pub retry_for: Duration,
    pub hyperspace_options: HsOptions,
    pub range_server: RangeServerClientOptions,
}

impl ClusterOptions {
    pub fn new(hyperspace: Vec<SocketAddr>) -> Self {
        Self {
            hyperspace,
            mutator_buffer_cells: 100_000,
            mutator_buffer_bytes: 1 << 20,
            mutator_in_flight: 3,
            batch_bytes: 4 << 20,
            scan_queue_blocks: 4,
            retry_for: Duration::from_secs(90),
            hyperspace_options: HsOptions::default(),
            range_server: RangeServerClientOptions {
                connect_timeout: Duration::from_secs(2),
                call_timeout: Duration::from_secs(30),
                ..Default::default()
            },
        }
    }
}

fn hs_err(e: hyperspace::client::ClientError) -> ClientError {
    // A refusal (TLS: another cluster's replicas, a wrong name) is not worth retrying.
    let kind = match e {
        hyperspace::client::ClientError::Refused { .. } => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    };
    ClientError::storage(kind, format!("hyperspace: {e}"))
}

/// A server that could not be connected to: unavailable (retried) unless the connection was
/// refused for good or could not be configured (`kind`, from the rpc error), which ends the
/// retries at once with the cause.
fn connect_failure(kind: ErrorKind, message: String) -> ClientError {
    match kind {
        ErrorKind::Unavailable => unavailable(message),
        kind => ClientError::storage(kind, message),
    }
}

fn unavailable(message: String) -> ClientError {
    ClientError::storage(ErrorKind::Unavailable, message)
}

/// One range of a table as METADATA records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeLocation {
    pub start_row: Option<Vec<u8>>,
    pub end_row: Option<Vec<u8>>,
    /// The range server (its location name, `rs<N>`).
    pub location: String,
}

/// Why one attempt failed.
enum Attempt {
    /// Locations may be stale or a server is down: refresh and try again.
    Retry(String),
    Fatal(ClientError),
}

impl From<ClientError> for Attempt {
    fn from(e: ClientError) -> Self {
        if e.kind() == ErrorKind::Unavailable {
            Attempt::Retry(e.to_string())
        } else {
            Attempt::Fatal(e)
        }
    }
}

/// The shared state of a cluster client.
pub(crate) struct Inner {
    hs: Hyperspace,
    credentials: ClusterCredentials,
    opts: ClusterOptions,
    servers: Mutex<HashMap<String, Arc<RangeServerClient>>>,
    locations: Mutex<HashMap<u32, Arc<Vec<RangeLocation>>>>,
    master: tokio::sync::Mutex<Option<Arc<rpc::Client>>>,
}

impl Inner {
    async fn attr_string(&self, node: &str, attr: &str) -> Result<Option<String>> {
        attr_string(&self.hs, node, attr).await
    }

    /// A connection to the range server at `location`.
    async fn server(&self, location: &str) -> Result<Arc<RangeServerClient>> {
        if let Some(c) = self.servers.lock().get(location) {
            return Ok(c.clone());
        }
        let addr = self
            .attr_string(&server_node(location), ADDR_ATTR)
            .await?
            .ok_or_else(|| unavailable(format!("range server {location} is not registered")))?;
        let addr: SocketAddr = addr.parse().map_err(|e| {
            ClientError::storage(
                ErrorKind::Corruption,
                format!("range server {location} has a bad address '{addr}': {e}"),
            )
        })?;
        let c = RangeServerClient::connect_with(
            addr,
            &self.credentials,
            self.opts.range_server.clone(),
        )
        .await
        .map_err(|e| {
            connect_failure(e.kind(), format!("range server {location} at {addr}: {e}"))
        })?;
        let c = Arc::new(c);
        self.servers.lock().insert(location.to_string(), c.clone());
        Ok(c)
    }

    fn forget_server(&self, location: &str) {
        self.servers.lock().remove(location);
    }

    fn invalidate(&self, table_id: u32) {
        let mut l = self.locations.lock();
        l.remove(&table_id);
        // A stale METADATA location is as likely as a stale user range.
        l.remove(&METADATA_ID);
    }

    /// The ranges of a table in row order, covering every row.
    async fn ranges(&self, table_id: u32) -> std::result::Result<Arc<Vec<RangeLocation>>, Attempt> {
        if let Some(r) = self.locations.lock().get(&table_id) {
            return Ok(r.clone());
        }
        let root = self
            .attr_string(ROOT, LOCATION_ATTR)
            .await?
            .ok_or_else(|| Attempt::Retry("the METADATA table is not assigned yet".into()))?;
        let ranges = if table_id == METADATA_ID {
            vec![RangeLocation {
                start_row: None,
                end_row: None,
                location: root,
            }]
        } else {
            let (lo, hi) = metadata_table_bounds(table_id);
            let spec = ScanSpec {
                row_intervals: vec![RowInterval {
                    start: Bound::Included(lo),
                    end: Bound::Excluded(hi),
                }],
                ..Default::default()
            };
            let server = self.server(&root).await?;
            let cells = match server.scan(METADATA_ID, &spec).await {
                Ok(s) => s.collect().await,
                Err(e) => Err(e),
            };
            let cells = cells.map_err(|e| self.rs_failure(&root, METADATA_ID, e))?;
            parse_locations(table_id, &cells).map_err(Attempt::Retry)?
        };
        let ranges = Arc::new(ranges);
        self.locations.lock().insert(table_id, ranges.clone());
        Ok(ranges)
    }

    /// Classifies a range server failure, dropping what it makes stale.
    fn rs_failure(&self, location: &str, table_id: u32, e: RsError) -> Attempt {
        match e {
            RsError::NotHere { .. } => {
                self.invalidate(table_id);
                Attempt::Retry(format!("range server {location}: {e}"))
            }
            // An earlier batch of the stream failed, and says why itself.
            RsError::StreamRefused(_) => Attempt::Retry(format!("range server {location}: {e}")),
            e if e.kind() == ErrorKind::Unavailable => {
                self.forget_server(location);
                self.invalidate(table_id);
                Attempt::Retry(format!("range server {location}: {e}"))
            }
            e => Attempt::Fatal(server_error(location, e)),
        }
    }

    /// Runs `f` until it succeeds, fails for good, or [`ClusterOptions::retry_for`] passes.
    async fn retrying<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, Attempt>>,
    {
        let mut backoff = Backoff::new(self.opts.retry_for);
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(why)) => backoff.wait(what, why).await?,
            }
        }
    }

    /// A connection to the active master (its address is in Hyperspace).
    async fn master(&self) -> Result<Arc<rpc::Client>> {
        let mut m = self.master.lock().await;
        if let Some(c) = m.as_ref() {
            return Ok(c.clone());
        }
        let c = connect_master(
            &self.hs,
            &self.credentials,
            self.opts.range_server.idle_timeout,
        )
        .await?;
        let c = Arc::new(c);
        *m = Some(c.clone());
        Ok(c)
    }

    /// A DDL call to the master, retried while the master changes.
    async fn ddl(&self, m: &'static str, req: DdlRequest) -> Result<String> {
        self.retrying(m, || async {
            let master = self.master().await?;
            match master
                .call_message::<_, DdlReply>(m, &req, Duration::from_secs(120))
                .await
            {
                Ok(reply) => reply.into_result().map_err(Attempt::Fatal),
                Err(e) if e.is_retryable() => {
                    *self.master.lock().await = None;
                    Err(Attempt::Retry(format!("master: {e}")))
                }
                Err(e) => Err(Attempt::Fatal(ClientError::storage(
                    e.kind(),
                    format!("master: {e}"),
                ))),
            }
        })
        .await
    }

    async fn table_id(&self, path: &str) -> Result<u32> {
        let p = normalize_path(path)?;
        let (parent, _) = split_path(&p)?;
        if parent != "/" && !self.hs.exists(&ns_node(&parent)).await.map_err(hs_err)? {
            return Err(ClientError::TableNotFound(p));
        }
        match self.attr_string(&ns_node(&p), TABLE_ID_ATTR).await? {
            Some(id) => id.parse().map_err(|_| {
                ClientError::storage(
                    ErrorKind::Corruption,
                    format!("table {p} has a bad id '{id}' in hyperspace"),
                )
            }),
            None => Err(ClientError::TableNotFound(p)),
        }
    }

    async fn schema(&self, id: u32) -> Result<TableSchema> {
        let json = self
            .attr_string(&table_node(id), SCHEMA_ATTR)
            .await?
            .ok_or_else(|| ClientError::TableNotFound(format!("id {id}")))?;
        TableSchema::from_json(&json).map_err(|e| {
            ClientError::storage(
                ErrorKind::Corruption,
                format!("table {id}: bad schema in hyperspace: {e}"),
            )
        })
    }

    /// The live range servers, by location.
    async fn live_servers(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for e in self.hs.readdir(SERVERS).await.map_err(hs_err)? {
            if self
                .attr_string(&server_node(&e.name), ADDR_ATTR)
                .await?
                .is_some()
            {
                out.push(e.name);
            }
        }
        Ok(out)
    }

    /// Sends `cells` to the servers holding their rows; every cell is applied once this returns
    /// `Ok` (see the module comment about lost answers).
    async fn apply(&self, table_id: u32, cells: Vec<Mutation>) -> Result<()> {
        let mut backoff = Backoff::new(self.opts.retry_for);
        let mut pending = cells;
        loop {
            match self.apply_once(table_id, pending).await {
                Ok(()) => return Ok(()),
                Err((_, Attempt::Fatal(e))) => return Err(e),
                Err((left, Attempt::Retry(why))) => {
                    backoff.wait("update", why).await?;
                    pending = left;
                }
            }
        }
    }

    /// One round of [`Inner::apply`]; on failure, the cells not applied and why.
    async fn apply_once(
        &self,
        table_id: u32,
        batch: Vec<Mutation>,
    ) -> std::result::Result<(), (Vec<Mutation>, Attempt)> {
        let ranges = match self.ranges(table_id).await {
            Ok(r) => r,
            Err(e) => return Err((batch, e)),
        };
        let sends = route(&ranges, batch)
            .into_iter()
            .map(|(loc, cells)| async move {
                let res = self.send_to(&loc, table_id, &cells).await;
                (loc, cells, res)
            });
        let mut why = None;
        let mut fatal = None;
        let mut failed = Vec::new();
        for (loc, cells, res) in futures_join_all(sends).await {
            if let Err((done, e)) = res {
                failed.extend(cells.into_iter().skip(done));
                match self.rs_failure(&loc, table_id, e) {
                    Attempt::Fatal(e) => fatal = Some(e),
                    Attempt::Retry(w) => why = Some(w),
                }
            }
        }
        if let Some(e) = fatal {
            return Err((failed, Attempt::Fatal(e)));
        }
        match why {
            None => Ok(()),
            Some(w) => Err((failed, Attempt::Retry(w))),
        }
    }

    /// Sends one server's cells in batches of at most `batch_bytes`; returns how many were
    /// applied, or how many were applied before the failure.
    async fn send_to(
        &self,
        location: &str,
        table_id: u32,
        cells: &[Mutation],
    ) -> std::result::Result<usize, (usize, RsError)> {
        let server = self
            .server(location)
            .await
            .map_err(|e| (0, unreachable_server(e)))?;
        let mut done = 0;
        while done < cells.len() {
            let end = done + first_batch_len(&cells[done..], self.opts.batch_bytes);
            server
                .update(table_id, &cells[done..end])
                .await
                .map_err(|e| (done, e))?;
            done = end;
        }
        Ok(done)
    }
}

/// Pauses between attempts, doubling up to half a second, until a deadline.
struct Backoff {
    start: Instant,
    pause: Duration,
    limit: Duration,
}

impl Backoff {
    fn new(limit: Duration) -> Self {
        Self {
            start: Instant::now(),
            pause: Duration::from_millis(20),
            limit,
        }
    }

    async fn wait(&mut self, what: &str, why: String) -> Result<()> {
        if self.start.elapsed() >= self.limit {
            return Err(unavailable(format!(
                "{what}: gave up after {:.1} s: {why}",
                self.start.elapsed().as_secs_f64()
            )));
        }
        tracing::debug!(what, why, "retrying");
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_millis(500));
        Ok(())
    }
}

/// Polls a set of futures to completion concurrently (no extra dependency for one join).
async fn futures_join_all<F: std::future::Future>(
    futs: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let futs: Vec<_> = futs.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    let mut futs: Vec<Option<_>> = futs.into_iter().map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, slot) in futs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        outs[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outs.into_iter()
        .map(|o| o.expect("every future finished"))
        .collect()
}

/// An attribute as text; `None` if the node or the attribute does not exist.
async fn attr_string(hs: &Hyperspace, node: &str, attr: &str) -> Result<Option<String>> {
    match hs.attr_get(node, attr).await {
        Ok(v) => Ok(v.map(|v| String::from_utf8_lossy(&v).into_owned())),
        Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(None),
        Err(e) => Err(hs_err(e)),
    }
}

/// Connects to the active master (its address is the `addr` attribute of `/ht/master`), with
/// a short idle timeout so that a dead master is noticed in seconds and its standby found.
pub async fn connect_master(
    hs: &Hyperspace,
    credentials: &ClusterCredentials,
    idle_timeout: Duration,
) -> Result<rpc::Client> {
    let addr = attr_string(hs, MASTER, ADDR_ATTR)
        .await?
        .ok_or_else(|| unavailable("no master is active".into()))?;
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| unavailable(format!("bad master address '{addr}': {e}")))?;
    let options = rpc::ClientOptions {
        idle_timeout,
        connect_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let config = credentials
        .client_config(options.idle_timeout)
        .map_err(|e| connect_failure(ErrorKind::Internal, format!("master at {addr}: {e}")))?;
    rpc::Client::connect_with(addr, MASTER_NAME, config, options)
        .await
        .map_err(|e| connect_failure(e.kind(), format!("master at {addr}: {e}")))
}

/// Routes every cell to the server holding its row, keeping the order of each server's cells.
fn route(ranges: &[RangeLocation], cells: Vec<Mutation>) -> Vec<(String, Vec<Mutation>)> {
    let first = &ranges[0].location;
    if ranges.iter().all(|r| r.location == *first) {
        return vec![(first.clone(), cells)];
    }
    // Servers by index, so that no name is copied per cell.
    let mut names: Vec<&str> = ranges.iter().map(|r| r.location.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut groups: Vec<Vec<Mutation>> = vec![Vec::new(); names.len()];
    for m in cells {
        let loc = locate(ranges, &m.row).location.as_str();
        let i = names.binary_search(&loc).unwrap_or(0);
        groups[i].push(m);
    }
    names
        .into_iter()
        .zip(groups)
        .filter(|(_, cells)| !cells.is_empty())
        .map(|(name, cells)| (name.to_string(), cells))
        .collect()
}

/// How many of `cells` go into one update batch of about `batch_bytes` (at least one cell).
fn first_batch_len(cells: &[Mutation], batch_bytes: usize) -> usize {
    let mut end = 0;
    let mut bytes = 0;
    while end < cells.len() && (end == 0 || bytes < batch_bytes) {
        let m = &cells[end];
        bytes += m.row.len() + m.qualifier.len() + m.value.len() + 24;
        end += 1;
    }
    end
}

/// Cuts one server's cells into batches of about `batch_bytes` ([`first_batch_len`]).
fn cut_batches(mut cells: Vec<Mutation>, batch_bytes: usize) -> Vec<Vec<Mutation>> {
    let mut out = Vec::new();
    loop {
        let end = first_batch_len(&cells, batch_bytes);
        if end == cells.len() {
            out.push(cells);
            return out;
        }
        let rest = cells.split_off(end);
        out.push(std::mem::replace(&mut cells, rest));
    }
}

/// A range server that cannot be reached, as the error its call would have given: unavailable
/// (retried), unless it refused the connection for good ([`connect_failure`]).
fn unreachable_server(e: ClientError) -> RsError {
    let kind = match e.kind() {
        ErrorKind::Internal => ErrorKind::Internal,
        _ => ErrorKind::Unavailable,
    };
    RsError::Rpc(rpc::RpcError::service(kind, e.to_string()))
}

/// The range holding `row` (ranges cover every row: checked by [`parse_locations`]).
fn locate<'a>(ranges: &'a [RangeLocation], row: &[u8]) -> &'a RangeLocation {
    let i = ranges.partition_point(|r| r.end_row.as_deref().is_some_and(|e| e <= row));
    &ranges[i.min(ranges.len() - 1)]
}

/// Turns a table's METADATA cells into its ranges, checking that they cover every row.
pub fn parse_locations(
    table_id: u32,
    cells: &[Cell],
) -> std::result::Result<Vec<RangeLocation>, String> {
    // METADATA row -> (start row, location) as far as read.
    type Row = (Option<Vec<u8>>, Option<String>);
    let mut rows: BTreeMap<Vec<u8>, Row> = BTreeMap::new();
    for c in cells {
        let e = rows.entry(c.key.row.clone()).or_default();
        match c.key.family {
            LOCATION_FAMILY => e.1 = Some(String::from_utf8_lossy(&c.value).into_owned()),
            START_ROW_FAMILY => e.0 = Some(c.value.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut expect_start: Option<Vec<u8>> = None;
    for (row, (start, loc)) in rows {
        let Some((tid, end)) = parse_metadata_row(&row) else {
            return Err(format!(
                "bad METADATA row {:?}",
                String::from_utf8_lossy(&row)
            ));
        };
        if tid != table_id {
            continue;
        }
        let start = start.filter(|s| !s.is_empty());
        if start != expect_start {
            return Err(format!(
                "METADATA of table {table_id} has a gap or overlap before row {:?} (being updated)",
                String::from_utf8_lossy(&row)
            ));
        }
        let Some(location) = loc else {
            return Err(format!(
                "METADATA row {:?} has no location",
                String::from_utf8_lossy(&row)
            ));
        };
        expect_start = end.clone();
        let last = end.is_none();
        out.push(RangeLocation {
            start_row: start,
            end_row: end,
            location,
        });
        if last {
            return Ok(out);
        }
    }
    Err(format!(
        "METADATA of table {table_id} does not reach the end of the table (being created or updated)"
    ))
}

/// A database on a cluster of processes.
pub struct ClusterClient {
    inner: Arc<Inner>,
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterClient({:?})", self.inner.opts.hyperspace)
    }
}

impl ClusterClient {
    /// Connects to the cluster whose Hyperspace replicas are `opts.hyperspace`, presenting
    /// `credentials` (the `client` certificate).
    pub fn connect(credentials: ClusterCredentials, opts: ClusterOptions) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ht-cluster-client")
            .enable_all()
            .build()
            .map_err(|e| {
                ClientError::storage(
                    ErrorKind::Internal,
                    format!("cannot start the client runtime: {e}"),
                )
            })?;
        let (hs, _events) = rt
            .block_on(Hyperspace::connect(
                opts.hyperspace.clone(),
                credentials.clone(),
                opts.hyperspace_options.clone(),
            ))
            .map_err(hs_err)?;
        Ok(Self {
            inner: Arc::new(Inner {
                hs,
                credentials,
                opts,
                servers: Mutex::new(HashMap::new()),
                locations: Mutex::new(HashMap::new()),
                master: tokio::sync::Mutex::new(None),
            }),
            rt,
        })
    }

    fn run<T>(&self, f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        self.rt.block_on(f)
    }

    /// A DDL call to the master on the normalised `path`; returns the reply's schema JSON.
    fn ddl(
        &self,
        m: &'static str,
        path: &str,
        to: &str,
        schema: Option<&TableSchema>,
    ) -> Result<String> {
        let req = DdlRequest {
            path: normalize_path(path)?,
            to: to.to_string(),
            schema_json: schema.map(TableSchema::to_json).unwrap_or_default(),
        };
        self.run(self.inner.ddl(m, req))
    }

    /// The ranges of a table and where they are (for tools and tests).
    pub fn table_locations(&self, path: &str) -> Result<Vec<RangeLocation>> {
        let inner = &self.inner;
        self.run(async {
            let id = inner.table_id(path).await?;
            inner.invalidate(id);
            let r = inner.retrying("locate", || inner.ranges(id)).await?;
            Ok(r.as_ref().clone())
        })
    }

    /// The master's view of the cluster (`ht status`).
    pub fn master_status(&self) -> Result<MasterStatus> {
        let inner = &self.inner;
        self.run(async {
            inner
                .retrying("master status", || async {
                    let m = inner.master().await?;
                    match m
                        .call_message::<_, MasterStatus>(
                            method::STATUS,
                            &proto::Empty {},
                            Duration::from_secs(5),
                        )
                        .await
                    {
                        Ok(s) => Ok(s),
                        Err(e) => {
                            // The next attempt looks the active master up again.
                            *inner.master.lock().await = None;
                            Err(Attempt::Retry(format!("master: {e}")))
                        }
                    }
                })
                .await
        })
    }

    /// The Hyperspace session (for tools).
    pub fn hyperspace(&self) -> &Hyperspace {
        &self.inner.hs
    }

    /// Hyperspace's status as its leader reports it (`ht status`).
    pub fn hyperspace_status(&self) -> Result<hyperspace::service::StatusReply> {
        self.run(async { self.inner.hs.status().await.map_err(hs_err) })
    }

    /// Asks the master to balance ranges over the live servers now.
    pub fn balance(&self) -> Result<()> {
        self.run(self.inner.ddl(method::BALANCE, DdlRequest::default()))
            .map(|_| ())
    }
}

impl Drop for ClusterClient {
    fn drop(&mut self) {
        let hs = self.inner.hs.clone();
        self.rt.block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(2), hs.close_session()).await;
        });
    }
}

impl Client for ClusterClient {
    fn create_namespace(&self, path: &str) -> Result<()> {
        self.ddl(method::CREATE_NAMESPACE, path, "", None)
            .map(|_| ())
    }

    fn drop_namespace(&self, path: &str) -> Result<()> {
        self.ddl(method::DROP_NAMESPACE, path, "", None).map(|_| ())
    }

    fn namespace_exists(&self, path: &str) -> Result<bool> {
        let path = normalize_path(path)?;
        if path == "/" {
            return Ok(true);
        }
        self.run(async {
            match self.inner.hs.readdir(&ns_node(&split_path(&path)?.0)).await {
                Ok(entries) => {
                    let name = split_path(&path)?.1;
                    Ok(entries.iter().any(|e| e.is_dir && e.name == name))
                }
                Err(e) if e.code() == Some(ErrorCode::NotFound) => Ok(false),
                Err(e) => Err(hs_err(e)),
            }
        })
    }

    fn listing(&self, path: &str) -> Result<Vec<ListingEntry>> {
        let path = normalize_path(path)?;
        if !self.namespace_exists(&path)? {
            return Err(ClientError::NamespaceNotFound(path));
        }
        let mut out: Vec<ListingEntry> = self
            .run(async { self.inner.hs.readdir(&ns_node(&path)).await.map_err(hs_err) })?
            .into_iter()
            .map(|e| ListingEntry {
                name: e.name,
                is_namespace: e.is_dir,
            })
            .collect();
        out.sort();
        Ok(out)
    }

    fn create_table(&self, path: &str, schema: TableSchema) -> Result<TableSchema> {
        parse_schema(&self.ddl(method::CREATE_TABLE, path, "", Some(&schema))?)
    }

    fn table_schema(&self, path: &str) -> Result<TableSchema> {
        let inner = &self.inner;
        self.run(async {
            let id = inner.table_id(path).await?;
            inner.schema(id).await
        })
    }

    fn table_exists(&self, path: &str) -> Result<bool> {
        match self.run(self.inner.table_id(path)) {
            Ok(_) => Ok(true),
            Err(ClientError::TableNotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn alter_table(&self, path: &str, schema: TableSchema) -> Result<TableSchema> {
        parse_schema(&self.ddl(method::ALTER_TABLE, path, "", Some(&schema))?)
    }

    fn rename_table(&self, from: &str, to: &str) -> Result<()> {
        let to = normalize_path(to)?;
        self.ddl(method::RENAME_TABLE, from, &to, None).map(|_| ())
    }

    fn drop_table(&self, path: &str) -> Result<()> {
        self.ddl(method::DROP_TABLE, path, "", None).map(|_| ())
    }

    fn mutator(&self, table: &str) -> Result<Box<dyn TableMutator>> {
        let table_id = self.run(self.inner.table_id(table))?;
        Ok(Box::new(ClusterMutator {
            inner: self.inner.clone(),
            rt: self.rt.handle().clone(),
            table_id,
            buf: Vec::new(),
            buf_bytes: 0,
            limit_cells: self.inner.opts.mutator_buffer_cells.max(1),
            limit_bytes: self.inner.opts.mutator_buffer_bytes.max(1),
            flushed: 0,
            depth: self.inner.opts.mutator_in_flight.max(1),
            in_flight: Default::default(),
            routed_with: None,
            streams: HashMap::new(),
        }))
    }

    fn scanner(&self, table: &str, spec: ScanSpec) -> Result<Box<dyn TableScanner>> {
        let table_id = self.run(self.inner.table_id(table))?;
        if spec.row_offset > 0 && spec.cell_offset > 0 {
            return Err(ClientError::InvalidInput(
                "OFFSET and CELL_OFFSET cannot be combined".into(),
            ));
        }
        let (tx, rx) = mpsc::channel(self.inner.opts.scan_queue_blocks.max(1));
        let inner = self.inner.clone();
        self.rt.spawn(async move {
            let res = scan_table(&inner, table_id, spec, &tx).await;
            if let Err(e) = res {
                let _ = tx.send(Err(e)).await;
            }
        });
        Ok(Box::new(ClusterScanner {
            rx,
            block: PackedCells::new(Default::default(), 0),
            done: false,
        }))
    }

    fn compact(&self, table: Option<&str>, kind: CompactionKind) -> Result<()> {
        let inner = &self.inner;
        self.run(async {
            let (id, servers) = match table {
                Some(t) => {
                    let id = inner.table_id(t).await?;
                    inner.invalidate(id);
                    let ranges = inner.retrying("locate", || inner.ranges(id)).await?;
                    let mut locs: Vec<String> = ranges.iter().map(|r| r.location.clone()).collect();
                    locs.dedup();
                    (Some(id), locs)
                }
                None => (None, inner.live_servers().await?),
            };
            for loc in servers {
                let server = inner.server(&loc).await?;
                server
                    .compact(id, kind)
                    .await
                    .map_err(|e| server_error(&loc, e))?;
            }
            Ok(())
        })
    }

    fn wait_for_maintenance(&self) -> Result<()> {
        let inner = &self.inner;
        self.run(async {
            for loc in inner.live_servers().await? {
                let server = inner.server(&loc).await?;
                server.wait_for_maintenance().await.map_err(|e| {
                    ClientError::storage(e.kind(), format!("range server {loc}: {e}"))
                })?;
            }
            Ok(())
        })
    }

    fn status(&self) -> Result<Vec<(String, String)>> {
        let st = self.master_status()?;
        let live = st.servers.iter().filter(|s| s.live).count();
        let ranges: u32 = st.servers.iter().map(|s| s.ranges).sum();
        Ok(vec![
            ("mode".into(), "cluster".into()),
            ("range_servers".into(), live.to_string()),
            ("ranges".into(), ranges.to_string()),
            ("root_location".into(), st.root_location),
            ("operations".into(), st.operations.len().to_string()),
            ("moves".into(), st.moves.to_string()),
            ("recoveries".into(), st.recoveries.to_string()),
        ])
    }

    fn balance(&self) -> Result<()> {
        ClusterClient::balance(self)
    }

    fn close(&self) -> Result<()> {
        Ok(())
    }
}

fn parse_schema(json: &str) -> Result<TableSchema> {
    TableSchema::from_json(json).map_err(|e| {
        ClientError::storage(
            ErrorKind::Corruption,
            format!("the master sent a bad schema: {e}"),
        )
    })
}

/// Buffers cells and sends full buffers while the next ones fill: up to
/// [`ClusterOptions::mutator_in_flight`] buffers are on their way at once, each cut into one
/// batch per range server. The batches to one server travel as an ordered update stream
/// (`rangeserver::server::streams`), so the server applies them in the order the cells were
/// set even though they are in flight together, and refuses every later batch once one fails.
/// All buffers in flight were routed with the same range locations, so a row's cells go to one
/// server. When a batch fails, every buffer in flight is waited for and the cells not applied
/// are sent again in order, one batch at a time, with retries (`Inner::apply`). Memory: the
/// buffer filling plus the buffers in flight. `flush` waits for them all.
struct ClusterMutator {
    inner: Arc<Inner>,
    rt: tokio::runtime::Handle,
    table_id: u32,
    buf: Vec<Mutation>,
    buf_bytes: usize,
    limit_cells: usize,
    limit_bytes: usize,
    flushed: u64,
    depth: usize,
    in_flight: std::collections::VecDeque<Flight>,
    /// The locations the buffers in flight were routed with.
    routed_with: Option<Arc<Vec<RangeLocation>>>,
    /// The update stream to each server.
    streams: HashMap<String, UpdateStream>,
}

/// This mutator's ordered update stream to one server.
struct UpdateStream {
    id: u64,
    /// The next batch's number.
    next: u64,
    /// Leading batches seen applied.
    acked: u64,
}

/// One buffer in flight: a batch per server (or several, for a large buffer).
struct Flight {
    parts: Vec<(String, BatchTask)>,
}

type BatchTask = tokio::task::JoinHandle<(Vec<Mutation>, std::result::Result<(), RsError>)>;

impl ClusterMutator {
    /// Starts sending the buffer, after waiting for room in flight.
    fn send(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        while self.in_flight.len() >= self.depth {
            self.settle_front()?;
        }
        let cells = std::mem::take(&mut self.buf);
        self.buf_bytes = 0;
        let n = cells.len() as u64;
        let ranges = match self.rt.block_on(self.inner.ranges(self.table_id)) {
            Ok(r) => r,
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::Retry(_)) => {
                // No locations now: finish what is in flight, then send with retries.
                self.settle_all()?;
                self.rt.block_on(self.inner.apply(self.table_id, cells))?;
                self.flushed += n;
                return Ok(());
            }
        };
        if self
            .routed_with
            .as_ref()
            .is_some_and(|r| !Arc::ptr_eq(r, &ranges))
        {
            // New locations: a row might now go to another server than in a buffer still in
            // flight, and overtake it there.
            self.settle_all()?;
        }
        self.routed_with = Some(ranges.clone());
        let mut parts = Vec::new();
        for (location, cells) in route(&ranges, cells) {
            for batch in cut_batches(cells, self.inner.opts.batch_bytes) {
                let st = self
                    .streams
                    .entry(location.clone())
                    .or_insert_with(|| UpdateStream {
                        id: new_stream_id(),
                        next: 0,
                        acked: 0,
                    });
                let place = StreamPlace {
                    stream: st.id,
                    seq: st.next,
                    acked: st.acked,
                };
                st.next += 1;
                let (inner, loc, table_id) = (self.inner.clone(), location.clone(), self.table_id);
                let task = self.rt.spawn(async move {
                    let res = match inner.server(&loc).await {
                        Ok(server) => server.update_in_stream(table_id, &batch, place).await,
                        Err(e) => Err(unreachable_server(e)),
                    };
                    (batch, res)
                });
                parts.push((location.clone(), task));
            }
        }
        self.in_flight.push_back(Flight { parts });
        Ok(())
    }

    /// Waits for the oldest buffer in flight; its cells are durable once this returns `Ok`.
    fn settle_front(&mut self) -> Result<()> {
        let Some(flight) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let mut failed = Vec::new();
        self.collect(flight, &mut failed)?;
        if failed.is_empty() {
            return Ok(());
        }
        // Every later batch to a server that failed was refused: wait for all buffers in
        // flight, then send what was not applied, in order.
        while let Some(flight) = self.in_flight.pop_front() {
            self.collect(flight, &mut failed)?;
        }
        self.routed_with = None;
        let mut pending = Vec::new();
        let mut fatal = None;
        let mut counted = 0u64;
        for (location, cells, e) in failed {
            self.streams.remove(&location);
            if let Attempt::Fatal(e) = self.inner.rs_failure(&location, self.table_id, e) {
                fatal.get_or_insert(e);
            }
            counted += cells.len() as u64;
            pending.extend(cells);
        }
        if let Some(e) = fatal {
            return Err(e);
        }
        self.rt.block_on(self.inner.apply(self.table_id, pending))?;
        self.flushed += counted;
        Ok(())
    }

    /// Waits for every batch of `flight`: counts the applied ones, gathers the others.
    fn collect(
        &mut self,
        flight: Flight,
        failed: &mut Vec<(String, Vec<Mutation>, RsError)>,
    ) -> Result<()> {
        let tasks = flight
            .parts
            .into_iter()
            .map(|(loc, task)| async move { (loc, task.await) });
        for (location, joined) in self.rt.block_on(futures_join_all(tasks)) {
            let (cells, res) = joined.map_err(|e| {
                ClientError::storage(ErrorKind::Internal, format!("update task failed: {e}"))
            })?;
            match res {
                Ok(()) => {
                    self.flushed += cells.len() as u64;
                    if let Some(st) = self.streams.get_mut(&location) {
                        st.acked += 1;
                    }
                }
                Err(e) => failed.push((location, cells, e)),
            }
        }
        Ok(())
    }

    fn settle_all(&mut self) -> Result<()> {
        while !self.in_flight.is_empty() {
            self.settle_front()?;
        }
        Ok(())
    }
}

/// A random update stream id (never 0, which means no stream).
fn new_stream_id() -> u64 {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

impl TableMutator for ClusterMutator {
    fn set(&mut self, m: Mutation) -> Result<()> {
        self.buf_bytes += m.row.len() + m.qualifier.len() + m.value.len() + 32;
        self.buf.push(m);
        if self.buf.len() >= self.limit_cells || self.buf_bytes >= self.limit_bytes {
            self.send()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.send()?;
        self.settle_all()
    }

    fn cells_flushed(&self) -> u64 {
        self.flushed
    }
}

struct ClusterScanner {
    /// Blocks of cells from `scan_table`, never empty; an error ends the scan.
    rx: mpsc::Receiver<Result<PackedCells>>,
    /// What is left of the last block received. Its cells are decoded here, on the reader's
    /// thread, which also frees them.
    block: PackedCells,
    done: bool,
}

impl TableScanner for ClusterScanner {
    fn next_cell(&mut self) -> Result<Option<Cell>> {
        loop {
            match self.block.next_cell() {
                Ok(Some(c)) => return Ok(Some(c)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    self.block = PackedCells::new(Default::default(), 0);
                    return Err(ClientError::storage(
                        ErrorKind::Corruption,
                        format!("scan: a range server's answer is malformed: {e}"),
                    ));
                }
            }
            if self.done {
                return Ok(None);
            }
            match self.rx.blocking_recv() {
                Some(Ok(block)) => self.block = block,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                None => self.done = true,
            }
        }
    }
}

/// The row span `[start, end)` of an interval (`None`: unbounded).
fn interval_rows(i: &Interval) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    match i {
        Interval::Rows(r) => (
            match &r.start {
                Bound::Included(s) | Bound::Excluded(s) => Some(s.clone()),
                Bound::Unbounded => None,
            },
            match &r.end {
                // Rows up to and including `e`: the span ends just after it.
                Bound::Included(e) => Some(row_successor(e)),
                Bound::Excluded(e) => Some(e.clone()),
                Bound::Unbounded => None,
            },
        ),
        Interval::Cells(c) => (
            match &c.start {
                Bound::Included(p) | Bound::Excluded(p) => Some(p.row.clone()),
                Bound::Unbounded => None,
            },
            match &c.end {
                Bound::Included(p) | Bound::Excluded(p) => Some(row_successor(&p.row)),
                Bound::Unbounded => None,
            },
        ),
    }
}

/// The smallest row above `r`.
fn row_successor(r: &[u8]) -> Vec<u8> {
    let mut s = r.to_vec();
    s.push(0);
    s
}

#[derive(Clone)]
enum Interval {
    Rows(RowInterval),
    Cells(CellInterval),
}

impl Interval {
    /// The encoded key it starts at (the order the engine processes intervals in).
    fn start_key(&self) -> Vec<u8> {
        match self {
            Self::Rows(r) => match &r.start {
                Bound::Included(s) => key::row_start(s),
                Bound::Excluded(s) => key::row_end(s),
                Bound::Unbounded => Vec::new(),
            },
            Self::Cells(c) => match &c.start {
                Bound::Included(p) => key::cell_start(&p.row, p.family, &p.qualifier),
                Bound::Excluded(p) => key::cell_end(&p.row, p.family, &p.qualifier),
                Bound::Unbounded => Vec::new(),
            },
        }
    }

    /// The interval cut to the rows `[start, end)`.
    fn clamp(&self, start: &Option<Vec<u8>>, end: &Option<Vec<u8>>) -> Interval {
        match self {
            Self::Rows(r) => {
                let mut r = r.clone();
                if let Some(s) = start {
                    let below = match &r.start {
                        Bound::Included(x) | Bound::Excluded(x) => x < s,
                        Bound::Unbounded => true,
                    };
                    if below {
                        r.start = Bound::Included(s.clone());
                    }
                }
                if let Some(e) = end {
                    let beyond = match &r.end {
                        Bound::Included(x) | Bound::Excluded(x) => x >= e,
                        Bound::Unbounded => true,
                    };
                    if beyond {
                        r.end = Bound::Excluded(e.clone());
                    }
                }
                Self::Rows(r)
            }
            Self::Cells(c) => {
                let mut c = c.clone();
                let row_pos = |row: &Vec<u8>| CellPos {
                    row: row.clone(),
                    family: 0,
                    qualifier: Vec::new(),
                };
                if let Some(s) = start {
                    let below = match &c.start {
                        Bound::Included(p) | Bound::Excluded(p) => &p.row < s,
                        Bound::Unbounded => true,
                    };
                    if below {
                        c.start = Bound::Included(row_pos(s));
                    }
                }
                if let Some(e) = end {
                    let beyond = match &c.end {
                        Bound::Included(p) | Bound::Excluded(p) => &p.row >= e,
                        Bound::Unbounded => true,
                    };
                    if beyond {
                        c.end = Bound::Excluded(row_pos(e));
                    }
                }
                Self::Cells(c)
            }
        }
    }
}

fn overlaps(a: &(Option<Vec<u8>>, Option<Vec<u8>>), r: &RangeLocation) -> bool {
    let starts_before_end = match (&a.0, &r.end_row) {
        (Some(s), Some(e)) => s < e,
        _ => true,
    };
    let ends_after_start = match (&a.1, &r.start_row) {
        (Some(e), Some(s)) => e > s,
        _ => true,
    };
    starts_before_end && ends_after_start
}

/// The row limits and offsets of one interval, applied here when its cells come from several
/// servers (the engine's rule: a row counts when its first cell passes the other filters).
///
/// It also remembers where the interval got to, so that a part that breaks off (its range
/// server died) can resume without repeating a cell: the last cell judged (row, family,
/// qualifier) and how many of its versions were judged. A resumed part starts again at that
/// row; [`Limiter::resume`] makes it pass over the cells judged before (cells come in row,
/// family, qualifier order; versions of one cell in the family's time order).
struct Limiter {
    row_limit: u64,
    row_offset: u64,
    cell_limit: u64,
    cell_offset: u64,
    rows_started: u64,
    cells_passed: u64,
    cells_returned: u64,
    cur_row: Option<Vec<u8>>,
    /// The last cell judged: family, qualifier (its row is `cur_row`) and versions judged.
    last_cell: Option<(u8, Vec<u8>, u64)>,
    /// Cells judged in all.
    judged: u64,
    /// While resuming: the versions of `last_cell` passed over so far.
    resuming: Option<u64>,
}

/// Where a cell stands relative to the resume point.
enum Seen {
    Before,
    Version,
    After,
}

enum Verdict {
    Take,
    Skip,
    Stop,
}

impl Limiter {
    fn new(spec: &ScanSpec) -> Self {
        Self {
            row_limit: spec.row_limit,
            row_offset: spec.row_offset,
            cell_limit: spec.cell_limit,
            cell_offset: spec.cell_offset,
            rows_started: 0,
            cells_passed: 0,
            cells_returned: 0,
            cur_row: None,
            last_cell: None,
            judged: 0,
            resuming: None,
        }
    }

    /// Makes the next cells pass over what was judged before; the row to start the resumed
    /// part at (`None`: nothing judged yet, start where the part started).
    fn resume(&mut self) -> Option<Vec<u8>> {
        self.last_cell.as_ref()?;
        self.resuming = Some(0);
        self.cur_row.clone()
    }

    /// While resuming: whether `cell` was judged before (and is passed over). The first cell
    /// past the resume point ends the resuming.
    fn judged_before(&mut self, cell: &ScanCellRef<'_>) -> bool {
        let Some(passed) = self.resuming else {
            return false;
        };
        let (Some(row), Some((family, qualifier, versions))) = (&self.cur_row, &self.last_cell)
        else {
            self.resuming = None;
            return false;
        };
        let seen = match cell
            .row
            .cmp(row.as_slice())
            .then(cell.family.cmp(family))
            .then(cell.qualifier.cmp(qualifier.as_slice()))
        {
            std::cmp::Ordering::Less => Seen::Before,
            std::cmp::Ordering::Equal if passed < *versions => Seen::Version,
            _ => Seen::After,
        };
        match seen {
            Seen::Before => true,
            Seen::Version => {
                self.resuming = Some(passed + 1);
                true
            }
            Seen::After => {
                self.resuming = None;
                false
            }
        }
    }

    /// Records `cell` as judged (`new_row`: the first judged of its row).
    fn note(&mut self, cell: &ScanCellRef<'_>, new_row: bool) {
        self.judged += 1;
        match &mut self.last_cell {
            Some((f, q, n)) if !new_row && *f == cell.family && q.as_slice() == cell.qualifier => {
                *n += 1
            }
            Some((f, q, n)) => {
                *f = cell.family;
                q.clear();
                q.extend_from_slice(cell.qualifier);
                *n = 1;
            }
            None => self.last_cell = Some((cell.family, cell.qualifier.to_vec(), 1)),
        }
    }

    /// Judges a block's cells in place: the runs of cells taken (as their own readers, without
    /// decoding them) and whether the limits ended the interval.
    fn judge_block(
        &mut self,
        block: PackedCells,
    ) -> std::result::Result<(Vec<PackedCells>, bool), String> {
        let mut runs = Vec::new();
        // The run of taken cells being built: its start offset, first index and length.
        let mut run: Option<(usize, u32, u32)> = None;
        // Ends the run (if any) at byte `end` of the block.
        let close = |run: &mut Option<(usize, u32, u32)>, end: usize, runs: &mut Vec<_>| {
            if let Some((from, first, n)) = run.take() {
                runs.push(block.slice(from, end, n, first));
            }
        };
        let mut cells = block.clone();
        loop {
            let (at, index) = (cells.offset(), cells.index());
            let Some(cell) = cells.next_ref()? else {
                break;
            };
            if self.judged_before(&cell) {
                close(&mut run, at, &mut runs);
                continue;
            }
            let new_row = self.cur_row.as_deref() != Some(cell.row);
            let verdict = self.judge(cell.row);
            self.note(&cell, new_row);
            match verdict {
                Verdict::Take => match &mut run {
                    Some((_, _, n)) => *n += 1,
                    None => run = Some((at, index, 1)),
                },
                Verdict::Skip => close(&mut run, at, &mut runs),
                Verdict::Stop => {
                    close(&mut run, at, &mut runs);
                    return Ok((runs, true));
                }
            }
        }
        close(&mut run, cells.offset(), &mut runs);
        Ok((runs, false))
    }

    fn judge(&mut self, row: &[u8]) -> Verdict {
        if self.cur_row.as_deref() != Some(row) {
            let cur = self.cur_row.get_or_insert_with(Vec::new);
            cur.clear();
            cur.extend_from_slice(row);
            self.rows_started += 1;
            if self.row_limit > 0
                && self.rows_started > self.row_offset.saturating_add(self.row_limit)
            {
                return Verdict::Stop;
            }
        }
        if self.rows_started <= self.row_offset {
            return Verdict::Skip;
        }
        self.cells_passed += 1;
        if self.cells_passed <= self.cell_offset {
            return Verdict::Skip;
        }
        if self.cell_limit > 0 && self.cells_returned >= self.cell_limit {
            return Verdict::Stop;
        }
        self.cells_returned += 1;
        Verdict::Take
    }
}

/// Streams a table scan into `tx`, block by block: interval by interval and server by server,
/// with the limits applied here.
async fn scan_table(
    inner: &Inner,
    table_id: u32,
    spec: ScanSpec,
    tx: &mpsc::Sender<Result<PackedCells>>,
) -> Result<()> {
    let mut intervals: Vec<Interval> = spec
        .row_intervals
        .iter()
        .cloned()
        .map(Interval::Rows)
        .chain(spec.cell_intervals.iter().cloned().map(Interval::Cells))
        .collect();
    if intervals.is_empty() {
        intervals.push(Interval::Rows(RowInterval::all()));
    }
    intervals.sort_by_key(|i| i.start_key());
    for interval in intervals {
        let span = interval_rows(&interval);
        let mut limiter = Limiter::new(&spec);
        // Bounds the retries of one part of the scan (reset when a part completes).
        let mut backoff = Backoff::new(inner.opts.retry_for);
        // Where the next part of this interval starts (rows below it are done).
        let mut from: Option<Vec<u8>> = span.0.clone();
        loop {
            let part = inner
                .retrying("scan", || async {
                    let ranges = inner.ranges(table_id).await?;
                    // The run of consecutive ranges on one server starting at `from`.
                    let first = locate(&ranges, from.as_deref().unwrap_or(b""));
                    let mut end = first.end_row.clone();
                    for r in ranges.iter().skip_while(|r| *r != first).skip(1) {
                        if r.location != first.location || !overlaps(&span, r) {
                            break;
                        }
                        end = r.end_row.clone();
                    }
                    Ok((first.location.clone(), end))
                })
                .await?;
            let (location, run_end) = part;
            let clamped = interval.clamp(&from, &run_end);
            let mut part_spec = spec.clone();
            part_spec.row_intervals.clear();
            part_spec.cell_intervals.clear();
            match clamped {
                Interval::Rows(r) => part_spec.row_intervals.push(r),
                Interval::Cells(c) => part_spec.cell_intervals.push(c),
            }
            part_spec.row_limit = 0;
            part_spec.row_offset = 0;
            part_spec.cell_limit = 0;
            part_spec.cell_offset = 0;
            let mut stream = match inner.server(&location).await {
                Ok(s) => s.scan(table_id, &part_spec).await.map_err(|e| (0, e)),
                Err(e) => Err((0, unreachable_server(e))),
            };
            let mut taken = 0u64;
            let judged_before = limiter.judged;
            let mut stop = false;
            let mut failure = None;
            if let Ok(s) = &mut stream {
                loop {
                    match s.next_block().await {
                        Ok(Some(block)) => {
                            taken += u64::from(block.remaining());
                            let (runs, end) = match limiter.judge_block(block) {
                                Ok(judged) => judged,
                                Err(e) => {
                                    failure = Some(RsError::BadReply(e));
                                    break;
                                }
                            };
                            for run in runs {
                                if tx.send(Ok(run)).await.is_err() {
                                    // The reader went away.
                                    return Ok(());
                                }
                            }
                            if end {
                                stop = true;
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                }
            } else if let Err((_, e)) = stream {
                failure = Some(e);
            }
            if let Some(e) = failure {
                if let RsError::BadReply(why) = &e {
                    return Err(ClientError::storage(
                        ErrorKind::Corruption,
                        format!(
                            "scan of table {table_id}: range server {location} sent a malformed block after {taken} cells: {why}"
                        ),
                    ));
                }
                match inner.rs_failure(&location, table_id, e) {
                    Attempt::Fatal(e) => return Err(e),
                    Attempt::Retry(why) => {
                        if taken > 0 {
                            // The part broke off after some cells: it resumes at the row of the
                            // last cell judged, passing over what was judged before.
                            if let Some(row) = limiter.resume() {
                                from = Some(row);
                            }
                        }
                        if limiter.judged > judged_before {
                            // It got somewhere: a fresh retry budget.
                            backoff = Backoff::new(inner.opts.retry_for);
                        }
                        // Locations were dropped; the next attempt finds the new ones.
                        backoff.wait("scan", why).await?;
                        continue;
                    }
                }
            }
            if stop {
                break;
            }
            backoff = Backoff::new(inner.opts.retry_for);
            let past_span = match (&run_end, &span.1) {
                (None, _) => true,
                (Some(e), Some(s)) => e >= s,
                (Some(_), None) => false,
            };
            if past_span {
                break;
            }
            from = run_end;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::proto::rs::messages::encode_scan_cell;
    use common::key::{CellFlag, Key, KeyRef};
    use proptest::prelude::*;

    fn pack(cells: &[Cell]) -> PackedCells {
        let mut buf = Vec::new();
        for c in cells {
            let enc = c.key.encode();
            encode_scan_cell(&KeyRef::new(&enc).unwrap(), &c.value, &mut buf);
        }
        PackedCells::new(buf.into(), cells.len() as u32)
    }

    /// What the engine's rule takes: skip `row_offset` rows, then `row_limit` rows; of their
    /// cells skip `cell_offset`, then `cell_limit` (0: no limit).
    fn engine_rule(cells: &[Cell], spec: &ScanSpec) -> Vec<Cell> {
        let mut rows: Vec<&Vec<u8>> = cells.iter().map(|c| &c.key.row).collect();
        rows.dedup();
        let no_limit = |n: u64| if n == 0 { usize::MAX } else { n as usize };
        let kept: Vec<&Vec<u8>> = rows
            .into_iter()
            .skip(spec.row_offset as usize)
            .take(no_limit(spec.row_limit))
            .collect();
        cells
            .iter()
            .filter(|c| kept.contains(&&c.key.row))
            .skip(spec.cell_offset as usize)
            .take(no_limit(spec.cell_limit))
            .cloned()
            .collect()
    }

    proptest! {
        /// A limiter judging blocks in place takes exactly what the engine's rule takes,
        /// however the cells are cut into blocks and wherever the stream breaks off: each
        /// resumed part starts again at the row the limiter names (as a range server would),
        /// and no cell comes twice or goes missing, versions of one cell included.
        #[test]
        fn judged_blocks_take_what_the_limits_allow_through_broken_parts(
            shape in prop::collection::vec((1usize..4, 1usize..4), 0..10),
            block_len in 1usize..7,
            breaks in prop::collection::vec(0usize..5, 0..4),
            row_offset in 0u64..4,
            row_limit in 0u64..5,
            cell_offset in 0u64..4,
            cell_limit in 0u64..8,
        ) {
            // Rows of `qualifiers x versions` cells, newest version first.
            let mut cells = Vec::new();
            for (r, (qualifiers, versions)) in shape.iter().enumerate() {
                for q in 0..*qualifiers {
                    for v in 0..*versions {
                        cells.push(Cell {
                            key: Key {
                                row: format!("row{r:02}").into_bytes(),
                                family: 1,
                                qualifier: format!("q{q}").into_bytes(),
                                timestamp: 100 - v as i64,
                                revision: 9,
                                flag: CellFlag::Insert,
                            },
                            value: format!("v{r}.{q}.{v}").into_bytes(),
                        });
                    }
                }
            }
            let spec = ScanSpec { row_offset, row_limit, cell_offset, cell_limit, ..Default::default() };
            let mut limiter = Limiter::new(&spec);
            let mut got = Vec::new();
            // Each attempt streams from `start` and breaks off after `breaks[i]` blocks.
            let mut start = 0usize;
            let mut breaks = breaks.into_iter();
            'attempts: loop {
                let limit = breaks.next();
                let mut sent = 0usize;
                let mut at = start;
                loop {
                    if Some(sent) == limit {
                        // Broken off: resume where the limiter says.
                        if let Some(row) = limiter.resume() {
                            start = cells.iter().position(|c| c.key.row == row).unwrap();
                        }
                        continue 'attempts;
                    }
                    if at >= cells.len() {
                        break 'attempts;
                    }
                    let end = (at + block_len).min(cells.len());
                    let (runs, stop) = limiter.judge_block(pack(&cells[at..end])).unwrap();
                    for mut run in runs {
                        while let Some(c) = run.next_cell().unwrap() {
                            got.push(c);
                        }
                    }
                    if stop {
                        break 'attempts;
                    }
                    at = end;
                    sent += 1;
                }
            }
            prop_assert_eq!(got, engine_rule(&cells, &spec));
        }
    }

    /// Issue 12: `OFFSET 1 LIMIT 18446744073709551615` returned nothing (offset + limit wrapped).
    #[test]
    fn limiter_offset_plus_limit_saturates() {
        let spec = ScanSpec {
            row_offset: 1,
            row_limit: u64::MAX,
            ..Default::default()
        };
        let mut l = Limiter::new(&spec);
        assert!(matches!(l.judge(b"a"), Verdict::Skip));
        for row in [&b"b"[..], b"c", b"d"] {
            assert!(matches!(l.judge(row), Verdict::Take));
        }
    }
}
