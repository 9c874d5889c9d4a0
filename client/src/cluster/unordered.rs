//! [`scan_unordered`]: Accumulo's BatchScanner. The row intervals of a scan are gathered by the
//! server holding them, all of a server's intervals in one request (its ranges need not be
//! consecutive: a server scans any intervals whose rows it holds), cut only where a request
//! would pass `scan_intervals_per_request` intervals or `scan_interval_bytes_per_request`
//! bytes of rows. Up to `parallelism` requests run at once and their cells are passed on as
//! they arrive, block by block, so cells of different servers interleave: within one request
//! they are in key order, across requests in no order. A request whose server fails is
//! resumed where it broke off ([`scan_in_order`] over its intervals), so no cell is lost or
//! returned twice. Limits and offsets need an order: a spec with them is refused.

use std::future::Future;
use std::pin::Pin;

use ::proto::rs::messages::PackedCells;
use common::ScanSpec;
use common::scan_spec::RowInterval;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;

use super::Inner;
use super::batched::{Part, plan_parts, scan_in_order};
use super::limiter::Limiter;
use super::locations::RangeLocation;
use super::scanner::{
    Interval, Output, PartEnd, interval_rows, retry_wait, rows_disjoint_in_order, run_part,
};
use crate::{ClientError, Result};

/// Gathers the intervals by server: the parts of [`plan_parts`] (one per run of ranges) of
/// one server are joined in row order, then cut into requests of at most `per_request`
/// intervals and `max_bytes` bytes of rows. Servers come in the order of their first
/// interval.
pub(super) fn plan_server_parts(
    ranges: &[RangeLocation],
    intervals: &[RowInterval],
    per_request: usize,
    max_bytes: usize,
) -> Vec<Part> {
    let per_request = per_request.max(1);
    let mut by_server: Vec<(String, Vec<RowInterval>)> = Vec::new();
    for part in plan_parts(ranges, intervals, per_request, max_bytes) {
        match by_server.iter_mut().find(|(l, _)| *l == part.location) {
            Some((_, v)) => v.extend(part.intervals),
            None => by_server.push((part.location, part.intervals)),
        }
    }
    let bytes = |i: &RowInterval| {
        let s = interval_rows(&Interval::Rows(i.clone()));
        s.start.as_ref().map_or(0, Vec::len) + s.end.as_ref().map_or(0, Vec::len)
    };
    let mut out = Vec::new();
    for (location, intervals) in by_server {
        let mut cur: Vec<RowInterval> = Vec::new();
        let mut cur_bytes = 0;
        for i in intervals {
            let b = bytes(&i);
            if !cur.is_empty() && (cur.len() == per_request || cur_bytes + b > max_bytes) {
                out.push(Part {
                    location: location.clone(),
                    intervals: std::mem::take(&mut cur),
                });
                cur_bytes = 0;
            }
            cur_bytes += b;
            cur.push(i);
        }
        if !cur.is_empty() {
            out.push(Part {
                location,
                intervals: cur,
            });
        }
    }
    out
}

type Fetch<'a> = Pin<Box<dyn Future<Output = Result<bool>> + Send + 'a>>;

/// Runs one server's request, passing its cells on; after a failure, the rest of its
/// intervals in order from where it broke off. False if the reader went away.
async fn run_server_part(
    inner: &Inner,
    table_id: u32,
    base: &ScanSpec,
    part: Part,
    tx: &mpsc::Sender<Result<PackedCells>>,
) -> Result<bool> {
    let mut limiter = Limiter::new(base);
    let mut spec = base.clone();
    spec.row_intervals = part.intervals.clone();
    let mut out = Output::Cells(tx);
    match run_part(
        inner,
        table_id,
        &part.location,
        &spec,
        &mut limiter,
        &mut out,
    )
    .await?
    {
        PartEnd::Complete => Ok(true),
        PartEnd::Gone | PartEnd::Stop => Ok(false),
        PartEnd::Retry {
            resume,
            progressed,
            why,
        } => {
            let mut backoff = inner.backoff();
            retry_wait(inner, &mut backoff, progressed, why).await?;
            scan_in_order(
                inner,
                table_id,
                base,
                &part.intervals,
                resume,
                &mut limiter,
                &mut out,
            )
            .await
        }
    }
}

