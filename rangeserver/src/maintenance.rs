//! Background maintenance: minor, merging and major compactions, splits, commit-log purge and
//! garbage collection of cell-store files, run by a bounded pool of threads over a bounded queue.
//!
//! Every change of a range's files follows one order: write and sync the new cell store, write
//! the meta-log record that references it (synced), swap the in-memory state, then purge commit-log
//! fragments and delete files that nothing references. A crash at any point leaves either the
//! old record (the new file is an orphan, removed at open) or the new one (the old files are
//! orphans).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::cellcache::CellCache;
use crate::cellstore::{CellStore, CellStoreOptions, CellStoreWriter};
use crate::engine::{CompactionKind, Engine, Inner, TableInfo, family_rules};
use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::iterators::stack::{CellKv, KvCell, PartialCombine, table_stack};
use crate::iterators::{Budget, IterEnv, IterScope};
use crate::merge::{BoundedIter, MergeIter};
use crate::meta::MetaOp;
use crate::range::{AccessGroup, GroupState, Range, source_of};
use crate::scan::spec::ScanSpec;
use crate::scan::visible::{Mode, VisibleCells, VisibleOptions};

mod policy;
mod split;
use policy::{MergeNeed, needs_merge, select_merge, smallest_window};
pub use split::split_range;
use split::{choose_split_row, rewrite_shared};

/// A unit of background work.
pub enum Task {
    /// Write a group's cell cache out as a cell store.
    Flush { range: Arc<Range>, group: usize },
    /// Merge a group's cell stores.
    Merge { range: Arc<Range>, group: usize },
    /// Rewrite the stores of every group that hold keys outside the range into one holding
    /// only the range's rows, dropping nothing (after a split, so the halves stop sharing the
    /// parent's files; stores already wholly inside the range are left as they are).
    Rewrite { range: Arc<Range> },
    /// Split a range that grew past the split size.
    Split { range: Arc<Range> },
}

struct QueueState {
    tasks: VecDeque<Task>,
    running: usize,
    stopped: bool,
    threads: Vec<JoinHandle<()>>,
}

/// The bounded task queue shared by the maintenance threads.
pub struct Queue {
    state: Mutex<QueueState>,
    work: Condvar,
    idle: Condvar,
    limit: usize,
}

impl Queue {
    pub fn new(limit: usize) -> Self {
        Self {
            state: Mutex::new(QueueState {
                tasks: VecDeque::new(),
                running: 0,
                stopped: false,
                threads: Vec::new(),
            }),
            work: Condvar::new(),
            idle: Condvar::new(),
            limit: limit.max(1),
        }
    }

    /// Queues a task; returns false (dropping it) when the queue is full or stopped.
    pub fn push(&self, t: Task) -> bool {
        let mut st = self.state.lock();
        if st.stopped || st.tasks.len() >= self.limit {
            return false;
        }
        st.tasks.push_back(t);
        self.work.notify_one();
        true
    }

    /// Waits until nothing is queued or running.
    pub fn wait_idle(&self) {
        let mut st = self.state.lock();
        while !st.stopped && (!st.tasks.is_empty() || st.running > 0) {
            self.idle.wait_for(&mut st, Duration::from_millis(100));
        }
    }
}

/// Starts the maintenance threads.
pub fn start(engine: &Engine) {
    let n = engine.inner.opts().maintenance_threads.max(1);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let inner = engine.inner.clone();
        let h = std::thread::Builder::new()
            .name(format!("ht-maint-{i}"))
            .spawn(move || worker(inner))
            .expect("spawn maintenance thread");
        handles.push(h);
    }
    engine.inner.maint().state.lock().threads = handles;
}

/// Stops the maintenance threads after their current task; queued tasks are dropped.
pub fn stop(inner: &Inner) {
    let threads = {
        let mut st = inner.maint().state.lock();
        st.stopped = true;
        st.tasks.clear();
        inner.maint().work.notify_all();
        inner.maint().idle.notify_all();
        std::mem::take(&mut st.threads)
    };
    for t in threads {
        let _ = t.join();
    }
}

