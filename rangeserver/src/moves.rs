//! Ranges that change servers: [`Engine::unload_range`] hands a range (as a [`RangeRecord`]) to
//! another engine on the same shared file system, [`Engine::load_range_record`] takes one in,
//! and [`Engine::recover_ranges`] rebuilds a dead engine's ranges from its records and its
//! commit log.
//!
//! Files stay where they are: a record names its cell stores by full path, possibly under
//! another server's root. Two rules keep that safe (ARCHITECTURE.md, Invariants): an engine
//! deletes no file outside its own root, and never a store it exported with an unloaded range
//! (the meta log's `ExportStores`), until the table is dropped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use common::TableSchema;
use dfs_broker::join;

use crate::cellcache::CellCache;
use crate::cellstore::{CellStore, CellStoreOptions};
use crate::commitlog::CommitLog;
use common::row_range;

use crate::engine::{CompactionKind, Engine, Inner, RangeMap, TableInfo, range_key, replay_entry};
use crate::error::{Error, Result};
use crate::maintenance;
use crate::meta::{MetaOp, RangeRecord};
use crate::range::{GroupState, Range};

/// Passes of "write the caches out" an unload makes before giving up; after the range left the
/// range map nothing new arrives, so a second pass only meets what a failed first one left.
const UNLOAD_FLUSH_PASSES: usize = 4;

fn show_row(row: Option<&[u8]>) -> String {
    row.map_or("unbounded".into(), |r| {
        format!("{:?}", String::from_utf8_lossy(r))
    })
}

/// Checks that a record and its schema belong together and its bounds make a range.
fn check_record(schema: &TableSchema, rec: &RangeRecord) -> Result<()> {
    if schema.id != rec.table_id {
        return Err(Error::InvalidInput(format!(
            "range record {} is of table {}, the schema is of table {}",
            rec.id, rec.table_id, schema.id
        )));
    }
    if rec.end_row.as_deref().is_some_and(<[u8]>::is_empty) {
        return Err(Error::InvalidInput(format!(
            "range record {} of table {} ends at the empty row (use null for unbounded)",
            rec.id, rec.table_id
        )));
    }
    if let (Some(s), Some(e)) = (&rec.start_row, &rec.end_row)
        && s >= e
    {
        return Err(Error::InvalidInput(format!(
            "range record {} of table {}: start row {} is not below end row {}",
            rec.id,
            rec.table_id,
            show_row(Some(s)),
            show_row(Some(e))
        )));
    }
    Ok(())
}

/// A table this engine will hold a range of: the one it knows (altered first if `schema` is a
/// newer generation), or a new one to register with the range (`true`).
fn table_for(engine: &Engine, schema: &TableSchema) -> Result<(Arc<TableInfo>, bool)> {
    schema.validate()?;
    let inner = &engine.inner;
    if let Ok(t) = inner.table(schema.id) {
        if schema.generation > t.schema.generation {
            engine.alter_table(schema.clone())?;
            return Ok((inner.table(schema.id)?, false));
        }
        return Ok((t, false));
    }
    if inner
        .files()
        .meta_state(|s| s.dropped_tables.contains(&schema.id))
    {
        return Err(Error::InvalidInput(format!(
            "table id {} was dropped here; table ids are never reused",
            schema.id
        )));
    }
    Ok((
        Arc::new(TableInfo::new(
            schema.clone(),
            &engine.inner.opts().registry,
        )),
        true,
    ))
}

/// Builds a range of this engine from a foreign record: a new local id, the record's stores
/// (opened, so a missing file fails here), its flushed revisions, new stores numbered from 0
/// under this engine's root. Revisions here move above everything the record holds.
fn adopt_record(inner: &Inner, table: &TableInfo, rec: &RangeRecord) -> Result<Range> {
    for g in &rec.groups {
        if !g.stores.is_empty() && !table.schema.access_groups.iter().any(|a| a.name == g.name) {
            return Err(Error::InvalidInput(format!(
                "range record {} of table {} has cell stores in access group '{}', which the table's schema here lacks",
                rec.id, rec.table_id, g.name
            )));
        }
    }
    let mut local = rec.clone();
    local.id = inner.catalog().take_range_ids(1);
    for g in &mut local.groups {
        g.next_store = 0;
    }
    let range = inner.build_range(&local, table, &mut HashMap::new())?;
    for g in &range.groups {
        let st = g.state();
        inner.observe_revision(st.flushed_revision);
        for s in &st.stores {
            inner.observe_revision(s.trailer().max_revision);
        }
    }
    Ok(range)
}

