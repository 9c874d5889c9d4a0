//! `ht cingest walk` and `ht cingest batchwalk`: readers that follow the lists while ingest
//! runs (Accumulo's `ContinuousWalk` and `ContinuousBatchWalker`).
//!
//! What counts as a failure: a row that a node read from the table points at was
//! acknowledged before that node was written (see `ingest`), so every later scan must find
//! it. A scan that *fails* (the client gave up after its `retry_for` while servers were down
//! or ranges recovered) is unavailability: counted as an error, the walk starts over. A scan
//! that *succeeds* without the row is a miss: the row is looked up again `miss_retries` times,
//! `miss_retry_ms` apart. Found then, it was a stale read (`late`); never found, it is
//! `missing`, a lost cell that verify will count as UNDEFINED. Both fail `ht cingest run`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use client::Client;
use common::ScanSpec;
use common::scan_spec::RowInterval;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Stop;
use super::node::{Families, Node, row_key, validate};

/// How walkers read.
#[derive(Debug, Clone)]
pub struct WalkConfig {
    /// Pause between two lookups of one walker.
    pub sleep_ms: u64,
    /// Lookups of one walk before a walker starts another at a random row.
    pub max_steps: u32,
    /// Rows a batch walker looks up in one scan.
    pub batch_size: usize,
    /// Lookups again of a row that was not found, and the pause before each.
    pub miss_retries: u32,
    pub miss_retry_ms: u64,
    pub seed: u64,
}

/// The most missing rows a run remembers to print (the counts go on).
pub const MAX_REPORTED: usize = 100;

/// What walkers found, shared by all of them.
#[derive(Debug, Default)]
pub struct WalkStats {
    /// Rows looked up (by walk and batchwalk).
    pub lookups: AtomicU64,
    pub walks: AtomicU64,
    pub batches: AtomicU64,
    /// Scans that failed (the cluster was unavailable for longer than the client retries).
    pub errors: AtomicU64,
    /// Cells that are not valid nodes (bad layout or checksum).
    pub corrupt: AtomicU64,
    /// Rows not found at first, found when looked up again.
    pub late: AtomicU64,
    /// Rows never found: lost.
    pub missing: AtomicU64,
    /// (row, the row that points at it, what happened), the first `MAX_REPORTED`.
    pub reported: Mutex<Vec<String>>,
}

impl WalkStats {
    fn report(&self, line: String) {
        eprintln!("cingest walk: {line}");
        if let Ok(mut r) = self.reported.lock()
            && r.len() < MAX_REPORTED
        {
            r.push(line);
        }
    }

    /// Late or missing rows, or corrupt cells: the reads went wrong.
    pub fn failures(&self) -> u64 {
        self.late.load(Ordering::Relaxed)
            + self.missing.load(Ordering::Relaxed)
            + self.corrupt.load(Ordering::Relaxed)
    }
}

/// The valid nodes of `row` (corrupt cells counted and reported).
fn read_row(
    client: &dyn Client,
    table: &str,
    families: &Families,
    row: u64,
    stats: &WalkStats,
) -> client::Result<Vec<Node>> {
    stats.lookups.fetch_add(1, Ordering::Relaxed);
    let spec = ScanSpec {
        row_intervals: vec![RowInterval::row(row_key(row))],
        ..ScanSpec::default()
    };
    let mut scanner = client.scanner(table, spec)?;
    let mut nodes = Vec::new();
    while let Some(cell) = scanner.next_cell()? {
        match validate(&cell, families) {
            Ok(n) => nodes.push(n),
            Err(e) => {
                stats.corrupt.fetch_add(1, Ordering::Relaxed);
                stats.report(format!("corrupt cell: {e}"));
            }
        }
    }
    Ok(nodes)
}

/// A row that was not found: looks it up again; true if it turned up.
pub(super) fn recheck(
    client: &dyn Client,
    table: &str,
    families: &Families,
    cfg: &WalkConfig,
    row: u64,
    referrer: u64,
    stats: &WalkStats,
) -> bool {
    for attempt in 1..=cfg.miss_retries {
        std::thread::sleep(Duration::from_millis(cfg.miss_retry_ms));
        match read_row(client, table, families, row, stats) {
            Ok(nodes) if !nodes.is_empty() => {
                stats.late.fetch_add(1, Ordering::Relaxed);
                stats.report(format!(
                    "row {row:016x} (pointed at by {referrer:016x}) not found, then found at \
                     look-up {attempt} ({} ms later): a stale read",
                    attempt as u64 * cfg.miss_retry_ms
                ));
                return true;
            }
            Ok(_) => {}
            Err(e) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("cingest walk: looking up row {row:016x} again failed: {e}");
            }
        }
    }
    stats.missing.fetch_add(1, Ordering::Relaxed);
    stats.report(format!(
        "row {row:016x} (pointed at by {referrer:016x}) MISSING after {} look-ups over {} ms",
        cfg.miss_retries + 1,
        cfg.miss_retries as u64 * cfg.miss_retry_ms
    ));
    false
}

