//! Which stores a merging compaction takes: whether a group needs one ([`needs_merge`]: too
//! many stores overlapping at one key, or too many in all), and which of its stores
//! ([`select_merge`]'s size tiers, or the [`smallest_window`] of disjoint stores).

use std::sync::Arc;

use crate::cellstore::CellStore;
use crate::range::Range;

/// Why a group needs a merging compaction ([`needs_merge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MergeNeed {
    /// More than `max_stores` stores overlap at some key: a read meets each of them.
    Overlap,
    /// Too many stores in all, though few overlap at any key (a load in key order).
    Count,
}

/// Whether a group with these stores needs a merging compaction, and why: when more than
/// `max_stores` of them overlap at some key ([`overlap_depth`]), or there are more than
/// [`DISJOINT_STORES_FACTOR`] times `max_stores` in all. Stores of disjoint key spans (what a
/// load in key order makes) cost a read no more than one store does, so merging them would
/// only write the same cells again (RocksDB moves such files down a level without rewriting
/// them). A store whose first key cannot be read counts as overlapping everything.
pub(super) fn needs_merge(
    range: &Range,
    stores: &[Arc<CellStore>],
    max_stores: usize,
) -> Option<MergeNeed> {
    let max_stores = max_stores.max(1);
    if stores.len() <= max_stores {
        return None;
    }
    let (lo, hi) = range.key_bounds();
    let mut spans = Vec::with_capacity(stores.len());
    for s in stores {
        match s.key_span() {
            Ok(Some((first, last))) => {
                // Clipped to the range: a store shared with the other half of a split reaches
                // past it.
                let first = lo.as_deref().map_or(first, |l| first.max(l));
                let last = hi.as_deref().map_or(last, |h| last.min(h));
                spans.push((first.to_vec(), last.to_vec()));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(store = s.path(), error = %e, "reading a store's first key");
                return Some(MergeNeed::Overlap);
            }
        }
    }
    if overlap_depth(&spans) > max_stores {
        Some(MergeNeed::Overlap)
    } else if stores.len() > DISJOINT_STORES_FACTOR * max_stores {
        Some(MergeNeed::Count)
    } else {
        None
    }
}

/// At most this many times `max_stores_per_group` stores of disjoint spans stay unmerged.
const DISJOINT_STORES_FACTOR: usize = 4;

/// The largest number of the closed key spans `[first, last]` that hold one key.
pub(crate) fn overlap_depth(spans: &[(Vec<u8>, Vec<u8>)]) -> usize {
    // Starts sort before ends at the same key: closed spans that touch overlap.
    let mut events: Vec<(&[u8], u8)> = spans
        .iter()
        .flat_map(|(a, b)| [(a.as_slice(), 0u8), (b.as_slice(), 1u8)])
        .collect();
    events.sort_unstable();
    let (mut depth, mut most) = (0usize, 0usize);
    for (_, end) in events {
        if end == 0 {
            depth += 1;
            most = most.max(depth);
        } else {
            depth = depth.saturating_sub(1);
        }
    }
    most
}

/// Where an automatic merging compaction of stores of these sizes (oldest first) starts: it
/// merges every store from there to the newest. `None` while there are at most `max_stores`.
/// The start is the oldest store no bigger than `ratio` times the newer ones together (HBase's
/// ratio-based selection), so a big old store is rewritten only once the newer ones add up to
/// about its size and each byte is rewritten about once per size tier, not once per merge;
/// when no store qualifies, the two newest.
pub(crate) fn select_merge(sizes: &[u64], max_stores: usize, ratio: f64) -> Option<usize> {
    if sizes.len() <= max_stores.max(1) {
        return None;
    }
    let mut newer: u64 = sizes.iter().sum();
    for (i, &s) in sizes[..sizes.len() - 1].iter().enumerate() {
        newer -= s;
        if s as f64 <= ratio * newer as f64 {
            return Some(i);
        }
    }
    Some(sizes.len() - 2)
}

