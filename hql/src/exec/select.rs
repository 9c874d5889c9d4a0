//! SELECT: WHERE predicates and options to a [`ScanSpec`], and the scan's cells to the output,
//! streamed cell by cell through a buffer so that memory stays bounded.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufWriter, Write};
use std::ops::Bound;

use common::scan_spec::{
    CellInterval, CellPos, ColumnSelector, QualifierMatch, RowInterval, prefix_successor,
};
use common::{Cell, ScanSpec, TableSchema};
use regex::bytes::Regex;

use super::output::{CellFormat, FileSink, family_names, write_cell};
use super::{ExecError, Executor, Result};
use crate::ast::{self, ColumnPredicate, ColumnRef, Columns, Predicate, RelOp, Select};

/// A set of intervals as (start, end) bounds.
type Intervals<T> = Vec<(Bound<T>, Bound<T>)>;

/// A scan to run: the spec, or `None` when the predicates select nothing at all.
pub(super) struct Query {
    pub spec: Option<ScanSpec>,
    /// Column value predicates (ORed), applied per row here.
    pub filter: ValueFilter,
    /// The families the user selected (empty: all), when predicates widened the scan.
    pub output_columns: Vec<ColumnSelector>,
}

/// The column value predicates of a query (ORed), resolved into sets so that a cell is judged
/// in about constant time however many predicates there are: exact values in a hash set,
/// prefixes in a sorted prefix-free set, per family and qualifier.
#[derive(Default)]
pub(super) struct ValueFilter {
    families: HashMap<u8, FamilyTests>,
}

/// The tests on one family: those on any qualifier and those on one qualifier.
#[derive(Default)]
struct FamilyTests {
    any_qualifier: ValueTests,
    by_qualifier: HashMap<Vec<u8>, ValueTests>,
}

/// Value tests, any of which may match.
#[derive(Default)]
struct ValueTests {
    exists: bool,
    exact: HashSet<Vec<u8>>,
    /// No member starts with another, so the only member that can be a prefix of a value is
    /// the greatest one not above it.
    prefixes: BTreeSet<Vec<u8>>,
    regexes: Vec<Regex>,
}

enum ValueTest {
    Equals(Vec<u8>),
    Prefix(Vec<u8>),
    Regex(Regex),
    Exists,
}

impl ValueTests {
    fn add(&mut self, test: ValueTest) {
        match test {
            ValueTest::Exists => self.exists = true,
            ValueTest::Equals(v) => {
                self.exact.insert(v);
            }
            ValueTest::Regex(r) => self.regexes.push(r),
            ValueTest::Prefix(p) => {
                if self.has_prefix_of(&p) {
                    return;
                }
                // Longer prefixes that `p` covers go: the set stays prefix-free.
                let covered: Vec<Vec<u8>> = self
                    .prefixes
                    .range::<[u8], _>((Bound::Included(p.as_slice()), Bound::Unbounded))
                    .take_while(|q| q.starts_with(&p))
                    .cloned()
                    .collect();
                for q in covered {
                    self.prefixes.remove(&q);
                }
                self.prefixes.insert(p);
            }
        }
    }

    fn has_prefix_of(&self, v: &[u8]) -> bool {
        self.prefixes
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(v)))
            .next_back()
            .is_some_and(|p| v.starts_with(p))
    }

    fn matches(&self, v: &[u8]) -> bool {
        self.exists
            || self.exact.contains(v)
            || self.has_prefix_of(v)
            || self.regexes.iter().any(|r| r.is_match(v))
    }
}

impl ValueFilter {
    fn add(&mut self, family: u8, qualifier: Option<Vec<u8>>, test: ValueTest) {
        let f = self.families.entry(family).or_default();
        match qualifier {
            None => f.any_qualifier.add(test),
            Some(q) => f.by_qualifier.entry(q).or_default().add(test),
        }
    }

    /// True when there are no predicates.
    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }

    /// The families the predicates test, in id order.
    fn families(&self) -> Vec<u8> {
        let mut f: Vec<u8> = self.families.keys().copied().collect();
        f.sort_unstable();
        f
    }

    fn matches(&self, c: &Cell) -> bool {
        if c.key.flag.is_delete() {
            return false;
        }
        let Some(f) = self.families.get(&c.key.family) else {
            return false;
        };
        f.any_qualifier.matches(&c.value)
            || f.by_qualifier
                .get(c.key.qualifier.as_slice())
                .is_some_and(|t| t.matches(&c.value))
    }
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
        ExecError::invalid(format!(
            "column family '{name}' does not exist in table '{path}'"
        ))
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

/// ANDs a new OR-list into the current set of intervals (`None`: no constraint yet).
fn and_intervals<T: Clone + Ord>(current: Option<Intervals<T>>, new: Intervals<T>) -> Intervals<T> {
    let Some(cur) = current else {
        return new.into_iter().filter(|(s, e)| !is_empty(s, e)).collect();
    };
    let mut out = Vec::new();
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
    ts.nanos
        .ok_or_else(|| ExecError::invalid(format!("bad timestamp '{}'", ts.text)))
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
            return Err(ExecError::invalid(
                "=^ cannot be used with TIMESTAMP".to_string(),
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
) -> Result<Query> {
    let mut spec = ScanSpec {
        columns: column_selectors(s, path, columns)?,
        ..ScanSpec::default()
    };
    let mut rows: Option<Intervals<Vec<u8>>> = None;
    let mut cells: Option<Intervals<CellPos>> = None;
    let mut filter = ValueFilter::default();
    for p in preds {
        match p {
            Predicate::Row(list) => {
                let new = list
                    .iter()
                    .map(|r| {
                        let i = row_interval(r);
                        (i.start, i.end)
                    })
                    .collect();
                rows = Some(and_intervals(rows, new));
            }
            Predicate::Cell(list) => {
                let new = list
                    .iter()
                    .map(|c| cell_interval(s, path, c).map(|i| (i.start, i.end)))
                    .collect::<Result<Vec<_>>>()?;
                cells = Some(and_intervals(cells, new));
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
                if !filter.is_empty() {
                    return Err(ExecError::invalid(
                        "only one group of column value predicates (ORed) is supported",
                    ));
                }
                for cp in list {
                    add_value_test(&mut filter, s, path, cp)?;
                }
            }
        }
    }
    if rows.is_some() && cells.is_some() {
        return Err(ExecError::invalid(
            "ROW and CELL predicates cannot be combined in one query",
        ));
    }
    let mut output_columns = Vec::new();
    if !filter.is_empty() && !spec.columns.is_empty() {
        // The predicates' families must be read even when they are not displayed.
        output_columns = spec.columns.clone();
        for family in filter.families() {
            spec.columns.push(ColumnSelector {
                family,
                qualifier: QualifierMatch::All,
            });
        }
    }
    let nothing = matches!(&rows, Some(r) if r.is_empty())
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
        filter,
        output_columns,
    })
}

