//! Splits: choosing the split row, cutting a range in two that keep the parent's stores
//! holding their rows, and rewriting afterwards only the stores the halves share.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::key::KeyRef;
use parking_lot::Mutex;

use super::{Task, commit_merge, compact_locked, merged_stores, partial_stack, write_store};
use crate::cellcache::CellCache;
use crate::cellstore::CellStore;
use crate::engine::{CompactionKind, Inner, range_key};
use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::meta::MetaOp;
use crate::range::{AccessGroup, GroupState, Range, copy_cache_range};

/// True when `store` holds a key in `[lo, hi)` (`None`: unbounded). Reads at most the block
/// that holds the first key at or past `lo`.
fn store_has_keys_in(store: &Arc<CellStore>, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<bool> {
    let mut sc = store.scanner(false);
    sc.seek(lo.unwrap_or_default())?;
    Ok(sc.valid() && hi.is_none_or(|h| common::key::bytes_cmp(sc.key(), h).is_lt()))
}

/// True when `store` holds a key outside `bounds` (a range's [`Range::key_bounds`]).
fn store_reaches_outside(
    store: &Arc<CellStore>,
    bounds: &(Option<Vec<u8>>, Option<Vec<u8>>),
) -> Result<bool> {
    if let Some(lo) = bounds.0.as_deref()
        && store_has_keys_in(store, None, Some(lo))?
    {
        return Ok(true);
    }
    match bounds.1.as_deref() {
        Some(hi) => store_has_keys_in(store, Some(hi), None),
        None => Ok(false),
    }
}

/// Rewrites the stores of group `gi` that hold keys outside the range (shared with the other
/// half of a split) into one store of the range's rows, in the place of the oldest of them,
/// dropping nothing. A sequential load leaves one such store per split, where rewriting every
/// store of both halves would write the whole range again.
pub(super) fn rewrite_shared(inner: &Inner, range: &Range, gi: usize) -> Result<()> {
    let st = range.groups[gi].state();
    let bounds = range.key_bounds();
    let mut shared = Vec::new();
    for (i, s) in st.stores.iter().enumerate() {
        if store_reaches_outside(s, &bounds)? {
            shared.push(i);
        }
    }
    let Some(&first) = shared.first() else {
        return Ok(());
    };
    let old: Vec<Arc<CellStore>> = shared.iter().map(|&i| st.stores[i].clone()).collect();
    let raw = merged_stores(&old, bounds);
    let table = inner.table(range.table_id)?;
    let mut src = partial_stack(inner, &table, raw)?;
    let (new, next_store) = write_store(inner, range, gi, st.next_store, &mut *src)?;
    let mut stores = Vec::with_capacity(st.stores.len());
    for (i, s) in st.stores.iter().enumerate() {
        if i == first {
            stores.extend(new.iter().cloned());
        }
        if shared.binary_search(&i).is_err() {
            stores.push(s.clone());
        }
    }
    let group = GroupState {
        stores,
        next_store,
        ..(*st).clone()
    };
    commit_merge(inner, range, gi, group, &old, new)
}

/// A row near the middle of the range's data, from its biggest cell store.
pub(super) fn choose_split_row(range: &Range) -> Option<Vec<u8>> {
    median_row(range).or_else(|| largest_store_middle_row(range))
}

/// The row at which the range's stored bytes (every store's blocks inside the range, all
/// groups together) reach half, as Hypertable estimates its split row from all of a range's
/// stores; `None` when that row cannot begin a half.
fn median_row(range: &Range) -> Option<Vec<u8>> {
    let (lo, hi) = range.key_bounds();
    let mut blocks: Vec<(&[u8], u64)> = Vec::new();
    let states: Vec<_> = range.groups.iter().map(|g| g.state()).collect();
    for st in &states {
        for s in &st.stores {
            blocks.extend(s.blocks().filter(|(k, _)| {
                lo.as_deref().is_none_or(|l| *k >= l) && hi.as_deref().is_none_or(|h| *k < h)
            }));
        }
    }
    blocks.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let total: u64 = blocks.iter().map(|b| b.1).sum();
    let mut sum = 0;
    let (mid, _) = blocks.iter().find(|b| {
        sum += b.1;
        sum * 2 >= total
    })?;
    let row = KeyRef::new(mid).ok()?.row().into_owned();
    (range.contains(&row) && range.start_row.as_deref() != Some(row.as_slice())).then_some(row)
}

/// The row of the middle key of the largest store that can begin a half.
fn largest_store_middle_row(range: &Range) -> Option<Vec<u8>> {
    let mut stores: Vec<Arc<CellStore>> = range
        .groups
        .iter()
        .flat_map(|g| g.state().stores.clone())
        .collect();
    stores.sort_by_key(|s| std::cmp::Reverse(s.trailer().file_size));
    for s in stores {
        let Some(mid) = s.middle_key() else { continue };
        let Ok(k) = KeyRef::new(&mid) else { continue };
        let row = k.row().into_owned();
        if range.contains(&row) && range.start_row.as_deref() != Some(row.as_slice()) {
            return Some(row);
        }
    }
    None
}

/// Splits `range` so that `row` begins the upper half. Both halves read the parent's cell
/// stores within their bounds until a compaction rewrites them.
pub fn split_range(inner: &Inner, range: &Arc<Range>, row: &[u8]) -> Result<()> {
    let _m = range.maintenance.lock();
    if range.retired.load(Ordering::Acquire) {
        return Err(Error::InvalidInput(format!(
            "range {} was already split or dropped",
            range.id
        )));
    }
    if !range.contains(row) || range.start_row.as_deref() == Some(row) || row.is_empty() {
        return Err(Error::InvalidInput(format!(
            "split row {:?} is not strictly inside range {}",
            String::from_utf8_lossy(row),
            range.id
        )));
    }
    // Write the caches out first so that the copies made below are small.
    for gi in 0..range.groups.len() {
        compact_locked(inner, range, gi, CompactionKind::Minor)?;
    }
    // Each half keeps only the parent's stores that hold some of its rows (after a sequential
    // load most stores lie wholly in one half). Decided before the gate is taken, since it may
    // read a block per store; the stores cannot change meanwhile (maintenance lock held).
    let split_key = common::key::row_start(row);
    let parent_bounds = range.key_bounds();
    let mut half_stores: Vec<[Vec<Arc<CellStore>>; 2]> = Vec::new();
    for g in &range.groups {
        let mut kept = [Vec::new(), Vec::new()];
        for s in &g.state().stores {
            if store_has_keys_in(s, parent_bounds.0.as_deref(), Some(&split_key))? {
                kept[0].push(s.clone());
            }
            if store_has_keys_in(s, Some(&split_key), parent_bounds.1.as_deref())? {
                kept[1].push(s.clone());
            }
        }
        half_stores.push(kept);
    }
    let gate = inner.catalog().exclusive();
    let lo_id = inner.catalog().take_range_ids(2);
    let hi_id = lo_id + 1;
    let mut halves = Vec::new();
    let mut added_bytes = 0;
    let mut removed_bytes = 0;
    for (id, start, end) in [
        (lo_id, range.start_row.clone(), Some(row.to_vec())),
        (hi_id, Some(row.to_vec()), range.end_row.clone()),
    ] {
        let mut groups = Vec::new();
        for (gi, g) in range.groups.iter().enumerate() {
            let st = g.state();
            let (lo, hi) = if id == lo_id {
                (None, Some(split_key.as_slice()))
            } else {
                (Some(split_key.as_slice()), None)
            };
            let caches: Vec<&Arc<CellCache>> = std::iter::once(&st.active)
                .chain(st.frozen.iter())
                .collect();
            let copy = copy_cache_range(&caches, lo, hi)?;
            added_bytes += copy.memory_bytes();
            let stores = half_stores[gi][usize::from(id != lo_id)].clone();
            groups.push(AccessGroup::new(
                g.name.clone(),
                g.index,
                GroupState {
                    active: Arc::new(copy),
                    frozen: None,
                    frozen_revision: i64::MIN,
                    stores,
                    flushed_revision: st.flushed_revision.max(st.frozen_revision),
                    next_store: 0,
                },
            ));
        }
        halves.push(Range {
            id,
            table_id: range.table_id,
            start_row: start,
            end_row: end,
            groups,
            maintenance: Mutex::new(()),
            retired: std::sync::atomic::AtomicBool::new(false),
            cells_written: std::sync::atomic::AtomicU64::new(0),
            cells_read: std::sync::atomic::AtomicU64::new(0),
            seeks: std::sync::atomic::AtomicU64::new(0),
            engine_seeks: range.engine_seeks.clone(),
        });
    }
    for g in &range.groups {
        removed_bytes += g.state().cache_bytes();
    }
    inner.files().write_meta(vec![
        MetaOp::PutRange(halves[0].record()),
        MetaOp::PutRange(halves[1].record()),
        MetaOp::RemoveRange(range.id),
        MetaOp::NextRangeId(hi_id + 1),
    ])?;
    let hi = Arc::new(halves.pop().expect("two halves"));
    let lo = Arc::new(halves.pop().expect("two halves"));
    let old_key = range_key(range.table_id, range.end_row.as_deref());
    gate.replace_ranges(
        std::slice::from_ref(&old_key),
        vec![
            (range_key(range.table_id, Some(row)), lo.clone()),
            (old_key.clone(), hi.clone()),
        ],
    );
    range.retired.store(true, Ordering::Release);
    inner.add_cache_bytes(added_bytes);
    inner.sub_cache_bytes(removed_bytes);
    drop(gate);
    inner.counters().count_split();
    tracing::info!(
        table = range.table_id,
        range = range.id,
        lo = lo.id,
        hi = hi.id,
        "range split"
    );
    // Rewrite both halves so they stop sharing the parent's files (dropping nothing: a split
    // changes nothing visible).
    inner.maint().push(Task::Rewrite { range: lo });
    inner.maint().push(Task::Rewrite { range: hi });
    Ok(())
}
