//! Whether the ranges an engine holds cover every row a scan may touch: a scan must not
//! silently return part of its rows, so a row no held range covers is an [`Error::NotHere`]
//! naming it.

use std::ops::Bound;
use std::sync::Arc;

use super::{Inner, RangeMap};
use crate::error::{Error, Result};
use crate::range::Range;
use crate::scan::spec::{RowInterval, ScanSpec};

/// Fails with [`Error::NotHere`] naming the first row a scan may touch that no range of `table`
/// in `map` holds: the rows of its row intervals, the rows of its cell intervals, or every row
/// when it names neither. An interval that lies inside the range holding the one before it
/// needs no lookup, so a key set of many point rows costs a few comparisons per row.
pub(super) fn check_all_covered(map: &RangeMap, table: u32, spec: &ScanSpec) -> Result<()> {
    if spec.row_intervals.is_empty() && spec.cell_intervals.is_empty() {
        return check_covered(map, table, &RowInterval::all());
    }
    let mut last: Option<Arc<Range>> = None;
    for interval in &spec.row_intervals {
        if last.as_ref().is_some_and(|r| holds(r, interval)) {
            continue;
        }
        check_covered(map, table, interval)?;
        last = match &interval.start {
            Bound::Included(s) | Bound::Excluded(s) => Inner::find_range(map, table, s),
            Bound::Unbounded => Inner::find_range(map, table, &[]),
        };
    }
    let row_of = |b: &Bound<common::scan_spec::CellPos>| match b {
        // A cell interval starting (or ending) inside a row still touches that row.
        Bound::Included(p) | Bound::Excluded(p) => Bound::Included(p.row.clone()),
        Bound::Unbounded => Bound::Unbounded,
    };
    for c in &spec.cell_intervals {
        let rows = RowInterval {
            start: row_of(&c.start),
            end: row_of(&c.end),
        };
        check_covered(map, table, &rows)?;
    }
    Ok(())
}

/// True when every row of `interval` lies in `range` (false may also mean "not known").
fn holds(range: &Range, interval: &RowInterval) -> bool {
    let start_ok = match (&interval.start, &range.start_row) {
        (_, None) => true,
        (Bound::Unbounded, Some(_)) => false,
        (Bound::Included(s) | Bound::Excluded(s), Some(rs)) => s >= rs,
    };
    let end_ok = match (&interval.end, &range.end_row) {
        (_, None) => true,
        (Bound::Unbounded, Some(_)) => false,
        (Bound::Included(e), Some(re)) => e < re,
        (Bound::Excluded(e), Some(re)) => e <= re,
    };
    start_ok && end_ok
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
