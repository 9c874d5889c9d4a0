//! What the engine serves (tables, the range map, damaged ranges, ranges being unloaded) and
//! the apply gate, behind methods that take their locks in the one order.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Damaged, RangeEnd, RangeMap, TableInfo};
use crate::error::{Error, Result};
use crate::range::Range;

/// A range map key: table and end row.
pub(crate) type RangeKey = (u32, RangeEnd);

/// The key of the range of `table_id` ending at `end_row` (`None`: unbounded).
pub(crate) fn range_key(table_id: u32, end_row: Option<&[u8]>) -> RangeKey {
    (
        table_id,
        end_row.map_or(RangeEnd::Max, |e| RangeEnd::Row(e.to_vec())),
    )
}

/// The tables and ranges held, and the apply gate.
///
/// **Lock order** (ARCHITECTURE.md, Invariants): a range's maintenance lock, then the apply
/// gate, then `tables`, then `ranges`, then `damaged` and `unloading`, then the meta log and
/// group states. Nothing takes a maintenance lock while holding the gate. The methods keep
/// the order by construction: the range map is written only through [`Exclusive`] (the gate
/// held) or [`TablesMut`] (`tables` held), each taking and releasing `ranges` inside one call,
/// so no caller can hold `ranges` for writing while it takes the gate or `tables`; `damaged`
/// and `unloading` are never returned locked.
pub(crate) struct Catalog {
    /// Shared by appliers from revision assignment to cache insert; exclusive for freezes,
    /// range swaps and the commit-log purge point.
    gate: RwLock<()>,
    tables: RwLock<HashMap<u32, Arc<TableInfo>>>,
    ranges: RwLock<RangeMap>,
    /// Ranges whose cell stores could not be opened (damaged or missing), by table and end row:
    /// they are not served (their rows answer with the damage), their cells stay in the commit
    /// log and their files are never deleted. The rest of the engine works as usual.
    damaged: RwLock<BTreeMap<RangeKey, Damaged>>,
    /// Ranges taken out of the range map by `unload_range` whose caches are still being written
    /// out: the commit-log purge point must stay below their cells.
    unloading: Mutex<Vec<Arc<Range>>>,
    next_range_id: AtomicU64,
}

/// The apply gate held exclusively: no batch is between revision assignment and cache insert.
pub(crate) struct Exclusive<'a> {
    _gate: RwLockWriteGuard<'a, ()>,
    catalog: &'a Catalog,
}

/// The tables map held for writing; the range map can be changed through it (`ranges` comes
/// after `tables` in the lock order).
pub(crate) struct TablesMut<'a> {
    tables: RwLockWriteGuard<'a, HashMap<u32, Arc<TableInfo>>>,
    ranges: &'a RwLock<RangeMap>,
}

impl Catalog {
    pub(crate) fn new(next_range_id: u64) -> Self {
        Self {
            gate: RwLock::new(()),
            tables: RwLock::new(HashMap::new()),
            ranges: RwLock::new(BTreeMap::new()),
            damaged: RwLock::new(BTreeMap::new()),
            unloading: Mutex::new(Vec::new()),
            next_range_id: AtomicU64::new(next_range_id),
        }
    }

    /// The apply gate, shared: held by an applier from revision assignment to cache insert.
    pub(crate) fn shared(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    /// The apply gate, exclusive: waits for every applier inside it.
    pub(crate) fn exclusive(&self) -> Exclusive<'_> {
        Exclusive {
            _gate: self.gate.write(),
            catalog: self,
        }
    }

