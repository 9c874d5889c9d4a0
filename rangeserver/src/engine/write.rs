//! The write path: validate a batch, take the apply gate, assign revisions, encode and log it
//! (group commit), insert it into the cell caches, account its memory; backpressure on writers.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::Durability;
use common::key::{self, CellFlag};

use super::{Engine, Inner, RangeMap, TableInfo};
use crate::commitlog::entry::{CellSpan, EncodedEntry, EntryEncoder};
use crate::error::{Error, Result};
use crate::maintenance;
use crate::range::Range;
use common::{AsMutationRef, Mutation, MutationRef};

impl Engine {
    /// Applies a batch of mutations to one table and returns once it is durable at the table's
    /// durability. Either the whole batch is applied or (on error) none of it is acknowledged.
    pub fn apply<M: AsMutationRef>(&self, table_id: u32, mutations: &[M]) -> Result<()> {
        self.check_open()?;
        if mutations.is_empty() {
            return Ok(());
        }
        let mut mutations: Vec<MutationRef<'_>> = mutations
            .iter()
            .map(AsMutationRef::as_mutation_ref)
            .collect();
        let inner = &self.inner;
        let stored = validate_batch(
            &*inner.table(table_id)?,
            &mutations,
            inner.opts().commit_log.max_block_bytes,
        )?;
        // Combiner inputs in their stored form, logged and cached as such.
        for (i, v) in &stored {
            mutations[*i].value = v;
        }
        self.wait_for_memory();
        let _gate = inner.catalog().shared();
        // The table may have been dropped or altered while we waited.
        let table = inner.table(table_id)?;
        // Held until the batch is in the caches: scans starting meanwhile do not see it.
        let applying = inner.alloc_revisions(mutations.len());
        let base = applying.base;
        let max_rev = base + mutations.len() as i64 - 1;
        let (entry, spans) = encode_entry(table_id, &mutations, base);
        // Route before logging, so nothing is logged that cannot be applied.
        let ranges = inner.catalog().ranges();
        let routed = route(inner, &ranges, table_id, &mutations)?;
        if table.schema.durability != Durability::None {
            inner
                .files()
                .log()
                .append(&entry.entry, max_rev, table.schema.durability)?;
        }
        let flush = insert_into_caches(inner, &table, &mutations, &routed, &entry, &spans);
        drop(applying);
        drop(ranges);
        drop(_gate);
        self.account_memory(flush);
        Ok(())
    }

    /// Async form of [`Engine::apply`].
    pub async fn apply_async(&self, table_id: u32, mutations: Vec<Mutation>) -> Result<()> {
        let e = self.clone();
        tokio::task::spawn_blocking(move || e.apply(table_id, &mutations))
            .await
            .map_err(|e| Error::Internal(format!("apply task failed: {e}")))?
    }

    /// After a batch: queues the flushes of the caches it filled, and more while all caches
    /// together use over half their limit.
    fn account_memory(&self, flush: Vec<(Arc<Range>, usize)>) {
        let inner = &self.inner;
        for (r, gi) in flush {
            maintenance::queue_flush(inner, &r, gi);
        }
        if inner.memory().bytes() > inner.opts().cell_cache_limit_bytes / 2 {
            self.schedule_flushes_if_needed();
        }
    }

    /// Blocks while all cell caches together exceed their limit (backpressure on writers).
    pub(super) fn wait_for_memory(&self) {
        let inner = &self.inner;
        let limit = inner.opts().cell_cache_limit_bytes;
        if inner.memory().bytes() <= limit {
            return;
        }
        let started = std::time::Instant::now();
        while inner.memory().bytes() > limit && !inner.is_closed() {
            self.schedule_flushes_if_needed();
            inner.memory().wait_for_release(Duration::from_millis(50));
        }
        inner.counters().count_memory_wait(started.elapsed());
    }

    /// Queues minor compactions of the biggest caches while caches use more than half the limit
    /// (see [`caches_to_flush`]).
    pub(super) fn schedule_flushes_if_needed(&self) {
        let inner = &self.inner;
        let limit = inner.opts().cell_cache_limit_bytes;
        let used = inner.memory().bytes();
        if used <= limit / 2 {
            return;
        }
        let ranges: Vec<Arc<Range>> = inner.catalog().ranges().values().cloned().collect();
        let mut caches = Vec::new();
        let mut at = Vec::new();
        for r in &ranges {
            for (gi, g) in r.groups.iter().enumerate() {
                let st = g.state();
                caches.push(CacheUse {
                    active: st.active.memory_bytes(),
                    frozen: st.frozen.as_ref().map_or(0, |f| f.memory_bytes()),
                    queued: g.flush_queued.load(Ordering::Acquire),
                });
                at.push((r, gi));
            }
        }
        for i in caches_to_flush(used, limit, &caches) {
            let (r, gi) = at[i];
            maintenance::queue_flush(inner, r, gi);
        }
    }
}

