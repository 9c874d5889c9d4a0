//! `EXPLAIN SELECT ...` (ht extension): how a SELECT would run, without running it: the key
//! parts and what each may take, the rows or intervals the scan seeks to, the skip filter,
//! how limits count, seek or step, bloom filters, value predicates and iterators in the
//! servers, and the ranges and servers the scan touches. No timings, so golden scripts can pin
//! plans.

use std::io::Write;
use std::ops::Bound;

use client::TableRange;
use common::BloomFilterMode;
use common::scan_spec::{PREFETCH_MIN_INTERVALS, RowInterval};
use common::{ScanSpec, TableSchema};

use super::select::{build_query, scan_and_filter_rows, with_options};
use super::{Executor, Result};
use crate::ast::Select;

pub(super) fn explain(ex: &mut Executor, sel: &Select, out: &mut dyn Write) -> Result<()> {
    let path = ex.resolve(&sel.table);
    let schema = ex.client.table_schema(&path)?;
    let q = build_query(
        &schema,
        &path,
        &sel.columns,
        &sel.predicates,
        &ex.key_set_limits,
    )?;
    let mut lines = vec![format!("table: {path}")];
    if let Some(k) = &schema.row_key {
        lines.push(format!("row key: {}", k.hql()));
    }
    let mut expanded = 0;
    if let Some((parts, n)) = &q.parts {
        lines.push(format!("key parts: {}", parts.join(", ")));
        expanded = *n;
    }
    let Some(spec) = q.spec else {
        lines.push("plan: no row can match; nothing is read".into());
        return print(out, &lines);
    };
    let spec = with_options(spec, &sel.options);
    let specs = if sel.options.scan_and_filter_rows {
        scan_and_filter_rows(spec)
    } else {
        vec![spec]
    };
    let ranges = ex.client.table_ranges(&path)?;
    for (n, spec) in specs.iter().enumerate() {
        if specs.len() > 1 {
            lines.push(format!("scan {} of {}:", n + 1, specs.len()));
        }
        scan_lines(&schema, spec, expanded, &ranges, &mut lines);
    }
    print(out, &lines)
}

