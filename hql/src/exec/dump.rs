//! DUMP TABLE: a table in the single-cell TSV format that LOAD DATA INFILE reads back.
//!
//! Every version is written (unless MAX_VERSIONS), with its timestamp (unless NO_TIMESTAMPS),
//! escaped, after a `#timestamp\trow\tcolumn\tvalue` header. Timestamps are integer
//! nanoseconds, as Hypertable writes them (LOAD DATA reads either form).

use std::io::{BufWriter, Write};

use super::output::{CellFormat, FileSink, family_names, write_cell};
use super::select::build_query;
use super::{ExecError, Executor, Result};
use crate::ast::DumpTable;

pub(super) fn dump_table(ex: &mut Executor, d: &DumpTable, out: &mut dyn Write) -> Result<u64> {
    let path = ex.resolve(&d.table);
    let schema = ex.client.table_schema(&path)?;
    let q = build_query(
        &schema,
        &path,
        &d.columns,
        &d.predicates,
        &ex.key_set_limits,
    )?;
    if q.has_value_predicates {
        return Err(ExecError::invalid(
            "DUMP TABLE does not take column value predicates",
        ));
    }
    let format = CellFormat {
        timestamps: !d.no_timestamps,
        revisions: false,
        keys_only: false,
        escape: true,
        separator: d
            .field_separator
            .as_deref()
            .unwrap_or("\t")
            .as_bytes()
            .to_vec(),
        raw_timestamps: true,
    };
    let families = family_names(&schema);
    let mut file = d.into_file.as_deref().map(FileSink::create).transpose()?;
    let n = {
        let mut stdout_buf;
        let w: &mut dyn Write = match &mut file {
            Some(f) => f,
            None => {
                stdout_buf = BufWriter::with_capacity(1 << 16, &mut *out);
                &mut stdout_buf
            }
        };
        w.write_all(&format.header())?;
        let mut n = 0u64;
        if let Some(mut spec) = q.spec {
            spec.max_versions = d.max_versions.unwrap_or(0);
            let mut scanner = ex.client.scanner(&path, spec)?;
            while let Some(cell) = scanner.next_cell()? {
                write_cell(w, &format, &cell, &families)?;
                n += 1;
            }
        }
        w.flush()?;
        n
    };
    if let (Some(f), Some(name)) = (file, &d.into_file) {
        f.finish(name)?;
    }
    Ok(n)
}