/// The `max_stores` stores next to one another in age (at least two; the caller has more)
/// whose sizes add up to the least, as `(from, to)`: the merge that takes a group of too many
/// disjoint stores towards the bound writing the fewest bytes. Merged into one store in their
/// place, stores next in age keep every other store's order; a load in key order made them
/// next in key order too, so the result stays disjoint from the rest.
pub(crate) fn smallest_window(sizes: &[u64], max_stores: usize) -> (usize, usize) {
    let w = max_stores.max(2).min(sizes.len());
    let mut best = (0, w);
    let mut best_sum = u64::MAX;
    let mut sum: u64 = 0;
    for (i, &s) in sizes.iter().enumerate() {
        sum += s;
        if i >= w {
            sum -= sizes[i - w];
        }
        if i + 1 >= w && sum < best_sum {
            best_sum = sum;
            best = (i + 1 - w, i + 1);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::{overlap_depth, select_merge, smallest_window};

    fn spans(v: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        v.iter()
            .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn overlap_depth_counts_the_spans_over_one_key() {
        assert_eq!(overlap_depth(&[]), 0);
        // A load in key order: disjoint spans.
        assert_eq!(
            overlap_depth(&spans(&[("a", "c"), ("d", "f"), ("g", "k")])),
            1
        );
        // Spans that share an end key overlap there.
        assert_eq!(overlap_depth(&spans(&[("a", "c"), ("c", "f")])), 2);
        // A random load: every span covers everything.
        assert_eq!(
            overlap_depth(&spans(&[("a", "z"), ("b", "y"), ("a", "x")])),
            3
        );
        // Order does not matter; the deepest point counts.
        assert_eq!(
            overlap_depth(&spans(&[("m", "p"), ("a", "c"), ("n", "o"), ("b", "n")])),
            3
        );
    }

    #[test]
    fn the_smallest_window_of_stores_next_in_age() {
        assert_eq!(smallest_window(&[10; 9], 8), (0, 8));
        assert_eq!(smallest_window(&[90, 10, 10, 10, 80, 5, 5, 5], 3), (5, 8));
        assert_eq!(smallest_window(&[90, 1, 1, 1, 80, 5, 5, 5], 3), (1, 4));
        // At least two, and never more than there are.
        assert_eq!(smallest_window(&[7, 3, 4], 1), (1, 3));
        assert_eq!(smallest_window(&[7, 3], 8), (0, 2));
    }

    #[test]
    fn no_merge_within_the_limit() {
        assert_eq!(select_merge(&[], 8, 1.2), None);
        assert_eq!(select_merge(&[5; 8], 8, 1.2), None);
        assert_eq!(
            select_merge(&[5; 2], 0, 1.2),
            Some(0),
            "a limit of 0 acts as 1"
        );
    }

    #[test]
    fn equal_stores_merge_whole() {
        assert_eq!(select_merge(&[10; 9], 8, 1.2), Some(0));
    }

    #[test]
    fn a_big_old_store_waits_for_the_newer_ones_to_add_up() {
        // 1000 > 1.2 * 275, 100 <= 1.2 * 175: the big one stays.
        let sizes = [1000, 100, 25, 25, 25, 25, 25, 25, 25];
        assert_eq!(select_merge(&sizes, 8, 1.2), Some(1));
        // Once the newer stores add up to about its size, it is merged too.
        let sizes = [1000, 300, 200, 100, 100, 100, 100, 50, 50];
        assert_eq!(select_merge(&sizes, 8, 1.2), Some(0));
    }

    #[test]
    fn steeply_growing_sizes_merge_the_two_newest() {
        let sizes = [
            100_000_000,
            10_000_000,
            1_000_000,
            100_000,
            10_000,
            1_000,
            100,
            10,
            1,
        ];
        assert_eq!(select_merge(&sizes, 8, 1.2), Some(7));
        assert_eq!(select_merge(&[10, 5, 1], 2, 0.0), Some(1));
    }

    #[test]
    fn tiers_keep_the_rewrites_logarithmic() {
        // Flushes of one unit each under the policy: each unit is rewritten a few times,
        // not once per merge as when every merge takes all stores.
        let (mut stores, mut rewritten, flushes) = (Vec::<u64>::new(), 0u64, 1000u64);
        for _ in 0..flushes {
            stores.push(1);
            while let Some(from) = select_merge(&stores, 8, 1.2) {
                let merged: u64 = stores.drain(from..).sum();
                rewritten += merged;
                stores.push(merged);
            }
            assert!(stores.len() <= 8);
        }
        assert_eq!(stores.iter().sum::<u64>(), flushes);
        assert!(
            rewritten < 6 * flushes,
            "{rewritten} units rewritten for {flushes} flushed"
        );
    }
}
