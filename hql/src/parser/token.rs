//! Token parsers (white space and comments, keywords, punctuation, names, strings, numbers) and
//! the record of the furthest failure that parse errors are built from.
//!
//! Every token parser skips leading white space and comments itself, so grammar rules never
//! mention them. When a token parser fails it notes what it expected at that position; the
//! error reported to the user is the furthest position any alternative reached, with every
//! token expected there. This is kept in a thread-local rather than threaded through nom's
//! error type because combinators such as `many0` and `opt` discard the errors of their last
//! attempt, which are exactly the ones a user needs ("expected 'LIMIT' or ';'").

use std::cell::RefCell;

use nom::error::{ErrorKind, ParseError as NomParseError};

use crate::error::Code;

/// nom's error type here: where it failed and, for a semantic error, a message.
#[derive(Debug, Clone, PartialEq)]
pub struct PErr {
    /// Length of the input left at the failure.
    pub remaining: usize,
    /// Set for errors that are not "expected X" (e.g. an option given twice).
    pub message: Option<String>,
    /// Hypertable's code and message for the error, where its code is not HQL parse error or
    /// its message differs from ht's.
    pub hypertable: Option<(Code, String)>,
}

impl NomParseError<&str> for PErr {
    fn from_error_kind(input: &str, _: ErrorKind) -> Self {
        Self {
            remaining: input.len(),
            message: None,
            hypertable: None,
        }
    }

    fn append(_: &str, _: ErrorKind, other: Self) -> Self {
        other
    }
}

pub type PResult<'a, T> = nom::IResult<&'a str, T, PErr>;

#[derive(Default)]
struct Furthest {
    /// Remaining input length at the furthest failure (smaller is further).
    remaining: usize,
    expected: Vec<String>,
}

thread_local! {
    static FURTHEST: RefCell<Option<Furthest>> = const { RefCell::new(None) };
}

/// Forgets recorded failures; call before parsing a statement.
pub fn reset() {
    FURTHEST.with(|f| *f.borrow_mut() = None);
}

/// The furthest failure: remaining input length and what was expected there.
pub fn furthest() -> Option<(usize, Vec<String>)> {
    FURTHEST.with(|f| {
        f.borrow()
            .as_ref()
            .map(|f| (f.remaining, f.expected.clone()))
    })
}

/// Notes that `what` was expected where `input` starts.
pub fn record(input: &str, what: impl FnOnce() -> String) {
    FURTHEST.with(|f| {
        let mut f = f.borrow_mut();
        match f.as_mut() {
            Some(cur) if cur.remaining < input.len() => {}
            Some(cur) if cur.remaining == input.len() => {
                let w = what();
                if !cur.expected.contains(&w) {
                    cur.expected.push(w);
                }
            }
            _ => {
                *f = Some(Furthest {
                    remaining: input.len(),
                    expected: vec![what()],
                })
            }
        }
    });
}

/// A recoverable failure at `input`, noting what was expected.
pub fn fail<'a, T>(input: &'a str, what: impl FnOnce() -> String) -> PResult<'a, T> {
    record(input, what);
    Err(nom::Err::Error(PErr {
        remaining: input.len(),
        message: None,
        hypertable: None,
    }))
}

/// An unrecoverable error at `input` with a message (no backtracking past it).
pub fn failure<'a, T>(input: &'a str, message: impl Into<String>) -> PResult<'a, T> {
    Err(nom::Err::Failure(PErr {
        remaining: input.len(),
        message: Some(message.into()),
        hypertable: None,
    }))
}

/// [`failure`] with the code and message Hypertable gives the same error.
pub fn failure_coded<'a, T>(
    input: &'a str,
    message: impl Into<String>,
    code: Code,
    hypertable: impl Into<String>,
) -> PResult<'a, T> {
    Err(nom::Err::Failure(PErr {
        remaining: input.len(),
        message: Some(message.into()),
        hypertable: Some((code, hypertable.into())),
    }))
}

