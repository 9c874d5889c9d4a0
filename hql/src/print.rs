//! Printing the AST as canonical HQL: keywords upper-case, names quoted only when needed,
//! strings double-quoted with escapes. `parse_statement(&s.to_string())` gives back `s`.

use std::fmt::{self, Display, Formatter, Write as _};

use crate::ast::{
    AccessGroupDef, AccessGroupOptions, Aggregate, AlterAction, CellInterval, CellKey, CellValue,
    ColumnOptions, ColumnPredicate, ColumnRef, ColumnSelector, Columns, CompactTarget,
    CreateTableBody, DataSource, Definition, DeleteColumns, DeleteTime, IteratorDef, Justify,
    KeyValue, KindCall, LoadTarget, PartPredicate, PartTest, Predicate, RelOp, RowInterval,
    RowKeyColumn, RowSet, Statement, TableOptions, TimeOrder, Timestamp, TimestampPredicate,
};
use crate::parser::is_qualifier_char;
use crate::parser::token::{is_keyword, is_name_char};

/// A string literal: double-quoted, with `\\ \" \n \t \r \0` escaped.
pub struct Quoted<'a>(pub &'a str);

impl Display for Quoted<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                '"' => f.write_str("\\\"")?,
                '\n' => f.write_str("\\n")?,
                '\t' => f.write_str("\\t")?,
                '\r' => f.write_str("\\r")?,
                '\0' => f.write_str("\\0")?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('"')
    }
}

/// An option value: single-quoted, with `\\ \' \n \t \r \0` escaped. A backslash that
/// the parser keeps as written (one not before an escape letter, as in a regex's `\d`) is
/// printed as it is.
struct OptionValue<'a>(&'a str);

impl Display for OptionValue<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('\'')?;
        let mut chars = self.0.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    // Kept as one character unless what follows would make it an escape
                    // (an escape letter, or a character printed escaped).
                    let kept = chars.peek().is_some_and(|n| {
                        !matches!(
                            n,
                            'n' | 't' | 'r' | '0' | '\\' | '\'' | '"' | '\n' | '\t' | '\r' | '\0'
                        )
                    });
                    f.write_str(if kept { "\\" } else { "\\\\" })?;
                }
                '\'' => f.write_str("\\'")?,
                '\n' => f.write_str("\\n")?,
                '\t' => f.write_str("\\t")?,
                '\r' => f.write_str("\\r")?,
                '\0' => f.write_str("\\0")?,
                c => f.write_char(c)?,
            }
        }
        f.write_char('\'')
    }
}

impl Display for KindCall {
    /// `kind` or `kind(OPT = 'value', ...)`, options in name order.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if self.options.is_empty() {
            return Ok(());
        }
        f.write_char('(')?;
        for (n, (k, v)) in self.options.iter().enumerate() {
            if n > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k} = {}", OptionValue(v))?;
        }
        f.write_char(')')
    }
}

impl Display for IteratorDef {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "ITERATOR {} = {}", self.name, self.call)?;
        if let Some(scopes) = &self.scopes {
            f.write_str(" SCOPES (")?;
            comma_list(f, scopes, |f, s| f.write_str(s.name()))?;
            f.write_char(')')?;
        }
        if let Some(p) = self.priority {
            write!(f, " PRIORITY {p}")?;
        }
        Ok(())
    }
}

/// Whether a name can be written without quotes. Names with `-` or `.` parse unquoted too,
/// but Hypertable required quotes for them, so the printer quotes them.
pub fn is_plain_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '/')
        && s.chars().all(|c| is_name_char(c) && c != '-' && c != '.')
        && !is_keyword(s)
}

/// A name, quoted only when needed.
pub struct Name<'a>(pub &'a str);

impl Display for Name<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if is_plain_name(self.0) {
            f.write_str(self.0)
        } else {
            Quoted(self.0).fmt(f)
        }
    }
}

/// A qualifier after `family:`, quoted only when needed.
struct Qual<'a>(&'a str);

impl Display for Qual<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        // A bare `*` is the whole family (`f:*`), so the qualifier `*` is quoted.
        if !self.0.is_empty()
            && !self.0.starts_with('/')
            && self.0 != "*"
            && self.0.chars().all(is_qualifier_char)
        {
            f.write_str(self.0)
        } else {
            Quoted(self.0).fmt(f)
        }
    }
}

