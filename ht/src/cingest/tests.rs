//! cingest on the embedded database: the node layout, verify's counts, that verify and the
//! walkers find a lost row, and that ingest never points at a batch it could not flush.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use client::{Client, ClientError, CompactionKind, ListingEntry, TableMutator, TableScanner};
use common::key::CellFlag;
use common::{Mutation, ScanSpec, TableSchema};
use embedded::{EmbeddedClient, EmbeddedOptions};

use super::Stop;
use super::ingest::{IngestConfig, IngestStats, ingest};
use super::node::{Families, Node, ensure_table, validate};
use super::verify::verify;
use super::walk::{WalkConfig, WalkStats, query_batch};

const TABLE: &str = "/cingest";

fn config(entries: u64) -> IngestConfig {
    IngestConfig {
        flush_interval: 50,
        max_depth: 4,
        max_qualifier: 1 << 15,
        entries,
        max_failed_flushes: 3,
        seed: 7,
    }
}

fn open() -> (tempfile::TempDir, EmbeddedClient) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    (dir, client)
}

/// Ingests `entries` cells through `client`; returns the stats.
fn load(client: &dyn Client, families: &Families, cfg: &IngestConfig) -> IngestStats {
    let stats = IngestStats::default();
    ingest(client, TABLE, families, cfg, &Stop::default(), &stats).expect("ingest");
    stats
}

/// Every (row, previous row) of the table.
fn links(client: &dyn Client, families: &Families) -> Vec<(u64, u64)> {
    let mut sc = client.scanner(TABLE, ScanSpec::default()).expect("scanner");
    let mut out = Vec::new();
    while let Some(c) = sc.next_cell().expect("scan") {
        let n = validate(&c, families).expect("a valid node");
        if let Some(p) = n.prev {
            out.push((n.row, p));
        }
    }
    out
}

fn delete_row(client: &dyn Client, row: u64) {
    let mut m = client.mutator(TABLE).expect("mutator");
    m.set(Mutation::delete(
        CellFlag::DeleteRow,
        super::node::row_key(row),
        0,
        Vec::new(),
        None,
    ))
    .expect("delete");
    m.flush().expect("flush");
}

#[test]
fn a_node_round_trips_and_a_flipped_byte_fails_its_checksum() {
    let schema = super::node::table_schema(3).expect("schema");
    let families = Families::of(TABLE, &schema).expect("families");
    for prev in [None, Some(0x0123_4567_89ab_cdef)] {
        let node = Node {
            row: 0xfedc_ba98_7654_3210,
            family: families.id(2),
            qualifier: 0x7abc,
            client: 42,
            count: 99,
            prev,
        };
        let m = node.mutation(&families).expect("mutation");
        assert_eq!(m.row, b"fedcba9876543210");
        let cell = common::Cell {
            key: common::Key {
                row: m.row.clone(),
                family: m.family,
                qualifier: m.qualifier.clone(),
                timestamp: 1,
                revision: 1,
                flag: CellFlag::Insert,
            },
            value: m.value.clone(),
        };
        assert_eq!(validate(&cell, &families), Ok(node));
        // Every byte of the value (other than a colon, which breaks the layout) flipped to
        // another hex digit is caught.
        for i in 0..cell.value.len() {
            let mut bad = cell.clone();
            if bad.value[i] == b':' {
                continue;
            }
            bad.value[i] = if bad.value[i] == b'0' { b'1' } else { b'0' };
            assert!(
                validate(&bad, &families).is_err(),
                "byte {i} of {:?} changed, not noticed",
                String::from_utf8_lossy(&cell.value)
            );
        }
        let mut other_family = cell.clone();
        other_family.key.family = families.id(1);
        assert!(validate(&other_family, &families).is_err());
    }
}

