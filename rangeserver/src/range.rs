//! Ranges and their access groups: the in-memory state behind each persisted [`RangeRecord`].
//!
//! An access group's state ([`GroupState`]: active cell cache, frozen cache being written,
//! cell stores, flushed revision) is an immutable snapshot swapped under a lock; readers take an
//! `Arc` of it and never block writers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::key;
use parking_lot::{Mutex, RwLock};

use crate::cellcache::CellCache;
use crate::cellstore::CellStore;
use crate::error::Result;
use crate::iter::CellIter;
use crate::merge::{BoundedIter, MergeIter};
use crate::meta::{GroupRecord, RangeRecord};

/// One consistent view of an access group.
#[derive(Clone)]
pub struct GroupState {
    pub active: Arc<CellCache>,
    /// A cache being written as a cell store by a minor compaction.
    pub frozen: Option<Arc<CellCache>>,
    /// Every cell of this group with revision <= this is in `frozen` or `stores`.
    pub frozen_revision: i64,
    pub stores: Vec<Arc<CellStore>>,
    /// Cells with revision <= this are in `stores` (replay skips them).
    pub flushed_revision: i64,
    pub next_store: u64,
}

impl GroupState {
    /// Bytes of cell cache held (active and frozen).
    pub fn cache_bytes(&self) -> u64 {
        self.active.memory_bytes() + self.frozen.as_ref().map_or(0, |f| f.memory_bytes())
    }

    /// Key and value bytes in the caches (active and frozen), without the arenas' free room.
    pub fn cache_data_bytes(&self) -> u64 {
        self.active.data_bytes() + self.frozen.as_ref().map_or(0, |f| f.data_bytes())
    }

    /// Bytes of cell-store files referenced.
    pub fn store_bytes(&self) -> u64 {
        self.stores.iter().map(|s| s.trailer().file_size).sum()
    }
}

/// An access group of a range.
pub struct AccessGroup {
    pub name: String,
    /// Position in the table schema's `access_groups`.
    pub index: usize,
    state: RwLock<Arc<GroupState>>,
    /// A minor compaction of this group is queued or running.
    pub flush_queued: AtomicBool,
}

impl AccessGroup {
    pub fn new(name: String, index: usize, state: GroupState) -> Self {
        Self {
            name,
            index,
            state: RwLock::new(Arc::new(state)),
            flush_queued: AtomicBool::new(false),
        }
    }

    /// The current state.
    pub fn state(&self) -> Arc<GroupState> {
        self.state.read().clone()
    }

    /// Replaces the state with `f(current)`.
    pub fn update(&self, f: impl FnOnce(&GroupState) -> GroupState) -> Arc<GroupState> {
        let mut st = self.state.write();
        let new = Arc::new(f(&st));
        *st = new.clone();
        new
    }

    /// The persisted form of the current state.
    pub fn record(&self) -> GroupRecord {
        let st = self.state();
        GroupRecord {
            name: self.name.clone(),
            stores: st.stores.iter().map(|s| s.path().to_string()).collect(),
            flushed_revision: st.flushed_revision,
            next_store: st.next_store,
        }
    }
}

/// A range of rows `[start_row, end_row)` of one table.
pub struct Range {
    pub id: u64,
    pub table_id: u32,
    pub start_row: Option<Vec<u8>>,
    pub end_row: Option<Vec<u8>>,
    pub groups: Vec<AccessGroup>,
    /// Serialises compactions and splits of this range.
    pub maintenance: Mutex<()>,
    /// Set once the range was split or dropped: its state is frozen and it takes no writes.
    pub retired: AtomicBool,
    /// Cells applied since open, for load reports.
    pub cells_written: AtomicU64,
    /// Cells scans stepped over since open (before filtering), for load reports.
    pub cells_read: AtomicU64,
    /// Seeks scans made into this range since open: every positioning of one of its cursors
    /// (a scan's start, each interval of a key set, each seek of an iterator or of its deep
    /// copies), for reports and benchmarks.
    pub seeks: AtomicU64,
    /// The engine's seek count (every range's, shared): unlike the sum of `seeks`, it keeps
    /// what ranges counted before they were moved away, split or dropped.
    pub engine_seeks: Arc<AtomicU64>,
}

