//! SELECT: WHERE predicates and options to a [`ScanSpec`], and the scan's cells to the output,
//! streamed cell by cell through a buffer so that memory stays bounded.
//!
//! Column value predicates and `WITH ITERATOR` go into the spec and run in the range server,
//! so only the cells of matching rows cross the network, and LIMIT, OFFSET, CELL_LIMIT and
//! CELL_OFFSET count what is returned (per row or cell interval, as every limit in ht).

use crate::error::Code;
use std::io::{BufWriter, Write};
use std::ops::Bound;

use common::iterators::{ScanIterator, ValuePredicate, ValuePredicates, ValueTest};
use common::scan_spec::{
    CellInterval, CellPos, ColumnSelector, QualifierMatch, RowInterval, prefix_successor,
};
use common::{ScanSpec, TableSchema};
use regex::bytes::Regex;

use super::keyset::{self, KeySetLimits};
use super::output::{CellFormat, FileSink, family_names, write_cell};
use super::parts;
use super::{ExecError, Executor, Result};
use crate::ast::{
    self, ColumnPredicate, ColumnRef, Columns, KeyValue, PartPredicate, PartTest, Predicate, RelOp,
    Select,
};

/// A set of intervals as (start, end) bounds.
pub(super) type Intervals<T> = Vec<(Bound<T>, Bound<T>)>;

/// A scan to run: the spec, or `None` when the predicates select nothing at all.
pub(super) struct Query {
    pub spec: Option<ScanSpec>,
    /// Whether the WHERE clause has column value predicates (they are in the spec's
    /// `value_predicates`, run by the range server).
    pub has_value_predicates: bool,
    /// With key-part predicates: what each part may take, and how many leading parts were
    /// expanded into rows (for EXPLAIN).
    pub parts: Option<(Vec<String>, usize)>,
}

fn regex(re: &str, what: &str) -> Result<Regex> {
    Regex::new(re).map_err(|e| {
        let first = e.to_string();
        let last = first.lines().last().unwrap_or("").trim().to_string();
        ExecError::invalid(format!("bad regular expression /{re}/ in {what}: {last}"))
    })
}

fn family_id(s: &TableSchema, path: &str, name: &str) -> Result<u8> {
    s.family(name).map(|f| f.id).ok_or_else(|| {
        ExecError::with_hypertable(
            Code::InvalidColumnFamily,
            format!(
                "Table= {} , Column family={name}",
                path.trim_start_matches('/')
            ),
            format!("column family '{name}' does not exist in table '{path}'"),
        )
    })
}

fn flip(op: RelOp) -> RelOp {
    match op {
        RelOp::Lt => RelOp::Gt,
        RelOp::Le => RelOp::Ge,
        RelOp::Gt => RelOp::Lt,
        RelOp::Ge => RelOp::Le,
        o => o,
    }
}

/// The tighter of two lower bounds.
fn max_start<T: Ord + Clone>(a: &Bound<T>, b: &Bound<T>) -> Bound<T> {
    use Bound::*;
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x.clone(),
        (Included(x), Included(y)) => Included(x.max(y).clone()),
        (Excluded(x), Excluded(y)) => Excluded(x.max(y).clone()),
        (Included(i), Excluded(e)) | (Excluded(e), Included(i)) => {
            if i > e {
                Included(i.clone())
            } else {
                Excluded(e.clone())
            }
        }
    }
}

/// The tighter of two upper bounds.
fn min_end<T: Ord + Clone>(a: &Bound<T>, b: &Bound<T>) -> Bound<T> {
    use Bound::*;
    match (a, b) {
        (Unbounded, x) | (x, Unbounded) => x.clone(),
        (Included(x), Included(y)) => Included(x.min(y).clone()),
        (Excluded(x), Excluded(y)) => Excluded(x.min(y).clone()),
        (Included(i), Excluded(e)) | (Excluded(e), Included(i)) => {
            if i < e {
                Included(i.clone())
            } else {
                Excluded(e.clone())
            }
        }
    }
}

