//! What a scan asks for: row and cell intervals, columns, timestamps, regexes, limits.

use std::ops::Bound;

/// An interval of rows. `Unbounded` ends mean the start or end of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowInterval {
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

impl RowInterval {
    /// The encoded key a scan of the interval seeks to first (empty: from the beginning).
    pub fn start_key(&self) -> Vec<u8> {
        match &self.start {
            Bound::Included(s) => crate::key::row_start(s),
            Bound::Excluded(s) => crate::key::row_end(s),
            Bound::Unbounded => Vec::new(),
        }
    }

    /// The encoded key at or after which a cell lies beyond the interval (`None`: unbounded).
    pub fn end_key(&self) -> Option<Vec<u8>> {
        match &self.end {
            Bound::Included(e) => Some(crate::key::row_end(e)),
            Bound::Excluded(e) => Some(crate::key::row_start(e)),
            Bound::Unbounded => None,
        }
    }

    /// Every row.
    pub fn all() -> Self {
        Self {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
        }
    }

    /// Exactly one row.
    pub fn row(r: impl Into<Vec<u8>>) -> Self {
        let r = r.into();
        Self {
            start: Bound::Included(r.clone()),
            end: Bound::Included(r),
        }
    }

    /// Rows starting with `prefix` (HQL `ROW =^ 'p'`).
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        let p: Vec<u8> = prefix.into();
        Self {
            end: match prefix_successor(&p) {
                Some(s) => Bound::Excluded(s),
                None => Bound::Unbounded,
            },
            start: Bound::Included(p),
        }
    }

    /// True if `row` lies in the interval.
    pub fn contains(&self, row: &[u8]) -> bool {
        let after_start = match &self.start {
            Bound::Included(s) => row >= s.as_slice(),
            Bound::Excluded(s) => row > s.as_slice(),
            Bound::Unbounded => true,
        };
        after_start && !self.is_past_end(row)
    }

    /// True if `row` lies beyond the end of the interval.
    pub fn is_past_end(&self, row: &[u8]) -> bool {
        match &self.end {
            Bound::Included(e) => row > e.as_slice(),
            Bound::Excluded(e) => row >= e.as_slice(),
            Bound::Unbounded => false,
        }
    }
}

/// The smallest byte string greater than every string starting with `p`, if there is one.
pub fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// One end of a cell interval: (row, family id, qualifier).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CellPos {
    pub row: Vec<u8>,
    pub family: u8,
    pub qualifier: Vec<u8>,
}

/// An interval of cells in (row, family, qualifier) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellInterval {
    pub start: Bound<CellPos>,
    pub end: Bound<CellPos>,
}

impl CellInterval {
    /// The encoded key a scan of the interval seeks to first (empty: from the beginning).
    pub fn start_key(&self) -> Vec<u8> {
        match &self.start {
            Bound::Included(p) => crate::key::cell_start(&p.row, p.family, &p.qualifier),
            Bound::Excluded(p) => crate::key::cell_end(&p.row, p.family, &p.qualifier),
            Bound::Unbounded => Vec::new(),
        }
    }

    /// The encoded key at or after which a cell lies beyond the interval (`None`: unbounded).
    pub fn end_key(&self) -> Option<Vec<u8>> {
        match &self.end {
            Bound::Included(p) => Some(crate::key::cell_end(&p.row, p.family, &p.qualifier)),
            Bound::Excluded(p) => Some(crate::key::cell_start(&p.row, p.family, &p.qualifier)),
            Bound::Unbounded => None,
        }
    }
}

/// Which qualifiers of a family a scan wants.
#[derive(Debug, Clone)]
pub enum QualifierMatch {
    All,
    Exact(Vec<u8>),
    Prefix(Vec<u8>),
    Regex(regex::bytes::Regex),
}

impl QualifierMatch {
    pub fn matches(&self, q: &[u8]) -> bool {
        match self {
            Self::All => true,
            Self::Exact(e) => q == e.as_slice(),
            Self::Prefix(p) => q.starts_with(p),
            Self::Regex(r) => r.is_match(q),
        }
    }
}

/// A selected column: a family and which of its qualifiers.
#[derive(Debug, Clone)]
pub struct ColumnSelector {
    pub family: u8,
    pub qualifier: QualifierMatch,
}

