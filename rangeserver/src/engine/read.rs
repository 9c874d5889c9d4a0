//! The read path: a scan checks that held ranges cover its rows, then walks them range after
//! range (`TableCursor`) under the spec's filter (`TableScanner`).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::key::{self, KeyRef};
use common::{TableSchema, TimeOrder};

use super::{Engine, Inner, RangeEnd, RangeMap, ScanCell};
use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::merge::MergeIter;
use crate::range::Range;
use crate::scan::SpecFilter;
use crate::scan::spec::{QualifierMatch, RowInterval, ScanSpec};
use crate::scan::visible::{FamilyRule, Mode, VisibleCells, VisibleOptions};

impl Engine {
    /// Starts a scan of one table. The scanner reads a snapshot of the table's ranges and their
    /// cell stores and the live cell caches; it holds no locks between calls.
    pub fn scan(&self, table_id: u32, spec: &ScanSpec) -> Result<TableScanner> {
        self.check_open()?;
        let inner = &self.inner;
        let table = inner.table(table_id)?;
        let now = inner.opts().clock.now_ns();
        let rules = if spec.columns.is_empty() && spec.max_versions == 0 {
            table.default_rules.clone()
        } else {
            Arc::new(family_rules(&table.schema, spec))
        };
        let groups: Vec<usize> = (0..table.schema.access_groups.len())
            .filter(|&gi| {
                table.schema.families.iter().any(|f| {
                    rules[f.id as usize].selected && table.group_of[f.id as usize] == Some(gi as u8)
                })
            })
            .collect();
        let vopts = VisibleOptions {
            families: rules,
            time_start: spec.time_start,
            time_end: spec.time_end,
            now_ns: now,
            return_deletes: spec.return_deletes,
            mode: Mode::Scan,
        };
        // A scan of one row skips cell stores whose bloom filter rules the row out.
        let only_row = match (
            spec.row_intervals.as_slice(),
            spec.cell_intervals.is_empty(),
        ) {
            (
                [
                    RowInterval {
                        start: Bound::Included(a),
                        end: Bound::Included(b),
                    },
                ],
                true,
            ) if a == b => Some(a.clone()),
            _ => None,
        };
        // One snapshot of the range map both for the coverage check and the scan, so a split
        // in between cannot make them disagree.
        let ranges = {
            let map = inner.catalog().ranges();
            // A scan must not silently return part of its rows: every row it may touch must lie
            // in a range held here, or the caller learns which row is elsewhere.
            for interval in scanned_rows(spec) {
                check_covered(&map, table_id, &interval).map_err(|e| match e {
                    Error::NotHere { table_id, row } => inner
                        .damage_at(table_id, &row)
                        .unwrap_or(Error::NotHere { table_id, row }),
                    e => e,
                })?;
            }
            match &only_row {
                Some(row) => Inner::find_range(&map, table_id, row).into_iter().collect(),
                None => map
                    .range((table_id, RangeEnd::Row(Vec::new()))..=(table_id, RangeEnd::Max))
                    .map(|(_, r)| r.clone())
                    .collect(),
            }
        };
        let cursor = TableCursor {
            ranges,
            only_row,
            groups,
            vopts,
            fill_cache: !spec.no_cache,
            current: None,
            current_idx: 0,
            stepped: 0,
        };
        Ok(TableScanner {
            filter: SpecFilter::new(cursor, spec)?,
            keys_only: spec.keys_only,
        })
    }

    /// Scans in a blocking task and streams blocks of at most `block_cells` cells through a
    /// channel of `queue_blocks` blocks (the bound on memory a slow reader can cause).
    pub fn scan_stream(
        &self,
        table_id: u32,
        spec: ScanSpec,
        block_cells: usize,
        queue_blocks: usize,
    ) -> tokio::sync::mpsc::Receiver<Result<Vec<ScanCell>>> {
        let block_cells = block_cells.max(1);
        self.scan_stream_with(table_id, spec, queue_blocks, move |sc| {
            let mut block = Vec::with_capacity(block_cells);
            while block.len() < block_cells {
                match sc.next_cell()? {
                    Some(c) => block.push(c),
                    None => break,
                }
            }
            Ok((!block.is_empty()).then_some(block))
        })
    }

