//! The embedded database: the [`Client`] interface over an engine in this process, on a data
//! directory of the local file system. Namespaces and the table-id counter live in a
//! single-replica Hyperspace in the same process (`<data-dir>/hyperspace/`, directories under
//! `/ht/namespaces`, attribute `next_table_id` of `/ht`), as they do in a cluster's Hyperspace;
//! tables are engine schemas named by their full path. The replica's directory lock keeps a
//! second process off the same data directory.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use common::TableSchema;
use dfs_broker::LocalFs;
use hyperspace::client::{ClientOptions as HsOptions, Hyperspace, LocalChannel};
use hyperspace::command::{Command, ExpireSession, Op};
use hyperspace::node::{NoPeers, Node, NodeConfig};
use parking_lot::{Mutex, RwLock};
use rangeserver::engine::{self, Engine, EngineOptions};

use client::{
    Cell, Client, ClientError, CompactionKind, ListingEntry, Mutation, Result, ScanSpec,
    TableMutator, TableScanner, normalize_path, split_path,
};
use proto::layout::{HT as HT_ROOT, NAMESPACES as NS_ROOT, NEXT_TABLE_ID, ns_node};

/// Where namespaces were kept before Hyperspace (engine meta-log attributes); read once to
/// carry an older data directory over.
const NAMESPACE_PREFIX: &str = "ns:";

use proto::hs_err;

/// Makes the file system the engine writes through, on the database's I/O runtime (backends
/// that talk to servers set up their connections there).
pub type FsFactory =
    Arc<dyn Fn(&tokio::runtime::Handle) -> Result<Arc<dyn dfs_broker::Fs>> + Send + Sync>;

/// Settings of the embedded database.
#[derive(Clone)]
pub struct EmbeddedOptions {
    pub engine: EngineOptions,
    /// A mutator sends its buffer once it holds this many cells...
    pub mutator_buffer_cells: usize,
    /// ... or this many bytes of rows, qualifiers and values.
    pub mutator_buffer_bytes: usize,
    /// The engine's file system; `None`: the data directory on the local file system. (The
    /// single Hyperspace replica always lives in `<data-dir>/hyperspace`.)
    pub fs: Option<FsFactory>,
}

impl std::fmt::Debug for EmbeddedOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedOptions")
            .field("engine", &self.engine)
            .field("mutator_buffer_cells", &self.mutator_buffer_cells)
            .field("mutator_buffer_bytes", &self.mutator_buffer_bytes)
            .field("fs", &self.fs.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            engine: EngineOptions::default(),
            mutator_buffer_cells: 10_000,
            mutator_buffer_bytes: 4 << 20,
            fs: None,
        }
    }
}

/// A database in this process. Dropping it closes it.
pub struct EmbeddedClient {
    engine: Engine,
    opts: EmbeddedOptions,
    /// Table path -> id.
    names: RwLock<HashMap<String, u32>>,
    /// Serialises namespace and table changes.
    ddl: Mutex<()>,
    hs: Hyperspace,
    hs_node: Node,
    // Declared last: dropped after the engine, whose files it drives.
    _rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for EmbeddedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmbeddedClient({:?})", self.engine)
    }
}

impl EmbeddedClient {
    /// Refuses a schema naming an iterator or combiner kind the engine's registry lacks, or
    /// options the kind refuses (the engine itself accepts unknown kinds, so that a table
    /// written by a binary with more kinds still opens; DDL here must not create one).
    fn check_kinds(&self, schema: &TableSchema) -> Result<()> {
        Ok(self.engine.registry().check_schema(schema)?)
    }

