//! Parse errors that say where (line, column, the statement with a caret) and what was expected.

use std::fmt;

/// Why a statement or script did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line in the parsed input (u32, as the offset below).
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// What would have been accepted, e.g. `'NAMESPACE', 'DATABASE' or 'TABLE'`; empty when
    /// `message` says what is wrong instead.
    pub expected: String,
    /// What was there, e.g. `'TABEL'` or `end of input`.
    pub found: String,
    /// The statement text in which the error is.
    pub statement: String,
    /// For errors that are not about an unexpected token, e.g. "Multiple specifications of
    /// TIME_ORDER option for column 'cf1'".
    pub message: Option<String>,
    /// Byte offset of the error within `statement`, for the caret display. The three
    /// positions are u32 to keep the error, which travels in every parse result, small; past
    /// 4 Gi they stop at `u32::MAX`.
    pub statement_offset: u32,
    /// Where Hypertable's parser raises another code than HQL parse error (e.g. incompatible
    /// options): that code and Hypertable's message. Boxed: it is rare, and the error travels
    /// in every parse result.
    pub hypertable: Option<Box<(Code, String)>>,
}

impl ParseError {
    /// Builds an error at byte `offset` of `input`, in the statement starting at `stmt_start`.
    pub(crate) fn at(
        input: &str,
        stmt_start: usize,
        offset: usize,
        expected: &[String],
        message: Option<String>,
    ) -> Self {
        let offset = offset.min(input.len());
        let before = &input[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |p| p + 1);
        let column = input[line_start..offset].chars().count() + 1;
        let stmt_end = input[offset..]
            .find(';')
            .map_or(input.len(), |p| offset + p + 1);
        let stmt_start = stmt_start.min(offset);
        let statement = input[stmt_start..stmt_end].trim_end().to_string();
        let small = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Self {
            line: small(line),
            column: small(column),
            expected: join_expected(expected),
            found: describe_found(&input[offset..]),
            statement_offset: small((offset - stmt_start).min(statement.len())),
            statement,
            message,
            hypertable: None,
        }
    }
}

/// `'A'`, `'A' or 'B'`, `'A', 'B' or 'C'`; long lists are cut.
fn join_expected(items: &[String]) -> String {
    const MAX: usize = 12;
    let shown = &items[..items.len().min(MAX)];
    let mut out = String::new();
    for (n, item) in shown.iter().enumerate() {
        if n > 0 {
            out.push_str(if n + 1 == shown.len() && items.len() <= MAX {
                " or "
            } else {
                ", "
            });
        }
        out.push_str(item);
    }
    if items.len() > MAX {
        out.push_str(", …");
    }
    out
}

/// The token at the start of `rest`, quoted, or `end of input`.
fn describe_found(rest: &str) -> String {
    let Some(c) = rest.chars().next() else {
        return "end of input".to_string();
    };
    let token: String = if c.is_ascii_alphanumeric() || c == '_' {
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    } else if c == '\'' || c == '"' {
        let body: String = rest[1..].chars().take_while(|&d| d != c).collect();
        format!("{c}{body}{c}")
    } else {
        c.to_string()
    };
    let token: String = if token.chars().count() > 40 {
        token.chars().take(40).chain("…".chars()).collect()
    } else {
        token
    };
    match token.as_str() {
        "\n" => "end of line".to_string(),
        _ => format!("'{token}'"),
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "parse error at line {}, column {}: ",
            self.line, self.column
        )?;
        match &self.message {
            Some(m) => write!(f, "{m}")?,
            None => write!(f, "expected {}, found {}", self.expected, self.found)?,
        }
        // The statement's line holding the error, cut to a window around the position (a
        // statement can be megabytes on one line), and a caret under the position.
        let mut at = (self.statement_offset as usize).min(self.statement.len());
        while !self.statement.is_char_boundary(at) {
            at -= 1;
        }
        let (before, after) = self.statement.split_at(at);
        let line_start = before.rfind('\n').map_or(0, |p| p + 1);
        let line_end = after.find('\n').map_or(self.statement.len(), |p| at + p);
        let (shown_before, cut_before) = last_chars(&before[line_start..], WINDOW_CHARS);
        let (shown_after, cut_after) = first_chars(
            self.statement[at..line_end].trim_end_matches('\r'),
            WINDOW_CHARS,
        );
        let caret: String = shown_before
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let (lead, lead_pad) = if cut_before { ("…", " ") } else { ("", "") };
        let trail = if cut_after { "…" } else { "" };
        write!(
            f,
            "\n  {lead}{shown_before}{shown_after}{trail}\n  {lead_pad}{caret}^"
        )
    }
}