fn is_empty<T: Ord>(start: &Bound<T>, end: &Bound<T>) -> bool {
    use Bound::*;
    match (start, end) {
        (Included(s), Included(e)) => s > e,
        (Included(s), Excluded(e)) | (Excluded(s), Included(e)) | (Excluded(s), Excluded(e)) => {
            s >= e
        }
        _ => false,
    }
}

/// `ROW op key` as bounds.
fn row_bounds(op: RelOp, key: &str) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let k = key.as_bytes().to_vec();
    match op {
        RelOp::Eq => (Bound::Included(k.clone()), Bound::Included(k)),
        RelOp::Lt => (Bound::Unbounded, Bound::Excluded(k)),
        RelOp::Le => (Bound::Unbounded, Bound::Included(k)),
        RelOp::Gt => (Bound::Excluded(k), Bound::Unbounded),
        RelOp::Ge => (Bound::Included(k), Bound::Unbounded),
        RelOp::StartsWith => {
            let r = RowInterval::prefix(k);
            (r.start, r.end)
        }
    }
}

/// Hypertable's checks of a row interval as written ("bad scan specification"): its start
/// may not lie after its end, nor equal it unless both ends are included.
fn check_row_interval(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> Result<()> {
    let (s, e, both_in) = match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => (s, e, true),
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            (s, e, false)
        }
        _ => return Ok(()),
    };
    if s > e {
        return Err(ExecError::coded(
            Code::BadScanSpec,
            format!(
                "start_row ({}) > end_row ({})",
                String::from_utf8_lossy(s),
                String::from_utf8_lossy(e)
            ),
        ));
    }
    if s == e && !both_in {
        return Err(ExecError::coded(Code::BadScanSpec, "empty row interval"));
    }
    Ok(())
}

/// Hypertable's checks of a cell interval ("bad scan specification"): rows in order, then
/// cells in order, and not empty.
fn check_cell_interval(start: &Bound<CellPos>, end: &Bound<CellPos>) -> Result<()> {
    let (s, e, both_in) = match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => (s, e, true),
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
            (s, e, false)
        }
        _ => return Ok(()),
    };
    let bad = |m: &str| Err(ExecError::coded(Code::BadScanSpec, m));
    if s.row > e.row {
        return bad("start_row > end_row");
    }
    if s > e {
        return bad("start_cell > end_cell");
    }
    if s == e && !both_in {
        return bad("empty cell interval");
    }
    Ok(())
}

fn row_interval(r: &ast::RowInterval) -> RowInterval {
    let (mut start, mut end) = row_bounds(r.op, &r.key);
    if let Some((k, op)) = &r.before {
        let (s, e) = row_bounds(flip(*op), k);
        start = max_start(&start, &s);
        end = min_end(&end, &e);
    }
    RowInterval { start, end }
}

fn cell_bounds(
    s: &TableSchema,
    path: &str,
    op: RelOp,
    key: &ast::CellKey,
) -> Result<(Bound<CellPos>, Bound<CellPos>)> {
    let col = ColumnRef::split(&key.column);
    let family = family_id(s, path, &col.family)?;
    let pos = CellPos {
        row: key.row.as_bytes().to_vec(),
        family,
        qualifier: col.qualifier.unwrap_or_default().into_bytes(),
    };
    Ok(match op {
        RelOp::Eq => (Bound::Included(pos.clone()), Bound::Included(pos)),
        RelOp::Lt => (Bound::Unbounded, Bound::Excluded(pos)),
        RelOp::Le => (Bound::Unbounded, Bound::Included(pos)),
        RelOp::Gt => (Bound::Excluded(pos), Bound::Unbounded),
        RelOp::Ge => (Bound::Included(pos), Bound::Unbounded),
        RelOp::StartsWith => {
            let end = match prefix_successor(&pos.qualifier) {
                Some(q) => Bound::Excluded(CellPos {
                    qualifier: q,
                    ..pos.clone()
                }),
                None if family < u8::MAX => Bound::Excluded(CellPos {
                    row: pos.row.clone(),
                    family: family + 1,
                    qualifier: Vec::new(),
                }),
                None => Bound::Unbounded,
            };
            (Bound::Included(pos), end)
        }
    })
}

