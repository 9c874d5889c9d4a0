//! Row iterators, scan-only: `whole_row`, `first_in_row`, `count_cells`, and the filter of
//! column value predicates (HQL `cf = "v"`, ...). Each reads its source one row at a time and
//! holds the budget while inside a row, so a scan yields only between rows.
//!
//! A seek that starts inside a row skips to the next row for the registered kinds (the row
//! before was, or will be, returned whole by the seek that started at its beginning: Accumulo's
//! `WholeRowIterator` rule, which makes re-seeking from a returned key safe). The value
//! predicate filter judges the part of the row it is given instead, as a cell interval asks.

use std::collections::VecDeque;

use common::TableSchema;
use common::iterators::{ValuePredicates, ValueTest};
use common::key::KeyRef;

use super::filters::known_options;
use super::{Budget, Families, IterEnv, IterOptions, IterScope, IteratorKind, KvIter, SeekRange};
use crate::error::{Error, Result};
use crate::scan::visible::row_prefix_len;

/// Most cells `whole_row` holds of one row unless `MAX_CELLS` says otherwise.
pub const DEFAULT_MAX_ROW_CELLS: usize = 100_000;
/// Most bytes of one row the value predicate filter holds.
pub const MAX_PREDICATE_ROW_BYTES: usize = 64 << 20;

/// What a row iterator does with each row.
pub trait RowLogic: Send {
    /// A fresh copy with no state (for deep copies).
    fn fresh(&self) -> Box<dyn RowLogic>;
    /// True if a seek starting inside a row skips to the next row.
    fn whole_rows_only(&self) -> bool {
        true
    }
    /// A new row begins.
    fn begin(&mut self);
    /// One cell of the row, in order; `Ok(false)` when the rest of the row is not needed.
    fn cell(&mut self, key: &[u8], value: &[u8]) -> Result<bool>;
    /// The row ended; `complete` is false when the seek range cut it. Output goes to `out` in
    /// key order.
    fn end(&mut self, complete: bool, out: &mut VecDeque<(Vec<u8>, Vec<u8>)>);
}

/// A stack entry running a [`RowLogic`] over its source.
pub struct RowIter {
    src: Box<dyn KvIter>,
    logic: Box<dyn RowLogic>,
    budget: Budget,
    range: SeekRange,
    families: Families,
    out: VecDeque<(Vec<u8>, Vec<u8>)>,
    yielded: Option<Vec<u8>>,
    /// Where the source stopped when it last yielded. The source yields only while this
    /// iterator seeks it (inside a row the budget is held), so none of that row's cells before
    /// this key passed the source: a seek back to exactly this key goes on in that row rather
    /// than skipping to the next.
    resume_at: Option<Vec<u8>>,
}

impl RowIter {
    pub fn new(src: Box<dyn KvIter>, logic: Box<dyn RowLogic>, budget: Budget) -> Self {
        Self {
            src,
            logic,
            budget,
            range: SeekRange::all(),
            families: Families::all(),
            out: VecDeque::new(),
            yielded: None,
            resume_at: None,
        }
    }

    fn fill(&mut self) -> Result<()> {
        while self.out.is_empty() {
            if !self.src.valid() {
                self.yielded = self.src.yielded().map(<[u8]>::to_vec);
                self.resume_at = self.yielded.clone();
                return Ok(());
            }
            let row = {
                let k = KeyRef::from_trusted(self.src.key())?;
                k.row_prefix().to_vec()
            };
            self.budget.hold();
            let r = self.read_row(&row);
            self.budget.release();
            let complete = r?;
            self.logic.end(complete, &mut self.out);
        }
        Ok(())
    }

    /// Feeds the row's cells to the logic; true if the row was read to its end.
    fn read_row(&mut self, row: &[u8]) -> Result<bool> {
        self.logic.begin();
        let mut want = true;
        while self.src.valid() && self.src.key().starts_with(row) {
            if !want {
                // The logic needs no more of this row: go past it.
                let mut end = row.to_vec();
                let n = end.len();
                end[n - 1] = 2;
                let r = SeekRange::new(end, self.range.end.clone());
                self.src.seek(&r, &self.families)?;
                return Ok(true);
            }
            want = self.logic.cell(self.src.key(), self.src.value())?;
            self.src.next()?;
        }
        // The row is cut when the range ends inside it.
        let cut = self
            .range
            .end
            .as_deref()
            .is_some_and(|e| e.starts_with(row) && e.len() > row.len());
        Ok(!cut)
    }
}