/// `/regex/` with slashes escaped.
struct Regex<'a>(&'a str);

impl Display for Regex<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_char('/')?;
        let mut chars = self.0.chars();
        while let Some(c) = chars.next() {
            match c {
                '/' => f.write_str("\\/")?,
                '\\' => {
                    f.write_char('\\')?;
                    if let Some(n) = chars.next() {
                        f.write_char(n)?;
                    }
                }
                c => f.write_char(c)?,
            }
        }
        f.write_char('/')
    }
}

fn comma_list<T>(
    f: &mut Formatter<'_>,
    items: &[T],
    each: impl Fn(&mut Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            f.write_str(", ")?;
        }
        each(f, item)?;
    }
    Ok(())
}

fn names(f: &mut Formatter<'_>, items: &[String]) -> fmt::Result {
    comma_list(f, items, |f, n| write!(f, "{}", Name(n)))
}

impl Display for ColumnRef {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Name(&self.family))?;
        if let Some(q) = &self.qualifier {
            write!(f, ":{}", Qual(q))?;
        }
        Ok(())
    }
}

impl Display for Timestamp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        Quoted(&self.text).fmt(f)
    }
}

impl Display for RelOp {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

impl Display for ColumnOptions {
    /// Each option preceded by a space.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let Some(n) = self.max_versions {
            write!(f, " MAX_VERSIONS {n}")?;
        }
        if let Some(t) = &self.ttl {
            write!(f, " TTL {}", t.amount)?;
            if let Some(u) = t.unit {
                write!(f, " {}", u.keyword())?;
            }
        }
        if let Some(o) = self.time_order {
            f.write_str(match o {
                TimeOrder::Asc => " TIME_ORDER ASC",
                TimeOrder::Desc => " TIME_ORDER DESC",
            })?;
        }
        match self.counter {
            Some(true) => f.write_str(" COUNTER")?,
            Some(false) => f.write_str(" COUNTER false")?,
            None => {}
        }
        if let Some(c) = &self.combiner {
            write!(f, " COMBINER {c}")?;
        }
        match self.append_only {
            Some(true) => f.write_str(" APPEND_ONLY")?,
            Some(false) => f.write_str(" APPEND_ONLY false")?,
            None => {}
        }
        Ok(())
    }
}

impl Display for AccessGroupOptions {
    /// Each option preceded by a space.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.in_memory {
            Some(true) => f.write_str(" IN_MEMORY")?,
            Some(false) => f.write_str(" IN_MEMORY false")?,
            None => {}
        }
        if let Some(n) = self.blocksize {
            write!(f, " BLOCKSIZE {n}")?;
        }
        if let Some(n) = self.replication {
            write!(f, " REPLICATION {n}")?;
        }
        if let Some(c) = &self.compressor {
            write!(f, " COMPRESSOR {}", Quoted(&c.text))?;
        }
        if let Some(b) = &self.bloom_filter {
            write!(f, " BLOOMFILTER {}", Quoted(&b.text))?;
        }
        self.column_defaults.fmt(f)
    }
}

impl Display for TableOptions {
    /// Each option preceded by a space.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.group_defaults.fmt(f)?;
        if let Some(n) = self.group_commit_interval_ms {
            write!(f, " GROUP_COMMIT_INTERVAL {n}")?;
        }
        if let Some(d) = self.durability {
            write!(f, " DURABILITY {}", d.name())?;
        }
        Ok(())
    }
}

impl Display for AccessGroupDef {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "ACCESS GROUP {} (", Name(&self.name))?;
        names(f, &self.families)?;
        write!(f, "){}", self.options)
    }
}

impl Display for Definition {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Family(d) => write!(f, "{}{}", Name(&d.name), d.options),
            Self::Index(n) => write!(f, "INDEX {}", Name(n)),
            Self::QualifierIndex(n) => write!(f, "QUALIFIER INDEX {}", Name(n)),
            Self::AccessGroup(g) => g.fmt(f),
            Self::Iterator(i) => i.fmt(f),
            Self::RowKey(k) => f.write_str(&k.hql()),
        }
    }
}

fn definitions_inline(f: &mut Formatter<'_>, defs: &[Definition]) -> fmt::Result {
    f.write_char('(')?;
    comma_list(f, defs, |f, d| d.fmt(f))?;
    f.write_char(')')
}

