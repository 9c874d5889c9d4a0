//! Scanning: the request ([`spec::ScanSpec`]), the per-access-group visibility rules
//! ([`visible::VisibleCells`]) and the query's own predicates and limits ([`SpecFilter`]).

/// The scan request types, defined in `common` so clients and servers share them.
pub mod spec {
    pub use common::scan_spec::*;
}
pub mod aggregate;
pub mod candidates;
pub mod visible;

use common::key::{self, KeyRef};
use common::row_key::{Navigate, RowSkip};

use crate::error::{Error, Result};
use crate::iterators::SeekRange;
use spec::{CellInterval, RowInterval, ScanSpec};

/// What [`SpecFilter`] reads: a cursor seeked to key ranges, which may stop early with a key to
/// resume from when its iterators ran out of work budget.
pub trait ScanSource: Send {
    fn seek(&mut self, range: &SeekRange) -> Result<()>;
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    fn next(&mut self) -> Result<()>;
    /// See [`crate::iterators::KvIter::yielded`].
    fn yielded(&self) -> Option<&[u8]>;
}

/// One interval of a scan, with the key to seek to at its start.
#[derive(Debug, Clone, Copy)]
enum Interval<'a> {
    Rows(&'a RowInterval),
    Cells(&'a CellInterval),
}

impl Interval<'_> {
    fn start_key(&self) -> Vec<u8> {
        match self {
            Self::Rows(r) => r.start_key(),
            Self::Cells(c) => c.start_key(),
        }
    }

    /// The encoded key at or after which a cell lies beyond the end of the interval.
    fn end_key(&self) -> Option<Vec<u8>> {
        match self {
            Self::Rows(r) => r.end_key(),
            Self::Cells(c) => c.end_key(),
        }
    }
}

/// Intervals as (start key, end key), in start-key order (`None`: unbounded).
type KeyBounds = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Applies a scan's intervals, regexes and limits to a cursor of visible cells.
pub struct SpecFilter<I: ScanSource> {
    src: I,
    /// Intervals as (start key, end key), in start-key order: bounds compared bytewise with
    /// encoded keys, so no key is decoded to test them.
    intervals: KeyBounds,
    next_interval: usize,
    /// The interval being read (its index in `intervals`), if any.
    current: Option<usize>,
    /// The range of the source's last seek (a buffer kept from seek to seek).
    seek_range: SeekRange,
    /// SCAN_AND_FILTER_ROWS: the rows to keep, as (start key, end key) in order, while one
    /// interval from the first start to the last end is stepped through; and the first of
    /// them not yet passed.
    filter_rows: Option<(KeyBounds, usize)>,
    /// The intervals share one count of rows and cells (see `ScanSpec::one_interval`).
    one_interval: bool,
    row_skip: Option<RowSkip>,
    row_regex: Option<regex::bytes::Regex>,
    value_regex: Option<regex::bytes::Regex>,
    row_limit: u64,
    row_offset: u64,
    cell_limit: u64,
    cell_offset: u64,
    cell_limit_per_family: u64,
    // Per interval.
    rows_started: u64,
    cells_passed: u64,
    cells_returned: u64,
    // Per row / family.
    cur_row: Vec<u8>,
    row_counted: bool,
    cur_family: u16,
    family_cells: u64,
    /// The source stands on the cell last returned and must move before the next one.
    need_next: bool,
    valid: bool,
    /// The source stopped (work budget spent) and the interval goes on from this key.
    yielded: Option<Vec<u8>>,
}

