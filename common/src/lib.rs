//! ht's shared vocabulary: cell keys and their byte encoding, schemas, and coarse error kinds.
//!
//! Nothing in here does I/O; every other crate depends on this one.

pub mod key;
pub mod mutation;
pub mod scan_spec;
pub mod schema;

pub use key::{Cell, CellFlag, Key, KeyRef};
pub use mutation::{AsMutationRef, Mutation, MutationRef};
pub use scan_spec::ScanSpec;
pub use schema::{
    AccessGroupSpec, BloomFilterMode, BloomFilterSpec, Compressor, Durability, FamilySpec,
    SchemaError, TableSchema, TimeOrder,
};

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
