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
    /// Aggregates a scan of one table (`spec.aggregate` names the columns) in this thread:
    /// the partial of every cell the same scan returns, newest version of each cell.
    pub fn aggregate(&self, table_id: u32, spec: &ScanSpec) -> Result<AggregatePartial> {
        let agg = check(spec)?;
        let spec = narrowed(spec, &self.schema(table_id)?);
        let mut fold = AggregateFold::new(agg);
        let mut sc = self.scan(table_id, &spec)?;
        fold_scanner(&mut sc, &mut fold)?;
        Ok(fold.finish())
    }
}
