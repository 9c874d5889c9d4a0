//! The engine's error type: rich inside, with a coarse [`ErrorKind`] for callers at the edge.

use common::ErrorKind;
use common::key::KeyError;
use common::schema::SchemaError;
use dfs_broker::FsError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A block, header or record whose checksum does not match: the data is not returned.
    #[error("checksum mismatch in {file} at offset {offset}: {what}")]
    Checksum {
        file: String,
        offset: u64,
        what: String,
    },
    /// Data that passed its checksum but does not parse, or a file that is not what it claims.
    #[error("corrupt data in {file} at offset {offset}: {msg}")]
    Corrupt {
        file: String,
        offset: u64,
        msg: String,
    },
    #[error("{file}: unsupported format version {version}")]
    UnsupportedVersion { file: String, version: u32 },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error("table {0} does not exist")]
    NoSuchTable(String),
    #[error("table {0} exists already")]
    TableExists(String),
    /// A row of a batch or scan that no range held by this engine covers: nothing was applied
    /// (or scanned); the caller should refresh its range locations and retry elsewhere.
    #[error(
        "row {:?} of table {table_id} is not served here",
        String::from_utf8_lossy(row)
    )]
    NotHere { table_id: u32, row: Vec<u8> },
    /// No range of the table with that end row is held here (`unload_range`).
    #[error(
        "table {table_id} has no range ending at {} here",
        end_row.as_deref().map_or("the unbounded end".to_string(), |e| format!("{:?}", String::from_utf8_lossy(e)))
    )]
    NoSuchRange {
        table_id: u32,
        end_row: Option<Vec<u8>>,
    },
    #[error("the engine is closed")]
    Closed,
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The coarse kind for callers deciding what to do.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Fs(e) => e.kind(),
            Self::Checksum { .. } | Self::Corrupt { .. } | Self::UnsupportedVersion { .. } => {
                ErrorKind::Corruption
            }
            Self::Key(_) | Self::Schema(_) | Self::InvalidInput(_) => ErrorKind::InvalidInput,
            // The range is not found here; callers that route (the range server client) match
            // the variant itself, which stays distinct on the wire.
            Self::NoSuchTable(_) | Self::NotHere { .. } | Self::NoSuchRange { .. } => {
                ErrorKind::NotFound
            }
            Self::TableExists(_) => ErrorKind::AlreadyExists,
            Self::Closed => ErrorKind::Unavailable,
            Self::Internal(_) => ErrorKind::Internal,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

impl common::HasErrorKind for Error {
    fn error_kind(&self) -> common::ErrorKind {
        self.kind()
    }
}

/// An engine error at the client interface: bad input stays bad input, anything else is a
/// storage error of the engine error's kind that keeps it as its source.
impl From<Error> for proto::ClientError {
    fn from(e: Error) -> Self {
        match e {
            Error::InvalidInput(m) => Self::InvalidInput(m),
            Error::Schema(s) => Self::InvalidInput(s.to_string()),
            other => Self::Storage {
                kind: other.kind(),
                message: other.to_string(),
                source: Some(Box::new(other)),
            },
        }
    }
}
