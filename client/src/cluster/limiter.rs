//! [`Limiter`]: the row and cell limits and offsets of one scan interval, applied on the client
//! as the engine would, judging packed blocks in place and resuming a part that broke off.

use ::proto::rs::messages::{PackedCells, ScanCellRef};
use common::ScanSpec;

/// The row limits and offsets of one interval, applied here when its cells come from several
/// servers (the engine's rule: a row counts when its first cell passes the other filters).
/// Scan iterators and value predicates run in the servers, before the engine would apply the
/// limits, so the cells judged here are already their output: counting what arrives is the
/// engine's count (LIMIT counts matching rows).
///
/// It also remembers where the interval got to, so that a part that breaks off (its range
/// server died) can resume without repeating a cell: the last cell judged (row, family,
/// qualifier) and how many of its versions were judged. A resumed part starts again at that
/// row; [`Limiter::resume`] makes it pass over the cells judged before (cells come in row,
/// family, qualifier order; versions of one cell in the family's time order). That holds with
/// value predicates and row iterators too: they decide per row, and a resumed part starts at a
/// row's first cell, so the row's output comes again as it came before.
pub(super) struct Limiter {
    row_limit: u64,
    row_offset: u64,
    cell_limit: u64,
    cell_offset: u64,
    rows_started: u64,
    cells_passed: u64,
    cells_returned: u64,
    cur_row: Option<Vec<u8>>,
    /// Whether `cur_row` counted as a row (a cell of it passed CELL_OFFSET).
    row_counted: bool,
    /// The last cell judged: family, qualifier (its row is `cur_row`) and versions judged.
    last_cell: Option<(u8, Vec<u8>, u64)>,
    /// Cells judged in all.
    pub(super) judged: u64,
    /// While resuming: the versions of `last_cell` passed over so far.
    resuming: Option<u64>,
}

/// Where a cell stands relative to the resume point.
enum Seen {
    Before,
    Version,
    After,
}

enum Verdict {
    Take,
    Skip,
    Stop,
}

impl Limiter {
    pub(super) fn new(spec: &ScanSpec) -> Self {
        Self {
            row_limit: spec.row_limit,
            row_offset: spec.row_offset,
            cell_limit: spec.cell_limit,
            cell_offset: spec.cell_offset,
            rows_started: 0,
            cells_passed: 0,
            cells_returned: 0,
            cur_row: None,
            row_counted: false,
            last_cell: None,
            judged: 0,
            resuming: None,
        }
    }

    /// Makes the next cells pass over what was judged before; the row to start the resumed
    /// part at (`None`: nothing judged yet, start where the part started).
    pub(super) fn resume(&mut self) -> Option<Vec<u8>> {
        self.last_cell.as_ref()?;
        self.resuming = Some(0);
        self.cur_row.clone()
    }

    /// While resuming: whether `cell` was judged before (and is passed over). The first cell
    /// past the resume point ends the resuming.
    fn judged_before(&mut self, cell: &ScanCellRef<'_>) -> bool {
        let Some(passed) = self.resuming else {
            return false;
        };
        let (Some(row), Some((family, qualifier, versions))) = (&self.cur_row, &self.last_cell)
        else {
            self.resuming = None;
            return false;
        };
        let seen = match cell
            .row
            .cmp(row.as_slice())
            .then(cell.family.cmp(family))
            .then(cell.qualifier.cmp(qualifier.as_slice()))
        {
            std::cmp::Ordering::Less => Seen::Before,
            std::cmp::Ordering::Equal if passed < *versions => Seen::Version,
            _ => Seen::After,
        };
        match seen {
            Seen::Before => true,
            Seen::Version => {
                self.resuming = Some(passed + 1);
                true
            }
            Seen::After => {
                self.resuming = None;
                false
            }
        }
    }

