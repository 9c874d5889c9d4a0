//! [`scan_batched`]: a scan of sorted, disjoint row intervals (a key set, the rows of key-part
//! predicates, or one interval over many ranges) without limits, or with limits counted once
//! over all of them (`ScanSpec.one_interval`). The intervals are split by range into parts, one
//! per run of consecutive ranges on one server (and at most `scan_intervals_per_request`
//! intervals and `scan_interval_bytes_per_request` bytes of rows), planned from the client's
//! range map. Up to `scan_parallel_parts` parts are fetched at once, so the servers work in
//! parallel, each part into its own queue of `scan_part_queue_blocks` blocks; the parts are read
//! in row order, so the cells come out as a single scan would return them and the limits are
//! applied here as they come. A part that fails is run again from where it broke off, one
//! request after the other ([`scan_in_order`], which finds the ranges anew), while the parts
//! after it wait in their queues.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::Bound;
use std::pin::Pin;
use std::sync::atomic::Ordering;

use ::proto::rs::client::RsError;
use ::proto::rs::messages::PackedCells;
use common::aggregate::{AggregateFold, AggregatePartial};
use common::scan_spec::RowInterval;
use common::{ErrorKind, RowRange, ScanSpec};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use super::Inner;
use super::errors::unreachable_server;
use super::limiter::Limiter;
use super::locations::{RangeLocation, locate_index};
use super::retry::Attempt;
use super::scanner::{
    Interval, Output, PartEnd, fold_block, interval_rows, retry_wait, run_part, server_run,
};
use crate::{ClientError, Result};

/// One request of a batched scan: the intervals (cut to the run) that lie in one run of
/// consecutive ranges on one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    pub location: String,
    pub intervals: Vec<RowInterval>,
}

/// Splits sorted, disjoint row intervals into parts by the ranges holding them: consecutive
/// intervals in one run of ranges on one server share a part, up to `per_request` intervals
/// and `max_bytes` bytes of rows; an interval reaching over several runs is cut at their ends.
pub(super) fn plan_parts(
    ranges: &[RangeLocation],
    intervals: &[RowInterval],
    per_request: usize,
    max_bytes: usize,
) -> Vec<Part> {
    plan_parts_with(ranges, intervals, per_request, max_bytes, true)
}

/// [`plan_parts`]; `fast` takes intervals inside one run by [`within_one_run`] (tests compare
/// it with the general path).
fn plan_parts_with(
    ranges: &[RangeLocation],
    intervals: &[RowInterval],
    per_request: usize,
    max_bytes: usize,
    fast: bool,
) -> Vec<Part> {
    let per_request = per_request.max(1);
    let span_bytes =
        |s: &RowRange| s.start.as_ref().map_or(0, Vec::len) + s.end.as_ref().map_or(0, Vec::len);
    let mut parts: Vec<Part> = Vec::new();
    // The run of the last part (its server and end row) and its bytes of rows.
    let mut last: Option<(Option<Vec<u8>>, usize)> = None;
    for interval in intervals {
        // Most intervals of a key set lie in one range: they join or start a part as they
        // are, their run found and compared without copying a row.
        if let Some((location, run_end, bytes)) =
            fast.then(|| within_one_run(ranges, interval)).flatten()
        {
            let joins = match (parts.last(), &last) {
                (Some(p), Some((end, b))) => {
                    p.location == location
                        && end.as_deref() == run_end
                        && p.intervals.len() < per_request
                        && b + bytes <= max_bytes
                }
                _ => false,
            };
            if joins {
                parts
                    .last_mut()
                    .expect("a part to join")
                    .intervals
                    .push(interval.clone());
                if let Some((_, b)) = &mut last {
                    *b += bytes;
                }
            } else {
                parts.push(Part {
                    location: location.to_string(),
                    intervals: vec![interval.clone()],
                });
                last = Some((run_end.map(<[u8]>::to_vec), bytes));
            }
            continue;
        }
        let whole = Interval::Rows(interval.clone());
        let span = interval_rows(&whole);
        let mut from = span.start.clone();
        loop {
            let (location, run_end) = run_at(ranges, from.as_deref().unwrap_or(b""));
            let Interval::Rows(piece) = whole.clamp(&from, &run_end) else {
                unreachable!("a row interval clamps to a row interval")
            };
            let bytes = span_bytes(&interval_rows(&Interval::Rows(piece.clone())));
            let joins = match (parts.last(), &last) {
                (Some(p), Some((end, b))) => {
                    p.location == location
                        && *end == run_end
                        && p.intervals.len() < per_request
                        && b + bytes <= max_bytes
                }
                _ => false,
            };
            if joins {
                let p = parts.last_mut().expect("a part to join");
                p.intervals.push(piece);
                if let Some((_, b)) = &mut last {
                    *b += bytes;
                }
            } else {
                parts.push(Part {
                    location: location.to_string(),
                    intervals: vec![piece],
                });
                last = Some((run_end.clone(), bytes));
            }
            let past_span = match (&run_end, &span.end) {
                (None, _) => true,
                (Some(r), Some(e)) => e <= r,
                (Some(_), None) => false,
            };
            if past_span {
                break;
            }
            from = run_end;
        }
    }
    parts
}

