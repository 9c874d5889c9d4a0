//! A cell to write: what clients send and the engine applies.

use crate::key::CellFlag;

/// One cell to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    pub row: Vec<u8>,
    /// Family id; ignored (0) for `DeleteRow`.
    pub family: u8,
    pub qualifier: Vec<u8>,
    /// `None`: the server assigns one (the cell's revision).
    pub timestamp: Option<i64>,
    pub flag: CellFlag,
    pub value: Vec<u8>,
}

impl Mutation {
    /// An insert with a server-assigned timestamp.
    pub fn insert(
        row: impl Into<Vec<u8>>,
        family: u8,
        qualifier: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            row: row.into(),
            family,
            qualifier: qualifier.into(),
            timestamp: None,
            flag: CellFlag::Insert,
            value: value.into(),
        }
    }

    /// A delete of the given kind.
    pub fn delete(
        flag: CellFlag,
        row: impl Into<Vec<u8>>,
        family: u8,
        qualifier: impl Into<Vec<u8>>,
        timestamp: Option<i64>,
    ) -> Self {
        Self {
            row: row.into(),
            family: if flag == CellFlag::DeleteRow {
                0
            } else {
                family
            },
            qualifier: if matches!(flag, CellFlag::DeleteRow | CellFlag::DeleteColumnFamily) {
                Vec::new()
            } else {
                qualifier.into()
            },
            timestamp,
            flag,
            value: Vec::new(),
        }
    }
}

/// A cell to write, borrowing its bytes: lets callers that already hold keys and values in
/// their own buffers write without allocating one `Vec` per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MutationRef<'a> {
    pub row: &'a [u8],
    /// Family id; 0 for `DeleteRow`.
    pub family: u8,
    pub qualifier: &'a [u8],
    /// `None`: the server assigns one (the cell's revision).
    pub timestamp: Option<i64>,
    pub flag: CellFlag,
    pub value: &'a [u8],
}

impl<'a> MutationRef<'a> {
    /// An insert with a server-assigned timestamp.
    pub fn insert(row: &'a [u8], family: u8, qualifier: &'a [u8], value: &'a [u8]) -> Self {
        Self {
            row,
            family,
            qualifier,
            timestamp: None,
            flag: CellFlag::Insert,
            value,
        }
    }
}

/// Anything that can be viewed as a [`MutationRef`]: owned and borrowed mutations.
pub trait AsMutationRef {
    fn as_mutation_ref(&self) -> MutationRef<'_>;
}

impl AsMutationRef for Mutation {
    fn as_mutation_ref(&self) -> MutationRef<'_> {
        MutationRef {
            row: &self.row,
            family: self.family,
            qualifier: &self.qualifier,
            timestamp: self.timestamp,
            flag: self.flag,
            value: &self.value,
        }
    }
}

impl AsMutationRef for MutationRef<'_> {
    fn as_mutation_ref(&self) -> MutationRef<'_> {
        *self
    }
}

/// Longest row key or qualifier a cell may have.
pub const MAX_ROW_OR_QUALIFIER_BYTES: usize = 64 << 10;
/// Largest value a cell may have.
pub const MAX_VALUE_BYTES: usize = 16 << 20;
/// The smallest timestamp a cell may carry. `i64::MIN` is reserved: scans start their
/// "deleted up to" marks there, so a cell at it would read as deleted and never be returned.
pub const MIN_TIMESTAMP: i64 = i64::MIN + 1;
/// The largest timestamp a cell may carry. `i64::MAX` is reserved: it is the open end of every
/// scan's `[time_start, time_end)`, so a cell at it would never be returned.
pub const MAX_TIMESTAMP: i64 = i64::MAX - 1;

/// Why a cell cannot be written, whatever its table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CellError {
    #[error("empty row key")]
    EmptyRow,
    #[error("row key of {len} bytes is longer than {MAX_ROW_OR_QUALIFIER_BYTES} bytes")]
    RowTooLong { len: usize },
    #[error("qualifier of {len} bytes is longer than {MAX_ROW_OR_QUALIFIER_BYTES} bytes")]
    QualifierTooLong { len: usize },
    #[error("value of {len} bytes is larger than {MAX_VALUE_BYTES} bytes")]
    ValueTooLarge { len: usize },
    #[error(
        "timestamp {0} is reserved (timestamps are {MIN_TIMESTAMP}..={MAX_TIMESTAMP} \
         nanoseconds)"
    )]
    ReservedTimestamp(i64),
}

/// Checks a timestamp given by a client against the reserved values.
pub fn check_timestamp(ts: i64) -> Result<(), CellError> {
    if (MIN_TIMESTAMP..=MAX_TIMESTAMP).contains(&ts) {
        Ok(())
    } else {
        Err(CellError::ReservedTimestamp(ts))
    }
}

/// The checks every write path makes before a cell is counted or sent (HQL INSERT and DELETE,
/// LOAD DATA INFILE, `Engine::apply`): a row, sizes within the limits, no reserved timestamp.
pub fn check_cell(m: &MutationRef<'_>) -> Result<(), CellError> {
    if m.row.is_empty() {
        return Err(CellError::EmptyRow);
    }
    if m.row.len() > MAX_ROW_OR_QUALIFIER_BYTES {
        return Err(CellError::RowTooLong { len: m.row.len() });
    }
    if m.qualifier.len() > MAX_ROW_OR_QUALIFIER_BYTES {
        return Err(CellError::QualifierTooLong {
            len: m.qualifier.len(),
        });
    }
    if m.value.len() > MAX_VALUE_BYTES {
        return Err(CellError::ValueTooLarge { len: m.value.len() });
    }
    if let Some(ts) = m.timestamp {
        check_timestamp(ts)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_timestamps_are_refused() {
        let mut m = Mutation::insert("r", 1, "", "v");
        for ts in [i64::MIN, i64::MAX] {
            m.timestamp = Some(ts);
            assert_eq!(
                check_cell(&m.as_mutation_ref()),
                Err(CellError::ReservedTimestamp(ts))
            );
        }
        for ts in [MIN_TIMESTAMP, -1, 0, MAX_TIMESTAMP] {
            m.timestamp = Some(ts);
            assert_eq!(check_cell(&m.as_mutation_ref()), Ok(()));
        }
        m.timestamp = None;
        assert_eq!(check_cell(&m.as_mutation_ref()), Ok(()));
    }

    #[test]
    fn sizes_are_checked() {
        let big = vec![b'x'; MAX_ROW_OR_QUALIFIER_BYTES + 1];
        let m = Mutation::insert(big.clone(), 1, "", "");
        assert!(matches!(
            check_cell(&m.as_mutation_ref()),
            Err(CellError::RowTooLong { .. })
        ));
        let m = Mutation::insert("r", 1, big, "");
        assert!(matches!(
            check_cell(&m.as_mutation_ref()),
            Err(CellError::QualifierTooLong { .. })
        ));
        let m = Mutation::insert("r", 1, "", vec![0; MAX_VALUE_BYTES + 1]);
        assert!(matches!(
            check_cell(&m.as_mutation_ref()),
            Err(CellError::ValueTooLarge { .. })
        ));
        let m = Mutation::insert("", 1, "", "");
        assert_eq!(check_cell(&m.as_mutation_ref()), Err(CellError::EmptyRow));
    }
}
