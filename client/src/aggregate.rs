//! Aggregates through the [`crate::Client`] trait: the fold of a scanner's cells on the client
//! ([`fold_scanner`]), which `Client::aggregate` does by default and the cluster client does
//! for scans with limits; databases that can fold where the data is override it.

use common::ScanSpec;
use common::aggregate::{Aggregate, AggregateFold, AggregatePartial, aggregate_of};

use crate::{ClientError, Result, TableScanner};

/// Takes the aggregate out of `spec` (leaving the plain scan whose cells it folds), refusing
/// specs that cannot be aggregated.
pub fn take_aggregate(spec: &mut ScanSpec) -> Result<Aggregate> {
    aggregate_of(spec).map_err(ClientError::InvalidInput)?;
    Ok(spec.aggregate.take().expect("checked above"))
}

/// Folds every cell `scanner` returns into a partial of `agg` (newest version of each cell).
pub fn fold_scanner(scanner: &mut dyn TableScanner, agg: &Aggregate) -> Result<AggregatePartial> {
    let mut fold = AggregateFold::new(agg);
    while let Some(c) = scanner.next_cell()? {
        let k = &c.key;
        fold.cell(&k.row, k.family, &k.qualifier, k.timestamp, &c.value);
    }
    Ok(fold.finish())
}
