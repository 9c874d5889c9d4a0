//! The state every engine handle shares (`Inner`), in parts by role: the files and logs, the
//! catalog of what is served (catalog.rs), revisions, memory accounting, garbage and counters.
//! Each part keeps its fields private; callers go through its methods.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use dfs_broker::{BlockingFs, FsLock, join};
use parking_lot::{Condvar, Mutex};

use super::catalog::{Catalog, find_range};
use super::{Clock, CompactionKind, EngineOptions, RangeMap, TableInfo};
use crate::block_cache::BlockCache;
use crate::cellcache::CellCache;
use crate::cellstore::CellStore;
use crate::commitlog::CommitLog;
use crate::error::{Error, Result};
use crate::maintenance;
use crate::meta::{MetaLog, MetaOp, MetaState, RangeRecord};
use crate::range::{AccessGroup, GroupState, Range};

/// Counters of work done, updated by maintenance.
#[derive(Default)]
pub(crate) struct Counters {
    minor: AtomicU64,
    merging: AtomicU64,
    major: AtomicU64,
    splits: AtomicU64,
    replayed: AtomicU64,
    purged: AtomicU64,
    /// Seeks into every range this engine held (`Range::engine_seeks`).
    seeks: Arc<AtomicU64>,
    /// Writes that waited for cache memory, and the nanoseconds they waited.
    memory_waits: AtomicU64,
    memory_wait_ns: AtomicU64,
}

