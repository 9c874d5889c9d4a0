//! [`ClusterScanner`] and [`scan_table`]: a scan interval by interval and run by run of ranges on
//! one server, the limits applied here, a part whose server died resumed where it broke off.

use std::ops::Bound;
use std::sync::Arc;

use ::proto::rs::client::RsError;
use ::proto::rs::messages::PackedCells;
use common::key::Cell;
use common::scan_spec::{CellInterval, CellPos, RowInterval};
use common::{ErrorKind, RowRange, ScanSpec, row_range};
use tokio::sync::mpsc;

use super::Inner;
use super::errors::unreachable_server;
use super::limiter::Limiter;
use super::locations::locate;
use super::retry::Attempt;
use crate::{ClientError, Result, TableScanner};

pub(super) struct ClusterScanner {
    /// Blocks of cells from `scan_table`, never empty; an error ends the scan.
    rx: mpsc::Receiver<Result<PackedCells>>,
    /// What is left of the last block received. Its cells are decoded here, on the reader's
    /// thread, which also frees them.
    block: PackedCells,
    done: bool,
}

impl ClusterScanner {
    /// Starts `scan_table` on `rt`, feeding the scanner returned.
    pub(super) fn start(
        inner: Arc<Inner>,
        rt: &tokio::runtime::Handle,
        table_id: u32,
        spec: ScanSpec,
    ) -> Self {
        let (tx, rx) = mpsc::channel(inner.opts.scan_queue_blocks.max(1));
        rt.spawn(async move {
            let res = scan_table(&inner, table_id, spec, &tx).await;
            if let Err(e) = res {
                let _ = tx.send(Err(e)).await;
            }
        });
        Self {
            rx,
            block: PackedCells::new(Default::default(), 0),
            done: false,
        }
    }
}

impl TableScanner for ClusterScanner {
    fn next_cell(&mut self) -> Result<Option<Cell>> {
        loop {
            match self.block.next_cell() {
                Ok(Some(c)) => return Ok(Some(c)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    self.block = PackedCells::new(Default::default(), 0);
                    return Err(ClientError::storage(
                        ErrorKind::Corruption,
                        format!("scan: a range server's answer is malformed: {e}"),
                    ));
                }
            }
            if self.done {
                return Ok(None);
            }
            match self.rx.blocking_recv() {
                Some(Ok(block)) => self.block = block,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                None => self.done = true,
            }
        }
    }
}

/// The row span `[start, end)` of an interval (`None`: unbounded).
fn interval_rows(i: &Interval) -> RowRange {
    match i {
        Interval::Rows(r) => RowRange::new(
            match &r.start {
                Bound::Included(s) | Bound::Excluded(s) => Some(s.clone()),
                Bound::Unbounded => None,
            },
            match &r.end {
                // Rows up to and including `e`: the span ends just after it.
                Bound::Included(e) => Some(row_successor(e)),
                Bound::Excluded(e) => Some(e.clone()),
                Bound::Unbounded => None,
            },
        ),
        Interval::Cells(c) => RowRange::new(
            match &c.start {
                Bound::Included(p) | Bound::Excluded(p) => Some(p.row.clone()),
                Bound::Unbounded => None,
            },
            match &c.end {
                Bound::Included(p) | Bound::Excluded(p) => Some(row_successor(&p.row)),
                Bound::Unbounded => None,
            },
        ),
    }
}

/// The smallest row above `r`.
fn row_successor(r: &[u8]) -> Vec<u8> {
    let mut s = r.to_vec();
    s.push(0);
    s
}

#[derive(Clone)]
enum Interval {
    Rows(RowInterval),
    Cells(CellInterval),
}

impl Interval {
    /// The encoded key it starts at (the order the engine processes intervals in).
    fn start_key(&self) -> Vec<u8> {
        match self {
            Self::Rows(r) => r.start_key(),
            Self::Cells(c) => c.start_key(),
        }
    }

    /// The interval cut to the rows `[start, end)`.
    fn clamp(&self, start: &Option<Vec<u8>>, end: &Option<Vec<u8>>) -> Interval {
        match self {
            Self::Rows(r) => {
                let mut r = r.clone();
                if let Some(s) = start {
                    let below = match &r.start {
                        Bound::Included(x) | Bound::Excluded(x) => x < s,
                        Bound::Unbounded => true,
                    };
                    if below {
                        r.start = Bound::Included(s.clone());
                    }
                }
                if let Some(e) = end {
                    let beyond = match &r.end {
                        Bound::Included(x) | Bound::Excluded(x) => x >= e,
                        Bound::Unbounded => true,
                    };
                    if beyond {
                        r.end = Bound::Excluded(e.clone());
                    }
                }
                Self::Rows(r)
            }
            Self::Cells(c) => {
                let mut c = c.clone();
                let row_pos = |row: &Vec<u8>| CellPos {
                    row: row.clone(),
                    family: 0,
                    qualifier: Vec::new(),
                };
                if let Some(s) = start {
                    let below = match &c.start {
                        Bound::Included(p) | Bound::Excluded(p) => &p.row < s,
                        Bound::Unbounded => true,
                    };
                    if below {
                        c.start = Bound::Included(row_pos(s));
                    }
                }
                if let Some(e) = end {
                    let beyond = match &c.end {
                        Bound::Included(p) | Bound::Excluded(p) => &p.row >= e,
                        Bound::Unbounded => true,
                    };
                    if beyond {
                        c.end = Bound::Excluded(row_pos(e));
                    }
                }
                Self::Cells(c)
            }
        }
    }
}

