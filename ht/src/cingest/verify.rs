//! `ht cingest verify`: a full scan of the table through the client, counting like
//! Accumulo's `ContinuousVerify`: a row is REFERENCED if it exists and a node points at it,
//! UNREFERENCED if it exists and nothing points at it, UNDEFINED if a node points at it and
//! it does not exist (a lost cell). Cells that are not valid nodes are CORRUPT and skipped.
//!
//! Run it with ingest stopped: a scan is not a snapshot, and a node written while it runs,
//! ahead of its position, may point at a row written behind it (after the scan passed that
//! row), which would count as UNDEFINED.
//!
//! Memory: the rows seen and the rows pointed at, as u64 in hash tables (about 40 bytes per
//! row at worst), up to `max_rows` of them together; above that verify stops with an error.

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
    /// Up to `MAX_EXAMPLES` undefined rows and a row pointing at each.
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

/// Scans all of `table` and counts.
pub fn verify(
    client: &dyn Client,
    table: &str,
    families: &Families,
    max_rows: usize,
) -> anyhow::Result<VerifyReport> {
    let mut defined: HashSet<u64> = HashSet::new();
    // Row pointed at -> one row pointing at it.
    let mut pointed: HashMap<u64, u64> = HashMap::new();
    let mut report = VerifyReport::default();
    let mut scanner = client
        .scanner(table, ScanSpec::default())
        .with_context(|| format!("cannot scan {table}"))?;
    while let Some(cell) = scanner
        .next_cell()
        .with_context(|| format!("the scan of {} failed after {} cells", table, report.cells))?
    {
        report.cells += 1;
        let node = match validate(&cell, families) {
            Ok(n) => n,
            Err(e) => {
                report.corrupt += 1;
                if report.corrupt_cells.len() < MAX_EXAMPLES {
                    report.corrupt_cells.push(e.to_string());
                }
                continue;
            }
        };
        defined.insert(node.row);
        if let Some(p) = node.prev {
            pointed.entry(p).or_insert(node.row);
        }
        if defined.len() + pointed.len() > max_rows {
            bail!(
                "verify: {table} holds more than {max_rows} distinct rows (seen or pointed at) \
                 after {} cells; raise --max-rows (each takes up to about 40 bytes of memory)",
                report.cells
            );
        }
    }
    for (row, by) in &pointed {
        if defined.contains(row) {
            report.referenced += 1;
        } else {
            report.undefined += 1;
            if report.undefined_rows.len() < MAX_EXAMPLES {
                report.undefined_rows.push((*row, *by));
            }
        }
    }
    report.undefined_rows.sort_unstable();
    report.unreferenced = defined.len() as u64 - report.referenced;
    Ok(report)
}