    /// The tables map for writing, without the gate (creating a table changes no range a
    /// writer could be applying to).
    pub(crate) fn tables_mut(&self) -> TablesMut<'_> {
        TablesMut {
            tables: self.tables.write(),
            ranges: &self.ranges,
        }
    }

    /// The tables, read.
    pub(crate) fn tables(&self) -> RwLockReadGuard<'_, HashMap<u32, Arc<TableInfo>>> {
        self.tables.read()
    }

    /// The range map, read: one consistent snapshot while held.
    pub(crate) fn ranges(&self) -> RwLockReadGuard<'_, RangeMap> {
        self.ranges.read()
    }

    pub(crate) fn table(&self, id: u32) -> Result<Arc<TableInfo>> {
        self.tables
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("id {id}")))
    }

    pub(crate) fn has_table(&self, id: u32) -> bool {
        self.tables.read().contains_key(&id)
    }

    /// Every range held, in (table, end row) order.
    pub(crate) fn all_ranges(&self) -> Vec<Arc<Range>> {
        self.ranges.read().values().cloned().collect()
    }

    /// The range held under `key`.
    pub(crate) fn range_at(&self, key: &RangeKey) -> Option<Arc<Range>> {
        self.ranges.read().get(key).cloned()
    }

    /// The range of `table` holding `row`.
    pub(crate) fn find(&self, table: u32, row: &[u8]) -> Option<Arc<Range>> {
        find_range(&self.ranges.read(), table, row)
    }

    pub(crate) fn table_ranges(&self, table: u32) -> Vec<Arc<Range>> {
        table_ranges_in(&self.ranges.read(), table)
    }

    /// A held range of `table` that overlaps `[start_row, end_row)`, if any.
    pub(crate) fn overlapping(
        &self,
        table: u32,
        start_row: &Option<Vec<u8>>,
        end_row: &Option<Vec<u8>>,
    ) -> Option<Arc<Range>> {
        self.table_ranges(table)
            .into_iter()
            .find(|r| common::row_range::overlaps(start_row, end_row, &r.start_row, &r.end_row))
    }

    /// Takes `n` consecutive range ids, returning the first.
    pub(crate) fn take_range_ids(&self, n: u64) -> u64 {
        self.next_range_id.fetch_add(n, Ordering::AcqRel)
    }

    /// The next range id that will be handed out.
    pub(crate) fn next_range_id(&self) -> u64 {
        self.next_range_id.load(Ordering::Acquire)
    }

    /// Marks a range not served because of damage.
    pub(crate) fn insert_damaged(&self, key: RangeKey, d: Damaged) {
        self.damaged.write().insert(key, d);
    }

    /// The ranges not served because of damage, in (table, end row) order.
    pub(crate) fn damaged(&self) -> Vec<Damaged> {
        self.damaged.read().values().cloned().collect()
    }

    /// True if a damaged range names the cell store at `path` (it is never deleted).
    pub(crate) fn damaged_holds(&self, path: &str) -> bool {
        self.damaged.read().values().any(|d| d.holds(path))
    }

    /// The error for `row` of `table` if it lies in a damaged range.
    pub(crate) fn damage_at(&self, table: u32, row: &[u8]) -> Option<Error> {
        let map = self.damaged.read();
        map.range((
            Bound::Excluded((table, RangeEnd::Row(row.to_vec()))),
            Bound::Unbounded,
        ))
        .next()
        .filter(|((t, _), d)| *t == table && d.rec.start_row.as_deref().is_none_or(|s| s <= row))
        .map(|(_, d)| d.error())
    }

    /// The ranges being unloaded (out of the range map, caches not yet written out).
    pub(crate) fn unloading(&self) -> Vec<Arc<Range>> {
        self.unloading.lock().clone()
    }

    /// Takes `range` off the unloading list.
    pub(crate) fn end_unload(&self, range: &Arc<Range>) {
        self.unloading.lock().retain(|r| !Arc::ptr_eq(r, range));
    }
}

impl Exclusive<'_> {
    /// The tables map for writing, the gate still held.
    pub(crate) fn tables_mut(&self) -> TablesMut<'_> {
        self.catalog.tables_mut()
    }

    pub(crate) fn insert_range(&self, key: RangeKey, range: Arc<Range>) {
        self.catalog.ranges.write().insert(key, range);
    }

    /// Removes the ranges under `remove` and adds `insert`, in one change of the range map.
    pub(crate) fn replace_ranges(&self, remove: &[RangeKey], insert: Vec<(RangeKey, Arc<Range>)>) {
        let mut map = self.catalog.ranges.write();
        for k in remove {
            map.remove(k);
        }
        map.extend(insert);
    }

    /// Moves the range under `key` from the range map to the unloading list.
    pub(crate) fn start_unload(&self, key: &RangeKey, range: &Arc<Range>) {
        self.catalog.unloading.lock().push(range.clone());
        self.catalog.ranges.write().remove(key);
    }
}

impl TablesMut<'_> {
    /// Adds ranges to the range map (taken after `tables`, as the lock order says).
    pub(crate) fn insert_ranges(&self, ranges: impl IntoIterator<Item = (RangeKey, Arc<Range>)>) {
        self.ranges.write().extend(ranges);
    }
}

impl Deref for TablesMut<'_> {
    type Target = HashMap<u32, Arc<TableInfo>>;
    fn deref(&self) -> &Self::Target {
        &self.tables
    }
}

impl DerefMut for TablesMut<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tables
    }
}

/// The range of `table` in `map` holding `row`.
pub(crate) fn find_range(map: &RangeMap, table: u32, row: &[u8]) -> Option<Arc<Range>> {
    let (_, r) = map
        .range((
            Bound::Excluded((table, RangeEnd::Row(row.to_vec()))),
            Bound::Unbounded,
        ))
        .next()?;
    (r.table_id == table && r.contains(row)).then(|| r.clone())
}

/// The ranges of `table` in `map`, by end row.
pub(crate) fn table_ranges_in(map: &RangeMap, table: u32) -> Vec<Arc<Range>> {
    map.range((table, RangeEnd::Row(Vec::new()))..=(table, RangeEnd::Max))
        .map(|(_, r)| r.clone())
        .collect()
}