/// Skips white space and `#` comments (to the end of the line).
pub fn ws(mut i: &str) -> &str {
    loop {
        let t = i.trim_start();
        match t.strip_prefix('#') {
            Some(rest) => i = rest.find('\n').map_or("", |p| &rest[p..]),
            None => return t,
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A keyword, case-insensitive, not followed by a letter, digit or `_`.
pub fn kw<'a>(word: &'static str) -> impl Fn(&'a str) -> PResult<'a, ()> {
    move |input| {
        let i = ws(input);
        let n = word.len();
        if i.len() >= n
            && i.is_char_boundary(n)
            && i[..n].eq_ignore_ascii_case(word)
            && !i[n..].starts_with(is_word_char)
        {
            Ok((&i[n..], ()))
        } else {
            fail(i, || format!("'{word}'"))
        }
    }
}

/// Consecutive keywords, e.g. `kws(&["GET", "LISTING"])`.
pub fn kws<'a>(words: &'static [&'static str]) -> impl Fn(&'a str) -> PResult<'a, ()> {
    move |mut i| {
        for w in words {
            i = kw(w)(i)?.0;
        }
        Ok((i, ()))
    }
}

/// Punctuation, matched exactly.
pub fn p<'a>(sym: &'static str) -> impl Fn(&'a str) -> PResult<'a, ()> {
    move |input| {
        let i = ws(input);
        match i.strip_prefix(sym) {
            Some(rest) => Ok((rest, ())),
            None => fail(i, || format!("'{sym}'")),
        }
    }
}

/// One of several keywords, each mapped to a value.
pub fn kw_map<'a, T: Copy>(
    table: &'static [(&'static str, T)],
) -> impl Fn(&'a str) -> PResult<'a, T> {
    move |input| {
        for (w, v) in table {
            if let Ok((rest, ())) = kw(w)(input) {
                return Ok((rest, *v));
            }
        }
        Err(nom::Err::Error(PErr {
            remaining: ws(input).len(),
            message: None,
            hypertable: None,
        }))
    }
}

/// Whether `c` may start an unquoted name.
pub fn is_name_start(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '/'
}

/// Whether `c` may continue an unquoted name (`query-log`, `/ns/sub`, `data.tsv`).
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.' | '-')
}

/// An unquoted name.
pub fn plain_name<'a>(what: &'static str) -> impl Fn(&'a str) -> PResult<'a, String> {
    move |input| {
        let i = ws(input);
        if !i.starts_with(is_name_start) {
            return fail(i, || what.to_string());
        }
        let end = i.find(|c| !is_name_char(c)).unwrap_or(i.len());
        Ok((&i[end..], i[..end].to_string()))
    }
}

/// A name: unquoted, or a quoted string.
pub fn name<'a>(what: &'static str) -> impl Fn(&'a str) -> PResult<'a, String> {
    move |input| {
        let i = ws(input);
        if i.starts_with(['\'', '"']) {
            string(i)
        } else {
            plain_name(what)(i)
        }
    }
}

/// A quoted string, `'…'` or `"…"`, with backslash escapes `\\ \' \" \n \t \r \0`; any other
/// backslash is kept as written so that regular expressions pass through unchanged.
pub fn string(input: &str) -> PResult<'_, String> {
    let i = ws(input);
    let Some(q) = i.chars().next().filter(|c| *c == '\'' || *c == '"') else {
        return fail(i, || "string".to_string());
    };
    let mut out = String::new();
    let mut chars = i[1..].char_indices();
    while let Some((pos, c)) = chars.next() {
        if c == q {
            return Ok((&i[1 + pos + 1..], out));
        }
        if c == '\\' {
            match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '0')) => out.push('\0'),
                Some((_, e @ ('\\' | '\'' | '"'))) => out.push(e),
                Some((_, e)) => {
                    out.push('\\');
                    out.push(e);
                }
                None => break,
            }
        } else {
            out.push(c);
        }
    }
    failure(i, "unterminated string")
}

/// An unsigned decimal integer that fits `T`.
pub fn number<'a, T: TryFrom<u64>>(input: &'a str) -> PResult<'a, T> {
    let i = ws(input);
    let end = i.find(|c: char| !c.is_ascii_digit()).unwrap_or(i.len());
    if end == 0 || i[end..].starts_with(is_word_char) {
        return fail(i, || "number".to_string());
    }
    match i[..end]
        .parse::<u64>()
        .ok()
        .and_then(|n| T::try_from(n).ok())
    {
        Some(n) => Ok((&i[end..], n)),
        None => failure(i, format!("number {} is out of range", &i[..end])),
    }
}

/// A decimal number with an optional fraction, as written.
pub fn decimal(input: &str) -> PResult<'_, String> {
    let i = ws(input);
    let int_end = i.find(|c: char| !c.is_ascii_digit()).unwrap_or(i.len());
    if int_end == 0 {
        return fail(i, || "number".to_string());
    }
    let mut end = int_end;
    if let Some(rest) = i[end..].strip_prefix('.') {
        let frac = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if frac > 0 {
            end += 1 + frac;
        }
    }
    if i[end..].starts_with(is_word_char) {
        return fail(i, || "number".to_string());
    }
    Ok((&i[end..], i[..end].to_string()))
}

/// `true` or `false`.
pub fn boolean(input: &str) -> PResult<'_, bool> {
    kw_map(&[("true", true), ("false", false)])(input)
}