fn worker(inner: Arc<Inner>) {
    let q = inner.maint();
    loop {
        let task = {
            let mut st = q.state.lock();
            loop {
                if st.stopped {
                    return;
                }
                if let Some(t) = st.tasks.pop_front() {
                    st.running += 1;
                    break Some(t);
                }
                if q.work.wait_for(&mut st, Duration::from_secs(1)).timed_out() {
                    break None;
                }
            }
        };
        match task {
            Some(t) => {
                if let Err(e) = run(&inner, t) {
                    tracing::error!(error = %e, "maintenance task failed");
                }
                let mut st = q.state.lock();
                st.running -= 1;
                q.idle.notify_all();
            }
            None => {
                if let Err(e) = collect_garbage(&inner) {
                    tracing::warn!(error = %e, "garbage collection failed");
                }
            }
        }
    }
}

fn run(inner: &Arc<Inner>, task: Task) -> Result<()> {
    match task {
        Task::Flush { range, group } => {
            let kind = flush_kind(inner, &range, group);
            let r = compact_group(inner, &range, group, kind);
            range.groups[group]
                .flush_queued
                .store(false, Ordering::Release);
            r?;
        }
        Task::Merge { range, group } => {
            let _m = range.maintenance.lock();
            if !range.retired.load(Ordering::Acquire) {
                merge_tiered(inner, &range, group)?;
                drop(_m);
                queue_follow_ups(inner, &range, group);
            }
        }
        Task::Rewrite { range } => {
            let _m = range.maintenance.lock();
            if !range.retired.load(Ordering::Acquire) {
                for gi in 0..range.groups.len() {
                    rewrite_shared(inner, &range, gi)?;
                }
                drop(_m);
                for gi in 0..range.groups.len() {
                    queue_follow_ups(inner, &range, gi);
                }
            }
        }
        Task::Split { range } => {
            if range.retired.load(Ordering::Acquire) {
                return Ok(());
            }
            // A range that is not split now gets the merges its follow-ups left to the split.
            let split = choose_split_row(&range).map(|row| split_range(inner, &range, &row));
            if !matches!(split, Some(Ok(()))) {
                for gi in 0..range.groups.len() {
                    queue_merge_if_needed(inner, &range, gi);
                }
            }
            split.transpose()?;
        }
    }
    collect_garbage(inner)
}

/// How a flush of group `gi` runs: as a major compaction when the group holds combiner
/// families and its stores are small beside its cache (`EngineOptions::combined_flush_ratio`),
/// so that a counter table's reads meet one combined cell per column in the stores instead of
/// every increment since the last major compaction; otherwise as a minor compaction. Not when
/// the table names a kind this server lacks (its major compactions wait).
fn flush_kind(inner: &Inner, range: &Range, gi: usize) -> CompactionKind {
    let ratio = inner.opts().combined_flush_ratio;
    let Ok(table) = inner.table(range.table_id) else {
        return CompactionKind::Minor;
    };
    let combined = table.combined_groups.get(gi).copied().unwrap_or(false);
    if ratio <= 0.0 || !combined || table.check_kinds().is_err() {
        return CompactionKind::Minor;
    }
    let st = range.groups[gi].state();
    if (st.store_bytes() as f64) <= ratio * st.cache_bytes() as f64 {
        CompactionKind::Major
    } else {
        CompactionKind::Minor
    }
}

/// Queues a minor compaction of a group unless one is queued already.
pub fn queue_flush(inner: &Inner, range: &Arc<Range>, group: usize) {
    let g = &range.groups[group];
    if g.flush_queued.swap(true, Ordering::AcqRel) {
        return;
    }
    if !inner.maint().push(Task::Flush {
        range: range.clone(),
        group,
    }) {
        g.flush_queued.store(false, Ordering::Release);
    }
}