fn add_value_test(
    filter: &mut ValueFilter,
    s: &TableSchema,
    path: &str,
    cp: &ColumnPredicate,
) -> Result<()> {
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
    let family = family_id(s, path, &col.family)?;
    let qualifier = col.qualifier.as_ref().map(|q| q.as_bytes().to_vec());
    filter.add(family, qualifier, test);
    Ok(())
}

/// Limits applied here instead of in the scan, when rows are filtered by value predicates.
#[derive(Default)]
struct LocalLimits {
    row_limit: u64,
    row_offset: u64,
    cell_limit: u64,
    cell_offset: u64,
    rows_seen: u64,
    cells_seen: u64,
    cells_out: u64,
}

pub(super) fn select(ex: &mut Executor, sel: &Select, out: &mut dyn Write) -> Result<u64> {
    let o = &sel.options;
    if o.offset.is_some() && o.cell_offset.is_some() {
        return Err(ExecError::invalid(
            "OFFSET and CELL_OFFSET cannot be used together",
        ));
    }
    let path = ex.resolve(&sel.table);
    let schema = ex.client.table_schema(&path)?;
    let q = build_query(&schema, &path, &sel.columns, &sel.predicates)?;
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
    };
    let mut limits = LocalLimits::default();
    let spec = q.spec.map(|mut spec| {
        spec.max_versions = o.max_versions.unwrap_or(0);
        spec.cell_limit_per_family = o.cell_limit_per_family.unwrap_or(0);
        spec.keys_only = o.keys_only && q.filter.is_empty();
        spec.return_deletes = o.return_deletes;
        spec.no_cache = o.no_cache;
        let (rl, ro, cl, co) = (
            o.limit.unwrap_or(0),
            o.offset.unwrap_or(0),
            o.cell_limit.unwrap_or(0),
            o.cell_offset.unwrap_or(0),
        );
        if q.filter.is_empty() {
            (spec.row_limit, spec.row_offset) = (rl, ro);
            (spec.cell_limit, spec.cell_offset) = (cl, co);
        } else {
            (limits.row_limit, limits.row_offset) = (rl, ro);
            (limits.cell_limit, limits.cell_offset) = (cl, co);
        }
        spec
    });
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
        let n = match spec {
            None => 0,
            Some(spec) => {
                let mut scanner = ex.client.scanner(&path, spec)?;
                if q.filter.is_empty() {
                    let mut n = 0u64;
                    while let Some(cell) = scanner.next_cell()? {
                        write_cell(w, &format, &cell, &families)?;
                        n += 1;
                    }
                    n
                } else {
                    let mut row: Vec<Cell> = Vec::new();
                    while let Some(cell) = scanner.next_cell()? {
                        if row.first().is_some_and(|c| c.key.row != cell.key.row) {
                            emit_row(
                                w,
                                &format,
                                &families,
                                &q.filter,
                                &q.output_columns,
                                &row,
                                &mut limits,
                            )?;
                            row.clear();
                        }
                        row.push(cell);
                    }
                    emit_row(
                        w,
                        &format,
                        &families,
                        &q.filter,
                        &q.output_columns,
                        &row,
                        &mut limits,
                    )?;
                    limits.cells_out
                }
            }
        };
        w.flush()?;
        n
    };
    if let (Some(f), Some(name)) = (file, &o.into_file) {
        f.finish(name)?;
    }
    Ok(cells)
}

/// Writes the cells of one row if any cell matches a value predicate.
fn emit_row(
    w: &mut dyn Write,
    format: &CellFormat,
    families: &[Option<String>],
    filter: &ValueFilter,
    output_columns: &[ColumnSelector],
    row: &[Cell],
    limits: &mut LocalLimits,
) -> Result<()> {
    if row.is_empty() || !row.iter().any(|c| filter.matches(c)) {
        return Ok(());
    }
    limits.rows_seen += 1;
    if limits.rows_seen <= limits.row_offset {
        return Ok(());
    }
    if limits.row_limit > 0 && limits.rows_seen - limits.row_offset > limits.row_limit {
        return Ok(());
    }
    for c in row {
        let shown = output_columns.is_empty()
            || output_columns
                .iter()
                .any(|s| s.family == c.key.family && s.qualifier.matches(&c.key.qualifier));
        if !shown {
            continue;
        }
        limits.cells_seen += 1;
        if limits.cells_seen <= limits.cell_offset {
            continue;
        }
        if limits.cell_limit > 0 && limits.cells_out >= limits.cell_limit {
            return Ok(());
        }
        write_cell(w, format, c, families)?;
        limits.cells_out += 1;
    }
    Ok(())
}