impl Display for AlterAction {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let list = |f: &mut Formatter<'_>, kw: &str, items: &[String]| {
            write!(f, "{kw} (")?;
            names(f, items)?;
            f.write_char(')')
        };
        match self {
            Self::Add(d) => {
                f.write_str("ADD ")?;
                definitions_inline(f, d)
            }
            Self::Modify(d) => {
                f.write_str("MODIFY ")?;
                definitions_inline(f, d)
            }
            Self::Drop(n) => list(f, "DROP", n),
            Self::DropIndex(n) => list(f, "DROP INDEX", n),
            Self::DropQualifierIndex(n) => list(f, "DROP QUALIFIER INDEX", n),
            Self::RenameColumnFamily { from, to } => {
                write!(f, "RENAME COLUMN FAMILY ({}, {})", Name(from), Name(to))
            }
            Self::DropIterator(n) => write!(f, "DROP ITERATOR {n}"),
        }
    }
}

impl Display for CellValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Literal(s) => Quoted(s).fmt(f),
            Self::Guid => f.write_str("GUID()"),
        }
    }
}

impl Display for ColumnSelector {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Family(n) => Name(n).fmt(f),
            Self::Qualifier { family, qualifier } => {
                write!(f, "{}:{}", Name(family), Qual(qualifier))
            }
            Self::QualifierPrefix { family, prefix } => {
                write!(f, "{}:^{}", Name(family), Qual(prefix))
            }
            Self::QualifierRegex { family, regex } => {
                write!(f, "{}:{}", Name(family), Regex(regex))
            }
        }
    }
}

impl Display for Columns {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_char('*'),
            Self::List(l) => comma_list(f, l, |f, c| c.fmt(f)),
            Self::Aggregates(l) => comma_list(f, l, |f, a| match a {
                Aggregate::CountRows => f.write_str("COUNT(*)"),
                Aggregate::Column { func, column } => write!(f, "{}({column})", func.keyword()),
            }),
        }
    }
}

impl Display for RowInterval {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let Some((k, op)) = &self.before {
            write!(f, "{} {op} ", Quoted(k))?;
        }
        write!(f, "ROW {} {}", self.op, Quoted(&self.key))
    }
}

impl Display for CellKey {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}, {}", Quoted(&self.row), Quoted(&self.column))
    }
}

impl Display for CellInterval {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let Some((k, op)) = &self.before {
            write!(f, "{k} {op} ")?;
        }
        write!(f, "CELL {} {}", self.op, self.cell)
    }
}

impl Display for TimestampPredicate {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let Some((t, op)) = &self.before {
            write!(f, "{t} {op} ")?;
        }
        write!(f, "TIMESTAMP {} {}", self.op, self.ts)
    }
}

impl Display for ColumnPredicate {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::ValueEquals { column, value } => write!(f, "{column} = {}", Quoted(value)),
            Self::ValuePrefix { column, prefix } => write!(f, "{column} =^ {}", Quoted(prefix)),
            Self::ValueRegexp { column, regex } => {
                write!(f, "REGEXP({column}, {})", Quoted(regex))
            }
            Self::Exists(column) => write!(f, "EXISTS({column})"),
        }
    }
}

fn or_list<T: Display>(f: &mut Formatter<'_>, items: &[T]) -> fmt::Result {
    if let [one] = items {
        return one.fmt(f);
    }
    f.write_char('(')?;
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            f.write_str(" OR ")?;
        }
        item.fmt(f)?;
    }
    f.write_char(')')
}

impl Display for Predicate {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Row(l) => or_list(f, l),
            Self::RowIn(RowSet::Keys(keys)) => {
                f.write_str("ROW IN (")?;
                for (n, k) in keys.iter().enumerate() {
                    if n > 0 {
                        f.write_str(", ")?;
                    }
                    Quoted(k).fmt(f)?;
                }
                f.write_char(')')
            }
            Self::RowIn(RowSet::File(name)) => write!(f, "ROW IN FILE {}", Quoted(name)),
            Self::RowRegexp(re) => write!(f, "ROW REGEXP {}", Quoted(re)),
            Self::Cell(l) => or_list(f, l),
            Self::Timestamp(t) => t.fmt(f),
            Self::ValueRegexp(re) => write!(f, "VALUE REGEXP {}", Quoted(re)),
            Self::Columns(l) => or_list(f, l),
            Self::Part(l) => or_list(f, l),
        }
    }
}

