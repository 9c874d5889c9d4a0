//! [`ClusterScanner`] and [`scan_table`]: a scan interval by interval and run by run of ranges on
//! one server, the limits applied here, a part whose server died resumed where it broke off.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ::proto::rs::client::RsError;
use ::proto::rs::messages::PackedCells;
use common::aggregate::{Aggregate, AggregateFold, AggregatePartial};
use common::key::Cell;
use common::scan_spec::{CellInterval, CellPos, RowInterval};
use common::{ErrorKind, RowRange, ScanSpec, row_range};
use tokio::sync::mpsc;

use super::Inner;
use super::batched::scan_batched;
use super::errors::unreachable_server;
use super::limiter::Limiter;
use super::locations::locate;
use super::retry::{Attempt, Backoff};
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
            let res = scan_table(&inner, table_id, spec, &mut Output::Cells(&tx)).await;
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

    /// Starts [`scan_unordered`](super::unordered::scan_unordered) on `rt`: a batch scanner.
    pub(super) fn start_unordered(
        inner: Arc<Inner>,
        rt: &tokio::runtime::Handle,
        table_id: u32,
        spec: ScanSpec,
        parallelism: usize,
    ) -> Self {
        let (tx, rx) = mpsc::channel(inner.opts.scan_queue_blocks.max(1));
        rt.spawn(async move {
            let res =
                super::unordered::scan_unordered(&inner, table_id, spec, parallelism, &tx).await;
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
pub(super) fn interval_rows(i: &Interval) -> RowRange {
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
pub(super) enum Interval {
    Rows(RowInterval),
    Cells(CellInterval),
}

impl Interval {
    /// The encoded key it starts at (the order the engine processes intervals in).
    pub(super) fn start_key(&self) -> Vec<u8> {
        match self {
            Self::Rows(r) => r.start_key(),
            Self::Cells(c) => c.start_key(),
        }
    }

    /// The interval cut to the rows `[start, end)`.
    pub(super) fn clamp(&self, start: &Option<Vec<u8>>, end: &Option<Vec<u8>>) -> Interval {
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

/// Where the parts of a scan go: their cells to a reader (limits applied here), or their
/// aggregate partials (`ScanSpec.aggregate`, no limits) added up.
pub(super) enum Output<'a> {
    Cells(&'a mpsc::Sender<Result<PackedCells>>),
    Aggregate {
        agg: &'a Aggregate,
        total: &'a mut AggregatePartial,
    },
}

/// Aggregates a scan without limits on the range servers: each part (a run of ranges on one
/// server, or a batch of a key set's intervals there) answers with partials, added up here.
pub(super) async fn aggregate_table(
    inner: &Inner,
    table_id: u32,
    spec: ScanSpec,
    agg: &Aggregate,
) -> Result<AggregatePartial> {
    let mut total = AggregatePartial::empty(agg);
    let mut out = Output::Aggregate {
        agg,
        total: &mut total,
    };
    scan_table(inner, table_id, spec, &mut out).await?;
    Ok(total)
}

/// Folds the cells of a block into `fold`.
pub(super) fn fold_block(
    fold: &mut AggregateFold,
    mut block: PackedCells,
) -> std::result::Result<(), String> {
    while let Some(c) = block.next_ref()? {
        fold.cell(c.row, c.family, c.qualifier, c.timestamp, c.value);
    }
    Ok(())
}

/// How one part of a scan (one `rs.scan` to one server) ended.
pub(super) enum PartEnd {
    /// The server sent all of it.
    Complete,
    /// The limits were reached: the scan is over.
    Stop,
    /// The reader went away.
    Gone,
    /// The server failed: retry. `resume` is the row to go on at when cells came before the
    /// failure (the limiter passes over those judged); `progressed` if any were judged.
    Retry {
        resume: Option<Vec<u8>>,
        progressed: bool,
        why: String,
    },
}

/// Sends `part_spec` to `location` and streams what comes back through `limiter` into `out`
/// (an aggregating part's partials are added to the total only once the part is complete; a
/// part that broke off is asked again whole).
pub(super) async fn run_part(
    inner: &Inner,
    table_id: u32,
    location: &str,
    part_spec: &ScanSpec,
    limiter: &mut Limiter,
    out: &mut Output<'_>,
) -> Result<PartEnd> {
    inner.scan_requests.fetch_add(1, Ordering::Relaxed);
    let judged_before = limiter.judged;
    let stream = match inner.server(location).await {
        Ok(s) => s.scan(table_id, part_spec).await,
        Err(e) => Err(unreachable_server(e)),
    };
    let mut taken = 0u64;
    // The cells an aggregating part got instead of partials, folded here: a server that does
    // not know aggregates (field 19) ignores it and sends the plain scan's cells.
    let mut folded: Option<AggregateFold> = None;
    let failure = match stream {
        Ok(mut s) => loop {
            match s.next_block().await {
                Ok(Some(block)) => {
                    inner
                        .scan_cells
                        .fetch_add(u64::from(block.remaining()), Ordering::Relaxed);
                    let tx = match out {
                        Output::Cells(tx) => tx,
                        Output::Aggregate { agg, .. } => {
                            let f = folded.get_or_insert_with(|| AggregateFold::new(agg));
                            match fold_block(f, block) {
                                Ok(()) => continue,
                                Err(e) => break Some(RsError::BadReply(e)),
                            }
                        }
                    };
                    taken += u64::from(block.remaining());
                    let (runs, end) = match limiter.judge_block(block) {
                        Ok(judged) => judged,
                        Err(e) => break Some(RsError::BadReply(e)),
                    };
                    for run in runs {
                        if tx.send(Ok(run)).await.is_err() {
                            return Ok(PartEnd::Gone);
                        }
                    }
                    if end {
                        return Ok(PartEnd::Stop);
                    }
                }
                Ok(None) => {
                    if let Output::Aggregate { agg, total } = out {
                        let part = match (s.take_partial(), folded.take()) {
                            (Some(_), Some(_)) => {
                                break Some(RsError::BadReply(
                                    "an aggregating scan got both partials and cells".into(),
                                ));
                            }
                            (Some(p), None) => {
                                inner.scan_partials.fetch_add(1, Ordering::Relaxed);
                                p
                            }
                            (None, Some(f)) => f.finish(),
                            (None, None) => AggregatePartial::empty(agg),
                        };
                        if let Err(e) = total.merge(&part) {
                            break Some(RsError::BadReply(e));
                        }
                    }
                    break None;
                }
                Err(e) => break Some(e),
            }
        },
        Err(e) => Some(e),
    };
    let Some(e) = failure else {
        return Ok(PartEnd::Complete);
    };
    if let RsError::BadReply(why) = &e {
        return Err(ClientError::storage(
            ErrorKind::Corruption,
            format!(
                "scan of table {table_id}: range server {location} sent a malformed block after {taken} cells: {why}"
            ),
        ));
    }
    match inner.rs_failure(location, table_id, e) {
        Attempt::Fatal(e) => Err(e),
        Attempt::Retry(why) => Ok(PartEnd::Retry {
            // A part that broke off after some cells resumes at the row of the last cell judged.
            resume: if taken > 0 { limiter.resume() } else { None },
            progressed: limiter.judged > judged_before,
            why,
        }),
    }
}

/// Waits before retrying a part that failed, with a fresh retry budget if it got somewhere
/// (locations were dropped; the next attempt finds the new ones).
pub(super) async fn retry_wait(
    inner: &Inner,
    backoff: &mut Backoff,
    progressed: bool,
    why: String,
) -> Result<()> {
    if progressed {
        *backoff = inner.backoff();
    }
    backoff.wait("scan", why).await
}

/// True if the row spans come in order and none overlaps the next: then several of them can
/// go to a server in one request and come back in the order they would one by one.
/// [`disjoint_in_order`] of row intervals that also start in order, read from their bounds:
/// each one's rows end at or before the next one's begin (only the first may start unbounded).
pub(super) fn rows_disjoint_in_order(rows: &[RowInterval]) -> bool {
    rows.windows(2).all(|w| {
        let (a, b) = (&w[0], &w[1]);
        let (Bound::Included(s) | Bound::Excluded(s)) = &b.start else {
            return false;
        };
        let starts_in_order = match &a.start {
            Bound::Included(x) => x <= s,
            Bound::Excluded(x) => x < s || (x == s && matches!(b.start, Bound::Excluded(_))),
            Bound::Unbounded => true,
        };
        // The rows of `a` end just after `e` (included) or at `e` (excluded).
        let ends_before = match &a.end {
            Bound::Included(e) => e < s,
            Bound::Excluded(e) => e <= s,
            Bound::Unbounded => false,
        };
        starts_in_order && ends_before
    })
}

fn disjoint_in_order(spans: &[RowRange]) -> bool {
    spans.windows(2).all(|w| match (&w[0].end, &w[1].start) {
        (Some(e), Some(s)) => e <= s,
        _ => false,
    })
}

/// Streams a table scan into `tx`, block by block: interval by interval and server by server,
/// with the limits applied here. Row intervals that do not overlap (key sets), without limits
/// or counted as one interval, go to each server many to a request instead ([`scan_batched`]).
pub(super) async fn scan_table(
    inner: &Inner,
    table_id: u32,
    mut spec: ScanSpec,
    out: &mut Output<'_>,
) -> Result<()> {
    let unlimited = spec.row_limit == 0
        && spec.row_offset == 0
        && spec.cell_limit == 0
        && spec.cell_offset == 0;
    // A key set already in order and disjoint (as HQL plans them) goes many to a request
    // without being copied, sorted or checked through encoded keys: the same path as below,
    // at a few comparisons per interval.
    if (unlimited || spec.one_interval)
        && spec.cell_intervals.is_empty()
        && spec.row_intervals.len() > 1
        && rows_disjoint_in_order(&spec.row_intervals)
    {
        let rows = std::mem::take(&mut spec.row_intervals);
        return scan_batched(inner, table_id, &spec, &rows, out).await;
    }
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
    intervals.sort_by_cached_key(|i| i.start_key());
    let spans: Vec<RowRange> = intervals.iter().map(interval_rows).collect();
    // Intervals that can go many to a request, and parts to several servers at once: a key
    // set, or one interval over many ranges without limits.
    if (unlimited || (spec.one_interval && intervals.len() > 1))
        && spec.cell_intervals.is_empty()
        && disjoint_in_order(&spans)
    {
        let rows: Vec<RowInterval> = intervals
            .into_iter()
            .map(|i| match i {
                Interval::Rows(r) => r,
                Interval::Cells(_) => unreachable!("no cell intervals here"),
            })
            .collect();
        return scan_batched(inner, table_id, &spec, &rows, out).await;
    }
    for (interval, span) in intervals.iter().zip(&spans) {
        let mut limiter = Limiter::new(&spec);
        // Bounds the retries of one part of the scan (reset when a part completes).
        let mut backoff = inner.backoff();
        // Where the next part of this interval starts (rows below it are done).
        let mut from: Option<Vec<u8>> = span.start.clone();
        loop {
            let (location, run_end) = server_run(inner, table_id, &from, Some(span)).await?;
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
            match run_part(inner, table_id, &location, &part_spec, &mut limiter, out).await? {
                PartEnd::Gone => return Ok(()),
                PartEnd::Stop => break,
                PartEnd::Retry {
                    resume,
                    progressed,
                    why,
                } => {
                    if let Some(row) = resume {
                        from = Some(row);
                    }
                    retry_wait(inner, &mut backoff, progressed, why).await?;
                    continue;
                }
                PartEnd::Complete => {}
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

/// The server holding the row `from` and the end of the run of consecutive ranges it holds from
/// there (`None`: the table's end), the run stopping before ranges outside `span` if given.
pub(super) async fn server_run(
    inner: &Inner,
    table_id: u32,
    from: &Option<Vec<u8>>,
    span: Option<&RowRange>,
) -> Result<(String, Option<Vec<u8>>)> {
    inner
        .retrying("scan", || async {
            let ranges = inner.ranges(table_id).await?;
            let first = locate(&ranges, from.as_deref().unwrap_or(b""));
            let mut end = first.end_row.clone();
            for r in ranges.iter().skip_while(|r| *r != first).skip(1) {
                if r.location != first.location
                    || span.is_some_and(|span| {
                        !row_range::overlaps(&span.start, &span.end, &r.start_row, &r.end_row)
                    })
                {
                    break;
                }
                end = r.end_row.clone();
            }
            Ok((first.location.clone(), end))
        })
        .await
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bound(kind: u8, row: Vec<u8>) -> Bound<Vec<u8>> {
        match kind % 3 {
            0 => Bound::Included(row),
            1 => Bound::Excluded(row),
            _ => Bound::Unbounded,
        }
    }

    proptest! {
        /// The fast test of a key set agrees with sorting by start key and checking the spans.
        #[test]
        fn rows_in_order_and_disjoint_read_from_the_bounds_as_from_the_spans(
            raw in proptest::collection::vec(
                (0u8..3, proptest::collection::vec(0u8..3, 0..3), 0u8..3,
                 proptest::collection::vec(0u8..3, 0..3)),
                2..7),
        ) {
            let v: Vec<RowInterval> = raw
                .into_iter()
                .map(|(sk, s, ek, e)| RowInterval { start: bound(sk, s), end: bound(ek, e) })
                .collect();
            let spans: Vec<RowRange> =
                v.iter().map(|r| interval_rows(&Interval::Rows(r.clone()))).collect();
            let mut sorted = v.clone();
            sorted.sort_by_cached_key(|r| r.start_key());
            let slow = sorted == v && disjoint_in_order(&spans);
            if rows_disjoint_in_order(&v) {
                prop_assert!(slow, "{v:?}");
            }
            let nonempty = spans.iter().all(|s| match (&s.start, &s.end) {
                (Some(a), Some(b)) => a < b,
                _ => true,
            });
            if slow && nonempty {
                prop_assert!(rows_disjoint_in_order(&v), "{v:?}");
            }
        }
    }
}