fn cell_interval(s: &TableSchema, path: &str, c: &ast::CellInterval) -> Result<CellInterval> {
    let (mut start, mut end) = cell_bounds(s, path, c.op, &c.cell)?;
    if let Some((k, op)) = &c.before {
        let (bs, be) = cell_bounds(s, path, flip(*op), k)?;
        start = max_start(&start, &bs);
        end = min_end(&end, &be);
    }
    Ok(CellInterval { start, end })
}

/// True if the intervals come in order of their starts and no two overlap (key sets do).
fn sorted_disjoint<T: Clone + Ord>(v: &Intervals<T>) -> bool {
    v.windows(2).all(|w| {
        let (a, b) = (&w[0], &w[1]);
        max_start(&a.0, &b.0) == b.0 && is_empty(&max_start(&a.0, &b.0), &min_end(&a.1, &b.1))
    })
}

/// ANDs a new OR-list into the current set of intervals (`None`: no constraint yet).
pub(super) fn and_intervals<T: Clone + Ord>(
    current: Option<Intervals<T>>,
    new: Intervals<T>,
) -> Intervals<T> {
    let Some(cur) = current else {
        return new.into_iter().filter(|(s, e)| !is_empty(s, e)).collect();
    };
    let mut out = Vec::new();
    if sorted_disjoint(&cur) && sorted_disjoint(&new) {
        // One pass over both (two key sets of 250K rows would be 62.5G pairs), with the
        // same intersections in the same order as the pairs below.
        let (mut i, mut j) = (0, 0);
        while i < cur.len() && j < new.len() {
            let (cs, ce) = &cur[i];
            let (ns, ne) = &new[j];
            let e = min_end(ce, ne);
            let s = max_start(cs, ns);
            if !is_empty(&s, &e) {
                out.push((s, e.clone()));
            }
            if e == *ce {
                i += 1;
            } else {
                j += 1;
            }
        }
        return out;
    }
    for (cs, ce) in &cur {
        for (ns, ne) in &new {
            let s = max_start(cs, ns);
            let e = min_end(ce, ne);
            if !is_empty(&s, &e) {
                out.push((s, e));
            }
        }
    }
    out
}

fn column_selectors(s: &TableSchema, path: &str, cols: &Columns) -> Result<Vec<ColumnSelector>> {
    let Columns::List(list) = cols else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|c| {
            Ok(match c {
                ast::ColumnSelector::Family(f) => ColumnSelector {
                    family: family_id(s, path, f)?,
                    qualifier: QualifierMatch::All,
                },
                ast::ColumnSelector::Qualifier { family, qualifier } => ColumnSelector {
                    family: family_id(s, path, family)?,
                    qualifier: QualifierMatch::Exact(qualifier.as_bytes().to_vec()),
                },
                ast::ColumnSelector::QualifierPrefix { family, prefix } => ColumnSelector {
                    family: family_id(s, path, family)?,
                    qualifier: QualifierMatch::Prefix(prefix.as_bytes().to_vec()),
                },
                ast::ColumnSelector::QualifierRegex { family, regex: re } => ColumnSelector {
                    family: family_id(s, path, family)?,
                    qualifier: QualifierMatch::Regex(regex(re, &format!("column '{family}'"))?),
                },
            })
        })
        .collect()
}

