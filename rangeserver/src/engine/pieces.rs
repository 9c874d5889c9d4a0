//! Splitting a scan into pieces of consecutive rows to be read at once on several threads
//! (`Engine::scan_pieces`): a long interval at rows of the stores' indexes and the caches'
//! samples, a key set between its intervals.

use std::ops::Bound;

use common::key::KeyRef;

use super::{Engine, RangeEnd};
use crate::cellstore::CellStore;
use crate::scan::spec::{RowInterval, ScanSpec};

/// The blocks of `cs` from the one holding `lo` to the one holding `hi` (`None`: the last),
/// and the store's bytes per block.
fn blocks_between(cs: &CellStore, lo: &[u8], hi: Option<&[u8]>) -> (std::ops::Range<usize>, u64) {
    let n = cs.num_blocks();
    if n == 0 {
        return (0..0, 0);
    }
    let first = cs.find_block(lo);
    let last = hi.map_or(n, |h| (cs.find_block(h) + 1).min(n));
    (first..last.max(first), cs.trailer().file_size / n as u64)
}

/// Bytes of cell cache per sampled split row, about a store block's worth.
const SAMPLE_BYTES: u64 = 64 << 10;

impl Engine {
    /// Splits a scan into at most `max` pieces of consecutive rows, each over about
    /// `piece_bytes` or more of data, to be scanned at once (on more cores) and returned one
    /// after the other: their outputs, concatenated, are the scan's output when they read one
    /// snapshot ([`Engine::scan_at`]). Split rows come from the stores' block indexes and from
    /// rows sampled in the caches. A scan of several row intervals (a key set) is split
    /// between intervals instead, when they are in order and disjoint
    /// ([`Engine::key_set_pieces`]). A scan of cell intervals or with row or cell limits or
    /// offsets (which count across rows) stays whole; so does one over less data. Iterators
    /// see each piece as a seek to its rows, which the seek contract allows. A scan of one row
    /// is never split.
    pub fn scan_pieces(
        &self,
        table_id: u32,
        spec: &ScanSpec,
        max: usize,
        piece_bytes: u64,
    ) -> Vec<ScanSpec> {
        // The scan unsplit (made only when returned: a key set may hold 400K intervals).
        let whole = || vec![spec.clone()];
        if max < 2
            || !spec.cell_intervals.is_empty()
            || spec.row_limit != 0
            || spec.row_offset != 0
            || spec.cell_limit != 0
            || spec.cell_offset != 0
        {
            return whole();
        }
        if spec.row_intervals.len() > 1 {
            return self.key_set_pieces(table_id, spec, max, piece_bytes);
        }
        let interval = spec
            .row_intervals
            .first()
            .cloned()
            .unwrap_or_else(RowInterval::all);
        let after_start = |row: &[u8]| match &interval.start {
            Bound::Included(s) | Bound::Excluded(s) => row > s.as_slice(),
            Bound::Unbounded => !row.is_empty(),
        };
        if let (Bound::Included(a), Bound::Included(b)) = (&interval.start, &interval.end)
            && a == b
        {
            return whole();
        }
        // The work here is proportional to the scanned rows' data: the blocks of each store
        // whose keys fall in the interval, and the cache's cells there, stepped through.
        let (lo, hi) = (interval.start_key(), interval.end_key());
        let mut bytes = 0u64;
        let mut rows: Vec<Vec<u8>> = Vec::new();
        let mut take = |key: &[u8]| {
            if let Ok(k) = KeyRef::from_trusted(key) {
                let row = k.row();
                if after_start(&row) && !interval.is_past_end(&row) {
                    rows.push(row.into_owned());
                }
            }
        };
        {
            let map = self.inner.catalog().ranges();
            for (_, r) in
                map.range((table_id, RangeEnd::Row(Vec::new()))..=(table_id, RangeEnd::Max))
            {
                // Ranges are [start_row, end_row): one ending at or before the interval's
                // first row holds none of it.
                let before = match (&r.end_row, &interval.start) {
                    (Some(e), Bound::Included(s) | Bound::Excluded(s)) => e <= s,
                    _ => false,
                };
                let after = r
                    .start_row
                    .as_deref()
                    .is_some_and(|s| interval.is_past_end(s));
                if before || after {
                    continue;
                }
                for g in &r.groups {
                    let st = g.state();
                    // A cache is sampled about once per store block's worth of its bytes.
                    for c in std::iter::once(&st.active).chain(st.frozen.iter()) {
                        let cache_bytes = c.memory_bytes();
                        if cache_bytes < SAMPLE_BYTES || c.is_empty() {
                            continue;
                        }
                        let step = (c.len() * SAMPLE_BYTES / cache_bytes).max(1) as usize;
                        let keys = c.sample_keys(&lo, hi.as_deref(), step);
                        bytes += keys.len() as u64 * SAMPLE_BYTES;
                        for key in keys {
                            take(&key);
                        }
                    }
                    for cs in &st.stores {
                        let (blocks, per_block) = blocks_between(cs, &lo, hi.as_deref());
                        for i in blocks {
                            bytes += per_block;
                            take(cs.index_key(i));
                        }
                    }
                }
            }
        }
        let n = max.min((bytes / piece_bytes.max(1)) as usize);
        rows.sort();
        rows.dedup();
        if n < 2 || rows.len() < n {
            return whole();
        }
        let mut splits: Vec<Vec<u8>> = (1..n).map(|i| rows[i * rows.len() / n].clone()).collect();
        splits.dedup();
        let mut pieces = Vec::with_capacity(splits.len() + 1);
        let mut start = interval.start.clone();
        for row in splits {
            let mut p = spec.clone();
            p.row_intervals = vec![RowInterval {
                start,
                end: Bound::Excluded(row.clone()),
            }];
            pieces.push(p);
            start = Bound::Included(row);
        }
        let mut last = spec.clone();
        last.row_intervals = vec![RowInterval {
            start,
            end: interval.end.clone(),
        }];
        pieces.push(last);
        pieces
    }
}

