//! Key-set prefetch: a scan of many row intervals (a key set) asks the file system for the
//! cell-store blocks its intervals start in before it reads them, all at once and coalesced
//! into runs of neighbouring blocks ([`dfs_broker::FsReader::prefetch`]; on a local disk,
//! `posix_fadvise(WILLNEED)`). Without it a cold, sparse key set reads one block after the
//! other, each read waiting for the disk; with it the disk has many reads in flight and the
//! scan finds its blocks in the page cache. The blocks are found on a thread of their own, so
//! the scan starts at once; it is a hint only: nothing waits for it and its errors are
//! ignored. Blocks already in the block cache are not asked for, and a store whose first
//! blocks all are (a warm store) is left alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::scan_spec::RowInterval;

use crate::cellstore::CellStore;
use crate::range::Range;

/// Key sets of fewer intervals are not prefetched: a thread costs more than it saves.
const MIN_INTERVALS: usize = common::scan_spec::PREFETCH_MIN_INTERVALS;
/// A store whose first this many needed blocks are all cached is taken as warm.
const WARM_PROBE_BLOCKS: usize = 32;
/// Prefetch threads running at once in this process; more key-set scans go without.
const MAX_THREADS: usize = 4;
/// Blocks apart that still join one request (the blocks between are read too).
const JOIN_GAP_BLOCKS: usize = 1;

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// A store and the encoded-key bounds of the range it serves.
type StoreInRange = (Arc<CellStore>, Option<Vec<u8>>, Option<Vec<u8>>);

/// The key set's start keys, in order, packed in one buffer.
struct StartKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl StartKeys {
    fn get(&self, i: usize) -> &[u8] {
        let from = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[from..self.ends[i]]
    }

    fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Starts prefetching the blocks of `intervals` (a scan's row intervals) in the stores of
/// `groups` of `ranges`, up to `max_bytes` of them per store. Does nothing for fewer than
/// [`MIN_INTERVALS`] intervals, intervals out of order, or `max_bytes` 0.
pub(crate) fn key_set(
    ranges: &[Arc<Range>],
    groups: &[usize],
    intervals: &[RowInterval],
    max_bytes: u64,
) {
    if max_bytes == 0 || intervals.len() < MIN_INTERVALS {
        return;
    }
    let mut keys = StartKeys {
        bytes: Vec::new(),
        ends: Vec::with_capacity(intervals.len()),
    };
    for iv in intervals {
        let k = iv.start_key();
        if keys.len() > 0 && k.as_slice() < keys.get(keys.len() - 1) {
            return;
        }
        keys.bytes.extend_from_slice(&k);
        keys.ends.push(keys.bytes.len());
    }
    let mut stores: Vec<StoreInRange> = Vec::new();
    for r in ranges {
        let (lo, hi) = r.key_bounds();
        for &g in groups {
            let Some(group) = r.groups.get(g) else {
                continue;
            };
            for cs in &group.state().stores {
                stores.push((cs.clone(), lo.clone(), hi.clone()));
            }
        }
    }
    if stores.is_empty() {
        return;
    }
    let Some(slot) = Slot::take() else {
        return;
    };
    // The slot goes with the closure: freed when the thread ends, even by a panic, or here
    // when no thread could be started.
    let _ = std::thread::Builder::new()
        .name("ht-prefetch".into())
        .spawn(move || {
            let _slot = slot;
            for (cs, lo, hi) in &stores {
                for (first, last) in runs(cs, &keys, lo.as_deref(), hi.as_deref(), max_bytes) {
                    cs.prefetch_span(first, last);
                }
            }
        });
}

/// One of the [`MAX_THREADS`] prefetch threads, counted in [`RUNNING`] while it lives.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        if RUNNING.fetch_add(1, Ordering::AcqRel) >= MAX_THREADS {
            RUNNING.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The runs of blocks `[first, last)` of `cs` that the keys in `[lo, hi)` start in, not in the
/// block cache, neighbours joined, in file order, up to `max_bytes` in all; none when the
/// first [`WARM_PROBE_BLOCKS`] needed blocks are all cached.
fn runs(
    cs: &CellStore,
    keys: &StartKeys,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    max_bytes: u64,
) -> Vec<(usize, usize)> {
    let n = cs.num_blocks();
    let mut out: Vec<(usize, usize)> = Vec::new();
    let (mut bytes, mut needed, mut cached) = (0u64, 0usize, 0usize);
    let mut idx = 0usize;
    let mut last_seen = usize::MAX;
    for i in 0..keys.len() {
        let k = keys.get(i);
        if lo.is_some_and(|lo| k < lo) {
            continue;
        }
        if hi.is_some_and(|hi| k >= hi) {
            break;
        }
        // The first block whose last key is at or past `k` (keys come in order).
        while idx < n && cs.index_key(idx) < k {
            idx += 1;
        }
        if idx >= n {
            break;
        }
        if idx == last_seen {
            continue;
        }
        last_seen = idx;
        needed += 1;
        if cs.block_cached(idx) {
            cached += 1;
            if needed == WARM_PROBE_BLOCKS && cached == needed {
                return Vec::new();
            }
            continue;
        }
        bytes += cs.block_size(idx);
        match out.last_mut() {
            Some((_, last)) if idx <= *last + JOIN_GAP_BLOCKS => *last = idx + 1,
            _ => out.push((idx, idx + 1)),
        }
        if bytes >= max_bytes {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use common::key;
    use common::{BloomFilterMode, BloomFilterSpec, CellFlag, Compressor, Key};
    use dfs_broker::{BlockingFs, LocalFs};

    use super::*;
    use crate::block_cache::BlockCache;
    use crate::cellstore::{CellStoreOptions, CellStoreWriter};

    fn keys(list: &[Vec<u8>]) -> StartKeys {
        let mut k = StartKeys {
            bytes: Vec::new(),
            ends: Vec::new(),
        };
        for s in list {
            k.bytes.extend_from_slice(s);
            k.ends.push(k.bytes.len());
        }
        k
    }

    fn row(i: usize) -> Vec<u8> {
        format!("row-{i:05}").into_bytes()
    }

    /// A store of 2,000 rows of one 40-byte cell each in blocks of about 1 KiB.
    fn store(dir: &std::path::Path, rt: &tokio::runtime::Runtime) -> Arc<CellStore> {
        let fs = BlockingFs::new(
            Arc::new(LocalFs::new(dir).expect("local fs")),
            rt.handle().clone(),
        );
        let o = CellStoreOptions {
            blocksize_bytes: 1024,
            compressor: Compressor::None,
            bloom: BloomFilterSpec {
                mode: BloomFilterMode::None,
                ..BloomFilterSpec::default()
            },
        };
        let mut w = CellStoreWriter::create(&fs, "/cs", o).expect("create");
        for i in 0..2000 {
            let k = Key {
                row: row(i),
                family: 1,
                qualifier: Vec::new(),
                timestamp: 1,
                revision: i as i64,
                flag: CellFlag::Insert,
            };
            w.add(&k.encode(), &[b'v'; 40]).expect("add");
        }
        w.finish().expect("finish");
        CellStore::open(&fs, "/cs", BlockCache::new(64 << 20)).expect("open")
    }

    #[test]
    fn start_keys_come_back_as_packed() {
        let k = keys(&[b"a".to_vec(), Vec::new(), b"bc".to_vec()]);
        assert_eq!(k.len(), 3);
        assert_eq!(
            (k.get(0), k.get(1), k.get(2)),
            (&b"a"[..], &b""[..], &b"bc"[..])
        );
    }

    #[test]
    fn runs_cover_the_blocks_the_keys_start_in_and_skip_cached_ones() {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let cs = store(dir.path(), &rt);
        let n = cs.num_blocks();
        assert!(n > 100, "{n} blocks");
        let block_of = |r: &[u8]| cs.find_block(&key::row_start(r));
        let unlimited = u64::MAX;
        // Every 97th row: each block it starts in is asked for, in order, nothing else
        // but the single blocks between two wanted ones.
        let wanted: Vec<Vec<u8>> = (0..2000).step_by(97).map(row).collect();
        let starts: Vec<Vec<u8>> = wanted.iter().map(|r| key::row_start(r)).collect();
        let got = runs(&cs, &keys(&starts), None, None, unlimited);
        let mut blocks: Vec<usize> = wanted.iter().map(|r| block_of(r)).collect();
        blocks.dedup();
        let covered: Vec<usize> = got.iter().flat_map(|&(a, b)| a..b).collect();
        for b in &blocks {
            assert!(covered.contains(b), "block {b} not asked for: {got:?}");
        }
        assert!(
            got.windows(2).all(|w| w[0].1 + JOIN_GAP_BLOCKS < w[1].0),
            "{got:?}"
        );
        assert!(covered.len() <= 2 * blocks.len(), "{got:?}");
        // Dense keys: one run over the blocks between the first and the last.
        let dense: Vec<Vec<u8>> = (0..2000)
            .step_by(3)
            .map(|i| key::row_start(&row(i)))
            .collect();
        assert_eq!(
            runs(&cs, &keys(&dense), None, None, unlimited),
            vec![(0, n)]
        );
        // A byte budget stops the runs once it is spent.
        let some = runs(&cs, &keys(&dense), None, None, 10 * cs.block_size(0));
        let asked: u64 = some
            .iter()
            .flat_map(|&(a, b)| a..b)
            .map(|i| cs.block_size(i))
            .sum();
        assert!(asked < 12 * cs.block_size(0), "{some:?}");
        // The range's bounds clip the keys.
        let (lo, hi) = (key::row_start(&row(1000)), key::row_start(&row(1500)));
        let clipped = runs(&cs, &keys(&dense), Some(&lo), Some(&hi), unlimited);
        assert_eq!(
            clipped,
            vec![(block_of(&row(1002)), block_of(&row(1497)) + 1)]
        );
        // Cached blocks are not asked for; a store whose first blocks all are is left alone.
        for b in &blocks[..3] {
            cs.load_block(*b, true).expect("load");
        }
        let got = runs(&cs, &keys(&starts), None, None, unlimited);
        let covered: Vec<usize> = got.iter().flat_map(|&(a, b)| a..b).collect();
        assert!(
            !covered.contains(&blocks[0]) && covered.contains(&blocks[3]),
            "{got:?}"
        );
        for b in 0..n {
            cs.load_block(b, true).expect("load");
        }
        assert!(runs(&cs, &keys(&dense), None, None, unlimited).is_empty());
        // Out of order or too few keys: nothing is started (and nothing fails).
        key_set(&[], &[0], &[], unlimited);
        // Slots are bounded and come back when dropped (other threads of this process may
        // hold some meanwhile, never more than the bound).
        let mut taken: Vec<Slot> = std::iter::from_fn(Slot::take)
            .take(2 * MAX_THREADS)
            .collect();
        assert!(taken.len() <= MAX_THREADS, "{} slots", taken.len());
        assert!(Slot::take().is_none());
        if taken.pop().is_some() {
            assert!(Slot::take().is_some());
        }
    }
}
