//! The range server's prost messages (written by hand, no protoc) and their conversions to and
//! from the shared types of `common` (scan specs, cells, range reports). Layout:
//! `docs/formats/rangeserver-rpc.md`.

use std::ops::Bound;

use common::key::CellFlag;
use common::row_key::{PartLayout, RowSkip};
use common::scan_spec::{
    CellInterval, CellPos, ColumnSelector, QualifierMatch, RowInterval, ScanSpec,
};

use common::aggregate::Aggregate;
use common::iterators::{ScanIterator, ValuePredicates};
use common::status::{EngineStats, RangeInfo};

pub use super::aggregate::*;
pub use super::cells::*;
pub use super::iterators::*;
pub use super::store_gc::*;

/// Method names; a change of meaning gets a new name.
pub mod method {
    pub const CREATE_TABLE: &str = "rs.create_table";
    pub const DROP_TABLE: &str = "rs.drop_table";
    pub const ALTER_TABLE: &str = "rs.alter_table";
    pub const LOAD_RANGE: &str = "rs.load_range";
    pub const UPDATE: &str = "rs.update";
    /// Streaming: blocks of cells.
    pub const SCAN: &str = "rs.scan";
    pub const RANGES: &str = "rs.ranges";
    pub const STATUS: &str = "rs.status";
    pub const UNLOAD_RANGE: &str = "rs.unload_range";
    pub const ADOPT_RANGE: &str = "rs.adopt_range";
    pub const RECOVER_RANGES: &str = "rs.recover_ranges";
    pub const SPLIT: &str = "rs.split";
    pub const COMPACT: &str = "rs.compact";
    pub const WAIT_FOR_MAINTENANCE: &str = "rs.wait_for_maintenance";
    /// The master's garbage collection of shared cell stores: which stores the server uses
    /// and which it exported ...
    pub const STORE_USE: &str = "rs.store_use";
    /// ... and the removal of exported stores no server uses.
    pub const RELEASE_STORES: &str = "rs.release_stores";
}

/// `rs.compact`: every range of `table_id` (0: of every table); `kind` is
/// `common::CompactionKind::code` (1 minor, 2 merging, 3 major, 4 garbage collection).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(uint32, tag = "2")]
    pub kind: u32,
}

/// Largest regex program a scan may ask for (compiled size, bytes): a client cannot make the
/// server build an unbounded automaton.
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// `rs.create_table`, `rs.alter_table`: the schema in its persisted JSON form
/// (`TableSchema::to_json`), so the wire and the meta log agree on one encoding.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SchemaRequest {
    #[prost(string, tag = "1")]
    pub schema_json: String,
}

/// `rs.drop_table`, `rs.ranges`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TableRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
}

/// The answer of calls that return nothing but success (errors travel as rpc errors).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnitReply {}

/// `rs.load_range`: the range `[start_row, end_row)`; an empty row is unbounded.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LoadRangeRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub start_row: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub end_row: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct LoadRangeReply {
    #[prost(uint64, tag = "1")]
    pub range_id: u64,
}

/// `rs.unload_range`: the range of `table_id` ending at `end_row` (empty: unbounded).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnloadRangeRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub end_row: Vec<u8>,
}

/// A range and its files as one server hands it to another (`rs.unload_range`'s answer,
/// `rs.adopt_range`, `rs.recover_ranges`): rows `[start_row, end_row)` (absent: unbounded) and
/// per access group its cell stores. The engine's meta log keeps its own record of the same
/// facts; the range server converts between the two, so neither format follows the other.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct RangeRecord {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint32, tag = "2")]
    pub table_id: u32,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub start_row: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub end_row: Option<Vec<u8>>,
    #[prost(message, repeated, tag = "5")]
    pub groups: Vec<GroupRecord>,
}

/// One access group of a [`RangeRecord`].
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct GroupRecord {
    #[prost(string, tag = "1")]
    pub name: String,
    /// Cell-store file paths, in the order they were added.
    #[prost(string, repeated, tag = "2")]
    pub stores: Vec<String>,
    /// Every cell of the group with revision <= this is in `stores`.
    #[prost(int64, tag = "3")]
    pub flushed_revision: i64,
    /// Number for the next cell-store file of the group in the range.
    #[prost(uint64, tag = "4")]
    pub next_store: u64,
}

