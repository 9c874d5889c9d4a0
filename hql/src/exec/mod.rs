//! The HQL executor: applies parsed statements to a database through the [`Client`] trait and
//! writes their output in Hypertable's formats.
//!
//! The executor keeps the session state (the current namespace) and resolves relative names;
//! schema building lives in [`schema`], reads in [`select`], writes in [`write`], dumps in
//! [`dump`]. Shell commands (help, source, pause, ...) are the shell's business, not this one's.

mod aggregate;
mod dump;
mod explain;
mod keyset;
mod output;
mod parts;
mod schema;
mod select;
mod write;

use std::io::Write;
use std::sync::Arc;

use client::{Client, ClientError, CompactionKind};

use crate::ast::{CompactTarget, CompactionType, Statement};
use crate::error::Code;
pub use keyset::KeySetLimits;

use crate::load::{LoadContext, LoadLimits, load_data_with};

/// Why a statement failed. Messages are one line and name the table, family or namespace.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A failure reported by the database.
    #[error("{0}")]
    Client(#[from] ClientError),
    /// A statement that cannot be applied as written, with the code Hypertable gives it and
    /// Hypertable's message where it differs from ht's.
    #[error("{message}")]
    Invalid {
        code: Code,
        message: String,
        hypertable: Option<String>,
    },
    /// Writing the output (or an INTO FILE file) failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// LOAD DATA INFILE stopped.
    #[error("{0}")]
    Load(#[from] crate::load::LoadError),
}

impl ExecError {
    /// A statement Hypertable would call a bad command (HQL_BAD_COMMAND).
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Self::coded(Code::HqlBadCommand, msg)
    }

    pub(crate) fn coded(code: Code, msg: impl Into<String>) -> Self {
        Self::Invalid {
            code,
            message: msg.into(),
            hypertable: None,
        }
    }

    /// A failure whose message in Hypertable (`hypertable`) differs from ht's (`msg`).
    pub(crate) fn with_hypertable(
        code: Code,
        hypertable: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            code,
            message: msg.into(),
            hypertable: Some(hypertable.into()),
        }
    }

    /// The code and message Hypertable's shell prints for this failure (in `--test-mode`, as
    /// `Hypertable CRITICAL - <code text> (<message>)`). Names are Hypertable's: without the
    /// leading `/`.
    pub fn hypertable(&self) -> (Code, String) {
        match self {
            Self::Client(e) => hypertable_client_error(e),
            Self::Invalid {
                code,
                message,
                hypertable,
            } => (*code, hypertable.clone().unwrap_or_else(|| message.clone())),
            e @ Self::Io { .. } => (Code::IoError, e.to_string()),
            Self::Load(e) => (e.code, e.hypertable_message()),
        }
    }
}

impl From<std::io::Error> for ExecError {
    fn from(source: std::io::Error) -> Self {
        Self::Io {
            context: "cannot write the output".into(),
            source,
        }
    }
}

/// The code and message Hypertable gives a failure the database reported.
pub fn hypertable_client_error(e: &ClientError) -> (Code, String) {
    let name = |p: &str| p.trim_start_matches('/').to_string();
    match e {
        ClientError::TableNotFound(p) => (Code::TableNotFound, name(p)),
        ClientError::TableExists(p) => (Code::MasterTableExists, name(p)),
        ClientError::NamespaceNotFound(p) => (Code::NamespaceDoesNotExist, name(p)),
        ClientError::NamespaceExists(p) => (Code::NamespaceExists, name(p)),
        ClientError::NamespaceNotEmpty(p) => (Code::DirNotEmpty, name(p)),
        ClientError::InvalidInput(m) => (Code::HqlBadCommand, m.clone()),
        e @ ClientError::Storage { .. } => (Code::IoError, e.to_string()),
    }
}

pub type Result<T> = std::result::Result<T, ExecError>;

/// What the last statement did, for the shell's timing and report lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Cells returned by a SELECT or written by DUMP TABLE.
    pub cells: Option<u64>,
    /// What a LOAD DATA INFILE did.
    pub report: Option<crate::load::LoadReport>,
    /// Notes about the result (an aggregate's cells that are not numbers), one line each.
    pub notes: Vec<String>,
}