fn timestamp_nanos(ts: &ast::Timestamp) -> Result<i64> {
    ts.nanos.ok_or_else(|| {
        ExecError::coded(
            Code::HqlParseError,
            format!("Unable to parse timestamp - '{}'", ts.text),
        )
    })
}

/// Narrows `[start, end)` by `TIMESTAMP op ts`.
fn apply_time(spec: &mut ScanSpec, op: RelOp, ts: i64) -> Result<()> {
    let after = ts.saturating_add(1);
    match op {
        RelOp::Eq => {
            spec.time_start = spec.time_start.max(ts);
            spec.time_end = spec.time_end.min(after);
        }
        RelOp::Lt => spec.time_end = spec.time_end.min(ts),
        RelOp::Le => spec.time_end = spec.time_end.min(after),
        RelOp::Gt => spec.time_start = spec.time_start.max(after),
        RelOp::Ge => spec.time_start = spec.time_start.max(ts),
        RelOp::StartsWith => {
            return Err(ExecError::with_hypertable(
                Code::HqlParseError,
                "Bad timestamp operator (=^)",
                "=^ cannot be used with TIMESTAMP",
            ));
        }
    }
    Ok(())
}

/// Columns and predicates to a scan (options other than columns are left at defaults).
pub(super) fn build_query(
    s: &TableSchema,
    path: &str,
    columns: &Columns,
    preds: &[Predicate],
    key_limits: &KeySetLimits,
) -> Result<Query> {
    let mut spec = ScanSpec {
        columns: column_selectors(s, path, columns)?,
        ..ScanSpec::default()
    };
    let mut rows: Option<Intervals<Vec<u8>>> = None;
    let mut cells: Option<Intervals<CellPos>> = None;
    let mut tests: Vec<ValuePredicate> = Vec::new();
    let mut part_preds: Vec<Vec<PartPredicate>> = Vec::new();
    for p in preds {
        match p {
            Predicate::Part(list) => part_preds.push(list.clone()),
            Predicate::Columns(list) if key_part_list(s, list) => {
                part_preds.push(vec![parts_in(list)]);
            }
            Predicate::Row(list) => {
                let new: Intervals<Vec<u8>> = list
                    .iter()
                    .map(|r| {
                        let i = row_interval(r);
                        check_row_interval(&i.start, &i.end)?;
                        Ok((i.start, i.end))
                    })
                    .collect::<Result<_>>()?;
                // `ROW > 'c' AND ROW < 'a'` is one interval to Hypertable, and a bad one.
                if let (Some([(cs, ce)]), [(ns, ne)]) = (rows.as_deref(), new.as_slice()) {
                    check_row_interval(&max_start(cs, ns), &min_end(ce, ne))?;
                }
                rows = Some(and_intervals(rows, new));
            }
            Predicate::Cell(list) => {
                let new = list
                    .iter()
                    .map(|c| {
                        let i = cell_interval(s, path, c)?;
                        check_cell_interval(&i.start, &i.end)?;
                        Ok((i.start, i.end))
                    })
                    .collect::<Result<Vec<_>>>()?;
                cells = Some(and_intervals(cells, new));
            }
            Predicate::RowIn(set) => {
                let new = keyset::rows(set, key_limits)?
                    .into_iter()
                    .map(|k| (Bound::Included(k.clone()), Bound::Included(k)))
                    .collect();
                rows = Some(and_intervals(rows, new));
            }
            Predicate::RowRegexp(re) => spec.row_regex = Some(regex(re, "ROW REGEXP")?),
            Predicate::ValueRegexp(re) => spec.value_regex = Some(regex(re, "VALUE REGEXP")?),
            Predicate::Timestamp(t) => {
                apply_time(&mut spec, t.op, timestamp_nanos(&t.ts)?)?;
                if let Some((ts, op)) = &t.before {
                    apply_time(&mut spec, flip(*op), timestamp_nanos(ts)?)?;
                }
            }
            Predicate::Columns(list) => {
                if !tests.is_empty() {
                    return Err(ExecError::invalid(
                        "only one group of column value predicates (ORed) is supported",
                    ));
                }
                for cp in list {
                    tests.push(value_test(s, path, cp)?);
                }
            }
        }
    }
    let mut nothing_parts = false;
    let mut parts_note = None;
    if !part_preds.is_empty() {
        let key = s.row_key.as_ref();
        let slots = parts::slots(key, path, &part_preds, key_limits)?;
        let key = key.expect("slots found the parts in a ROW KEY");
        let mut note = (parts::describe(key, &slots), 0);
        match parts::plan(key, &slots, key_limits.max_keys) {
            None => nothing_parts = true,
            Some(plan) => {
                note.1 = plan.expanded_parts;
                if let Some(r) = plan.rows {
                    rows = Some(and_intervals(rows, r));
                }
                spec.row_skip = plan.skip;
            }
        }
        spec.one_interval = true;
        parts_note = Some(note);
    }
    if rows.is_some() && cells.is_some() {
        return Err(ExecError::with_hypertable(
            Code::BadScanSpec,
            "row spec excludes cells",
            "ROW and CELL predicates cannot be combined in one query",
        ));
    }
    if !part_preds.is_empty() && cells.is_some() {
        return Err(ExecError::invalid(
            "key part and CELL predicates cannot be combined in one query",
        ));
    }
    let has_value_predicates = !tests.is_empty();
    if has_value_predicates {
        let mut output = Vec::new();
        if !spec.columns.is_empty() {
            // The predicates' families must be read even when they are not displayed.
            output = spec.columns.clone();
            let mut families: Vec<u8> = tests.iter().map(|t| t.family).collect();
            families.sort_unstable();
            families.dedup();
            for family in families {
                spec.columns.push(ColumnSelector {
                    family,
                    qualifier: QualifierMatch::All,
                });
            }
        }
        spec.value_predicates = Some(ValuePredicates { tests, output });
    }
    let nothing = nothing_parts
        || matches!(&rows, Some(r) if r.is_empty())
        || matches!(&cells, Some(c) if c.is_empty())
        || spec.time_start >= spec.time_end;
    if let Some(r) = rows {
        spec.row_intervals = r
            .into_iter()
            .map(|(start, end)| RowInterval { start, end })
            .collect();
    }
    if let Some(c) = cells {
        spec.cell_intervals = c
            .into_iter()
            .map(|(start, end)| CellInterval { start, end })
            .collect();
    }
    Ok(Query {
        spec: (!nothing).then_some(spec),
        has_value_predicates,
        parts: parts_note,
    })
}