impl Display for KeyValue {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::Text(t) => Quoted(t).fmt(f),
        }
    }
}

impl Display for PartPredicate {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.part)?;
        match &self.test {
            PartTest::Compare(op, v) => write!(f, "{op} {v}"),
            PartTest::Between(a, b) => write!(f, "BETWEEN {a} AND {b}"),
            PartTest::In(values) => {
                f.write_str("IN (")?;
                comma_list(f, values, |f, v| v.fmt(f))?;
                f.write_char(')')
            }
            PartTest::InFile(name) => write!(f, "IN FILE {}", Quoted(name)),
        }
    }
}

fn where_clause(f: &mut Formatter<'_>, preds: &[Predicate]) -> fmt::Result {
    for (n, p) in preds.iter().enumerate() {
        f.write_str(if n == 0 { " WHERE " } else { " AND " })?;
        p.fmt(f)?;
    }
    Ok(())
}

impl Display for RowKeyColumn {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.format {
            None if self.name.starts_with('%') => Quoted(&self.name).fmt(f),
            None => Name(&self.name).fmt(f),
            Some(k) => {
                let flag = match k.justify {
                    Justify::RightZero => "0",
                    Justify::RightSpace => "-",
                    Justify::LeftSpace => "",
                };
                Quoted(&format!("%{flag}{}{}", k.width, self.name)).fmt(f)
            }
        }
    }
}

fn flag(f: &mut Formatter<'_>, on: bool, kw: &str) -> fmt::Result {
    if on {
        write!(f, " {kw}")?;
    }
    Ok(())
}

fn is_decimal(s: &str) -> bool {
    let (a, b) = s.split_once('.').unwrap_or((s, "1"));
    !a.is_empty()
        && !b.is_empty()
        && a.bytes().all(|c| c.is_ascii_digit())
        && b.bytes().all(|c| c.is_ascii_digit())
}

