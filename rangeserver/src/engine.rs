//! The engine API that the range server, the embedded database and the tests all use: open,
//! create/alter/drop tables, apply a batch (returns once durable at the table's level), scan,
//! compact, split, close.
//!
//! Blocking calls ([`Engine::apply`], [`Engine::scan`], ...) must run on plain threads (or
//! `spawn_blocking`), never inside an async task; `*_async` wrappers do that for async callers.
//!
//! Write path: validate -> take the apply gate (shared) -> assign revisions -> one commit-log
//! append (group commit) -> insert into the cell caches -> release the gate. A freeze takes the
//! gate exclusively, so every cell with revision <= the freeze point is in the frozen cache or
//! earlier, and replay can skip exactly the cells a cell store already holds.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::key::{self, CellFlag, KeyRef};
use common::{Durability, TableSchema, TimeOrder};
use dfs_broker::{BlockingFs, Fs, join};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::block_cache::BlockCache;
use crate::cellcache::CellCache;
use crate::cellstore::CellStore;
use crate::commitlog::{CommitLog, CommitLogOptions, LogRecord, Recorder};
use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::maintenance;
use crate::merge::MergeIter;
use crate::meta::{GroupRecord, MetaLog, MetaOp, RangeRecord};
use crate::range::{AccessGroup, GroupState, Range};
use crate::scan::SpecFilter;
use crate::scan::spec::{QualifierMatch, RowInterval, ScanSpec};
use crate::scan::visible::{FamilyRule, Mode, VisibleCells, VisibleOptions};

/// A source of wall-clock time, injectable for tests of TTL and timestamps.
pub trait Clock: Send + Sync {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ns(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0)
    }
}

/// Engine settings; every queue, cache and buffer limit is here.
#[derive(Clone)]
pub struct EngineOptions {
    /// Bound on all cell caches together; writers wait while it is exceeded.
    pub cell_cache_limit_bytes: u64,
    /// One access group's active cache is written out past this size.
    pub cell_cache_flush_bytes: u64,
    /// Shared block cache size.
    pub block_cache_bytes: u64,
    pub commit_log: CommitLogOptions,
    /// A range is split once it holds more than this; 0 disables automatic splits.
    pub split_size_bytes: u64,
    /// A merging compaction runs when a group has more cell stores than this.
    pub max_stores_per_group: usize,
    /// Background maintenance threads (compactions, splits): the bound on their concurrency.
    pub maintenance_threads: usize,
    /// Bound on the maintenance task queue.
    pub maintenance_queue_limit: usize,
    pub clock: Arc<dyn Clock>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            cell_cache_limit_bytes: 256 << 20,
            cell_cache_flush_bytes: 64 << 20,
            block_cache_bytes: 128 << 20,
            // Room for the largest batch a client may send (see `apply`).
            commit_log: CommitLogOptions {
                max_block_bytes: 32 << 20,
                ..CommitLogOptions::default()
            },
            split_size_bytes: 512 << 20,
            max_stores_per_group: 8,
            maintenance_threads: 2,
            maintenance_queue_limit: 1024,
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("cell_cache_limit_bytes", &self.cell_cache_limit_bytes)
            .field("cell_cache_flush_bytes", &self.cell_cache_flush_bytes)
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("split_size_bytes", &self.split_size_bytes)
            .field("max_stores_per_group", &self.max_stores_per_group)
            .field("maintenance_threads", &self.maintenance_threads)
            .finish()
    }
}

pub use common::{AsMutationRef, Mutation, MutationRef};

/// A cell returned by a scan.
pub type ScanCell = common::Cell;

/// Which compaction to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionKind {
    /// Write the cell caches out as new cell stores.
    Minor,
    /// Merge cell stores (without dropping anything).
    Merging,
    /// Rewrite each group as one cell store, dropping deletes, expired cells and old versions.
    Major,
}

pub use common::status::{EngineStats, RangeInfo};

/// A table as the engine knows it.
pub(crate) struct TableInfo {
    pub schema: TableSchema,
    /// Per family id, the index of its access group.
    pub group_of: [Option<u8>; 256],
    /// The family rules of a scan of every column with the schema's versions.
    default_rules: Arc<Vec<FamilyRule>>,
}

impl TableInfo {
    pub(crate) fn new(schema: TableSchema) -> Self {
        Self {
            group_of: schema.group_index_by_family(),
            default_rules: Arc::new(family_rules(&schema, &ScanSpec::default())),
            schema,
        }
    }
}

/// Ranges are kept ordered by (table, end row), an unbounded end last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RangeEnd {
    Row(Vec<u8>),
    Max,
}

pub(crate) type RangeMap = BTreeMap<(u32, RangeEnd), Arc<Range>>;

/// Counters of work done, updated by maintenance.
#[derive(Default)]
pub(crate) struct Counters {
    pub minor: AtomicU64,
    pub merging: AtomicU64,
    pub major: AtomicU64,
    pub splits: AtomicU64,
    pub replayed: AtomicU64,
    pub purged: AtomicU64,
}

pub(crate) struct Inner {
    pub fs: BlockingFs,
    pub root: String,
    pub opts: EngineOptions,
    pub tables: RwLock<HashMap<u32, Arc<TableInfo>>>,
    pub ranges: RwLock<RangeMap>,
    pub log: CommitLog,
    /// Shared with the commit log's writer thread, which records its fragments here.
    pub meta: Arc<Mutex<MetaLog>>,
    /// Shared by appliers, exclusive for freezes and range swaps.
    pub gate: RwLock<()>,
    last_revision: Mutex<i64>,
    pub block_cache: Arc<BlockCache>,
    /// Bytes of all cell caches (active and frozen).
    pub cache_bytes: AtomicU64,
    pub memory_wait: Mutex<()>,
    pub memory_cv: Condvar,
    pub closed: AtomicBool,
    pub counters: Counters,
    pub maint: maintenance::Queue,
    /// Cell stores replaced by compactions, deleted once nothing uses them.
    pub gc_pending: Mutex<Vec<Arc<CellStore>>>,
    pub next_range_id: AtomicU64,
    /// Ranges taken out of the range map by `unload_range` whose caches are still being written
    /// out: the commit-log purge point must stay below their cells.
    pub unloading: Mutex<Vec<Arc<Range>>>,
    /// Ranges whose cell stores could not be opened (damaged or missing), by table and end row:
    /// they are not served (their rows answer with the damage), their cells stay in the commit
    /// log and their files are never deleted. The rest of the engine works as usual.
    pub damaged: RwLock<BTreeMap<(u32, RangeEnd), Damaged>>,
    /// The store's single-writer lock (`<root>/LOCK`, where the backend has locks); released
    /// by `close`.
    store_lock: Mutex<Option<dfs_broker::FsLock>>,
}

/// A range that could not be opened, and why.
#[derive(Debug, Clone)]
pub struct Damaged {
    pub rec: RangeRecord,
    pub file: String,
    pub offset: u64,
    pub why: String,
}

impl Damaged {
    /// The error its rows answer with.
    pub fn error(&self) -> Error {
        Error::Corrupt {
            file: self.file.clone(),
            offset: self.offset,
            msg: format!(
                "range {} of table {} cannot be served: {}",
                self.rec.id, self.rec.table_id, self.why
            ),
        }
    }

    fn holds(&self, path: &str) -> bool {
        self.rec
            .groups
            .iter()
            .any(|g| g.stores.iter().any(|p| p == path))
    }
}

impl Inner {
    /// Allocates `n` consecutive revisions, returning the first. Revisions follow the clock but
    /// strictly increase even if it steps back.
    fn alloc_revisions(&self, n: usize) -> i64 {
        let mut last = self.last_revision.lock();
        let base = self.opts.clock.now_ns().max(*last + 1);
        *last = base + n as i64 - 1;
        base
    }