fn print(out: &mut dyn Write, lines: &[String]) -> Result<()> {
    for l in lines {
        writeln!(out, "{l}")?;
    }
    Ok(())
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn is_point(r: &RowInterval) -> bool {
    matches!((&r.start, &r.end), (Bound::Included(a), Bound::Included(b)) if a == b)
}

fn scan_lines(
    schema: &TableSchema,
    spec: &ScanSpec,
    expanded: usize,
    ranges: &[TableRange],
    lines: &mut Vec<String>,
) {
    let points = spec.row_intervals.iter().filter(|r| is_point(r)).count();
    let others = spec.row_intervals.len() - points;
    if !spec.row_intervals.is_empty() {
        let mut l = format!(
            "rows: {}, {}",
            plural(points, "point row", "point rows"),
            plural(others, "row interval", "row intervals")
        );
        if expanded > 0 {
            l.push_str(&format!(
                " (from the values of the first {})",
                plural(expanded, "key part", "key parts")
            ));
        }
        lines.push(l);
    } else if !spec.cell_intervals.is_empty() {
        lines.push(format!(
            "cells: {}",
            plural(spec.cell_intervals.len(), "cell interval", "cell intervals")
        ));
    } else {
        lines.push("rows: all".into());
    }
    if let (Some(skip), Some(key)) = (&spec.row_skip, &schema.row_key) {
        let parts: Vec<&str> = key
            .parts
            .iter()
            .zip(&skip.slots)
            .filter(|(_, s)| !s.is_empty())
            .map(|(p, _)| p.name.as_str())
            .collect();
        let on = if parts.is_empty() {
            "the layout only".to_string()
        } else {
            parts.join(", ")
        };
        lines.push(format!(
            "skip: from a row that does not match the key parts to the next row that can \
             ({on})"
        ));
    }
    if let Some(re) = &spec.row_regex {
        lines.push(format!("row regexp: {}", re.as_str()));
    }
    let limited =
        spec.row_limit > 0 || spec.row_offset > 0 || spec.cell_limit > 0 || spec.cell_offset > 0;
    if limited {
        lines.push(
            if spec.one_interval {
                "limits: once over all the rows"
            } else {
                "limits: per interval"
            }
            .into(),
        );
    }
    let access = if spec.scan_and_filter {
        "step from the first row to the last, keeping the rows named (SCAN_AND_FILTER_ROWS)"
            .to_string()
    } else if points > 0 {
        let blooms: Vec<String> = schema
            .access_groups
            .iter()
            .map(|g| {
                let mode = match g.bloom_filter.mode {
                    BloomFilterMode::None => "none",
                    BloomFilterMode::Rows => "rows",
                    BloomFilterMode::RowsCols => "rows+cols",
                };
                format!("{}={mode}", g.name)
            })
            .collect();
        format!(
            "seek to each row; cell stores whose bloom filter rules a row out are not read \
             (bloom filters: {})",
            blooms.join(", ")
        )
    } else if spec.row_intervals.len() + spec.cell_intervals.len() > 1 {
        "seek to each interval".to_string()
    } else {
        "one sorted pass".to_string()
    };
    lines.push(format!("access: {access}"));
    if !spec.scan_and_filter && spec.row_intervals.len() >= PREFETCH_MIN_INTERVALS {
        lines.push(
            "prefetch: the cell-store blocks where the rows start are asked for ahead, \
             neighbours joined"
                .into(),
        );
    }
    if let Some(vp) = &spec.value_predicates {
        lines.push(format!(
            "value predicates: {}, in the range servers",
            plural(vp.tests.len(), "test", "tests")
        ));
    }
    if !spec.iterators.is_empty() {
        let kinds: Vec<&str> = spec.iterators.iter().map(|i| i.kind.as_str()).collect();
        lines.push(format!(
            "iterators: {}, in the range servers",
            kinds.join(", ")
        ));
    }
    let touched = touched_ranges(spec, ranges);
    let mut servers: Vec<&str> = touched.iter().map(|r| r.location.as_str()).collect();
    servers.sort_unstable();
    servers.dedup();
    lines.push(format!(
        "ranges: {} of {}, on {}",
        touched.len(),
        ranges.len(),
        plural(servers.len(), "server", "servers")
    ));
}

/// The ranges a scan's row intervals reach (all of them for a scan of cell intervals or of
/// everything).
fn touched_ranges<'a>(spec: &ScanSpec, ranges: &'a [TableRange]) -> Vec<&'a TableRange> {
    if spec.row_intervals.is_empty() {
        return ranges.iter().collect();
    }
    let mut iv: Vec<&RowInterval> = spec.row_intervals.iter().collect();
    iv.sort_by(|a, b| lower(&a.start).cmp(&lower(&b.start)));
    let ends_before = |r: &RowInterval, start: &Option<Vec<u8>>| match (&r.end, start) {
        (_, None) | (Bound::Unbounded, _) => false,
        (Bound::Included(e), Some(s)) => e < s,
        (Bound::Excluded(e), Some(s)) => e <= s,
    };
    let starts_at_or_after = |r: &RowInterval, end: &Option<Vec<u8>>| match (&r.start, end) {
        (_, None) | (Bound::Unbounded, _) => false,
        (Bound::Included(s) | Bound::Excluded(s), Some(e)) => s >= e,
    };
    let mut out = Vec::new();
    let mut i = 0;
    for range in ranges {
        while i < iv.len() && ends_before(iv[i], &range.start_row) {
            i += 1;
        }
        if i < iv.len() && !starts_at_or_after(iv[i], &range.end_row) {
            out.push(range);
        }
    }
    out
}

/// A lower bound as a sortable key: unbounded first, then by bytes.
fn lower(b: &Bound<Vec<u8>>) -> (u8, &[u8]) {
    match b {
        Bound::Unbounded => (0, &[]),
        Bound::Included(v) | Bound::Excluded(v) => (1, v.as_slice()),
    }
}