/// Whether the ORed column predicates all say `part = 'v'` of key parts: `fieldtype = 'F1'`
/// parses as a column value predicate, and is one on a key part.
fn key_part_list(s: &TableSchema, list: &[ColumnPredicate]) -> bool {
    let Some(key) = &s.row_key else {
        return false;
    };
    let first = match list.first() {
        Some(ColumnPredicate::ValueEquals { column, .. }) if column.qualifier.is_none() => {
            &column.family
        }
        _ => return false,
    };
    key.part(first).is_some()
        && list.iter().all(|c| {
            matches!(c, ColumnPredicate::ValueEquals { column, .. }
                if column.qualifier.is_none() && column.family == *first)
        })
}

/// `part = 'a' OR part = 'b'` as `part IN ('a', 'b')`.
fn parts_in(list: &[ColumnPredicate]) -> PartPredicate {
    let mut part = String::new();
    let values = list
        .iter()
        .map(|c| match c {
            ColumnPredicate::ValueEquals { column, value } => {
                part.clone_from(&column.family);
                KeyValue::Text(value.clone())
            }
            _ => unreachable!("key_part_list checked"),
        })
        .collect();
    PartPredicate {
        part,
        test: PartTest::In(values),
    }
}

fn value_test(s: &TableSchema, path: &str, cp: &ColumnPredicate) -> Result<ValuePredicate> {
    let (col, test) = match cp {
        ColumnPredicate::ValueEquals { column, value } => {
            (column, ValueTest::Equals(value.as_bytes().to_vec()))
        }
        ColumnPredicate::ValuePrefix { column, prefix } => {
            (column, ValueTest::Prefix(prefix.as_bytes().to_vec()))
        }
        ColumnPredicate::ValueRegexp { column, regex: re } => (
            column,
            ValueTest::Regex(regex(re, &format!("the predicate on '{column}'"))?),
        ),
        ColumnPredicate::Exists(column) => (column, ValueTest::Exists),
    };
    Ok(ValuePredicate {
        family: family_id(s, path, &col.family)?,
        qualifier: col.qualifier.as_ref().map(|q| q.as_bytes().to_vec()),
        test,
    })
}