    /// The last revision handed out.
    pub fn current_revision(&self) -> i64 {
        *self.last_revision.lock()
    }

    pub(crate) fn observe_revision(&self, rev: i64) {
        let mut last = self.last_revision.lock();
        *last = (*last).max(rev);
    }

    pub fn table(&self, id: u32) -> Result<Arc<TableInfo>> {
        self.tables
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("id {id}")))
    }

    pub fn tables_dir(&self) -> String {
        join(&self.root, "tables")
    }

    /// True if `path` lies under this engine's root.
    pub fn is_own(&self, path: &str) -> bool {
        let root = self.root.trim_end_matches('/');
        path.strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
    }

    /// True if this engine may delete the cell store at `path`: it lies under its own root (a
    /// store adopted from another server, or shared with one after a split, is that server's)
    /// and was not handed to another engine with an unloaded range.
    pub fn may_delete(&self, path: &str) -> bool {
        self.is_own(path)
            && !self.meta.lock().state().is_exported(path)
            && !self.damaged.read().values().any(|d| d.holds(path))
    }

    /// The error for `row` of `table` if it lies in a damaged range.
    pub fn damage_at(&self, table: u32, row: &[u8]) -> Option<Error> {
        let map = self.damaged.read();
        map.range((
            Bound::Excluded((table, RangeEnd::Row(row.to_vec()))),
            Bound::Unbounded,
        ))
        .next()
        .filter(|((t, _), d)| *t == table && d.rec.start_row.as_deref().is_none_or(|s| s <= row))
        .map(|(_, d)| d.error())
    }

    /// The directory of a group's cell stores in a range.
    pub fn store_dir(&self, table_id: u32, group: &str, range_id: u64) -> String {
        format!("{}/{table_id}/{group}/r{range_id}", self.tables_dir())
    }

    /// The range of `table` holding `row`.
    pub fn find_range(map: &RangeMap, table: u32, row: &[u8]) -> Option<Arc<Range>> {
        let (_, r) = map
            .range((
                Bound::Excluded((table, RangeEnd::Row(row.to_vec()))),
                Bound::Unbounded,
            ))
            .next()?;
        (r.table_id == table && r.contains(row)).then(|| r.clone())
    }

    pub fn table_ranges(&self, table: u32) -> Vec<Arc<Range>> {
        self.ranges
            .read()
            .range((table, RangeEnd::Row(Vec::new()))..=(table, RangeEnd::Max))
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// A held range of `table` that overlaps `[start_row, end_row)`, if any.
    pub fn overlapping(
        &self,
        table: u32,
        start_row: &Option<Vec<u8>>,
        end_row: &Option<Vec<u8>>,
    ) -> Option<Arc<Range>> {
        self.table_ranges(table).into_iter().find(|r| {
            let starts_before_end = match (start_row, &r.end_row) {
                (Some(s), Some(e)) => s < e,
                _ => true,
            };
            let ends_after_start = match (end_row, &r.start_row) {
                (Some(e), Some(s)) => e > s,
                _ => true,
            };
            starts_before_end && ends_after_start
        })
    }

    pub fn open_store(&self, path: &str) -> Result<Arc<CellStore>> {
        CellStore::open(&self.fs, path, self.block_cache.clone())
    }

    pub fn add_cache_bytes(&self, n: u64) {
        self.cache_bytes.fetch_add(n, Ordering::AcqRel);
    }

    pub fn sub_cache_bytes(&self, n: u64) {
        let _ = self
            .cache_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(n))
            });
        let _g = self.memory_wait.lock();
        self.memory_cv.notify_all();
    }

    /// Builds the in-memory range for a record, opening its stores (sharing already-open ones).
    pub fn build_range(
        &self,
        rec: &RangeRecord,
        table: &TableInfo,
        open: &mut HashMap<String, Arc<CellStore>>,
    ) -> Result<Range> {
        let mut groups = Vec::with_capacity(table.schema.access_groups.len());
        for (gi, spec) in table.schema.access_groups.iter().enumerate() {
            let gr = rec.groups.iter().find(|g| g.name == spec.name);
            let mut stores = Vec::new();
            if let Some(gr) = gr {
                for p in &gr.stores {
                    let s = match open.get(p) {
                        Some(s) => s.clone(),
                        None => {
                            let s = self.open_store(p)?;
                            open.insert(p.clone(), s.clone());
                            s
                        }
                    };
                    stores.push(s);
                }
            }
            groups.push(AccessGroup::new(
                spec.name.clone(),
                gi,
                GroupState {
                    active: Arc::new(CellCache::new()),
                    frozen: None,
                    frozen_revision: i64::MIN,
                    stores,
                    flushed_revision: gr.map_or(i64::MIN, |g| g.flushed_revision),
                    next_store: gr.map_or(0, |g| g.next_store),
                },
            ));
        }
        Ok(Range {
            id: rec.id,
            table_id: rec.table_id,
            start_row: rec.start_row.clone(),
            end_row: rec.end_row.clone(),
            groups,
            maintenance: Mutex::new(()),
            retired: AtomicBool::new(false),
            cells_written: AtomicU64::new(0),
            cells_read: AtomicU64::new(0),
        })
    }
}

/// The storage engine. Cheap to clone; all clones share one engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Engine({} at {})",
            self.inner.fs.inner().url(),
            self.inner.root
        )
    }
}

/// Encodes one commit-log entry: table id, then (key, value) pairs with varint lengths.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = *data.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7F) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// An encoded key and its value, borrowed from a commit-log entry.
pub type LogCell<'a> = (&'a [u8], &'a [u8]);

/// Splits a commit-log entry into its table id and cells.
pub fn decode_log_entry(entry: &[u8]) -> Option<(u32, Vec<LogCell<'_>>)> {
    let table = u32::from_le_bytes(entry.get(..4)?.try_into().ok()?);
    let mut pos = 4;
    let n = get_varint(entry, &mut pos)? as usize;
    let mut cells = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        let kl = get_varint(entry, &mut pos)? as usize;
        let k = entry.get(pos..pos + kl)?;
        pos += kl;
        let vl = get_varint(entry, &mut pos)? as usize;
        let v = entry.get(pos..pos + vl)?;
        pos += vl;
        cells.push((k, v));
    }
    (pos == entry.len()).then_some((table, cells))
}