/// A flag keyword optionally followed by `true`/`false` (`IN_MEMORY`, `COUNTER`).
pub fn flag<'a>(word: &'static str) -> impl Fn(&'a str) -> PResult<'a, bool> {
    move |input| {
        let (i, ()) = kw(word)(input)?;
        match boolean(i) {
            Ok((i, b)) => Ok((i, b)),
            Err(_) => Ok((i, true)),
        }
    }
}

/// An optional `=`.
pub fn opt_eq(input: &str) -> &str {
    match p("=")(input) {
        Ok((i, ())) => i,
        Err(_) => input,
    }
}

/// Comma-separated list of one or more `item`.
pub fn list1<'a, T>(
    item: impl Fn(&'a str) -> PResult<'a, T>,
) -> impl Fn(&'a str) -> PResult<'a, Vec<T>> {
    move |input| {
        let (mut i, first) = item(input)?;
        let mut out = vec![first];
        while let Ok((rest, ())) = p(",")(i) {
            let (rest, v) = item(rest)?;
            out.push(v);
            i = rest;
        }
        Ok((i, out))
    }
}

/// Whether a word is a keyword somewhere in HQL; the printer quotes names that are.
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(word))
}

/// Every keyword of the grammar.
pub const KEYWORDS: &[&str] = &[
    "ACCESS",
    "ADD",
    "ALGORITHM",
    "ALL",
    "ALTER",
    "AND",
    "APPEND_ONLY",
    "ASC",
    "BALANCE",
    "BETWEEN",
    "BLOCKSIZE",
    "BLOOMFILTER",
    "BUCKETS",
    "CELL",
    "CELLS",
    "CELL_LIMIT",
    "CELL_LIMIT_PER_FAMILY",
    "CELL_OFFSET",
    "CHAR",
    "CLEAR",
    "COLUMN",
    "COLUMNS",
    "COMBINER",
    "COMPACT",
    "COMPRESSOR",
    "COUNTER",
    "CREATE",
    "DATA",
    "DATABASE",
    "DAY",
    "DAYS",
    "DELETE",
    "DESC",
    "DESCRIBE",
    "DISPLAY_REVISIONS",
    "DISPLAY_TIMESTAMPS",
    "DROP",
    "DUMP",
    "DUPLICATE_KEY_COLUMNS",
    "DUP_KEY_COLS",
    "DURABILITY",
    "EXISTS",
    "EXIT",
    "EXPLAIN",
    "FALSE",
    "FAMILY",
    "FILE",
    "FOR",
    "FROM",
    "FS",
    "GC",
    "GET",
    "GROUP",
    "GROUP_COMMIT_INTERVAL",
    "GUID",
    "HEADER_FILE",
    "HELP",
    "HOUR",
    "HOURS",
    "IDS",
    "IF",
    "IGNORE_UNKNOWN_CFS",
    "IGNORE_UNKNOWN_COLUMNS",
    "IN",
    "INDEX",
    "INDICES",
    "INFILE",
    "INSERT",
    "INTO",
    "IN_MEMORY",
    "ITERATOR",
    "KEY",
    "KEYS_ONLY",
    "LIKE",
    "LIMIT",
    "LISTING",
    "LOAD",
    "MAINTENANCE",
    "MAJOR",
    "MAX_VERSIONS",
    "MERGING",
    "METADATA",
    "MINOR",
    "MINUTE",
    "MINUTES",
    "MODIFY",
    "MONTH",
    "MONTHS",
    "NAMESPACE",
    "NOESCAPE",
    "NOT",
    "NO_CACHE",
    "NO_ESCAPE",
    "NO_LOG",
    "NO_TIMESTAMPS",
    "OFFSET",
    "OR",
    "PAUSE",
    "PRINT",
    "PRIORITY",
    "QUALIFIER",
    "QUIT",
    "RANGES",
    "REBUILD",
    "REGEXP",
    "RENAME",
    "REPLICATION",
    "RETURN_DELETES",
    "REVS",
    "ROOT",
    "ROW",
    "ROW_KEY_COLUMN",
    "ROW_UNIQUIFY_CHARS",
    "SCAN",
    "SCAN_AND_FILTER_ROWS",
    "SCOPES",
    "SECOND",
    "SECONDS",
    "SELECT",
    "SET",
    "SHOW",
    "SHUTDOWN",
    "SINGLE_CELL_FORMAT",
    "SOURCE",
    "STATUS",
    "SYSTEM",
    "TABLE",
    "TABLES",
    "TIMESTAMP",
    "TIMESTAMP_COLUMN",
    "TIME_ORDER",
    "TO",
    "TRUE",
    "TTL",
    "TYPE",
    "UINT",
    "USE",
    "USER",
    "VALUE",
    "VALUES",
    "VARCHAR",
    "VERSION",
    "WAIT",
    "WEEK",
    "WEEKS",
    "WHERE",
    "WITH",
];