/// The answer to `rs.unload_range`: the range's record. (Tag 1 was the record as the meta
/// log's JSON, before the typed record; it is not reused.)
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeRecordReply {
    #[prost(message, optional, tag = "2")]
    pub record: Option<RangeRecord>,
}

/// `rs.adopt_range`, and one item of `rs.recover_ranges`: a table schema
/// (`TableSchema::to_json`) and the range's record. (Tag 2 was the record as JSON; not reused.)
#[derive(Clone, PartialEq, prost::Message)]
pub struct AdoptRangeRequest {
    #[prost(string, tag = "1")]
    pub schema_json: String,
    #[prost(message, optional, tag = "3")]
    pub record: Option<RangeRecord>,
}

/// `rs.recover_ranges`: a dead server's root on the shared file system and the records of its
/// ranges to recover here.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecoverRangesRequest {
    #[prost(string, tag = "1")]
    pub dead_root: String,
    #[prost(message, repeated, tag = "2")]
    pub items: Vec<AdoptRangeRequest>,
}

/// The local range ids, in the order of the request's items.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RecoverRangesReply {
    #[prost(uint64, repeated, tag = "1")]
    pub range_ids: Vec<u64>,
}

/// `rs.split`: split the range of `table_id` holding `row` so that `row` starts the upper half.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SplitRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub row: Vec<u8>,
}

/// `rs.update`: one batch, applied whole or not at all. The cells are packed
/// ([`encode_cells`]), so the server reads them in place without a vector per field.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    /// The packed cells (layout in `docs/formats/rangeserver-rpc.md`, "Packed cells").
    #[prost(bytes = "bytes", tag = "3")]
    pub cells: bytes::Bytes,
    /// How many cells `cells` holds.
    #[prost(uint32, tag = "4")]
    pub count: u32,
    /// The ordered update stream of the batch (`server::streams`); 0: none, the batch is
    /// applied on arrival.
    #[prost(uint64, tag = "5")]
    pub stream: u64,
    /// The batch's place in its stream, from 0.
    #[prost(uint64, tag = "6")]
    pub seq: u64,
    /// How many leading batches of the stream the client has seen applied (where a stream the
    /// server does not know starts).
    #[prost(uint64, tag = "7")]
    pub acked: u64,
}

/// A row this server holds no range for: the client refreshes its range locations.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NotHere {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub row: Vec<u8>,
}

/// The answer to `rs.update`: `not_here` or `stream_refused` set means nothing of the batch
/// was applied.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateReply {
    #[prost(message, optional, tag = "1")]
    pub not_here: Option<NotHere>,
    /// Why the batch's update stream refused it (`server::streams`).
    #[prost(string, optional, tag = "2")]
    pub stream_refused: Option<String>,
}

/// One end of a row interval.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireRowBound {
    /// 0 unbounded, 1 included, 2 excluded.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub row: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WireRowInterval {
    #[prost(message, optional, tag = "1")]
    pub start: Option<WireRowBound>,
    #[prost(message, optional, tag = "2")]
    pub end: Option<WireRowBound>,
}

/// One end of a cell interval.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireCellBound {
    /// 0 unbounded, 1 included, 2 excluded.
    #[prost(uint32, tag = "1")]
    pub kind: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub row: Vec<u8>,
    #[prost(uint32, tag = "3")]
    pub family: u32,
    #[prost(bytes = "vec", tag = "4")]
    pub qualifier: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WireCellInterval {
    #[prost(message, optional, tag = "1")]
    pub start: Option<WireCellBound>,
    #[prost(message, optional, tag = "2")]
    pub end: Option<WireCellBound>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WireColumn {
    #[prost(uint32, tag = "1")]
    pub family: u32,
    /// 0 every qualifier, 1 exact, 2 prefix, 3 regex (`qualifier` is its UTF-8 pattern).
    #[prost(uint32, tag = "2")]
    pub match_kind: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub qualifier: Vec<u8>,
}

/// A `common::row_key::RowSkip`: one entry per part of the row key.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireRowSkip {
    #[prost(message, repeated, tag = "1")]
    pub parts: Vec<WireKeyPartSlot>,
}