/// Characters of the error's line shown on each side of the caret.
const WINDOW_CHARS: usize = 60;

/// The last `n` characters of `s`, and whether any were cut.
fn last_chars(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().rev().nth(n.saturating_sub(1)) {
        Some((i, _)) if i > 0 => (&s[i..], true),
        _ => (s, false),
    }
}

/// The first `n` characters of `s`, and whether any were cut.
fn first_chars(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().nth(n) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// Hypertable's code for the error: HQL parse error unless its parser raises another.
    pub fn code(&self) -> Code {
        self.hypertable
            .as_ref()
            .map_or(Code::HqlParseError, |h| h.0)
    }

    /// Hypertable's message for this error: a semantic one as it is, else `parse error at:
    /// <rest of the statement> (<statement>)`, the statement without its `;`.
    pub fn hypertable_message(&self) -> String {
        if let Some(m) = self
            .hypertable
            .as_ref()
            .map(|h| &h.1)
            .or(self.message.as_ref())
        {
            return m.clone();
        }
        let stmt = self.statement.trim_end().trim_end_matches(';');
        let mut at = (self.statement_offset as usize).min(stmt.len());
        while !stmt.is_char_boundary(at) {
            at -= 1;
        }
        // Hypertable's shell joins a statement's lines, each trimmed, with one space.
        let joined = |s: &str| -> String {
            s.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        format!("parse error at: {} ({})", joined(&stmt[at..]), joined(stmt))
    }
}

/// Hypertable's error codes, for the `Hypertable CRITICAL - <text> (<message>)` lines the shell
/// prints in `--test-mode` (HYPERTABLE-FORMATS.md §5 and §8). Each error ht reports carries
/// the code Hypertable gives the same failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    HqlBadCommand,
    HqlParseError,
    HqlBadLoadFileFormat,
    BadSchema,
    SchemaParseError,
    TooManyColumns,
    IncompatibleOptions,
    BadValue,
    SyntaxError,
    BadKey,
    BadScanSpec,
    TableNotFound,
    MasterTableExists,
    NameAlreadyInUse,
    NamespaceDoesNotExist,
    NamespaceExists,
    DirNotEmpty,
    UnsupportedOperation,
    InvalidOperation,
    InvalidColumnFamily,
    FileNotFound,
    /// An input or output failure (a file, the database's storage, the network).
    IoError,
}

impl Code {
    /// Hypertable's text for the code (its `Error::get_text`).
    pub fn text(self) -> &'static str {
        match self {
            Code::HqlBadCommand => "HQL bad command",
            Code::HqlParseError => "HYPERTABLE HQL parse error",
            Code::HqlBadLoadFileFormat => "HQL bad load file format",
            Code::BadSchema => "HYPERTABLE bad schema",
            Code::SchemaParseError => "HYPERTABLE schema parse error",
            Code::TooManyColumns => "HYPERTABLE too many columns",
            Code::IncompatibleOptions => "HYPERTABLE incompatible options",
            Code::BadValue => "HYPERTABLE bad value",
            Code::SyntaxError => "HYPERTABLE syntax error",
            Code::BadKey => "HYPERTABLE bad key",
            Code::BadScanSpec => "HYPERTABLE bad scan specification",
            Code::TableNotFound => "HYPERTABLE table does not exist",
            Code::MasterTableExists => "MASTER table exists",
            Code::NameAlreadyInUse => "HYPERTABLE name already in use",
            Code::NamespaceDoesNotExist => "HYPERTABLE namespace does not exist",
            Code::NamespaceExists => "HYPERTABLE namespace exists",
            Code::DirNotEmpty => "HYPERSPACE directory not empty",
            Code::UnsupportedOperation => "HYPERTABLE unsupported operation",
            Code::InvalidOperation => "HYPERTABLE invalid operation",
            Code::InvalidColumnFamily => "RANGE SERVER invalid column family",
            Code::FileNotFound => "HYPERTABLE file not found",
            Code::IoError => "HYPERTABLE local i/o error",
        }
    }
}
