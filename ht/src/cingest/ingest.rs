//! `ht cingest ingest`: writes linked lists of random rows, Accumulo's way. A client writes
//! `flush_interval` new nodes, flushes, and only then writes the next `flush_interval` nodes,
//! node `i` of a batch pointing back at node `i` of the batch before; after `max_depth`
//! batches it rewrites the first batch's nodes to point at the last batch's (node `i` at node
//! `i + 1`), so nearly every node ends up referenced, and starts new lists.
//!
//! A node is therefore referenced only once it was acknowledged: a referenced row that is
//! missing later was lost. A flush that fails leaves its batch unknown (some cells may be in
//! the table): the client never points at it and starts new lists with a new mutator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use client::{Client, TableMutator};
use common::Mutation;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Stop;
use super::node::{Families, Node};

/// The most nodes one batch may have (the client keeps two u64 and a few bytes per node).
pub const MAX_FLUSH_INTERVAL: usize = 10_000_000;

/// How one ingest client writes.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// Nodes per batch (Accumulo's `flushInterval`).
    pub flush_interval: usize,
    /// Batches per set of lists, the first included (Accumulo's `maxDepth`).
    pub max_depth: u32,
    /// Qualifiers are random numbers below this (at most 65,536).
    pub max_qualifier: u32,
    /// Stop after this many cells (0: no bound but the stop signal).
    pub entries: u64,
    /// Flushes that fail in a row before the client gives up.
    pub max_failed_flushes: u32,
    pub seed: u64,
}

impl IngestConfig {
    pub fn check(&self) -> anyhow::Result<()> {
        if self.flush_interval < 2 || self.flush_interval > MAX_FLUSH_INTERVAL {
            bail!(
                "--flush-interval {}: must be 2..={MAX_FLUSH_INTERVAL}",
                self.flush_interval
            );
        }
        if self.max_depth < 2 {
            bail!("--max-depth {}: must be at least 2", self.max_depth);
        }
        if self.max_qualifier == 0 || self.max_qualifier > 1 << 16 {
            bail!("--max-qualifier {}: must be 1..=65536", self.max_qualifier);
        }
        Ok(())
    }
}

/// What ingest clients did, shared by all of them.
#[derive(Debug, Default)]
pub struct IngestStats {
    /// Cells in flushes that succeeded.
    pub acked_cells: AtomicU64,
    /// New nodes (rows) in flushes that succeeded; the closing rewrites are not new.
    pub acked_nodes: AtomicU64,
    pub flushes: AtomicU64,
    /// Flushes (or sets) that failed: their cells may or may not be in the table.
    pub failed_flushes: AtomicU64,
    pub unknown_cells: AtomicU64,
}

/// One ingest client: writes until `stop`, or `entries` cells.
pub fn ingest(
    client: &dyn Client,
    table: &str,
    families: &Families,
    cfg: &IngestConfig,
    stop: &Stop,
    stats: &IngestStats,
) -> anyhow::Result<()> {
    cfg.check()?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let client_id: u64 = rng.random();
    let n = cfg.flush_interval;
    let mut w = Writer {
        client,
        table,
        families,
        stats,
        mutator: None,
        batch: Vec::with_capacity(n),
        failed_in_a_row: 0,
        max_failed: cfg.max_failed_flushes,
        count: 0,
        client_id,
    };
    // Node i of the last acknowledged batch, and the first batch's nodes (row, family, qualifier).
    let mut prev = vec![0u64; n];
    let mut first = vec![(0u64, 0u8, 0u16); n];
    let done = |w: &Writer| stop.is_set() || (cfg.entries > 0 && w.count >= cfg.entries);
    'lists: while !done(&w) {
        for i in 0..n {
            let node = w.node(&mut rng, cfg, None);
            prev[i] = node.row;
            first[i] = (node.row, node.family, node.qualifier);
            w.push(node)?;
        }
        if !w.flush(n as u64)? || done(&w) {
            continue 'lists;
        }
        for _depth in 1..cfg.max_depth {
            for p in prev.iter_mut() {
                let node = w.node(&mut rng, cfg, Some(*p));
                *p = node.row;
                w.push(node)?;
            }
            if !w.flush(n as u64)? || done(&w) {
                continue 'lists;
            }
        }
        // Close the lists: the first nodes point at the last batch's next node.
        for i in 0..n - 1 {
            let (row, family, qualifier) = first[i];
            let node = Node {
                row,
                family,
                qualifier,
                client: client_id,
                count: w.count,
                prev: Some(prev[i + 1]),
            };
            w.count += 1;
            w.push(node)?;
        }
        w.flush(0)?;
    }
    Ok(())
}

struct Writer<'a> {
    client: &'a dyn Client,
    table: &'a str,
    families: &'a Families,
    stats: &'a IngestStats,
    mutator: Option<Box<dyn TableMutator>>,
    batch: Vec<Mutation>,
    failed_in_a_row: u32,
    max_failed: u32,
    /// Cells this client generated.
    count: u64,
    client_id: u64,
}

impl Writer<'_> {
    fn node(&mut self, rng: &mut StdRng, cfg: &IngestConfig, prev: Option<u64>) -> Node {
        let node = Node {
            row: rng.random(),
            family: self.families.id(rng.random_range(0..self.families.len())),
            qualifier: rng.random_range(0..cfg.max_qualifier) as u16,
            client: self.client_id,
            count: self.count,
            prev,
        };
        self.count += 1;
        node
    }

    fn push(&mut self, node: Node) -> anyhow::Result<()> {
        self.batch.push(node.mutation(self.families)?);
        Ok(())
    }

    /// Sets and flushes the batch. True if it was acknowledged; false if it failed (the
    /// caller starts new lists); an error after `max_failed` failures in a row.
    fn flush(&mut self, new_nodes: u64) -> anyhow::Result<bool> {
        let cells = self.batch.len() as u64;
        let sent = (|| {
            if self.mutator.is_none() {
                self.mutator = Some(self.client.mutator(self.table)?);
            }
            let m = self.mutator.as_mut().expect("made above");
            for c in self.batch.drain(..) {
                m.set(c)?;
            }
            m.flush()
        })();
        self.batch.clear();
        match sent {
            Ok(()) => {
                self.failed_in_a_row = 0;
                self.stats.acked_cells.fetch_add(cells, Ordering::Relaxed);
                self.stats
                    .acked_nodes
                    .fetch_add(new_nodes, Ordering::Relaxed);
                self.stats.flushes.fetch_add(1, Ordering::Relaxed);
                Ok(true)
            }
            Err(e) => {
                self.mutator = None;
                self.failed_in_a_row += 1;
                self.stats.failed_flushes.fetch_add(1, Ordering::Relaxed);
                self.stats.unknown_cells.fetch_add(cells, Ordering::Relaxed);
                eprintln!(
                    "cingest ingest {:016x}: a flush of {cells} cells failed ({} in a row), \
                     starting new lists: {e}",
                    self.client_id, self.failed_in_a_row
                );
                if self.failed_in_a_row >= self.max_failed {
                    bail!(
                        "ingest into {}: {} flushes failed in a row; the last: {e}",
                        self.table,
                        self.failed_in_a_row
                    );
                }
                std::thread::sleep(Duration::from_secs(1));
                Ok(false)
            }
        }
    }
}

/// Cells per second since `since`.
pub fn rate(cells: u64, since: Instant) -> f64 {
    cells as f64 / since.elapsed().as_secs_f64().max(1e-9)
}
