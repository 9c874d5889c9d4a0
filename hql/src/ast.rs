//! The HQL abstract syntax tree: one type per statement, clause and option, holding values as written.
//!
//! The parser fills these types without consulting any schema or server; the executor resolves
//! names, inherits defaults and reports errors that need state. Values keep their written form
//! (strings after unescaping, timestamps as text plus nanoseconds where the text is valid) so
//! that the executor can name exactly what was wrong.

use std::time::Duration;

pub use common::iterators::{IterOptions, IterScope};
pub use common::schema::{BloomFilterMode, Durability, TimeOrder};

use crate::timestamp;

/// One HQL statement or shell command.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `CREATE NAMESPACE name [IF NOT EXISTS]` (also `CREATE DATABASE`).
    CreateNamespace { name: String, if_not_exists: bool },
    /// `DROP NAMESPACE [IF EXISTS] name`.
    DropNamespace { name: String, if_exists: bool },
    /// `USE name`.
    Use(String),
    /// `GET LISTING`.
    GetListing,
    /// `SHOW TABLES`.
    ShowTables,
    /// `CREATE TABLE …`.
    CreateTable(CreateTable),
    /// `SHOW CREATE TABLE t`.
    ShowCreateTable(String),
    /// `DESCRIBE TABLE [WITH IDS] t`.
    DescribeTable { table: String, with_ids: bool },
    /// `ALTER TABLE t clause…`.
    AlterTable(AlterTable),
    /// `RENAME TABLE a TO b`.
    RenameTable { from: String, to: String },
    /// `DROP TABLE [IF EXISTS] t`.
    DropTable { table: String, if_exists: bool },
    /// `EXISTS TABLE t`.
    ExistsTable(String),
    /// `REBUILD [VALUE|QUALIFIER] INDICES t` (neither keyword: both kinds).
    RebuildIndices {
        table: String,
        values: bool,
        qualifiers: bool,
    },
    /// `INSERT INTO t VALUES …`.
    Insert(Insert),
    /// `DELETE … FROM t WHERE ROW = 'r' …`.
    Delete(Delete),
    /// `SELECT …`.
    Select(Select),
    /// `EXPLAIN SELECT …` (ht extension): how the query would run, without running it.
    Explain(Select),
    /// `LOAD DATA INFILE …`.
    LoadData(LoadData),
    /// `DUMP TABLE …`.
    DumpTable(DumpTable),
    /// `COMPACT …`.
    Compact(Compact),
    /// `WAIT FOR MAINTENANCE`.
    WaitForMaintenance,
    /// `BALANCE [ALGORITHM = name]`.
    Balance { algorithm: Option<String> },
    /// `STATUS`.
    Status,
    /// `SET name = value [, name = value]*`.
    Set(Vec<SetVariable>),
    /// `SHUTDOWN`.
    Shutdown,
    /// Shell: `help [topic]` (also `\h`, `?`); the topic is lower-cased, words joined by one space.
    Help(Option<String>),
    /// Shell: `quit` or `exit`.
    Quit,
    /// Shell: `source file`.
    Source(String),
    /// Shell: `clear`.
    Clear,
    /// Shell: `print ["text"]`.
    Print(Option<String>),
    /// Shell: `pause N` (seconds, fractions allowed).
    Pause(Duration),
}

/// `CREATE TABLE [IF NOT EXISTS] name …`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: String,
    pub if_not_exists: bool,
    pub body: CreateTableBody,
    /// `SPLIT ON ('row', ...)` (an ht extension, Phoenix's spelling): the table starts as one
    /// range per gap between these rows, spread over the range servers.
    pub splits: Vec<String>,
}

/// What follows the table name in CREATE TABLE.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per CREATE TABLE statement; boxing the options would only burden matching"
)]
pub enum CreateTableBody {
    /// `LIKE other`.
    Like(String),
    /// `( definitions ) [table options]`. Options written before the name (Hypertable's
    /// older form) are merged into `options`.
    Definitions {
        definitions: Vec<Definition>,
        options: TableOptions,
    },
}