impl KvIter for RowIter {
    fn seek(&mut self, range: &SeekRange, families: &Families) -> Result<()> {
        self.out.clear();
        self.yielded = None;
        self.range = range.clone();
        self.families = *families;
        let mut r = range.clone();
        let resuming = self.resume_at.take().is_some_and(|k| k == range.start);
        if self.logic.whole_rows_only() && !resuming {
            let n = row_prefix_len(&r.start);
            if n >= 2 && r.start.len() > n {
                // Inside a row: start at the next one.
                r.start.truncate(n);
                r.start[n - 1] = 2;
            }
        }
        self.src.seek(&r, families)?;
        self.fill()
    }
    fn valid(&self) -> bool {
        !self.out.is_empty()
    }
    fn key(&self) -> &[u8] {
        &self.out.front().expect("valid").0
    }
    fn value(&self) -> &[u8] {
        &self.out.front().expect("valid").1
    }
    fn next(&mut self) -> Result<()> {
        self.out.pop_front();
        self.fill()
    }
    fn deep_copy(&self) -> Result<Box<dyn KvIter>> {
        Ok(Box::new(RowIter::new(
            self.src.deep_copy()?,
            self.logic.fresh(),
            self.budget.clone(),
        )))
    }
    fn yielded(&self) -> Option<&[u8]> {
        if self.out.is_empty() {
            self.yielded.as_deref()
        } else {
            None
        }
    }
}

const SCAN_ONLY: [IterScope; 1] = [IterScope::Scan];

fn bad(kind: &str, e: String) -> Error {
    Error::InvalidInput(format!("iterator kind {kind}: {e}"))
}

// ---- whole_row ----

/// `whole_row(MAX_CELLS = n)`: each row's cells, but only rows that lie wholly in the range.
pub struct WholeRowKind;

fn max_cells(o: &IterOptions) -> std::result::Result<usize, String> {
    known_options(o, &["MAX_CELLS"])?;
    match o.get("MAX_CELLS") {
        None => Ok(DEFAULT_MAX_ROW_CELLS),
        Some(s) => s
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0 && n <= 10_000_000)
            .ok_or_else(|| format!("option MAX_CELLS: {s:?} is not a number from 1 to 10000000")),
    }
}

impl IteratorKind for WholeRowKind {
    fn name(&self) -> &str {
        "whole_row"
    }
    fn scopes(&self) -> &[IterScope] {
        &SCAN_ONLY
    }
    fn validate(&self, o: &IterOptions, _: &TableSchema) -> std::result::Result<(), String> {
        max_cells(o).map(|_| ())
    }
    fn build(
        &self,
        src: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        let max = max_cells(o).map_err(|e| bad("whole_row", e))?;
        Ok(Box::new(RowIter::new(
            src,
            Box::new(WholeRow {
                max,
                cells: Vec::new(),
            }),
            env.budget.clone(),
        )))
    }
}

struct WholeRow {
    max: usize,
    cells: Vec<(Vec<u8>, Vec<u8>)>,
}

impl RowLogic for WholeRow {
    fn fresh(&self) -> Box<dyn RowLogic> {
        Box::new(WholeRow {
            max: self.max,
            cells: Vec::new(),
        })
    }
    fn begin(&mut self) {
        self.cells.clear();
    }
    fn cell(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        if self.cells.len() >= self.max {
            let row = KeyRef::from_trusted(key)
                .map(|k| k.row().into_owned())
                .unwrap_or_default();
            return Err(Error::InvalidInput(format!(
                "whole_row: row {:?} has more than {} cells (raise MAX_CELLS)",
                String::from_utf8_lossy(&row),
                self.max
            )));
        }
        self.cells.push((key.to_vec(), value.to_vec()));
        Ok(true)
    }
    fn end(&mut self, complete: bool, out: &mut VecDeque<(Vec<u8>, Vec<u8>)>) {
        if complete {
            out.extend(self.cells.drain(..));
        } else {
            self.cells.clear();
        }
    }
}

// ---- first_in_row, count_cells ----

/// `first_in_row`: the first cell of each row.
pub struct FirstInRowKind;

impl IteratorKind for FirstInRowKind {
    fn name(&self) -> &str {
        "first_in_row"
    }
    fn scopes(&self) -> &[IterScope] {
        &SCAN_ONLY
    }
    fn validate(&self, o: &IterOptions, _: &TableSchema) -> std::result::Result<(), String> {
        known_options(o, &[])
    }
    fn build(
        &self,
        src: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        known_options(o, &[]).map_err(|e| bad("first_in_row", e))?;
        Ok(Box::new(RowIter::new(
            src,
            Box::new(FirstInRow(None)),
            env.budget.clone(),
        )))
    }
}

struct FirstInRow(Option<(Vec<u8>, Vec<u8>)>);

impl RowLogic for FirstInRow {
    fn fresh(&self) -> Box<dyn RowLogic> {
        Box::new(FirstInRow(None))
    }
    fn begin(&mut self) {
        self.0 = None;
    }
    fn cell(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.0 = Some((key.to_vec(), value.to_vec()));
        Ok(false)
    }
    fn end(&mut self, _complete: bool, out: &mut VecDeque<(Vec<u8>, Vec<u8>)>) {
        out.extend(self.0.take());
    }
}

