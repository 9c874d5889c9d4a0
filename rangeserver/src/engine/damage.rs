//! Ranges that cannot be served because a cell store is damaged or missing.

use super::Engine;
use crate::error::Error;
use crate::meta::RangeRecord;
use common::status::RangeInfo;

/// A range that could not be opened, and why.
#[derive(Debug, Clone)]
pub struct Damaged {
    pub rec: RangeRecord,
    pub file: String,
    pub offset: u64,
    pub why: String,
}

impl Damaged {
    /// The error its rows answer with.
    pub fn error(&self) -> Error {
        Error::Corrupt {
            file: self.file.clone(),
            offset: self.offset,
            msg: format!(
                "range {} of table {} cannot be served: {}",
                self.rec.id, self.rec.table_id, self.why
            ),
        }
    }

    pub(super) fn holds(&self, path: &str) -> bool {
        self.rec
            .groups
            .iter()
            .any(|g| g.stores.iter().any(|p| p == path))
    }
}

/// File, offset and reason if `e` says a file is damaged or missing (not a passing failure).
pub(super) fn damage(e: &Error) -> Option<(String, u64, String)> {
    match e {
        Error::Checksum { file, offset, .. } | Error::Corrupt { file, offset, .. } => {
            Some((file.clone(), *offset, e.to_string()))
        }
        Error::UnsupportedVersion { file, .. } => Some((file.clone(), 0, e.to_string())),
        Error::Fs(f) if f.is_not_found() => Some((String::new(), 0, e.to_string())),
        _ => None,
    }
}

impl Engine {
    /// Ranges held here that are not served because a cell store of theirs is damaged or
    /// missing (listed so that their rows stay assigned here and answer with the damage).
    pub(super) fn damaged_ranges(&self, table: Option<u32>) -> Vec<RangeInfo> {
        self.inner
            .catalog()
            .damaged()
            .iter()
            .filter(|d| table.is_none_or(|t| t == d.rec.table_id))
            .map(|d| RangeInfo {
                id: d.rec.id,
                table_id: d.rec.table_id,
                start_row: d.rec.start_row.clone(),
                end_row: d.rec.end_row.clone(),
                size_bytes: 0,
                stores: d.rec.groups.iter().map(|g| g.stores.len()).sum(),
                cache_bytes: 0,
                cells_written: 0,
                cells_read: 0,
                seeks: 0,
            })
            .collect()
    }

    /// The errors of the ranges that are not served because of damage.
    pub fn damaged(&self) -> Vec<Error> {
        self.inner
            .catalog()
            .damaged()
            .iter()
            .map(Damaged::error)
            .collect()
    }
}