/// One access group's cell caches, as [`caches_to_flush`] sees them.
#[derive(Clone, Copy, Debug)]
struct CacheUse {
    /// Bytes of the active cache.
    active: u64,
    /// Bytes of the frozen cache being written (0: none).
    frozen: u64,
    /// A flush of the group is queued or running.
    queued: bool,
}

/// Which caches to flush (indexes into `caches`, biggest first) when all of them use `used`
/// bytes of `limit`: none at or below half the limit; above it, the biggest active caches
/// until what stays in memory once every flush under way is done falls to a quarter of it.
/// Bytes already on their way out (frozen caches being written, active caches whose flush is
/// queued and has not frozen them yet) count as freed: counted as still to free, every small
/// cache of every range was queued while one big one was written, and a slow file system got
/// many small, overlapping stores.
fn caches_to_flush(used: u64, limit: u64, caches: &[CacheUse]) -> Vec<usize> {
    if used <= limit / 2 {
        return Vec::new();
    }
    let mut leaving = 0u64;
    let mut candidates: Vec<(u64, usize)> = Vec::new();
    for (i, c) in caches.iter().enumerate() {
        if c.queued {
            // Running: its frozen cache is being written; the active one waits for the next
            // flush, which cannot be queued before this one ends. Queued and not started: the
            // flush takes the active cache.
            leaving += if c.frozen > 0 { c.frozen } else { c.active };
        } else if c.frozen > 0 {
            // Left by a failed flush: nothing is writing it; a flush writes it (alone) again.
            candidates.push((c.frozen, i));
        } else if c.active > 0 {
            candidates.push((c.active, i));
        }
    }
    candidates.sort_by_key(|&(b, i)| (std::cmp::Reverse(b), i));
    let need = used.saturating_sub(limit / 4).saturating_sub(leaving);
    let mut freed = 0;
    let mut out = Vec::new();
    for (b, i) in candidates {
        if freed >= need {
            break;
        }
        out.push(i);
        freed += b;
    }
    out
}

pub use common::mutation::{MAX_ROW_OR_QUALIFIER_BYTES, MAX_VALUE_BYTES};

/// Checks one mutation; for a combiner family that stores inputs in another form (a set
/// member as a one-member set), gives the value to store instead.
fn validate_mutation(table: &TableInfo, m: &MutationRef<'_>) -> Result<Option<Vec<u8>>> {
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
        CellFlag::DeleteRow if table.append_only => {
            return Err(Error::InvalidInput(format!(
                "table {} has APPEND_ONLY column families: row deletes are refused",
                table.schema.name
            )));
        }
        CellFlag::DeleteRow => return Ok(None),
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
    if f.append_only && m.flag.is_delete() {
        return Err(Error::InvalidInput(format!(
            "column family '{}' is APPEND_ONLY: {} is refused",
            f.name,
            m.flag.name()
        )));
    }
    if m.flag == CellFlag::Insert && f.effective_combiner().is_some() {
        let Some(c) = &table.combiners[m.family as usize] else {
            return Err(Error::InvalidInput(format!(
                "column family '{}': this server cannot run its combiner ({})",
                f.name,
                table.missing_kinds.join("; ")
            )));
        };
        let stored = c
            .prepare_input(m.value)
            .map_err(|e| Error::InvalidInput(format!("bad value for column '{}': {e}", f.name)))?;
        return Ok(stored);
    }
    Ok(None)
}