impl<I: ScanSource> SpecFilter<I> {
    /// A filter over `src` that starts at the first interval (no seek needed by the caller).
    pub fn new(src: I, spec: &ScanSpec) -> Result<Self> {
        let mut intervals: KeyBounds = spec
            .row_intervals
            .iter()
            .map(Interval::Rows)
            .chain(spec.cell_intervals.iter().map(Interval::Cells))
            .map(|i| (i.start_key(), i.end_key()))
            .collect();
        if intervals.is_empty() {
            intervals.push((Vec::new(), None));
        }
        intervals.sort_by(|a, b| a.0.cmp(&b.0));
        if spec.row_offset > 0 && spec.cell_offset > 0 {
            return Err(Error::InvalidInput(
                "OFFSET and CELL_OFFSET cannot be combined".into(),
            ));
        }
        let mut filter_rows = None;
        if spec.scan_and_filter {
            if !spec.one_interval || !spec.cell_intervals.is_empty() {
                return Err(Error::InvalidInput(
                    "a scan-and-filter scan needs row intervals counted as one interval".into(),
                ));
            }
            if intervals.windows(2).any(|w| match &w[0].1 {
                Some(end) => end.as_slice() > w[1].0.as_slice(),
                None => true,
            }) {
                return Err(Error::InvalidInput(
                    "the row intervals of a scan-and-filter scan overlap".into(),
                ));
            }
            let span = (
                intervals[0].0.clone(),
                intervals.last().and_then(|i| i.1.clone()),
            );
            filter_rows = Some((std::mem::replace(&mut intervals, vec![span]), 0));
        }
        let mut f = Self {
            src,
            intervals,
            next_interval: 0,
            current: None,
            seek_range: SeekRange::all(),
            filter_rows,
            one_interval: spec.one_interval,
            row_skip: spec.row_skip.clone(),
            row_regex: spec.row_regex.clone(),
            value_regex: spec.value_regex.clone(),
            row_limit: spec.row_limit,
            row_offset: spec.row_offset,
            cell_limit: spec.cell_limit,
            cell_offset: spec.cell_offset,
            cell_limit_per_family: spec.cell_limit_per_family,
            rows_started: 0,
            cells_passed: 0,
            cells_returned: 0,
            cur_row: Vec::new(),
            row_counted: false,
            cur_family: u16::MAX,
            family_cells: 0,
            need_next: false,
            valid: false,
            yielded: None,
        };
        f.advance()?;
        Ok(f)
    }

    /// True while the filter stands on a cell.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current cell's encoded key.
    pub fn key(&self) -> &[u8] {
        self.src.key()
    }

    /// The current cell's value.
    pub fn value(&self) -> &[u8] {
        self.src.value()
    }

    /// Moves to the next cell.
    pub fn advance_cell(&mut self) -> Result<()> {
        self.advance()
    }

    /// True when the source stopped before the end of the scan to give its thread back:
    /// [`SpecFilter::resume`] goes on.
    pub fn yielded(&self) -> bool {
        self.yielded.is_some()
    }

    /// Goes on after [`SpecFilter::yielded`], from where the source stopped.
    pub fn resume(&mut self) -> Result<()> {
        let Some(k) = self.yielded.take() else {
            return Ok(());
        };
        self.seek_within(&k)?;
        self.advance()
    }

    /// Seeks the source to `target` within the current interval.
    fn seek_within(&mut self, target: &[u8]) -> Result<()> {
        let end = self.current.and_then(|i| self.intervals[i].1.as_ref());
        self.seek_range.start.clear();
        self.seek_range.start.extend_from_slice(target);
        match (&mut self.seek_range.end, end) {
            (Some(buf), Some(e)) => {
                buf.clear();
                buf.extend_from_slice(e);
            }
            (buf, e) => *buf = e.cloned(),
        }
        self.src.seek(&self.seek_range)
    }

    fn start_next_interval(&mut self) -> Result<bool> {
        let i = self.next_interval;
        if i >= self.intervals.len() {
            self.current = None;
            return Ok(false);
        }
        self.next_interval += 1;
        self.current = Some(i);
        self.seek_range.start.clone_from(&self.intervals[i].0);
        self.seek_range.end.clone_from(&self.intervals[i].1);
        self.src.seek(&self.seek_range)?;
        self.cur_row.clear();
        self.row_counted = false;
        self.cur_family = u16::MAX;
        self.family_cells = 0;
        self.need_next = false;
        if self.one_interval && self.next_interval > 1 {
            return Ok(true);
        }
        self.rows_started = 0;
        self.cells_passed = 0;
        self.cells_returned = 0;
        Ok(true)
    }

