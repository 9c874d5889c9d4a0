//! Merging several sorted cursors into one, and clamping a cursor to a key interval.

use common::key::bytes_cmp;

use crate::error::Result;
use crate::iter::CellIter;

/// A k-way merge of cursors. An exact key present in several children is returned once (from
/// the earliest child), so a cell that reached two sources is never returned twice.
///
/// The valid children are kept in a binary min-heap ordered by (key, child index): a step
/// costs about two comparisons per level of the heap (log2 of the children) instead of one per
/// child, which matters when a scan merges the many overlapping stores of a randomly loaded
/// range; a run of keys from one child costs two comparisons per cell. A later child standing
/// on the key of an earlier one sorts right below it, so it is one of the top's two children
/// in the heap when that key comes up, and is stepped past there.
pub struct MergeIter<I: CellIter> {
    children: Vec<I>,
    /// Indices of the valid children, a heap by (key, index); `heap[0]` is the current child.
    heap: Vec<usize>,
}

impl<I: CellIter> MergeIter<I> {
    pub fn new(children: Vec<I>) -> Self {
        let heap = Vec::with_capacity(children.len());
        Self { children, heap }
    }

    /// True if child `a` sorts before child `b`: a smaller key, or the same key and an
    /// earlier child.
    #[inline]
    fn before(&self, a: usize, b: usize) -> bool {
        match bytes_cmp(self.children[a].key(), self.children[b].key()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => a < b,
        }
    }

    /// Moves the child at heap position `pos` down to its place.
    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        let x = self.heap[pos];
        loop {
            let l = 2 * pos + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.before(self.heap[r], self.heap[l]) {
                r
            } else {
                l
            };
            if !self.before(self.heap[c], x) {
                break;
            }
            self.heap[pos] = self.heap[c];
            pos = c;
        }
        self.heap[pos] = x;
    }

    /// Takes the child at heap position `pos` (0, 1 or 2: the root or one of its children)
    /// out of the heap after it ran out.
    fn remove_near_top(&mut self, pos: usize) {
        let last = self.heap.pop().expect("non-empty heap");
        if pos < self.heap.len() {
            // The last child sorts after the root, so below position 0 it cannot need to rise.
            self.heap[pos] = last;
            self.sift_down(pos);
        }
    }

    /// Steps the child at heap position `pos` and puts it back in its place.
    fn step_at(&mut self, pos: usize) -> Result<()> {
        let c = self.heap[pos];
        self.children[c].next()?;
        if self.children[c].valid() {
            self.sift_down(pos);
        } else {
            self.remove_near_top(pos);
        }
        Ok(())
    }

    /// Restores the heap after the current child moved forward (from its old place at the
    /// top), and steps every later child standing on the new current key past it.
    fn settle_top(&mut self) -> Result<()> {
        loop {
            let n = self.heap.len();
            if n < 2 {
                return Ok(());
            }
            let c = if n > 2 && self.before(self.heap[2], self.heap[1]) {
                2
            } else {
                1
            };
            let (top, next) = (self.heap[0], self.heap[c]);
            match bytes_cmp(self.children[top].key(), self.children[next].key()) {
                std::cmp::Ordering::Less => return Ok(()),
                // The same key: the later child's copy is the duplicate.
                std::cmp::Ordering::Equal if top < next => self.step_at(c)?,
                std::cmp::Ordering::Equal => self.step_at(0)?,
                std::cmp::Ordering::Greater => self.sift_down(0),
            }
        }
    }

    /// Rebuilds the heap from every valid child.
    fn pick(&mut self) -> Result<()> {
        self.heap.clear();
        let children = &self.children;
        self.heap
            .extend((0..children.len()).filter(|&i| children[i].valid()));
        for pos in (0..self.heap.len() / 2).rev() {
            self.sift_down(pos);
        }
        self.settle_top()
    }

    /// Repositions the children with `f` (each child by its index), then picks the smallest:
    /// a seek that need not move every child (one parked for a family set it does not hold).
    pub fn seek_with(&mut self, mut f: impl FnMut(usize, &mut I) -> Result<()>) -> Result<()> {
        for (i, c) in self.children.iter_mut().enumerate() {
            f(i, c)?;
        }
        self.pick()
    }
}

