//! Tables and ranges: create, register, alter, drop; the meta log's attributes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::TableSchema;
use dfs_broker::join;
use parking_lot::Mutex;

use super::catalog::range_key;
use super::{Engine, Inner, TableInfo};
use crate::cellcache::CellCache;
use crate::error::{Error, Result};
use crate::maintenance;
use crate::meta::{GroupRecord, MetaOp, RangeRecord};
use crate::range::{AccessGroup, GroupState, Range};

impl Engine {
    /// Creates a table with one range covering every row.
    pub fn create_table(&self, schema: TableSchema) -> Result<()> {
        self.create_table_with_ranges(schema, &[(None, None)])
    }

    /// Creates a table with one range per gap between `splits` (strictly increasing rows).
    pub fn create_table_split(&self, schema: TableSchema, splits: &[Vec<u8>]) -> Result<()> {
        common::row_range::check_split_rows(splits).map_err(Error::InvalidInput)?;
        let bounds: Vec<RowBounds> = common::row_range::split_bounds(splits)
            .into_iter()
            .map(|r| (r.start, r.end))
            .collect();
        self.create_table_with_ranges(schema, &bounds)
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
        let gate = inner.catalog().exclusive();
        if inner
            .catalog()
            .overlapping(table_id, &start_row, &end_row)
            .is_some()
        {
            return Err(Error::InvalidInput(format!(
                "the new range overlaps a range of table {table_id} held here"
            )));
        }
        let rec = empty_range_record(inner, &table.schema, start_row, end_row);
        inner.files().write_meta(vec![
            MetaOp::PutRange(rec.clone()),
            MetaOp::NextRangeId(rec.id + 1),
        ])?;
        let range = inner.build_range(&rec, &table, &mut HashMap::new())?;
        gate.insert_range(range_key(table_id, rec.end_row.as_deref()), Arc::new(range));
        Ok(rec.id)
    }

    fn create_table_with_ranges(&self, schema: TableSchema, bounds: &[RowBounds]) -> Result<()> {
        self.check_open()?;
        schema.validate()?;
        let inner = &self.inner;
        let mut tables = inner.catalog().tables_mut();
        if tables.contains_key(&schema.id) {
            return Err(Error::TableExists(format!(
                "{} (id {})",
                schema.name, schema.id
            )));
        }
        // Ids are never reused: the log may still hold cells of a dropped table with this id.
        let used = inner.files().meta_state(|s| s.max_table_id);
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
        ops.push(MetaOp::NextRangeId(inner.catalog().next_range_id()));
        inner.files().write_meta(ops)?;
        let info = TableInfo::new(schema, &inner.opts().registry);
        let table_id = info.schema.id;
        // Its directory marks the root as holding a table even before any cell store exists,
        // so a lost meta log is never taken for a new database (`root_holds_data`).
        inner
            .fs()
            .mkdirs(&join(&inner.files().tables_dir(), &table_id.to_string()))?;
        let mut built = Vec::new();
        for rec in &recs {
            built.push((rec, inner.build_range(rec, &info, &mut HashMap::new())?));
        }
        tables.insert(table_id, Arc::new(info));
        tables.insert_ranges(
            built
                .into_iter()
                .map(|(rec, range)| (range_key(table_id, rec.end_row.as_deref()), Arc::new(range))),
        );
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
                Some(n)
                    if !f.deleted
                        && !n.deleted
                        && n.effective_combiner() != f.effective_combiner() =>
                {
                    return Err(Error::InvalidInput(format!(
                        "column family '{}': its COUNTER or COMBINER cannot be changed (its \
                         stored values are in the old combiner's form); add a new family",
                        f.name
                    )));
                }
                Some(n) if !f.deleted && !n.deleted && n.append_only && !f.append_only => {
                    return Err(Error::InvalidInput(format!(
                        "column family '{}': APPEND_ONLY can only be set when a family is \
                         created (deletes written before may lie in cell stores a partial \
                         compaction does not read)",
                        f.name
                    )));
                }
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
            let gate = inner.catalog().exclusive();
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
                    seeks: AtomicU64::new(old_r.seeks.load(Ordering::Relaxed)),
                    engine_seeks: old_r.engine_seeks.clone(),
                };
                ops.push(MetaOp::PutRange(r.record()));
                rebuilt.push((Arc::new(r), old_r.clone()));
            }
            inner.files().write_meta(ops)?;
            let mut tables = gate.tables_mut();
            let mut ranges = Vec::with_capacity(rebuilt.len());
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
                ranges.push((range_key(r.table_id, r.end_row.as_deref()), r));
            }
            tables.insert_ranges(ranges);
            tables.insert(
                schema.id,
                Arc::new(TableInfo::new(schema.clone(), &inner.opts().registry)),
            );
            Ok(())
        })
    }

    /// Drops a table: its ranges and, once no scanner uses them, its files.
    pub fn drop_table(&self, table_id: u32) -> Result<()> {
        self.check_open()?;
        let inner = &self.inner;
        inner.table(table_id)?;
        with_table_locked(inner, table_id, |removed| {
            let gate = inner.catalog().exclusive();
            inner
                .files()
                .write_meta(vec![MetaOp::DropTable(table_id)])?;
            gate.tables_mut().remove(&table_id);
            let keys: Vec<_> = removed
                .iter()
                .map(|r| range_key(table_id, r.end_row.as_deref()))
                .collect();
            gate.replace_ranges(&keys, Vec::new());
            for r in removed {
                r.retired.store(true, Ordering::Release);
                for g in &r.groups {
                    let st = g.state();
                    inner.sub_cache_bytes(st.cache_bytes());
                    inner.garbage().retire(&st.stores, &[]);
                }
            }
            Ok(())
        })?;
        maintenance::collect_garbage(inner)?;
        let dir = format!("{}/{table_id}", inner.files().tables_dir());
        if !inner.garbage().any_under(&dir) && inner.fs().exists(&dir)? {
            inner.fs().rmdir(&dir, true)?;
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
        self.inner.files().write_meta(ops)
    }

    /// The attributes whose keys start with `prefix`, in key order.
    pub fn attrs(&self, prefix: &str) -> Vec<(String, String)> {
        self.inner.files().meta_state(|s| {
            s.attrs
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
    }

    /// One attribute.
    pub fn attr(&self, key: &str) -> Option<String> {
        self.inner.files().meta_state(|s| s.attrs.get(key).cloned())
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
        id: inner.catalog().take_range_ids(1),
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
