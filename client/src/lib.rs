//! The client interface every front end uses (the HQL executor, the loader, benchmarks), and
//! its embedded implementation ([`embedded::EmbeddedClient`]). The cluster client will
//! implement the same [`Client`] trait, so front ends never know which one they talk to.
//!
//! Names are absolute paths: namespaces `/`, `/a`, `/a/b`; tables `/a/t` (the last component is
//! the table name). Callers resolve relative names against their current namespace first.
//! Calls are blocking: make them from plain threads, not from inside an async task.

pub mod cluster;
pub mod embedded;

pub use common::{Cell, Mutation, ScanSpec, TableSchema};

/// An error at the client interface. Messages name the namespace or table concerned.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("namespace '{0}' does not exist")]
    NamespaceNotFound(String),
    #[error("namespace '{0}' already exists")]
    NamespaceExists(String),
    #[error("namespace '{0}' is not empty")]
    NamespaceNotEmpty(String),
    #[error("table '{0}' does not exist")]
    TableNotFound(String),
    #[error("table '{0}' already exists")]
    TableExists(String),
    #[error("{0}")]
    InvalidInput(String),
    /// A failure of the storage layer; `kind` says what the caller can do about it.
    #[error("{message}")]
    Storage {
        kind: common::ErrorKind,
        message: String,
    },
}

impl ClientError {
    /// The coarse kind for callers deciding what to do.
    pub fn kind(&self) -> common::ErrorKind {
        use common::ErrorKind as K;
        match self {
            Self::NamespaceNotFound(_) | Self::TableNotFound(_) => K::NotFound,
            Self::NamespaceExists(_) | Self::TableExists(_) => K::AlreadyExists,
            Self::NamespaceNotEmpty(_) | Self::InvalidInput(_) => K::InvalidInput,
            Self::Storage { kind, .. } => *kind,
        }
    }
}

impl From<rangeserver::Error> for ClientError {
    fn from(e: rangeserver::Error) -> Self {
        match e {
            rangeserver::Error::InvalidInput(m) => Self::InvalidInput(m),
            rangeserver::Error::Schema(s) => Self::InvalidInput(s.to_string()),
            other => Self::Storage {
                kind: other.kind(),
                message: other.to_string(),
            },
        }
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// One entry of a namespace listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListingEntry {
    /// The name within the namespace (no slashes).
    pub name: String,
    pub is_namespace: bool,
}

/// Which compaction to run (HQL `COMPACT [TYPE=...]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionKind {
    Minor,
    Merging,
    Major,
    /// Remove files nothing references any more.
    Gc,
}

/// A database: namespaces, tables and their data.
pub trait Client: Send + Sync {
    /// Creates a namespace; its parent must exist.
    fn create_namespace(&self, path: &str) -> Result<()>;
    /// Drops an empty namespace (not `/`).
    fn drop_namespace(&self, path: &str) -> Result<()>;
    fn namespace_exists(&self, path: &str) -> Result<bool>;
    /// Sub-namespaces and tables of a namespace, sorted by name.
    fn listing(&self, path: &str) -> Result<Vec<ListingEntry>>;

    /// Creates a table at `path` (its namespace must exist). The schema's `id` and `name` are
    /// assigned here; family ids must be set (1..=255). Returns the stored schema.
    fn create_table(&self, path: &str, schema: TableSchema) -> Result<TableSchema>;
    fn table_schema(&self, path: &str) -> Result<TableSchema>;
    fn table_exists(&self, path: &str) -> Result<bool>;
    /// Replaces a table's schema; takes effect on existing data (dropped families disappear,
    /// new versions/TTL limits apply on read). Family ids must be kept; a dropped family stays
    /// in the schema marked `deleted` so its id is never reused.
    fn alter_table(&self, path: &str, schema: TableSchema) -> Result<TableSchema>;
    /// Renames (and possibly moves to another existing namespace) a table.
    fn rename_table(&self, from: &str, to: &str) -> Result<()>;
    /// Drops a table and frees its files.
    fn drop_table(&self, path: &str) -> Result<()>;

    /// A buffered writer to a table.
    fn mutator(&self, table: &str) -> Result<Box<dyn TableMutator>>;
    /// A streaming reader of a table: cells arrive as they are found, memory stays bounded.
    fn scanner(&self, table: &str, spec: ScanSpec) -> Result<Box<dyn TableScanner>>;

    /// Compacts one table (or all with `None`) and waits for it.
    fn compact(&self, table: Option<&str>, kind: CompactionKind) -> Result<()>;
    /// Waits until no background maintenance is queued or running.
    fn wait_for_maintenance(&self) -> Result<()>;
    /// Named figures for HQL `STATUS`.
    fn status(&self) -> Result<Vec<(String, String)>>;
    /// Spreads ranges evenly over the range servers now (HQL `BALANCE`).
    fn balance(&self) -> Result<()>;
    /// Flushes what must be flushed and closes the database.
    fn close(&self) -> Result<()>;
}

/// Buffers writes to one table and sends them in batches.
pub trait TableMutator: Send {
    /// Buffers one cell; sends the buffer when it passes its limit.
    fn set(&mut self, m: Mutation) -> Result<()>;
    /// Returns once every cell set so far is durable at the table's durability.
    fn flush(&mut self) -> Result<()>;
    /// Cells made durable so far.
    fn cells_flushed(&self) -> u64;
}

/// Cells of a scan in key order.
pub trait TableScanner: Send {
    /// The next cell, or `None` at the end.
    fn next_cell(&mut self) -> Result<Option<Cell>>;
}

/// Splits an absolute path into its parent namespace and last component:
/// `/a/b/t` -> (`/a/b`, `t`), `/t` -> (`/`, `t`).
pub fn split_path(path: &str) -> Result<(String, String)> {
    let norm = normalize_path(path)?;
    if norm == "/" {
        return Err(ClientError::InvalidInput(
            "the root namespace has no name".into(),
        ));
    }
    let i = norm.rfind('/').expect("normalized paths start with /");
    let parent = if i == 0 {
        "/".to_string()
    } else {
        norm[..i].to_string()
    };
    Ok((parent, norm[i + 1..].to_string()))
}

/// Checks an absolute path and removes duplicate and trailing slashes.
pub fn normalize_path(path: &str) -> Result<String> {
    if !path.starts_with('/') {
        return Err(ClientError::InvalidInput(format!(
            "'{path}' is not an absolute name"
        )));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    for p in &parts {
        if *p == "." || *p == ".." {
            return Err(ClientError::InvalidInput(format!("bad name '{path}'")));
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(normalize_path("//a//b/").unwrap(), "/a/b");
        assert_eq!(normalize_path("/").unwrap(), "/");
        assert!(normalize_path("a").is_err());
        assert!(normalize_path("/a/../b").is_err());
        assert_eq!(split_path("/a/b/t").unwrap(), ("/a/b".into(), "t".into()));
        assert_eq!(split_path("/t").unwrap(), ("/".into(), "t".into()));
        assert!(split_path("/").is_err());
    }
}