#[test]
fn verify_counts_a_deleted_referenced_row_as_undefined() {
    let (_dir, client) = open();
    let families = ensure_table(&client, TABLE, 4).expect("table");
    let stats = load(&client, &families, &config(1_000));
    let acked = stats.acked_nodes.load(Ordering::Relaxed);
    let before = verify(&client, TABLE, &families, 1 << 20).expect("verify");
    assert!(before.ok(), "{before:?}");
    assert_eq!(before.undefined, 0);
    assert!(before.referenced > 500, "{before:?}");
    assert_eq!(before.defined(), acked, "every acknowledged row is there");
    // One cell per row: the closing writes replaced their first node's cell.
    assert_eq!(before.cells, acked);

    let (by, lost) = links(&client, &families)[17];
    delete_row(&client, lost);
    let after = verify(&client, TABLE, &families, 1 << 20).expect("verify");
    assert!(!after.ok());
    assert_eq!(after.undefined, 1, "{after:?}");
    assert_eq!(after.undefined_rows, vec![(lost, by)]);
    assert_eq!(after.defined(), acked - 1);

    // A batch walker asking for it with others does not get it back, and counts it missing.
    let mut batch: BTreeMap<u64, u64> = links(&client, &families)
        .into_iter()
        .take(5)
        .map(|(r, p)| (p, r))
        .collect();
    batch.insert(lost, by);
    let wstats = WalkStats::default();
    let seen = query_batch(&client, TABLE, &families, &batch, &wstats).expect("batch");
    assert_eq!(seen.len(), batch.len() - 1);
    assert!(!seen.contains(&lost));
    let cfg = WalkConfig {
        sleep_ms: 0,
        max_steps: 10,
        batch_size: 10,
        miss_retries: 2,
        miss_retry_ms: 1,
        seed: 1,
    };
    assert!(!super::walk::recheck(
        &client, TABLE, &families, &cfg, lost, by, &wstats
    ));
    assert_eq!(wstats.missing.load(Ordering::Relaxed), 1);
    assert!(wstats.failures() > 0);
}

#[test]
fn verify_counts_a_damaged_cell_as_corrupt() {
    let (_dir, client) = open();
    let families = ensure_table(&client, TABLE, 2).expect("table");
    load(&client, &families, &config(300));
    let mut sc = client.scanner(TABLE, ScanSpec::default()).expect("scanner");
    let cell = sc.next_cell().expect("scan").expect("a cell");
    drop(sc);
    let mut value = cell.value.clone();
    value[3] = if value[3] == b'a' { b'b' } else { b'a' };
    let mut m = client.mutator(TABLE).expect("mutator");
    m.set(Mutation::insert(
        cell.key.row.clone(),
        cell.key.family,
        cell.key.qualifier.clone(),
        value,
    ))
    .expect("set");
    m.flush().expect("flush");
    let r = verify(&client, TABLE, &families, 1 << 20).expect("verify");
    assert_eq!(r.corrupt, 1, "{r:?}");
    assert!(!r.ok());
    assert!(
        r.corrupt_cells[0].contains("checksum"),
        "{:?}",
        r.corrupt_cells
    );
}

/// `verify` stops with a clear error when the table holds more rows than it may hold.
#[test]
fn verify_refuses_more_rows_than_its_bound() {
    let (_dir, client) = open();
    let families = ensure_table(&client, TABLE, 2).expect("table");
    load(&client, &families, &config(300));
    let e = verify(&client, TABLE, &families, 100).expect_err("over the bound");
    assert!(format!("{e:#}").contains("--max-rows"), "{e:#}");
}

/// What the faulty client does to one flush of its mutators.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Drops the flush's cells and says so (an error).
    Fail,
    /// Drops the flush's cells and acknowledges them: a loss.
    Lose,
}

/// The embedded database, with the `at`-th flush over all its mutators (1-based) faulty.
struct FaultyClient {
    inner: EmbeddedClient,
    flushes: Arc<AtomicU64>,
    at: u64,
    fault: Fault,
}

struct FaultyMutator {
    inner: Box<dyn TableMutator>,
    buffer: Vec<Mutation>,
    flushes: Arc<AtomicU64>,
    at: u64,
    fault: Fault,
}

impl TableMutator for FaultyMutator {
    fn set(&mut self, m: Mutation) -> client::Result<()> {
        self.buffer.push(m);
        Ok(())
    }

    fn flush(&mut self) -> client::Result<()> {
        let n = self.flushes.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.at {
            self.buffer.clear();
            return match self.fault {
                Fault::Fail => Err(ClientError::storage(
                    common::ErrorKind::Unavailable,
                    "injected: the flush failed",
                )),
                Fault::Lose => Ok(()),
            };
        }
        for m in self.buffer.drain(..) {
            self.inner.set(m)?;
        }
        self.inner.flush()
    }

    fn cells_flushed(&self) -> u64 {
        self.inner.cells_flushed()
    }
}

