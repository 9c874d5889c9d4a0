//! The seekable cursor every sorted source of cells implements (cell cache, cell store, merge).
//!
//! Keys are encoded keys (`common::key`), so sources compare them with plain byte order.

use crate::error::Result;

/// A cursor over cells in ascending key order, in the style of LevelDB's iterators.
///
/// After `seek` or `next`, `valid()` says whether the cursor stands on a cell; `key()` and
/// `value()` may only be called while it does.
pub trait CellIter: Send {
    /// Positions the cursor at the first cell whose key is `>= key`. Sources backed by files use
    /// their index to skip whole blocks rather than read past cells.
    fn seek(&mut self, key: &[u8]) -> Result<()>;
    /// [`CellIter::seek`] for a caller that reads no key at or past `end` (`None`: no end). A
    /// source that steps over cells it rejects (`scan::candidates`) stops at the first key at or
    /// past `end` instead of reading on to the next cell it would keep, which could lie anywhere
    /// further on; the caller treats such a key as the end. `next` keeps to the same end until
    /// the next seek.
    fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
        let _ = end;
        self.seek(key)
    }
    /// True when the cursor stands on no cell only because a bounded seek
    /// ([`CellIter::seek_until`]) proved its interval empty without positioning (a cell store
    /// whose row bloom filter rules out the one row sought): it is not exhausted, and the next
    /// seek must move it.
    fn parked(&self) -> bool {
        false
    }
    /// False only when the source holds no row delete and no column-family delete: a seek
    /// into the middle of a row can then go straight to its target, as no cell before it in
    /// the row can hide one after it (`scan::visible` otherwise starts at the row's first key).
    fn may_hold_wide_deletes(&self) -> bool {
        true
    }
    /// False only when the source holds no delete of any kind: every cell is then an insert,
    /// and a cell exists for a reader as soon as one of its versions does (see
    /// `KvIter::raw_copy`).
    fn may_hold_deletes(&self) -> bool {
        true
    }
    /// True while the cursor stands on a cell.
    fn valid(&self) -> bool;
    /// The encoded key of the current cell.
    fn key(&self) -> &[u8];
    /// The value of the current cell.
    fn value(&self) -> &[u8];
    /// Moves to the next cell.
    fn next(&mut self) -> Result<()>;
    /// Where the current cell is stored, for the error about a value that turns out damaged
    /// above the source (a combiner that cannot read it): a cell store's path and the file
    /// offset of the block holding the cell. `None` for cells in memory.
    fn origin(&self) -> Option<(String, u64)> {
        None
    }
}

impl<T: CellIter + ?Sized> CellIter for Box<T> {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        (**self).seek(key)
    }
    fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
        (**self).seek_until(key, end)
    }
    fn parked(&self) -> bool {
        (**self).parked()
    }
    fn may_hold_wide_deletes(&self) -> bool {
        (**self).may_hold_wide_deletes()
    }
    fn may_hold_deletes(&self) -> bool {
        (**self).may_hold_deletes()
    }
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn origin(&self) -> Option<(String, u64)> {
        (**self).origin()
    }
}

/// A cursor over a sorted vector of owned cells (tests, small in-memory sources).
#[derive(Debug, Default)]
pub struct VecIter {
    cells: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    /// Some cell is a row or column-family delete.
    wide_deletes: bool,
    /// Some cell is a delete.
    deletes: bool,
}

impl VecIter {
    /// `cells` must be sorted by key.
    pub fn new(cells: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        debug_assert!(cells.windows(2).all(|w| w[0].0 <= w[1].0));
        let wide_deletes = cells.iter().any(|(k, _)| common::key::is_wide_delete(k));
        let deletes = cells.iter().any(|(k, _)| common::key::is_delete(k));
        Self {
            pos: cells.len(),
            cells,
            wide_deletes,
            deletes,
        }
    }
}

impl CellIter for VecIter {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.pos = self.cells.partition_point(|(k, _)| k.as_slice() < key);
        Ok(())
    }
    fn may_hold_wide_deletes(&self) -> bool {
        self.wide_deletes
    }
    fn may_hold_deletes(&self) -> bool {
        self.deletes
    }
    fn valid(&self) -> bool {
        self.pos < self.cells.len()
    }
    fn key(&self) -> &[u8] {
        &self.cells[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.cells[self.pos].1
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
}