/// The highest revision all of whose cells are in cell stores: commit-log fragments with
/// nothing newer can be removed.
pub fn purge_point(inner: &Inner) -> i64 {
    let mut oldest_unflushed = i64::MAX;
    // A damaged range's unflushed cells live only in the log.
    for d in inner.catalog().damaged() {
        for g in &d.rec.groups {
            oldest_unflushed = oldest_unflushed.min(g.flushed_revision.saturating_add(1));
        }
    }
    let unloading = inner.catalog().unloading();
    for r in inner.catalog().ranges().values().chain(unloading.iter()) {
        for g in &r.groups {
            let st = g.state();
            for c in std::iter::once(&st.active).chain(st.frozen.iter()) {
                if let Some(m) = c.min_revision() {
                    oldest_unflushed = oldest_unflushed.min(m);
                }
            }
        }
    }
    if oldest_unflushed == i64::MAX {
        inner.current_revision()
    } else {
        oldest_unflushed - 1
    }
}

/// Removes commit-log fragments that hold only flushed cells. The purge point is taken with the
/// apply gate held exclusively: an applier holds it shared from revision assignment until its
/// cells are in a cache, so no acknowledged-but-uncached batch can be missed. Cells applied after
/// get higher revisions than the point, so their fragments are kept.
pub fn purge_log(inner: &Inner) -> Result<()> {
    let point = {
        let _gate = inner.catalog().exclusive();
        purge_point(inner)
    };
    let n = inner.files().log().purge(point)?;
    inner.counters().add_purged(n as u64);
    Ok(())
}

/// Runs one compaction of one group, waiting for other maintenance of the range.
pub fn compact_group(
    inner: &Inner,
    range: &Arc<Range>,
    gi: usize,
    kind: CompactionKind,
) -> Result<()> {
    let _m = range.maintenance.lock();
    if range.retired.load(Ordering::Acquire) {
        return Ok(());
    }
    compact_locked(inner, range, gi, kind)?;
    drop(_m);
    queue_follow_ups(inner, range, gi);
    Ok(())
}

/// Queues what a compaction of group `gi` leaves due: a split when the range has outgrown
/// `split_size_bytes`, else a merging compaction when the group needs one. A due split goes
/// first and alone: each half keeps only the parent's stores that hold its rows, so the stores
/// of a load in key order are divided between the halves instead of merged into one store just
/// before the split cuts it; the halves' own follow-ups are queued after the split's rewrite
/// ([`Task::Rewrite`]), and a range that cannot be split is merged as before.
pub(crate) fn queue_follow_ups(inner: &Inner, range: &Arc<Range>, gi: usize) {
    if range.retired.load(Ordering::Acquire) {
        return;
    }
    let opts = inner.opts();
    if opts.split_size_bytes > 0
        && range.size_bytes() > opts.split_size_bytes
        && !opts.unsplit_tables.contains(&range.table_id)
    {
        inner.maint().push(Task::Split {
            range: range.clone(),
        });
        return;
    }
    queue_merge_if_needed(inner, range, gi);
}

/// Queues a merging compaction of group `gi` when it needs one ([`needs_merge`]).
fn queue_merge_if_needed(inner: &Inner, range: &Arc<Range>, gi: usize) {
    if needs_merge(
        range,
        &range.groups[gi].state().stores,
        inner.opts().max_stores_per_group,
    )
    .is_some()
    {
        inner.maint().push(Task::Merge {
            range: range.clone(),
            group: gi,
        });
    }
}

/// Moves the active cache to `frozen` (unless a frozen one is left from a failed attempt).
/// Returns false if there is nothing to write.
fn freeze(inner: &Inner, g: &AccessGroup) -> bool {
    let _gate = inner.catalog().exclusive();
    let st = g.state();
    if st.frozen.is_some() {
        return true;
    }
    if st.active.is_empty() {
        return false;
    }
    let rev = inner.current_revision();
    g.update(|s| GroupState {
        active: Arc::new(CellCache::new()),
        frozen: Some(s.active.clone()),
        frozen_revision: rev,
        ..s.clone()
    });
    true
}