/// One comma-separated definition inside CREATE TABLE or ALTER TABLE ADD/MODIFY.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// `family [column options]`.
    Family(FamilyDef),
    /// `INDEX family`: a value index.
    Index(String),
    /// `QUALIFIER INDEX family`.
    QualifierIndex(String),
    /// `ACCESS GROUP name [options] ( family, … ) [options]`.
    AccessGroup(AccessGroupDef),
    /// `ITERATOR name = kind[(OPT = value, …)] [SCOPES (…)] [PRIORITY n]`: a table iterator.
    Iterator(IteratorDef),
    /// `ROW KEY (part TYPE, …)` (ht extension): a composite row key, TYPE one of `UINT(w)`,
    /// `CHAR(n)`, `VARCHAR` (last only).
    RowKey(common::row_key::RowKeySpec),
}

/// `kind` or `kind(OPT = value, …)`: a combiner or iterator kind with its options. The
/// parser stores the kind lower-case and option names upper-case; values are text as
/// written (a quoted string unquoted, a number or a bare word as it stands).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KindCall {
    pub kind: String,
    pub options: IterOptions,
}

/// A table iterator definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IteratorDef {
    /// Unique within the table; a plain name (letters, digits, `_`).
    pub name: String,
    pub call: KindCall,
    /// `SCOPES (SCAN, MINOR, MAJOR)` as written; `None`: all three.
    pub scopes: Option<Vec<IterScope>>,
    /// `PRIORITY n`; `None`: the executor picks the lowest free multiple of 10.
    pub priority: Option<u16>,
}

/// A column family definition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FamilyDef {
    pub name: String,
    pub options: ColumnOptions,
}

/// Column family options; `None` means not given (inherit or default).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ColumnOptions {
    /// `MAX_VERSIONS [=] n` or `REVS [=] n`.
    pub max_versions: Option<u32>,
    /// `TTL [=] n [unit]`.
    pub ttl: Option<Ttl>,
    /// `TIME_ORDER ASC|DESC`.
    pub time_order: Option<TimeOrder>,
    /// `COUNTER [true|false]`.
    pub counter: Option<bool>,
    /// `COMBINER kind[(OPT = value, …)]` (a family option only, not a group or table default).
    pub combiner: Option<KindCall>,
    /// `APPEND_ONLY [true|false]` (a family option only).
    pub append_only: Option<bool>,
}

impl ColumnOptions {
    /// True when no option is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A TTL as written: an amount (digits with an optional fraction) and an optional unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Ttl {
    pub amount: String,
    /// `None` when no unit was written: seconds.
    pub unit: Option<TimeUnit>,
}

impl Ttl {
    /// The TTL in whole seconds (fractions of a second truncated), or `None` if the amount is
    /// not `digits[.digits]` or overflows. Exact integer arithmetic: through an f64, TTLs above
    /// 2^53 seconds were rounded (9007199254740993 became ...992).
    pub fn seconds(&self) -> Option<u64> {
        /// Fraction digits beyond these cannot change whole seconds of any unit (a month is
        /// under 10^7 seconds), and 10^30 times a unit still fits a u128.
        const FRACTION_DIGITS: usize = 30;
        let unit = u128::from(self.unit.unwrap_or(TimeUnit::Seconds).seconds());
        let (int, frac) = self
            .amount
            .split_once('.')
            .unwrap_or((self.amount.as_str(), ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !all_digits(int) || !all_digits(frac) {
            return None;
        }
        let whole = int.parse::<u128>().ok()?.checked_mul(unit)?;
        let frac = &frac[..frac.len().min(FRACTION_DIGITS)];
        let part = if frac.is_empty() {
            0
        } else {
            frac.parse::<u128>().ok()? * unit / 10u128.pow(frac.len() as u32)
        };
        u64::try_from(whole.checked_add(part)?).ok()
    }
}

/// Units of a TTL. A month is 30 days, as in Hypertable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Minutes,
    Hours,
    Days,
    Weeks,
    Months,
}

impl TimeUnit {
    /// Seconds in one unit.
    pub fn seconds(self) -> u64 {
        match self {
            Self::Seconds => 1,
            Self::Minutes => 60,
            Self::Hours => 3_600,
            Self::Days => 86_400,
            Self::Weeks => 604_800,
            Self::Months => 2_592_000,
        }
    }

    /// The canonical (plural) keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Seconds => "SECONDS",
            Self::Minutes => "MINUTES",
            Self::Hours => "HOURS",
            Self::Days => "DAYS",
            Self::Weeks => "WEEKS",
            Self::Months => "MONTHS",
        }
    }
}

/// `ACCESS GROUP name … ( families ) …`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccessGroupDef {
    pub name: String,
    /// May be empty.
    pub families: Vec<String>,
    pub options: AccessGroupOptions,
}