/// For an interval whose rows all lie in the run of ranges its first row is in: that run's
/// server and end row, and the interval's bytes of rows as [`plan_parts`] counts them.
fn within_one_run<'a>(
    ranges: &'a [RangeLocation],
    interval: &RowInterval,
) -> Option<(&'a str, Option<&'a [u8]>, usize)> {
    let start: &[u8] = match &interval.start {
        Bound::Included(s) | Bound::Excluded(s) => s,
        Bound::Unbounded => return None,
    };
    let at = locate_index(ranges, start);
    let mut last = at;
    while last + 1 < ranges.len() && ranges[last + 1].location == ranges[at].location {
        last += 1;
    }
    let run_end = ranges[last].end_row.as_deref();
    // The rows end just after `e` (included) or at `e` (excluded).
    let (inside, end_bytes) = match (&interval.end, run_end) {
        (Bound::Included(e), Some(r)) => (e.as_slice() < r, e.len() + 1),
        (Bound::Included(e), None) => (true, e.len() + 1),
        (Bound::Excluded(e), Some(r)) => (e.as_slice() <= r, e.len()),
        (Bound::Excluded(e), None) => (true, e.len()),
        (Bound::Unbounded, _) => return None,
    };
    inside.then_some((
        ranges[at].location.as_str(),
        run_end,
        start.len() + end_bytes,
    ))
}

/// The server holding `row` and the end of the run of consecutive ranges it holds from there
/// (`None`: the table's end).
fn run_at<'a>(ranges: &'a [RangeLocation], row: &[u8]) -> (&'a str, Option<Vec<u8>>) {
    let at = locate_index(ranges, row);
    let first = &ranges[at];
    let mut end = first.end_row.clone();
    for r in &ranges[at + 1..] {
        if r.location != first.location {
            break;
        }
        end = r.end_row.clone();
    }
    (first.location.as_str(), end)
}

/// What a part fetched ahead sends to the reader of the parts, in order.
enum PartMsg {
    Block(PackedCells),
    /// The part is complete; an aggregating part's partial.
    Done(Option<AggregatePartial>),
    /// The server failed (or sent a malformed block); the part is run again from where it
    /// broke off.
    Failed(RsError),
}