fn store_options(inner: &Inner, range: &Range, gi: usize) -> Result<CellStoreOptions> {
    let t = inner.table(range.table_id)?;
    Ok(t.schema
        .access_groups
        .get(gi)
        .map(CellStoreOptions::from_access_group)
        .unwrap_or_default())
}

/// Writes everything `src` yields into a new cell store of the group and opens it.
/// Returns the store (`None` if `src` was empty) and the number to use after it.
fn write_store(
    inner: &Inner,
    range: &Range,
    gi: usize,
    next_store: u64,
    src: &mut dyn CellIter,
) -> Result<(Option<Arc<CellStore>>, u64)> {
    let opts = store_options(inner, range, gi)?;
    write_store_with(inner, range, gi, next_store, opts, src)
}

/// [`write_store`] with the cell-store options given (for ranges of a table not registered yet).
pub(crate) fn write_store_with(
    inner: &Inner,
    range: &Range,
    gi: usize,
    next_store: u64,
    opts: CellStoreOptions,
    src: &mut dyn CellIter,
) -> Result<(Option<Arc<CellStore>>, u64)> {
    let g = &range.groups[gi];
    let dir = inner.store_dir(range.table_id, &g.name, range.id);
    // A file with the next number may be left by an attempt whose meta-log write failed after
    // reaching the disk, and so may be referenced: never overwrite, take the next free number.
    // Unreferenced leftovers are removed at open.
    let mut number = next_store;
    while inner.fs().exists(&format!("{dir}/cs{number}"))? {
        number += 1;
    }
    let path = format!("{dir}/cs{number}");
    let written = (|| -> Result<u64> {
        let mut w = CellStoreWriter::create(inner.fs(), &path, opts)?;
        src.seek(b"")?;
        while src.valid() {
            w.add(src.key(), src.value())?;
            src.next()?;
        }
        let cells = w.cells();
        w.finish()?;
        Ok(cells)
    })();
    let cells = match written {
        Ok(c) => c,
        Err(e) => {
            // This file is ours and nothing references it: do not leave it behind.
            let _ = inner.fs().remove(&path);
            return Err(e);
        }
    };
    if cells == 0 {
        inner.fs().remove(&path)?;
        return Ok((None, number + 1));
    }
    let store = inner.open_store(&path)?;
    // Keep its first key (one block read, likely from the page cache): merge decisions and
    // bounded seeks below the store use it. A failure here only leaves it unknown; a read
    // that needs the block reports it.
    let _ = store.key_span();
    Ok((Some(store), number + 1))
}

/// Persists the range with `new_group` in place of group `gi`, then swaps it in memory.
fn commit_group(
    inner: &Inner,
    range: &Range,
    gi: usize,
    new_group: GroupState,
) -> Result<Arc<GroupState>> {
    let mut rec = range.record();
    rec.groups[gi] = crate::meta::GroupRecord {
        name: range.groups[gi].name.clone(),
        stores: new_group
            .stores
            .iter()
            .map(|s| s.path().to_string())
            .collect(),
        flushed_revision: new_group.flushed_revision,
        next_store: new_group.next_store,
    };
    inner.files().write_meta(vec![MetaOp::PutRange(rec)])?;
    // The active cache may have taken writes meanwhile: keep the current one.
    Ok(range.groups[gi].update(|cur| GroupState {
        active: cur.active.clone(),
        ..new_group
    }))
}

/// Hands stores nothing will reference any more to garbage collection.
pub fn retire(inner: &Inner, stores: &[Arc<CellStore>]) {
    retire_stores(inner, stores, &[]);
}

fn retire_stores(inner: &Inner, old: &[Arc<CellStore>], new: &[Arc<CellStore>]) {
    inner.garbage().retire(old, new);
}