/// Access group options; column options given here are defaults for the group's families.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccessGroupOptions {
    /// `IN_MEMORY [true|false]`.
    pub in_memory: Option<bool>,
    /// `BLOCKSIZE [=] n` (bytes).
    pub blocksize: Option<u32>,
    /// `REPLICATION [=] n`.
    pub replication: Option<u16>,
    /// `COMPRESSOR [=] "codec [args]"`.
    pub compressor: Option<CompressorSpec>,
    /// `BLOOMFILTER [=] "mode [args]"`.
    pub bloom_filter: Option<BloomFilterOption>,
    /// Column options as defaults for the group's families.
    pub column_defaults: ColumnOptions,
}

impl AccessGroupOptions {
    /// True when no option is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Options after CREATE TABLE's closing parenthesis: table-wide defaults and table settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TableOptions {
    /// Access group and column options as defaults for every group and family.
    pub group_defaults: AccessGroupOptions,
    /// `GROUP_COMMIT_INTERVAL [=] ms`.
    pub group_commit_interval_ms: Option<u32>,
    /// `DURABILITY [=] none|log|flush|sync` (an ht addition).
    pub durability: Option<Durability>,
}

impl TableOptions {
    /// True when no option is given.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A compressor specification: the string as written and its codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressorSpec {
    /// As written, e.g. `zlib --best`.
    pub text: String,
    pub codec: Codec,
}

/// Compression codecs Hypertable named. ht implements `None` and `Lz4`; the executor maps
/// the others to its nearest codec (see [`Codec::implemented`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Lz4,
    Bmz,
    Lzo,
    Quicklz,
    Snappy,
    Zlib,
}

impl Codec {
    /// The name used in HQL.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Lz4 => "lz4",
            Self::Bmz => "bmz",
            Self::Lzo => "lzo",
            Self::Quicklz => "quicklz",
            Self::Snappy => "snappy",
            Self::Zlib => "zlib",
        }
    }

    /// Parses a codec name (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "lz4" => Self::Lz4,
            "bmz" => Self::Bmz,
            "lzo" => Self::Lzo,
            "quicklz" => Self::Quicklz,
            "snappy" => Self::Snappy,
            "zlib" => Self::Zlib,
            _ => return None,
        })
    }

    /// Whether ht implements this codec itself (the others are mapped to the nearest one).
    pub fn implemented(self) -> bool {
        matches!(self, Self::None | Self::Lz4)
    }
}

/// A bloom filter specification: the string as written and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct BloomFilterOption {
    /// As written, e.g. `rows+cols --false-positive 0.02`.
    pub text: String,
    pub mode: BloomFilterMode,
    pub false_positive: Option<f64>,
    pub bits_per_item: Option<f64>,
    pub num_hashes: Option<u32>,
    /// Accepted for Hypertable compatibility; ht sizes filters from the actual item count.
    pub max_approx_items: Option<u64>,
}

/// `ALTER TABLE t action…`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterTable {
    pub table: String,
    /// At least one.
    pub actions: Vec<AlterAction>,
}

/// One clause of ALTER TABLE.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterAction {
    /// `ADD ( definitions )`.
    Add(Vec<Definition>),
    /// `MODIFY ( definitions )`.
    Modify(Vec<Definition>),
    /// `DROP ( families )`.
    Drop(Vec<String>),
    /// `DROP INDEX ( families )`.
    DropIndex(Vec<String>),
    /// `DROP QUALIFIER INDEX ( families )`.
    DropQualifierIndex(Vec<String>),
    /// `RENAME COLUMN FAMILY ( old, new )`.
    RenameColumnFamily { from: String, to: String },
    /// `DROP ITERATOR name`.
    DropIterator(String),
}

/// A timestamp as written, with its value where the text is a valid timestamp.
///
/// Accepted forms: `YYYY-MM-DD HH:MM:SS[.fraction]`, `YYYY-MM-DD HH:MM:SS:N` (N nanoseconds),
/// `YYYY-MM-DD HH:MM`, `YYYY-MM-DD`, `YYYY`, and an integer count of nanoseconds since the
/// epoch. Dates are read as UTC. As in Hypertable, the digits after the dot are a fraction of a
/// second (`.5` is 500 ms, `.000000005` 5 ns; digits past the ninth are dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timestamp {
    pub text: String,
    /// Nanoseconds since the epoch; `None` when `text` is not a valid timestamp.
    pub nanos: Option<i64>,
}