impl Engine {
    /// Opens the engine rooted at `root` on `fs`: reads the meta log, opens cell stores, replays
    /// the commit log into the cell caches, removes orphaned files and starts maintenance.
    /// Blocking: call from a plain thread; `rt` is the runtime the file system runs on.
    pub fn open(
        fs: Arc<dyn Fs>,
        root: &str,
        opts: EngineOptions,
        rt: tokio::runtime::Handle,
    ) -> Result<Self> {
        let bfs = BlockingFs::new(fs, rt);
        bfs.mkdirs(root)?;
        // One writer per store: the lock lives with the files, not with whoever names them.
        let store_lock = bfs.lock_exclusive(&join(root, "LOCK"))?;
        // A root that holds tables or a commit log is not a new database, whatever became of
        // its meta log: opening it empty would lose (and later garbage-collect) everything.
        let holds_data = root_holds_data(&bfs, root)?;
        let meta = MetaLog::open(bfs.clone(), &join(root, "meta"), !holds_data)?;
        let meta = Arc::new(Mutex::new(meta));
        let track = meta.lock().state().log.clone();
        let recorder: Recorder = {
            let meta = meta.clone();
            Arc::new(move |r: &LogRecord| meta.lock().write(vec![MetaOp::Log(r.clone())]))
        };
        let why = {
            let m = meta.lock();
            match (m.read_from(), m.torn_tail()) {
                (Some(f), Some(cut)) => Some(format!(
                    "the meta log read from {f} disagrees; its last record was cut as torn: {cut}"
                )),
                (Some(f), None) => Some(format!("the meta log read from {f} disagrees")),
                _ => None,
            }
        };
        let log = CommitLog::open_tracked(
            bfs.clone(),
            &join(root, "log"),
            opts.commit_log.clone(),
            track.clone(),
            Some(recorder),
        )
        .map_err(|e| match (e, why) {
            // A fragment the record does not explain: the damage may be in either file (a
            // meta log cut at a record boundary looks whole), so name both.
            (Error::Corrupt { file, offset, msg }, Some(why)) => Error::Corrupt {
                file,
                offset,
                msg: format!("{msg} ({why})"),
            },
            (e, _) => e,
        })?;
        if track.is_none() {
            // A log from before fragments were recorded: record what is there now.
            meta.lock().write(vec![MetaOp::Log(log.current_record())])?;
        }
        let block_cache = BlockCache::new(opts.block_cache_bytes);
        let state = meta.lock().state().clone();
        let inner = Arc::new(Inner {
            fs: bfs,
            root: root.to_string(),
            tables: RwLock::new(HashMap::new()),
            ranges: RwLock::new(BTreeMap::new()),
            log,
            meta,
            gate: RwLock::new(()),
            last_revision: Mutex::new(i64::MIN + 1),
            block_cache,
            cache_bytes: AtomicU64::new(0),
            memory_wait: Mutex::new(()),
            memory_cv: Condvar::new(),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            maint: maintenance::Queue::new(opts.maintenance_queue_limit),
            gc_pending: Mutex::new(Vec::new()),
            next_range_id: AtomicU64::new(state.next_range_id.max(1)),
            unloading: Mutex::new(Vec::new()),
            damaged: RwLock::new(BTreeMap::new()),
            store_lock: Mutex::new(store_lock),
            opts,
        });
        // Tables and ranges.
        let mut open_stores = HashMap::new();
        {
            let mut tables = inner.tables.write();
            for s in state.tables.values() {
                tables.insert(s.id, Arc::new(TableInfo::new(s.clone())));
            }
        }
        {
            let tables = inner.tables.read();
            let mut ranges = inner.ranges.write();
            for rec in state.ranges.values() {
                let Some(t) = tables.get(&rec.table_id) else {
                    continue;
                };
                let end = rec.end_row.clone().map_or(RangeEnd::Max, RangeEnd::Row);
                let r = match inner.build_range(rec, t, &mut open_stores) {
                    Ok(r) => r,
                    Err(e) => {
                        let Some((file, offset, why)) = damage(&e) else {
                            return Err(e);
                        };
                        tracing::error!(table = rec.table_id, range = rec.id, error = %e, "range not served: a cell store is damaged or missing");
                        for g in &rec.groups {
                            inner.observe_revision(g.flushed_revision);
                        }
                        let d = Damaged {
                            rec: rec.clone(),
                            file,
                            offset,
                            why,
                        };
                        inner.damaged.write().insert((rec.table_id, end), d);
                        continue;
                    }
                };
                // Revisions must stay above every revision a group counts as flushed, or replay
                // would skip new cells: the clock alone may have stepped back, and a major
                // compaction may have dropped every cell that carried the highest revision.
                for g in &r.groups {
                    let st = g.state();
                    inner.observe_revision(st.flushed_revision);
                    for s in &st.stores {
                        inner.observe_revision(s.trailer().max_revision);
                    }
                }
                ranges.insert((rec.table_id, end), Arc::new(r));
            }
        }
        // Replay.
        let engine = Engine { inner };
        engine.replay()?;
        engine.remove_orphans(&open_stores)?;
        maintenance::start(&engine);
        // Work left over: caches that are over the limit after replay.
        engine.schedule_flushes_if_needed();
        Ok(engine)
    }

    fn replay(&self) -> Result<()> {
        let inner = &self.inner;
        let ranges = inner.ranges.read();
        let tables = inner.tables.read();
        let mut replayed = 0u64;
        let mut max_rev = i64::MIN;
        let stats = inner.log.replay_existing(|entry| {
            let (table, cells) = decode_log_entry(entry).ok_or_else(|| Error::Corrupt {
                file: join(&inner.root, "log"),
                offset: 0,
                msg: "commit log entry does not parse".into(),
            })?;
            let Some(t) = tables.get(&table) else {
                return Ok(());
            };
            for (k, v) in cells {
                let kr = KeyRef::new(k)?;
                let rev = kr.revision();
                max_rev = max_rev.max(rev);
                let row = kr.row();
                let Some(range) = Inner::find_range(&ranges, table, &row) else {
                    continue;
                };
                let targets: Vec<usize> = if kr.flag() == CellFlag::DeleteRow {
                    (0..range.groups.len()).collect()
                } else {
                    t.group_of[kr.family() as usize]
                        .map(|g| g as usize)
                        .into_iter()
                        .collect()
                };
                for gi in targets {
                    let g = &range.groups[gi];
                    let st = g.state();
                    if rev <= st.flushed_revision {
                        continue;
                    }
                    let grew = st.active.insert_batch([(k, v, rev)]);
                    inner.add_cache_bytes(grew);
                    replayed += 1;
                }
            }
            Ok(())
        })?;
        if max_rev > i64::MIN {
            inner.observe_revision(max_rev);
        }
        inner.counters.replayed.store(replayed, Ordering::Relaxed);

        tracing::info!(
            cells = replayed,
            entries = stats.entries,
            "commit log replayed"
        );
        Ok(())
    }