pub(crate) fn compact_locked(
    inner: &Inner,
    range: &Range,
    gi: usize,
    kind: CompactionKind,
) -> Result<()> {
    let g = &range.groups[gi];
    let bounds = range.key_bounds();
    match kind {
        CompactionKind::Minor => {
            if !freeze(inner, g) {
                return Ok(());
            }
            let st = g.state();
            let frozen = st.frozen.clone().expect("frozen after freeze");
            let raw = Box::new(BoundedIter::new(frozen.iter(), bounds.0, bounds.1));
            let table = inner.table(range.table_id)?;
            let mut src = partial_stack(inner, &table, raw)?;
            let (new, next_store) = write_store(inner, range, gi, st.next_store, &mut *src)?;
            let mut stores = st.stores.clone();
            stores.extend(new);
            commit_group(
                inner,
                range,
                gi,
                GroupState {
                    active: st.active.clone(),
                    frozen: None,
                    frozen_revision: i64::MIN,
                    stores,
                    flushed_revision: st.frozen_revision.max(st.flushed_revision),
                    next_store,
                },
            )?;
            inner.sub_cache_bytes(frozen.memory_bytes());
            inner.counters().count_compaction(CompactionKind::Minor);
            purge_log(inner)?;
        }
        CompactionKind::Merging => merge_stores(inner, range, gi, 2)?,
        CompactionKind::Gc => collect_garbage(inner)?,
        CompactionKind::Major => {
            let had_cache = freeze(inner, g);
            let st = g.state();
            if !had_cache && st.stores.is_empty() {
                return Ok(());
            }
            let table = inner.table(range.table_id)?;
            // A combiner or iterator this server lacks would be left out of what is written
            // for good: the compaction waits for a server that has it.
            table
                .check_kinds()
                .map_err(|e| Error::InvalidInput(format!("major compaction deferred: {e}")))?;
            let mut src = major_source(inner, &table, &st, bounds)?;
            let (new, next_store) = write_store(inner, range, gi, st.next_store, &mut src)?;
            let stores: Vec<Arc<CellStore>> = new.into_iter().collect();
            let frozen_bytes = st.frozen.as_ref().map_or(0, |f| f.memory_bytes());
            commit_group(
                inner,
                range,
                gi,
                GroupState {
                    active: st.active.clone(),
                    frozen: None,
                    frozen_revision: i64::MIN,
                    stores: stores.clone(),
                    flushed_revision: st.frozen_revision.max(st.flushed_revision),
                    next_store,
                },
            )?;
            retire_stores(inner, &st.stores, &stores);
            inner.sub_cache_bytes(frozen_bytes);
            inner.counters().count_compaction(CompactionKind::Major);
            purge_log(inner)?;
        }
    }
    Ok(())
}

/// What a major compaction writes of group state `st`: its frozen cache (if any) and every
/// store, not its active cache, with what a scan would no longer show dropped (versions past
/// the limit, deleted and expired cells, the delete markers themselves) and the table's
/// MAJOR-scope iterators applied. The caller checked that this server has every kind the
/// table names.
fn major_source(
    inner: &Inner,
    table: &TableInfo,
    st: &GroupState,
    bounds: (Option<Vec<u8>>, Option<Vec<u8>>),
) -> Result<KvCell> {
    let rules = family_rules(table, &ScanSpec::default());
    let now_ns = inner.opts().clock.now_ns();
    let vopts = VisibleOptions {
        families: Arc::new(rules),
        time_start: i64::MIN,
        time_end: i64::MAX,
        now_ns,
        return_deletes: false,
        mode: Mode::MajorCompaction,
        snapshot_rev: i64::MAX,
    };
    let raw = source_of(
        &GroupState {
            active: Arc::new(CellCache::new()),
            ..st.clone()
        },
        bounds,
        false,
    );
    let visible = Box::new(CellKv::new(Box::new(VisibleCells::new(raw, vopts)), None));
    let env = IterEnv {
        scope: IterScope::Major,
        now_ns,
        schema: table.shared_schema.clone(),
        budget: Budget::unlimited(),
        combined: table.combined_families(),
    };
    let stack = table_stack(
        visible,
        &table.schema.iterators,
        &inner.opts().registry,
        &env,
    )?;
    Ok(KvCell::new(stack))
}

