//! Candidate rows: the value predicates of a scan judged on an access group's raw cells, under
//! [`super::visible::VisibleCells`], so that rows that cannot match never reach the visibility
//! rules, the iterator stack or the predicate filter above them.
//!
//! A row can match a scan's value predicates only through a visible cell of a tested family,
//! and in a family without a combiner every visible cell is a raw cell with the same key and
//! value (deletes, versions, TTL and time bounds only take cells away). So a row none of whose
//! raw cells passes a test has no visible cell that does either, and it is stepped over here.
//! Rows with a raw cell that passes go up whole; the filter above judges them exactly.
//!
//! The engine puts this under one access group only when it holds every tested family, none of
//! them has a combiner and no iterator runs between the visible cells and the predicate filter
//! (`StackPlan::candidate_group` in `engine/read.rs`). Rows are never buffered: a row whose
//! first passing cell is not its first cell is sought again from its start.

use common::key::KeyRef;

use crate::error::{Error, Result};
use crate::iter::CellIter;
use crate::iterators::rows::PredicateTests;

/// A source that shows only the rows with a cell passing one of `tests`, and rows it was sought
/// into the middle of (their start was not seen, so they pass unjudged).
pub struct CandidateRows<I: CellIter> {
    src: I,
    tests: PredicateTests,
    /// The encoded row prefix whose cells pass; empty for none.
    pass_row: Vec<u8>,
    /// The row being judged, and whether cells of it were stepped over.
    probe_row: Vec<u8>,
    probe_skipped: bool,
    /// The end of the last seek ([`CellIter::seek_until`]): no row at or past it is judged.
    end: Option<Vec<u8>>,
}

impl<I: CellIter> CandidateRows<I> {
    pub fn new(src: I, tests: PredicateTests) -> Self {
        Self {
            src,
            tests,
            pass_row: Vec::new(),
            probe_row: Vec::new(),
            probe_skipped: false,
            end: None,
        }
    }

    /// From a cell at or after the start of its row: stands on the next cell of a passing row.
    fn settle(&mut self) -> Result<()> {
        while self.src.valid() {
            let key = self.src.key();
            if self.end.as_deref().is_some_and(|e| key >= e) {
                // Past what the caller reads: stand here rather than look for a passing row
                // that could lie anywhere further on.
                return Ok(());
            }
            if !self.pass_row.is_empty() {
                if key.starts_with(&self.pass_row) {
                    return Ok(());
                }
                // Past it (rows only grow until the next seek).
                self.pass_row.clear();
            }
            let k = KeyRef::from_trusted(key).map_err(|e| self.damaged(e.to_string()))?;
            let row = k.row_prefix();
            if !key.starts_with(&self.probe_row) || self.probe_row.is_empty() {
                self.probe_row.clear();
                self.probe_row.extend_from_slice(row);
                self.probe_skipped = false;
            }
            if self.tests.matches(&k, self.src.value()) {
                std::mem::swap(&mut self.pass_row, &mut self.probe_row);
                self.probe_row.clear();
                if self.probe_skipped {
                    // Back to the row's first cell: every cell of a passing row goes up.
                    self.src.seek_until(&self.pass_row, self.end.as_deref())?;
                }
                return Ok(());
            }
            self.probe_skipped = true;
            self.src.next()?;
        }
        Ok(())
    }

    fn damaged(&self, msg: String) -> Error {
        super::visible::damaged(&self.src, format!("bad key {:?}: {msg}", self.src.key()))
    }
}

impl<I: CellIter> CellIter for CandidateRows<I> {
    fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.seek_until(key, None)
    }
    fn seek_until(&mut self, key: &[u8], end: Option<&[u8]>) -> Result<()> {
        match (end, &mut self.end) {
            (None, e) => *e = None,
            (Some(end), Some(e)) => {
                e.clear();
                e.extend_from_slice(end);
            }
            (Some(end), e) => *e = Some(end.to_vec()),
        }
        self.src.seek_until(key, end)?;
        self.pass_row.clear();
        self.probe_row.clear();
        if !self.src.valid() {
            return Ok(());
        }
        let here = KeyRef::from_trusted(self.src.key()).map_err(|e| self.damaged(e.to_string()))?;
        let row = here.row_prefix();
        if key > row {
            // Sought into the row: cells before `key` were not seen, so it cannot be judged.
            self.pass_row.extend_from_slice(row);
            return Ok(());
        }
        self.settle()
    }
    fn valid(&self) -> bool {
        self.src.valid()
    }
    fn key(&self) -> &[u8] {
        self.src.key()
    }
    fn value(&self) -> &[u8] {
        self.src.value()
    }
    fn next(&mut self) -> Result<()> {
        self.src.next()?;
        self.settle()
    }
    fn origin(&self) -> Option<(String, u64)> {
        self.src.origin()
    }
}