    /// Ends the current interval because a limit was reached: with `one_interval`, the scan.
    fn limit_reached(&mut self) {
        self.current = None;
        if self.one_interval {
            self.next_interval = self.intervals.len();
        }
    }

    fn advance(&mut self) -> Result<()> {
        self.valid = false;
        if self.need_next {
            self.need_next = false;
            self.src.next()?;
        }
        loop {
            if self.current.is_none() && !self.start_next_interval()? {
                return Ok(());
            }
            if !self.src.valid() {
                if let Some(k) = self.src.yielded() {
                    self.yielded = Some(k.to_vec());
                    return Ok(());
                }
                self.current = None;
                continue;
            }
            let i = self.current.expect("an interval is current");
            if self.intervals[i]
                .1
                .as_ref()
                .is_some_and(|e| key::bytes_cmp(self.src.key(), e).is_ge())
            {
                self.current = None;
                continue;
            }
            if let Some((rows, at)) = &mut self.filter_rows {
                match in_rows(rows, at, self.src.key()) {
                    None => {
                        self.current = None;
                        continue;
                    }
                    Some(false) => {
                        self.src.next()?;
                        continue;
                    }
                    Some(true) => {}
                }
            }
            let k = KeyRef::from_trusted(self.src.key())?;
            if !key::bytes_eq(k.row_prefix(), &self.cur_row) {
                self.cur_row.clear();
                self.cur_row.extend_from_slice(k.row_prefix());
                self.row_counted = false;
                self.cur_family = u16::MAX;
                if let Some(skip) = &self.row_skip {
                    match skip.navigate(&k.row()) {
                        Navigate::Include => {}
                        Navigate::SeekRow(r) => {
                            self.seek_within(&key::row_start(&r))?;
                            continue;
                        }
                        Navigate::Done => {
                            self.current = None;
                            self.next_interval = self.intervals.len();
                            continue;
                        }
                    }
                }
                if let Some(re) = &self.row_regex
                    && !re.is_match(&k.row())
                {
                    let end = key::row_end(&k.row());
                    self.seek_within(&end)?;
                    continue;
                }
            }
            if let Some(re) = &self.value_regex
                && !re.is_match(self.src.value())
            {
                self.src.next()?;
                continue;
            }
            if k.family() as u16 != self.cur_family {
                self.cur_family = k.family() as u16;
                self.family_cells = 0;
            }
            if self.cell_limit_per_family > 0 {
                if self.family_cells >= self.cell_limit_per_family {
                    let end = key::family_end(&k.row(), k.family());
                    self.seek_within(&end)?;
                    continue;
                }
                self.family_cells += 1;
            }
            // Cells skipped by CELL_OFFSET start no row: LIMIT counts the rows of the cells
            // that come back (Hypertable counts them on the client, after the offset).
            if self.cells_passed < self.cell_offset {
                self.cells_passed += 1;
                self.src.next()?;
                continue;
            }
            if !self.row_counted {
                self.row_counted = true;
                self.rows_started += 1;
                if self.row_limit > 0
                    && self.rows_started > self.row_offset.saturating_add(self.row_limit)
                {
                    self.limit_reached();
                    continue;
                }
            }
            if self.rows_started <= self.row_offset {
                let end = key::row_end(&k.row());
                self.seek_within(&end)?;
                continue;
            }
            if self.cell_limit > 0 && self.cells_returned >= self.cell_limit {
                self.limit_reached();
                continue;
            }
            self.cells_returned += 1;
            self.need_next = true;
            self.valid = true;
            return Ok(());
        }
    }
}

/// Whether the key `k` lies in one of `rows` (intervals as (start key, end key), in order;
/// keys come in order, and `at` is the first interval not yet passed), or `None` when it lies
/// past the last of them.
fn in_rows(rows: &[(Vec<u8>, Option<Vec<u8>>)], at: &mut usize, k: &[u8]) -> Option<bool> {
    while let Some((_, end)) = rows.get(*at) {
        match end {
            Some(e) if key::bytes_cmp(k, e).is_ge() => *at += 1,
            _ => break,
        }
    }
    let (start, _) = rows.get(*at)?;
    Some(key::bytes_cmp(k, start).is_ge())
}
