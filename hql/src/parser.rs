//! HQL parsing: one statement or a whole script, into the AST, with located errors.

mod admin;
mod kind;
mod query;
mod table;
pub(crate) mod token;
mod write;

use std::ops::Range;

use crate::ast::Statement;
use crate::error::ParseError;
use token::{PErr, PResult, fail, kw, kws, record, ws};

pub use query::is_qualifier_char;
pub use table::parse_bloom_text;
pub use write::parse_key_spec;

/// The first word of a statement, upper-cased (`\h` and `?` count as words).
fn first_word(i: &str) -> (&str, String) {
    if let Some(rest) = i.strip_prefix("\\h") {
        return (rest, "HELP".to_string());
    }
    if let Some(rest) = i.strip_prefix('?') {
        return (rest, "HELP".to_string());
    }
    let end = i
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(i.len());
    (&i[end..], i[..end].to_ascii_uppercase())
}

/// One statement, without its terminating `;`.
fn statement(input: &str) -> PResult<'_, Statement> {
    let at = ws(input);
    let (i, word) = first_word(at);
    match word.as_str() {
        "SELECT" => query::select(i),
        "EXPLAIN" => {
            let (i, ()) = kw("SELECT")(i)?;
            let (i, s) = query::select(i)?;
            match s {
                Statement::Select(s) => Ok((i, Statement::Explain(s))),
                other => Ok((i, other)),
            }
        }
        "INSERT" => write::insert(i),
        "DELETE" => write::delete(i),
        "LOAD" => {
            let (i, ()) = kws(&["DATA", "INFILE"])(i)?;
            write::load_data(i)
        }
        "DUMP" => {
            let (i, ()) = kw("TABLE")(i)?;
            query::dump_table(i)
        }
        "CREATE" => {
            if let Ok((i, ())) = kw("NAMESPACE")(i) {
                return admin::create_namespace(i);
            }
            if let Ok((i, ())) = kw("DATABASE")(i) {
                return admin::create_namespace(i);
            }
            let (i, ()) = kw("TABLE")(i)?;
            table::create_table(i)
        }
        "DROP" => {
            if let Ok((i, ())) = kw("NAMESPACE")(i) {
                return admin::drop_namespace(i);
            }
            if let Ok((i, ())) = kw("DATABASE")(i) {
                return admin::drop_namespace(i);
            }
            let (i, ()) = kw("TABLE")(i)?;
            admin::drop_table(i)
        }
        "ALTER" => {
            let (i, ()) = kw("TABLE")(i)?;
            table::alter_table(i)
        }
        "RENAME" => {
            let (i, ()) = kw("TABLE")(i)?;
            admin::rename_table(i)
        }
        "REBUILD" => {
            let (i, kind) = if let Ok((i, ())) = kw("VALUE")(i) {
                (i, (true, false))
            } else if let Ok((i, ())) = kw("QUALIFIER")(i) {
                (i, (false, true))
            } else {
                (i, (true, true))
            };
            let (i, ()) = kw("INDICES")(i)?;
            let (i, table) = token::name("table name")(i)?;
            Ok((
                i,
                Statement::RebuildIndices {
                    table,
                    values: kind.0,
                    qualifiers: kind.1,
                },
            ))
        }
        "EXISTS" => {
            let (i, ()) = kw("TABLE")(i)?;
            let (i, t) = token::name("table name")(i)?;
            Ok((i, Statement::ExistsTable(t)))
        }
        "SHOW" => {
            if let Ok((i, ())) = kw("TABLES")(i) {
                return Ok((i, Statement::ShowTables));
            }
            let (i, ()) = kws(&["CREATE", "TABLE"])(i)?;
            let (i, t) = token::name("table name")(i)?;
            Ok((i, Statement::ShowCreateTable(t)))
        }
        "DESCRIBE" => admin::describe(i),
        "USE" => {
            let (i, n) = token::name("namespace name")(i)?;
            Ok((i, Statement::Use(n)))
        }
        "GET" => {
            let (i, ()) = kw("LISTING")(i)?;
            Ok((i, Statement::GetListing))
        }
        "COMPACT" => admin::compact(i),
        "WAIT" => {
            let (i, ()) = kws(&["FOR", "MAINTENANCE"])(i)?;
            Ok((i, Statement::WaitForMaintenance))
        }
        "BALANCE" => admin::balance(i),
        "STATUS" => Ok((i, Statement::Status)),
        "SET" => admin::set(i),
        "SHUTDOWN" => Ok((i, Statement::Shutdown)),
        "HELP" => admin::help(i),
        "QUIT" | "EXIT" => Ok((i, Statement::Quit)),
        "SOURCE" => admin::source(i),
        "CLEAR" => Ok((i, Statement::Clear)),
        "PRINT" => admin::print(i),
        "PAUSE" => admin::pause(i),
        _ => fail(at, || "statement".to_string()),
    }
}

