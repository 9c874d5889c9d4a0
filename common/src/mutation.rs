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