impl<I: CellIter> CellIter for MergeIter<I> {
    /// A forward seek (to a key not below the current one) leaves alone the children that stand
    /// at or past it, or are exhausted: since a child was last sought, it has stepped only over
    /// keys the merge returned or skipped as duplicates, all at or below the current key, so a
    /// seek would leave it where it stands. Other seeks move every child, and so does every
    /// seek a parked child ([`CellIter::parked`]).
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.seek_until(key, None)
    }

    /// [`MergeIter::seek`] passing `end` to the children, so a cell store can answer a seek of
    /// one row its bloom filter rules out without reading a block.
    fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
        let forward = self
            .heap
            .first()
            .is_some_and(|&c| key >= self.children[c].key());
        for c in &mut self.children {
            if forward
                && if c.valid() {
                    c.key() >= key
                } else {
                    !c.parked()
                }
            {
                continue;
            }
            c.seek_until(key, end)?;
        }
        self.pick()
    }

    fn parked(&self) -> bool {
        self.heap.is_empty() && self.children.iter().any(|c| c.parked())
    }

    fn may_hold_wide_deletes(&self) -> bool {
        self.children.iter().any(|c| c.may_hold_wide_deletes())
    }

    fn may_hold_deletes(&self) -> bool {
        self.children.iter().any(|c| c.may_hold_deletes())
    }

    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn key(&self) -> &[u8] {
        self.children[self.heap[0]].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.heap[0]].value()
    }

    fn next(&mut self) -> Result<()> {
        if self.heap.is_empty() {
            return Ok(());
        }
        // Duplicates of the current key in later children were stepped past when it came to
        // the top, and no earlier child can stand on it (it would sort first).
        let cur = self.heap[0];
        self.children[cur].next()?;
        if !self.children[cur].valid() {
            self.remove_near_top(0);
        }
        self.settle_top()
    }

    fn origin(&self) -> Option<(String, u64)> {
        self.heap.first().and_then(|&c| self.children[c].origin())
    }
}

/// A cursor restricted to keys in `[lo, hi)` (either bound optional).
pub struct BoundedIter<I: CellIter> {
    inner: I,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
}

impl<I: CellIter> BoundedIter<I> {
    pub fn new(inner: I, lo: Option<Vec<u8>>, hi: Option<Vec<u8>>) -> Self {
        Self { inner, lo, hi }
    }
}