/// The spec with the SELECT's options.
pub(super) fn with_options(mut spec: ScanSpec, o: &ast::SelectOptions) -> ScanSpec {
    spec.max_versions = o.max_versions.unwrap_or(0);
    spec.cell_limit_per_family = o.cell_limit_per_family.unwrap_or(0);
    spec.keys_only = o.keys_only;
    spec.return_deletes = o.return_deletes;
    spec.no_cache = o.no_cache;
    spec.row_limit = o.limit.unwrap_or(0);
    spec.row_offset = o.offset.unwrap_or(0);
    spec.cell_limit = o.cell_limit.unwrap_or(0);
    spec.cell_offset = o.cell_offset.unwrap_or(0);
    spec.iterators = o
        .iterators
        .iter()
        .map(|k| ScanIterator {
            kind: k.kind.clone(),
            options: k.options.clone(),
        })
        .collect();
    spec
}

/// Hypertable gives each row or cell interval its own scanner and runs them in the order they
/// are written, one after the other: results are concatenated, an overlap returns its cells
/// again, and the limits count per interval (HYPERTABLE-FORMATS.md §6). Intervals already in
/// order and disjoint (key sets) stay one scan, which returns the same cells.
pub(super) fn written_order(mut spec: ScanSpec) -> Vec<ScanSpec> {
    if spec.one_interval || spec.row_intervals.len() + spec.cell_intervals.len() < 2 {
        return vec![spec];
    }
    let rows: Intervals<Vec<u8>> = spec
        .row_intervals
        .iter()
        .map(|r| (r.start.clone(), r.end.clone()))
        .collect();
    let cells: Intervals<CellPos> = spec
        .cell_intervals
        .iter()
        .map(|c| (c.start.clone(), c.end.clone()))
        .collect();
    if (cells.is_empty() && sorted_disjoint(&rows)) || (rows.is_empty() && sorted_disjoint(&cells))
    {
        return vec![spec];
    }
    let row_intervals = std::mem::take(&mut spec.row_intervals);
    let cell_intervals = std::mem::take(&mut spec.cell_intervals);
    let one = |rows: Vec<RowInterval>, cells: Vec<CellInterval>| {
        let mut s = spec.clone_without_intervals();
        s.row_intervals = rows;
        s.cell_intervals = cells;
        s
    };
    row_intervals
        .into_iter()
        .map(|r| one(vec![r], Vec::new()))
        .chain(cell_intervals.into_iter().map(|c| one(Vec::new(), vec![c])))
        .collect()
}