/// Turns a failed parse of `input` (statement starting at `stmt_start`) into a ParseError.
fn to_error(input: &str, stmt_start: usize, err: nom::Err<PErr>) -> ParseError {
    if let nom::Err::Error(e) | nom::Err::Failure(e) = &err
        && let Some(msg) = &e.message
    {
        let mut error = ParseError::at(
            input,
            stmt_start,
            input.len() - e.remaining,
            &[],
            Some(msg.clone()),
        );
        error.hypertable = e.hypertable.clone().map(Box::new);
        return error;
    }
    match token::furthest() {
        Some((remaining, expected)) => {
            ParseError::at(input, stmt_start, input.len() - remaining, &expected, None)
        }
        None => {
            let remaining = match err {
                nom::Err::Error(e) | nom::Err::Failure(e) => e.remaining,
                nom::Err::Incomplete(_) => 0,
            };
            ParseError::at(
                input,
                stmt_start,
                input.len() - remaining,
                &["statement".to_string()],
                None,
            )
        }
    }
}

/// Parses one statement; a trailing `;` is optional, nothing may follow it.
pub fn parse_statement(input: &str) -> Result<Statement, ParseError> {
    token::reset();
    let start = input.len() - ws(input).len();
    let (rest, stmt) = statement(input).map_err(|e| to_error(input, start, e))?;
    let mut rest = ws(rest);
    if let Some(r) = rest.strip_prefix(';') {
        rest = ws(r);
        if !rest.is_empty() {
            record(rest, || "end of input".to_string());
            return Err(to_error(input, start, nom_error(rest)));
        }
    } else if !rest.is_empty() {
        record(rest, || "';'".to_string());
        return Err(to_error(input, start, nom_error(rest)));
    }
    Ok(stmt)
}

fn nom_error(rest: &str) -> nom::Err<PErr> {
    nom::Err::Error(PErr {
        remaining: rest.len(),
        message: None,
        hypertable: None,
    })
}

/// Parses a script: statements separated by `;`, with `#` comments and blank lines anywhere.
/// Each statement comes with the byte range of its text, from its first token through its
/// `;` (when it has one).
pub fn parse_script(input: &str) -> Result<Vec<(Statement, Range<usize>)>, ParseError> {
    let mut out = Vec::new();
    let mut rest = input;
    loop {
        rest = ws(rest);
        while let Some(r) = rest.strip_prefix(';') {
            rest = ws(r);
        }
        if rest.is_empty() {
            return Ok(out);
        }
        token::reset();
        let start = input.len() - rest.len();
        let (after, stmt) = statement(rest).map_err(|e| to_error(input, start, e))?;
        let after_ws = ws(after);
        let end;
        if let Some(r) = after_ws.strip_prefix(';') {
            end = input.len() - r.len();
            rest = r;
        } else if after_ws.is_empty() {
            end = input.len() - after.len();
            rest = after_ws;
        } else {
            record(after_ws, || "';'".to_string());
            return Err(to_error(input, start, nom_error(after_ws)));
        }
        out.push((stmt, start..end));
    }
}