/// Runs statements against one database, keeping the current namespace.
pub struct Executor {
    client: Arc<dyn Client>,
    namespace: String,
    summary: Summary,
    /// Whether LOAD DATA INFILE "-" may read this process's standard input.
    stdin_for_load: bool,
    progress: bool,
    /// ht's `--skip-bad-lines`: LOAD DATA INFILE counts, reports and skips bad lines.
    skip_bad_lines: bool,
    load_limits: LoadLimits,
    key_set_limits: KeySetLimits,
    /// SELECT prints timestamps and revisions as integer nanoseconds (the shell's
    /// `--timestamp-format nanos`).
    raw_timestamps: bool,
}

impl Executor {
    /// An executor in the root namespace.
    pub fn new(client: Arc<dyn Client>) -> Self {
        Self {
            client,
            namespace: "/".to_string(),
            summary: Summary::default(),
            stdin_for_load: false,
            progress: false,
            skip_bad_lines: false,
            load_limits: LoadLimits::default(),
            key_set_limits: KeySetLimits::default(),
            raw_timestamps: false,
        }
    }

    /// The current namespace (`/` or `/a/b`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The database this executor works on.
    pub fn client(&self) -> &Arc<dyn Client> {
        &self.client
    }

    /// Makes LOAD DATA INFILE count, report and skip bad lines instead of stopping at the first.
    pub fn set_skip_bad_lines(&mut self, skip: bool) {
        self.skip_bad_lines = skip;
    }

    /// Bounds LOAD DATA INFILE's input (its longest line).
    pub fn set_load_limits(&mut self, limits: LoadLimits) {
        self.load_limits = limits;
    }

    /// Bounds the key sets of `ROW IN` (the keys of one statement are held in memory).
    pub fn set_key_set_limits(&mut self, limits: KeySetLimits) {
        self.key_set_limits = limits;
    }

    /// Makes SELECT print timestamps and revisions as integer nanoseconds instead of dates.
    pub fn set_raw_timestamps(&mut self, raw: bool) {
        self.raw_timestamps = raw;
    }

    /// Lets LOAD DATA INFILE "-" read standard input, and show a progress bar.
    pub fn set_load_io(&mut self, stdin: bool, progress: bool) {
        self.stdin_for_load = stdin;
        self.progress = progress;
    }

