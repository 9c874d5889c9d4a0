//! The engine API that the range server, the embedded database and the tests all use: open,
//! create/alter/drop tables, apply a batch (returns once durable at the table's level), scan,
//! compact, split, close. This file holds the handle, open and close and the small accessors;
//! the paths live in their own files (`write.rs`, `read.rs`, `ddl.rs`, `replay.rs`).
//!
//! Blocking calls ([`Engine::apply`], [`Engine::scan`], ...) must run on plain threads (or
//! `spawn_blocking`), never inside an async task; `*_async` wrappers do that for async callers.
//!
//! Write path: validate -> take the apply gate (shared) -> assign revisions -> one commit-log
//! append (group commit) -> insert into the cell caches -> release the gate. A freeze takes the
//! gate exclusively, so every cell with revision <= the freeze point is in the frozen cache or
//! earlier, and replay can skip exactly the cells a cell store already holds.

mod catalog;
mod coverage;
mod damage;
mod ddl;
mod inner;
mod options;
mod pieces;
mod prefetch;
mod read;
mod replay;
mod write;

pub use crate::commitlog::entry::{LogCell, decode_log_entry};
pub(crate) use catalog::range_key;
pub use damage::Damaged;
pub(crate) use inner::Inner;
pub use options::{Clock, EngineOptions, SystemClock};
pub use read::TableScanner;
pub(crate) use read::family_rules;
pub(crate) use replay::replay_entry;
pub use write::{MAX_ROW_OR_QUALIFIER_BYTES, MAX_VALUE_BYTES};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{Durability, TableSchema};
use dfs_broker::{BlockingFs, Fs, join};
use parking_lot::Mutex;

use crate::commitlog::{CommitLog, LogRecord, Recorder};
use crate::error::{Error, Result};
use crate::iterators::Registry;
use crate::iterators::combine::Combiner;
use crate::maintenance;
use crate::meta::{MetaLog, MetaOp};
use crate::range::Range;
use crate::scan::spec::ScanSpec;
use crate::scan::visible::FamilyRule;

pub use common::{AsMutationRef, Mutation, MutationRef};

/// A cell returned by a scan.
pub type ScanCell = common::Cell;

/// Which compaction to run (one type for the engine, the wire and the clients).
pub use common::CompactionKind;

pub use common::status::{EngineStats, RangeInfo};

/// A table as the engine knows it.
pub(crate) struct TableInfo {
    pub schema: TableSchema,
    /// The schema again, shared with iterators (`IterEnv::schema`).
    pub shared_schema: Arc<TableSchema>,
    /// Per family id, the index of its access group.
    pub group_of: [Option<u8>; 256],
    /// Per family id, its combiner (COUNTER families: `counter`), built from the registry.
    pub combiners: Vec<Option<Arc<dyn Combiner>>>,
    /// Kinds the schema names that this engine's registry lacks (or whose options it refuses),
    /// as `combiner:NAME`/`iterator:NAME` with the reason: scans fail, writes to such families
    /// are refused and major compactions wait, rather than losing data.
    pub missing_kinds: Vec<String>,
    /// Some live family is APPEND_ONLY: row deletes are refused.
    pub append_only: bool,
    /// Per access group (by position in the schema), whether it holds a live family with a
    /// combiner (see `EngineOptions::combined_flush_bytes`).
    pub combined_groups: Vec<bool>,
    /// Per access group (by position in the schema), the families stored in it.
    pub group_families: Vec<crate::iterators::Families>,
    /// The families whose versions are combined.
    combined: crate::iterators::Families,
    /// The family rules of a scan of every column with the schema's versions.
    default_rules: Arc<Vec<FamilyRule>>,
}

