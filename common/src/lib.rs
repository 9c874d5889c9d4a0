//! ht's shared vocabulary: cell keys and their byte encoding, schemas, and coarse error kinds.
//!
//! Nothing in here does I/O; every other crate depends on this one.

pub mod aggregate;
pub mod codec;
pub mod iterators;
pub mod key;
pub mod key_tail;
pub mod mutation;
pub mod row_key;
pub mod row_range;
pub mod scan_spec;
pub mod schema;
pub mod status;
pub mod time;

pub use iterators::{CombinerSpec, IterScope, IteratorSpec, ScanIterator};
pub use key::{Cell, CellFlag, Key, KeyRef};
pub use mutation::{AsMutationRef, Mutation, MutationRef};
pub use row_range::RowRange;
pub use scan_spec::ScanSpec;
pub use schema::{
    AccessGroupSpec, BloomFilterMode, BloomFilterSpec, Compressor, Durability, FamilySpec,
    SchemaError, TableSchema, TimeOrder,
};

/// An error that knows its coarse [`ErrorKind`], so that a layer wrapping it (the client's
/// `ClientError::Storage`) keeps both the kind and the error itself as its source.
pub trait HasErrorKind: std::error::Error + Send + Sync + 'static {
    fn error_kind(&self) -> ErrorKind;
}

/// What a caller at the public edge should do about an error (retry, fix input, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The named thing does not exist.
    NotFound,
    /// The named thing exists already.
    AlreadyExists,
    /// The request is malformed or violates the schema; retrying will not help.
    InvalidInput,
    /// Stored data failed a checksum or format check; the data is not trusted.
    Corruption,
    /// The service cannot serve now (shutting down, overloaded); retry later.
    Unavailable,
    /// An I/O or other internal failure.
    Internal,
}

/// Which compaction to run (HQL `COMPACT [TYPE=...]`, `rs.compact`, `Engine::compact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompactionKind {
    /// Write the cell caches out as new cell stores.
    Minor,
    /// Merge cell stores (without dropping anything).
    Merging,
    /// Rewrite each group as one cell store, dropping deletes, expired cells and old versions.
    Major,
    /// Remove replaced cell stores nothing references any more.
    Gc,
}

impl CompactionKind {
    /// Its number on the wire (`rs.compact`'s `kind`).
    pub fn code(self) -> u32 {
        match self {
            Self::Minor => 1,
            Self::Merging => 2,
            Self::Major => 3,
            Self::Gc => 4,
        }
    }

    /// The kind a wire number names, `None` for an unknown number.
    pub fn from_code(code: u32) -> Option<Self> {
        Some(match code {
            1 => Self::Minor,
            2 => Self::Merging,
            3 => Self::Major,
            4 => Self::Gc,
            _ => return None,
        })
    }
}