/// A scan of at least this many row intervals (a key set, in order) has the cell-store blocks
/// its intervals start in asked of the file system ahead of reading them (the range server's
/// key-set prefetch; EXPLAIN says so).
pub const PREFETCH_MIN_INTERVALS: usize = 8;

/// A scan request. The default scans everything and returns the schema's versions.
#[derive(Debug, Clone)]
pub struct ScanSpec {
    /// Row intervals; empty (and no cell intervals) means all rows. Limits apply per interval.
    pub row_intervals: Vec<RowInterval>,
    /// Cell intervals; limits apply per interval.
    pub cell_intervals: Vec<CellInterval>,
    /// Selected columns; empty means every live family.
    pub columns: Vec<ColumnSelector>,
    /// Timestamps in `[start, end)`.
    pub time_start: i64,
    pub time_end: i64,
    pub row_regex: Option<regex::bytes::Regex>,
    pub value_regex: Option<regex::bytes::Regex>,
    /// Versions per cell; 0 means as many as the schema keeps.
    pub max_versions: u32,
    /// Rows per interval; 0 means no limit.
    pub row_limit: u64,
    pub row_offset: u64,
    /// Cells per interval; 0 means no limit.
    pub cell_limit: u64,
    pub cell_offset: u64,
    /// Cells per family within one row; 0 means no limit.
    pub cell_limit_per_family: u64,
    pub keys_only: bool,
    /// Also return the delete markers that are in effect.
    pub return_deletes: bool,
    /// Read blocks without inserting them into the block cache.
    pub no_cache: bool,
    /// Iterators run for this scan above the table's scan iterators, in this order.
    pub iterators: Vec<crate::iterators::ScanIterator>,
    /// Column value predicates, run in the range server below the limits.
    pub value_predicates: Option<crate::iterators::ValuePredicates>,
    /// The row intervals count as one interval for the limits and offsets (the rows of
    /// key-part predicates, or SCAN_AND_FILTER_ROWS's rows).
    pub one_interval: bool,
    /// Step through the rows from the first interval's start to the last one's end, keeping
    /// the cells of rows in an interval, instead of seeking to each interval
    /// (SCAN_AND_FILTER_ROWS; needs `one_interval` and row intervals only).
    pub scan_and_filter: bool,
    /// Key-part predicates over a composite row key, applied inside every interval.
    pub row_skip: Option<crate::row_key::RowSkip>,
    /// Aggregate the scanned cells instead of returning them (`Engine::aggregate`, `rs.scan`,
    /// `Client::aggregate`; a plain scan ignores it). `None`: return cells.
    pub aggregate: Option<crate::aggregate::Aggregate>,
}

impl ScanSpec {
    /// A copy without the row and cell intervals (a key set's can be large).
    pub fn clone_without_intervals(&self) -> Self {
        Self {
            row_intervals: Vec::new(),
            cell_intervals: Vec::new(),
            columns: self.columns.clone(),
            time_start: self.time_start,
            time_end: self.time_end,
            row_regex: self.row_regex.clone(),
            value_regex: self.value_regex.clone(),
            max_versions: self.max_versions,
            row_limit: self.row_limit,
            row_offset: self.row_offset,
            cell_limit: self.cell_limit,
            cell_offset: self.cell_offset,
            cell_limit_per_family: self.cell_limit_per_family,
            keys_only: self.keys_only,
            return_deletes: self.return_deletes,
            no_cache: self.no_cache,
            iterators: self.iterators.clone(),
            value_predicates: self.value_predicates.clone(),
            one_interval: self.one_interval,
            scan_and_filter: self.scan_and_filter,
            row_skip: self.row_skip.clone(),
            aggregate: self.aggregate.clone(),
        }
    }
}

impl Default for ScanSpec {
    fn default() -> Self {
        Self {
            row_intervals: Vec::new(),
            cell_intervals: Vec::new(),
            columns: Vec::new(),
            time_start: i64::MIN,
            time_end: i64::MAX,
            row_regex: None,
            value_regex: None,
            max_versions: 0,
            row_limit: 0,
            row_offset: 0,
            cell_limit: 0,
            cell_offset: 0,
            cell_limit_per_family: 0,
            keys_only: false,
            return_deletes: false,
            no_cache: false,
            iterators: Vec::new(),
            value_predicates: None,
            one_interval: false,
            scan_and_filter: false,
            row_skip: None,
            aggregate: None,
        }
    }
}