impl Engine {
    /// Stops holding the range of `table_id` whose end row is `end_row` (`None`: unbounded) and
    /// returns its record for another engine to load ([`Engine::load_range_record`]).
    ///
    /// Nothing written before the call is lost: the caches are written out while writes go on,
    /// the range leaves the range map under the apply gate (later writes and scans of its rows
    /// get [`Error::NotHere`]), what arrived meanwhile is written out, and one meta-log record
    /// removes the range and marks its stores exported, so this engine never deletes them. The
    /// record's `flushed_revision`s cover every cell the range took here.
    pub fn unload_range(&self, table_id: u32, end_row: Option<&[u8]>) -> Result<RangeRecord> {
        self.check_open()?;
        let inner = &self.inner;
        inner.table(table_id)?;
        let key = range_key(table_id, end_row);
        loop {
            let found = inner.catalog().range_at(&key);
            let Some(range) = found else {
                // A repeated unload (its first answer lost) gets the same record again.
                let done = inner.files().meta_state(|s| {
                    s.unloaded
                        .get(&(table_id, end_row.map(<[u8]>::to_vec)))
                        .cloned()
                });
                return match done {
                    Some(rec) => {
                        tracing::info!(table = table_id, end = %show_row(end_row), "unload repeated: the range's record again");
                        Ok(rec)
                    }
                    None => Err(Error::NoSuchRange {
                        table_id,
                        end_row: end_row.map(<[u8]>::to_vec),
                    }),
                };
            };
            let _m = range.maintenance.lock();
            if range.retired.load(Ordering::Acquire) {
                // Split (the key now names the upper half) or dropped meanwhile: look again.
                drop(_m);
                std::thread::yield_now();
                continue;
            }
            // Most of the cache goes out while writes continue.
            for gi in 0..range.groups.len() {
                maintenance::compact_locked(inner, &range, gi, CompactionKind::Minor)?;
            }
            inner.catalog().exclusive().start_unload(&key, &range);
            return match finish_unload(inner, &range) {
                Ok(rec) => {
                    range.retired.store(true, Ordering::Release);
                    inner.catalog().end_unload(&range);
                    tracing::info!(
                        table = table_id,
                        range = range.id,
                        end = %show_row(end_row),
                        "range unloaded"
                    );
                    Ok(rec)
                }
                Err(e) => {
                    // Hold it again: its data is in its caches and stores as before. Unless its
                    // table was dropped meanwhile: then it goes with the table.
                    let gate = inner.catalog().exclusive();
                    if inner.catalog().has_table(table_id) {
                        gate.insert_range(key, range.clone());
                    } else {
                        range.retired.store(true, Ordering::Release);
                        for g in &range.groups {
                            inner.sub_cache_bytes(g.state().cache_bytes());
                        }
                    }
                    inner.catalog().end_unload(&range);
                    drop(gate);
                    Err(e)
                }
            };
        }
    }

    /// Holds the range `[rec.start_row, rec.end_row)` with the record's cell stores (which may
    /// live under another server's root) and flushed revisions; returns its new local id.
    /// Registers the table from `schema` if this engine does not know it (a known table keeps
    /// its schema unless `schema` is a newer generation). A range overlapping one held here is
    /// [`Error::InvalidInput`].
    pub fn load_range_record(&self, schema: &TableSchema, rec: &RangeRecord) -> Result<u64> {
        self.check_open()?;
        check_record(schema, rec)?;
        let (table, new) = table_for(self, schema)?;
        let range = Arc::new(adopt_record(&self.inner, &table, rec)?);
        let new_tables = if new { vec![table] } else { Vec::new() };
        let ids = install(&self.inner, &new_tables, &[range], false)?;
        tracing::info!(
            table = rec.table_id,
            from = rec.id,
            range = ids[0],
            "range loaded from a record"
        );
        Ok(ids[0])
    }

