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

mod ddl;
mod errors;
pub use ::proto::layout;
mod batched;
mod limiter;
mod locations;
mod mutator;
mod names;
mod options;
pub use ::proto::master as proto;
mod retry;
mod scanner;
mod unordered;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ::proto::rs::client::RangeServerClient;
use common::{ErrorKind, ScanSpec, TableSchema};
use hyperspace::client::Hyperspace;
use parking_lot::Mutex;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rpc::ClusterCredentials;

use crate::{
    Client, ClientError, CompactionKind, ListingEntry, Result, TableMutator, TableScanner,
    normalize_path,
};
use proto::{DdlRequest, MasterStatus, method};

pub use ddl::connect_master;
use ddl::parse_schema;
use errors::hs_err;
pub use errors::{engine_message, server_error};
pub use locations::{RangeLocation, parse_locations};
use mutator::ClusterMutator;
use names::NameCache;
pub use options::ClusterOptions;
use scanner::ClusterScanner;

/// The shared state of a cluster client.
pub(crate) struct Inner {
    hs: Hyperspace,
    credentials: ClusterCredentials,
    opts: ClusterOptions,
    servers: Mutex<HashMap<String, Arc<RangeServerClient>>>,
    locations: Mutex<HashMap<u32, Arc<Vec<RangeLocation>>>>,
    master: tokio::sync::Mutex<Option<Arc<rpc::Client>>>,
    /// Table ids and schemas, until a table operation may change them.
    names: Arc<NameCache>,
    /// Every random draw of the client (update stream ids, backoff jitter), seeded from
    /// [`ClusterOptions::seed`].
    rng: Mutex<StdRng>,
    /// Scan requests sent to range servers (see [`ClusterClient::scan_requests`]).
    scan_requests: AtomicU64,
    /// Cells received from range servers by scans (see [`ClusterClient::scan_cells`]).
    scan_cells: AtomicU64,
    /// Aggregate partials received from range servers.
    scan_partials: AtomicU64,
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
    /// Scan requests this client has sent to range servers (one per interval and run of
    /// ranges on a server, or per batch of a key set's intervals; retries included).
    pub fn scan_requests(&self) -> u64 {
        self.inner.scan_requests.load(Ordering::Relaxed)
    }

    /// Cells this client's scans have received from range servers (before its own limits).
    pub fn scan_cells(&self) -> u64 {
        self.inner.scan_cells.load(Ordering::Relaxed)
    }