#[cfg(test)]
mod tests {
    use common::iterators::{ValuePredicate, ValuePredicates, ValueTest};
    use common::key::{CellFlag, encode_parts};

    use super::*;
    use crate::iter::VecIter;

    fn key(row: &str, family: u8, q: &str, flag: CellFlag, ts: i64) -> Vec<u8> {
        let mut k = Vec::new();
        encode_parts(row.as_bytes(), family, q.as_bytes(), flag, ts, 1, &mut k);
        k
    }

    fn cell(row: &str, family: u8, q: &str, flag: CellFlag, v: &str) -> (Vec<u8>, Vec<u8>) {
        (key(row, family, q, flag, 5), v.as_bytes().to_vec())
    }

    fn rows_of(it: &mut CandidateRows<VecIter>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while it.valid() {
            let k = KeyRef::from_trusted(it.key()).unwrap();
            out.push((
                String::from_utf8(k.row().to_vec()).unwrap(),
                String::from_utf8(it.value().to_vec()).unwrap(),
            ));
            it.next().unwrap();
        }
        out
    }

    fn equals(family: u8, v: &str) -> PredicateTests {
        PredicateTests::new(&ValuePredicates {
            tests: vec![ValuePredicate {
                family,
                qualifier: None,
                test: ValueTest::Equals(v.as_bytes().to_vec()),
            }],
            output: Vec::new(),
        })
    }

    #[test]
    fn only_rows_with_a_passing_cell_go_up_whole() {
        use CellFlag::*;
        let cells = vec![
            cell("a", 1, "", Insert, "no"),
            cell("b", 1, "x", Insert, "no"),
            cell("b", 1, "y", Insert, "yes"),
            cell("b", 2, "", Insert, "other"),
            cell("c", 1, "", DeleteCell, "yes"),
            cell("d", 2, "", Insert, "yes"),
            cell("e", 1, "", Insert, "yes"),
        ];
        let mut it = CandidateRows::new(VecIter::new(cells.clone()), equals(1, "yes"));
        it.seek(b"").unwrap();
        let got = rows_of(&mut it);
        let want: Vec<(String, String)> = [("b", "no"), ("b", "yes"), ("b", "other"), ("e", "yes")]
            .iter()
            .map(|(r, v)| (r.to_string(), v.to_string()))
            .collect();
        // Row b's first cell fails, so the row is sought again from its start; a delete (c) and
        // a passing value in an untested family (d) do not make a row a candidate.
        assert_eq!(got, want);

        // Sought into the middle of row a: it passes unjudged.
        let mid = key("a", 1, "", CellFlag::Insert, 6);
        it.seek(&mid).unwrap();
        assert_eq!(rows_of(&mut it)[0], ("a".to_string(), "no".to_string()));
        // Sought to a row's start: judged.
        it.seek(&common::key::row_end(b"a")).unwrap();
        assert_eq!(rows_of(&mut it)[0].0, "b");
    }

    #[test]
    fn a_bounded_seek_stops_at_its_end_instead_of_looking_further_for_a_passing_row() {
        use CellFlag::*;
        // No row but the last passes.
        let mut cells: Vec<_> = (0..50)
            .map(|i| cell(&format!("r{i:02}"), 1, "", Insert, "no"))
            .collect();
        cells.push(cell("z", 1, "", Insert, "yes"));
        let mut it = CandidateRows::new(VecIter::new(cells), equals(1, "yes"));
        // One row's interval: the cursor stops on the first key past it, not on row z.
        let end = common::key::row_end(b"r03");
        it.seek_until(&common::key::row_start(b"r03"), Some(&end))
            .unwrap();
        assert!(it.valid());
        assert_eq!(&*KeyRef::from_trusted(it.key()).unwrap().row(), b"r04");
        // A plain seek forgets the end and judges on to the passing row.
        it.seek(&common::key::row_start(b"r03")).unwrap();
        assert_eq!(&*KeyRef::from_trusted(it.key()).unwrap().row(), b"z");
        // Failing rows inside the interval are stepped over, up to its end.
        let end = common::key::row_end(b"r10");
        it.seek_until(&common::key::row_start(b"r08"), Some(&end))
            .unwrap();
        assert_eq!(&*KeyRef::from_trusted(it.key()).unwrap().row(), b"r11");
    }
}