/// The automatic merging compaction of group `gi`: of the stores [`select_merge`] picks when
/// too many overlap, of the [`smallest_window`] when there are only too many. A merge that
/// takes every store of a group with no combiner family, in a table with no iterators, also
/// drops what no read can show any more (versions past the limit, expired cells, cells under a
/// delete), as HBase promotes a compaction of all files to a major one; it keeps the delete
/// markers, since the cache above the stores may hold cells a marker's timestamp covers. A
/// merge of some stores drops nothing.
fn merge_tiered(inner: &Inner, range: &Range, gi: usize) -> Result<()> {
    let st = range.groups[gi].state();
    let opts = inner.opts();
    let Some(need) = needs_merge(range, &st.stores, opts.max_stores_per_group) else {
        return Ok(());
    };
    let sizes: Vec<u64> = st.stores.iter().map(|s| s.trailer().file_size).collect();
    let (from, to) = match need {
        MergeNeed::Overlap => {
            match select_merge(&sizes, opts.max_stores_per_group, opts.merge_ratio) {
                Some(from) => (from, sizes.len()),
                None => return Ok(()),
            }
        }
        MergeNeed::Count => smallest_window(&sizes, opts.max_stores_per_group),
    };
    let table = inner.table(range.table_id)?;
    let bounds = range.key_bounds();
    let merged = &st.stores[from..to];
    let raw = merged_stores(merged, bounds);
    let plain = table.schema.iterators.is_empty()
        && !table.combined_groups.get(gi).copied().unwrap_or(false);
    let mut src: Box<dyn CellIter> = if from == 0 && to == sizes.len() && plain {
        let vopts = VisibleOptions {
            families: Arc::new(family_rules(&table, &ScanSpec::default())),
            time_start: i64::MIN,
            time_end: i64::MAX,
            now_ns: opts.clock.now_ns(),
            return_deletes: true,
            mode: Mode::MajorCompaction,
            snapshot_rev: i64::MAX,
        };
        Box::new(VisibleCells::new(raw, vopts))
    } else {
        partial_stack(inner, &table, raw)?
    };
    let (new, next_store) = write_store(inner, range, gi, st.next_store, &mut *src)?;
    let mut stores: Vec<Arc<CellStore>> = st.stores[..from].to_vec();
    stores.extend(new.iter().cloned());
    stores.extend(st.stores[to..].iter().cloned());
    let group = GroupState {
        stores,
        next_store,
        ..(*st).clone()
    };
    commit_merge(inner, range, gi, group, merged, new)
}

/// Ends a merging compaction of group `gi`: persists and swaps in `group`, hands the `merged`
/// stores to garbage collection (`new`, the store written, is kept) and counts the compaction.
fn commit_merge(
    inner: &Inner,
    range: &Range,
    gi: usize,
    group: GroupState,
    merged: &[Arc<CellStore>],
    new: Option<Arc<CellStore>>,
) -> Result<()> {
    commit_group(inner, range, gi, group)?;
    let kept: Vec<Arc<CellStore>> = new.into_iter().collect();
    retire_stores(inner, merged, &kept);
    inner.counters().count_compaction(CompactionKind::Merging);
    Ok(())
}

/// The cells of `stores` merged in key order, within `bounds` (a range's
/// [`Range::key_bounds`]), read without filling the block cache: a compaction's input.
fn merged_stores(
    stores: &[Arc<CellStore>],
    bounds: (Option<Vec<u8>>, Option<Vec<u8>>),
) -> Box<dyn CellIter> {
    let children: Vec<Box<dyn CellIter>> = stores
        .iter()
        .map(|s| Box::new(s.scanner(false)) as Box<dyn CellIter>)
        .collect();
    Box::new(BoundedIter::new(
        MergeIter::new(children),
        bounds.0,
        bounds.1,
    ))
}

