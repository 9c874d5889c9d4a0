//! The cell cache: a concurrent sorted in-memory map of cells with exact memory accounting.
//!
//! Key and value bytes live in an arena of large chunks that never move; the ordered index is a
//! `BTreeSet` of small slots pointing into the arena, behind one `RwLock`. Writers insert whole
//! batches under one write lock. Readers copy slots (16 bytes each) out in chunks under the read
//! lock and read the bytes without it: arena bytes are immutable once written and live as long as
//! the cache, which the reader keeps alive through an `Arc`.
//!
//! Memory accounting: [`CellCache::memory_bytes`] is the arena capacity allocated plus the slots'
//! share of the index (slot size times an upper bound on B-tree node overhead).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering as AtomicOrdering};

use parking_lot::RwLock;

use crate::error::Result;
use crate::iter::CellIter;

/// Arena chunk size; a cell larger than this gets a chunk of its own.
const CHUNK_BYTES: usize = 1 << 20;
/// Index bytes charged per cell: the 32-byte slot in B-tree nodes that are on average at least
/// 2/3 full, plus child pointers (an upper bound, so the limit is never underestimated).
const INDEX_BYTES_PER_CELL: u64 = 56;
/// Slots copied by a reader's first fill after a seek (small: point reads are common); each
/// refill copies 8 times more, up to `READ_CHUNK_CELLS`.
const FIRST_READ_CELLS: usize = 2;
/// Most slots copied per refill.
const READ_CHUNK_CELLS: usize = 512;

/// Points at `klen` key bytes followed by `vlen` value bytes in the arena. The first 16 key
/// bytes are also kept inline (big-endian, zero-padded), so most comparisons need neither a
/// pointer chase into the arena nor a `memcmp` call (16, not 8: escaped binary rows start with
/// runs of `00 FF`).
#[derive(Clone, Copy)]
struct Slot {
    prefix: u128,
    ptr: *const u8,
    klen: u32,
    vlen: u32,
}

// SAFETY: a slot points into an arena chunk that is never mutated after the bytes are written
// and never freed before the `Inner` that owns both the chunk and the slot.
unsafe impl Send for Slot {}
// SAFETY: as above; slots are read-only views.
unsafe impl Sync for Slot {}

/// The first 16 bytes of `key`, zero-padded, as a big-endian number: comparing two of these
/// orders keys as bytewise comparison does, except that ties need the full keys.
fn key_prefix(key: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = key.len().min(16);
    b[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(b)
}

impl Slot {
    fn key(&self) -> &[u8] {
        // SAFETY: see the `Send` impl: the bytes are initialised, immutable and alive.
        unsafe { std::slice::from_raw_parts(self.ptr, self.klen as usize) }
    }

    fn value(&self) -> &[u8] {
        // SAFETY: as in `key`; the value follows the key in the same allocation.
        unsafe { std::slice::from_raw_parts(self.ptr.add(self.klen as usize), self.vlen as usize) }
    }
}

impl PartialEq for Slot {
    fn eq(&self, other: &Self) -> bool {
        self.prefix == other.prefix && self.key() == other.key()
    }
}
impl Eq for Slot {}
impl PartialOrd for Slot {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Slot {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.prefix.cmp(&other.prefix) {
            Ordering::Equal => self.key().cmp(other.key()),
            o => o,
        }
    }
}

impl std::borrow::Borrow<[u8]> for Slot {
    fn borrow(&self) -> &[u8] {
        self.key()
    }
}

struct Inner {
    index: BTreeSet<Slot>,
    chunks: Vec<Vec<u8>>,
    arena_bytes: u64,
}

impl Inner {
    fn alloc(&mut self, key: &[u8], value: &[u8]) -> Slot {
        let need = key.len() + value.len();
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= need);
        if !fits {
            let cap = need.max(CHUNK_BYTES);
            self.chunks.push(Vec::with_capacity(cap));
            self.arena_bytes += cap as u64;
        }
        let chunk = self.chunks.last_mut().expect("a chunk was just ensured");
        let start = chunk.len();
        // Never grows past capacity, so earlier slots into this chunk stay valid.
        chunk.extend_from_slice(key);
        chunk.extend_from_slice(value);
        Slot {
            prefix: key_prefix(key),
            ptr: chunk[start..].as_ptr(),
            klen: key.len() as u32,
            vlen: value.len() as u32,
        }
    }
}