impl Timestamp {
    /// A timestamp from its text, computing its value.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let nanos = timestamp::parse_nanos(&text);
        Self { text, nanos }
    }
}

/// `family` or `family:qualifier`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRef {
    pub family: String,
    /// `Some("")` for `family:`.
    pub qualifier: Option<String>,
}

impl ColumnRef {
    /// Splits `family[:qualifier]` at the first colon.
    pub fn split(s: &str) -> Self {
        match s.split_once(':') {
            Some((f, q)) => Self {
                family: f.to_string(),
                qualifier: Some(q.to_string()),
            },
            None => Self {
                family: s.to_string(),
                qualifier: None,
            },
        }
    }
}

/// `INSERT INTO t VALUES (…) [, (…)]*`.
#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub table: String,
    /// At least one.
    pub values: Vec<InsertValue>,
}

/// One `([timestamp,] row, column, value)` tuple.
#[derive(Debug, Clone, PartialEq)]
pub struct InsertValue {
    pub timestamp: Option<Timestamp>,
    pub row: CellValue,
    pub column: ColumnRef,
    pub value: CellValue,
}

/// A row key or value in INSERT: a string, or `GUID()` for a fresh unique id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellValue {
    Literal(String),
    Guid,
}

/// `DELETE columns FROM t WHERE ROW = 'r' [TIMESTAMP ts | VERSION ts]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    pub columns: DeleteColumns,
    pub table: String,
    pub row: String,
    pub time: Option<DeleteTime>,
}

/// What DELETE removes.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteColumns {
    /// `*`: the whole row.
    All,
    /// Families (`family`) and cells (`family:qualifier`).
    List(Vec<ColumnRef>),
}

/// The time limit of a DELETE.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteTime {
    /// `TIMESTAMP ts`: versions at or before ts.
    Timestamp(Timestamp),
    /// `VERSION ts`: exactly that version.
    Version(Timestamp),
}

/// `SELECT [CELLS] columns FROM t [WHERE …] [options]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// `CELLS` was written (Hypertable's modifier for value predicates; no effect on output).
    pub cells: bool,
    pub columns: Columns,
    pub table: String,
    /// ANDed; empty without WHERE.
    pub predicates: Vec<Predicate>,
    pub options: SelectOptions,
}

/// `*`, a list of column selectors, or (SELECT only) a list of aggregates.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Columns {
    #[default]
    All,
    List(Vec<ColumnSelector>),
    /// `COUNT(*), SUM(f), ...`: one line of values instead of cells (ht extension).
    Aggregates(Vec<Aggregate>),
}

/// One aggregate of a select list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aggregate {
    /// `COUNT(*)`: the rows the select returns.
    CountRows,
    /// `COUNT(f)`, `SUM(f)`, ...: over the decimal values of a column (`family[:qualifier]`).
    Column {
        func: AggregateFunc,
        column: ColumnRef,
    },
}

/// An aggregate function of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateFunc {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

impl AggregateFunc {
    /// Every function, with how it is written.
    pub const ALL: [(&'static str, AggregateFunc); 5] = [
        ("COUNT", Self::Count),
        ("SUM", Self::Sum),
        ("AVG", Self::Avg),
        ("MIN", Self::Min),
        ("MAX", Self::Max),
    ];

    /// How it is written.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Count => "COUNT",
            Self::Sum => "SUM",
            Self::Avg => "AVG",
            Self::Min => "MIN",
            Self::Max => "MAX",
        }
    }
}

/// One selected column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnSelector {
    /// `family`.
    Family(String),
    /// `family:qualifier`.
    Qualifier { family: String, qualifier: String },
    /// `family:^prefix`.
    QualifierPrefix { family: String, prefix: String },
    /// `family:/regex/`.
    QualifierRegex { family: String, regex: String },
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelOp {
    /// `=`
    Eq,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `=^`: starts with.
    StartsWith,
}

impl RelOp {
    /// How it is written.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::StartsWith => "=^",
        }
    }
}

