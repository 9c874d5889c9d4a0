//! INSERT, DELETE and LOAD DATA INFILE.

use super::query::{column_ref, timestamp};
use super::token::{
    PResult, fail, failure, kw, kws, list1, name, number, opt_eq, p, plain_name, string, ws,
};
use crate::ast::{
    CellValue, ColumnRef, DataSource, Delete, DeleteColumns, DeleteTime, Insert, InsertValue,
    Justify, KeyFormat, LoadData, LoadOptions, LoadTarget, RowKeyColumn, Statement, Timestamp,
};

/// One element of an INSERT tuple before its place decides what it means.
enum Atom {
    Str(String),
    Guid,
    Number(String),
    Column(ColumnRef),
}

fn atom(i: &str) -> PResult<'_, Atom> {
    let at = ws(i);
    if at.starts_with(['\'', '"']) {
        let (i, s) = string(at)?;
        return Ok((i, Atom::Str(s)));
    }
    if let Ok((i, ())) = kw("GUID")(at) {
        let (i, ()) = p("(")(i)?;
        let (i, ()) = p(")")(i)?;
        return Ok((i, Atom::Guid));
    }
    let digits = at
        .char_indices()
        .find(|&(n, c)| !(c.is_ascii_digit() || (n == 0 && c == '-')))
        .map_or(at.len(), |(n, _)| n);
    if digits > 0 && at[..digits].bytes().any(|b| b.is_ascii_digit()) {
        let rest = &at[digits..];
        if !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            return Ok((rest, Atom::Number(at[..digits].to_string())));
        }
    }
    match column_ref(at) {
        Ok((i, c)) => Ok((i, Atom::Column(c))),
        Err(nom::Err::Error(_)) => fail(at, || "string".to_string()),
        Err(e) => Err(e),
    }
}

fn insert_value(i: &str) -> PResult<'_, InsertValue> {
    let start = ws(i);
    let (i, ()) = p("(")(start)?;
    let (i, atoms) = list1(|i| {
        let at = ws(i);
        atom(at).map(|(r, a)| (r, (at, a)))
    })(i)?;
    let (i, ()) = p(")")(i)?;
    let n = atoms.len();
    if n != 3 && n != 4 {
        return failure(
            start,
            format!("an INSERT tuple has 3 or 4 values ([timestamp,] row, column, value), not {n}"),
        );
    }
    let mut it = atoms.into_iter();
    let ts = if n == 4 {
        match it.next() {
            Some((_, Atom::Str(s) | Atom::Number(s))) => Some(Timestamp::new(s)),
            Some((at, _)) => return failure(at, "expected a timestamp"),
            None => None,
        }
    } else {
        None
    };
    let cell = |a: Option<(&'_ str, Atom)>, what: &str| match a {
        Some((_, Atom::Str(s) | Atom::Number(s))) => Ok(CellValue::Literal(s)),
        Some((_, Atom::Guid)) => Ok(CellValue::Guid),
        Some((at, Atom::Column(_))) => {
            failure::<()>(at, format!("expected a quoted {what}")).map(|_| CellValue::Guid)
        }
        None => failure::<()>(start, "missing value").map(|_| CellValue::Guid),
    };
    let row = cell(it.next(), "row key")?;
    let column = match it.next() {
        Some((_, Atom::Str(s))) => ColumnRef::split(&s),
        Some((_, Atom::Column(c))) => c,
        Some((at, _)) => return failure(at, "expected a column (family or family:qualifier)"),
        None => return failure(start, "missing column"),
    };
    let value = cell(it.next(), "value")?;
    Ok((
        i,
        InsertValue {
            timestamp: ts,
            row,
            column,
            value,
        },
    ))
}

/// After `INSERT`.
pub fn insert(i: &str) -> PResult<'_, Statement> {
    let (i, ()) = kw("INTO")(i)?;
    let (i, table) = name("table name")(i)?;
    let (i, ()) = kw("VALUES")(i)?;
    let (i, values) = list1(insert_value)(i)?;
    Ok((i, Statement::Insert(Insert { table, values })))
}

/// After `DELETE`.
pub fn delete(i: &str) -> PResult<'_, Statement> {
    let (i, columns) = match p("*")(i) {
        Ok((i, ())) => (i, DeleteColumns::All),
        Err(_) => {
            let (i, cols) = list1(column_ref)(i)?;
            (i, DeleteColumns::List(cols))
        }
    };
    let (i, ()) = kw("FROM")(i)?;
    let (i, table) = name("table name")(i)?;
    let (i, ()) = kws(&["WHERE", "ROW"])(i)?;
    let (i, ()) = p("=")(i)?;
    let (i, row) = string(i)?;
    let (i, time) = if let Ok((i, ())) = kw("TIMESTAMP")(i) {
        let (i, ts) = timestamp(i)?;
        (i, Some(DeleteTime::Timestamp(ts)))
    } else if let Ok((i, ())) = kw("VERSION")(i) {
        let (i, ts) = timestamp(i)?;
        (i, Some(DeleteTime::Version(ts)))
    } else {
        (i, None)
    };
    Ok((
        i,
        Statement::Delete(Delete {
            columns,
            table,
            row,
            time,
        }),
    ))
}