    /// Deletes cell-store files that no range references (left by a crash mid-compaction) and
    /// the directories of dropped tables.
    fn remove_orphans(&self, referenced: &HashMap<String, Arc<CellStore>>) -> Result<()> {
        let fs = &self.inner.fs;
        let tdir = self.inner.tables_dir();
        if !fs.exists(&tdir)? {
            return Ok(());
        }
        let tables = self.inner.tables.read();
        // Files handed to other engines with unloaded ranges stay until the table is dropped.
        let exported = self.inner.meta.lock().state().exported.clone();
        let damaged: Vec<Damaged> = self.inner.damaged.read().values().cloned().collect();
        for t in fs.readdir(&tdir)? {
            let tpath = join(&tdir, &t.name);
            let known = t
                .name
                .parse::<u32>()
                .ok()
                .is_some_and(|id| tables.contains_key(&id));
            if !known {
                fs.rmdir(&tpath, true)?;
                continue;
            }
            for g in fs.readdir(&tpath)?.into_iter().filter(|e| e.is_dir) {
                let gpath = join(&tpath, &g.name);
                for r in fs.readdir(&gpath)?.into_iter().filter(|e| e.is_dir) {
                    let rpath = join(&gpath, &r.name);
                    let mut left = 0;
                    for f in fs.readdir(&rpath)? {
                        let p = join(&rpath, &f.name);
                        if f.is_dir
                            || referenced.contains_key(&p)
                            || exported.contains_key(&p)
                            || damaged.iter().any(|d| d.holds(&p))
                        {
                            left += 1;
                        } else {
                            tracing::info!(file = p, "removing orphaned cell store");
                            fs.remove(&p)?;
                        }
                    }
                    if left == 0 {
                        fs.rmdir(&rpath, false)?;
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Creates a table with one range covering every row.
    pub fn create_table(&self, schema: TableSchema) -> Result<()> {
        self.create_table_with_ranges(schema, &[(None, None)])
    }

    /// Registers a table with no ranges: a range server in a cluster gets its ranges assigned
    /// one by one ([`Engine::create_range`]).
    pub fn register_table(&self, schema: TableSchema) -> Result<()> {
        self.create_table_with_ranges(schema, &[])
    }

    /// Adds an empty range `[start_row, end_row)` of an existing table; it must not overlap a
    /// range this engine holds. Returns the range id.
    pub fn create_range(
        &self,
        table_id: u32,
        start_row: Option<Vec<u8>>,
        end_row: Option<Vec<u8>>,
    ) -> Result<u64> {
        self.check_open()?;
        let inner = &self.inner;
        let table = inner.table(table_id)?;
        if let (Some(s), Some(e)) = (&start_row, &end_row)
            && s >= e
        {
            return Err(Error::InvalidInput(
                "a range's start row must be below its end row".into(),
            ));
        }
        let _gate = inner.gate.write();
        if inner.overlapping(table_id, &start_row, &end_row).is_some() {
            return Err(Error::InvalidInput(format!(
                "the new range overlaps a range of table {table_id} held here"
            )));
        }
        let rec = empty_range_record(inner, &table.schema, start_row, end_row);
        inner.meta.lock().write(vec![
            MetaOp::PutRange(rec.clone()),
            MetaOp::NextRangeId(rec.id + 1),
        ])?;
        let range = inner.build_range(&rec, &table, &mut HashMap::new())?;
        let end = rec.end_row.clone().map_or(RangeEnd::Max, RangeEnd::Row);
        inner
            .ranges
            .write()
            .insert((table_id, end), Arc::new(range));
        Ok(rec.id)
    }

    fn create_table_with_ranges(&self, schema: TableSchema, bounds: &[RowBounds]) -> Result<()> {
        self.check_open()?;
        schema.validate()?;
        let inner = &self.inner;
        let mut tables = inner.tables.write();
        if tables.contains_key(&schema.id) {
            return Err(Error::TableExists(format!(
                "{} (id {})",
                schema.name, schema.id
            )));
        }
        // Ids are never reused: the log may still hold cells of a dropped table with this id.
        let used = inner.meta.lock().state().max_table_id;
        if schema.id <= used {
            return Err(Error::InvalidInput(format!(
                "table id {} was used before (ids up to {used} are taken); table ids are never reused",
                schema.id
            )));
        }
        let recs: Vec<RangeRecord> = bounds
            .iter()
            .map(|(s, e)| empty_range_record(inner, &schema, s.clone(), e.clone()))
            .collect();
        let mut ops = vec![MetaOp::PutTable(schema.clone())];
        ops.extend(recs.iter().cloned().map(MetaOp::PutRange));
        ops.push(MetaOp::NextRangeId(
            inner.next_range_id.load(Ordering::Acquire),
        ));
        inner.meta.lock().write(ops)?;
        let info = TableInfo::new(schema);
        let table_id = info.schema.id;
        // Its directory marks the root as holding a table even before any cell store exists,
        // so a lost meta log is never taken for a new database (`root_holds_data`).
        inner
            .fs
            .mkdirs(&join(&inner.tables_dir(), &table_id.to_string()))?;
        let mut built = Vec::new();
        for rec in &recs {
            built.push((rec, inner.build_range(rec, &info, &mut HashMap::new())?));
        }
        tables.insert(table_id, Arc::new(info));
        let mut ranges = inner.ranges.write();
        for (rec, range) in built {
            let end = rec.end_row.clone().map_or(RangeEnd::Max, RangeEnd::Row);
            ranges.insert((table_id, end), Arc::new(range));
        }
        Ok(())
    }

    /// Replaces a table's schema (ALTER TABLE). Families keep their ids; a family marked deleted
    /// stops being returned at once and is dropped by the next major compaction. Access groups
    /// may be added; their families' existing cells stay where they are stored.
    pub fn alter_table(&self, schema: TableSchema) -> Result<()> {
        self.check_open()?;
        schema.validate()?;
        let inner = &self.inner;
        let old = inner.table(schema.id)?;
        for f in &old.schema.families {
            match schema.family_by_id(f.id) {
                Some(n) if n.access_group == f.access_group || f.deleted => {}
                Some(_) => {
                    return Err(Error::InvalidInput(format!(
                        "column family '{}' cannot move to another access group",
                        f.name
                    )));
                }
                None => {
                    return Err(Error::InvalidInput(format!(
                        "column family '{}' (id {}) is missing; mark it deleted instead",
                        f.name, f.id
                    )));
                }
            }
        }
        with_table_locked(inner, schema.id, |olds| {
            let _gate = inner.gate.write();
            // Rebuild ranges so new access groups get state; existing groups keep theirs.
            let mut ops = vec![MetaOp::PutTable(schema.clone())];
            let mut rebuilt = Vec::new();
            for old_r in olds {
                let mut groups = Vec::new();
                for (gi, spec) in schema.access_groups.iter().enumerate() {
                    let state = match old_r.groups.iter().find(|g| g.name == spec.name) {
                        Some(g) => (*g.state()).clone(),
                        None => GroupState {
                            active: Arc::new(CellCache::new()),
                            frozen: None,
                            frozen_revision: i64::MIN,
                            stores: Vec::new(),
                            flushed_revision: i64::MIN,
                            next_store: 0,
                        },
                    };
                    groups.push(AccessGroup::new(spec.name.clone(), gi, state));
                }
                let r = Range {
                    id: old_r.id,
                    table_id: old_r.table_id,
                    start_row: old_r.start_row.clone(),
                    end_row: old_r.end_row.clone(),
                    groups,
                    maintenance: Mutex::new(()),
                    retired: AtomicBool::new(false),
                    cells_written: AtomicU64::new(old_r.cells_written.load(Ordering::Relaxed)),
                    cells_read: AtomicU64::new(old_r.cells_read.load(Ordering::Relaxed)),
                };
                ops.push(MetaOp::PutRange(r.record()));
                rebuilt.push((Arc::new(r), old_r.clone()));
            }
            inner.meta.lock().write(ops)?;
            // Lock order: `tables` before `ranges`, as everywhere.
            let mut tables = inner.tables.write();
            let mut ranges = inner.ranges.write();
            for (r, old_r) in rebuilt {
                old_r.retired.store(true, Ordering::Release);
                // Groups the new schema no longer has: their memory and files go.
                for g in old_r
                    .groups
                    .iter()
                    .filter(|g| !schema.access_groups.iter().any(|a| a.name == g.name))
                {
                    let st = g.state();
                    inner.sub_cache_bytes(st.cache_bytes());
                    maintenance::retire(inner, &st.stores);
                }
                let end = r.end_row.clone().map_or(RangeEnd::Max, RangeEnd::Row);
                ranges.insert((r.table_id, end), r);
            }
            tables.insert(schema.id, Arc::new(TableInfo::new(schema.clone())));
            Ok(())
        })
    }

    /// Drops a table: its ranges and, once no scanner uses them, its files.
    pub fn drop_table(&self, table_id: u32) -> Result<()> {
        self.check_open()?;
        let inner = &self.inner;
        inner.table(table_id)?;
        with_table_locked(inner, table_id, |removed| {
            let _gate = inner.gate.write();
            inner.meta.lock().write(vec![MetaOp::DropTable(table_id)])?;
            inner.tables.write().remove(&table_id);
            {
                let mut ranges = inner.ranges.write();
                for r in removed {
                    let end = r.end_row.clone().map_or(RangeEnd::Max, RangeEnd::Row);
                    ranges.remove(&(table_id, end));
                }
            }
            for r in removed {
                r.retired.store(true, Ordering::Release);
                for g in &r.groups {
                    let st = g.state();
                    inner.sub_cache_bytes(st.cache_bytes());
                    let mut pending = inner.gc_pending.lock();
                    for s in &st.stores {
                        if !pending.iter().any(|p| p.path() == s.path()) {
                            pending.push(s.clone());
                        }
                    }
                }
            }
            Ok(())
        })?;
        maintenance::collect_garbage(inner)?;
        let dir = format!("{}/{table_id}", inner.tables_dir());
        if inner
            .gc_pending
            .lock()
            .iter()
            .all(|s| !s.path().starts_with(&dir))
            && inner.fs.exists(&dir)?
        {
            inner.fs.rmdir(&dir, true)?;
        }
        maintenance::purge_log(inner)?;
        Ok(())
    }

    /// Sets and deletes attributes of the engine's meta log in one durable, atomic record: a
    /// small key/value store for the layer above (namespaces, id counters).
    pub fn update_attrs(&self, puts: Vec<(String, String)>, deletes: Vec<String>) -> Result<()> {
        self.check_open()?;
        let mut ops: Vec<MetaOp> = puts
            .into_iter()
            .map(|(k, v)| MetaOp::PutAttr(k, v))
            .collect();
        ops.extend(deletes.into_iter().map(MetaOp::DeleteAttr));
        if ops.is_empty() {
            return Ok(());
        }
        self.inner.meta.lock().write(ops)
    }

    /// The attributes whose keys start with `prefix`, in key order.
    pub fn attrs(&self, prefix: &str) -> Vec<(String, String)> {
        let meta = self.inner.meta.lock();
        meta.state()
            .attrs
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// One attribute.
    pub fn attr(&self, key: &str) -> Option<String> {
        self.inner.meta.lock().state().attrs.get(key).cloned()
    }

    /// Deletes cell stores that compactions replaced and nothing uses any more.
    pub fn collect_garbage(&self) -> Result<()> {
        self.check_open()?;
        maintenance::collect_garbage(&self.inner)
    }

    /// The schemas of all tables.
    pub fn tables(&self) -> Vec<TableSchema> {
        let mut v: Vec<TableSchema> = self
            .inner
            .tables
            .read()
            .values()
            .map(|t| t.schema.clone())
            .collect();
        v.sort_by_key(|s| s.id);
        v
    }

    /// The schema of one table.
    pub fn schema(&self, table_id: u32) -> Result<TableSchema> {
        Ok(self.inner.table(table_id)?.schema.clone())
    }

    /// Applies a batch of mutations to one table and returns once it is durable at the table's
    /// durability. Either the whole batch is applied or (on error) none of it is acknowledged.
    pub fn apply<M: AsMutationRef>(&self, table_id: u32, mutations: &[M]) -> Result<()> {
        self.check_open()?;
        if mutations.is_empty() {
            return Ok(());
        }
        let mutations: Vec<MutationRef<'_>> = mutations
            .iter()
            .map(AsMutationRef::as_mutation_ref)
            .collect();
        let inner = &self.inner;
        let table = inner.table(table_id)?;
        let mut entry_bytes = 16usize;
        for m in &mutations {
            validate_mutation(&table, m)?;
            entry_bytes += m.row.len() + m.qualifier.len() + m.value.len() + 40;
        }
        let limit = inner.opts.commit_log.max_block_bytes;
        if entry_bytes > limit {
            return Err(Error::InvalidInput(format!(
                "a batch of {} cells and about {entry_bytes} bytes exceeds the limit of {limit} bytes per batch; send it in smaller batches",
                mutations.len()
            )));
        }
        self.wait_for_memory();
        let _gate = inner.gate.read();
        // The table may have been dropped or altered while we waited.
        let table = inner.table(table_id)?;
        let base = inner.alloc_revisions(mutations.len());
        let max_rev = base + mutations.len() as i64 - 1;
        let mut entry = Vec::with_capacity(
            16 + mutations
                .iter()
                .map(|m| m.row.len() + m.qualifier.len() + m.value.len() + 24)
                .sum::<usize>(),
        );
        entry.extend_from_slice(&table_id.to_le_bytes());
        put_varint(&mut entry, mutations.len() as u64);
        let mut spans = Vec::with_capacity(mutations.len());
        let mut kbuf = Vec::with_capacity(64);
        for (i, m) in mutations.iter().enumerate() {
            let rev = base + i as i64;
            let ts = m.timestamp.unwrap_or(rev);
            kbuf.clear();
            key::encode_parts(m.row, m.family, m.qualifier, m.flag, ts, rev, &mut kbuf);
            put_varint(&mut entry, kbuf.len() as u64);
            let kstart = entry.len();
            entry.extend_from_slice(&kbuf);
            put_varint(&mut entry, m.value.len() as u64);
            let vstart = entry.len();
            entry.extend_from_slice(m.value);
            spans.push((kstart, vstart, rev));
        }
        // Route before logging, so nothing is logged that cannot be applied.
        let ranges = inner.ranges.read();
        let mut last: Option<Arc<Range>> = None;
        let mut routed: Vec<Arc<Range>> = Vec::with_capacity(mutations.len());
        for m in &mutations {
            let r = match &last {
                Some(r) if r.contains(m.row) => r.clone(),
                _ => {
                    let r = Inner::find_range(&ranges, table_id, m.row).ok_or_else(|| {
                        inner
                            .damage_at(table_id, m.row)
                            .unwrap_or_else(|| Error::NotHere {
                                table_id,
                                row: m.row.to_vec(),
                            })
                    })?;
                    last = Some(r.clone());
                    r
                }
            };
            routed.push(r);
        }
        if table.schema.durability != Durability::None {
            inner.log.append(&entry, max_rev, table.schema.durability)?;
        }
        // Insert, grouped by (range, group).
        let mut batches: HashMap<(u64, usize), (Arc<Range>, Vec<usize>)> = HashMap::new();
        for (i, m) in mutations.iter().enumerate() {
            let r = &routed[i];
            if m.flag == CellFlag::DeleteRow {
                for gi in 0..r.groups.len() {
                    batches
                        .entry((r.id, gi))
                        .or_insert_with(|| (r.clone(), Vec::new()))
                        .1
                        .push(i);
                }
            } else {
                let gi = table.group_of[m.family as usize].expect("validated family") as usize;
                batches
                    .entry((r.id, gi))
                    .or_insert_with(|| (r.clone(), Vec::new()))
                    .1
                    .push(i);
            }
        }
        let mut flush = Vec::new();
        for ((_, gi), (r, idx)) in batches {
            let g = &r.groups[gi];
            let st = g.state();
            let grew = st.active.insert_batch(idx.iter().map(|&i| {
                let (ks, vs, rev) = spans[i];
                let klen = vs - ks - varint_len(mutations[i].value.len() as u64);
                (
                    &entry[ks..ks + klen],
                    &entry[vs..vs + mutations[i].value.len()],
                    rev,
                )
            }));
            r.cells_written
                .fetch_add(idx.len() as u64, Ordering::Relaxed);
            inner.add_cache_bytes(grew);
            if st.active.memory_bytes() > inner.opts.cell_cache_flush_bytes {
                flush.push((r.clone(), gi));
            }
        }
        drop(ranges);
        drop(_gate);
        for (r, gi) in flush {
            maintenance::queue_flush(inner, &r, gi);
        }
        if inner.cache_bytes.load(Ordering::Acquire) > inner.opts.cell_cache_limit_bytes / 2 {
            self.schedule_flushes_if_needed();
        }
        Ok(())
    }

    /// Async form of [`Engine::apply`].
    pub async fn apply_async(&self, table_id: u32, mutations: Vec<Mutation>) -> Result<()> {
        let e = self.clone();
        tokio::task::spawn_blocking(move || e.apply(table_id, &mutations))
            .await
            .map_err(|e| Error::Internal(format!("apply task failed: {e}")))?
    }

    /// Blocks while all cell caches together exceed their limit (backpressure on writers).
    fn wait_for_memory(&self) {
        let inner = &self.inner;
        let limit = inner.opts.cell_cache_limit_bytes;
        while inner.cache_bytes.load(Ordering::Acquire) > limit
            && !inner.closed.load(Ordering::Acquire)
        {
            self.schedule_flushes_if_needed();
            let mut g = inner.memory_wait.lock();
            inner.memory_cv.wait_for(&mut g, Duration::from_millis(50));
        }
    }

    /// Queues minor compactions of the biggest caches while caches use more than half the limit.
    fn schedule_flushes_if_needed(&self) {
        let inner = &self.inner;
        if inner.cache_bytes.load(Ordering::Acquire) <= inner.opts.cell_cache_limit_bytes / 2 {
            return;
        }
        let ranges: Vec<Arc<Range>> = inner.ranges.read().values().cloned().collect();
        let mut groups: Vec<(u64, Arc<Range>, usize)> = Vec::new();
        for r in &ranges {
            for (gi, g) in r.groups.iter().enumerate() {
                let b = g.state().active.memory_bytes();
                if b > 0 {
                    groups.push((b, r.clone(), gi));
                }
            }
        }
        groups.sort_by_key(|g| std::cmp::Reverse(g.0));
        // Enough of the biggest to bring the active caches under half the limit.
        let mut freed = 0;
        let need = inner
            .cache_bytes
            .load(Ordering::Acquire)
            .saturating_sub(inner.opts.cell_cache_limit_bytes / 4);
        for (b, r, gi) in groups {
            if freed >= need {
                break;
            }
            maintenance::queue_flush(inner, &r, gi);
            freed += b;
        }
    }

    /// Starts a scan of one table. The scanner reads a snapshot of the table's ranges and their
    /// cell stores and the live cell caches; it holds no locks between calls.
    pub fn scan(&self, table_id: u32, spec: &ScanSpec) -> Result<TableScanner> {
        self.check_open()?;
        let inner = &self.inner;
        let table = inner.table(table_id)?;
        let now = inner.opts.clock.now_ns();
        let rules = if spec.columns.is_empty() && spec.max_versions == 0 {
            table.default_rules.clone()
        } else {
            Arc::new(family_rules(&table.schema, spec))
        };
        let groups: Vec<usize> = (0..table.schema.access_groups.len())
            .filter(|&gi| {
                table.schema.families.iter().any(|f| {
                    rules[f.id as usize].selected && table.group_of[f.id as usize] == Some(gi as u8)
                })
            })
            .collect();
        let vopts = VisibleOptions {
            families: rules,
            time_start: spec.time_start,
            time_end: spec.time_end,
            now_ns: now,
            return_deletes: spec.return_deletes,
            mode: Mode::Scan,
        };
        // A scan of one row skips cell stores whose bloom filter rules the row out.
        let only_row = match (
            spec.row_intervals.as_slice(),
            spec.cell_intervals.is_empty(),
        ) {
            (
                [
                    RowInterval {
                        start: Bound::Included(a),
                        end: Bound::Included(b),
                    },
                ],
                true,
            ) if a == b => Some(a.clone()),
            _ => None,
        };
        // One snapshot of the range map both for the coverage check and the scan, so a split
        // in between cannot make them disagree.
        let ranges = {
            let map = inner.ranges.read();
            // A scan must not silently return part of its rows: every row it may touch must lie
            // in a range held here, or the caller learns which row is elsewhere.
            for interval in scanned_rows(spec) {
                check_covered(&map, table_id, &interval).map_err(|e| match e {
                    Error::NotHere { table_id, row } => inner
                        .damage_at(table_id, &row)
                        .unwrap_or(Error::NotHere { table_id, row }),
                    e => e,
                })?;
            }
            match &only_row {
                Some(row) => Inner::find_range(&map, table_id, row).into_iter().collect(),
                None => map
                    .range((table_id, RangeEnd::Row(Vec::new()))..=(table_id, RangeEnd::Max))
                    .map(|(_, r)| r.clone())
                    .collect(),
            }
        };
        let cursor = TableCursor {
            ranges,
            only_row,
            groups,
            vopts,
            fill_cache: !spec.no_cache,
            current: None,
            current_idx: 0,
            stepped: 0,
        };
        Ok(TableScanner {
            filter: SpecFilter::new(cursor, spec)?,
            keys_only: spec.keys_only,
        })
    }

    /// Scans in a blocking task and streams blocks of at most `block_cells` cells through a
    /// channel of `queue_blocks` blocks (the bound on memory a slow reader can cause).
    pub fn scan_stream(
        &self,
        table_id: u32,
        spec: ScanSpec,
        block_cells: usize,
        queue_blocks: usize,
    ) -> tokio::sync::mpsc::Receiver<Result<Vec<ScanCell>>> {
        let block_cells = block_cells.max(1);
        self.scan_stream_with(table_id, spec, queue_blocks, move |sc| {
            let mut block = Vec::with_capacity(block_cells);
            while block.len() < block_cells {
                match sc.next_cell()? {
                    Some(c) => block.push(c),
                    None => break,
                }
            }
            Ok((!block.is_empty()).then_some(block))
        })
    }

    /// Scans in a blocking task; `fill` makes each block from the scanner (`Ok(None)`: the
    /// scan is over), and the blocks go through a channel of `queue_blocks` blocks (the bound on
    /// memory a slow reader can cause). A dropped receiver stops the scan at its next block.
    pub fn scan_stream_with<B: Send + 'static>(
        &self,
        table_id: u32,
        spec: ScanSpec,
        queue_blocks: usize,
        mut fill: impl FnMut(&mut TableScanner) -> Result<Option<B>> + Send + 'static,
    ) -> tokio::sync::mpsc::Receiver<Result<B>> {
        let (tx, rx) = tokio::sync::mpsc::channel(queue_blocks.max(1));
        let e = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut sc = match e.scan(table_id, &spec) {
                Ok(s) => s,
                Err(err) => {
                    let _ = tx.blocking_send(Err(err));
                    return;
                }
            };
            loop {
                match fill(&mut sc) {
                    Ok(Some(block)) => {
                        if tx.blocking_send(Ok(block)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(err) => {
                        let _ = tx.blocking_send(Err(err));
                        return;
                    }
                }
            }
        });
        rx
    }

    /// Runs a compaction of every range of a table (of the whole engine with `None`) and waits.
    pub fn compact(&self, table_id: Option<u32>, kind: CompactionKind) -> Result<()> {
        self.check_open()?;
        let ranges: Vec<Arc<Range>> = match table_id {
            Some(t) => {
                self.inner.table(t)?;
                self.inner.table_ranges(t)
            }
            None => self.inner.ranges.read().values().cloned().collect(),
        };
        for r in ranges {
            if r.retired.load(Ordering::Acquire) {
                continue;
            }
            for gi in 0..r.groups.len() {
                maintenance::compact_group(&self.inner, &r, gi, kind)?;
            }
        }
        maintenance::collect_garbage(&self.inner)?;
        Ok(())
    }

    /// Splits the range of `table_id` that holds `row` so that `row` starts the upper half.
    pub fn split(&self, table_id: u32, row: &[u8]) -> Result<()> {
        self.check_open()?;
        let r = {
            let ranges = self.inner.ranges.read();
            Inner::find_range(&ranges, table_id, row).ok_or_else(|| {
                Error::InvalidInput(format!("no range of table {table_id} holds that row"))
            })?
        };
        maintenance::split_range(&self.inner, &r, row)
    }

    /// The ranges of a table.
    pub fn ranges(&self, table_id: u32) -> Vec<RangeInfo> {
        let mut out: Vec<RangeInfo> = self
            .inner
            .table_ranges(table_id)
            .iter()
            .map(|r| range_info(r))
            .collect();
        out.extend(self.damaged_ranges(Some(table_id)));
        out.sort_by(|a, b| match (&a.end_row, &b.end_row) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some(_), None) => std::cmp::Ordering::Less,
            (Some(x), Some(y)) => x.cmp(y),
        });
        out
    }

    /// The ranges of every table, by table and end row (the master polls this to learn about
    /// splits the engine made on its own).
    pub fn all_ranges(&self) -> Vec<RangeInfo> {
        let ranges: Vec<Arc<Range>> = self.inner.ranges.read().values().cloned().collect();
        let mut out: Vec<RangeInfo> = ranges.iter().map(|r| range_info(r)).collect();
        out.extend(self.damaged_ranges(None));
        out
    }

    /// Ranges held here that are not served because a cell store of theirs is damaged or
    /// missing (listed so that their rows stay assigned here and answer with the damage).
    fn damaged_ranges(&self, table: Option<u32>) -> Vec<RangeInfo> {
        self.inner
            .damaged
            .read()
            .values()
            .filter(|d| table.is_none_or(|t| t == d.rec.table_id))
            .map(|d| RangeInfo {
                id: d.rec.id,
                table_id: d.rec.table_id,
                start_row: d.rec.start_row.clone(),
                end_row: d.rec.end_row.clone(),
                size_bytes: 0,
                stores: d.rec.groups.iter().map(|g| g.stores.len()).sum(),
                cache_bytes: 0,
                cells_written: 0,
                cells_read: 0,
            })
            .collect()
    }

    /// The errors of the ranges that are not served because of damage.
    pub fn damaged(&self) -> Vec<Error> {
        self.inner
            .damaged
            .read()
            .values()
            .map(Damaged::error)
            .collect()
    }

    /// Waits until no maintenance task is queued or running.
    pub fn wait_for_maintenance(&self) {
        self.inner.maint.wait_idle();
    }

    /// Counters.
    /// Ranges split since the engine opened (cheap: one counter).
    pub fn split_count(&self) -> u64 {
        self.inner.counters.splits.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> EngineStats {
        let inner = &self.inner;
        let ranges = inner.ranges.read();
        let c = &inner.counters;
        EngineStats {
            cache_bytes: inner.cache_bytes.load(Ordering::Acquire),
            ranges: ranges.len(),
            stores: ranges
                .values()
                .map(|r| {
                    r.groups
                        .iter()
                        .map(|g| g.state().stores.len())
                        .sum::<usize>()
                })
                .sum(),
            minor_compactions: c.minor.load(Ordering::Relaxed),
            merging_compactions: c.merging.load(Ordering::Relaxed),
            major_compactions: c.major.load(Ordering::Relaxed),
            splits: c.splits.load(Ordering::Relaxed),
            replayed_cells: c.replayed.load(Ordering::Relaxed),
            purged_fragments: c.purged.load(Ordering::Relaxed),
            block_cache_hits: inner.block_cache.hits(),
            block_cache_misses: inner.block_cache.misses(),
        }
    }

    /// Stops maintenance and closes the commit log. Data in cell caches stays in the commit log
    /// and is replayed at the next open (tables with durability `none` are flushed first).
    pub fn close(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Unlogged data lives only in memory: write it out.
        let unlogged: Vec<u32> = self
            .inner
            .tables
            .read()
            .values()
            .filter(|t| t.schema.durability == Durability::None)
            .map(|t| t.schema.id)
            .collect();
        maintenance::stop(&self.inner);
        for t in unlogged {
            for r in self.inner.table_ranges(t) {
                for gi in 0..r.groups.len() {
                    maintenance::compact_group(&self.inner, &r, gi, CompactionKind::Minor)?;
                }
            }
        }
        let res = self.inner.log.close();
        let res = res.and_then(|()| self.inner.meta.lock().close());
        // Nothing writes any more, whatever failed: another process may take the store.
        self.inner.store_lock.lock().take();
        res
    }
}

/// File, offset and reason if `e` says a file is damaged or missing (not a passing failure).
fn damage(e: &Error) -> Option<(String, u64, String)> {
    match e {
        Error::Checksum { file, offset, .. } | Error::Corrupt { file, offset, .. } => {
            Some((file.clone(), *offset, e.to_string()))
        }
        Error::UnsupportedVersion { file, .. } => Some((file.clone(), 0, e.to_string())),
        Error::Fs(f) if f.is_not_found() => Some((String::new(), 0, e.to_string())),
        _ => None,
    }
}

/// True if `root` holds cell-store directories or commit-log files.
fn root_holds_data(fs: &BlockingFs, root: &str) -> Result<bool> {
    for dir in ["tables", "log"] {
        match fs.readdir(&join(root, dir)) {
            Ok(entries) if !entries.is_empty() => return Ok(true),
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

fn range_info(r: &Range) -> RangeInfo {
    RangeInfo {
        id: r.id,
        table_id: r.table_id,
        start_row: r.start_row.clone(),
        end_row: r.end_row.clone(),
        size_bytes: r.size_bytes(),
        stores: r.groups.iter().map(|g| g.state().stores.len()).sum(),
        cache_bytes: r.groups.iter().map(|g| g.state().cache_bytes()).sum(),
        cells_written: r.cells_written.load(Ordering::Relaxed),
        cells_read: r.cells_read.load(Ordering::Relaxed),
    }
}

/// The rows of a range: `[start, end)`, `None` unbounded.
type RowBounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A new range record with empty access groups; takes the next range id.
fn empty_range_record(
    inner: &Inner,
    schema: &TableSchema,
    start_row: Option<Vec<u8>>,
    end_row: Option<Vec<u8>>,
) -> RangeRecord {
    RangeRecord {
        id: inner.next_range_id.fetch_add(1, Ordering::AcqRel),
        table_id: schema.id,
        start_row,
        end_row,
        groups: schema
            .access_groups
            .iter()
            .map(|g| GroupRecord {
                name: g.name.clone(),
                stores: Vec::new(),
                flushed_revision: i64::MIN,
                next_store: 0,
            })
            .collect(),
    }
}

/// Runs `f` with the table's ranges while holding all their maintenance locks (taken before
/// the gate, in the same order compactions take them), retrying if a split changed the ranges.
fn with_table_locked<T>(
    inner: &Inner,
    table_id: u32,
    f: impl FnOnce(&[Arc<Range>]) -> Result<T>,
) -> Result<T> {
    loop {
        let ranges = inner.table_ranges(table_id);
        let guards: Vec<_> = ranges.iter().map(|r| r.maintenance.lock()).collect();
        if ranges.iter().any(|r| r.retired.load(Ordering::Acquire)) {
            drop(guards);
            std::thread::yield_now();
            continue;
        }
        let out = f(&ranges);
        drop(guards);
        return out;
    }
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// The row intervals a scan may touch: its row intervals, the rows of its cell intervals, or
/// every row when it names neither.
fn scanned_rows(spec: &ScanSpec) -> Vec<RowInterval> {
    if spec.row_intervals.is_empty() && spec.cell_intervals.is_empty() {
        return vec![RowInterval::all()];
    }
    let row_of = |b: &Bound<common::scan_spec::CellPos>| match b {
        // A cell interval starting (or ending) inside a row still touches that row.
        Bound::Included(p) | Bound::Excluded(p) => Bound::Included(p.row.clone()),
        Bound::Unbounded => Bound::Unbounded,
    };
    spec.row_intervals
        .iter()
        .cloned()
        .chain(spec.cell_intervals.iter().map(|c| RowInterval {
            start: row_of(&c.start),
            end: row_of(&c.end),
        }))
        .collect()
}

/// Fails with [`Error::NotHere`] naming the first row of `interval` that no range of `table` in
/// `map` holds.
fn check_covered(map: &RangeMap, table: u32, interval: &RowInterval) -> Result<()> {
    // The lowest row of the interval; the empty row sorts below every other.
    let mut pos = match &interval.start {
        Bound::Included(s) => s.clone(),
        Bound::Excluded(s) => {
            let mut s = s.clone();
            s.push(0);
            s
        }
        Bound::Unbounded => Vec::new(),
    };
    // Each step moves `pos` to the end of a distinct range, so this ends within the number of
    // ranges held.
    loop {
        if interval.is_past_end(&pos) {
            return Ok(());
        }
        let Some(r) = Inner::find_range(map, table, &pos) else {
            return Err(Error::NotHere {
                table_id: table,
                row: pos,
            });
        };
        match &r.end_row {
            Some(end) => pos = end.clone(),
            None => return Ok(()),
        }
    }
}

pub use common::mutation::{MAX_ROW_OR_QUALIFIER_BYTES, MAX_VALUE_BYTES};

fn validate_mutation(table: &TableInfo, m: &MutationRef<'_>) -> Result<()> {
    // Sizes and reserved timestamps: the checks every write path shares.
    common::mutation::check_cell(m).map_err(|e| match m.row.len() {
        0 => Error::InvalidInput(e.to_string()),
        n => {
            let row = String::from_utf8_lossy(&m.row[..n.min(40)]);
            Error::InvalidInput(format!("{e} (row starts {row:?})"))
        }
    })?;
    match m.flag {
        CellFlag::DeleteRow if m.family != 0 || !m.qualifier.is_empty() => {
            return Err(Error::InvalidInput(
                "a row delete has family 0 and an empty qualifier".into(),
            ));
        }
        CellFlag::DeleteRow => return Ok(()),
        CellFlag::DeleteColumnFamily if !m.qualifier.is_empty() => {
            return Err(Error::InvalidInput(
                "a column family delete has an empty qualifier".into(),
            ));
        }
        _ => {}
    }
    let f = table
        .schema
        .family_by_id(m.family)
        .filter(|f| !f.deleted)
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "unknown column family id {} in table {}",
                m.family, table.schema.name
            ))
        })?;
    if table.group_of[m.family as usize].is_none() {
        return Err(Error::InvalidInput(format!(
            "column family '{}' has no access group",
            f.name
        )));
    }
    if f.counter
        && m.flag == CellFlag::Insert
        && crate::scan::visible::parse_counter(m.value).is_none()
    {
        return Err(Error::InvalidInput(format!(
            "bad counter value {:?} for column '{}' (expected n, +n, -n or =n)",
            String::from_utf8_lossy(m.value),
            f.name
        )));
    }
    Ok(())
}

/// The per-family rules of a scan from the schema and the requested columns.
pub(crate) fn family_rules(schema: &TableSchema, spec: &ScanSpec) -> Vec<FamilyRule> {
    let mut rules = vec![FamilyRule::unselected(); 256];
    for f in schema.families.iter().filter(|f| !f.deleted) {
        let selectors: Vec<&QualifierMatch> = spec
            .columns
            .iter()
            .filter(|c| c.family == f.id)
            .map(|c| &c.qualifier)
            .collect();
        if !spec.columns.is_empty() && selectors.is_empty() {
            continue;
        }
        let qualifiers = if selectors.iter().any(|q| matches!(q, QualifierMatch::All)) {
            Vec::new()
        } else {
            selectors.into_iter().cloned().collect()
        };
        let max_versions = match (f.max_versions, spec.max_versions) {
            (0, s) => s,
            (m, 0) => m,
            (m, s) => m.min(s),
        };
        rules[f.id as usize] = FamilyRule {
            selected: true,
            qualifiers,
            max_versions,
            ttl_ns: (f.ttl_secs as i64).saturating_mul(1_000_000_000),
            counter: f.counter,
            time_desc: f.time_order == TimeOrder::Desc,
        };
    }
    rules
}

/// A cursor over the visible cells of a table, range after range.
struct TableCursor {
    ranges: Vec<Arc<Range>>,
    only_row: Option<Vec<u8>>,
    groups: Vec<usize>,
    vopts: VisibleOptions,
    fill_cache: bool,
    current: Option<MergeIter<VisibleCells<Box<dyn CellIter>>>>,
    current_idx: usize,
    /// Cells stepped over in the current range, not yet added to its `cells_read`.
    stepped: u64,
}

impl TableCursor {
    /// Adds the cells stepped over to the current range's read counter.
    fn count_reads(&mut self) {
        if self.stepped > 0 {
            if let Some(r) = self.ranges.get(self.current_idx) {
                r.cells_read.fetch_add(self.stepped, Ordering::Relaxed);
            }
            self.stepped = 0;
        }
    }

    fn open_range(&mut self, idx: usize) {
        self.count_reads();
        let r = &self.ranges[idx];
        let children = self
            .groups
            .iter()
            .map(|&gi| {
                let src = r.group_source(gi, self.fill_cache, self.only_row.as_deref());
                VisibleCells::new(src, self.vopts.clone())
            })
            .collect();
        self.current = Some(MergeIter::new(children));
        self.current_idx = idx;
    }

    /// Moves on to following ranges until one has a cell.
    fn settle(&mut self) -> Result<()> {
        while let Some(cur) = &self.current {
            if cur.valid() || self.current_idx + 1 >= self.ranges.len() {
                return Ok(());
            }
            let next = self.current_idx + 1;
            self.open_range(next);
            let start = self.ranges[next]
                .start_row
                .as_deref()
                .map(key::row_start)
                .unwrap_or_default();
            self.current.as_mut().expect("just opened").seek(&start)?;
        }
        Ok(())
    }
}

impl CellIter for TableCursor {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        // The range holding the target's row: the first whose end is past it.
        let idx = if self.ranges.len() == 1 {
            0
        } else {
            self.ranges
                .iter()
                .position(|r| match &r.end_row {
                    Some(e) => target < key::row_start(e).as_slice(),
                    None => true,
                })
                .unwrap_or(self.ranges.len() - 1)
        };
        if self.current.is_none() || self.current_idx != idx {
            self.open_range(idx);
        }
        self.current.as_mut().expect("opened").seek(target)?;
        self.settle()
    }

    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").key()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").value()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.next()?;
            self.stepped += 1;
        }
        self.settle()
    }
}