impl Counters {
    /// Counts one finished compaction of `kind` (garbage collection is not counted).
    pub(crate) fn count_compaction(&self, kind: CompactionKind) {
        let c = match kind {
            CompactionKind::Minor => &self.minor,
            CompactionKind::Merging => &self.merging,
            CompactionKind::Major => &self.major,
            CompactionKind::Gc => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Compactions of `kind` finished since open.
    pub(crate) fn compactions(&self, kind: CompactionKind) -> u64 {
        match kind {
            CompactionKind::Minor => self.minor.load(Ordering::Relaxed),
            CompactionKind::Merging => self.merging.load(Ordering::Relaxed),
            CompactionKind::Major => self.major.load(Ordering::Relaxed),
            CompactionKind::Gc => 0,
        }
    }

    pub(crate) fn count_split(&self) {
        self.splits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn splits(&self) -> u64 {
        self.splits.load(Ordering::Relaxed)
    }

    /// Seeks into every range this engine held since open.
    pub(crate) fn seeks(&self) -> u64 {
        self.seeks.load(Ordering::Relaxed)
    }

    pub(crate) fn set_replayed(&self, cells: u64) {
        self.replayed.store(cells, Ordering::Relaxed);
    }

    pub(crate) fn replayed(&self) -> u64 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// Counts one write that waited `waited` for cache memory.
    pub(crate) fn count_memory_wait(&self, waited: std::time::Duration) {
        self.memory_waits.fetch_add(1, Ordering::Relaxed);
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.memory_wait_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Writes that waited for cache memory since open, and the milliseconds they waited.
    pub(crate) fn memory_waits(&self) -> (u64, u64) {
        (
            self.memory_waits.load(Ordering::Relaxed),
            self.memory_wait_ns.load(Ordering::Relaxed) / 1_000_000,
        )
    }

    pub(crate) fn add_purged(&self, fragments: u64) {
        self.purged.fetch_add(fragments, Ordering::Relaxed);
    }

    pub(crate) fn purged(&self) -> u64 {
        self.purged.load(Ordering::Relaxed)
    }
}

/// Where the engine's files live, the two logs that order their changes, and the store lock.
///
/// The meta log's lock comes after every catalog lock (catalog.rs); it is only taken inside
/// [`Files::write_meta`] and [`Files::meta_state`], so it is never held while another lock
/// is taken (the commit log's writer thread takes it to record fragments while appliers hold
/// the gate shared).
pub(crate) struct Files {
    fs: BlockingFs,
    root: String,
    log: CommitLog,
    /// Shared with the commit log's writer thread, which records its fragments here.
    meta: Arc<Mutex<MetaLog>>,
    block_cache: Arc<BlockCache>,
    /// The store's single-writer lock (`<root>/LOCK`, where the backend has locks); released
    /// by `close`.
    store_lock: Mutex<Option<FsLock>>,
    /// Every cell store opened, by path, while anything holds it (a range, a scan, a
    /// compaction, garbage collection): what the master's garbage collection must not delete
    /// though no range references it any more (`Engine::store_use`).
    open_stores: Mutex<HashMap<String, Weak<CellStore>>>,
}

impl Files {
    pub(crate) fn fs(&self) -> &BlockingFs {
        &self.fs
    }

    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    pub(crate) fn log(&self) -> &CommitLog {
        &self.log
    }

    pub(crate) fn block_cache(&self) -> &BlockCache {
        &self.block_cache
    }

    /// Writes one durable, atomic meta-log record.
    pub(crate) fn write_meta(&self, ops: Vec<MetaOp>) -> Result<()> {
        self.meta.lock().write(ops)
    }

    /// Reads the meta log's state.
    pub(crate) fn meta_state<T>(&self, f: impl FnOnce(&MetaState) -> T) -> T {
        f(self.meta.lock().state())
    }

    /// Closes the commit log, then the meta log; frees the store lock whatever failed.
    pub(crate) fn close(&self) -> Result<()> {
        let res = self.log.close();
        let res = res.and_then(|()| self.meta.lock().close());
        // Nothing writes any more, whatever failed: another process may take the store.
        self.store_lock.lock().take();
        res
    }

    pub(crate) fn tables_dir(&self) -> String {
        join(&self.root, "tables")
    }

    /// The directory of a group's cell stores in a range.
    pub(crate) fn store_dir(&self, table_id: u32, group: &str, range_id: u64) -> String {
        format!("{}/{table_id}/{group}/r{range_id}", self.tables_dir())
    }

    /// True if `path` lies under this engine's root.
    pub(crate) fn is_own(&self, path: &str) -> bool {
        let root = self.root.trim_end_matches('/');
        path.strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
    }

    pub(crate) fn open_store(&self, path: &str) -> Result<Arc<CellStore>> {
        let store = CellStore::open(&self.fs, path, self.block_cache.clone())?;
        let mut open = self.open_stores.lock();
        // Forget the dropped ones now and then: the map stays about the size of what is held.
        if open.len() >= 64 && open.len().is_power_of_two() {
            open.retain(|_, w| w.strong_count() > 0);
        }
        open.insert(path.to_string(), Arc::downgrade(&store));
        Ok(store)
    }

    /// Bytes the cell stores held open keep in memory (block indexes, bloom filters).
    pub(crate) fn held_store_memory(&self) -> u64 {
        self.open_stores
            .lock()
            .values()
            .filter_map(Weak::upgrade)
            .map(|s| s.memory_bytes())
            .sum()
    }

    /// The paths of the cell stores something in this process still holds open.
    pub(crate) fn held_stores(&self) -> Vec<String> {
        let mut open = self.open_stores.lock();
        open.retain(|_, w| w.strong_count() > 0);
        open.keys().cloned().collect()
    }
}

/// Bytes of all cell caches (active and frozen), and the wait of writers above the limit.
pub(crate) struct Memory {
    cache_bytes: AtomicU64,
    wait: Mutex<()>,
    cv: Condvar,
}

impl Memory {
    pub(crate) fn bytes(&self) -> u64 {
        self.cache_bytes.load(Ordering::Acquire)
    }

    pub(crate) fn add(&self, n: u64) {
        self.cache_bytes.fetch_add(n, Ordering::AcqRel);
    }

    /// Takes `n` off (never below zero) and wakes writers waiting for memory.
    pub(crate) fn sub(&self, n: u64) {
        let _ = self
            .cache_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(n))
            });
        let _g = self.wait.lock();
        self.cv.notify_all();
    }

    /// Waits up to `timeout` for memory to be given back.
    pub(crate) fn wait_for_release(&self, timeout: Duration) {
        let mut g = self.wait.lock();
        self.cv.wait_for(&mut g, timeout);
    }
}

/// Revisions: they follow the clock but strictly increase even if it steps back.
struct Revisions {
    last: Mutex<i64>,
    /// The first revision of each batch that has revisions but is not yet in the cell caches
    /// (locked after `last` when both are taken).
    in_flight: Mutex<std::collections::BTreeSet<i64>>,
    clock: Arc<dyn Clock>,
}

/// A batch's revisions, held until the batch is in the cell caches (or failed): while it is
/// held, [`Inner::snapshot_revision`] stays below the batch's first revision.
pub(crate) struct Applying<'a> {
    inner: &'a Inner,
    pub base: i64,
}