/// A sorted in-memory map from encoded keys to values.
pub struct CellCache {
    inner: RwLock<Inner>,
    memory_bytes: AtomicU64,
    /// Key and value bytes inserted (what the cells would take in a store, uncompressed).
    data_bytes: AtomicU64,
    cells: AtomicU64,
    /// Smallest and largest revision inserted (i64::MAX / i64::MIN while empty).
    min_revision: AtomicI64,
    max_revision: AtomicI64,
    /// Row and column-family deletes ever inserted (never decreases).
    wide_deletes: AtomicU64,
    /// Deletes of any kind ever inserted (never decreases).
    deletes: AtomicU64,
}

impl std::fmt::Debug for CellCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CellCache({} cells, {} bytes)",
            self.len(),
            self.memory_bytes()
        )
    }
}

impl Default for CellCache {
    fn default() -> Self {
        Self::new()
    }
}

impl CellCache {
    pub fn new() -> Self {
        Self {
            inner: RwLock::new(Inner {
                index: BTreeSet::new(),
                chunks: Vec::new(),
                arena_bytes: 0,
            }),
            memory_bytes: AtomicU64::new(0),
            data_bytes: AtomicU64::new(0),
            cells: AtomicU64::new(0),
            min_revision: AtomicI64::new(i64::MAX),
            max_revision: AtomicI64::new(i64::MIN),
            wide_deletes: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
        }
    }