/// Streams a table scan into `tx`, block by block: interval by interval and server by server,
/// with the limits applied here.
pub(super) async fn scan_table(
    inner: &Inner,
    table_id: u32,
    spec: ScanSpec,
    tx: &mpsc::Sender<Result<PackedCells>>,
) -> Result<()> {
    let mut intervals: Vec<Interval> = spec
        .row_intervals
        .iter()
        .cloned()
        .map(Interval::Rows)
        .chain(spec.cell_intervals.iter().cloned().map(Interval::Cells))
        .collect();
    if intervals.is_empty() {
        intervals.push(Interval::Rows(RowInterval::all()));
    }
    intervals.sort_by_key(|i| i.start_key());
    for interval in intervals {
        let span = interval_rows(&interval);
        let mut limiter = Limiter::new(&spec);
        // Bounds the retries of one part of the scan (reset when a part completes).
        let mut backoff = inner.backoff();
        // Where the next part of this interval starts (rows below it are done).
        let mut from: Option<Vec<u8>> = span.start.clone();
        loop {
            let part = inner
                .retrying("scan", || async {
                    let ranges = inner.ranges(table_id).await?;
                    // The run of consecutive ranges on one server starting at `from`.
                    let first = locate(&ranges, from.as_deref().unwrap_or(b""));
                    let mut end = first.end_row.clone();
                    for r in ranges.iter().skip_while(|r| *r != first).skip(1) {
                        if r.location != first.location
                            || !row_range::overlaps(
                                &span.start,
                                &span.end,
                                &r.start_row,
                                &r.end_row,
                            )
                        {
                            break;
                        }
                        end = r.end_row.clone();
                    }
                    Ok((first.location.clone(), end))
                })
                .await?;
            let (location, run_end) = part;
            let clamped = interval.clamp(&from, &run_end);
            let mut part_spec = spec.clone();
            part_spec.row_intervals.clear();
            part_spec.cell_intervals.clear();
            match clamped {
                Interval::Rows(r) => part_spec.row_intervals.push(r),
                Interval::Cells(c) => part_spec.cell_intervals.push(c),
            }
            part_spec.row_limit = 0;
            part_spec.row_offset = 0;
            part_spec.cell_limit = 0;
            part_spec.cell_offset = 0;
            let mut stream = match inner.server(&location).await {
                Ok(s) => s.scan(table_id, &part_spec).await.map_err(|e| (0, e)),
                Err(e) => Err((0, unreachable_server(e))),
            };
            let mut taken = 0u64;
            let judged_before = limiter.judged;
            let mut stop = false;
            let mut failure = None;
            if let Ok(s) = &mut stream {
                loop {
                    match s.next_block().await {
                        Ok(Some(block)) => {
                            taken += u64::from(block.remaining());
                            let (runs, end) = match limiter.judge_block(block) {
                                Ok(judged) => judged,
                                Err(e) => {
                                    failure = Some(RsError::BadReply(e));
                                    break;
                                }
                            };
                            for run in runs {
                                if tx.send(Ok(run)).await.is_err() {
                                    // The reader went away.
                                    return Ok(());
                                }
                            }
                            if end {
                                stop = true;
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                }
            } else if let Err((_, e)) = stream {
                failure = Some(e);
            }
            if let Some(e) = failure {
                if let RsError::BadReply(why) = &e {
                    return Err(ClientError::storage(
                        ErrorKind::Corruption,
                        format!(
                            "scan of table {table_id}: range server {location} sent a malformed block after {taken} cells: {why}"
                        ),
                    ));
                }
                match inner.rs_failure(&location, table_id, e) {
                    Attempt::Fatal(e) => return Err(e),
                    Attempt::Retry(why) => {
                        if taken > 0 {
                            // The part broke off after some cells: it resumes at the row of the
                            // last cell judged, passing over what was judged before.
                            if let Some(row) = limiter.resume() {
                                from = Some(row);
                            }
                        }
                        if limiter.judged > judged_before {
                            // It got somewhere: a fresh retry budget.
                            backoff = inner.backoff();
                        }
                        // Locations were dropped; the next attempt finds the new ones.
                        backoff.wait("scan", why).await?;
                        continue;
                    }
                }
            }
            if stop {
                break;
            }
            backoff = inner.backoff();
            let past_span = match (&run_end, &span.end) {
                (None, _) => true,
                (Some(e), Some(s)) => e >= s,
                (Some(_), None) => false,
            };
            if past_span {
                break;
            }
            from = run_end;
        }
    }
    Ok(())
}