impl Drop for TableCursor {
    fn drop(&mut self) {
        self.count_reads();
    }
}

/// The cells of a scan, in key order.
pub struct TableScanner {
    filter: SpecFilter<TableCursor>,
    keys_only: bool,
}

impl TableScanner {
    /// The next cell, decoded.
    pub fn next_cell(&mut self) -> Result<Option<ScanCell>> {
        if !self.filter.valid() {
            return Ok(None);
        }
        let k = KeyRef::from_trusted(self.filter.key())?.to_key();
        let v = if self.keys_only {
            Vec::new()
        } else {
            self.filter.value().to_vec()
        };
        self.filter.advance_cell()?;
        Ok(Some(ScanCell { key: k, value: v }))
    }

    /// The encoded size (key and value bytes) of the cell [`TableScanner::next_ref`] would
    /// give next; `None` at the end of the scan.
    pub fn peek_size(&self) -> Option<usize> {
        if !self.filter.valid() {
            return None;
        }
        let v = if self.keys_only {
            0
        } else {
            self.filter.value().len()
        };
        Some(self.filter.key().len() + v)
    }

    /// Calls `f` with the next cell's key and value, without copying; `Ok(false)` (and no
    /// call) at the end of the scan.
    pub fn next_ref(&mut self, f: impl FnOnce(KeyRef<'_>, &[u8])) -> Result<bool> {
        if !self.filter.valid() {
            return Ok(false);
        }
        let k = KeyRef::from_trusted(self.filter.key())?;
        let v = if self.keys_only {
            &[][..]
        } else {
            self.filter.value()
        };
        f(k, v);
        self.filter.advance_cell()?;
        Ok(true)
    }

    /// Calls `f` with each remaining cell's encoded key and value, without copying.
    pub fn for_each_raw(&mut self, mut f: impl FnMut(&[u8], &[u8])) -> Result<u64> {
        let mut n = 0;
        while self.filter.valid() {
            let v = if self.keys_only {
                &[][..]
            } else {
                self.filter.value()
            };
            f(self.filter.key(), v);
            n += 1;
            self.filter.advance_cell()?;
        }
        Ok(n)
    }

    /// All remaining cells.
    pub fn collect_all(&mut self) -> Result<Vec<ScanCell>> {
        let mut out = Vec::new();
        while let Some(c) = self.next_cell()? {
            out.push(c);
        }
        Ok(out)
    }
}
