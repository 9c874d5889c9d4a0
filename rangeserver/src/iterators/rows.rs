//! Row iterators, scan-only: `whole_row`, `first_in_row`, `count_cells`, and the filter of
//! column value predicates (HQL `cf = "v"`, ...). Each reads its source one row at a time and
//! holds the budget while inside a row, so a scan yields only between rows.
//!
//! A seek that starts inside a row skips to the next row for the registered kinds (the row
//! before was, or will be, returned whole by the seek that started at its beginning: Accumulo's
//! `WholeRowIterator` rule, which makes re-seeking from a returned key safe). The value
//! predicate filter judges the part of the row it is given instead, as a cell interval asks.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

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
    /// The range this iterator last sought its source to (a buffer kept from seek to seek).
    src_range: SeekRange,
    families: Families,
    out: VecDeque<(Vec<u8>, Vec<u8>)>,
    yielded: Option<Vec<u8>>,
    /// Where the source stopped when it last yielded. The source yields only while this
    /// iterator seeks it (inside a row the budget is held), so none of that row's cells before
    /// this key passed the source: a seek back to exactly this key goes on in that row rather
    /// than skipping to the next.
    resume_at: Option<Vec<u8>>,
    /// The current row's encoded prefix (a buffer kept from row to row).
    row: Vec<u8>,
    /// The budget is held for output not yet consumed.
    holding: bool,
}

impl Drop for RowIter {
    fn drop(&mut self) {
        self.stop_holding();
    }
}

impl RowIter {
    fn stop_holding(&mut self) {
        if self.holding {
            self.holding = false;
            self.budget.release();
        }
    }

    pub fn new(src: Box<dyn KvIter>, logic: Box<dyn RowLogic>, budget: Budget) -> Self {
        Self {
            src,
            logic,
            budget,
            range: SeekRange::all(),
            src_range: SeekRange::all(),
            families: Families::all(),
            out: VecDeque::new(),
            yielded: None,
            resume_at: None,
            row: Vec::new(),
            holding: false,
        }
    }