/// Up to `want` (row, referrer) pairs: the previous rows of nodes read from a random row on.
fn previous_rows(
    client: &dyn Client,
    table: &str,
    families: &Families,
    rng: &mut StdRng,
    want: usize,
    stats: &WalkStats,
) -> client::Result<Vec<(u64, u64)>> {
    let start = row_key(rng.random());
    let spec = ScanSpec {
        row_intervals: vec![RowInterval {
            start: std::ops::Bound::Included(start),
            end: std::ops::Bound::Unbounded,
        }],
        // A few cells without a previous row (first nodes) may come before.
        cell_limit: (want as u64).saturating_mul(2).max(16),
        ..ScanSpec::default()
    };
    let mut scanner = client.scanner(table, spec)?;
    let mut out = Vec::new();
    while out.len() < want
        && let Some(cell) = scanner.next_cell()?
    {
        match validate(&cell, families) {
            Ok(Node {
                row, prev: Some(p), ..
            }) => out.push((p, row)),
            Ok(_) => {}
            Err(e) => {
                stats.corrupt.fetch_add(1, Ordering::Relaxed);
                stats.report(format!("corrupt cell: {e}"));
            }
        }
    }
    Ok(out)
}

fn pause(stop: &Stop, ms: u64) {
    stop.sleep(Duration::from_millis(ms));
}

/// One walker: walks until `stop`.
pub fn walk(
    client: &dyn Client,
    table: &str,
    families: &Families,
    cfg: &WalkConfig,
    stop: &Stop,
    stats: &WalkStats,
) {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    while !stop.is_set() {
        let start = match previous_rows(client, table, families, &mut rng, 1, stats) {
            Ok(v) => v.into_iter().next(),
            Err(e) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("cingest walk: finding a start row failed: {e}");
                pause(stop, 1_000);
                continue;
            }
        };
        let Some((mut row, mut referrer)) = start else {
            // An empty table, or nothing past the random start: try elsewhere.
            pause(stop, 100);
            continue;
        };
        stats.walks.fetch_add(1, Ordering::Relaxed);
        for _ in 0..cfg.max_steps {
            if stop.is_set() {
                break;
            }
            let nodes = match read_row(client, table, families, row, stats) {
                Ok(n) => n,
                Err(e) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("cingest walk: reading row {row:016x} failed: {e}");
                    pause(stop, 1_000);
                    break;
                }
            };
            if nodes.is_empty() {
                recheck(client, table, families, cfg, row, referrer, stats);
                break;
            }
            let next = nodes[rng.random_range(0..nodes.len())];
            let Some(p) = next.prev else {
                break;
            };
            referrer = row;
            row = p;
            pause(stop, cfg.sleep_ms);
        }
    }
}

/// One batch walker: gathers `batch_size` previous rows, looks them all up in one scan, and
/// checks every one came back.
pub fn batch_walk(
    client: &dyn Client,
    table: &str,
    families: &Families,
    cfg: &WalkConfig,
    stop: &Stop,
    stats: &WalkStats,
) {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let want = cfg.batch_size.max(1);
    // Row -> a row pointing at it; at most 3 batches' worth, as Accumulo keeps.
    let mut to_query: BTreeMap<u64, u64> = BTreeMap::new();
    while !stop.is_set() {
        let mut tries = 0;
        while to_query.len() < want && !stop.is_set() && tries < 100 {
            tries += 1;
            match previous_rows(
                client,
                table,
                families,
                &mut rng,
                (3 * want).saturating_sub(to_query.len()),
                stats,
            ) {
                Ok(v) => to_query.extend(v),
                Err(e) => {
                    stats.errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("cingest batchwalk: gathering rows failed: {e}");
                    pause(stop, 1_000);
                }
            }
        }
        if to_query.len() < want {
            pause(stop, 100);
            continue;
        }
        // A random batch of them.
        let mut batch = BTreeMap::new();
        while batch.len() < want {
            let keys: Vec<u64> = to_query.keys().copied().collect();
            let k = keys[rng.random_range(0..keys.len())];
            if let Some(r) = to_query.remove(&k) {
                batch.insert(k, r);
            }
        }
        match query_batch(client, table, families, &batch, stats) {
            Ok(seen) => {
                stats.batches.fetch_add(1, Ordering::Relaxed);
                for (row, referrer) in &batch {
                    if !seen.contains(row) {
                        recheck(client, table, families, cfg, *row, *referrer, stats);
                    }
                }
            }
            Err(e) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "cingest batchwalk: a scan of {} rows failed: {e:#}",
                    batch.len()
                );
                pause(stop, 1_000);
            }
        }
        pause(stop, cfg.sleep_ms);
    }
}

/// Scans the rows of `batch` (row -> referrer) at once; returns the rows seen.
pub fn query_batch(
    client: &dyn Client,
    table: &str,
    families: &Families,
    batch: &BTreeMap<u64, u64>,
    stats: &WalkStats,
) -> anyhow::Result<BTreeSet<u64>> {
    stats
        .lookups
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    let spec = ScanSpec {
        row_intervals: batch
            .keys()
            .map(|r| RowInterval::row(row_key(*r)))
            .collect(),
        ..ScanSpec::default()
    };
    let mut scanner = client
        .scanner(table, spec)
        .with_context(|| format!("cannot scan {table}"))?;
    let mut seen = BTreeSet::new();
    while let Some(cell) = scanner.next_cell()? {
        match validate(&cell, families) {
            Ok(n) => {
                if !batch.contains_key(&n.row) {
                    stats.report(format!(
                        "a scan of {} rows returned row {:016x}, which it did not ask for",
                        batch.len(),
                        n.row
                    ));
                    stats.corrupt.fetch_add(1, Ordering::Relaxed);
                }
                seen.insert(n.row);
            }
            Err(e) => {
                stats.corrupt.fetch_add(1, Ordering::Relaxed);
                stats.report(format!("corrupt cell: {e}"));
            }
        }
    }
    Ok(seen)
}