impl TableInfo {
    pub(crate) fn new(schema: TableSchema, registry: &Registry) -> Self {
        let mut combiners: Vec<Option<Arc<dyn Combiner>>> = (0..256).map(|_| None).collect();
        let mut missing_kinds = Vec::new();
        for f in schema.families.iter().filter(|f| !f.deleted) {
            let Some(spec) = f.effective_combiner() else {
                continue;
            };
            match registry
                .combiner(&spec.kind)
                .map(|k| k.build(&spec.options))
            {
                Some(Ok(c)) => combiners[f.id as usize] = Some(c),
                Some(Err(e)) => missing_kinds.push(format!(
                    "combiner:{} (column family '{}': {e})",
                    spec.kind, f.name
                )),
                None => missing_kinds.push(format!(
                    "combiner:{} (column family '{}': not known to this server)",
                    spec.kind, f.name
                )),
            }
        }
        for it in &schema.iterators {
            match registry.iterator(&it.kind) {
                None => missing_kinds.push(format!(
                    "iterator:{} (iterator '{}': not known to this server)",
                    it.kind, it.name
                )),
                Some(k) => {
                    if let Err(e) = k.validate(&it.options, &schema) {
                        missing_kinds.push(format!(
                            "iterator:{} (iterator '{}': {e})",
                            it.kind, it.name
                        ));
                    }
                }
            }
        }
        let append_only = schema.families.iter().any(|f| !f.deleted && f.append_only);
        let group_of = schema.group_index_by_family();
        let mut combined_groups = vec![false; schema.access_groups.len()];
        for f in 1..256usize {
            if let (Some(_), Some(g)) = (&combiners[f], group_of[f])
                && let Some(c) = combined_groups.get_mut(g as usize)
            {
                *c = true;
            }
        }
        let group_families = (0..schema.access_groups.len())
            .map(|gi| {
                crate::iterators::Families::of(
                    (1..=255u8).filter(|&f| group_of[f as usize] == Some(gi as u8)),
                )
            })
            .collect();
        let combined = crate::iterators::Families::of(
            (1..=255u8).filter(|&f| combiners[f as usize].is_some()),
        );
        let mut info = Self {
            group_of,
            combined_groups,
            group_families,
            combined,
            shared_schema: Arc::new(schema.clone()),
            combiners,
            missing_kinds,
            append_only,
            default_rules: Arc::new(Vec::new()),
            schema,
        };
        info.default_rules = Arc::new(family_rules(&info, &ScanSpec::default()));
        info
    }

    /// The families whose versions are combined.
    pub(crate) fn combined_families(&self) -> crate::iterators::Families {
        self.combined
    }

    /// The bytes at which group `gi`'s active cache is flushed, given its state `st` (see
    /// `EngineOptions::combined_flush_bytes`).
    pub(crate) fn flush_bytes(
        &self,
        opts: &EngineOptions,
        gi: usize,
        st: &crate::range::GroupState,
    ) -> u64 {
        let small = opts.combined_flush_bytes;
        if small > 0
            && small < opts.cell_cache_flush_bytes
            && self.combined_groups.get(gi).copied().unwrap_or(false)
            && st.store_bytes() <= small
        {
            small
        } else {
            opts.cell_cache_flush_bytes
        }
    }

    /// The error a scan or major compaction meets when the schema names a kind this engine
    /// lacks.
    pub(crate) fn check_kinds(&self) -> Result<()> {
        match self.missing_kinds.first() {
            None => Ok(()),
            Some(k) => Err(Error::InvalidInput(format!(
                "table {} needs {k}; this server cannot run it (build ht with the kind \
                 registered, see ht::main_with)",
                self.schema.name
            ))),
        }
    }
}

/// Ranges are kept ordered by (table, end row), an unbounded end last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum RangeEnd {
    Row(Vec<u8>),
    Max,
}