/// Merges a group's cell stores (when it has at least `min_stores`) into one holding only the
/// range's rows, dropping nothing.
fn merge_stores(inner: &Inner, range: &Range, gi: usize, min_stores: usize) -> Result<()> {
    let g = &range.groups[gi];
    let bounds = range.key_bounds();
    let st = g.state();
    if st.stores.len() < min_stores {
        return Ok(());
    }
    let raw = merged_stores(&st.stores, bounds);
    let table = inner.table(range.table_id)?;
    let mut src = partial_stack(inner, &table, raw)?;
    let (new, next_store) = write_store(inner, range, gi, st.next_store, &mut *src)?;
    let stores: Vec<Arc<CellStore>> = new.into_iter().collect();
    commit_group(
        inner,
        range,
        gi,
        GroupState {
            stores: stores.clone(),
            next_store,
            ..(*st).clone()
        },
    )?;
    retire_stores(inner, &st.stores, &stores);
    inner.counters().count_compaction(CompactionKind::Merging);
    Ok(())
}

/// What a partial (minor or merging) compaction writes of `raw`: APPEND_ONLY combiner families
/// combined, then the table's MINOR-scope iterators. Delete markers pass through both. A kind
/// this server lacks is left out: partial-scope kinds only drop or merge cells, so without it
/// the output keeps more, and loses nothing.
fn partial_stack(
    inner: &Inner,
    table: &TableInfo,
    raw: Box<dyn CellIter>,
) -> Result<Box<dyn CellIter>> {
    let combiners: Vec<_> = (0..256usize)
        .map(|f| {
            let append_only = table
                .schema
                .family_by_id(f as u8)
                .is_some_and(|s| s.append_only && !s.deleted);
            table.combiners[f].clone().filter(|_| append_only)
        })
        .collect();
    let combined: Box<dyn CellIter> = if combiners.iter().any(Option::is_some) {
        Box::new(PartialCombine::new(raw, combiners))
    } else {
        raw
    };
    let registry = &inner.opts().registry;
    let its: Vec<_> = table
        .schema
        .iterators
        .iter()
        .filter(|i| i.scopes.contains(&IterScope::Minor) && registry.iterator(&i.kind).is_some())
        .cloned()
        .collect();
    if its.is_empty() {
        return Ok(combined);
    }
    let env = IterEnv {
        scope: IterScope::Minor,
        now_ns: inner.opts().clock.now_ns(),
        schema: table.shared_schema.clone(),
        budget: Budget::unlimited(),
        combined: table.combined_families(),
    };
    let stack = table_stack(Box::new(CellKv::new(combined, None)), &its, registry, &env)?;
    Ok(Box::new(KvCell::new(stack)))
}

/// Deletes replaced cell stores that no range references and no scanner holds.
pub fn collect_garbage(inner: &Inner) -> Result<()> {
    let referenced = inner.referenced_stores();
    inner.garbage().with_pending(|pending| {
        let mut keep = Vec::new();
        for s in pending.drain(..) {
            if referenced.contains(s.path()) {
                continue;
            }
            // Another server's file (adopted, or shared after a split), or one handed to another
            // engine with an unloaded range: never deleted here.
            if !inner.may_delete(s.path()) {
                continue;
            }
            if Arc::strong_count(&s) > 1 {
                keep.push(s);
                continue;
            }
            let path = s.path().to_string();
            drop(s);
            match inner.fs().remove(&path) {
                Ok(()) => tracing::debug!(file = path, "removed cell store"),
                Err(e) if e.is_not_found() => {}
                Err(e) => tracing::warn!(file = path, error = %e, "could not remove cell store"),
            }
        }
        *pending = keep;
    });
    Ok(())
}