/// SCAN_AND_FILTER_ROWS, as Hypertable runs it: the rows named one by one (point intervals)
/// are fetched by one scan that steps through them from the first to the last and keeps
/// theirs, counted as one interval by the limits; other row intervals come first, each its
/// own interval. Key-part predicates are one interval already and are stepped through.
pub(super) fn scan_and_filter_rows(mut spec: ScanSpec) -> Vec<ScanSpec> {
    if spec.one_interval {
        spec.scan_and_filter = spec.cell_intervals.is_empty();
        return vec![spec];
    }
    let is_point = |r: &RowInterval| matches!((&r.start, &r.end), (Bound::Included(a), Bound::Included(b)) if a == b);
    let (points, others): (Vec<RowInterval>, Vec<RowInterval>) =
        spec.row_intervals.drain(..).partition(is_point);
    if points.is_empty() {
        spec.row_intervals = others;
        return written_order(spec);
    }
    let mut out = Vec::new();
    if !others.is_empty() {
        let mut first = spec.clone_without_intervals();
        first.row_intervals = others;
        out.extend(written_order(first));
    }
    spec.row_intervals = points;
    spec.row_intervals.dedup_by(|a, b| a.start == b.start);
    spec.one_interval = true;
    spec.scan_and_filter = true;
    out.push(spec);
    out
}

/// A query with column value predicates on indexed families reads only the rows the index
/// names (`client::index::candidate_rows`), with every predicate still applied by the range
/// servers: the answer is the full scan's. Limits then count over all those rows, as Hypertable
/// applies them to an index query's whole result. `None`: no row can match. Without a usable
/// index (a predicate it cannot answer, CELL intervals, more candidate rows than a key set
/// may hold) the spec is returned as it was.
pub(super) fn use_index(
    ex: &Executor,
    path: &str,
    schema: &TableSchema,
    mut spec: ScanSpec,
) -> Result<Option<ScanSpec>> {
    let Some(vp) = &spec.value_predicates else {
        return Ok(Some(spec));
    };
    if !spec.cell_intervals.is_empty()
        || !(client::index::has_index(schema, false) || client::index::has_index(schema, true))
    {
        return Ok(Some(spec));
    }
    let Some(rows) = client::index::candidate_rows(
        ex.client.as_ref(),
        path,
        schema,
        &vp.tests,
        ex.key_set_limits.max_keys,
    )?
    else {
        return Ok(Some(spec));
    };
    let points: Intervals<Vec<u8>> = rows
        .into_iter()
        .map(|r| (Bound::Included(r.clone()), Bound::Included(r)))
        .collect();
    let current = (!spec.row_intervals.is_empty()).then(|| {
        spec.row_intervals
            .iter()
            .map(|r| (r.start.clone(), r.end.clone()))
            .collect()
    });
    let rows = and_intervals(current, points);
    if rows.is_empty() {
        return Ok(None);
    }
    spec.row_intervals = rows
        .into_iter()
        .map(|(start, end)| RowInterval { start, end })
        .collect();
    spec.one_interval = true;
    Ok(Some(spec))
}