type Fetch<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Fetches one part into `tx`: its blocks, or (aggregating) its partial, folding cells itself
/// when a server that predates aggregates sends the plain scan's cells. Ends with `Done` or
/// `Failed`; stops when the reader went away.
async fn fetch_part(
    inner: &Inner,
    table_id: u32,
    location: String,
    spec: ScanSpec,
    tx: mpsc::Sender<PartMsg>,
) {
    inner.scan_requests.fetch_add(1, Ordering::Relaxed);
    let stream = match inner.server(&location).await {
        Ok(s) => s.scan(table_id, &spec).await,
        Err(e) => Err(unreachable_server(e)),
    };
    let mut s = match stream {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(PartMsg::Failed(e)).await;
            return;
        }
    };
    let mut folded: Option<AggregateFold> = None;
    let end = loop {
        match s.next_block().await {
            Ok(Some(block)) => {
                inner
                    .scan_cells
                    .fetch_add(u64::from(block.remaining()), Ordering::Relaxed);
                if let Some(agg) = &spec.aggregate {
                    let f = folded.get_or_insert_with(|| AggregateFold::new(agg));
                    if let Err(e) = fold_block(f, block) {
                        break PartMsg::Failed(RsError::BadReply(e));
                    }
                } else if tx.send(PartMsg::Block(block)).await.is_err() {
                    return;
                }
            }
            Ok(None) => {
                let Some(agg) = &spec.aggregate else {
                    break PartMsg::Done(None);
                };
                break match (s.take_partial(), folded.take()) {
                    (Some(_), Some(_)) => PartMsg::Failed(RsError::BadReply(
                        "an aggregating scan got both partials and cells".into(),
                    )),
                    (Some(p), None) => {
                        inner.scan_partials.fetch_add(1, Ordering::Relaxed);
                        PartMsg::Done(Some(p))
                    }
                    (None, Some(f)) => PartMsg::Done(Some(f.finish())),
                    (None, None) => PartMsg::Done(Some(AggregatePartial::empty(agg))),
                };
            }
            Err(e) => break PartMsg::Failed(e),
        }
    };
    let _ = tx.send(end).await;
}

/// Runs a batched scan (see the module's doc): `spec`'s limits are applied here over all its
/// intervals.
pub(super) async fn scan_batched<'a>(
    inner: &'a Inner,
    table_id: u32,
    spec: &ScanSpec,
    intervals: &[RowInterval],
    out: &mut Output<'_>,
) -> Result<()> {
    let mut limiter = Limiter::new(spec);
    // The spec of every part, but for its intervals: the limits count here, over all parts.
    let mut base = spec.clone_without_intervals();
    base.row_limit = 0;
    base.row_offset = 0;
    base.cell_limit = 0;
    base.cell_offset = 0;
    let ranges = inner
        .retrying("scan", || async { inner.ranges(table_id).await })
        .await?;
    let parts = plan_parts(
        &ranges,
        intervals,
        inner.opts.scan_intervals_per_request,
        inner.opts.scan_interval_bytes_per_request,
    );
    drop(ranges);
    let window = inner.opts.scan_parallel_parts.max(1);
    let queue_blocks = inner.opts.scan_part_queue_blocks.max(1);
    let mut planned = parts.into_iter();
    // The parts being fetched, in row order, each with the queue it fills.
    let mut ahead: VecDeque<(Part, mpsc::Receiver<PartMsg>)> = VecDeque::new();
    let mut fetches: FuturesUnordered<Fetch<'a>> = FuturesUnordered::new();
    let mut start_next = |ahead: &mut VecDeque<(Part, mpsc::Receiver<PartMsg>)>,
                          fetches: &mut FuturesUnordered<Fetch<'a>>| {
        if let Some(part) = planned.next() {
            let (tx, rx) = mpsc::channel(queue_blocks);
            let mut part_spec = base.clone();
            part_spec.row_intervals = part.intervals.clone();
            let location = part.location.clone();
            fetches.push(Box::pin(fetch_part(
                inner, table_id, location, part_spec, tx,
            )));
            ahead.push_back((part, rx));
        }
    };
    for _ in 0..window {
        start_next(&mut ahead, &mut fetches);
    }
    // Cells of the part being read taken so far, and cells judged before it began.
    let mut taken = 0u64;
    let mut judged_before = limiter.judged;
    while let Some((part, rx)) = ahead.front_mut() {
        let msg = tokio::select! {
            biased;
            m = rx.recv() => m,
            Some(()) = fetches.next(), if !fetches.is_empty() => continue,
        };
        match msg {
            Some(PartMsg::Block(block)) => {
                let Output::Cells(tx) = out else {
                    unreachable!("an aggregating part sends no blocks")
                };
                taken += u64::from(block.remaining());
                let (runs, end) = limiter
                    .judge_block(block)
                    .map_err(|why| malformed(table_id, &part.location, taken, &why))?;
                for run in runs {
                    if tx.send(Ok(run)).await.is_err() {
                        return Ok(());
                    }
                }
                if end {
                    return Ok(());
                }
                continue;
            }
            Some(PartMsg::Done(partial)) => {
                if let (Some(p), Output::Aggregate { total, .. }) = (partial, &mut *out) {
                    total
                        .merge(&p)
                        .map_err(|why| malformed(table_id, &part.location, taken, &why))?;
                }
            }
            Some(PartMsg::Failed(RsError::BadReply(why))) => {
                return Err(malformed(table_id, &part.location, taken, &why));
            }
            Some(PartMsg::Failed(e)) => {
                let why = match inner.rs_failure(&part.location, table_id, e) {
                    Attempt::Fatal(e) => return Err(e),
                    Attempt::Retry(why) => why,
                };
                let resume = if taken > 0 { limiter.resume() } else { None };
                let progressed = limiter.judged > judged_before;
                let mut backoff = inner.backoff();
                retry_wait(inner, &mut backoff, progressed, why).await?;
                let rest = part.intervals.clone();
                if !scan_in_order(inner, table_id, &base, &rest, resume, &mut limiter, out).await? {
                    return Ok(());
                }
            }
            None => {
                return Err(ClientError::storage(
                    ErrorKind::Internal,
                    format!(
                        "scan of table {table_id}: the part on {} ended without a word",
                        part.location
                    ),
                ));
            }
        }
        ahead.pop_front();
        taken = 0;
        judged_before = limiter.judged;
        start_next(&mut ahead, &mut fetches);
    }
    Ok(())
}

