//! SELECT with aggregates (`SELECT COUNT(*), SUM(f), AVG(f), MIN(f), MAX(f) FROM t WHERE ...`):
//! the select list becomes a `ScanSpec.aggregate` over the same scan the plain SELECT would
//! run, the database aggregates it where the data is (`Client::aggregate`: the embedded engine,
//! or the range servers with the partials combined by the client), and the result is printed
//! as one tab-separated line of values in the order of the select list.
//!
//! Rules (also in the shell's `help select`): every aggregate reads the newest version of each
//! cell the plain SELECT would return (WHERE predicates, key sets, value predicates, timestamps,
//! limits and offsets, which apply before aggregating). `COUNT(*)` counts rows; a list holding
//! it scans every family, else only the aggregated columns are read. `COUNT(f)`, `SUM(f)`,
//! `AVG(f)`, `MIN(f)` and `MAX(f)` read the cells of `f` whose value is a decimal number
//! (`[+-]?digits[.digits]`), exactly; other cells are counted apart and reported in a note.

use std::io::Write;

use common::aggregate::{Aggregate, AggregateColumn, AggregateFn, AggregatePartial};

use super::select::{build_query, scan_and_filter_rows, with_options};
use super::{ExecError, Executor, Result};
use crate::ast::{self, AggregateFunc, ColumnRef, ColumnSelector, Columns, Select};

/// Runs an aggregating SELECT, printing its line to `out`; returns the notes to show (cells
/// of aggregated columns that are not numbers).
pub(super) fn select(
    ex: &mut Executor,
    sel: &Select,
    aggregates: &[ast::Aggregate],
    out: &mut dyn Write,
) -> Result<Vec<String>> {
    check_options(&sel.options)?;
    let path = ex.resolve(&sel.table);
    let schema = ex.client.table_schema(&path)?;
    // The distinct columns aggregated, in order of first appearance.
    let mut columns: Vec<&ColumnRef> = Vec::new();
    for a in aggregates {
        if let ast::Aggregate::Column { column, .. } = a
            && !columns.contains(&column)
        {
            columns.push(column);
        }
    }
    let count_rows = aggregates.contains(&ast::Aggregate::CountRows);
    // COUNT(*) means rows matched: every family is read. Otherwise only the columns named.
    let read = if count_rows {
        Columns::All
    } else {
        Columns::List(
            columns
                .iter()
                .map(|c| match &c.qualifier {
                    None => ColumnSelector::Family(c.family.clone()),
                    Some(q) => ColumnSelector::Qualifier {
                        family: c.family.clone(),
                        qualifier: q.clone(),
                    },
                })
                .collect(),
        )
    };
    let q = build_query(&schema, &path, &read, &sel.predicates, &ex.key_set_limits)?;
    let agg = Aggregate {
        columns: columns
            .iter()
            .map(|c| {
                let family = schema.family(&c.family).map(|f| f.id).ok_or_else(|| {
                    ExecError::invalid(format!(
                        "column family '{}' does not exist in table '{path}'",
                        c.family
                    ))
                })?;
                Ok(AggregateColumn {
                    family,
                    qualifier: c.qualifier.as_ref().map(|q| q.as_bytes().to_vec()),
                })
            })
            .collect::<Result<_>>()?,
    };
    let specs = match q.spec.map(|spec| with_options(spec, &sel.options)) {
        Some(spec) if sel.options.scan_and_filter_rows => scan_and_filter_rows(spec),
        Some(spec) => vec![spec],
        None => Vec::new(),
    };
    // SCAN_AND_FILTER_ROWS may make two scans; their partials add up as their cells would.
    let mut partial = AggregatePartial::empty(&agg);
    for mut spec in specs {
        spec.aggregate = Some(agg.clone());
        let part = ex.client.aggregate(&path, spec)?;
        partial.merge(&part).map_err(ExecError::invalid)?;
    }
    let mut values = Vec::with_capacity(aggregates.len());
    for a in aggregates {
        let v = match a {
            ast::Aggregate::CountRows => partial.render(AggregateFn::CountRows, 0, "*"),
            ast::Aggregate::Column { func, column } => {
                let at = columns
                    .iter()
                    .position(|c| *c == column)
                    .expect("every column is listed");
                partial.render(function(*func), at, &column.to_string())
            }
        };
        values.push(v.map_err(ExecError::invalid)?);
    }
    let separator = sel.options.field_separator.as_deref().unwrap_or("\t");
    writeln!(out, "{}", values.join(separator))?;
    Ok(columns
        .iter()
        .zip(&partial.columns)
        .filter(|(_, p)| p.non_numeric > 0)
        .map(|(c, p)| {
            let cells = if p.non_numeric == 1 { "cell" } else { "cells" };
            format!("{c}: {} non-numeric {cells} not aggregated", p.non_numeric)
        })
        .collect())
}

fn function(f: AggregateFunc) -> AggregateFn {
    match f {
        AggregateFunc::Count => AggregateFn::Count,
        AggregateFunc::Sum => AggregateFn::Sum,
        AggregateFunc::Avg => AggregateFn::Avg,
        AggregateFunc::Min => AggregateFn::Min,
        AggregateFunc::Max => AggregateFn::Max,
    }
}

/// Options that make no sense for one line of values are refused, naming the option.
fn check_options(o: &ast::SelectOptions) -> Result<()> {
    let refused = [
        (
            o.max_versions.is_some(),
            "MAX_VERSIONS (REVS) cannot be used with aggregates: they read the newest version of \
             each cell",
        ),
        (
            o.keys_only,
            "KEYS_ONLY cannot be used with aggregates: they read values",
        ),
        (
            o.return_deletes,
            "RETURN_DELETES cannot be used with aggregates: delete markers are not values",
        ),
        (
            o.display_timestamps,
            "DISPLAY_TIMESTAMPS cannot be used with aggregates: they print no cells",
        ),
        (
            o.display_revisions,
            "DISPLAY_REVISIONS cannot be used with aggregates: they print no cells",
        ),
        (
            o.into_file.is_some(),
            "INTO FILE cannot be used with aggregates: they print one line",
        ),
        (
            o.offset.is_some() && o.cell_offset.is_some(),
            "OFFSET and CELL_OFFSET cannot be used together",
        ),
    ];
    match refused.into_iter().find(|(bad, _)| *bad) {
        Some((_, why)) => Err(ExecError::invalid(why)),
        None => Ok(()),
    }
}