impl Drop for Applying<'_> {
    fn drop(&mut self) {
        self.inner.revisions.in_flight.lock().remove(&self.base);
    }
}

/// Cell stores replaced by compactions, deleted once nothing uses them.
#[derive(Default)]
pub(crate) struct Garbage {
    pending: Mutex<Vec<Arc<CellStore>>>,
}

impl Garbage {
    /// Hands the stores of `old` that are not in `new` to garbage collection (once each).
    pub(crate) fn retire(&self, old: &[Arc<CellStore>], new: &[Arc<CellStore>]) {
        let mut pending = self.pending.lock();
        for s in old {
            if !new.iter().any(|n| n.path() == s.path())
                && !pending.iter().any(|p| p.path() == s.path())
            {
                pending.push(s.clone());
            }
        }
    }

    /// True if a pending store's path starts with `prefix`.
    pub(crate) fn any_under(&self, prefix: &str) -> bool {
        self.pending
            .lock()
            .iter()
            .any(|s| s.path().starts_with(prefix))
    }

    /// Runs `f` on the pending stores (collection drains them and puts back what must wait).
    pub(crate) fn with_pending<T>(&self, f: impl FnOnce(&mut Vec<Arc<CellStore>>) -> T) -> T {
        f(&mut self.pending.lock())
    }
}

/// The engine's shared state. See each part for what it guards; the lock order is on
/// [`Catalog`].
pub(crate) struct Inner {
    opts: EngineOptions,
    files: Files,
    catalog: Catalog,
    revisions: Revisions,
    memory: Memory,
    garbage: Garbage,
    counters: Counters,
    maint: maintenance::Queue,
    closed: AtomicBool,
}

impl Inner {
    /// The state of an engine opening on `fs` at `root` with its logs open; no tables yet.
    pub(crate) fn new(
        fs: BlockingFs,
        root: &str,
        opts: EngineOptions,
        log: CommitLog,
        meta: Arc<Mutex<MetaLog>>,
        store_lock: Option<FsLock>,
        next_range_id: u64,
    ) -> Self {
        Self {
            files: Files {
                fs,
                root: root.to_string(),
                log,
                meta,
                block_cache: BlockCache::new(opts.block_cache_bytes),
                store_lock: Mutex::new(store_lock),
                open_stores: Mutex::new(HashMap::new()),
            },
            catalog: Catalog::new(next_range_id),
            revisions: Revisions {
                last: Mutex::new(i64::MIN + 1),
                in_flight: Mutex::new(std::collections::BTreeSet::new()),
                clock: opts.clock.clone(),
            },
            memory: Memory {
                cache_bytes: AtomicU64::new(0),
                wait: Mutex::new(()),
                cv: Condvar::new(),
            },
            garbage: Garbage::default(),
            counters: Counters::default(),
            maint: maintenance::Queue::new(opts.maintenance_queue_limit),
            closed: AtomicBool::new(false),
            opts,
        }
    }

    pub(crate) fn opts(&self) -> &EngineOptions {
        &self.opts
    }

    pub(crate) fn files(&self) -> &Files {
        &self.files
    }

