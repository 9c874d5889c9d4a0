//! Namespaces, table administration, maintenance commands and shell commands.

use std::time::Duration;

use super::token::{PResult, decimal, fail, kw, kw_map, kws, list1, name, opt_eq, p, string, ws};
use crate::ast::{Compact, CompactTarget, CompactionType, RangeType, SetVariable, Statement};

fn if_exists(i: &str) -> (&str, bool) {
    match kws(&["IF", "EXISTS"])(i) {
        Ok((i, ())) => (i, true),
        Err(_) => (i, false),
    }
}

fn if_not_exists(i: &str) -> (&str, bool) {
    match kws(&["IF", "NOT", "EXISTS"])(i) {
        Ok((i, ())) => (i, true),
        Err(_) => (i, false),
    }
}

/// After `CREATE NAMESPACE` (or `DATABASE`): `[IF NOT EXISTS] name [IF NOT EXISTS]`.
pub fn create_namespace(i: &str) -> PResult<'_, Statement> {
    let (i, before) = if_not_exists(i);
    let (i, name) = name("namespace name")(i)?;
    let (i, after) = if before { (i, false) } else { if_not_exists(i) };
    Ok((
        i,
        Statement::CreateNamespace {
            name,
            if_not_exists: before || after,
        },
    ))
}

/// After `DROP NAMESPACE`.
pub fn drop_namespace(i: &str) -> PResult<'_, Statement> {
    let (i, if_exists) = if_exists(i);
    let (i, name) = name("namespace name")(i)?;
    Ok((i, Statement::DropNamespace { name, if_exists }))
}

/// After `DROP TABLE`.
pub fn drop_table(i: &str) -> PResult<'_, Statement> {
    let (i, if_exists) = if_exists(i);
    let (i, table) = name("table name")(i)?;
    Ok((i, Statement::DropTable { table, if_exists }))
}

/// After `DESCRIBE`: `[TABLE] [WITH IDS] t`.
pub fn describe(i: &str) -> PResult<'_, Statement> {
    let i = kw("TABLE")(i).map_or(i, |(i, ())| i);
    let (i, with_ids) = match kws(&["WITH", "IDS"])(i) {
        Ok((i, ())) => (i, true),
        Err(_) => (i, false),
    };
    let (i, table) = name("table name")(i)?;
    Ok((i, Statement::DescribeTable { table, with_ids }))
}

/// After `RENAME TABLE`.
pub fn rename_table(i: &str) -> PResult<'_, Statement> {
    let (i, from) = name("table name")(i)?;
    let (i, ()) = kw("TO")(i)?;
    let (i, to) = name("table name")(i)?;
    Ok((i, Statement::RenameTable { from, to }))
}

/// After `COMPACT`.
pub fn compact(i: &str) -> PResult<'_, Statement> {
    let (i, kind) = match kw("TYPE")(i) {
        Ok((i, ())) => {
            let (i, k) = kw_map(&[
                ("MINOR", CompactionType::Minor),
                ("MAJOR", CompactionType::Major),
                ("MERGING", CompactionType::Merging),
                ("GC", CompactionType::Gc),
            ])(opt_eq(i))?;
            (i, Some(k))
        }
        Err(_) => (i, None),
    };
    if let Ok((i, ())) = kw("TABLE")(i) {
        let (i, table) = name("table name")(i)?;
        let (i, row) = match string(i) {
            Ok((i, r)) => (i, Some(r)),
            Err(_) => (i, None),
        };
        return Ok((
            i,
            Statement::Compact(Compact {
                kind,
                target: CompactTarget::Table { table, row },
            }),
        ));
    }
    let (i, ()) = kw("RANGES")(i)?;
    let range_type = kw_map(&[
        ("ALL", RangeType::All),
        ("ROOT", RangeType::Root),
        ("METADATA", RangeType::Metadata),
        ("SYSTEM", RangeType::System),
        ("USER", RangeType::User),
    ]);
    let (mut i, first) = range_type(i)?;
    let mut types = vec![first];
    while let Ok((rest, ())) = p("|")(i) {
        let (rest, t) = range_type(rest)?;
        types.push(t);
        i = rest;
    }
    Ok((
        i,
        Statement::Compact(Compact {
            kind,
            target: CompactTarget::Ranges(types),
        }),
    ))
}

/// After `BALANCE`.
pub fn balance(i: &str) -> PResult<'_, Statement> {
    match kw("ALGORITHM")(i) {
        Ok((i, ())) => {
            let (i, a) = name("algorithm name")(opt_eq(i))?;
            Ok((i, Statement::Balance { algorithm: Some(a) }))
        }
        Err(_) => Ok((i, Statement::Balance { algorithm: None })),
    }
}

/// A SET value: a name, string or number, as written.
fn set_value(i: &str) -> PResult<'_, String> {
    let at = ws(i);
    if at.starts_with(|c: char| c.is_ascii_digit()) {
        return decimal(at);
    }
    name("value")(at)
}

/// After `SET`.
pub fn set(i: &str) -> PResult<'_, Statement> {
    let (i, vars) = list1(|i| {
        let (i, name) = name("variable name")(i)?;
        let (i, value) = set_value(opt_eq(i))?;
        Ok((i, SetVariable { name, value }))
    })(i)?;
    Ok((i, Statement::Set(vars)))
}

/// The rest of the statement (up to `;` or the end), trimmed.
fn rest_of_statement(i: &str) -> (&str, &str) {
    let end = i.find(';').unwrap_or(i.len());
    (&i[end..], i[..end].trim())
}

/// After `help`, `\h` or `?`: the topic, lower-cased, words joined by one space.
pub fn help(i: &str) -> PResult<'_, Statement> {
    let (i, text) = rest_of_statement(i);
    let topic = text
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join(" ");
    Ok((i, Statement::Help((!topic.is_empty()).then_some(topic))))
}

/// After `source`: a quoted file name or a bare path.
pub fn source(i: &str) -> PResult<'_, Statement> {
    let at = ws(i);
    if at.starts_with(['\'', '"']) {
        let (i, f) = string(at)?;
        return Ok((i, Statement::Source(f)));
    }
    let end = at
        .find(|c: char| c.is_whitespace() || c == ';')
        .unwrap_or(at.len());
    if end == 0 {
        return fail(at, || "file name".to_string());
    }
    Ok((&at[end..], Statement::Source(at[..end].to_string())))
}

/// After `print`: an optional quoted text, or the rest of the statement.
pub fn print(i: &str) -> PResult<'_, Statement> {
    let at = ws(i);
    if at.starts_with(['\'', '"']) {
        let (i, s) = string(at)?;
        return Ok((i, Statement::Print(Some(s))));
    }
    let (i, text) = rest_of_statement(at);
    Ok((
        i,
        Statement::Print((!text.is_empty()).then(|| text.to_string())),
    ))
}

/// After `pause`: seconds, with an optional fraction.
pub fn pause(i: &str) -> PResult<'_, Statement> {
    let (i, text) = decimal(i)?;
    let (secs, frac) = text.split_once('.').unwrap_or((&text, ""));
    let Ok(secs) = secs.parse::<u64>() else {
        return super::token::failure(ws(i), "pause is too long");
    };
    let frac9: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
    let nanos = frac9.parse::<u32>().unwrap_or(0);
    Ok((i, Statement::Pause(Duration::new(secs, nanos))))
}