impl<I: CellIter> CellIter for BoundedIter<I> {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.seek_until(key, None)
    }

    fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
        match &self.lo {
            Some(lo) if key < lo.as_slice() => self.inner.seek_until(lo, end),
            _ => self.inner.seek_until(key, end),
        }
    }

    fn parked(&self) -> bool {
        self.inner.parked()
    }

    fn may_hold_wide_deletes(&self) -> bool {
        self.inner.may_hold_wide_deletes()
    }

    fn may_hold_deletes(&self) -> bool {
        self.inner.may_hold_deletes()
    }

    fn valid(&self) -> bool {
        self.inner.valid()
            && match &self.hi {
                Some(hi) => bytes_cmp(self.inner.key(), hi).is_lt(),
                None => true,
            }
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }

    fn origin(&self) -> Option<(String, u64)> {
        self.inner.origin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIter;

    fn v(keys: &[&str]) -> VecIter {
        VecIter::new(
            keys.iter()
                .map(|k| (k.as_bytes().to_vec(), k.as_bytes().to_vec()))
                .collect(),
        )
    }

    fn drain(it: &mut impl CellIter) -> Vec<String> {
        let mut out = Vec::new();
        while it.valid() {
            out.push(String::from_utf8(it.key().to_vec()).unwrap());
            it.next().unwrap();
        }
        out
    }

    #[test]
    fn merges_dedups_and_seeks() {
        let mut m = MergeIter::new(vec![v(&["a", "c", "e"]), v(&["b", "c", "f"]), v(&[])]);
        m.seek(b"").unwrap();
        assert_eq!(drain(&mut m), ["a", "b", "c", "e", "f"]);
        m.seek(b"d").unwrap();
        assert_eq!(drain(&mut m), ["e", "f"]);
    }

    proptest::proptest! {
        /// Against a model (the sorted union without duplicates): children with overlapping
        /// keys and runs of one child, read through, with forward and backward seeks between
        /// steps; each key comes once, from the earliest child holding it.
        #[test]
        fn merge_matches_the_sorted_union(
            children in proptest::collection::vec(
                proptest::collection::btree_set(0u8..40, 0..25), 1..5),
            ops in proptest::collection::vec((0u8..3, 0u8..42), 1..30),
        ) {
            let built: Vec<VecIter> = children
                .iter()
                .enumerate()
                .map(|(c, keys)| {
                    VecIter::new(keys.iter().map(|k| (vec![*k], vec![c as u8])).collect())
                })
                .collect();
            let mut model: std::collections::BTreeMap<u8, u8> = Default::default();
            for (c, keys) in children.iter().enumerate().rev() {
                for k in keys {
                    model.insert(*k, c as u8);
                }
            }
            let mut m = MergeIter::new(built);
            m.seek(b"").unwrap();
            let mut at: Option<u8> = model.keys().next().copied();
            for (op, k) in ops {
                let want = match op {
                    // A seek, anywhere.
                    0 => {
                        m.seek(&[k]).unwrap();
                        model.range(k..).next()
                    }
                    // A few steps.
                    _ => {
                        let steps = usize::from(k % 6);
                        for _ in 0..steps {
                            if m.valid() {
                                m.next().unwrap();
                            }
                        }
                        at.and_then(|a| model.range(a..).nth(steps))
                    }
                };
                let got = m.valid().then(|| (m.key()[0], m.value()[0]));
                proptest::prop_assert_eq!(got, want.map(|(k, c)| (*k, *c)));
                at = got.map(|g| g.0);
                if got.is_none() {
                    m.seek(b"").unwrap();
                    at = model.keys().next().copied();
                }
            }
        }
    }

    /// A child that counts its seeks.
    struct Counting(VecIter, std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl CellIter for Counting {
        fn seek(&mut self, key: &[u8]) -> Result<()> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.seek(key)
        }
        fn valid(&self) -> bool {
            self.0.valid()
        }
        fn key(&self) -> &[u8] {
            self.0.key()
        }
        fn value(&self) -> &[u8] {
            self.0.value()
        }
        fn next(&mut self) -> Result<()> {
            self.0.next()
        }
    }

    proptest::proptest! {
        /// Any sequence of seeks (forward and back) and steps over children with shared keys
        /// gives what a sorted set of all their keys gives.
        #[test]
        fn seeks_and_steps_match_a_sorted_set(
            children in proptest::collection::vec(
                proptest::collection::btree_set(0u8..40, 0..12), 1..4),
            ops in proptest::collection::vec((proptest::bool::ANY, 0u8..44), 1..40),
        ) {
            let all: std::collections::BTreeSet<u8> = children.iter().flatten().copied().collect();
            let key = |k: u8| vec![b'k', k];
            let mut m = MergeIter::new(children.iter().map(|c| {
                VecIter::new(c.iter().map(|&k| (key(k), key(k))).collect())
            }).collect());
            m.seek(b"").unwrap();
            let mut at = all.iter().next().copied();
            for (is_seek, k) in ops {
                if is_seek {
                    m.seek(&key(k)).unwrap();
                    at = all.range(k..).next().copied();
                } else if let Some(a) = at {
                    m.next().unwrap();
                    at = all.range(a + 1..).next().copied();
                }
                proptest::prop_assert_eq!(m.valid().then(|| m.key().to_vec()), at.map(key));
            }
        }
    }

    #[test]
    fn a_forward_seek_leaves_children_already_past_it() {
        let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = |keys: &[&str]| Counting(v(keys), n.clone());
        let mut m = MergeIter::new(vec![c(&["a", "b", "x"]), c(&["m", "y"]), c(&[])]);
        m.seek(b"").unwrap();
        let seeks = |n: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
            n.swap(0, std::sync::atomic::Ordering::Relaxed)
        };
        assert_eq!(seeks(&n), 3);
        // From "a" to "c": only the first child is behind it; the exhausted one stays put.
        m.seek(b"c").unwrap();
        assert_eq!(seeks(&n), 1);
        assert_eq!(drain(&mut m), ["m", "x", "y"]);
        // Back to "b": every child.
        m.seek(b"b").unwrap();
        assert_eq!(seeks(&n), 3);
        assert_eq!(drain(&mut m), ["b", "m", "x", "y"]);
    }

    /// A child that parks on bounded seeks of the keys it was told to rule out.
    struct Parking(VecIter, Vec<Vec<u8>>, bool);

    impl CellIter for Parking {
        fn seek(&mut self, key: &[u8]) -> Result<()> {
            self.2 = false;
            self.0.seek(key)
        }
        fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
            if end.is_some() && self.1.iter().any(|k| k == key) {
                self.2 = true;
                return Ok(());
            }
            self.seek(key)
        }
        fn parked(&self) -> bool {
            self.2
        }
        fn valid(&self) -> bool {
            !self.2 && self.0.valid()
        }
        fn key(&self) -> &[u8] {
            self.0.key()
        }
        fn value(&self) -> &[u8] {
            self.0.value()
        }
        fn next(&mut self) -> Result<()> {
            if self.2 { Ok(()) } else { self.0.next() }
        }
    }

    #[test]
    fn a_parked_child_is_sought_again_by_the_next_forward_seek() {
        let ruled_out = vec![b"c".to_vec()];
        let mut m = MergeIter::new(vec![
            Box::new(Parking(v(&["b", "d", "e"]), ruled_out, false)) as Box<dyn CellIter>,
            Box::new(v(&["a", "c5", "z"])),
        ]);
        m.seek(b"").unwrap();
        assert_eq!(m.key(), b"a");
        // The first child parks on the bounded seek; the merge goes on with the second.
        m.seek_until(b"c", Some(b"c\x01")).unwrap();
        assert_eq!(m.key(), b"c5");
        assert!(!m.parked());
        // A forward seek: the parked child is not exhausted, so it is sought too.
        m.seek(b"c6").unwrap();
        assert_eq!(drain(&mut m), ["d", "e", "z"]);
        // Every child parked: the merge is parked, not exhausted.
        let mut m = MergeIter::new(vec![Parking(v(&["b"]), vec![b"a".to_vec()], false)]);
        m.seek_until(b"a", Some(b"a\x01")).unwrap();
        assert!(!m.valid() && m.parked());
    }

    #[test]
    fn bounded() {
        let mut b = BoundedIter::new(
            v(&["a", "b", "c", "d"]),
            Some(b"b".to_vec()),
            Some(b"d".to_vec()),
        );
        b.seek(b"").unwrap();
        assert_eq!(drain(&mut b), ["b", "c"]);
    }
}