    pub(crate) fn fs(&self) -> &BlockingFs {
        self.files.fs()
    }

    pub(crate) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub(crate) fn memory(&self) -> &Memory {
        &self.memory
    }

    pub(crate) fn garbage(&self) -> &Garbage {
        &self.garbage
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    pub(crate) fn maint(&self) -> &maintenance::Queue {
        &self.maint
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Marks the engine closed; false if it already was.
    pub(crate) fn mark_closed(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// Allocates `n` consecutive revisions, returning the first. Revisions follow the clock but
    /// strictly increase even if it steps back.
    pub(crate) fn alloc_revisions(&self, n: usize) -> Applying<'_> {
        let mut last = self.revisions.last.lock();
        let base = self.revisions.clock.now_ns().max(*last + 1);
        *last = base + n as i64 - 1;
        self.revisions.in_flight.lock().insert(base);
        Applying { inner: self, base }
    }

    /// The revision a scan starting now pins: every batch with revisions up to it is wholly in
    /// the cell caches, and none above it is seen by the scan, so a batch (a document and its
    /// index cells) is seen whole or not at all.
    pub(crate) fn snapshot_revision(&self) -> i64 {
        let last = self.revisions.last.lock();
        let in_flight = self.revisions.in_flight.lock();
        match in_flight.first() {
            Some(&b) => b - 1,
            None => *last,
        }
    }

    /// The last revision handed out.
    pub(crate) fn current_revision(&self) -> i64 {
        *self.revisions.last.lock()
    }

    pub(crate) fn observe_revision(&self, rev: i64) {
        let mut last = self.revisions.last.lock();
        *last = (*last).max(rev);
    }

    pub(crate) fn table(&self, id: u32) -> Result<Arc<TableInfo>> {
        self.catalog.table(id)
    }

    pub(crate) fn table_ranges(&self, table: u32) -> Vec<Arc<Range>> {
        self.catalog.table_ranges(table)
    }

    /// The range of `table` in `map` holding `row`.
    pub(crate) fn find_range(map: &RangeMap, table: u32, row: &[u8]) -> Option<Arc<Range>> {
        find_range(map, table, row)
    }

    pub(crate) fn is_own(&self, path: &str) -> bool {
        self.files.is_own(path)
    }

    pub(crate) fn store_dir(&self, table_id: u32, group: &str, range_id: u64) -> String {
        self.files.store_dir(table_id, group, range_id)
    }

    pub(crate) fn open_store(&self, path: &str) -> Result<Arc<CellStore>> {
        self.files.open_store(path)
    }

    /// True if this engine may delete the cell store at `path`: it lies under its own root (a
    /// store adopted from another server, or shared with one after a split, is that server's)
    /// and was not handed to another engine with an unloaded range.
    pub(crate) fn may_delete(&self, path: &str) -> bool {
        self.is_own(path)
            && !self.files.meta_state(|s| s.is_exported(path))
            && !self.catalog.damaged_holds(path)
    }

    /// The error for `row` of `table` if it lies in a damaged range.
    pub(crate) fn damage_at(&self, table: u32, row: &[u8]) -> Option<Error> {
        self.catalog.damage_at(table, row)
    }

    pub(crate) fn add_cache_bytes(&self, n: u64) {
        self.memory.add(n);
    }

    pub(crate) fn sub_cache_bytes(&self, n: u64) {
        self.memory.sub(n);
    }

    /// The paths of the cell stores the ranges held or being unloaded reference.
    pub(crate) fn referenced_stores(&self) -> HashSet<String> {
        let unloading = self.catalog.unloading();
        self.catalog
            .ranges()
            .values()
            .chain(unloading.iter())
            .flat_map(|r| {
                r.groups.iter().flat_map(|g| {
                    g.state()
                        .stores
                        .iter()
                        .map(|s| s.path().to_string())
                        .collect::<Vec<_>>()
                })
            })
            .collect()
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
            seeks: AtomicU64::new(0),
            engine_seeks: self.counters.seeks.clone(),
        })
    }
}