/// `count_cells`: one cell per row, the key of its first cell and the row's cell count as
/// decimal text.
pub struct CountCellsKind;

impl IteratorKind for CountCellsKind {
    fn name(&self) -> &str {
        "count_cells"
    }
    fn scopes(&self) -> &[IterScope] {
        &SCAN_ONLY
    }
    fn validate(&self, o: &IterOptions, _: &TableSchema) -> std::result::Result<(), String> {
        known_options(o, &[])
    }
    fn build(
        &self,
        src: Box<dyn KvIter>,
        o: &IterOptions,
        env: &IterEnv,
    ) -> Result<Box<dyn KvIter>> {
        known_options(o, &[]).map_err(|e| bad("count_cells", e))?;
        Ok(Box::new(RowIter::new(
            src,
            Box::new(CountCells { first: None, n: 0 }),
            env.budget.clone(),
        )))
    }
}

struct CountCells {
    first: Option<Vec<u8>>,
    n: u64,
}

impl RowLogic for CountCells {
    fn fresh(&self) -> Box<dyn RowLogic> {
        Box::new(CountCells { first: None, n: 0 })
    }
    fn begin(&mut self) {
        self.first = None;
        self.n = 0;
    }
    fn cell(&mut self, key: &[u8], _value: &[u8]) -> Result<bool> {
        if self.first.is_none() {
            self.first = Some(key.to_vec());
        }
        self.n += 1;
        Ok(true)
    }
    fn end(&mut self, _complete: bool, out: &mut VecDeque<(Vec<u8>, Vec<u8>)>) {
        if let Some(k) = self.first.take() {
            out.push_back((k, self.n.to_string().into_bytes()));
        }
    }
}

// ---- column value predicates ----

/// The filter of HQL's column value predicates (see `common::iterators::ValuePredicates`).
pub struct ValuePredicateRows {
    preds: ValuePredicates,
    cells: Vec<(Vec<u8>, Vec<u8>)>,
    bytes: usize,
    matched: bool,
}

impl ValuePredicateRows {
    /// The filter over `src`.
    pub fn build(src: Box<dyn KvIter>, preds: ValuePredicates, budget: Budget) -> Box<dyn KvIter> {
        Box::new(RowIter::new(
            src,
            Box::new(ValuePredicateRows {
                preds,
                cells: Vec::new(),
                bytes: 0,
                matched: false,
            }),
            budget,
        ))
    }

    fn matches(&self, k: &KeyRef<'_>, v: &[u8]) -> bool {
        if k.flag().is_delete() {
            return false;
        }
        self.preds.tests.iter().any(|t| {
            t.family == k.family()
                && t.qualifier.as_deref().is_none_or(|q| q == &*k.qualifier())
                && match &t.test {
                    ValueTest::Exists => true,
                    ValueTest::Equals(e) => v == e.as_slice(),
                    ValueTest::Prefix(p) => v.starts_with(p),
                    ValueTest::Regex(r) => r.is_match(v),
                }
        })
    }

    fn shown(&self, k: &KeyRef<'_>) -> bool {
        self.preds.output.is_empty()
            || self
                .preds
                .output
                .iter()
                .any(|s| s.family == k.family() && s.qualifier.matches(&k.qualifier()))
    }
}

impl RowLogic for ValuePredicateRows {
    fn fresh(&self) -> Box<dyn RowLogic> {
        Box::new(ValuePredicateRows {
            preds: self.preds.clone(),
            cells: Vec::new(),
            bytes: 0,
            matched: false,
        })
    }
    fn whole_rows_only(&self) -> bool {
        false
    }
    fn begin(&mut self) {
        self.cells.clear();
        self.bytes = 0;
        self.matched = false;
    }
    fn cell(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let k = KeyRef::from_trusted(key)?;
        if !self.matched && self.matches(&k, value) {
            self.matched = true;
        }
        if self.shown(&k) {
            self.bytes += key.len() + value.len();
            if self.bytes > MAX_PREDICATE_ROW_BYTES {
                return Err(Error::InvalidInput(format!(
                    "row {:?} holds more than {MAX_PREDICATE_ROW_BYTES} bytes in the columns \
                     a value predicate query returns; select fewer columns",
                    String::from_utf8_lossy(&k.row())
                )));
            }
            self.cells.push((key.to_vec(), value.to_vec()));
        }
        Ok(true)
    }
    fn end(&mut self, _complete: bool, out: &mut VecDeque<(Vec<u8>, Vec<u8>)>) {
        if self.matched {
            out.extend(self.cells.drain(..));
        } else {
            self.cells.clear();
        }
    }
}
