//! Aggregates where the data is: a scan's cells folded into a `common::aggregate` partial as
//! the engine reads them, so an aggregating `rs.scan` answers with partials instead of cells.
//!
//! The fold reads exactly the cells the same scan returns (predicates, value predicates,
//! iterators, limits), taking the newest version of each cell ([`AggregateFold`]). When nothing
//! between the visible cells and the output could tell versions apart, the scan asks for one
//! version only ([`narrowed`]), which seeks past old versions instead of folding them away.

use common::aggregate::{Aggregate, AggregateFold, AggregatePartial};
use common::iterators::IterScope;
use common::{ScanSpec, TableSchema};

use crate::engine::{Engine, TableScanner};
use crate::error::{Error, Result};

/// The spec's aggregate, if the rest of the spec can be aggregated: a scan returning keys only
/// or delete markers cannot.
pub fn check(spec: &ScanSpec) -> Result<&Aggregate> {
    common::aggregate::aggregate_of(spec).map_err(Error::InvalidInput)
}

/// The scan to fold: `spec` reading only each cell's newest version when that cannot change
/// what the fold sees (no value predicates, value regex, iterators or limits, which judge or
/// count every version returned).
pub fn narrowed(spec: &ScanSpec, schema: &TableSchema) -> ScanSpec {
    let mut s = spec.clone();
    let table_scan_iterators = schema
        .iterators
        .iter()
        .any(|i| i.scopes.contains(&IterScope::Scan));
    if s.value_predicates.is_none()
        && s.value_regex.is_none()
        && s.iterators.is_empty()
        && !table_scan_iterators
        && !common::aggregate::has_limits(&s)
    {
        s.max_versions = 1;
    }
    s
}

/// Folds the scanner's cells into `fold` until the scan ends or (when the scanner pauses on
/// yields) stops to give its thread back: [`TableScanner::yielded`] tells which.
pub fn fold_scanner(sc: &mut TableScanner, fold: &mut AggregateFold) -> Result<()> {
    while sc.next_ref(|k, v| fold.cell(&k.row(), k.family(), &k.qualifier(), k.timestamp(), v))? {}
    Ok(())
}

impl Engine {
    /// Aggregates a scan of one table (`spec.aggregate` names the columns) in this process:
    /// the partial of every cell the same scan returns, newest version of each cell. A scan
    /// over much data (a large key set, a long interval) is split into pieces of whole rows
    /// ([`Engine::scan_pieces`], at most `EngineOptions::aggregate_pieces`), read at one
    /// snapshot and folded on as many threads, their partials merged.
    pub fn aggregate(&self, table_id: u32, spec: &ScanSpec) -> Result<AggregatePartial> {
        let agg = check(spec)?;
        let spec = narrowed(spec, &self.schema(table_id)?);
        let (max, piece_bytes) = (
            self.inner.opts().aggregate_pieces,
            self.inner.opts().aggregate_piece_bytes,
        );
        let pieces = self.scan_pieces(table_id, &spec, max, piece_bytes);
        let fold_piece = |piece: &ScanSpec, snapshot: Option<i64>| -> Result<AggregatePartial> {
            let mut fold = AggregateFold::new(agg);
            let mut sc = self.scan_at(table_id, piece, snapshot)?;
            fold_scanner(&mut sc, &mut fold)?;
            Ok(fold.finish())
        };
        if pieces.len() < 2 {
            return fold_piece(&spec, None);
        }
        let snapshot = Some(self.pin_snapshot());
        let partials: Vec<Result<AggregatePartial>> = std::thread::scope(|s| {
            let handles: Vec<_> = pieces
                .iter()
                .map(|p| s.spawn(move || fold_piece(p, snapshot)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut total = AggregatePartial::empty(agg);
        for p in partials {
            total.merge(&p?).map_err(Error::InvalidInput)?;
        }
        Ok(total)
    }
}