/// One part of a `WireRowSkip`: its layout and the ranges its bytes may take (none: any).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireKeyPartSlot {
    /// Width in bytes; absent for the last part when it takes the rest of the row.
    #[prost(uint32, optional, tag = "1")]
    pub width: Option<u32>,
    /// The part holds only ASCII digits.
    #[prost(bool, tag = "2")]
    pub digits: bool,
    #[prost(message, repeated, tag = "3")]
    pub ranges: Vec<WireRowInterval>,
}

impl From<&RowSkip> for WireRowSkip {
    fn from(s: &RowSkip) -> Self {
        Self {
            parts: s
                .layout
                .iter()
                .zip(&s.slots)
                .map(|(l, slot)| WireKeyPartSlot {
                    width: l.width.map(u32::from),
                    digits: l.digits,
                    ranges: slot
                        .iter()
                        .map(|(a, b)| WireRowInterval {
                            start: Some(row_bound_to_wire(a)),
                            end: Some(row_bound_to_wire(b)),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl TryFrom<WireRowSkip> for RowSkip {
    type Error = String;
    fn try_from(s: WireRowSkip) -> Result<Self, String> {
        let mut layout = Vec::with_capacity(s.parts.len());
        let mut slots = Vec::with_capacity(s.parts.len());
        let n = s.parts.len();
        for (i, p) in s.parts.into_iter().enumerate() {
            let width = match p.width {
                Some(w) => Some(u16::try_from(w).map_err(|_| format!("key part width {w}"))?),
                None if i + 1 == n => None,
                None => return Err("only the last key part may have no width".into()),
            };
            layout.push(PartLayout {
                width,
                digits: p.digits,
            });
            let mut slot = Vec::with_capacity(p.ranges.len());
            for r in p.ranges {
                slot.push((row_bound_from_wire(r.start)?, row_bound_from_wire(r.end)?));
            }
            slots.push(slot);
        }
        let skip = RowSkip { layout, slots };
        skip.check()?;
        Ok(skip)
    }
}

/// A `ScanSpec`; fields mean what they mean there.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireScanSpec {
    #[prost(message, repeated, tag = "1")]
    pub row_intervals: Vec<WireRowInterval>,
    #[prost(message, repeated, tag = "2")]
    pub cell_intervals: Vec<WireCellInterval>,
    #[prost(message, repeated, tag = "3")]
    pub columns: Vec<WireColumn>,
    /// Absent: no lower bound.
    #[prost(int64, optional, tag = "4")]
    pub time_start: Option<i64>,
    /// Absent: no upper bound.
    #[prost(int64, optional, tag = "5")]
    pub time_end: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub row_regex: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub value_regex: Option<String>,
    #[prost(uint32, tag = "8")]
    pub max_versions: u32,
    #[prost(uint64, tag = "9")]
    pub row_limit: u64,
    #[prost(uint64, tag = "10")]
    pub row_offset: u64,
    #[prost(uint64, tag = "11")]
    pub cell_limit: u64,
    #[prost(uint64, tag = "12")]
    pub cell_offset: u64,
    #[prost(uint64, tag = "13")]
    pub cell_limit_per_family: u64,
    #[prost(bool, tag = "14")]
    pub keys_only: bool,
    #[prost(bool, tag = "15")]
    pub return_deletes: bool,
    #[prost(bool, tag = "16")]
    pub no_cache: bool,
    /// Scan iterators, run above the table's scan iterators in this order.
    #[prost(message, repeated, tag = "17")]
    pub iterators: Vec<WireScanIterator>,
    /// Column value predicates, run in the range server; absent: none.
    #[prost(message, optional, tag = "18")]
    pub value_predicates: Option<WireValuePredicates>,
    /// The row intervals count as one interval for the limits.
    #[prost(bool, tag = "20")]
    pub one_interval: bool,
    /// SCAN_AND_FILTER_ROWS: step through the rows instead of seeking to each interval.
    #[prost(bool, tag = "21")]
    pub scan_and_filter: bool,
    /// Key-part predicates over a composite row key; absent: none.
    #[prost(message, optional, tag = "22")]
    pub row_skip: Option<WireRowSkip>,
    /// Aggregate instead of returning cells (`rs/aggregate.rs`); absent: return cells.
    #[prost(message, optional, tag = "19")]
    pub aggregate: Option<WireAggregate>,
}

/// `rs.scan`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScanRequest {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<WireScanSpec>,
}

/// One pushed message of `rs.scan`: `count` cells packed back to back in `cells`
/// ([`encode_scan_cell`]). A block with `not_here` set is the last of its stream. (Tag 1 was
/// the cells as one message each; it is not used.)
#[derive(Clone, PartialEq, prost::Message)]
pub struct ScanBlock {
    #[prost(message, optional, tag = "2")]
    pub not_here: Option<NotHere>,
    #[prost(bytes = "bytes", tag = "3")]
    pub cells: bytes::Bytes,
    #[prost(uint32, tag = "4")]
    pub count: u32,
    /// A scan with an aggregate answers with blocks carrying a partial each (and no cells).
    #[prost(message, optional, tag = "5")]
    pub aggregate: Option<WireAggregatePartial>,
}

/// A range held by the server. Empty rows are unbounded ends.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireRange {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint32, tag = "2")]
    pub table_id: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub start_row: Vec<u8>,
    #[prost(bytes = "vec", tag = "4")]
    pub end_row: Vec<u8>,
    #[prost(uint64, tag = "5")]
    pub size_bytes: u64,
    #[prost(uint64, tag = "6")]
    pub stores: u64,
    #[prost(uint64, tag = "7")]
    pub cache_bytes: u64,
    #[prost(uint64, tag = "8")]
    pub cells_written: u64,
    #[prost(uint64, tag = "9")]
    pub cells_read: u64,
    #[prost(uint64, tag = "10")]
    pub seeks: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RangesReply {
    #[prost(message, repeated, tag = "1")]
    pub ranges: Vec<WireRange>,
}

/// `rs.status`: the engine's counters.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusReply {
    #[prost(uint64, tag = "1")]
    pub cache_bytes: u64,
    #[prost(uint64, tag = "2")]
    pub ranges: u64,
    #[prost(uint64, tag = "3")]
    pub stores: u64,
    #[prost(uint64, tag = "4")]
    pub minor_compactions: u64,
    #[prost(uint64, tag = "5")]
    pub merging_compactions: u64,
    #[prost(uint64, tag = "6")]
    pub major_compactions: u64,
    #[prost(uint64, tag = "7")]
    pub splits: u64,
    #[prost(uint64, tag = "8")]
    pub replayed_cells: u64,
    #[prost(uint64, tag = "9")]
    pub purged_fragments: u64,
    #[prost(uint64, tag = "10")]
    pub block_cache_hits: u64,
    #[prost(uint64, tag = "11")]
    pub block_cache_misses: u64,
    /// The iterator and combiner kinds the server can run, as `iterator:NAME` and
    /// `combiner:NAME`, sorted (`Registry::kind_names`): the master refuses DDL naming a kind
    /// some live server lacks.
    #[prost(string, repeated, tag = "12")]
    pub kinds: Vec<String>,
    /// Seeks scans made into the ranges the server holds (`RangeInfo::seeks`, summed).
    #[prost(uint64, tag = "13")]
    pub seeks: u64,
    /// Times a write waited for the cell caches to shrink below their limit, and the
    /// milliseconds those waits took together.
    #[prost(uint64, tag = "14")]
    pub memory_waits: u64,
    #[prost(uint64, tag = "15")]
    pub memory_wait_ms: u64,
    #[prost(uint64, tag = "16")]
    pub block_cache_bytes: u64,
    #[prost(uint64, tag = "17")]
    pub store_memory_bytes: u64,
}

/// `None` for an empty row: the wire's spelling of an unbounded end.
pub fn row_or_unbounded(row: Vec<u8>) -> Option<Vec<u8>> {
    (!row.is_empty()).then_some(row)
}

pub fn flag_from_wire(flag: u32) -> Result<CellFlag, String> {
    u8::try_from(flag)
        .ok()
        .and_then(CellFlag::from_u8)
        .ok_or_else(|| format!("unknown cell flag {flag}"))
}

pub(crate) fn family_from_wire(family: u32) -> Result<u8, String> {
    u8::try_from(family).map_err(|_| format!("family id {family} is above 255"))
}

impl From<&RangeInfo> for WireRange {
    fn from(r: &RangeInfo) -> Self {
        Self {
            id: r.id,
            table_id: r.table_id,
            start_row: r.start_row.clone().unwrap_or_default(),
            end_row: r.end_row.clone().unwrap_or_default(),
            size_bytes: r.size_bytes,
            stores: r.stores as u64,
            cache_bytes: r.cache_bytes,
            cells_written: r.cells_written,
            cells_read: r.cells_read,
            seeks: r.seeks,
        }
    }
}

impl From<WireRange> for RangeInfo {
    fn from(r: WireRange) -> Self {
        Self {
            id: r.id,
            table_id: r.table_id,
            start_row: row_or_unbounded(r.start_row),
            end_row: row_or_unbounded(r.end_row),
            size_bytes: r.size_bytes,
            stores: usize::try_from(r.stores).unwrap_or(usize::MAX),
            cache_bytes: r.cache_bytes,
            cells_written: r.cells_written,
            cells_read: r.cells_read,
            seeks: r.seeks,
        }
    }
}

impl From<&EngineStats> for StatusReply {
    fn from(s: &EngineStats) -> Self {
        Self {
            cache_bytes: s.cache_bytes,
            ranges: s.ranges as u64,
            stores: s.stores as u64,
            minor_compactions: s.minor_compactions,
            merging_compactions: s.merging_compactions,
            major_compactions: s.major_compactions,
            splits: s.splits,
            replayed_cells: s.replayed_cells,
            purged_fragments: s.purged_fragments,
            block_cache_hits: s.block_cache_hits,
            block_cache_misses: s.block_cache_misses,
            kinds: Vec::new(),
            seeks: s.seeks,
            memory_waits: s.memory_waits,
            memory_wait_ms: s.memory_wait_ms,
            block_cache_bytes: s.block_cache_bytes,
            store_memory_bytes: s.store_memory_bytes,
        }
    }
}

impl From<StatusReply> for EngineStats {
    fn from(s: StatusReply) -> Self {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Self {
            cache_bytes: s.cache_bytes,
            ranges: size(s.ranges),
            stores: size(s.stores),
            minor_compactions: s.minor_compactions,
            merging_compactions: s.merging_compactions,
            major_compactions: s.major_compactions,
            splits: s.splits,
            replayed_cells: s.replayed_cells,
            purged_fragments: s.purged_fragments,
            block_cache_hits: s.block_cache_hits,
            block_cache_misses: s.block_cache_misses,
            seeks: s.seeks,
            memory_waits: s.memory_waits,
            memory_wait_ms: s.memory_wait_ms,
            block_cache_bytes: s.block_cache_bytes,
            store_memory_bytes: s.store_memory_bytes,
        }
    }
}

fn bound_to_wire<T>(b: &Bound<T>, f: impl FnOnce(&T) -> (u32, Vec<u8>, Vec<u8>)) -> WireCellBound {
    let (kind, inner) = match b {
        Bound::Unbounded => (0, None),
        Bound::Included(t) => (1, Some(f(t))),
        Bound::Excluded(t) => (2, Some(f(t))),
    };
    let (family, row, qualifier) = inner.unwrap_or_default();
    WireCellBound {
        kind,
        row,
        family,
        qualifier,
    }
}

fn bound_from_wire<T>(
    kind: u32,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<Bound<T>, String> {
    match kind {
        0 => Ok(Bound::Unbounded),
        1 => Ok(Bound::Included(f()?)),
        2 => Ok(Bound::Excluded(f()?)),
        k => Err(format!("unknown interval bound kind {k}")),
    }
}

fn row_bound_to_wire(b: &Bound<Vec<u8>>) -> WireRowBound {
    let w = bound_to_wire(b, |r| (0, r.clone(), Vec::new()));
    WireRowBound {
        kind: w.kind,
        row: w.row,
    }
}

fn row_bound_from_wire(b: Option<WireRowBound>) -> Result<Bound<Vec<u8>>, String> {
    let b = b.unwrap_or_default();
    bound_from_wire(b.kind, || Ok(b.row))
}

fn cell_bound_to_wire(b: &Bound<CellPos>) -> WireCellBound {
    bound_to_wire(b, |p| (p.family.into(), p.row.clone(), p.qualifier.clone()))
}

fn cell_bound_from_wire(b: Option<WireCellBound>) -> Result<Bound<CellPos>, String> {
    let b = b.unwrap_or_default();
    bound_from_wire(b.kind, || {
        Ok(CellPos {
            row: b.row,
            family: family_from_wire(b.family)?,
            qualifier: b.qualifier,
        })
    })
}

pub(crate) fn regex_from_wire(pattern: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|e| format!("bad regex {pattern:?}: {e}"))
}

/// A column selector on the wire (scan columns and value predicates' output).
pub(crate) fn column_to_wire(c: &ColumnSelector) -> WireColumn {
    let (match_kind, qualifier) = match &c.qualifier {
        QualifierMatch::All => (0, Vec::new()),
        QualifierMatch::Exact(q) => (1, q.clone()),
        QualifierMatch::Prefix(q) => (2, q.clone()),
        QualifierMatch::Regex(r) => (3, r.as_str().as_bytes().to_vec()),
    };
    WireColumn {
        family: c.family.into(),
        match_kind,
        qualifier,
    }
}

pub(crate) fn column_from_wire(c: WireColumn) -> Result<ColumnSelector, String> {
    let qualifier = match c.match_kind {
        0 => QualifierMatch::All,
        1 => QualifierMatch::Exact(c.qualifier),
        2 => QualifierMatch::Prefix(c.qualifier),
        3 => {
            let pattern = String::from_utf8(c.qualifier)
                .map_err(|_| "a qualifier regex is not UTF-8".to_string())?;
            QualifierMatch::Regex(regex_from_wire(&pattern)?)
        }
        k => return Err(format!("unknown qualifier match kind {k}")),
    };
    Ok(ColumnSelector {
        family: family_from_wire(c.family)?,
        qualifier,
    })
}

impl From<&ScanSpec> for WireScanSpec {
    fn from(s: &ScanSpec) -> Self {
        Self {
            row_intervals: s
                .row_intervals
                .iter()
                .map(|i| WireRowInterval {
                    start: Some(row_bound_to_wire(&i.start)),
                    end: Some(row_bound_to_wire(&i.end)),
                })
                .collect(),
            cell_intervals: s
                .cell_intervals
                .iter()
                .map(|i| WireCellInterval {
                    start: Some(cell_bound_to_wire(&i.start)),
                    end: Some(cell_bound_to_wire(&i.end)),
                })
                .collect(),
            columns: s.columns.iter().map(column_to_wire).collect(),
            time_start: (s.time_start != i64::MIN).then_some(s.time_start),
            time_end: (s.time_end != i64::MAX).then_some(s.time_end),
            row_regex: s.row_regex.as_ref().map(|r| r.as_str().to_string()),
            value_regex: s.value_regex.as_ref().map(|r| r.as_str().to_string()),
            max_versions: s.max_versions,
            row_limit: s.row_limit,
            row_offset: s.row_offset,
            cell_limit: s.cell_limit,
            cell_offset: s.cell_offset,
            cell_limit_per_family: s.cell_limit_per_family,
            keys_only: s.keys_only,
            return_deletes: s.return_deletes,
            no_cache: s.no_cache,
            iterators: s.iterators.iter().map(WireScanIterator::from).collect(),
            value_predicates: s.value_predicates.as_ref().map(WireValuePredicates::from),
            one_interval: s.one_interval,
            scan_and_filter: s.scan_and_filter,
            row_skip: s.row_skip.as_ref().map(WireRowSkip::from),
            aggregate: s.aggregate.as_ref().map(WireAggregate::from),
        }
    }
}

impl TryFrom<WireScanSpec> for ScanSpec {
    type Error = String;
    fn try_from(s: WireScanSpec) -> Result<Self, String> {
        let mut row_intervals = Vec::with_capacity(s.row_intervals.len());
        for i in s.row_intervals {
            row_intervals.push(RowInterval {
                start: row_bound_from_wire(i.start)?,
                end: row_bound_from_wire(i.end)?,
            });
        }
        let mut cell_intervals = Vec::with_capacity(s.cell_intervals.len());
        for i in s.cell_intervals {
            cell_intervals.push(CellInterval {
                start: cell_bound_from_wire(i.start)?,
                end: cell_bound_from_wire(i.end)?,
            });
        }
        let mut columns = Vec::with_capacity(s.columns.len());
        for c in s.columns {
            columns.push(column_from_wire(c)?);
        }
        Ok(ScanSpec {
            row_intervals,
            cell_intervals,
            columns,
            time_start: s.time_start.unwrap_or(i64::MIN),
            time_end: s.time_end.unwrap_or(i64::MAX),
            row_regex: s.row_regex.as_deref().map(regex_from_wire).transpose()?,
            value_regex: s.value_regex.as_deref().map(regex_from_wire).transpose()?,
            max_versions: s.max_versions,
            row_limit: s.row_limit,
            row_offset: s.row_offset,
            cell_limit: s.cell_limit,
            cell_offset: s.cell_offset,
            cell_limit_per_family: s.cell_limit_per_family,
            keys_only: s.keys_only,
            return_deletes: s.return_deletes,
            no_cache: s.no_cache,
            iterators: s.iterators.into_iter().map(ScanIterator::from).collect(),
            value_predicates: s
                .value_predicates
                .map(ValuePredicates::try_from)
                .transpose()?,
            one_interval: s.one_interval,
            scan_and_filter: s.scan_and_filter,
            row_skip: s.row_skip.map(RowSkip::try_from).transpose()?,
            aggregate: s.aggregate.map(Aggregate::try_from).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::AsMutationRef;
    use common::Mutation;
    use common::key::{Cell, Key, KeyRef};
    use proptest::prelude::*;

    fn mutation() -> impl Strategy<Value = Mutation> {
        (
            prop::collection::vec(any::<u8>(), 0..40),
            any::<u8>(),
            prop::collection::vec(any::<u8>(), 0..20),
            prop::option::of(any::<i64>()),
            prop::sample::select(vec![
                CellFlag::DeleteRow,
                CellFlag::DeleteColumnFamily,
                CellFlag::DeleteCell,
                CellFlag::DeleteCellVersion,
                CellFlag::Insert,
            ]),
            prop::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(
                |(row, family, qualifier, timestamp, flag, value)| Mutation {
                    row,
                    family,
                    qualifier,
                    timestamp,
                    flag,
                    value,
                },
            )
    }

    proptest! {
        /// Packed cells read back as written; every strict prefix of a packing and every
        /// miscounted one is refused, never read as something else.
        #[test]
        fn packed_cells_round_trip(cells in prop::collection::vec(mutation(), 0..30), cut in any::<prop::sample::Index>()) {
            let mut buf = Vec::new();
            encode_cells(&cells, &mut buf);
            let back = decode_cells(&buf, cells.len() as u32).unwrap();
            prop_assert_eq!(back.len(), cells.len());
            for (b, m) in back.iter().zip(&cells) {
                prop_assert_eq!(*b, m.as_mutation_ref());
            }
            damage_is_refused(&buf, cells.len() as u32, cut, |b, n| decode_cells(b, n).is_err())?;
        }
    }

    /// A strict prefix of a packing of `count` cells, and the packing read as one cell more or
    /// one fewer, must all be refused.
    fn damage_is_refused(
        buf: &[u8],
        count: u32,
        cut: prop::sample::Index,
        refused: impl Fn(&[u8], u32) -> bool,
    ) -> Result<(), TestCaseError> {
        if !buf.is_empty() {
            prop_assert!(refused(&buf[..cut.index(buf.len())], count));
        }
        prop_assert!(refused(buf, count + 1));
        if count > 0 {
            prop_assert!(refused(buf, count - 1));
        }
        Ok(())
    }

    /// Reads `count` packed scan cells ([`encode_scan_cell`]) from `buf`. A malformed buffer is an
    /// error naming the cell and byte offset, and nothing is returned.
    fn decode_scan_cells(buf: &[u8], count: u32) -> Result<Vec<Cell>, String> {
        let mut cells = PackedCells::new(bytes::Bytes::copy_from_slice(buf), count);
        // Every cell takes at least 21 bytes, so a lying count cannot make a huge allocation.
        let mut out = Vec::with_capacity((count as usize).min(buf.len() / 21 + 1));
        while let Some(c) = cells.next_ref()? {
            out.push(c.to_cell());
        }
        Ok(out)
    }

    fn scan_cell() -> impl Strategy<Value = Cell> {
        (mutation(), any::<i64>(), any::<i64>()).prop_map(|(m, ts, rev)| Cell {
            key: Key {
                row: m.row,
                family: m.family,
                qualifier: m.qualifier,
                timestamp: ts,
                revision: rev,
                flag: m.flag,
            },
            value: m.value,
        })
    }

    fn pack_scan(cells: &[Cell]) -> Vec<u8> {
        let mut buf = Vec::new();
        for c in cells {
            let enc = c.key.encode();
            encode_scan_cell(&KeyRef::new(&enc).unwrap(), &c.value, &mut buf);
        }
        buf
    }

    proptest! {
        /// Packed scan cells read back as the cells scanned (rows and qualifiers unescaped,
        /// any bytes); a cut or miscounted message is refused; the size bound holds.
        #[test]
        fn packed_scan_cells_round_trip(cells in prop::collection::vec(scan_cell(), 0..30), cut in any::<prop::sample::Index>()) {
            let buf = pack_scan(&cells);
            let bound: usize = cells
                .iter()
                .map(|c| c.key.encode().len() + c.value.len() + PACKED_SCAN_CELL_OVERHEAD)
                .sum();
            prop_assert!(buf.len() <= bound);
            prop_assert_eq!(&decode_scan_cells(&buf, cells.len() as u32).unwrap(), &cells);
            damage_is_refused(&buf, cells.len() as u32, cut, |b, n| decode_scan_cells(b, n).is_err())?;
        }
    }

    #[test]
    fn malformed_packed_scan_cells_say_which_cell_and_where() {
        let cell = |row: &str| Cell {
            key: Key {
                row: row.into(),
                family: 1,
                qualifier: b"q".to_vec(),
                timestamp: 5,
                revision: 6,
                flag: CellFlag::Insert,
            },
            value: b"v".to_vec(),
        };
        let buf = pack_scan(&[cell("r1"), cell("r2")]);
        let second = buf.len() / 2;
        let mut bad = buf.clone();
        bad[second] = 7;
        assert_eq!(
            decode_scan_cells(&bad, 2).unwrap_err(),
            format!("packed cell 1 at byte {second}: unknown cell flag 7")
        );
        let e = decode_scan_cells(&buf[..buf.len() - 1], 2).unwrap_err();
        assert!(e.starts_with("packed cell 1 at byte"), "{e}");
        assert!(e.ends_with("value of 1 bytes runs past the message"), "{e}");
        let e = decode_scan_cells(&buf, 1).unwrap_err();
        assert_eq!(
            e,
            format!("{second} bytes after the last of 1 packed cells")
        );
        // A slice of a message names offsets in the whole message.
        let mut whole = PackedCells::new(bad.into(), 2);
        whole.next_ref().unwrap();
        let mut rest = whole.slice(second, second * 2, 1, 1);
        assert_eq!(
            rest.next_cell().unwrap_err(),
            format!("packed cell 1 at byte {second}: unknown cell flag 7")
        );
        assert!(decode_scan_cells(&buf, u32::MAX).is_err());
    }

    #[test]
    fn malformed_packed_cells_say_which_cell_and_where() {
        let cells = [
            Mutation::insert("r1", 1, "q", "v"),
            Mutation::insert("r2", 1, "q", "v"),
        ];
        let mut buf = Vec::new();
        encode_cells(&cells, &mut buf);
        let second = buf.len() / 2;
        let mut bad = buf.clone();
        bad[second] = 7;
        let e = decode_cells(&bad, 2).unwrap_err();
        assert_eq!(
            e,
            format!("packed cell 1 at byte {second}: unknown cell flag 7")
        );
        let mut bad = buf.clone();
        bad[2] = 9;
        let e = decode_cells(&bad, 2).unwrap_err();
        assert_eq!(
            e,
            "packed cell 0 at byte 0: timestamp marker 9 is neither 0 nor 1"
        );
        let e = decode_cells(&buf[..buf.len() - 1], 2).unwrap_err();
        assert!(e.starts_with("packed cell 1 at byte"), "{e}");
        assert!(e.ends_with("value of 1 bytes runs past the message"), "{e}");
        // A count far above what the bytes can hold allocates nothing large and fails.
        assert!(decode_cells(&buf, u32::MAX).is_err());
    }
}