/// Checks every mutation of a batch and the batch's size against the commit log's block limit;
/// gives the values that combiners store in another form, by position.
fn validate_batch(
    table: &TableInfo,
    mutations: &[MutationRef<'_>],
    limit: usize,
) -> Result<Vec<(usize, Vec<u8>)>> {
    let mut entry_bytes = 16usize;
    let mut stored = Vec::new();
    for (i, m) in mutations.iter().enumerate() {
        let len = match validate_mutation(table, m)? {
            Some(v) => {
                let n = v.len();
                stored.push((i, v));
                n
            }
            None => m.value.len(),
        };
        entry_bytes += m.row.len() + m.qualifier.len() + len + 40;
    }
    if entry_bytes > limit {
        return Err(Error::InvalidInput(format!(
            "a batch of {} cells and about {entry_bytes} bytes exceeds the limit of {limit} bytes per batch; send it in smaller batches",
            mutations.len()
        )));
    }
    Ok(stored)
}

/// The batch's commit-log entry, its cells' keys made with revisions from `base` on, and where
/// each cell lies in it with its revision.
fn encode_entry(
    table_id: u32,
    mutations: &[MutationRef<'_>],
    base: i64,
) -> (EncodedEntry, Vec<(CellSpan, i64)>) {
    let mut enc = EntryEncoder::new(
        table_id,
        mutations.len(),
        16 + mutations
            .iter()
            .map(|m| m.row.len() + m.qualifier.len() + m.value.len() + 24)
            .sum::<usize>(),
    );
    let mut spans = Vec::with_capacity(mutations.len());
    let mut kbuf = Vec::with_capacity(64);
    for (i, m) in mutations.iter().enumerate() {
        let rev = base + i as i64;
        let ts = m.timestamp.unwrap_or(rev);
        kbuf.clear();
        key::encode_parts(m.row, m.family, m.qualifier, m.flag, ts, rev, &mut kbuf);
        spans.push((enc.push(&kbuf, m.value), rev));
    }
    (enc.finish(), spans)
}

/// The range of `ranges` each mutation goes to; fails with the damage or [`Error::NotHere`]
/// for the first row no range here serves.
fn route(
    inner: &Inner,
    ranges: &RangeMap,
    table_id: u32,
    mutations: &[MutationRef<'_>],
) -> Result<Vec<Arc<Range>>> {
    let mut last: Option<Arc<Range>> = None;
    let mut routed: Vec<Arc<Range>> = Vec::with_capacity(mutations.len());
    for m in mutations {
        let r = match &last {
            Some(r) if r.contains(m.row) => r.clone(),
            _ => {
                let r = Inner::find_range(ranges, table_id, m.row).ok_or_else(|| {
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
    Ok(routed)
}

/// Inserts the logged cells into their groups' active caches, grouped by (range, group), and
/// counts the memory they take; returns the groups whose cache grew past the flush size.
fn insert_into_caches(
    inner: &Inner,
    table: &TableInfo,
    mutations: &[MutationRef<'_>],
    routed: &[Arc<Range>],
    entry: &EncodedEntry,
    spans: &[(CellSpan, i64)],
) -> Vec<(Arc<Range>, usize)> {
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
            let (span, rev) = spans[i];
            let (k, v) = span.cell(entry);
            (k, v, rev)
        }));
        r.cells_written
            .fetch_add(idx.len() as u64, Ordering::Relaxed);
        inner.add_cache_bytes(grew);
        if st.active.memory_bytes() > table.flush_bytes(inner.opts(), gi, &st) {
            flush.push((r.clone(), gi));
        }
    }
    flush
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(active: u64, frozen: u64, queued: bool) -> CacheUse {
        CacheUse {
            active,
            frozen,
            queued,
        }
    }

    #[test]
    fn flushes_under_way_count_as_freed() {
        const MIB: u64 = 1 << 20;
        let limit = 256 * MIB;
        // Below half the limit: nothing.
        let small = vec![cache(20 * MIB, 0, false); 6];
        assert!(caches_to_flush(120 * MIB, limit, &small).is_empty());
        // Above it with nothing under way: the biggest until a quarter of the limit stays.
        let mut caches = vec![cache(4 * MIB, 0, false); 10];
        caches.push(cache(60 * MIB, 0, false));
        caches.push(cache(70 * MIB, 0, false));
        let used = caches.iter().map(|c| c.active).sum::<u64>();
        assert_eq!(used, 170 * MIB);
        // 170 - 64 = 106 MiB to free: the 70 and the 60.
        assert_eq!(caches_to_flush(used, limit, &caches), [11, 10]);
        // The same while a 64 MiB cache is being written (3 MiB came in since) and a 40 MiB
        // one is queued: of 277 MiB, 104 are leaving and 109 more must go. The 70 and the
        // 60 MiB caches, not every small one besides (as when the leaving bytes counted as
        // still to free: 213 MiB).
        caches.push(cache(3 * MIB, 64 * MIB, true));
        caches.push(cache(40 * MIB, 0, true));
        let used = 170 * MIB + 67 * MIB + 40 * MIB;
        assert_eq!(caches_to_flush(used, limit, &caches), [11, 10]);
        // Everything over a quarter is on its way: nothing more.
        let leaving = vec![cache(0, 100 * MIB, true), cache(50 * MIB, 0, true)];
        assert!(caches_to_flush(150 * MIB, limit, &leaving).is_empty());
        // A frozen cache a failed flush left behind is not leaving: it is flushed again (86 MiB
        // must go; it holds 100), not the active cache beside it.
        let failed = vec![cache(30 * MIB, 0, false), cache(0, 100 * MIB, false)];
        assert_eq!(caches_to_flush(150 * MIB, limit, &failed), [1]);
    }
}