fn malformed(table_id: u32, location: &str, taken: u64, why: &str) -> ClientError {
    ClientError::storage(
        ErrorKind::Corruption,
        format!(
            "scan of table {table_id}: range server {location} sent a malformed block after {taken} cells: {why}"
        ),
    )
}

/// Scans sorted, disjoint row intervals one request after the other, each request holding
/// those that lie in the run of ranges on one server (found anew each time), from `resume` on
/// (`None`: the first interval's start; intervals below it are done). A part that breaks off
/// resumes at the row it got to. False if the scan is over (the limits were reached or the
/// reader went away).
pub(super) async fn scan_in_order(
    inner: &Inner,
    table_id: u32,
    base: &ScanSpec,
    intervals: &[RowInterval],
    resume: Option<Vec<u8>>,
    limiter: &mut Limiter,
    out: &mut Output<'_>,
) -> Result<bool> {
    let per_request = inner.opts.scan_intervals_per_request.max(1);
    let max_bytes = inner.opts.scan_interval_bytes_per_request;
    let intervals: Vec<Interval> = intervals.iter().cloned().map(Interval::Rows).collect();
    let spans: Vec<RowRange> = intervals.iter().map(interval_rows).collect();
    let span_bytes =
        |s: &RowRange| s.start.as_ref().map_or(0, Vec::len) + s.end.as_ref().map_or(0, Vec::len);
    let mut backoff = inner.backoff();
    // The first interval not done, and where in it the next part starts.
    let mut next = 0;
    let mut from: Option<Vec<u8>> = spans.first().and_then(|s| s.start.clone());
    if let Some(row) = resume {
        skip_done(&spans, &mut next, &row);
        from = Some(row);
    }
    while next < intervals.len() {
        let (location, run_end) = server_run(inner, table_id, &from, None).await?;
        let within = |span: &RowRange| match (&run_end, &span.end) {
            (None, _) => true,
            (Some(r), Some(e)) => e <= r,
            (Some(_), None) => false,
        };
        // The intervals wholly in the run; the first one may reach past it and is then cut.
        let mut upto = next + 1;
        if within(&spans[next]) {
            let mut bytes = span_bytes(&spans[next]);
            while upto < intervals.len()
                && upto - next < per_request
                && within(&spans[upto])
                && bytes + span_bytes(&spans[upto]) <= max_bytes
            {
                bytes += span_bytes(&spans[upto]);
                upto += 1;
            }
        }
        let mut part_spec = base.clone();
        part_spec.row_intervals = intervals[next..upto]
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let i = if n == 0 {
                    i.clamp(&from, &run_end)
                } else {
                    i.clone()
                };
                match i {
                    Interval::Rows(r) => r,
                    Interval::Cells(_) => unreachable!("only row intervals are batched"),
                }
            })
            .collect();
        match run_part(inner, table_id, &location, &part_spec, limiter, out).await? {
            PartEnd::Gone | PartEnd::Stop => return Ok(false),
            PartEnd::Retry {
                resume,
                progressed,
                why,
            } => {
                if let Some(row) = resume {
                    skip_done(&spans, &mut next, &row);
                    from = Some(row);
                }
                retry_wait(inner, &mut backoff, progressed, why).await?;
                continue;
            }
            PartEnd::Complete => {}
        }
        backoff = inner.backoff();
        if within(&spans[next]) {
            next = upto;
            from = spans.get(next).and_then(|s| s.start.clone());
        } else {
            // The first interval goes on in the next run.
            from = run_end;
        }
    }
    Ok(true)
}