    /// Recovers a dead engine's ranges: `items` are its range records (from
    /// [`crate::meta::read_state`] on `<dead_root>/meta`) with their tables' schemas. Replays
    /// `<dead_root>/log` once for all of them into not yet visible ranges (a cell goes to the
    /// range holding its row if its revision is above its group's flushed revision; a row
    /// delete to every group; the torn-tail rule of replay at open), writes their caches out as
    /// cell stores under this engine's root, records the ranges in the meta log, and only then
    /// serves them. Returns the local range ids, in the order of `items`.
    ///
    /// Nothing under `dead_root` is written or deleted. A range already held with the same table
    /// and bounds (an earlier, possibly interrupted call) keeps its id, so a retry is harmless.
    pub fn recover_ranges(
        &self,
        dead_root: &str,
        items: &[(TableSchema, RangeRecord)],
    ) -> Result<Vec<u64>> {
        self.check_open()?;
        let inner = &self.inner;
        if inner.is_own(&join(dead_root, "x")) || dead_root.trim_end_matches('/').is_empty() {
            return Err(Error::InvalidInput(format!(
                "cannot recover ranges from {dead_root:?}: that is this engine's own root or the file system root"
            )));
        }
        let started = Instant::now();
        let mut tables: HashMap<u32, (Arc<TableInfo>, bool)> = HashMap::new();
        let mut phantoms: RangeMap = BTreeMap::new();
        // Per item: the range that will answer it.
        let mut answers: Vec<Arc<Range>> = Vec::with_capacity(items.len());
        for (schema, rec) in items {
            check_record(schema, rec)?;
            let key = range_key(rec.table_id, rec.end_row.as_deref());
            if let Some(held) = inner.catalog().ranges().get(&key).cloned()
                && held.start_row == rec.start_row
            {
                answers.push(held);
                continue;
            }
            if let Some(p) = phantoms.get(&key) {
                if p.start_row != rec.start_row {
                    return Err(Error::InvalidInput(format!(
                        "two recovery items of table {} end at row {} with different starts",
                        rec.table_id,
                        show_row(rec.end_row.as_deref())
                    )));
                }
                answers.push(p.clone());
                continue;
            }
            let table = match tables.get(&schema.id) {
                Some((t, _)) => t.clone(),
                None => {
                    let (t, new) = table_for(self, schema)?;
                    tables.insert(schema.id, (t.clone(), new));
                    t
                }
            };
            let range = Arc::new(adopt_record(inner, &table, rec)?);
            if phantoms.values().any(|p| {
                p.table_id == range.table_id
                    && row_range::overlaps(
                        &p.start_row,
                        &p.end_row,
                        &range.start_row,
                        &range.end_row,
                    )
            }) {
                return Err(Error::InvalidInput(format!(
                    "recovery items of table {} overlap (one ends at {})",
                    rec.table_id,
                    show_row(rec.end_row.as_deref())
                )));
            }
            phantoms.insert(key, range.clone());
            answers.push(range);
        }
        if phantoms.is_empty() {
            return Ok(answers.iter().map(|r| r.id).collect());
        }
        let cells = match replay_into(inner, dead_root, &tables, &phantoms) {
            Ok(n) => n,
            Err(e) => {
                remove_own_stores(inner, phantoms.values());
                return Err(e);
            }
        };
        let new_tables: Vec<Arc<TableInfo>> = tables
            .values()
            .filter(|(_, new)| *new)
            .map(|(t, _)| t.clone())
            .collect();
        let fresh: Vec<Arc<Range>> = phantoms.values().cloned().collect();
        // If this fails, the meta-log record may still have reached the disk: the new stores
        // stay (orphans, removed at the next open, unless that record names them).
        let ids = install(inner, &new_tables, &fresh, true)?;
        // A phantom whose place a concurrent call took is not used: its files go.
        let unused: Vec<Arc<Range>> = phantoms
            .values()
            .zip(&ids)
            .filter(|(p, id)| p.id != **id)
            .map(|(p, _)| p.clone())
            .collect();
        remove_own_stores(inner, unused.iter());
        let installed: HashMap<u64, u64> = phantoms
            .values()
            .zip(&ids)
            .map(|(p, id)| (p.id, *id))
            .collect();
        let secs = started.elapsed().as_secs_f64();
        tracing::info!(
            dead_root,
            ranges = phantoms.len(),
            cells,
            seconds = secs,
            "ranges recovered"
        );
        Ok(answers
            .iter()
            .map(|r| installed.get(&r.id).copied().unwrap_or(r.id))
            .collect())
    }
}