impl Display for Statement {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Self::CreateNamespace {
                name,
                if_not_exists,
            } => {
                write!(f, "CREATE NAMESPACE {}", Name(name))?;
                flag(f, *if_not_exists, "IF NOT EXISTS")
            }
            Self::DropNamespace { name, if_exists } => {
                f.write_str("DROP NAMESPACE")?;
                flag(f, *if_exists, "IF EXISTS")?;
                write!(f, " {}", Name(name))
            }
            Self::Use(n) => write!(f, "USE {}", Name(n)),
            Self::GetListing => f.write_str("GET LISTING"),
            Self::ShowTables => f.write_str("SHOW TABLES"),
            Self::CreateTable(c) => {
                f.write_str("CREATE TABLE")?;
                flag(f, c.if_not_exists, "IF NOT EXISTS")?;
                write!(f, " {}", Name(&c.name))?;
                match &c.body {
                    CreateTableBody::Like(other) => write!(f, " LIKE {}", Name(other))?,
                    CreateTableBody::Definitions {
                        definitions,
                        options,
                    } => {
                        if definitions.is_empty() {
                            f.write_str(" ()")?;
                        } else {
                            f.write_str(" (\n")?;
                            for (n, d) in definitions.iter().enumerate() {
                                let sep = if n + 1 < definitions.len() { "," } else { "" };
                                writeln!(f, "  {d}{sep}")?;
                            }
                            f.write_char(')')?;
                        }
                        options.fmt(f)?;
                    }
                }
                if !c.splits.is_empty() {
                    f.write_str(" SPLIT ON (")?;
                    for (n, r) in c.splits.iter().enumerate() {
                        let sep = if n == 0 { "" } else { ", " };
                        write!(f, "{sep}{}", Quoted(r))?;
                    }
                    f.write_char(')')?;
                }
                Ok(())
            }
            Self::ShowCreateTable(t) => write!(f, "SHOW CREATE TABLE {}", Name(t)),
            Self::DescribeTable { table, with_ids } => {
                f.write_str("DESCRIBE TABLE")?;
                flag(f, *with_ids, "WITH IDS")?;
                write!(f, " {}", Name(table))
            }
            Self::AlterTable(a) => {
                write!(f, "ALTER TABLE {}", Name(&a.table))?;
                for action in &a.actions {
                    write!(f, " {action}")?;
                }
                Ok(())
            }
            Self::RenameTable { from, to } => {
                write!(f, "RENAME TABLE {} TO {}", Name(from), Name(to))
            }
            Self::DropTable { table, if_exists } => {
                f.write_str("DROP TABLE")?;
                flag(f, *if_exists, "IF EXISTS")?;
                write!(f, " {}", Name(table))
            }
            Self::ExistsTable(t) => write!(f, "EXISTS TABLE {}", Name(t)),
            Self::RebuildIndices {
                table,
                values,
                qualifiers,
            } => {
                let kind = match (values, qualifiers) {
                    (true, false) => "VALUE ",
                    (false, true) => "QUALIFIER ",
                    _ => "",
                };
                write!(f, "REBUILD {kind}INDICES {}", Name(table))
            }
            Self::Insert(ins) => {
                write!(f, "INSERT INTO {} VALUES ", Name(&ins.table))?;
                comma_list(f, &ins.values, |f, v| {
                    f.write_char('(')?;
                    if let Some(ts) = &v.timestamp {
                        write!(f, "{ts}, ")?;
                    }
                    let col = match &v.column.qualifier {
                        Some(q) => format!("{}:{q}", v.column.family),
                        None => v.column.family.clone(),
                    };
                    write!(f, "{}, {}, {})", v.row, Quoted(&col), v.value)
                })
            }
            Self::Delete(d) => {
                f.write_str("DELETE ")?;
                match &d.columns {
                    DeleteColumns::All => f.write_char('*')?,
                    DeleteColumns::List(l) => comma_list(f, l, |f, c| c.fmt(f))?,
                }
                write!(f, " FROM {} WHERE ROW = {}", Name(&d.table), Quoted(&d.row))?;
                match &d.time {
                    Some(DeleteTime::Timestamp(t)) => write!(f, " TIMESTAMP {t}"),
                    Some(DeleteTime::Version(t)) => write!(f, " VERSION {t}"),
                    None => Ok(()),
                }
            }
            Self::Explain(s) => write!(f, "EXPLAIN {}", Self::Select(s.clone())),
            Self::Select(s) => {
                f.write_str("SELECT ")?;
                if s.cells {
                    f.write_str("CELLS ")?;
                }
                write!(f, "{} FROM {}", s.columns, Name(&s.table))?;
                where_clause(f, &s.predicates)?;
                let o = &s.options;
                if let Some(n) = o.max_versions {
                    write!(f, " MAX_VERSIONS {n}")?;
                }
                for (kw, v) in [
                    ("LIMIT", o.limit),
                    ("OFFSET", o.offset),
                    ("CELL_LIMIT", o.cell_limit),
                    ("CELL_OFFSET", o.cell_offset),
                    ("CELL_LIMIT_PER_FAMILY", o.cell_limit_per_family),
                ] {
                    if let Some(n) = v {
                        write!(f, " {kw} {n}")?;
                    }
                }
                if let Some(file) = &o.into_file {
                    write!(f, " INTO FILE {}", Quoted(file))?;
                }
                flag(f, o.display_timestamps, "DISPLAY_TIMESTAMPS")?;
                flag(f, o.display_revisions, "DISPLAY_REVISIONS")?;
                flag(f, o.keys_only, "KEYS_ONLY")?;
                flag(f, o.no_escape, "NO_ESCAPE")?;
                flag(f, o.return_deletes, "RETURN_DELETES")?;
                flag(f, o.no_cache, "NO_CACHE")?;
                flag(f, o.scan_and_filter_rows, "SCAN_AND_FILTER_ROWS")?;
                if let Some(fs) = &o.field_separator {
                    write!(f, " FS = {}", Quoted(fs))?;
                }
                if !o.iterators.is_empty() {
                    f.write_str(" WITH ITERATOR ")?;
                    comma_list(f, &o.iterators, |f, k| k.fmt(f))?;
                }
                Ok(())
            }
            Self::LoadData(l) => {
                f.write_str("LOAD DATA INFILE")?;
                let o = &l.options;
                if !o.row_key_columns.is_empty() {
                    f.write_str(" ROW_KEY_COLUMN = ")?;
                    for (n, k) in o.row_key_columns.iter().enumerate() {
                        if n > 0 {
                            f.write_str(" + ")?;
                        }
                        k.fmt(f)?;
                    }
                }
                if let Some(c) = &o.timestamp_column {
                    write!(f, " TIMESTAMP_COLUMN = {}", Name(c))?;
                }
                if let Some(h) = &o.header_file {
                    write!(f, " HEADER_FILE = {}", Quoted(h))?;
                }
                if let Some(n) = o.row_uniquify_chars {
                    write!(f, " ROW_UNIQUIFY_CHARS = {n}")?;
                }
                flag(f, o.duplicate_key_columns, "DUPLICATE_KEY_COLUMNS")?;
                flag(f, o.ignore_unknown_columns, "IGNORE_UNKNOWN_COLUMNS")?;
                flag(f, o.single_cell_format, "SINGLE_CELL_FORMAT")?;
                flag(f, o.no_escape, "NO_ESCAPE")?;
                if let Some(fs) = &o.field_separator {
                    write!(f, " FS = {}", Quoted(fs))?;
                }
                flag(f, o.no_log, "NO_LOG")?;
                match &l.source {
                    DataSource::Stdin => f.write_str(" \"-\"")?,
                    DataSource::File(name) => write!(f, " {}", Quoted(name))?,
                }
                match &l.target {
                    LoadTarget::Table(t) => write!(f, " INTO TABLE {}", Name(t)),
                    LoadTarget::File(file) => write!(f, " INTO FILE {}", Quoted(file)),
                }
            }
            Self::DumpTable(d) => {
                write!(f, "DUMP TABLE {}", Name(&d.table))?;
                if let Columns::List(_) = d.columns {
                    write!(f, " COLUMNS {}", d.columns)?;
                }
                where_clause(f, &d.predicates)?;
                if let Some(n) = d.max_versions {
                    write!(f, " MAX_VERSIONS {n}")?;
                }
                if let Some(n) = d.buckets {
                    write!(f, " BUCKETS {n}")?;
                }
                if let Some(file) = &d.into_file {
                    write!(f, " INTO FILE {}", Quoted(file))?;
                }
                flag(f, d.no_timestamps, "NO_TIMESTAMPS")?;
                if let Some(fs) = &d.field_separator {
                    write!(f, " FS = {}", Quoted(fs))?;
                }
                Ok(())
            }
            Self::Compact(c) => {
                f.write_str("COMPACT")?;
                if let Some(k) = c.kind {
                    write!(f, " TYPE = {}", k.keyword())?;
                }
                match &c.target {
                    CompactTarget::Table { table, row } => {
                        write!(f, " TABLE {}", Name(table))?;
                        if let Some(r) = row {
                            write!(f, " {}", Quoted(r))?;
                        }
                        Ok(())
                    }
                    CompactTarget::Ranges(types) => {
                        f.write_str(" RANGES ")?;
                        for (n, t) in types.iter().enumerate() {
                            if n > 0 {
                                f.write_char('|')?;
                            }
                            f.write_str(t.keyword())?;
                        }
                        Ok(())
                    }
                }
            }
            Self::WaitForMaintenance => f.write_str("WAIT FOR MAINTENANCE"),
            Self::Balance { algorithm } => {
                f.write_str("BALANCE")?;
                if let Some(a) = algorithm {
                    write!(f, " ALGORITHM = {}", Name(a))?;
                }
                Ok(())
            }
            Self::Status => f.write_str("STATUS"),
            Self::Set(vars) => {
                f.write_str("SET ")?;
                comma_list(f, vars, |f, v| {
                    write!(f, "{} = ", Name(&v.name))?;
                    if is_decimal(&v.value) {
                        f.write_str(&v.value)
                    } else {
                        Name(&v.value).fmt(f)
                    }
                })
            }
            Self::Shutdown => f.write_str("SHUTDOWN"),
            Self::Help(None) => f.write_str("HELP"),
            Self::Help(Some(t)) => write!(f, "HELP {t}"),
            Self::Quit => f.write_str("QUIT"),
            Self::Source(file) => write!(f, "SOURCE {}", Quoted(file)),
            Self::Clear => f.write_str("CLEAR"),
            Self::Print(None) => f.write_str("PRINT"),
            Self::Print(Some(t)) => write!(f, "PRINT {}", Quoted(t)),
            Self::Pause(d) => {
                write!(f, "PAUSE {}", d.as_secs())?;
                if d.subsec_nanos() != 0 {
                    let frac = format!("{:09}", d.subsec_nanos());
                    write!(f, ".{}", frac.trim_end_matches('0'))?;
                }
                Ok(())
            }
        }
    }
}