/// One ANDed WHERE predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// `[k relop] ROW relop k`, or a parenthesised OR-list of those.
    Row(Vec<RowInterval>),
    /// `ROW IN ('k1', 'k2', ...)` or `ROW IN FILE "keys.txt[.gz]"` (ht extension): these rows.
    RowIn(RowSet),
    /// `ROW REGEXP "re"`.
    RowRegexp(String),
    /// `[r,c relop] CELL relop r,c`, or a parenthesised OR-list of those.
    Cell(Vec<CellInterval>),
    /// `[ts relop] TIMESTAMP relop ts` (at most one per query).
    Timestamp(TimestampPredicate),
    /// `VALUE REGEXP "re"`.
    ValueRegexp(String),
    /// Column value predicates ORed together.
    Columns(Vec<ColumnPredicate>),
    /// Predicates on one part of the table's `ROW KEY` (ht extension), ORed together.
    Part(Vec<PartPredicate>),
}

/// `part op value`, `part BETWEEN a AND b`, `part IN (...)` or `part IN FILE "f"`, on a part
/// of a declared composite row key. (`part = 'text'` parses as a column value predicate; the
/// executor treats it as this when `part` names a key part.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartPredicate {
    pub part: String,
    pub test: PartTest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartTest {
    /// `part op value`, op one of `= < <= > >=`.
    Compare(RelOp, KeyValue),
    /// `part BETWEEN low AND high` (both included).
    Between(KeyValue, KeyValue),
    /// `part IN (v, ...)`.
    In(Vec<KeyValue>),
    /// `part IN FILE "name"`: one value per line, as written (gzip when the name ends in
    /// `.gz`); read when the statement runs.
    InFile(String),
}

/// A value for a key part: an unsigned integer or a quoted string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    Number(u64),
    Text(String),
}

/// The rows of `ROW IN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowSet {
    /// `('k1', 'k2', ...)`.
    Keys(Vec<String>),
    /// `FILE "name"`: one row key per line (gzip when the name ends in `.gz`); read when the
    /// statement runs.
    File(String),
}

/// `[before relop] ROW op key`: `before` is the left operand and its operator, if written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowInterval {
    pub before: Option<(String, RelOp)>,
    pub op: RelOp,
    pub key: String,
}

/// `row, column` in a cell predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellKey {
    pub row: String,
    /// As written, `family[:qualifier]`.
    pub column: String,
}

/// `[before relop] CELL op cell`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellInterval {
    pub before: Option<(CellKey, RelOp)>,
    pub op: RelOp,
    pub cell: CellKey,
}

/// `[before relop] TIMESTAMP op ts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampPredicate {
    pub before: Option<(Timestamp, RelOp)>,
    pub op: RelOp,
    pub ts: Timestamp,
}

/// A predicate on a column's values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnPredicate {
    /// `column = "v"`.
    ValueEquals { column: ColumnRef, value: String },
    /// `column =^ "p"`.
    ValuePrefix { column: ColumnRef, prefix: String },
    /// `column =~ /re/` or `REGEXP(column, "re")`.
    ValueRegexp { column: ColumnRef, regex: String },
    /// `EXISTS(column)`.
    Exists(ColumnRef),
}

/// SELECT options; `None`/`false` when not given.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SelectOptions {
    /// `MAX_VERSIONS n` or `REVS n`.
    pub max_versions: Option<u32>,
    /// `LIMIT n`: rows per interval.
    pub limit: Option<u64>,
    /// `OFFSET n`: rows per interval.
    pub offset: Option<u64>,
    /// `CELL_LIMIT n`.
    pub cell_limit: Option<u64>,
    /// `CELL_OFFSET n`.
    pub cell_offset: Option<u64>,
    /// `CELL_LIMIT_PER_FAMILY n`.
    pub cell_limit_per_family: Option<u64>,
    /// `INTO FILE "name"`, as written (see [`FileScheme::split`]).
    pub into_file: Option<String>,
    pub display_timestamps: bool,
    pub display_revisions: bool,
    pub keys_only: bool,
    /// `NO_ESCAPE` (also `NOESCAPE`).
    pub no_escape: bool,
    pub return_deletes: bool,
    pub no_cache: bool,
    pub scan_and_filter_rows: bool,
    /// `FS = 'c'`: the field separator.
    pub field_separator: Option<String>,
    /// `WITH ITERATOR kind(…) [, kind(…)]*`: scan iterators, in order; empty when not given.
    pub iterators: Vec<KindCall>,
}

/// Where a file name points, by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileScheme {
    /// No prefix, or `file://`: the local file system of the shell.
    Local,
    /// `fs://` (Hypertable's `dfs://` too): ht's distributed file system.
    Fs,
}