/// Reads a ROW_KEY_COLUMN spec: `%0N` right-justify zero-padded, `%-N` right-justify
/// space-padded, `%N` left-justify space-padded, then the field name. Text that does not fit
/// the pattern is a plain field name.
pub fn parse_key_spec(text: &str) -> RowKeyColumn {
    let plain = || RowKeyColumn {
        name: text.to_string(),
        format: None,
    };
    let Some(rest) = text.strip_prefix('%') else {
        return plain();
    };
    let (justify, rest) = if let Some(r) = rest.strip_prefix('0') {
        (Justify::RightZero, r)
    } else if let Some(r) = rest.strip_prefix('-') {
        (Justify::RightSpace, r)
    } else {
        (Justify::LeftSpace, rest)
    };
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (Ok(width), field) = (rest[..end].parse::<u32>(), &rest[end..]) else {
        return plain();
    };
    if field.is_empty() || width == 0 {
        return plain();
    }
    RowKeyColumn {
        name: field.to_string(),
        format: Some(KeyFormat { width, justify }),
    }
}

fn key_spec(i: &str) -> PResult<'_, RowKeyColumn> {
    let at = ws(i);
    if let Some(rest) = at.strip_prefix('%') {
        // Unquoted `%09anon_id`.
        let flag = usize::from(rest.starts_with(['0', '-']));
        let digits = rest[flag..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - flag);
        let (i, field) = plain_name("row key field")(&rest[flag + digits..])?;
        let text = format!("%{}{}", &rest[..flag + digits], field);
        return Ok((i, parse_key_spec(&text)));
    }
    let (i, text) = name("row key field")(at)?;
    Ok((i, parse_key_spec(&text)))
}

fn load_options(mut i: &str) -> PResult<'_, LoadOptions> {
    let mut o = LoadOptions::default();
    loop {
        let at = ws(i);
        let dup =
            |what: &str| failure::<()>(at, format!("Multiple specifications of {what} option"));
        if let Ok((rest, ())) = kw("ROW_KEY_COLUMN")(at) {
            if !o.row_key_columns.is_empty() {
                dup("ROW_KEY_COLUMN")?;
            }
            let (mut rest, first) = key_spec(opt_eq(rest))?;
            o.row_key_columns.push(first);
            while let Ok((r, ())) = p("+")(rest) {
                let (r, spec) = key_spec(r)?;
                o.row_key_columns.push(spec);
                rest = r;
            }
            i = rest;
        } else if let Ok((rest, ())) = kw("TIMESTAMP_COLUMN")(at) {
            let (rest, n) = name("column name")(opt_eq(rest))?;
            if o.timestamp_column.replace(n).is_some() {
                dup("TIMESTAMP_COLUMN")?;
            }
            i = rest;
        } else if let Ok((rest, ())) = kw("HEADER_FILE")(at) {
            let (rest, n) = name("file name")(opt_eq(rest))?;
            if o.header_file.replace(n).is_some() {
                dup("HEADER_FILE")?;
            }
            i = rest;
        } else if let Ok((rest, ())) = kw("ROW_UNIQUIFY_CHARS")(at) {
            let num_at = ws(opt_eq(rest));
            let (rest, n) = number::<u32>(num_at)?;
            if n > 21 {
                return failure(num_at, "ROW_UNIQUIFY_CHARS must be at most 21");
            }
            if o.row_uniquify_chars.replace(n).is_some() {
                dup("ROW_UNIQUIFY_CHARS")?;
            }
            i = rest;
        } else if let Ok((rest, ())) = kw("FS")(at) {
            let (rest, fs) = string(opt_eq(rest))?;
            if o.field_separator.replace(fs).is_some() {
                dup("FS")?;
            }
            i = rest;
        } else {
            let flags: [(&[&str], &mut bool); 5] = [
                (
                    &["DUPLICATE_KEY_COLUMNS", "DUP_KEY_COLS"],
                    &mut o.duplicate_key_columns,
                ),
                (
                    &["IGNORE_UNKNOWN_COLUMNS", "IGNORE_UNKNOWN_CFS"],
                    &mut o.ignore_unknown_columns,
                ),
                (&["SINGLE_CELL_FORMAT"], &mut o.single_cell_format),
                (&["NO_ESCAPE", "NOESCAPE"], &mut o.no_escape),
                (&["NO_LOG"], &mut o.no_log),
            ];
            let found = super::query::set_flag(at, flags, &mut i);
            if !found {
                return Ok((i, o));
            }
        }
    }
}

/// After `LOAD DATA INFILE`.
pub fn load_data(i: &str) -> PResult<'_, Statement> {
    let (i, options) = load_options(i)?;
    let (i, file) = name("file name")(i)?;
    let source = if file == "-" {
        DataSource::Stdin
    } else {
        DataSource::File(file)
    };
    let (i, ()) = kw("INTO")(i)?;
    let (i, target) = if let Ok((i, ())) = kw("TABLE")(i) {
        let (i, t) = name("table name")(i)?;
        (i, LoadTarget::Table(t))
    } else {
        let (i, ()) = kw("FILE")(i)?;
        let (i, f) = name("file name")(i)?;
        (i, LoadTarget::File(f))
    };
    Ok((
        i,
        Statement::LoadData(LoadData {
            options,
            source,
            target,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_key_spec;
    use crate::ast::{Justify, KeyFormat};

    #[test]
    fn key_specs() {
        let k = parse_key_spec("%09anon_id");
        assert_eq!(k.name, "anon_id");
        assert_eq!(
            k.format,
            Some(KeyFormat {
                width: 9,
                justify: Justify::RightZero
            })
        );
        assert_eq!(
            parse_key_spec("%-5q").format.map(|f| f.justify),
            Some(Justify::RightSpace)
        );
        assert_eq!(
            parse_key_spec("%12q").format.map(|f| f.justify),
            Some(Justify::LeftSpace)
        );
        assert_eq!(parse_key_spec("query").format, None);
        assert_eq!(parse_key_spec("%x").name, "%x");
    }
}