    /// Scans in a blocking task; `fill` makes each block from the scanner (`Ok(None)`: the
    /// scan is over), and the blocks go through a channel of `queue_blocks` blocks (the bound on
    /// memory a slow reader can cause). A dropped receiver stops the scan at its next block.
    pub fn scan_stream_with<B: Send + 'static>(
        &self,
        table_id: u32,
        spec: ScanSpec,
        queue_blocks: usize,
        mut fill: impl FnMut(&mut TableScanner) -> Result<Option<B>> + Send + 'static,
    ) -> tokio::sync::mpsc::Receiver<Result<B>> {
        let (tx, rx) = tokio::sync::mpsc::channel(queue_blocks.max(1));
        let e = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut sc = match e.scan(table_id, &spec) {
                Ok(s) => s,
                Err(err) => {
                    let _ = tx.blocking_send(Err(err));
                    return;
                }
            };
            loop {
                match fill(&mut sc) {
                    Ok(Some(block)) => {
                        if tx.blocking_send(Ok(block)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(err) => {
                        let _ = tx.blocking_send(Err(err));
                        return;
                    }
                }
            }
        });
        rx
    }
}

/// The row intervals a scan may touch: its row intervals, the rows of its cell intervals, or
/// every row when it names neither.
fn scanned_rows(spec: &ScanSpec) -> Vec<RowInterval> {
    if spec.row_intervals.is_empty() && spec.cell_intervals.is_empty() {
        return vec![RowInterval::all()];
    }
    let row_of = |b: &Bound<common::scan_spec::CellPos>| match b {
        // A cell interval starting (or ending) inside a row still touches that row.
        Bound::Included(p) | Bound::Excluded(p) => Bound::Included(p.row.clone()),
        Bound::Unbounded => Bound::Unbounded,
    };
    spec.row_intervals
        .iter()
        .cloned()
        .chain(spec.cell_intervals.iter().map(|c| RowInterval {
            start: row_of(&c.start),
            end: row_of(&c.end),
        }))
        .collect()
}

/// Fails with [`Error::NotHere`] naming the first row of `interval` that no range of `table` in
/// `map` holds.
fn check_covered(map: &RangeMap, table: u32, interval: &RowInterval) -> Result<()> {
    // The lowest row of the interval; the empty row sorts below every other.
    let mut pos = match &interval.start {
        Bound::Included(s) => s.clone(),
        Bound::Excluded(s) => {
            let mut s = s.clone();
            s.push(0);
            s
        }
        Bound::Unbounded => Vec::new(),
    };
    // Each step moves `pos` to the end of a distinct range, so this ends within the number of
    // ranges held.
    loop {
        if interval.is_past_end(&pos) {
            return Ok(());
        }
        let Some(r) = Inner::find_range(map, table, &pos) else {
            return Err(Error::NotHere {
                table_id: table,
                row: pos,
            });
        };
        match &r.end_row {
            Some(end) => pos = end.clone(),
            None => return Ok(()),
        }
    }
}

/// The per-family rules of a scan from the schema and the requested columns.
pub(crate) fn family_rules(schema: &TableSchema, spec: &ScanSpec) -> Vec<FamilyRule> {
    let mut rules = vec![FamilyRule::unselected(); 256];
    for f in schema.families.iter().filter(|f| !f.deleted) {
        let selectors: Vec<&QualifierMatch> = spec
            .columns
            .iter()
            .filter(|c| c.family == f.id)
            .map(|c| &c.qualifier)
            .collect();
        if !spec.columns.is_empty() && selectors.is_empty() {
            continue;
        }
        let qualifiers = if selectors.iter().any(|q| matches!(q, QualifierMatch::All)) {
            Vec::new()
        } else {
            selectors.into_iter().cloned().collect()
        };
        let max_versions = match (f.max_versions, spec.max_versions) {
            (0, s) => s,
            (m, 0) => m,
            (m, s) => m.min(s),
        };
        rules[f.id as usize] = FamilyRule {
            selected: true,
            qualifiers,
            max_versions,
            ttl_ns: (f.ttl_secs as i64).saturating_mul(1_000_000_000),
            counter: f.counter,
            time_desc: f.time_order == TimeOrder::Desc,
        };
    }
    rules
}

/// A cursor over the visible cells of a table, range after range.
struct TableCursor {
    ranges: Vec<Arc<Range>>,
    only_row: Option<Vec<u8>>,
    groups: Vec<usize>,
    vopts: VisibleOptions,
    fill_cache: bool,
    current: Option<MergeIter<VisibleCells<Box<dyn CellIter>>>>,
    current_idx: usize,
    /// Cells stepped over in the current range, not yet added to its `cells_read`.
    stepped: u64,
}