/// Writes out what reached the range's caches and removes it from the meta log, exporting its
/// own stores. The range is out of the range map, so no write arrives meanwhile.
fn finish_unload(inner: &Inner, range: &Arc<Range>) -> Result<RangeRecord> {
    for pass in 0.. {
        let left = range.groups.iter().any(|g| {
            let st = g.state();
            !st.active.is_empty() || st.frozen.is_some()
        });
        if !left {
            break;
        }
        if pass == UNLOAD_FLUSH_PASSES {
            return Err(Error::Internal(format!(
                "range {} of table {}: its caches are still not empty after {pass} flushes",
                range.id, range.table_id
            )));
        }
        for gi in 0..range.groups.len() {
            maintenance::compact_locked(inner, range, gi, CompactionKind::Minor)?;
        }
    }
    // Every cell the range took has a revision at or below this.
    let at = inner.current_revision();
    let mut rec = range.record();
    for g in &mut rec.groups {
        g.flushed_revision = g.flushed_revision.max(at);
    }
    let own: Vec<String> = rec
        .groups
        .iter()
        .flat_map(|g| g.stores.iter())
        .filter(|p| inner.is_own(p))
        .cloned()
        .collect();
    let mut ops = vec![MetaOp::RemoveRange(range.id)];
    if !own.is_empty() {
        ops.push(MetaOp::ExportStores {
            table_id: range.table_id,
            stores: own,
        });
    }
    ops.push(MetaOp::Unloaded(rec.clone()));
    // A table dropped meanwhile has no files left to hand over.
    inner.table(range.table_id)?;
    inner.files().write_meta(ops)?;
    Ok(rec)
}

/// Makes `ranges` visible: under the apply gate, one meta-log record with the new tables and
/// the ranges, then the maps. With `reuse_held`, a range already held with the same table and
/// bounds answers with its id instead (the others are still installed); otherwise, as for any
/// range that overlaps a held one, the call fails and nothing changes. Returns the ids in the
/// order of `ranges`.
fn install(
    inner: &Inner,
    new_tables: &[Arc<TableInfo>],
    ranges: &[Arc<Range>],
    reuse_held: bool,
) -> Result<Vec<u64>> {
    let gate = inner.catalog().exclusive();
    let mut tables = gate.tables_mut();
    let mut ids = Vec::with_capacity(ranges.len());
    let mut fresh = Vec::new();
    for r in ranges {
        let key = range_key(r.table_id, r.end_row.as_deref());
        if reuse_held
            && let Some(held) = inner.catalog().ranges().get(&key)
            && held.start_row == r.start_row
        {
            ids.push(held.id);
            continue;
        }
        if let Some(o) = inner
            .catalog()
            .overlapping(r.table_id, &r.start_row, &r.end_row)
        {
            return Err(Error::InvalidInput(format!(
                "range [{}, {}) of table {} overlaps range {} [{}, {}) held here",
                show_row(r.start_row.as_deref()),
                show_row(r.end_row.as_deref()),
                r.table_id,
                o.id,
                show_row(o.start_row.as_deref()),
                show_row(o.end_row.as_deref())
            )));
        }
        ids.push(r.id);
        fresh.push(r.clone());
    }
    if fresh.is_empty() {
        return Ok(ids);
    }
    let registered: Vec<&Arc<TableInfo>> = new_tables
        .iter()
        .filter(|t| !tables.contains_key(&t.schema.id))
        .filter(|t| fresh.iter().any(|r| r.table_id == t.schema.id))
        .collect();
    let mut ops: Vec<MetaOp> = registered
        .iter()
        .map(|t| MetaOp::PutTable(t.schema.clone()))
        .collect();
    ops.extend(fresh.iter().map(|r| MetaOp::PutRange(r.record())));
    ops.push(MetaOp::NextRangeId(inner.catalog().next_range_id()));
    inner.files().write_meta(ops)?;
    for t in registered {
        tables.insert(t.schema.id, t.clone());
    }
    tables.insert_ranges(
        fresh
            .iter()
            .map(|r| (range_key(r.table_id, r.end_row.as_deref()), r.clone())),
    );
    drop(tables);
    drop(gate);
    // Recovery may have left many small stores, and a range may arrive bigger than the split
    // size: the usual merges and splits follow in the background.
    for r in &fresh {
        for gi in 0..r.groups.len() {
            maintenance::queue_follow_ups(inner, r, gi);
        }
    }
    Ok(ids)
}