    /// Aggregate partials this client's aggregating scans have received from range servers
    /// (one per completed part).
    pub fn scan_partials(&self) -> u64 {
        self.inner.scan_partials.load(Ordering::Relaxed)
    }

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
        let (hs, events) = rt
            .block_on(Hyperspace::connect(
                opts.hyperspace.clone(),
                credentials.clone(),
                opts.hyperspace_options.clone(),
            ))
            .map_err(hs_err)?;
        let seed = opts.seed.unwrap_or_else(common::time::entropy_seed);
        let names = Arc::new(NameCache::new(opts.table_cache_entries));
        rt.spawn(names.clone().follow(events));
        Ok(Self {
            inner: Arc::new(Inner {
                hs,
                credentials,
                opts,
                servers: Mutex::new(HashMap::new()),
                locations: Mutex::new(HashMap::new()),
                master: tokio::sync::Mutex::new(None),
                names,
                rng: Mutex::new(StdRng::seed_from_u64(seed)),
                scan_requests: AtomicU64::new(0),
                scan_cells: AtomicU64::new(0),
                scan_partials: AtomicU64::new(0),
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
        self.ddl_split(m, path, to, schema, &[])
    }

    fn ddl_split(
        &self,
        m: &'static str,
        path: &str,
        to: &str,
        schema: Option<&TableSchema>,
        splits: &[Vec<u8>],
    ) -> Result<String> {
        let req = DdlRequest {
            path: normalize_path(path)?,
            to: to.to_string(),
            schema_json: schema.map(TableSchema::to_json).unwrap_or_default(),
            splits: splits.to_vec(),
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
        self.run(self.inner.master_status())
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
        self.run(self.inner.namespace_exists(path))
    }

    fn listing(&self, path: &str) -> Result<Vec<ListingEntry>> {
        self.run(self.inner.listing(path))
    }

    fn create_table_split(
        &self,
        path: &str,
        schema: TableSchema,
        splits: &[Vec<u8>],
    ) -> Result<TableSchema> {
        common::row_range::check_split_rows(splits).map_err(ClientError::InvalidInput)?;
        parse_schema(&self.ddl_split(method::CREATE_TABLE, path, "", Some(&schema), splits)?)
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

    fn unindexed_mutator(&self, table: &str) -> Result<Box<dyn TableMutator>> {
        let table_id = self.run(self.inner.table_id(table))?;
        Ok(Box::new(ClusterMutator::new(
            self.inner.clone(),
            self.rt.handle().clone(),
            table_id,
        )))
    }

    fn scanner(&self, table: &str, mut spec: ScanSpec) -> Result<Box<dyn TableScanner>> {
        let table_id = self.run(self.inner.table_id(table))?;
        // A scanner returns cells: servers must not answer with partials.
        spec.aggregate = None;
        if spec.row_offset > 0 && spec.cell_offset > 0 {
            return Err(ClientError::InvalidInput(
                "OFFSET and CELL_OFFSET cannot be combined".into(),
            ));
        }
        Ok(Box::new(ClusterScanner::start(
            self.inner.clone(),
            self.rt.handle(),
            table_id,
            spec,
        )))
    }

    fn batch_scanner(
        &self,
        table: &str,
        mut spec: ScanSpec,
        parallelism: usize,
    ) -> Result<Box<dyn TableScanner>> {
        let table_id = self.run(self.inner.table_id(table))?;
        spec.aggregate = None;
        Ok(Box::new(ClusterScanner::start_unordered(
            self.inner.clone(),
            self.rt.handle(),
            table_id,
            spec,
            parallelism,
        )))
    }

    fn aggregate(
        &self,
        table: &str,
        mut spec: ScanSpec,
    ) -> Result<common::aggregate::AggregatePartial> {
        let agg = crate::aggregate::take_aggregate(&mut spec)?;
        if common::aggregate::has_limits(&spec) {
            // Limits count per interval across ranges and servers: fold the limited cells here.
            let mut scanner = self.scanner(table, spec)?;
            return crate::aggregate::fold_scanner(scanner.as_mut(), &agg);
        }
        let table_id = self.run(self.inner.table_id(table))?;
        spec.aggregate = Some(agg.clone());
        self.run(scanner::aggregate_table(&self.inner, table_id, spec, &agg))
    }

    fn compact(&self, table: Option<&str>, kind: CompactionKind) -> Result<()> {
        let inner = &self.inner;
        self.run(async {
            let (id, servers) = match table {
                Some(t) => {
                    let id = inner.table_id(t).await?;
                    inner.invalidate(id);
                    let ranges = inner.retrying("locate", || inner.ranges(id)).await?;
                    // Each server once: it compacts every range of the table it holds (a
                    // pre-split table's ranges alternate between servers).
                    let locs: std::collections::BTreeSet<String> =
                        ranges.iter().map(|r| r.location.clone()).collect();
                    (Some(id), locs.into_iter().collect::<Vec<_>>())
                }
                None => (None, inner.live_servers().await?),
            };
            // The servers compact at once, each its own ranges.
            futures_util::future::try_join_all(servers.iter().map(|loc| async move {
                let server = inner.server(loc).await?;
                server
                    .compact(id, kind)
                    .await
                    .map_err(|e| server_error(loc, e))
            }))
            .await?;
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

    /// The master's view, then the live range servers' engine counters summed under the names
    /// the embedded database uses (each server asked once, one after the other; one that does
    /// not answer is counted in `unanswered_servers`, not summed).
    fn status(&self) -> Result<Vec<(String, String)>> {
        let st = self.master_status()?;
        let live: Vec<&str> = st
            .servers
            .iter()
            .filter(|s| s.live)
            .map(|s| s.location.as_str())
            .collect();
        let ranges: u32 = st.servers.iter().map(|s| s.ranges).sum();
        let mut sum = common::status::EngineStats::default();
        let mut unanswered = 0usize;
        self.rt.block_on(async {
            for loc in &live {
                let asked = match self.inner.server(loc).await {
                    Ok(c) => c.status().await.ok(),
                    Err(_) => None,
                };
                let Some(s) = asked else {
                    unanswered += 1;
                    continue;
                };
                sum.stores += s.stores;
                sum.cache_bytes += s.cache_bytes;
                sum.minor_compactions += s.minor_compactions;
                sum.merging_compactions += s.merging_compactions;
                sum.major_compactions += s.major_compactions;
                sum.splits += s.splits;
                sum.block_cache_hits += s.block_cache_hits;
                sum.block_cache_misses += s.block_cache_misses;
                sum.seeks += s.seeks;
            }
        });
        Ok(vec![
            ("mode".into(), "cluster".into()),
            ("range_servers".into(), live.len().to_string()),
            ("ranges".into(), ranges.to_string()),
            ("root_location".into(), st.root_location),
            ("operations".into(), st.operations.len().to_string()),
            ("moves".into(), st.moves.to_string()),
            ("recoveries".into(), st.recoveries.to_string()),
            ("gc_rounds".into(), st.gc_rounds.to_string()),
            ("gc_removed_stores".into(), st.gc_removed_stores.to_string()),
            ("gc_removed_roots".into(), st.gc_removed_roots.to_string()),
            ("cell_stores".into(), sum.stores.to_string()),
            ("cell_cache_bytes".into(), sum.cache_bytes.to_string()),
            (
                "minor_compactions".into(),
                sum.minor_compactions.to_string(),
            ),
            (
                "merging_compactions".into(),
                sum.merging_compactions.to_string(),
            ),
            (
                "major_compactions".into(),
                sum.major_compactions.to_string(),
            ),
            ("splits".into(), sum.splits.to_string()),
            ("block_cache_hits".into(), sum.block_cache_hits.to_string()),
            (
                "block_cache_misses".into(),
                sum.block_cache_misses.to_string(),
            ),
            ("seeks".into(), sum.seeks.to_string()),
            ("unanswered_servers".into(), unanswered.to_string()),
        ])
    }

    fn balance(&self) -> Result<()> {
        ClusterClient::balance(self)
    }

    fn table_ranges(&self, table: &str) -> Result<Vec<crate::TableRange>> {
        self.run(async {
            let id = self.inner.table_id(table).await?;
            let ranges = self
                .inner
                .retrying("ranges", || async { self.inner.ranges(id).await })
                .await?;
            Ok(ranges
                .iter()
                .map(|r| crate::TableRange {
                    start_row: r.start_row.clone(),
                    end_row: r.end_row.clone(),
                    location: r.location.clone(),
                })
                .collect())
        })
    }

    fn close(&self) -> Result<()> {
        Ok(())
    }
}
