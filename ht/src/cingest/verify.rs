//! `ht cingest verify`: a full scan of the table through the client, counting like
//! Accumulo's `ContinuousVerify`: a row is REFERENCED if it exists and a node points at it,
//! UNREFERENCED if it exists and nothing points at it, UNDEFINED if a node points at it and
//! it does not exist (a lost cell). Cells that are not valid nodes are CORRUPT and skipped.
//!
//! Run it with ingest stopped: a scan is not a snapshot, and a node written while it runs,
//! ahead of its position, may point at a row written behind it (after the scan passed that
//! row), which would count as UNDEFINED.
//!
//! Memory: one hash-table entry per row seen or pointed at (a u64 and a byte of flags, about
//! 20 bytes at worst), up to `max_rows` of them; above that verify stops with an error.

use std::collections::{HashMap, HashSet};

use anyhow::{Context, bail};
use client::Client;
use common::ScanSpec;

use super::node::{Families, validate};

/// The most UNDEFINED rows (and corrupt cells) a report names.
pub const MAX_EXAMPLES: usize = 20;

/// Verify's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub cells: u64,
    pub referenced: u64,
    pub unreferenced: u64,
    pub undefined: u64,
    pub corrupt: u64,
    /// Up to `MAX_EXAMPLES` undefined rows and a row pointing at each (found by a second scan).
    pub undefined_rows: Vec<(u64, u64)>,
    /// Up to `MAX_EXAMPLES` corrupt cells, why.
    pub corrupt_cells: Vec<String>,
}

impl VerifyReport {
    /// Rows that exist.
    pub fn defined(&self) -> u64 {
        self.referenced + self.unreferenced
    }

    /// True if nothing was lost or damaged.
    pub fn ok(&self) -> bool {
        self.undefined == 0 && self.corrupt == 0
    }

    /// The counts as Accumulo's verify prints them, then the undefined rows and corrupt cells.
    pub fn print(&self) {
        println!("REFERENCED={}", self.referenced);
        println!("UNREFERENCED={}", self.unreferenced);
        println!("UNDEFINED={}", self.undefined);
        println!("CORRUPT={}", self.corrupt);
        for (row, by) in &self.undefined_rows {
            println!("UNDEFINED row {row:016x}, pointed at by {by:016x}");
        }
        if self.undefined > self.undefined_rows.len() as u64 {
            println!(
                "... and {} more undefined rows",
                self.undefined - self.undefined_rows.len() as u64
            );
        }
        for c in &self.corrupt_cells {
            println!("CORRUPT {c}");
        }
    }
}

/// A row exists (a valid node has it).
const DEFINED: u8 = 1;
/// A valid node points at the row.
const POINTED_AT: u8 = 2;

/// Scans all of `table` and counts; if rows are undefined, scans again for the rows that
/// point at the first `MAX_EXAMPLES` of them.
pub fn verify(
    client: &dyn Client,
    table: &str,
    families: &Families,
    max_rows: usize,
) -> anyhow::Result<VerifyReport> {
    // Row -> DEFINED | POINTED_AT.
    let mut rows: HashMap<u64, u8> = HashMap::new();
    let mut report = VerifyReport::default();
    scan_nodes(client, table, families, |node| {
        report.cells += 1;
        let node = match node {
            Ok(n) => n,
            Err(e) => {
                report.corrupt += 1;
                if report.corrupt_cells.len() < MAX_EXAMPLES {
                    report.corrupt_cells.push(e.to_string());
                }
                return Ok(());
            }
        };
        *rows.entry(node.row).or_default() |= DEFINED;
        if let Some(p) = node.prev {
            *rows.entry(p).or_default() |= POINTED_AT;
        }
        if rows.len() > max_rows {
            bail!(
                "verify: {table} holds more than {max_rows} distinct rows (seen or pointed at) \
                 after {} cells; raise --max-rows (each takes up to about 20 bytes of memory)",
                report.cells
            );
        }
        Ok(())
    })?;
    let mut undefined = HashSet::new();
    for (row, flags) in &rows {
        match *flags {
            f if f == DEFINED | POINTED_AT => report.referenced += 1,
            DEFINED => report.unreferenced += 1,
            _ => {
                report.undefined += 1;
                if undefined.len() < MAX_EXAMPLES {
                    undefined.insert(*row);
                }
            }
        }
    }
    drop(rows);
    if !undefined.is_empty() {
        // Which rows point at them.
        let mut by: HashMap<u64, u64> = HashMap::new();
        scan_nodes(client, table, families, |node| {
            if let Ok(n) = node
                && let Some(p) = n.prev
                && undefined.contains(&p)
            {
                by.entry(p).or_insert(n.row);
            }
            Ok(())
        })?;
        report.undefined_rows = undefined
            .iter()
            .filter_map(|r| by.get(r).map(|b| (*r, *b)))
            .collect();
        report.undefined_rows.sort_unstable();
    }
    Ok(report)
}

/// Calls `f` with every cell of the table, parsed.
fn scan_nodes(
    client: &dyn Client,
    table: &str,
    families: &Families,
    mut f: impl FnMut(Result<super::node::Node, super::node::NodeError>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut scanner = client
        .scanner(table, ScanSpec::default())
        .with_context(|| format!("cannot scan {table}"))?;
    let mut cells = 0u64;
    while let Some(cell) = scanner
        .next_cell()
        .with_context(|| format!("the scan of {table} failed after {cells} cells"))?
    {
        cells += 1;
        f(validate(&cell, families))?;
    }
    Ok(())
}
