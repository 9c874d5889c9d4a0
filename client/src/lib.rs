//! The client interface every front end uses (the HQL executor, the loader, benchmarks), and
//! its implementation over a cluster ([`cluster::ClusterClient`]). The embedded database (crate
//! `embedded`) implements the same [`Client`] trait, so front ends never know which one they
//! talk to. This crate links no storage engine: its wire types come from `proto`.
//!
//! Names are absolute paths: namespaces `/`, `/a`, `/a/b`; tables `/a/t` (the last component is
//! the table name). Callers resolve relative names against their current namespace first.
//! Calls are blocking: make them from plain threads, not from inside an async task.

pub mod aggregate;
pub mod cluster;
pub mod index;

pub use common::{Cell, Mutation, ScanSpec, TableSchema};

pub use common::CompactionKind;
pub use proto::error::{ClientError, Result, hs_err, normalize_path, split_path};

/// One range of a table and the server holding it (`TableRange::start_row` `None`: the
/// table's start; `end_row` `None`: its end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRange {
    pub start_row: Option<Vec<u8>>,
    pub end_row: Option<Vec<u8>>,
    /// The range server's location name (`rs<N>`); `local` on the embedded database.
    pub location: String,
}

/// One entry of a namespace listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListingEntry {
    /// The name within the namespace (no slashes).
    pub name: String,
    pub is_namespace: bool,
}

/// A database: namespaces, tables and their data.
pub trait Client: Send + Sync {
    /// Creates a namespace; its parent must exist.
    fn create_namespace(&self, path: &str) -> Result<()>;
    /// Drops an empty namespace (not `/`).
    fn drop_namespace(&self, path: &str) -> Result<()>;
    fn namespace_exists(&self, path: &str) -> Result<bool>;
    /// Sub-namespaces and tables of a namespace, sorted by name.
    fn listing(&self, path: &str) -> Result<Vec<ListingEntry>>;

    /// Creates a table at `path` (its namespace must exist). The schema's `id` and `name` are
    /// assigned here; family ids must be set (1..=255). Returns the stored schema.
    fn create_table(&self, path: &str, schema: TableSchema) -> Result<TableSchema> {
        self.create_table_split(path, schema, &[])
    }
    /// [`Client::create_table`] with the table pre-split: one range per gap between `splits`
    /// (strictly increasing rows, `common::row_range::check_split_rows`), spread over the
    /// range servers (HBase's `createTable(desc, splitKeys)`, HQL `SPLIT ON`). The ranges
    /// split further by size as usual.
    fn create_table_split(
        &self,
        path: &str,
        schema: TableSchema,
        splits: &[Vec<u8>],
    ) -> Result<TableSchema>;
    fn table_schema(&self, path: &str) -> Result<TableSchema>;
    fn table_exists(&self, path: &str) -> Result<bool>;
    /// Replaces a table's schema; takes effect on existing data (dropped families disappear,
    /// new versions/TTL limits apply on read). Family ids must be kept; a dropped family stays
    /// in the schema marked `deleted` so its id is never reused.
    fn alter_table(&self, path: &str, schema: TableSchema) -> Result<TableSchema>;
    /// Renames (and possibly moves to another existing namespace) a table.
    fn rename_table(&self, from: &str, to: &str) -> Result<()>;
    /// Drops a table and frees its files.
    fn drop_table(&self, path: &str) -> Result<()>;

    /// A buffered writer to a table that keeps its secondary indexes, as Hypertable's
    /// `TableMutator` does: where a live family is indexed, each insert also writes its entries
    /// to `^t` / `^^t` ([`index::mutator`]). Deletes through it leave their entries behind
    /// (a query checks every candidate row against its predicates, so answers stay exact;
    /// `REBUILD INDICES` removes them); [`index::mutator`] with a reader removes them too.
    fn mutator(&self, table: &str) -> Result<Box<dyn TableMutator>> {
        index::mutator(self, None, table)
    }
    /// A buffered writer of the table's own cells only: no index entries. For index tables
    /// themselves, index rebuilds, and writers that maintain indexes on their own.
    fn unindexed_mutator(&self, table: &str) -> Result<Box<dyn TableMutator>>;
    /// A streaming reader of a table: cells arrive as they are found, memory stays bounded.
    /// `spec.aggregate` is ignored: a scanner returns cells.
    fn scanner(&self, table: &str, spec: ScanSpec) -> Result<Box<dyn TableScanner>>;
    /// Accumulo's BatchScanner: the cells of `spec` in no particular order (each row's cells
    /// in key order only within what one server returns at a time). A cluster sends one
    /// request per range server holding all its ranges' intervals, up to `parallelism`
    /// servers at once; limits and offsets are refused (they need an order). This default
    /// (the embedded database) returns the ordered scanner's cells, one valid order.
    fn batch_scanner(
        &self,
        table: &str,
        spec: ScanSpec,
        parallelism: usize,
    ) -> Result<Box<dyn TableScanner>> {
        let _ = parallelism;
        if common::aggregate::has_limits(&spec) {
            return Err(ClientError::InvalidInput(
                "a batch scanner returns cells in no order: limits and offsets need the \
                 ordered scanner"
                    .into(),
            ));
        }
        self.scanner(table, spec)
    }

    /// Aggregates a scan (`spec.aggregate` names the columns): the partial of the cells
    /// `scanner` would return for the same spec, newest version of each cell. The embedded
    /// database folds in its engine and a cluster on its range servers (scans with limits are
    /// folded on the client); this default folds a scanner's cells here.
    fn aggregate(
        &self,
        table: &str,
        mut spec: ScanSpec,
    ) -> Result<common::aggregate::AggregatePartial> {
        let agg = aggregate::take_aggregate(&mut spec)?;
        let mut scanner = self.scanner(table, spec)?;
        aggregate::fold_scanner(scanner.as_mut(), &agg)
    }

    /// Compacts one table (or all with `None`) and waits for it.
    fn compact(&self, table: Option<&str>, kind: CompactionKind) -> Result<()>;
    /// Waits until no background maintenance is queued or running.
    fn wait_for_maintenance(&self) -> Result<()>;
    /// Named figures for HQL `STATUS`.
    fn status(&self) -> Result<Vec<(String, String)>>;
    /// Spreads ranges evenly over the range servers now (HQL `BALANCE`).
    fn balance(&self) -> Result<()>;
    /// The table's ranges in row order, with where each is served (as last known: a range
    /// may move at any time).
    fn table_ranges(&self, table: &str) -> Result<Vec<TableRange>>;
    /// Flushes what must be flushed and closes the database.
    fn close(&self) -> Result<()>;
}

/// Buffers writes to one table and sends them in batches.
pub trait TableMutator: Send {
    /// Buffers one cell; sends the buffer when it passes its limit.
    fn set(&mut self, m: Mutation) -> Result<()>;
    /// Returns once every cell set so far is durable at the table's durability.
    fn flush(&mut self) -> Result<()>;
    /// Cells made durable so far.
    fn cells_flushed(&self) -> u64;
}

/// Cells of a scan in key order.
pub trait TableScanner: Send {
    /// The next cell, or `None` at the end.
    fn next_cell(&mut self) -> Result<Option<Cell>>;
}