impl Client for FaultyClient {
    fn create_namespace(&self, path: &str) -> client::Result<()> {
        self.inner.create_namespace(path)
    }
    fn drop_namespace(&self, path: &str) -> client::Result<()> {
        self.inner.drop_namespace(path)
    }
    fn namespace_exists(&self, path: &str) -> client::Result<bool> {
        self.inner.namespace_exists(path)
    }
    fn listing(&self, path: &str) -> client::Result<Vec<ListingEntry>> {
        self.inner.listing(path)
    }
    fn create_table_split(
        &self,
        path: &str,
        schema: TableSchema,
        splits: &[Vec<u8>],
    ) -> client::Result<TableSchema> {
        self.inner.create_table_split(path, schema, splits)
    }
    fn table_schema(&self, path: &str) -> client::Result<TableSchema> {
        self.inner.table_schema(path)
    }
    fn table_exists(&self, path: &str) -> client::Result<bool> {
        self.inner.table_exists(path)
    }
    fn alter_table(&self, path: &str, schema: TableSchema) -> client::Result<TableSchema> {
        self.inner.alter_table(path, schema)
    }
    fn rename_table(&self, from: &str, to: &str) -> client::Result<()> {
        self.inner.rename_table(from, to)
    }
    fn drop_table(&self, path: &str) -> client::Result<()> {
        self.inner.drop_table(path)
    }
    fn unindexed_mutator(&self, table: &str) -> client::Result<Box<dyn TableMutator>> {
        Ok(Box::new(FaultyMutator {
            inner: self.inner.unindexed_mutator(table)?,
            buffer: Vec::new(),
            flushes: self.flushes.clone(),
            at: self.at,
            fault: self.fault,
        }))
    }
    fn scanner(&self, table: &str, spec: ScanSpec) -> client::Result<Box<dyn TableScanner>> {
        self.inner.scanner(table, spec)
    }
    fn compact(&self, table: Option<&str>, kind: CompactionKind) -> client::Result<()> {
        self.inner.compact(table, kind)
    }
    fn wait_for_maintenance(&self) -> client::Result<()> {
        self.inner.wait_for_maintenance()
    }
    fn status(&self) -> client::Result<Vec<(String, String)>> {
        self.inner.status()
    }
    fn balance(&self) -> client::Result<()> {
        self.inner.balance()
    }
    fn table_ranges(&self, table: &str) -> client::Result<Vec<client::TableRange>> {
        self.inner.table_ranges(table)
    }
    fn close(&self) -> client::Result<()> {
        self.inner.close()
    }
}

fn faulty(fault: Fault, at: u64) -> (tempfile::TempDir, FaultyClient) {
    let (dir, inner) = open();
    let client = FaultyClient {
        inner,
        flushes: Arc::new(AtomicU64::new(0)),
        at,
        fault,
    };
    (dir, client)
}

/// A flush that fails leaves its batch unknown: ingest must start new lists rather than point
/// at it (pointing at it would make every node of the batch UNDEFINED here, where the failed
/// batch is dropped whole).
#[test]
fn ingest_never_points_at_a_batch_whose_flush_failed() {
    let (_dir, client) = faulty(Fault::Fail, 3);
    let families = ensure_table(&client, TABLE, 4).expect("table");
    let stats = load(&client, &families, &config(1_000));
    assert_eq!(stats.failed_flushes.load(Ordering::Relaxed), 1);
    assert_eq!(stats.unknown_cells.load(Ordering::Relaxed), 50);
    let r = verify(&client, TABLE, &families, 1 << 20).expect("verify");
    assert_eq!(r.undefined, 0, "{r:?}");
    assert!(r.ok());
    assert_eq!(r.defined(), stats.acked_nodes.load(Ordering::Relaxed));
}

/// Ingest with a fault that loses an acknowledged batch: verify finds the loss.
#[test]
fn verify_finds_a_batch_lost_after_its_acknowledgement() {
    let (_dir, client) = faulty(Fault::Lose, 2);
    let families = ensure_table(&client, TABLE, 4).expect("table");
    let stats = load(&client, &families, &config(1_000));
    assert_eq!(stats.failed_flushes.load(Ordering::Relaxed), 0);
    let r = verify(&client, TABLE, &families, 1 << 20).expect("verify");
    assert!(!r.ok());
    // The second batch's 50 nodes were pointed at by the third's.
    assert_eq!(r.undefined, 50, "{r:?}");
    assert!(r.defined() < stats.acked_nodes.load(Ordering::Relaxed));
}