    fn fill(&mut self) -> Result<()> {
        while self.out.is_empty() {
            if !self.src.valid() {
                self.yielded = self.src.yielded().map(<[u8]>::to_vec);
                self.resume_at = self.yielded.clone();
                return Ok(());
            }
            let mut row = std::mem::take(&mut self.row);
            row.clear();
            row.extend_from_slice(KeyRef::from_trusted(self.src.key())?.row_prefix());
            self.budget.hold();
            let r = self.read_row(&row);
            self.row = row;
            let complete = match r {
                Ok(c) => c,
                Err(e) => {
                    self.budget.release();
                    return Err(e);
                }
            };
            self.logic.end(complete, &mut self.out);
            if self.out.is_empty() {
                self.budget.release();
            } else {
                // Held until the row's output is consumed, so a filter above cannot yield in
                // the middle of it either (a seek back there would skip the row's rest).
                self.holding = true;
            }
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
                let r = &mut self.src_range;
                r.start.clear();
                r.start.extend_from_slice(row);
                let n = r.start.len();
                r.start[n - 1] = 2;
                r.end.clone_from(&self.range.end);
                self.src.seek(&self.src_range, &self.families)?;
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
        self.stop_holding();
        self.yielded = None;
        self.range.clone_from(range);
        self.families = *families;
        let r = &mut self.src_range;
        r.clone_from(range);
        let resuming = self.resume_at.take().is_some_and(|k| k == range.start);
        if self.logic.whole_rows_only() && !resuming {
            let n = row_prefix_len(&r.start);
            if n >= 2 && r.start.len() > n {
                // Inside a row: start at the next one.
                r.start.truncate(n);
                r.start[n - 1] = 2;
            }
        }
        self.src.seek(&self.src_range, families)?;
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
        if self.out.is_empty() {
            self.stop_holding();
        }
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

/// Up to this many exact values are compared one by one rather than hashed.
const FEW_EXACT: usize = 8;

/// Value tests, any of which may match, resolved so that a cell is judged in about constant
/// time however many tests there are: exact values in a hash set (a few compared directly),
/// prefixes in a prefix-free sorted set (the only member that can prefix a value is the
/// greatest one not above it).
#[derive(Default)]
struct ValueTests {
    exists: bool,
    exact: HashSet<Vec<u8>>,
    prefixes: BTreeSet<Vec<u8>>,
    regexes: Vec<regex::bytes::Regex>,
}

impl ValueTests {
    fn add(&mut self, test: &ValueTest) {
        match test {
            ValueTest::Exists => self.exists = true,
            ValueTest::Equals(v) => {
                self.exact.insert(v.clone());
            }
            ValueTest::Regex(r) => self.regexes.push(r.clone()),
            ValueTest::Prefix(p) => {
                if self.has_prefix_of(p) {
                    return;
                }
                // Longer prefixes that `p` covers go: the set stays prefix-free.
                let covered: Vec<Vec<u8>> = self
                    .prefixes
                    .range::<[u8], _>((Bound::Included(p.as_slice()), Bound::Unbounded))
                    .take_while(|q| q.starts_with(p))
                    .cloned()
                    .collect();
                for q in covered {
                    self.prefixes.remove(&q);
                }
                self.prefixes.insert(p.clone());
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
            || self.is_exact(v)
            || (!self.prefixes.is_empty() && self.has_prefix_of(v))
            || self.regexes.iter().any(|r| r.is_match(v))
    }

    /// A few exact values are compared directly (a length check rules out most values without
    /// reading them); many go through the hash set.
    fn is_exact(&self, v: &[u8]) -> bool {
        if self.exact.len() <= FEW_EXACT {
            self.exact.iter().any(|e| e.as_slice() == v)
        } else {
            self.exact.contains(v)
        }
    }
}

/// The tests on one family: those on any qualifier and those on one qualifier.
#[derive(Default)]
struct FamilyTests {
    any_qualifier: ValueTests,
    by_qualifier: HashMap<Vec<u8>, ValueTests>,
}

/// The tests of a scan's value predicates, resolved per family: a cell matches if any test
/// on its family (and qualifier) does. Cheap to clone.
#[derive(Clone)]
pub struct PredicateTests {
    /// Per family id.
    by_family: Arc<Vec<Option<FamilyTests>>>,
}

impl PredicateTests {
    pub fn new(preds: &ValuePredicates) -> Self {
        let mut tests: Vec<Option<FamilyTests>> = (0..256).map(|_| None).collect();
        for t in &preds.tests {
            let f = tests[t.family as usize].get_or_insert_with(FamilyTests::default);
            match &t.qualifier {
                None => f.any_qualifier.add(&t.test),
                Some(q) => f.by_qualifier.entry(q.clone()).or_default().add(&t.test),
            }
        }
        Self {
            by_family: Arc::new(tests),
        }
    }

    /// The families some test names.
    pub fn families(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=255u8).filter(|&f| self.by_family[f as usize].is_some())
    }

    /// True if the cell passes a test (deletes never do).
    pub fn matches(&self, k: &KeyRef<'_>, v: &[u8]) -> bool {
        if k.flag().is_delete() {
            return false;
        }
        let Some(f) = &self.by_family[k.family() as usize] else {
            return false;
        };
        f.any_qualifier.matches(v)
            || (!f.by_qualifier.is_empty()
                && f.by_qualifier
                    .get(&*k.qualifier())
                    .is_some_and(|t| t.matches(v)))
    }
}

/// The filter of HQL's column value predicates (see `common::iterators::ValuePredicates`).
pub struct ValuePredicateRows {
    preds: ValuePredicates,
    tests: PredicateTests,
    /// Buffers for the current row's shown cells; the first `used` hold them.
    cells: Vec<(Vec<u8>, Vec<u8>)>,
    used: usize,
    bytes: usize,
    matched: bool,
}

impl ValuePredicateRows {
    /// The filter over `src`.
    /// The filter over `src`; `tests` are `preds`' tests ([`PredicateTests::new`]), resolved
    /// once per scan.
    pub fn build(
        src: Box<dyn KvIter>,
        preds: ValuePredicates,
        tests: PredicateTests,
        budget: Budget,
    ) -> Box<dyn KvIter> {
        Box::new(RowIter::new(
            src,
            Box::new(ValuePredicateRows {
                tests,
                preds,
                cells: Vec::new(),
                used: 0,
                bytes: 0,
                matched: false,
            }),
            budget,
        ))
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
            tests: self.tests.clone(),
            cells: Vec::new(),
            used: 0,
            bytes: 0,
            matched: false,
        })
    }
    fn whole_rows_only(&self) -> bool {
        false
    }
    fn begin(&mut self) {
        self.used = 0;
        self.bytes = 0;
        self.matched = false;
    }
    fn cell(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let k = KeyRef::from_trusted(key)?;
        if !self.matched && self.tests.matches(&k, value) {
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
            // The row's buffers are reused from row to row: a row that does not match costs
            // no allocation.
            if self.used == self.cells.len() {
                self.cells.push((Vec::new(), Vec::new()));
            }
            let (k2, v2) = &mut self.cells[self.used];
            k2.clear();
            k2.extend_from_slice(key);
            v2.clear();
            v2.extend_from_slice(value);
            self.used += 1;
        }
        Ok(true)
    }
    fn end(&mut self, _complete: bool, out: &mut VecDeque<(Vec<u8>, Vec<u8>)>) {
        if self.matched {
            out.extend(self.cells[..self.used].iter().cloned());
        }
        self.used = 0;
        // Keep the buffers of ordinary rows, not of a huge one.
        if self.cells.len() > 1024 {
            self.cells.truncate(1024);
        }
    }
}