    /// Inserts cells (encoded key, value, revision) under one lock. A key already present is
    /// replaced (it can only be the same cell again, as keys carry their revision).
    /// Returns the growth of `memory_bytes`.
    pub fn insert_batch<'a>(
        &self,
        cells: impl IntoIterator<Item = (&'a [u8], &'a [u8], i64)>,
    ) -> u64 {
        let mut inner = self.inner.write();
        let before = inner.arena_bytes + inner.index.len() as u64 * INDEX_BYTES_PER_CELL;
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let mut wide = 0;
        let mut deletes = 0;
        let mut data = 0;
        for (key, value, rev) in cells {
            data += (key.len() + value.len()) as u64;
            lo = lo.min(rev);
            hi = hi.max(rev);
            wide += u64::from(common::key::is_wide_delete(key));
            deletes += u64::from(common::key::is_delete(key));
            let slot = inner.alloc(key, value);
            inner.index.replace(slot);
        }
        let after = inner.arena_bytes + inner.index.len() as u64 * INDEX_BYTES_PER_CELL;
        self.cells
            .store(inner.index.len() as u64, AtomicOrdering::Relaxed);
        self.memory_bytes.store(after, AtomicOrdering::Release);
        self.data_bytes.fetch_add(data, AtomicOrdering::AcqRel);
        self.min_revision.fetch_min(lo, AtomicOrdering::AcqRel);
        self.max_revision.fetch_max(hi, AtomicOrdering::AcqRel);
        if wide > 0 {
            self.wide_deletes.fetch_add(wide, AtomicOrdering::AcqRel);
        }
        if deletes > 0 {
            self.deletes.fetch_add(deletes, AtomicOrdering::AcqRel);
        }
        after - before
    }

    /// Whether a row or column-family delete was ever inserted.
    pub fn has_wide_deletes(&self) -> bool {
        self.wide_deletes.load(AtomicOrdering::Acquire) > 0
    }

    /// Whether a delete of any kind was ever inserted.
    pub fn has_deletes(&self) -> bool {
        self.deletes.load(AtomicOrdering::Acquire) > 0
    }

    /// Bytes of memory held (arena plus index), exactly as charged against the cache limit.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes.load(AtomicOrdering::Acquire)
    }

    /// Key and value bytes inserted: the cache's data without the arena's unused room (a
    /// cache's first cell takes a whole chunk of memory), what a range's size counts.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes.load(AtomicOrdering::Acquire)
    }

    pub fn len(&self) -> u64 {
        self.cells.load(AtomicOrdering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The smallest revision inserted, if any.
    pub fn min_revision(&self) -> Option<i64> {
        let v = self.min_revision.load(AtomicOrdering::Acquire);
        (v != i64::MAX).then_some(v)
    }

    /// The largest revision inserted, if any.
    pub fn max_revision(&self) -> Option<i64> {
        let v = self.max_revision.load(AtomicOrdering::Acquire);
        (v != i64::MIN).then_some(v)
    }

    /// Calls `f` for every cell with key in `[from, to)` in order, under the read lock.
    pub fn for_each_in(&self, from: &[u8], to: Option<&[u8]>, mut f: impl FnMut(&[u8], &[u8])) {
        let inner = self.inner.read();
        let upper = match to {
            Some(t) => Bound::Excluded(t),
            None => Bound::Unbounded,
        };
        for s in inner.index.range::<[u8], _>((Bound::Included(from), upper)) {
            f(s.key(), s.value());
        }
    }

    /// Every `step`-th key (`step` at least 1) in `[from, to)`, in order, copied out under the
    /// read lock: rows to split a scan at (`Engine::scan_pieces`).
    pub fn sample_keys(&self, from: &[u8], to: Option<&[u8]>, step: usize) -> Vec<Vec<u8>> {
        let inner = self.inner.read();
        let upper = match to {
            Some(t) => Bound::Excluded(t),
            None => Bound::Unbounded,
        };
        inner
            .index
            .range::<[u8], _>((Bound::Included(from), upper))
            .step_by(step.max(1))
            .map(|s| s.key().to_vec())
            .collect()
    }

    /// A cursor over the cache (call `seek` first).
    pub fn iter(self: &Arc<Self>) -> CellCacheIter {
        CellCacheIter {
            cache: self.clone(),
            buf: Vec::new(),
            pos: 0,
            exhausted: true,
        }
    }

    /// Copies up to `n` slots from `from` on; returns true if that reached the end.
    fn fill(&self, from: Bound<&[u8]>, n: usize, out: &mut Vec<Slot>) -> bool {
        out.clear();
        out.reserve(n);
        // Search with a probe slot, so the tree compares inline prefixes rather than calling
        // memcmp through `Borrow<[u8]>` at every node. The probe points at the caller's `k`,
        // which outlives this call; it is never stored.
        let probe = |k: &[u8]| Slot {
            prefix: key_prefix(k),
            ptr: k.as_ptr(),
            klen: k.len() as u32,
            vlen: 0,
        };
        let lower = match from {
            Bound::Included(k) => Bound::Included(probe(k)),
            Bound::Excluded(k) => Bound::Excluded(probe(k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let inner = self.inner.read();
        for s in inner.index.range((lower, Bound::Unbounded)) {
            if out.len() == n {
                break;
            }
            out.push(*s);
        }
        drop(inner);
        // Arena bytes are in insertion order, not key order: touch each key now, in a loop whose
        // loads the CPU overlaps, rather than missing the cache once per cell later.
        if out.len() > FIRST_READ_CELLS {
            let mut touched = 0u8;
            for s in out.iter() {
                touched ^= s.key().first().copied().unwrap_or(0);
            }
            std::hint::black_box(touched);
        }
        out.len() < n
    }
}

/// A cursor over a cell cache that sees cells inserted while it runs, past its position.
pub struct CellCacheIter {
    cache: Arc<CellCache>,
    buf: Vec<Slot>,
    pos: usize,
    /// The last fill reached the end of the index.
    exhausted: bool,
}

impl CellIter for CellCacheIter {
    fn may_hold_wide_deletes(&self) -> bool {
        self.cache.has_wide_deletes()
    }
    fn may_hold_deletes(&self) -> bool {
        self.cache.has_deletes()
    }
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.exhausted = self
            .cache
            .fill(Bound::Included(key), FIRST_READ_CELLS, &mut self.buf);
        self.pos = 0;
        Ok(())
    }

    fn valid(&self) -> bool {
        self.pos < self.buf.len()
    }

    fn key(&self) -> &[u8] {
        self.buf[self.pos].key()
    }

    fn value(&self) -> &[u8] {
        self.buf[self.pos].value()
    }

    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        if self.pos >= self.buf.len() && !self.exhausted && !self.buf.is_empty() {
            let last = *self.buf.last().expect("non-empty");
            let n = (self.buf.len() * 8).min(READ_CHUNK_CELLS);
            self.exhausted = self
                .cache
                .fill(Bound::Excluded(last.key()), n, &mut self.buf);
            self.pos = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::key::{CellFlag, encode_parts};

    /// Cell deletes leave a cell cache "without wide deletes"; a row or family delete does
    /// not, and the flag stays once set.
    #[test]
    fn wide_deletes_are_noticed() {
        let c = Arc::new(CellCache::new());
        let k = |fam: u8, q: &[u8], flag: CellFlag, rev: i64| {
            let mut k = Vec::new();
            encode_parts(b"r", fam, q, flag, 1, rev, &mut k);
            k
        };
        let (ins, del) = (
            k(1, b"q", CellFlag::Insert, 1),
            k(1, b"q", CellFlag::DeleteCell, 2),
        );
        c.insert_batch([(&ins[..], &b""[..], 1), (&del[..], &b""[..], 2)]);
        assert!(!c.has_wide_deletes());
        assert!(!c.iter().may_hold_wide_deletes());
        let fam = k(1, b"", CellFlag::DeleteColumnFamily, 3);
        c.insert_batch([(&fam[..], &b""[..], 3)]);
        assert!(c.iter().may_hold_wide_deletes());
        let c = Arc::new(CellCache::new());
        let row = k(0, b"", CellFlag::DeleteRow, 4);
        c.insert_batch([(&row[..], &b""[..], 4)]);
        assert!(c.has_wide_deletes());
    }

    #[test]
    fn sorted_replacing_and_accounted() {
        let c = Arc::new(CellCache::new());
        assert!(c.is_empty());
        let grew = c.insert_batch([
            (&b"b"[..], &b"2"[..], 5),
            (&b"a"[..], &b"1"[..], 3),
            (&b"c"[..], &b"3"[..], 9),
        ]);
        assert!(grew >= CHUNK_BYTES as u64);
        assert_eq!(c.data_bytes(), 6, "keys and values, not the chunk");
        c.insert_batch([(&b"b"[..], &b"2"[..], 5)]);
        assert_eq!(c.len(), 3);
        assert_eq!(c.min_revision(), Some(3));
        assert_eq!(c.max_revision(), Some(9));
        let mut it = c.iter();
        it.seek(b"").unwrap();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec()),
                (b"c".to_vec(), b"3".to_vec())
            ]
        );
        it.seek(b"bb").unwrap();
        assert_eq!(it.key(), b"c");
    }

    #[test]
    fn iterates_across_refills_and_sees_later_inserts() {
        let c = Arc::new(CellCache::new());
        let keys: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| (i * 2).to_be_bytes().to_vec())
            .collect();
        c.insert_batch(keys.iter().map(|k| (&k[..], &b"v"[..], 1)));
        let mut it = c.iter();
        it.seek(b"").unwrap();
        let mut n = 0;
        while it.valid() {
            if n == 10 {
                let late = 4001u32.to_be_bytes();
                c.insert_batch([(&late[..], &b"late"[..], 2)]);
            }
            n += 1;
            it.next().unwrap();
        }
        assert_eq!(n, 2001);
        let mut total = 0;
        c.for_each_in(&0u32.to_be_bytes(), Some(&10u32.to_be_bytes()), |_, _| {
            total += 1
        });
        assert_eq!(total, 5);
    }

    #[test]
    fn big_cells_get_their_own_chunk() {
        let c = CellCache::new();
        let big = vec![7u8; CHUNK_BYTES * 2];
        c.insert_batch([(&b"k"[..], &big[..], 1)]);
        let mut got = 0;
        c.for_each_in(b"", None, |_, v| {
            assert_eq!(v, &big[..]);
            got += 1;
        });
        assert_eq!(got, 1);
        assert!(c.memory_bytes() >= 2 * CHUNK_BYTES as u64);
    }
}