impl TableCursor {
    /// Adds the cells stepped over to the current range's read counter.
    fn count_reads(&mut self) {
        if self.stepped > 0 {
            if let Some(r) = self.ranges.get(self.current_idx) {
                r.cells_read.fetch_add(self.stepped, Ordering::Relaxed);
            }
            self.stepped = 0;
        }
    }

    fn open_range(&mut self, idx: usize) {
        self.count_reads();
        let r = &self.ranges[idx];
        let children = self
            .groups
            .iter()
            .map(|&gi| {
                let src = r.group_source(gi, self.fill_cache, self.only_row.as_deref());
                VisibleCells::new(src, self.vopts.clone())
            })
            .collect();
        self.current = Some(MergeIter::new(children));
        self.current_idx = idx;
    }

    /// Moves on to following ranges until one has a cell.
    fn settle(&mut self) -> Result<()> {
        while let Some(cur) = &self.current {
            if cur.valid() || self.current_idx + 1 >= self.ranges.len() {
                return Ok(());
            }
            let next = self.current_idx + 1;
            self.open_range(next);
            let start = self.ranges[next]
                .start_row
                .as_deref()
                .map(key::row_start)
                .unwrap_or_default();
            self.current.as_mut().expect("just opened").seek(&start)?;
        }
        Ok(())
    }
}

impl CellIter for TableCursor {
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        // The range holding the target's row: the first whose end is past it.
        let idx = if self.ranges.len() == 1 {
            0
        } else {
            self.ranges
                .iter()
                .position(|r| match &r.end_row {
                    Some(e) => target < key::row_start(e).as_slice(),
                    None => true,
                })
                .unwrap_or(self.ranges.len() - 1)
        };
        if self.current.is_none() || self.current_idx != idx {
            self.open_range(idx);
        }
        self.current.as_mut().expect("opened").seek(target)?;
        self.settle()
    }

    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("valid").key()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("valid").value()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = &mut self.current {
            c.next()?;
            self.stepped += 1;
        }
        self.settle()
    }
}

impl Drop for TableCursor {
    fn drop(&mut self) {
        self.count_reads();
    }
}

/// The cells of a scan, in key order.
pub struct TableScanner {
    filter: SpecFilter<TableCursor>,
    keys_only: bool,
}

impl TableScanner {
    /// The next cell, decoded.
    pub fn next_cell(&mut self) -> Result<Option<ScanCell>> {
        if !self.filter.valid() {
            return Ok(None);
        }
        let k = KeyRef::from_trusted(self.filter.key())?.to_key();
        let v = if self.keys_only {
            Vec::new()
        } else {
            self.filter.value().to_vec()
        };
        self.filter.advance_cell()?;
        Ok(Some(ScanCell { key: k, value: v }))
    }

    /// The encoded size (key and value bytes) of the cell [`TableScanner::next_ref`] would
    /// give next; `None` at the end of the scan.
    pub fn peek_size(&self) -> Option<usize> {
        if !self.filter.valid() {
            return None;
        }
        let v = if self.keys_only {
            0
        } else {
            self.filter.value().len()
        };
        Some(self.filter.key().len() + v)
    }

    /// Calls `f` with the next cell's key and value, without copying; `Ok(false)` (and no
    /// call) at the end of the scan.
    pub fn next_ref(&mut self, f: impl FnOnce(KeyRef<'_>, &[u8])) -> Result<bool> {
        if !self.filter.valid() {
            return Ok(false);
        }
        let k = KeyRef::from_trusted(self.filter.key())?;
        let v = if self.keys_only {
            &[][..]
        } else {
            self.filter.value()
        };
        f(k, v);
        self.filter.advance_cell()?;
        Ok(true)
    }

    /// Calls `f` with each remaining cell's encoded key and value, without copying.
    pub fn for_each_raw(&mut self, mut f: impl FnMut(&[u8], &[u8])) -> Result<u64> {
        let mut n = 0;
        while self.filter.valid() {
            let v = if self.keys_only {
                &[][..]
            } else {
                self.filter.value()
            };
            f(self.filter.key(), v);
            n += 1;
            self.filter.advance_cell()?;
        }
        Ok(n)
    }

    /// All remaining cells.
    pub fn collect_all(&mut self) -> Result<Vec<ScanCell>> {
        let mut out = Vec::new();
        while let Some(c) = self.next_cell()? {
            out.push(c);
        }
        Ok(out)
    }
}