    /// Records `cell` as judged (`new_row`: the first judged of its row).
    fn note(&mut self, cell: &ScanCellRef<'_>, new_row: bool) {
        self.judged += 1;
        match &mut self.last_cell {
            Some((f, q, n)) if !new_row && *f == cell.family && q.as_slice() == cell.qualifier => {
                *n += 1
            }
            Some((f, q, n)) => {
                *f = cell.family;
                q.clear();
                q.extend_from_slice(cell.qualifier);
                *n = 1;
            }
            None => self.last_cell = Some((cell.family, cell.qualifier.to_vec(), 1)),
        }
    }

    /// Judges a block's cells in place: the runs of cells taken (as their own readers, without
    /// decoding them) and whether the limits ended the interval.
    pub(super) fn judge_block(
        &mut self,
        block: PackedCells,
    ) -> std::result::Result<(Vec<PackedCells>, bool), String> {
        let mut runs = Vec::new();
        // The run of taken cells being built: its start offset, first index and length.
        let mut run: Option<(usize, u32, u32)> = None;
        // Ends the run (if any) at byte `end` of the block.
        let close = |run: &mut Option<(usize, u32, u32)>, end: usize, runs: &mut Vec<_>| {
            if let Some((from, first, n)) = run.take() {
                runs.push(block.slice(from, end, n, first));
            }
        };
        let mut cells = block.clone();
        loop {
            let (at, index) = (cells.offset(), cells.index());
            let Some(cell) = cells.next_ref()? else {
                break;
            };
            if self.judged_before(&cell) {
                close(&mut run, at, &mut runs);
                continue;
            }
            let new_row = self.cur_row.as_deref() != Some(cell.row);
            let verdict = self.judge(cell.row);
            self.note(&cell, new_row);
            match verdict {
                Verdict::Take => match &mut run {
                    Some((_, _, n)) => *n += 1,
                    None => run = Some((at, index, 1)),
                },
                Verdict::Skip => close(&mut run, at, &mut runs),
                Verdict::Stop => {
                    close(&mut run, at, &mut runs);
                    return Ok((runs, true));
                }
            }
        }
        close(&mut run, cells.offset(), &mut runs);
        Ok((runs, false))
    }