pub(crate) type RangeMap = BTreeMap<catalog::RangeKey, Arc<Range>>;

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
            self.inner.fs().inner().url(),
            self.inner.files().root()
        )
    }
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
        let holds_data = replay::root_holds_data(&bfs, root)?;
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
        let state = meta.lock().state().clone();
        let inner = Arc::new(Inner::new(
            bfs,
            root,
            opts,
            log,
            meta,
            store_lock,
            state.next_range_id.max(1),
        ));
        let open_stores = replay::load_catalog(&inner, &state)?;
        // Replay.
        let engine = Engine { inner };
        engine.replay()?;
        engine.remove_orphans(&open_stores)?;
        maintenance::start(&engine);
        // Work left over: caches that are over the limit after replay.
        engine.schedule_flushes_if_needed();
        Ok(engine)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.inner.is_closed() {
            return Err(Error::Closed);
        }
        Ok(())
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
            .catalog()
            .tables()
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

    /// The iterator and combiner kinds this engine can run (`EngineOptions::registry`).
    pub fn registry(&self) -> &Arc<crate::iterators::Registry> {
        &self.inner.opts().registry
    }

    /// Runs a compaction of every range of a table (of the whole engine with `None`) and waits.
    /// [`CompactionKind::Gc`] removes replaced cell stores ([`Engine::collect_garbage`]).
    pub fn compact(&self, table_id: Option<u32>, kind: CompactionKind) -> Result<()> {
        self.check_open()?;
        if kind == CompactionKind::Gc {
            if let Some(t) = table_id {
                self.inner.table(t)?;
            }
            return maintenance::collect_garbage(&self.inner);
        }
        let ranges: Vec<Arc<Range>> = match table_id {
            Some(t) => {
                self.inner.table(t)?;
                self.inner.table_ranges(t)
            }
            None => self.inner.catalog().all_ranges(),
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
    /// A table in [`EngineOptions::unsplit_tables`] is refused.
    pub fn split(&self, table_id: u32, row: &[u8]) -> Result<()> {
        self.check_open()?;
        if self.inner.opts().unsplit_tables.contains(&table_id) {
            return Err(Error::InvalidInput(format!(
                "table {table_id} is never split (it is read as one range)"
            )));
        }
        let r = self.inner.catalog().find(table_id, row).ok_or_else(|| {
            Error::InvalidInput(format!("no range of table {table_id} holds that row"))
        })?;
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
        let ranges = self.inner.catalog().all_ranges();
        let mut out: Vec<RangeInfo> = ranges.iter().map(|r| range_info(r)).collect();
        out.extend(self.damaged_ranges(None));
        out
    }

    /// Waits until no maintenance task is queued or running.
    pub fn wait_for_maintenance(&self) {
        self.inner.maint().wait_idle();
    }

    /// Counters.
    /// Ranges split since the engine opened (cheap: one counter).
    pub fn split_count(&self) -> u64 {
        self.inner.counters().splits()
    }

    pub fn stats(&self) -> EngineStats {
        let inner = &self.inner;
        let ranges = inner.catalog().ranges();
        let c = inner.counters();
        let (memory_waits, memory_wait_ms) = c.memory_waits();
        EngineStats {
            cache_bytes: inner.memory().bytes(),
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
            block_cache_bytes: inner.files().block_cache().used_bytes(),
            store_memory_bytes: inner.files().held_store_memory(),
            minor_compactions: c.compactions(CompactionKind::Minor),
            merging_compactions: c.compactions(CompactionKind::Merging),
            major_compactions: c.compactions(CompactionKind::Major),
            splits: c.splits(),
            replayed_cells: c.replayed(),
            purged_fragments: c.purged(),
            block_cache_hits: inner.files().block_cache().hits(),
            block_cache_misses: inner.files().block_cache().misses(),
            seeks: c.seeks(),
            memory_waits,
            memory_wait_ms,
        }
    }

    /// Stops maintenance and closes the commit log. Data in cell caches stays in the commit log
    /// and is replayed at the next open (tables with durability `none` are flushed first).
    pub fn close(&self) -> Result<()> {
        if !self.inner.mark_closed() {
            return Ok(());
        }
        // Unlogged data lives only in memory: write it out.
        let unlogged: Vec<u32> = self
            .inner
            .catalog()
            .tables()
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
        self.inner.files().close()
    }
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
        seeks: r.seeks.load(Ordering::Relaxed),
    }
}