    /// Opens (creating) the database in `data_dir`.
    pub fn open(data_dir: impl AsRef<Path>, opts: EmbeddedOptions) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ht-embedded-io")
            .enable_all()
            .build()
            .map_err(|e| {
                ClientError::storage(
                    common::ErrorKind::Internal,
                    format!("cannot start the I/O runtime: {e}"),
                )
            })?;
        let fs: Arc<dyn dfs_broker::Fs> = match &opts.fs {
            Some(make) => make(rt.handle())?,
            None => Arc::new(
                LocalFs::new(data_dir.as_ref())
                    .map_err(|e| ClientError::storage(e.kind(), e.to_string()))?,
            ),
        };
        let engine = Engine::open(fs, "/ht", opts.engine.clone(), rt.handle().clone())?;
        let names = engine
            .tables()
            .into_iter()
            .map(|s| (s.name.clone(), s.id))
            .collect();
        let (hs, hs_node) = rt.block_on(open_hyperspace(data_dir.as_ref(), &engine))?;
        Ok(Self {
            engine,
            opts,
            names: RwLock::new(names),
            ddl: Mutex::new(()),
            hs,
            hs_node,
            _rt: rt,
        })
    }

    /// Runs a Hyperspace call to completion.
    fn hs<T>(
        &self,
        f: impl std::future::Future<Output = std::result::Result<T, hyperspace::client::ClientError>>,
    ) -> Result<T> {
        self._rt.block_on(f).map_err(hs_err)
    }

    /// The engine underneath (for tools and benchmarks).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn table_id(&self, path: &str) -> Result<u32> {
        let p = normalize_path(path)?;
        self.names
            .read()
            .get(&p)
            .copied()
            .ok_or(ClientError::TableNotFound(p))
    }

    fn ns_exists(&self, path: &str) -> Result<bool> {
        if path == "/" {
            return Ok(true);
        }
        self.hs(self.hs.exists(&ns_node(path)))
    }

    /// Checks a name for a new namespace or table: a valid last component, an existing parent
    /// namespace, and no table or namespace by that name. Returns it normalised.
    fn new_name(&self, path: &str) -> Result<String> {
        let (parent, name) = split_path(path)?;
        check_component(&name)?;
        if !self.ns_exists(&parent)? {
            return Err(ClientError::NamespaceNotFound(parent));
        }
        let path = normalize_path(path)?;
        self.check_name_free(&path)?;
        Ok(path)
    }

    fn check_name_free(&self, path: &str) -> Result<()> {
        if self.names.read().contains_key(path) {
            return Err(ClientError::TableExists(path.to_string()));
        }
        if self.ns_exists(path)? {
            return Err(ClientError::NamespaceExists(path.to_string()));
        }
        Ok(())
    }
}

impl Drop for EmbeddedClient {
    fn drop(&mut self) {
        if let Err(e) = self.engine.close() {
            tracing::warn!(error = %e, "closing the embedded database failed");
        }
        let hs = self.hs.clone();
        let node = self.hs_node.clone();
        self._rt.block_on(async move {
            let _ = hs.close_session().await;
            node.stop().await;
        });
    }
}

/// Starts the single Hyperspace replica of `data_dir`, opens this process's session and makes
/// the nodes the database uses. Sessions left by an earlier process are expired at once: the
/// replica's directory lock proves that process is gone.
async fn open_hyperspace(data_dir: &Path, engine: &Engine) -> Result<(Hyperspace, Node)> {
    let node = Node::start(
        NodeConfig::single(data_dir.join("hyperspace")),
        Arc::new(NoPeers),
    )
    .map_err(|e| {
        ClientError::storage(
            common::ErrorKind::Unavailable,
            format!("cannot open hyperspace in {}: {e}", data_dir.display()),
        )
    })?;
    let (hs, _events) = Hyperspace::open_session(
        Arc::new(LocalChannel::new(node.clone())),
        HsOptions::default(),
    )
    .await
    .map_err(hs_err)?;
    for s in hs.list_sessions().await.map_err(hs_err)? {
        if s.id != hs.session() {
            let expire = Command {
                session: 0,
                seq: 0,
                first_incomplete: 0,
                op: Some(Op::ExpireSession(ExpireSession { session: s.id })),
            };
            node.propose(expire).await.map_err(|e| {
                ClientError::storage(common::ErrorKind::Unavailable, format!("hyperspace: {e}"))
            })?;
        }
    }
    if !hs.exists(NS_ROOT).await.map_err(hs_err)? {
        // A new database, or one from before Hyperspace: carry over the namespaces and the
        // table-id counter the engine's meta log held (parents sort before children).
        let mut old: Vec<String> = engine
            .attrs(NAMESPACE_PREFIX)
            .into_iter()
            .map(|(k, _)| k[NAMESPACE_PREFIX.len()..].to_string())
            .collect();
        old.sort();
        hs.mkdirs(NS_ROOT).await.map_err(hs_err)?;
        for ns in old {
            hs.mkdirs(&ns_node(&ns)).await.map_err(hs_err)?;
        }
        if let Some(next) = engine
            .attr(NEXT_TABLE_ID)
            .and_then(|v| v.parse::<i64>().ok())
        {
            hs.attr_set(HT_ROOT, NEXT_TABLE_ID, (next - 1).to_string())
                .await
                .map_err(hs_err)?;
        }
    }
    Ok((hs, node))
}

