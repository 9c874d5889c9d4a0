//! [`RowRange`]: a half-open interval of rows `[start, end)`, either side unbounded.
//!
//! The one definition of "which rows a range holds" used by the engine (held ranges, moves,
//! recovery), the cluster client (routing, scans over several ranges) and the master.

use crate::key;

/// Rows `start <= row < end`; `None` is unbounded on that side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RowRange {
    pub start: Option<Vec<u8>>,
    pub end: Option<Vec<u8>>,
}

impl RowRange {
    pub fn new(start: Option<Vec<u8>>, end: Option<Vec<u8>>) -> Self {
        Self { start, end }
    }

    /// Every row.
    pub fn all() -> Self {
        Self::default()
    }

    /// Whether `row` is in the range.
    pub fn contains(&self, row: &[u8]) -> bool {
        contains(&self.start, &self.end, row)
    }

    /// Whether the range holds no row (its end is at or before its start).
    pub fn is_empty(&self) -> bool {
        is_empty(&self.start, &self.end)
    }

    /// Whether the two ranges share a row.
    pub fn overlaps(&self, other: &RowRange) -> bool {
        overlaps(&self.start, &self.end, &other.start, &other.end)
    }

    /// The part of `self` inside `within`, or `None` if they share no row.
    pub fn clamp(&self, within: &RowRange) -> Option<RowRange> {
        if !self.overlaps(within) {
            return None;
        }
        let start = match (&self.start, &within.start) {
            (Some(a), Some(b)) => Some(a.max(b).clone()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        let end = match (&self.end, &within.end) {
            (Some(a), Some(b)) => Some(a.min(b).clone()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        Some(RowRange { start, end })
    }

    /// The first encoded key a scan of this range seeks to (the start of its first row, or
    /// the empty key when unbounded).
    pub fn start_key(&self) -> Vec<u8> {
        match &self.start {
            Some(s) => key::row_start(s),
            None => Vec::new(),
        }
    }
}

/// Most split rows a table may be created with (`CREATE TABLE ... SPLIT ON`).
pub const MAX_SPLIT_ROWS: usize = 65_536;

/// Checks the split rows a table is created with: non-empty rows within the row-key limit,
/// strictly increasing, at most [`MAX_SPLIT_ROWS`]. The message names the offending row by
/// its position (1-based).
pub fn check_split_rows(rows: &[Vec<u8>]) -> Result<(), String> {
    if rows.len() > MAX_SPLIT_ROWS {
        return Err(format!(
            "{} split rows, more than {MAX_SPLIT_ROWS}",
            rows.len()
        ));
    }
    for (i, r) in rows.iter().enumerate() {
        if r.is_empty() {
            return Err(format!("split row {} is empty", i + 1));
        }
        if r.len() > crate::mutation::MAX_ROW_OR_QUALIFIER_BYTES {
            return Err(format!(
                "split row {} is {} bytes, longer than a row key may be ({} bytes)",
                i + 1,
                r.len(),
                crate::mutation::MAX_ROW_OR_QUALIFIER_BYTES
            ));
        }
        if i > 0 && rows[i - 1] >= *r {
            return Err(format!(
                "split row {} ({:?}) is not above the one before it ({:?}): split rows must \
                 be strictly increasing",
                i + 1,
                String::from_utf8_lossy(r),
                String::from_utf8_lossy(&rows[i - 1])
            ));
        }
    }
    Ok(())
}

/// The ranges `rows` split every row into, in order: `[None, r1)`, `[r1, r2)`, ...,
/// `[rn, None)`.
pub fn split_bounds(rows: &[Vec<u8>]) -> Vec<RowRange> {
    let mut out = Vec::with_capacity(rows.len() + 1);
    let mut start = None;
    for r in rows {
        out.push(RowRange::new(start, Some(r.clone())));
        start = Some(r.clone());
    }
    out.push(RowRange::new(start, None));
    out
}

/// Whether `row` is in `[start, end)`.
pub fn contains(start: &Option<Vec<u8>>, end: &Option<Vec<u8>>, row: &[u8]) -> bool {
    start.as_deref().is_none_or(|s| row >= s) && end.as_deref().is_none_or(|e| row < e)
}

/// Whether `[start, end)` holds no row.
pub fn is_empty(start: &Option<Vec<u8>>, end: &Option<Vec<u8>>) -> bool {
    match end {
        None => false,
        Some(e) => e.is_empty() || start.as_deref().is_some_and(|s| s >= e.as_slice()),
    }
}

/// Whether `[a_start, a_end)` and `[b_start, b_end)` share a row, for callers that keep the two
/// bounds in their own fields.
pub fn overlaps(
    a_start: &Option<Vec<u8>>,
    a_end: &Option<Vec<u8>>,
    b_start: &Option<Vec<u8>>,
    b_end: &Option<Vec<u8>>,
) -> bool {
    let a_starts_before_b_ends = match (a_start, b_end) {
        (Some(s), Some(e)) => s < e,
        _ => true,
    };
    let b_starts_before_a_ends = match (b_start, a_end) {
        (Some(s), Some(e)) => s < e,
        _ => true,
    };
    a_starts_before_b_ends
        && b_starts_before_a_ends
        && !is_empty(a_start, a_end)
        && !is_empty(b_start, b_end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bound() -> impl Strategy<Value = Option<Vec<u8>>> {
        proptest::option::of(proptest::collection::vec(0u8..4, 0..3))
    }

    proptest! {
        /// Against a model: ranges overlap exactly when some row is in both; clamp holds
        /// exactly the rows in both.
        #[test]
        fn overlap_and_clamp_match_the_rows_they_hold(
            a in (bound(), bound()), b in (bound(), bound()),
        ) {
            let a = RowRange::new(a.0, a.1);
            let b = RowRange::new(b.0, b.1);
            let mut rows = vec![Vec::new()];
            for x in 0u8..4 { rows.push(vec![x]); for y in 0u8..4 { rows.push(vec![x, y]); for z in 0u8..4 { rows.push(vec![x, y, z]); } } }
            let both: Vec<&Vec<u8>> = rows.iter().filter(|r| a.contains(r) && b.contains(r)).collect();
            // Rows of up to 3 symbols are enough to witness an overlap of bounds of up to 2.
            prop_assert_eq!(a.overlaps(&b), !both.is_empty());
            prop_assert_eq!(a.overlaps(&b), b.overlaps(&a));
            match a.clamp(&b) {
                None => prop_assert!(both.is_empty()),
                Some(c) => {
                    for r in &rows {
                        prop_assert_eq!(c.contains(r), a.contains(r) && b.contains(r));
                    }
                }
            }
        }
    }

    #[test]
    fn start_key_is_the_row_start() {
        assert!(RowRange::all().start_key().is_empty());
        let r = RowRange::new(Some(b"m".to_vec()), None);
        assert_eq!(r.start_key(), key::row_start(b"m"));
    }
}
