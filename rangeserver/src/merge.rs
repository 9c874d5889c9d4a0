//! Merging several sorted cursors into one, and clamping a cursor to a key interval.

use common::key::bytes_cmp;

use crate::error::Result;
use crate::iter::CellIter;

/// A k-way merge of cursors. An exact key present in several children is returned once (from
/// the earliest child), so a cell that reached two sources is never returned twice.
pub struct MergeIter<I: CellIter> {
    children: Vec<I>,
    /// Index of the child holding the smallest key, if any is valid.
    current: Option<usize>,
}

impl<I: CellIter> MergeIter<I> {
    pub fn new(children: Vec<I>) -> Self {
        Self {
            children,
            current: None,
        }
    }

    /// Finds the child with the smallest key. A later child standing on the same key as an
    /// earlier one is moved past it, so each key is returned once.
    fn pick(&mut self) -> Result<()> {
        let mut best: Option<usize> = None;
        for i in 0..self.children.len() {
            loop {
                if !self.children[i].valid() {
                    break;
                }
                let Some(b) = best else {
                    best = Some(i);
                    break;
                };
                match bytes_cmp(self.children[b].key(), self.children[i].key()) {
                    std::cmp::Ordering::Less => break,
                    std::cmp::Ordering::Greater => {
                        best = Some(i);
                        break;
                    }
                    std::cmp::Ordering::Equal => self.children[i].next()?,
                }
            }
        }
        self.current = best;
        Ok(())
    }
}

impl<I: CellIter> MergeIter<I> {
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
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        for c in &mut self.children {
            c.seek(key)?;
        }
        self.pick()
    }

    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn key(&self) -> &[u8] {
        self.children[self.current.expect("valid cursor")].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.current.expect("valid cursor")].value()
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        // Duplicates of the current key in later children were skipped by `pick`, and no
        // earlier child can stand on it (it would have been chosen).
        self.children[cur].next()?;
        if self.children.len() == 1 {
            self.current = self.children[0].valid().then_some(0);
            return Ok(());
        }
        self.pick()
    }

    fn origin(&self) -> Option<(String, u64)> {
        self.current.and_then(|c| self.children[c].origin())
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
        match &self.lo {
            Some(lo) if key < lo.as_slice() => self.inner.seek(lo),
            _ => self.inner.seek(key),
        }
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