    fn judge(&mut self, row: &[u8]) -> Verdict {
        if self.cur_row.as_deref() != Some(row) {
            let cur = self.cur_row.get_or_insert_with(Vec::new);
            cur.clear();
            cur.extend_from_slice(row);
            self.row_counted = false;
        }
        // Cells skipped by CELL_OFFSET start no row (the engine's rule).
        if self.cells_passed < self.cell_offset {
            self.cells_passed += 1;
            return Verdict::Skip;
        }
        if !self.row_counted {
            self.row_counted = true;
            self.rows_started += 1;
            if self.row_limit > 0
                && self.rows_started > self.row_offset.saturating_add(self.row_limit)
            {
                return Verdict::Stop;
            }
        }
        if self.rows_started <= self.row_offset {
            return Verdict::Skip;
        }
        if self.cell_limit > 0 && self.cells_returned >= self.cell_limit {
            return Verdict::Stop;
        }
        self.cells_returned += 1;
        Verdict::Take
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::proto::rs::messages::encode_scan_cell;
    use common::key::{Cell, CellFlag, Key, KeyRef};
    use proptest::prelude::*;

    fn pack(cells: &[Cell]) -> PackedCells {
        let mut buf = Vec::new();
        for c in cells {
            let enc = c.key.encode();
            encode_scan_cell(&KeyRef::new(&enc).unwrap(), &c.value, &mut buf);
        }
        PackedCells::new(buf.into(), cells.len() as u32)
    }

    /// What the engine's rule takes: skip `cell_offset` cells (they start no row), then
    /// `row_offset` rows, then `row_limit` rows; of their cells `cell_limit` (0: no limit).
    fn engine_rule(cells: &[Cell], spec: &ScanSpec) -> Vec<Cell> {
        let cells: Vec<&Cell> = cells.iter().skip(spec.cell_offset as usize).collect();
        let mut rows: Vec<&Vec<u8>> = cells.iter().map(|c| &c.key.row).collect();
        rows.dedup();
        let no_limit = |n: u64| if n == 0 { usize::MAX } else { n as usize };
        let kept: Vec<&Vec<u8>> = rows
            .into_iter()
            .skip(spec.row_offset as usize)
            .take(no_limit(spec.row_limit))
            .collect();
        cells
            .into_iter()
            .filter(|c| kept.contains(&&c.key.row))
            .take(no_limit(spec.cell_limit))
            .cloned()
            .collect()
    }

    proptest! {
        /// A limiter judging blocks in place takes exactly what the engine's rule takes,
        /// however the cells are cut into blocks and wherever the stream breaks off: each
        /// resumed part starts again at the row the limiter names (as a range server would),
        /// and no cell comes twice or goes missing, versions of one cell included.
        #[test]
        fn judged_blocks_take_what_the_limits_allow_through_broken_parts(
            shape in prop::collection::vec((1usize..4, 1usize..4), 0..10),
            block_len in 1usize..7,
            breaks in prop::collection::vec(0usize..5, 0..4),
            row_offset in 0u64..4,
            row_limit in 0u64..5,
            cell_offset in 0u64..4,
            cell_limit in 0u64..8,
        ) {
            // Rows of `qualifiers x versions` cells, newest version first.
            let mut cells = Vec::new();
            for (r, (qualifiers, versions)) in shape.iter().enumerate() {
                for q in 0..*qualifiers {
                    for v in 0..*versions {
                        cells.push(Cell {
                            key: Key {
                                row: format!("row{r:02}").into_bytes(),
                                family: 1,
                                qualifier: format!("q{q}").into_bytes(),
                                timestamp: 100 - v as i64,
                                revision: 9,
                                flag: CellFlag::Insert,
                            },
                            value: format!("v{r}.{q}.{v}").into_bytes(),
                        });
                    }
                }
            }
            let spec = ScanSpec { row_offset, row_limit, cell_offset, cell_limit, ..Default::default() };
            let mut limiter = Limiter::new(&spec);
            let mut got = Vec::new();
            // Each attempt streams from `start` and breaks off after `breaks[i]` blocks.
            let mut start = 0usize;
            let mut breaks = breaks.into_iter();
            'attempts: loop {
                let limit = breaks.next();
                let mut sent = 0usize;
                let mut at = start;
                loop {
                    if Some(sent) == limit {
                        // Broken off: resume where the limiter says.
                        if let Some(row) = limiter.resume() {
                            start = cells.iter().position(|c| c.key.row == row).unwrap();
                        }
                        continue 'attempts;
                    }
                    if at >= cells.len() {
                        break 'attempts;
                    }
                    let end = (at + block_len).min(cells.len());
                    let (runs, stop) = limiter.judge_block(pack(&cells[at..end])).unwrap();
                    for mut run in runs {
                        while let Some(c) = run.next_cell().unwrap() {
                            got.push(c);
                        }
                    }
                    if stop {
                        break 'attempts;
                    }
                    at = end;
                    sent += 1;
                }
            }
            prop_assert_eq!(got, engine_rule(&cells, &spec));
        }
    }

    /// Issue 12: `OFFSET 1 LIMIT 18446744073709551615` returned nothing (offset + limit wrapped).
    #[test]
    fn limiter_offset_plus_limit_saturates() {
        let spec = ScanSpec {
            row_offset: 1,
            row_limit: u64::MAX,
            ..Default::default()
        };
        let mut l = Limiter::new(&spec);
        assert!(matches!(l.judge(b"a"), Verdict::Skip));
        for row in [&b"b"[..], b"c", b"d"] {
            assert!(matches!(l.judge(row), Verdict::Take));
        }
    }
}
