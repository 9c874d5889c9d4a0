//! The state every engine handle shares (`Inner`).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use dfs_broker::{BlockingFs, join};
use parking_lot::{Condvar, Mutex, RwLock};

use super::{Damaged, EngineOptions, RangeEnd, RangeMap, TableInfo};
use crate::block_cache::BlockCache;
use crate::cellcache::CellCache;
use crate::cellstore::CellStore;
use crate::commitlog::CommitLog;
use crate::error::{Error, Result};
use crate::maintenance;
use crate::meta::{MetaLog, RangeRecord};
use crate::range::{AccessGroup, GroupState, Range};

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
    pub(super) last_revision: Mutex<i64>,
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
    pub(super) store_lock: Mutex<Option<dfs_broker::FsLock>>,
}

impl Inner {
    /// Allocates `n` consecutive revisions, returning the first. Revisions follow the clock but
    /// strictly increase even if it steps back.
    pub(super) fn alloc_revisions(&self, n: usize) -> i64 {
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
