//! INSERT and DELETE: statements to [`Mutation`]s, checked in full before any is sent.

use crate::error::Code;
use common::key::CellFlag;
use common::mutation::{CellError, check_cell};
use common::{AsMutationRef, Mutation, TableSchema};

use super::{ExecError, Executor, Result, guid};
use crate::ast::{CellValue, ColumnRef, Delete, DeleteColumns, DeleteTime, Insert, Timestamp};

fn family_id(s: &TableSchema, path: &str, col: &ColumnRef) -> Result<u8> {
    s.family(&col.family).map(|f| f.id).ok_or_else(|| {
        ExecError::with_hypertable(
            Code::BadKey,
            format!("Bad column family '{}'", col.family),
            format!(
                "column family '{}' does not exist in table '{path}'",
                col.family
            ),
        )
    })
}

/// A timestamp's value, or Hypertable's message naming the statement (`INSERT`, `DELETE`).
fn nanos_of(ts: &Timestamp, statement: &str) -> Result<i64> {
    ts.nanos.ok_or_else(|| {
        ExecError::coded(
            Code::HqlParseError,
            format!("Unable to parse {statement} timestamp - '{}'", ts.text),
        )
    })
}

fn nanos(ts: &Timestamp) -> Result<i64> {
    nanos_of(ts, "DELETE")
}

/// The shared cell checks, before anything is sent: a statement is applied whole or not at all.
fn check(path: &str, m: &Mutation, ts: Option<&Timestamp>) -> Result<()> {
    check_cell(&m.as_mutation_ref()).map_err(|e| {
        let row = String::from_utf8_lossy(&m.row[..m.row.len().min(40)]);
        let e = match (e, ts) {
            (CellError::ReservedTimestamp(n), Some(t)) if t.text != n.to_string() => {
                format!("{} (written '{}')", CellError::ReservedTimestamp(n), t.text)
            }
            (e, _) => e.to_string(),
        };
        ExecError::invalid(format!("'{path}', row '{row}': {e}; nothing was written"))
    })
}

fn value(v: &CellValue) -> Vec<u8> {
    match v {
        CellValue::Literal(s) => s.as_bytes().to_vec(),
        CellValue::Guid => guid().into_bytes(),
    }
}

pub(super) fn insert(ex: &mut Executor, ins: &Insert) -> Result<()> {
    let path = ex.resolve(&ins.table);
    let schema = ex.client.table_schema(&path)?;
    let mut cells = Vec::with_capacity(ins.values.len());
    for v in &ins.values {
        let row = value(&v.row);
        if row.is_empty() {
            return Err(ExecError::invalid(format!(
                "empty row key in INSERT INTO '{path}'"
            )));
        }
        if let Some(k) = &schema.row_key {
            k.check_row(&row).map_err(|e| {
                ExecError::invalid(format!("INSERT INTO '{path}': {e}; nothing was written"))
            })?;
        }
        let family = family_id(&schema, &path, &v.column)?;
        let mut m = Mutation::insert(
            row,
            family,
            v.column.qualifier.as_deref().unwrap_or("").as_bytes(),
            value(&v.value),
        );
        m.timestamp = v
            .timestamp
            .as_ref()
            .map(|t| nanos_of(t, "INSERT"))
            .transpose()?;
        check(&path, &m, v.timestamp.as_ref())?;
        cells.push(m);
    }
    let mut mutator = client::index::mutator(ex.client.as_ref(), Some(ex.client.clone()), &path)?;
    for m in cells {
        mutator.set(m)?;
    }
    mutator.flush()?;
    Ok(())
}

pub(super) fn delete(ex: &mut Executor, d: &Delete) -> Result<()> {
    let path = ex.resolve(&d.table);
    let schema = ex.client.table_schema(&path)?;
    let row = d.row.as_bytes();
    let mut cells = Vec::new();
    match (&d.columns, &d.time) {
        (DeleteColumns::All, Some(DeleteTime::Version(_))) => {
            return Err(ExecError::invalid(
                "DELETE * cannot take VERSION: name the cell whose version to delete",
            ));
        }
        (DeleteColumns::All, t) => {
            let ts = match t {
                Some(DeleteTime::Timestamp(ts)) => Some(nanos(ts)?),
                _ => None,
            };
            let m = Mutation::delete(CellFlag::DeleteRow, row, 0, "", ts);
            let written = match t {
                Some(DeleteTime::Timestamp(ts)) => Some(ts),
                _ => None,
            };
            check(&path, &m, written)?;
            cells.push(m);
        }
        (DeleteColumns::List(cols), t) => {
            for c in cols {
                let family = family_id(&schema, &path, c)?;
                let q = c.qualifier.as_deref().unwrap_or("").as_bytes();
                let m = match t {
                    None => {
                        let flag = if c.qualifier.is_some() {
                            CellFlag::DeleteCell
                        } else {
                            CellFlag::DeleteColumnFamily
                        };
                        Mutation::delete(flag, row, family, q, None)
                    }
                    Some(DeleteTime::Timestamp(ts)) => {
                        let flag = if c.qualifier.is_some() {
                            CellFlag::DeleteCell
                        } else {
                            CellFlag::DeleteColumnFamily
                        };
                        Mutation::delete(flag, row, family, q, Some(nanos(ts)?))
                    }
                    Some(DeleteTime::Version(ts)) => Mutation::delete(
                        CellFlag::DeleteCellVersion,
                        row,
                        family,
                        q,
                        Some(nanos(ts)?),
                    ),
                };
                let written = match t {
                    Some(DeleteTime::Timestamp(ts) | DeleteTime::Version(ts)) => Some(ts),
                    None => None,
                };
                check(&path, &m, written)?;
                cells.push(m);
            }
        }
    }
    let mut mutator = client::index::mutator(ex.client.as_ref(), Some(ex.client.clone()), &path)?;
    for m in cells {
        mutator.set(m)?;
    }
    mutator.flush()?;
    Ok(())
}