fn check_component(name: &str) -> Result<()> {
    if name.is_empty() || name.contains(['/', '\0']) {
        return Err(ClientError::InvalidInput(format!("bad name '{name}'")));
    }
    Ok(())
}

impl Client for EmbeddedClient {
    fn create_namespace(&self, path: &str) -> Result<()> {
        let _g = self.ddl.lock();
        let path = self.new_name(path)?;
        self.hs(self.hs.mkdir(&ns_node(&path)))
    }

    fn drop_namespace(&self, path: &str) -> Result<()> {
        let _g = self.ddl.lock();
        let path = normalize_path(path)?;
        if path == "/" {
            return Err(ClientError::InvalidInput(
                "the root namespace cannot be dropped".into(),
            ));
        }
        if !self.ns_exists(&path)? {
            return Err(ClientError::NamespaceNotFound(path));
        }
        if !self.listing(&path)?.is_empty() {
            return Err(ClientError::NamespaceNotEmpty(path));
        }
        self.hs(self.hs.delete(&ns_node(&path)))
    }

    fn namespace_exists(&self, path: &str) -> Result<bool> {
        self.ns_exists(&normalize_path(path)?)
    }

    fn listing(&self, path: &str) -> Result<Vec<ListingEntry>> {
        let path = normalize_path(path)?;
        if !self.ns_exists(&path)? {
            return Err(ClientError::NamespaceNotFound(path));
        }
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        let child = |full: &str| -> Option<String> {
            let rest = full.strip_prefix(&prefix)?;
            (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
        };
        let mut out: Vec<ListingEntry> = self
            .hs(self.hs.readdir(&ns_node(&path)))?
            .into_iter()
            .filter(|e| e.is_dir)
            .map(|e| ListingEntry {
                name: e.name,
                is_namespace: true,
            })
            .collect();
        out.extend(
            self.names
                .read()
                .keys()
                .filter_map(|t| child(t))
                .map(|name| ListingEntry {
                    name,
                    is_namespace: false,
                }),
        );
        out.sort();
        Ok(out)
    }

    fn create_table_split(
        &self,
        path: &str,
        mut schema: TableSchema,
        splits: &[Vec<u8>],
    ) -> Result<TableSchema> {
        common::row_range::check_split_rows(splits).map_err(ClientError::InvalidInput)?;
        let _g = self.ddl.lock();
        let path = self.new_name(path)?;
        self.check_kinds(&schema)?;
        // Ids are never reused: the counter moves on before the table exists.
        let next = self.hs(self.hs.attr_incr(HT_ROOT, NEXT_TABLE_ID, 1))?;
        let next = u32::try_from(next).map_err(|_| {
            ClientError::storage(
                common::ErrorKind::Internal,
                format!("table id counter out of range: {next}"),
            )
        })?;
        schema.id = next;
        schema.name = path.clone();
        self.engine.create_table_split(schema.clone(), splits)?;
        self.names.write().insert(path, next);
        Ok(schema)
    }

    fn table_schema(&self, path: &str) -> Result<TableSchema> {
        Ok(self.engine.schema(self.table_id(path)?)?)
    }

    fn table_exists(&self, path: &str) -> Result<bool> {
        Ok(self.names.read().contains_key(&normalize_path(path)?))
    }

    fn alter_table(&self, path: &str, mut schema: TableSchema) -> Result<TableSchema> {
        let _g = self.ddl.lock();
        let id = self.table_id(path)?;
        let old = self.engine.schema(id)?;
        schema.id = id;
        schema.name = old.name;
        schema.generation = old.generation + 1;
        self.check_kinds(&schema)?;
        self.engine.alter_table(schema.clone())?;
        Ok(schema)
    }

    fn rename_table(&self, from: &str, to: &str) -> Result<()> {
        let _g = self.ddl.lock();
        let id = self.table_id(from)?;
        let to = self.new_name(to)?;
        let mut schema = self.engine.schema(id)?;
        let from = schema.name.clone();
        schema.name = to.clone();
        self.engine.alter_table(schema)?;
        let mut names = self.names.write();
        names.remove(&from);
        names.insert(to, id);
        Ok(())
    }

    fn drop_table(&self, path: &str) -> Result<()> {
        let _g = self.ddl.lock();
        let id = self.table_id(path)?;
        self.engine.drop_table(id)?;
        self.names.write().remove(&normalize_path(path)?);
        Ok(())
    }

    fn unindexed_mutator(&self, table: &str) -> Result<Box<dyn TableMutator>> {
        Ok(Box::new(EmbeddedMutator {
            engine: self.engine.clone(),
            table_id: self.table_id(table)?,
            buf: Vec::new(),
            buf_bytes: 0,
            limit_cells: self.opts.mutator_buffer_cells.max(1),
            limit_bytes: self.opts.mutator_buffer_bytes.max(1),
            flushed: 0,
        }))
    }

    fn scanner(&self, table: &str, spec: ScanSpec) -> Result<Box<dyn TableScanner>> {
        let inner = self.engine.scan(self.table_id(table)?, &spec)?;
        Ok(Box::new(EmbeddedScanner { inner }))
    }

    fn aggregate(
        &self,
        table: &str,
        spec: ScanSpec,
    ) -> Result<common::aggregate::AggregatePartial> {
        // The engine folds the cells as it reads them, limits included.
        Ok(self.engine.aggregate(self.table_id(table)?, &spec)?)
    }

    fn compact(&self, table: Option<&str>, kind: CompactionKind) -> Result<()> {
        let id = table.map(|t| self.table_id(t)).transpose()?;
        let kind = match kind {
            CompactionKind::Minor => engine::CompactionKind::Minor,
            CompactionKind::Merging => engine::CompactionKind::Merging,
            CompactionKind::Major => engine::CompactionKind::Major,
            CompactionKind::Gc => {
                self.engine.collect_garbage()?;
                return Ok(());
            }
        };
        self.engine.compact(id, kind)?;
        Ok(())
    }

    fn wait_for_maintenance(&self) -> Result<()> {
        self.engine.wait_for_maintenance();
        Ok(())
    }

    fn status(&self) -> Result<Vec<(String, String)>> {
        let s = self.engine.stats();
        Ok(vec![
            ("mode".into(), "embedded".into()),
            ("tables".into(), self.names.read().len().to_string()),
            ("ranges".into(), s.ranges.to_string()),
            ("cell_stores".into(), s.stores.to_string()),
            ("cell_cache_bytes".into(), s.cache_bytes.to_string()),
            ("minor_compactions".into(), s.minor_compactions.to_string()),
            (
                "merging_compactions".into(),
                s.merging_compactions.to_string(),
            ),
            ("major_compactions".into(), s.major_compactions.to_string()),
            ("splits".into(), s.splits.to_string()),
            ("block_cache_hits".into(), s.block_cache_hits.to_string()),
            (
                "block_cache_misses".into(),
                s.block_cache_misses.to_string(),
            ),
            ("seeks".into(), s.seeks.to_string()),
        ])
    }

    fn table_ranges(&self, table: &str) -> Result<Vec<client::TableRange>> {
        Ok(self
            .engine
            .ranges(self.table_id(table)?)
            .into_iter()
            .map(|r| client::TableRange {
                start_row: r.start_row,
                end_row: r.end_row,
                location: "local".into(),
            })
            .collect())
    }

    fn balance(&self) -> Result<()> {
        Err(ClientError::InvalidInput(
            "BALANCE is not supported: the embedded database has one range server".into(),
        ))
    }

    fn close(&self) -> Result<()> {
        Ok(self.engine.close()?)
    }
}

struct EmbeddedMutator {
    engine: Engine,
    table_id: u32,
    buf: Vec<Mutation>,
    buf_bytes: usize,
    limit_cells: usize,
    limit_bytes: usize,
    flushed: u64,
}

impl TableMutator for EmbeddedMutator {
    fn set(&mut self, m: Mutation) -> Result<()> {
        self.buf_bytes += m.row.len() + m.qualifier.len() + m.value.len() + 32;
        self.buf.push(m);
        if self.buf.len() >= self.limit_cells || self.buf_bytes >= self.limit_bytes {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.engine.apply(self.table_id, &self.buf)?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        self.buf_bytes = 0;
        Ok(())
    }

    fn cells_flushed(&self) -> u64 {
        self.flushed
    }
}

struct EmbeddedScanner {
    inner: engine::TableScanner,
}

impl TableScanner for EmbeddedScanner {
    fn next_cell(&mut self) -> Result<Option<Cell>> {
        Ok(self.inner.next_cell()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TableSchema {
        let mut s = TableSchema::new(0, "");
        s.add_family("a");
        s
    }

    #[test]
    fn namespaces_tables_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).unwrap();
            c.create_namespace("/n").unwrap();
            c.create_namespace("/n/m").unwrap();
            assert!(matches!(
                c.create_namespace("/x/y"),
                Err(ClientError::NamespaceNotFound(_))
            ));
            assert!(matches!(
                c.create_namespace("/n"),
                Err(ClientError::NamespaceExists(_))
            ));
            let s = c.create_table("/n/t", schema()).unwrap();
            assert_eq!((s.id, s.name.as_str()), (1, "/n/t"));
            assert!(matches!(
                c.create_table("/n/t", schema()),
                Err(ClientError::TableExists(_))
            ));
            let mut m = c.mutator("/n/t").unwrap();
            m.set(Mutation::insert("r1", 1, "", "v1")).unwrap();
            m.flush().unwrap();
            assert_eq!(m.cells_flushed(), 1);
            assert!(matches!(
                c.drop_namespace("/n"),
                Err(ClientError::NamespaceNotEmpty(_))
            ));
            c.rename_table("/n/t", "/n/m/u").unwrap();
            assert!(!c.table_exists("/n/t").unwrap());
            assert_eq!(
                c.listing("/n").unwrap(),
                vec![ListingEntry {
                    name: "m".into(),
                    is_namespace: true
                }]
            );
        }
        let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).unwrap();
        assert!(c.namespace_exists("/n/m").unwrap());
        let mut sc = c.scanner("/n/m/u", ScanSpec::default()).unwrap();
        let cell = sc.next_cell().unwrap().unwrap();
        assert_eq!(
            (cell.key.row.as_slice(), cell.value.as_slice()),
            (&b"r1"[..], &b"v1"[..])
        );
        assert!(sc.next_cell().unwrap().is_none());
        c.drop_table("/n/m/u").unwrap();
        c.drop_namespace("/n/m").unwrap();
        c.drop_namespace("/n").unwrap();
        assert!(c.listing("/").unwrap().is_empty());
        // Ids are not reused.
        assert_eq!(c.create_table("/t2", schema()).unwrap().id, 2);
    }
}