/// Streams the cells of `spec` into `tx` in no particular order (see the module's doc).
pub(super) async fn scan_unordered(
    inner: &Inner,
    table_id: u32,
    mut spec: ScanSpec,
    parallelism: usize,
    tx: &mpsc::Sender<Result<PackedCells>>,
) -> Result<()> {
    if common::aggregate::has_limits(&spec) {
        return Err(ClientError::InvalidInput(
            "a batch scanner returns cells in no order: limits and offsets need the ordered scanner"
                .into(),
        ));
    }
    if !spec.cell_intervals.is_empty() {
        return Err(ClientError::InvalidInput(
            "a batch scanner takes row intervals only".into(),
        ));
    }
    let mut intervals = std::mem::take(&mut spec.row_intervals);
    if intervals.is_empty() {
        intervals.push(RowInterval::all());
    }
    if !rows_disjoint_in_order(&intervals) {
        // Overlapping or unsorted intervals: the ordered path merges them (its cells are in
        // order, which is one of the orders a batch scanner may return).
        spec.row_intervals = intervals;
        return super::scanner::scan_table(inner, table_id, spec, &mut Output::Cells(tx)).await;
    }
    let base = spec;
    let ranges = inner
        .retrying("scan", || async { inner.ranges(table_id).await })
        .await?;
    let parts = plan_server_parts(
        &ranges,
        &intervals,
        inner.opts.scan_intervals_per_request,
        inner.opts.scan_interval_bytes_per_request,
    );
    drop(ranges);
    let base = &base;
    let mut planned = parts.into_iter();
    let mut fetches: FuturesUnordered<Fetch<'_>> = FuturesUnordered::new();
    for part in planned.by_ref().take(parallelism.max(1)) {
        fetches.push(Box::pin(run_server_part(inner, table_id, base, part, tx)));
    }
    while let Some(done) = fetches.next().await {
        if !done? {
            return Ok(());
        }
        if let Some(part) = planned.next() {
            fetches.push(Box::pin(run_server_part(inner, table_id, base, part, tx)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;
    use crate::cluster::batched::tests::ranges;

    fn row(r: &str) -> RowInterval {
        RowInterval {
            start: Bound::Included(r.as_bytes().to_vec()),
            end: Bound::Included(r.as_bytes().to_vec()),
        }
    }

    fn rows(p: &Part) -> Vec<String> {
        p.intervals
            .iter()
            .map(|i| match &i.start {
                Bound::Included(s) => String::from_utf8(s.clone()).unwrap(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn one_request_per_server_for_ranges_that_alternate() {
        // a..c on rs1, c..e on rs2, e..g on rs1, g.. on rs2.
        let r = ranges(&[("c", "rs1"), ("e", "rs2"), ("g", "rs1"), ("", "rs2")]);
        let keys: Vec<RowInterval> = ["a", "b", "d", "f", "h", "i"].map(row).into();
        let parts = plan_server_parts(&r, &keys, 100, 1 << 20);
        let got: Vec<(&str, Vec<String>)> = parts
            .iter()
            .map(|p| (p.location.as_str(), rows(p)))
            .collect();
        assert_eq!(
            got,
            [
                ("rs1", vec!["a".into(), "b".into(), "f".into()]),
                ("rs2", vec!["d".into(), "h".into(), "i".into()]),
            ]
        );
        // The request bound cuts a server's intervals into several requests.
        let parts = plan_server_parts(&r, &keys, 2, 1 << 20);
        let got: Vec<(&str, usize)> = parts
            .iter()
            .map(|p| (p.location.as_str(), p.intervals.len()))
            .collect();
        assert_eq!(got, [("rs1", 2), ("rs1", 1), ("rs2", 2), ("rs2", 1)]);
        // An interval over several ranges is cut at their ends and each piece goes to its
        // server.
        let all = [RowInterval::all()];
        let parts = plan_server_parts(&r, &all, 100, 1 << 20);
        let got: Vec<(&str, usize)> = parts
            .iter()
            .map(|p| (p.location.as_str(), p.intervals.len()))
            .collect();
        assert_eq!(got, [("rs1", 2), ("rs2", 2)]);
    }
}