impl Engine {
    /// [`Engine::scan_pieces`] of a scan of several row intervals: runs of consecutive
    /// intervals, about as many in each piece. The data it reads is estimated from the stores'
    /// block indexes: per store, the blocks between the first interval and the last, but no
    /// more than one block per interval (a sparse key set touches a block per key, a dense one
    /// every block); per cell cache, its bytes, but no more than a block's worth per interval.
    /// Intervals out of order or overlapping keep the scan whole.
    fn key_set_pieces(
        &self,
        table_id: u32,
        spec: &ScanSpec,
        max: usize,
        piece_bytes: u64,
    ) -> Vec<ScanSpec> {
        let iv = &spec.row_intervals;
        let whole = || vec![spec.clone()];
        let in_order = iv.windows(2).all(|w| match (&w[0].end, &w[1].start) {
            (Bound::Included(e), Bound::Included(s)) => e < s,
            (Bound::Included(e) | Bound::Excluded(e), Bound::Included(s) | Bound::Excluded(s)) => {
                e <= s
            }
            _ => false,
        });
        if !in_order {
            return whole();
        }
        let (lo, hi) = (iv[0].start_key(), iv[iv.len() - 1].end_key());
        let mut bytes = 0u64;
        {
            let map = self.inner.catalog().ranges();
            for (_, r) in
                map.range((table_id, RangeEnd::Row(Vec::new()))..=(table_id, RangeEnd::Max))
            {
                for g in &r.groups {
                    let st = g.state();
                    // A cache counts up to a store block's worth of its bytes per interval.
                    for c in std::iter::once(&st.active).chain(st.frozen.iter()) {
                        bytes += c.memory_bytes().min(iv.len() as u64 * SAMPLE_BYTES);
                    }
                    for cs in &st.stores {
                        let (blocks, per_block) = blocks_between(cs, &lo, hi.as_deref());
                        bytes += blocks.len().min(iv.len()) as u64 * per_block;
                    }
                }
            }
        }
        let n = max.min((bytes / piece_bytes.max(1)) as usize).min(iv.len());
        if n < 2 {
            return whole();
        }
        (0..n)
            .map(|i| {
                let mut p = spec.clone_without_intervals();
                p.row_intervals = iv[i * iv.len() / n..(i + 1) * iv.len() / n].to_vec();
                p
            })
            .collect()
    }
}