pub(super) fn select(ex: &mut Executor, sel: &Select, out: &mut dyn Write) -> Result<u64> {
    let o = &sel.options;
    if o.offset.is_some() && o.cell_offset.is_some() {
        return Err(ExecError::with_hypertable(
            Code::HqlParseError,
            "SELECT OFFSET predicate not allowed in combination with CELL_OFFSET.",
            "OFFSET and CELL_OFFSET cannot be used together",
        ));
    }
    let path = ex.resolve(&sel.table);
    let schema = ex.client.table_schema(&path)?;
    let q = build_query(
        &schema,
        &path,
        &sel.columns,
        &sel.predicates,
        &ex.key_set_limits,
    )?;
    let format = CellFormat {
        timestamps: o.display_timestamps,
        revisions: o.display_revisions,
        keys_only: o.keys_only,
        escape: !o.no_escape,
        separator: o
            .field_separator
            .as_deref()
            .unwrap_or("\t")
            .as_bytes()
            .to_vec(),
        raw_timestamps: ex.raw_timestamps,
    };
    let spec = match q.spec {
        Some(spec) => use_index(ex, &path, &schema, with_options(spec, o))?,
        None => None,
    };
    let specs = match spec {
        Some(spec) if o.scan_and_filter_rows => scan_and_filter_rows(spec),
        Some(spec) => written_order(spec),
        None => Vec::new(),
    };
    let families = family_names(&schema);
    let mut file = match &o.into_file {
        Some(name) => {
            let mut f = FileSink::create(name)?;
            f.write_all(&format.header())?;
            Some(f)
        }
        None => None,
    };
    let cells = {
        let mut stdout_buf;
        let w: &mut dyn Write = match &mut file {
            Some(f) => f,
            None => {
                stdout_buf = BufWriter::with_capacity(1 << 16, &mut *out);
                &mut stdout_buf
            }
        };
        let mut n = 0u64;
        for spec in specs {
            let mut scanner = ex.client.scanner(&path, spec)?;
            while let Some(cell) = scanner.next_cell()? {
                write_cell(w, &format, &cell, &families)?;
                n += 1;
            }
        }
        w.flush()?;
        n
    };
    if let (Some(f), Some(name)) = (file, &o.into_file) {
        f.finish(name)?;
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use common::iterators::ValueTest;
    use common::scan_spec::QualifierMatch;

    use super::*;
    use crate::ast::Statement;

    fn query(schema: &TableSchema, hql: &str) -> Query {
        let Ok(Statement::Select(s)) = crate::parse_statement(hql) else {
            panic!("not a select: {hql}")
        };
        build_query(
            schema,
            "/t",
            &s.columns,
            &s.predicates,
            &KeySetLimits::default(),
        )
        .expect("query")
    }

    fn schema() -> TableSchema {
        let mut s = TableSchema::new(1, "/t");
        s.add_family("a");
        s.add_family("b");
        s
    }

    #[test]
    fn value_predicates_go_to_the_server_with_the_columns_to_show() {
        let s = schema();
        let q = query(
            &s,
            r#"SELECT a:x FROM t WHERE b:z = "6" OR a =^ "p" OR EXISTS(b)"#,
        );
        assert!(q.has_value_predicates);
        let spec = q.spec.expect("spec");
        // The predicates' families are read too; only the selected column is shown.
        let read: Vec<(u8, bool)> = spec
            .columns
            .iter()
            .map(|c| (c.family, matches!(c.qualifier, QualifierMatch::All)))
            .collect();
        assert_eq!(read, [(1, false), (1, true), (2, true)]);
        let vp = spec.value_predicates.expect("value predicates");
        assert_eq!(vp.output.len(), 1);
        assert_eq!(vp.output[0].family, 1);
        assert!(matches!(&vp.output[0].qualifier, QualifierMatch::Exact(q) if q == b"x"));
        assert_eq!(vp.tests.len(), 3);
        assert_eq!(vp.tests[0].family, 2);
        assert_eq!(vp.tests[0].qualifier.as_deref(), Some(&b"z"[..]));
        assert!(matches!(&vp.tests[0].test, ValueTest::Equals(v) if v == b"6"));
        assert_eq!(vp.tests[1].qualifier, None);
        assert!(matches!(&vp.tests[1].test, ValueTest::Prefix(p) if p == b"p"));
        assert!(matches!(vp.tests[2].test, ValueTest::Exists));
    }

    #[test]
    fn without_selected_columns_every_cell_read_is_shown() {
        let s = schema();
        let q = query(&s, r#"SELECT * FROM t WHERE REGEXP(a, "^[0-9]+$")"#);
        let spec = q.spec.expect("spec");
        assert!(spec.columns.is_empty());
        let vp = spec.value_predicates.expect("value predicates");
        assert!(vp.output.is_empty());
        assert!(matches!(&vp.tests[0].test, ValueTest::Regex(r) if r.is_match(b"42")));
        let q = query(&s, r#"SELECT * FROM t WHERE ROW = "r""#);
        assert!(!q.has_value_predicates);
        assert!(q.spec.expect("spec").value_predicates.is_none());
    }
}