impl FileScheme {
    /// Splits a file name as written into its scheme and path.
    pub fn split(name: &str) -> (Self, &str) {
        if let Some(p) = name.strip_prefix("file://") {
            (Self::Local, p)
        } else if let Some(p) = name.strip_prefix("fs://") {
            (Self::Fs, p)
        } else if let Some(p) = name.strip_prefix("dfs://") {
            (Self::Fs, p)
        } else {
            (Self::Local, name)
        }
    }
}

/// `LOAD DATA INFILE [options] source INTO TABLE t | INTO FILE f`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadData {
    pub options: LoadOptions,
    pub source: DataSource,
    pub target: LoadTarget,
}

/// Where LOAD DATA reads from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DataSource {
    /// `"-"`.
    #[default]
    Stdin,
    /// A file name as written (see [`FileScheme::split`]); `.gz` names are decompressed.
    File(String),
}

/// Where LOAD DATA writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadTarget {
    Table(String),
    File(String),
}

impl Default for LoadTarget {
    fn default() -> Self {
        Self::Table(String::new())
    }
}

/// LOAD DATA options.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadOptions {
    /// `ROW_KEY_COLUMN = spec [+ spec]*`; empty when not given.
    pub row_key_columns: Vec<RowKeyColumn>,
    /// `TIMESTAMP_COLUMN = name`.
    pub timestamp_column: Option<String>,
    /// `HEADER_FILE = "f"`.
    pub header_file: Option<String>,
    /// `ROW_UNIQUIFY_CHARS = n`.
    pub row_uniquify_chars: Option<u32>,
    /// `DUPLICATE_KEY_COLUMNS` (alias `DUP_KEY_COLS`).
    pub duplicate_key_columns: bool,
    /// `IGNORE_UNKNOWN_COLUMNS` (alias `IGNORE_UNKNOWN_CFS`).
    pub ignore_unknown_columns: bool,
    pub single_cell_format: bool,
    pub no_escape: bool,
    /// `FS = 'c'`.
    pub field_separator: Option<String>,
    pub no_log: bool,
}

/// One field of ROW_KEY_COLUMN, with its optional width format (`%0N`, `%-N`, `%N`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKeyColumn {
    pub name: String,
    pub format: Option<KeyFormat>,
}

/// How a row key field is padded to its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    pub width: u32,
    pub justify: Justify,
}

/// Padding of a row key field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Justify {
    /// `%0N`: right-justified, zero-padded.
    RightZero,
    /// `%-N`: right-justified, space-padded.
    RightSpace,
    /// `%N`: left-justified, space-padded.
    LeftSpace,
}

/// `DUMP TABLE t [COLUMNS …] [WHERE …] [options]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DumpTable {
    pub table: String,
    /// `All` when COLUMNS is not given.
    pub columns: Columns,
    pub predicates: Vec<Predicate>,
    /// `MAX_VERSIONS n` (also `REVS n`).
    pub max_versions: Option<u32>,
    /// `BUCKETS n` (accepted for Hypertable compatibility).
    pub buckets: Option<u32>,
    /// `INTO FILE "f"`.
    pub into_file: Option<String>,
    pub no_timestamps: bool,
    /// `FS = 'c'`.
    pub field_separator: Option<String>,
}

/// `COMPACT [TYPE = kind] TABLE t ["row"]` or `COMPACT [TYPE = kind] RANGES kinds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compact {
    pub kind: Option<CompactionType>,
    pub target: CompactTarget,
}

/// `TYPE = MINOR|MAJOR|MERGING|GC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionType {
    Minor,
    Major,
    Merging,
    Gc,
}

impl CompactionType {
    /// The keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Minor => "MINOR",
            Self::Major => "MAJOR",
            Self::Merging => "MERGING",
            Self::Gc => "GC",
        }
    }
}

/// What COMPACT works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactTarget {
    /// `TABLE t ["row"]`: the table, or the range holding `row`.
    Table { table: String, row: Option<String> },
    /// `RANGES kind [| kind]*`.
    Ranges(Vec<RangeType>),
}

/// Classes of ranges for `COMPACT RANGES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeType {
    All,
    Root,
    Metadata,
    System,
    User,
}

impl RangeType {
    /// The keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::All => "ALL",
            Self::Root => "ROOT",
            Self::Metadata => "METADATA",
            Self::System => "SYSTEM",
            Self::User => "USER",
        }
    }
}

/// `name = value` in SET; the value as written (a name, number or string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetVariable {
    pub name: String,
    pub value: String,
}