    /// What the last executed statement did.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Resolves a namespace or table name against the current namespace.
    pub fn resolve(&self, name: &str) -> String {
        let joined = if name.starts_with('/') {
            name.to_string()
        } else if self.namespace == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.namespace)
        };
        client::normalize_path(&joined).unwrap_or(joined)
    }

    /// Runs one statement, writing its output to `out`. Shell commands are rejected.
    pub fn execute(&mut self, stmt: &Statement, out: &mut dyn Write) -> Result<()> {
        self.summary = Summary::default();
        match stmt {
            Statement::CreateNamespace {
                name,
                if_not_exists,
            } => {
                let path = self.resolve(name);
                match self.client.create_namespace(&path) {
                    Err(ClientError::NamespaceExists(_)) if *if_not_exists => Ok(()),
                    r => Ok(r?),
                }
            }
            Statement::DropNamespace { name, if_exists } => {
                let path = self.resolve(name);
                match self.client.drop_namespace(&path) {
                    Err(ClientError::NamespaceNotFound(_)) if *if_exists => Ok(()),
                    r => Ok(r?),
                }
            }
            Statement::Use(name) => {
                let path = self.resolve(name);
                if !self.client.namespace_exists(&path)? {
                    return Err(ClientError::NamespaceNotFound(path).into());
                }
                self.namespace = path;
                Ok(())
            }
            Statement::GetListing => {
                for e in self.client.listing(&self.namespace)? {
                    if e.is_namespace {
                        writeln!(out, "{}\t(namespace)", e.name)?;
                    } else {
                        writeln!(out, "{}", e.name)?;
                    }
                }
                Ok(())
            }
            Statement::ShowTables => {
                for e in self.client.listing(&self.namespace)? {
                    if !e.is_namespace {
                        writeln!(out, "{}", e.name)?;
                    }
                }
                Ok(())
            }
            Statement::CreateTable(c) => schema::create_table(self, c),
            Statement::ShowCreateTable(t) => {
                let s = self.client.table_schema(&self.resolve(t))?;
                out.write_all(schema::show_create(&s, t).as_bytes())?;
                Ok(())
            }
            Statement::DescribeTable { table, with_ids } => {
                let path = self.resolve(table);
                let s = self.client.table_schema(&path)?;
                let index = client::index::is_index_name(&path);
                out.write_all(schema::describe(&s, *with_ids, index).as_bytes())?;
                Ok(())
            }
            Statement::AlterTable(a) => schema::alter_table(self, a),
            Statement::RenameTable { from, to } => {
                let (from, to) = (self.resolve(from), self.resolve(to));
                schema::check_not_index_name(&from)?;
                schema::check_not_index_name(&to)?;
                self.client.rename_table(&from, &to)?;
                client::index::rename_tables(self.client.as_ref(), &from, &to)?;
                Ok(())
            }
            Statement::DropTable { table, if_exists } => {
                let path = self.resolve(table);
                schema::check_not_index_name(&path)?;
                match self.client.drop_table(&path) {
                    Err(ClientError::TableNotFound(_)) if *if_exists => Ok(()),
                    r => {
                        r?;
                        client::index::drop_tables(self.client.as_ref(), &path)?;
                        Ok(())
                    }
                }
            }
            Statement::RebuildIndices {
                table,
                values,
                qualifiers,
            } => {
                let path = self.resolve(table);
                schema::check_not_index_name(&path)?;
                client::index::rebuild(self.client.as_ref(), &path, *values, *qualifiers)?;
                Ok(())
            }
            Statement::ExistsTable(t) => {
                let exists = self.client.table_exists(&self.resolve(t))?;
                writeln!(out, "{exists}")?;
                Ok(())
            }
            Statement::Insert(i) => write::insert(self, i),
            Statement::Delete(d) => write::delete(self, d),
            Statement::Explain(s) => explain::explain(self, s, out),
            Statement::Select(s) => match &s.columns {
                crate::ast::Columns::Aggregates(list) => {
                    self.summary.notes = aggregate::select(self, s, list, out)?;
                    Ok(())
                }
                _ => {
                    let cells = select::select(self, s, out)?;
                    self.summary.cells = Some(cells);
                    Ok(())
                }
            },
            Statement::DumpTable(d) => {
                let cells = dump::dump_table(self, d, out)?;
                self.summary.cells = Some(cells);
                Ok(())
            }
            Statement::LoadData(l) => {
                let mut stdin = std::io::stdin();
                let ctx = LoadContext {
                    client: self.client.as_ref(),
                    namespace: &self.namespace,
                    progress: self.progress,
                    skip_bad_lines: self.skip_bad_lines,
                    stdin: if self.stdin_for_load {
                        Some(&mut stdin)
                    } else {
                        None
                    },
                };
                let report = load_data_with(ctx, l, self.load_limits)?;
                self.summary.report = Some(report);
                Ok(())
            }
            Statement::Compact(c) => {
                let kind = match c.kind.unwrap_or(CompactionType::Major) {
                    CompactionType::Minor => CompactionKind::Minor,
                    CompactionType::Major => CompactionKind::Major,
                    CompactionType::Merging => CompactionKind::Merging,
                    CompactionType::Gc => CompactionKind::Gc,
                };
                match &c.target {
                    // A row names one range; the embedded database compacts the whole table.
                    CompactTarget::Table { table, .. } => {
                        Ok(self.client.compact(Some(&self.resolve(table)), kind)?)
                    }
                    CompactTarget::Ranges(_) => Ok(self.client.compact(None, kind)?),
                }
            }
            Statement::WaitForMaintenance => Ok(self.client.wait_for_maintenance()?),
            Statement::Status => {
                for (k, v) in self.client.status()? {
                    writeln!(out, "{k}\t{v}")?;
                }
                Ok(())
            }
            Statement::Balance { .. } => Ok(self.client.balance()?),
            Statement::Set(_) => Err(ExecError::invalid(
                "SET is not supported by the embedded database",
            )),
            Statement::Shutdown => {
                self.client.close()?;
                Ok(())
            }
            Statement::Help(_)
            | Statement::Quit
            | Statement::Source(_)
            | Statement::Clear
            | Statement::Print(_)
            | Statement::Pause(_) => Err(ExecError::invalid(format!(
                "'{stmt}' is a shell command, not a statement"
            ))),
        }
    }
}

/// A fresh random unique id for `GUID()`: 128 random bits in the usual 8-4-4-4-12 form.
pub(crate) fn guid() -> String {
    let b: [u8; 16] = rand::random();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