/// Replays `<dead_root>/log` into the phantom ranges' caches, writing a cache out as a cell
/// store whenever the phantoms hold more than `cell_cache_flush_bytes` (so recovery of a long
/// log stays within memory bounds), and at the end all of them. Then every group's flushed
/// revision covers what was replayed. Returns the number of cells put into caches.
fn replay_into(
    inner: &Inner,
    dead_root: &str,
    tables: &HashMap<u32, (Arc<TableInfo>, bool)>,
    phantoms: &RangeMap,
) -> Result<u64> {
    let dir = join(dead_root, "log");
    let limit = inner.opts().cell_cache_flush_bytes.max(1);
    let mut held_bytes = 0u64;
    let mut cells = 0u64;
    let mut max_rev = i64::MIN;
    let started = Instant::now();
    // The dead server's record of its fragments makes a missing or damaged one an error.
    let track = crate::meta::read_state(inner.fs(), &join(dead_root, "meta"))?.log;
    let stats = CommitLog::replay_dir(inner.fs(), &dir, track.as_ref(), |entry, layout| {
        let (n, grew) = replay_entry(
            entry,
            layout,
            &dir,
            |t| tables.get(&t).map(|(t, _)| &**t),
            phantoms,
            &mut max_rev,
        )?;
        held_bytes += grew;
        cells += n;
        if held_bytes > limit {
            held_bytes = flush_phantoms(inner, tables, phantoms, limit / 2)?;
        }
        Ok(())
    })?;
    flush_phantoms(inner, tables, phantoms, 0)?;
    if max_rev > i64::MIN {
        inner.observe_revision(max_rev);
    }
    // Everything replayed is in stores now, and revisions here only grow past this.
    let at = inner.current_revision();
    for r in phantoms.values() {
        for g in &r.groups {
            g.update(|s| GroupState {
                flushed_revision: s.flushed_revision.max(at),
                ..s.clone()
            });
        }
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    if stats.torn_blocks > 0 {
        tracing::warn!(
            dir,
            torn_blocks = stats.torn_blocks,
            "recovery replay skipped torn blocks"
        );
    }
    tracing::info!(
        dir,
        cells,
        entries = stats.entries,
        bytes = stats.bytes,
        mb_per_s = stats.bytes as f64 / secs / 1e6,
        "dead server's commit log replayed"
    );
    Ok(cells)
}

/// Writes phantom caches out, biggest first, until they hold at most `keep` bytes; returns what
/// they still hold.
fn flush_phantoms(
    inner: &Inner,
    tables: &HashMap<u32, (Arc<TableInfo>, bool)>,
    phantoms: &RangeMap,
    keep: u64,
) -> Result<u64> {
    let mut groups: Vec<(u64, &Arc<Range>, usize)> = phantoms
        .values()
        .flat_map(|r| {
            r.groups
                .iter()
                .enumerate()
                .map(move |(gi, g)| (g.state().active.memory_bytes(), r, gi))
        })
        .filter(|(b, _, _)| *b > 0)
        .collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.0));
    let mut held: u64 = groups.iter().map(|g| g.0).sum();
    for (bytes, r, gi) in groups {
        if held <= keep {
            break;
        }
        let opts = tables
            .get(&r.table_id)
            .and_then(|(t, _)| t.schema.access_groups.get(gi))
            .map(CellStoreOptions::from_access_group)
            .unwrap_or_default();
        let g = &r.groups[gi];
        let st = g.state();
        let mut src = st.active.iter();
        let (new, next_store) =
            maintenance::write_store_with(inner, r, gi, st.next_store, opts, &mut src)?;
        let new: Vec<Arc<CellStore>> = new.into_iter().collect();
        g.update(|s| {
            let mut stores = s.stores.clone();
            stores.extend(new.iter().cloned());
            GroupState {
                active: Arc::new(CellCache::new()),
                stores,
                next_store,
                ..s.clone()
            }
        });
        held -= bytes;
    }
    Ok(held)
}

/// Deletes the stores that recovery wrote for phantom ranges that will not be used (best
/// effort: what is left is an orphan, removed at the next open).
fn remove_own_stores<'a>(inner: &Inner, ranges: impl Iterator<Item = &'a Arc<Range>>) {
    for r in ranges {
        for g in &r.groups {
            let dir = format!("{}/", inner.store_dir(r.table_id, &g.name, r.id));
            for s in &g.state().stores {
                if s.path().starts_with(&dir)
                    && let Err(e) = inner.fs().remove(s.path())
                {
                    tracing::warn!(file = s.path(), error = %e, "could not remove an unused recovered store");
                }
            }
        }
    }
}