/// Moves `next` past the intervals that end at or below `row` (done before it).
fn skip_done(spans: &[RowRange], next: &mut usize, row: &[u8]) {
    while *next < spans.len()
        && spans[*next]
            .end
            .as_ref()
            .is_some_and(|e| e.as_slice() <= row)
    {
        *next += 1;
    }
}

#[cfg(test)]
pub(super) mod tests {

    use super::*;

    /// A range map from (end row, location) pairs; the last range (end "") ends the table.
    pub(in crate::cluster) fn ranges(spec: &[(&str, &str)]) -> Vec<RangeLocation> {
        let mut start = None;
        spec.iter()
            .map(|(end, loc)| {
                let end_row = (!end.is_empty()).then(|| end.as_bytes().to_vec());
                let r = RangeLocation {
                    start_row: start.clone(),
                    end_row: end_row.clone(),
                    location: loc.to_string(),
                };
                start = end_row;
                r
            })
            .collect()
    }

    fn rows(p: &Part) -> Vec<String> {
        p.intervals
            .iter()
            .map(|i| {
                let b = |b: &Bound<Vec<u8>>| match b {
                    Bound::Included(x) => format!("[{}", String::from_utf8_lossy(x)),
                    Bound::Excluded(x) => format!("({}", String::from_utf8_lossy(x)),
                    Bound::Unbounded => "*".into(),
                };
                format!("{} {}", b(&i.start), b(&i.end))
            })
            .collect()
    }

    #[test]
    fn a_key_set_goes_one_part_per_run_of_ranges_and_batch() {
        // rs1 holds [.., c) and [c, f), rs2 [f, m), rs1 [m, ..).
        let r = ranges(&[("c", "rs1"), ("f", "rs1"), ("m", "rs2"), ("", "rs1")]);
        let keys: Vec<RowInterval> = ["a", "b", "d", "g", "h", "k", "n", "z"]
            .iter()
            .map(|k| RowInterval::row(k.as_bytes()))
            .collect();
        let parts = plan_parts(&r, &keys, 2, usize::MAX);
        let got: Vec<(String, usize)> = parts
            .iter()
            .map(|p| (p.location.clone(), p.intervals.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("rs1".to_string(), 2),
                ("rs1".to_string(), 1),
                ("rs2".to_string(), 2),
                ("rs2".to_string(), 1),
                ("rs1".to_string(), 2),
            ]
        );
        // Every key is in exactly one part, in order.
        let all: Vec<RowInterval> = parts.iter().flat_map(|p| p.intervals.clone()).collect();
        assert_eq!(all, keys);
        // A byte budget of one key's rows makes a part per key.
        assert_eq!(plan_parts(&r, &keys, 100, 2).len(), keys.len());
    }