impl Range {
    /// Counts `n` seeks into the range (and the engine's total). Sources count their seeks
    /// themselves and add them here in batches and when dropped, so a live scan's last seeks
    /// may not show yet.
    #[inline]
    pub fn count_seeks(&self, n: u64) {
        if n > 0 {
            self.seeks.fetch_add(n, Ordering::Relaxed);
            self.engine_seeks.fetch_add(n, Ordering::Relaxed);
        }
    }
    /// True if `row` lies in this range.
    pub fn contains(&self, row: &[u8]) -> bool {
        common::row_range::contains(&self.start_row, &self.end_row, row)
    }

    /// The encoded-key bounds of this range: `[row_start(start), row_start(end))`.
    pub fn key_bounds(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        (
            self.start_row.as_deref().map(key::row_start),
            self.end_row.as_deref().map(key::row_start),
        )
    }

    /// The persisted form.
    pub fn record(&self) -> RangeRecord {
        RangeRecord {
            id: self.id,
            table_id: self.table_id,
            start_row: self.start_row.clone(),
            end_row: self.end_row.clone(),
            groups: self.groups.iter().map(|g| g.record()).collect(),
        }
    }

    /// Bytes held by the range: its caches' key and value bytes plus its share of store files
    /// (whole files, an over-estimate for stores still shared with a sibling after a split).
    /// The caches' memory is not counted: their arena chunks (1 MiB) would make every range
    /// with a cell in its cache look bigger than a small split size.
    pub fn size_bytes(&self) -> u64 {
        self.groups
            .iter()
            .map(|g| {
                let st = g.state();
                st.cache_data_bytes() + st.store_bytes()
            })
            .sum()
    }

    /// A raw cursor over every cell of group `gi` (caches and stores), clamped to the range.
    /// With `only_row`, cell stores whose bloom filter rules the row out are left out.
    pub fn group_source(
        &self,
        gi: usize,
        fill_cache: bool,
        only_row: Option<&[u8]>,
    ) -> Box<dyn CellIter> {
        let mut st = (*self.groups[gi].state()).clone();
        if let Some(row) = only_row {
            st.stores.retain(|s| s.may_contain_row(row));
        }
        source_of(&st, self.key_bounds(), fill_cache)
    }
}

/// A raw merged cursor over a group state, clamped to `bounds`.
pub fn source_of(
    st: &GroupState,
    bounds: (Option<Vec<u8>>, Option<Vec<u8>>),
    fill_cache: bool,
) -> Box<dyn CellIter> {
    source_filtered(st, bounds, fill_cache, |_| true)
}

/// Like [`source_of`], reading only the cell stores `keep` accepts.
fn source_filtered(
    st: &GroupState,
    bounds: (Option<Vec<u8>>, Option<Vec<u8>>),
    fill_cache: bool,
    keep: impl Fn(&CellStore) -> bool,
) -> Box<dyn CellIter> {
    let mut children: Vec<Box<dyn CellIter>> = Vec::with_capacity(st.stores.len() + 2);
    children.push(Box::new(st.active.iter()));
    if let Some(f) = &st.frozen {
        children.push(Box::new(f.iter()));
    }
    for s in st.stores.iter().rev().filter(|s| keep(s)) {
        children.push(Box::new(s.scanner(fill_cache)));
    }
    let merged: Box<dyn CellIter> = if children.len() == 1 {
        children.pop().expect("one child")
    } else {
        Box::new(MergeIter::new(children))
    };
    if bounds.0.is_none() && bounds.1.is_none() {
        return merged;
    }
    Box::new(BoundedIter::new(merged, bounds.0, bounds.1))
}

/// Copies the cells of `src` within `[lo, hi)` into a new cell cache.
pub fn copy_cache_range(
    caches: &[&Arc<CellCache>],
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Result<CellCache> {
    let out = CellCache::new();
    for c in caches {
        let mut batch: Vec<(Vec<u8>, Vec<u8>, i64)> = Vec::new();
        c.for_each_in(lo.unwrap_or(b""), hi, |k, v| {
            let rev = key::KeyRef::new(k).map(|r| r.revision()).unwrap_or(0);
            batch.push((k.to_vec(), v.to_vec(), rev));
        });
        out.insert_batch(
            batch
                .iter()
                .map(|(k, v, r)| (k.as_slice(), v.as_slice(), *r)),
        );
    }
    Ok(out)
}
