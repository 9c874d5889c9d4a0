//! LOAD DATA INFILE: the streaming TSV loader behind the HQL statement and `ht load`.
//!
//! (Interface agreed with the executor; the implementation lands with the loader work.)

use std::time::Duration;

use client::Client;

use crate::ast::LoadData;

/// How a load runs.
pub struct LoadContext<'a> {
    pub client: &'a dyn Client,
    /// The current namespace, for relative table names (`/` or `/a/b`).
    pub namespace: &'a str,
    /// Show a progress bar (only when attached to a terminal).
    pub progress: bool,
    /// ht's addition: count, report and skip bad lines instead of stopping at the first.
    pub skip_bad_lines: bool,
    /// Bytes to read for standard input (`"-"`).
    pub stdin: Option<&'a mut dyn std::io::Read>,
}

/// What a load did; `Display` prints the report HQL.md describes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadReport {
    pub elapsed: Duration,
    pub lines: u64,
    pub cells: u64,
    pub key_bytes: u64,
    pub value_bytes: u64,
    pub skipped_lines: u64,
}

/// Why a load stopped.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct LoadError {
    pub message: String,
}

/// Runs a LOAD DATA INFILE statement.
pub fn load_data(_ctx: LoadContext<'_>, _stmt: &LoadData) -> Result<LoadReport, LoadError> {
    Err(LoadError {
        message: "LOAD DATA INFILE is not available in this build".into(),
    })
}