    proptest::proptest! {
        #[test]
        fn intervals_inside_one_run_are_planned_as_the_general_path_plans_them(
            ends in proptest::collection::btree_set(0u8..40, 0..6),
            locs in proptest::collection::vec(0u8..2, 7),
            bounds in proptest::collection::btree_set(0u8..50, 2..30),
            kinds in proptest::collection::vec(0u8..6, 15),
            per_request in 1usize..5,
            max_bytes in 2usize..20,
        ) {
            let row = |b: u8| vec![b'a' + b / 2; 1 + (b % 2) as usize];
            let spec: Vec<(Vec<u8>, String)> = ends
                .iter()
                .map(|&e| row(e))
                .chain(std::iter::once(Vec::new()))
                .zip(&locs)
                .map(|(e, l)| (e, format!("rs{l}")))
                .collect();
            let spec: Vec<(&str, &str)> = spec
                .iter()
                .map(|(e, l)| (std::str::from_utf8(e).unwrap(), l.as_str()))
                .collect();
            let r = ranges(&spec);
            // Disjoint intervals in order from pairs of the sorted bounds, of every kind.
            let b: Vec<Vec<u8>> = bounds.iter().map(|&x| row(x)).collect();
            let mut intervals = Vec::new();
            for (i, pair) in b.chunks(2).enumerate() {
                let (lo, hi) = (pair[0].clone(), pair.get(1).cloned().unwrap_or(pair[0].clone()));
                let k = kinds[i % kinds.len()];
                let last = (i + 1) * 2 >= b.len();
                intervals.push(RowInterval {
                    start: if k % 2 == 0 { Bound::Included(lo) } else { Bound::Excluded(lo) },
                    end: match k / 2 {
                        0 => Bound::Included(hi),
                        1 => Bound::Excluded(hi),
                        _ if last => Bound::Unbounded,
                        _ => Bound::Included(hi),
                    },
                });
            }
            let plan = |fast| {
                plan_parts_with(&r, &intervals, per_request, max_bytes, fast)
                    .iter()
                    .map(|p| (p.location.clone(), p.intervals.clone()))
                    .collect::<Vec<_>>()
            };
            proptest::prop_assert_eq!(plan(true), plan(false));
        }
    }

    #[test]
    fn an_interval_over_several_runs_is_cut_at_their_ends() {
        let r = ranges(&[("c", "rs1"), ("f", "rs1"), ("m", "rs2"), ("", "rs1")]);
        let all = plan_parts(&r, &[RowInterval::all()], 10, usize::MAX);
        let got: Vec<(String, Vec<String>)> =
            all.iter().map(|p| (p.location.clone(), rows(p))).collect();
        assert_eq!(
            got,
            vec![
                ("rs1".to_string(), vec!["* (f".to_string()]),
                ("rs2".to_string(), vec!["[f (m".to_string()]),
                ("rs1".to_string(), vec!["[m *".to_string()]),
            ]
        );
        // An interval inside one run stays whole, and one ending on a range's end row is cut
        // there (the rest of the run holds none of it).
        let within = RowInterval {
            start: Bound::Excluded(b"g".to_vec()),
            end: Bound::Included(b"m".to_vec()),
        };
        let got: Vec<Vec<String>> = plan_parts(&r, &[within], 10, usize::MAX)
            .iter()
            .map(rows)
            .collect();
        assert_eq!(
            got,
            vec![vec!["(g (m".to_string()], vec!["[m [m".to_string()]]
        );
    }
}
