//! SELECT and DUMP TABLE: column selectors, WHERE predicates and scan options.

use nom::branch::alt;

use super::kind::{scan_iterators, with_iterator};
use super::token::{
    PErr, PResult, fail, failure, is_keyword, kw, list1, name, number, opt_eq, p, plain_name,
    string, ws,
};
use crate::ast::{
    Aggregate, AggregateFunc, CellInterval, CellKey, ColumnPredicate, ColumnRef, ColumnSelector,
    Columns, DumpTable, KeyValue, PartPredicate, PartTest, Predicate, RelOp, RowInterval, RowSet,
    Select, SelectOptions, Statement, Timestamp, TimestampPredicate,
};

/// Whether `c` may appear in an unquoted qualifier (`tag:good`, `cf:a.b-c`).
pub fn is_qualifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-+*@$%&?/|".contains(c)
}

/// A qualifier: quoted, or unquoted characters (possibly none).
fn qualifier(i: &str) -> PResult<'_, String> {
    if i.starts_with(['\'', '"']) {
        return string(i);
    }
    let end = i.find(|c| !is_qualifier_char(c)).unwrap_or(i.len());
    Ok((&i[end..], i[..end].to_string()))
}

/// `/regex/` with `\/` for a slash; other backslashes are kept.
fn regex_literal(input: &str) -> PResult<'_, String> {
    let i = ws(input);
    let Some(body) = i.strip_prefix('/') else {
        return fail(i, || "'/regex/'".to_string());
    };
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((pos, c)) = chars.next() {
        match c {
            '/' => return Ok((&body[pos + 1..], out)),
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, e)) => {
                    out.push('\\');
                    out.push(e);
                }
                None => break,
            },
            c => out.push(c),
        }
    }
    failure(i, "unterminated regular expression")
}

/// `family` or `family:qualifier`; a quoted `"family:qualifier"` is split at its colon.
pub fn column_ref(i: &str) -> PResult<'_, ColumnRef> {
    let (i, family) = name("column family name")(i)?;
    if let Some(rest) = i.strip_prefix(':') {
        let (i, q) = qualifier(rest)?;
        return Ok((
            i,
            ColumnRef {
                family,
                qualifier: Some(q),
            },
        ));
    }
    Ok((i, ColumnRef::split(&family)))
}

fn column_selector(i: &str) -> PResult<'_, ColumnSelector> {
    let (i, family) = name("column family name")(i)?;
    let Some(rest) = i.strip_prefix(':') else {
        return Ok((
            i,
            match ColumnRef::split(&family) {
                ColumnRef {
                    family,
                    qualifier: Some(qualifier),
                } => ColumnSelector::Qualifier { family, qualifier },
                ColumnRef { family, .. } => ColumnSelector::Family(family),
            },
        ));
    };
    if let Some(rest) = rest.strip_prefix('^') {
        let (i, prefix) = qualifier(rest)?;
        return Ok((i, ColumnSelector::QualifierPrefix { family, prefix }));
    }
    if rest.starts_with('/') {
        let (i, regex) = regex_literal(rest)?;
        return Ok((i, ColumnSelector::QualifierRegex { family, regex }));
    }
    // `family:*` is every qualifier, as Hypertable reads it (`family:"*"` is the qualifier `*`).
    if let Some(after) = rest.strip_prefix('*')
        && !after.starts_with(is_qualifier_char)
    {
        return Ok((after, ColumnSelector::Family(family)));
    }
    let (i, qualifier) = qualifier(rest)?;
    Ok((i, ColumnSelector::Qualifier { family, qualifier }))
}

/// `*` or a list of column selectors.
fn columns(i: &str) -> PResult<'_, Columns> {
    if let Ok((i, ())) = p("*")(i) {
        return Ok((i, Columns::All));
    }
    let (i, list) = list1(column_selector)(i)?;
    Ok((i, Columns::List(list)))
}

/// `COUNT(*)` or `FUNC(family[:qualifier])`; a name not followed by `(` is not one.
fn aggregate(i: &str) -> PResult<'_, Aggregate> {
    for (word, func) in AggregateFunc::ALL {
        let Ok((rest, ())) = kw(word)(i) else {
            continue;
        };
        let Ok((rest, ())) = p("(")(rest) else {
            break;
        };
        if let Ok((rest, ())) = p("*")(rest) {
            if func != AggregateFunc::Count {
                return failure(
                    ws(i),
                    format!("{word}(*) is not an aggregate; only COUNT(*) is"),
                );
            }
            let (rest, ()) = p(")")(rest)?;
            return Ok((rest, Aggregate::CountRows));
        }
        let (rest, column) = column_ref(rest)?;
        let (rest, ()) = p(")")(rest)?;
        return Ok((rest, Aggregate::Column { func, column }));
    }
    fail(ws(i), || "aggregate".to_string())
}

/// SELECT's list: `*`, column selectors, or aggregates, which cannot be mixed with columns.
fn select_columns(i: &str) -> PResult<'_, Columns> {
    const MIXED: &str = "aggregates (COUNT, SUM, AVG, MIN, MAX) cannot be mixed with columns \
                         in a select list";
    let first = match aggregate(i) {
        Ok(first) => Some(first),
        Err(nom::Err::Error(_)) => None,
        Err(e) => return Err(e),
    };
    if let Some((mut i, first)) = first {
        let mut list = vec![first];
        while let Ok((rest, ())) = p(",")(i) {
            match aggregate(rest) {
                Ok((rest, a)) => {
                    list.push(a);
                    i = rest;
                }
                Err(nom::Err::Error(_)) if column_selector(rest).is_ok() => {
                    return failure(ws(rest), MIXED);
                }
                Err(e) => return Err(e),
            }
        }
        return Ok((i, Columns::Aggregates(list)));
    }
    if let Ok((i, ())) = p("*")(i) {
        return Ok((i, Columns::All));
    }
    let (mut i, first) = column_selector(i)?;
    let mut list = vec![first];
    while let Ok((rest, ())) = p(",")(i) {
        if aggregate(rest).is_ok() {
            return failure(ws(rest), MIXED);
        }
        let (rest, c) = column_selector(rest)?;
        list.push(c);
        i = rest;
    }
    Ok((i, Columns::List(list)))
}

/// A relational operator, longest match first.
pub fn relop(i: &str) -> PResult<'_, RelOp> {
    let at = ws(i);
    for (sym, op) in [
        ("=^", RelOp::StartsWith),
        ("==", RelOp::Eq),
        ("<=", RelOp::Le),
        (">=", RelOp::Ge),
        ("=", RelOp::Eq),
        ("<", RelOp::Lt),
        (">", RelOp::Gt),
    ] {
        if let Some(rest) = at.strip_prefix(sym) {
            return Ok((rest, op));
        }
    }
    fail(at, || "comparison operator".to_string())
}

/// A timestamp: a quoted date-time or an integer of nanoseconds.
pub fn timestamp(i: &str) -> PResult<'_, Timestamp> {
    let at = ws(i);
    if at.starts_with(['\'', '"']) {
        let (i, s) = string(at)?;
        return Ok((i, Timestamp::new(s)));
    }
    let end = at
        .char_indices()
        .find(|&(n, c)| !(c.is_ascii_digit() || (n == 0 && c == '-')))
        .map_or(at.len(), |(n, _)| n);
    if end == 0 || !at[..end].bytes().any(|b| b.is_ascii_digit()) {
        return fail(at, || "timestamp".to_string());
    }
    Ok((&at[end..], Timestamp::new(&at[..end])))
}

/// `[before relop]`, `op`, value.
type Interval<T> = (Option<(T, RelOp)>, RelOp, T);

/// `[before relop] <keyword> op value` where `value` is parsed by `operand`.
fn interval<'a, T>(
    keyword: &'static str,
    operand: impl Fn(&'a str) -> PResult<'a, T>,
) -> impl Fn(&'a str) -> PResult<'a, Interval<T>> {
    move |i| {
        let (i, before) = match operand(i) {
            Ok((i, v)) => {
                let at = ws(i);
                let (i, op) = relop(i)?;
                if op == RelOp::StartsWith && kw(keyword)(i).is_ok() {
                    return failure(at, "Bad use of operator (=^)");
                }
                (i, Some((v, op)))
            }
            Err(nom::Err::Error(_)) => (i, None),
            Err(e) => return Err(e),
        };
        let (i, ()) = kw(keyword)(i)?;
        let (i, op) = relop(i)?;
        let (i, v) = operand(i)?;
        Ok((i, (before, op, v)))
    }
}

fn row_interval(i: &str) -> PResult<'_, RowInterval> {
    let (i, (before, op, key)) = interval("ROW", string)(i)?;
    Ok((i, RowInterval { before, op, key }))
}

/// `('k1', 'k2', ...)` or `FILE "name"`, after `ROW IN`.
fn row_set(i: &str) -> PResult<'_, RowSet> {
    if let Ok((i, ())) = kw("FILE")(i) {
        let (i, name) = string(i)?;
        return Ok((i, RowSet::File(name)));
    }
    let (mut i, ()) = p("(")(i)?;
    let mut keys = Vec::new();
    loop {
        let (rest, k) = string(i)?;
        keys.push(k);
        match p(",")(rest) {
            Ok((rest, ())) => i = rest,
            Err(_) => {
                let (rest, ()) = p(")")(rest)?;
                return Ok((rest, RowSet::Keys(keys)));
            }
        }
    }
}

fn cell_key(i: &str) -> PResult<'_, CellKey> {
    let (i, row) = string(i)?;
    let (i, ()) = p(",")(i)?;
    let (i, column) = string(i)?;
    Ok((i, CellKey { row, column }))
}

fn cell_interval(i: &str) -> PResult<'_, CellInterval> {
    let (i, (before, op, cell)) = interval("CELL", cell_key)(i)?;
    Ok((i, CellInterval { before, op, cell }))
}

fn column_predicate(i: &str) -> PResult<'_, ColumnPredicate> {
    if let Ok((i, ())) = kw("REGEXP")(i) {
        let (i, ()) = p("(")(i)?;
        let (i, column) = column_ref(i)?;
        let (i, ()) = p(",")(i)?;
        let (i, regex) = string(i)?;
        let (i, ()) = p(")")(i)?;
        return Ok((i, ColumnPredicate::ValueRegexp { column, regex }));
    }
    if let Ok((i, ())) = kw("EXISTS")(i) {
        let (i, ()) = p("(")(i)?;
        let (i, column) = column_ref(i)?;
        let (i, ()) = p(")")(i)?;
        return Ok((i, ColumnPredicate::Exists(column)));
    }
    let (i, column) = column_ref(i)?;
    if let Ok((i, ())) = p("=~")(i) {
        let (i, regex) = alt((regex_literal, string))(i)?;
        return Ok((i, ColumnPredicate::ValueRegexp { column, regex }));
    }
    if let Ok((i, ())) = p("=^")(i) {
        let (i, prefix) = string(i)?;
        return Ok((i, ColumnPredicate::ValuePrefix { column, prefix }));
    }
    let (i, ()) = p("=")(i)?;
    let (i, value) = string(i)?;
    Ok((i, ColumnPredicate::ValueEquals { column, value }))
}

/// `item (OR item)*`.
fn or_list<'a, T>(
    item: impl Fn(&'a str) -> PResult<'a, T>,
) -> impl Fn(&'a str) -> PResult<'a, Vec<T>> {
    move |i| {
        let (mut i, first) = item(i)?;
        let mut out = vec![first];
        while let Ok((rest, ())) = kw("OR")(i) {
            let (rest, v) = item(rest)?;
            out.push(v);
            i = rest;
        }
        Ok((i, out))
    }
}

fn parenthesised<'a, T>(
    item: impl Fn(&'a str) -> PResult<'a, T>,
) -> impl Fn(&'a str) -> PResult<'a, Vec<T>> {
    let list = or_list(item);
    move |i| {
        let (i, ()) = p("(")(i)?;
        let (i, v) = list(i)?;
        let (i, ()) = p(")")(i)?;
        Ok((i, v))
    }
}

fn predicate(i: &str) -> PResult<'_, Predicate> {
    alt((
        |i| parenthesised(row_interval)(i).map(|(i, v)| (i, Predicate::Row(v))),
        |i| parenthesised(cell_interval)(i).map(|(i, v)| (i, Predicate::Cell(v))),
        |i| parenthesised(column_predicate)(i).map(|(i, v)| (i, Predicate::Columns(v))),
        |i| {
            let (i, ()) = kw("ROW")(i)?;
            let (i, ()) = kw("REGEXP")(i)?;
            let (i, re) = string(i)?;
            Ok((i, Predicate::RowRegexp(re)))
        },
        |i| {
            let (i, ()) = kw("ROW")(i)?;
            let (i, ()) = kw("IN")(i)?;
            row_set(i).map(|(i, set)| (i, Predicate::RowIn(set)))
        },
        |i| {
            let (i, ()) = kw("VALUE")(i)?;
            let (i, ()) = kw("REGEXP")(i)?;
            let (i, re) = string(i)?;
            Ok((i, Predicate::ValueRegexp(re)))
        },
        |i| row_interval(i).map(|(i, v)| (i, Predicate::Row(vec![v]))),
        |i| cell_interval(i).map(|(i, v)| (i, Predicate::Cell(vec![v]))),
        |i| {
            let (i, ()) = p("(")(i)?;
            let (i, (before, op, ts)) = interval("TIMESTAMP", timestamp)(i)?;
            let (i, ()) = p(")")(i)?;
            Ok((
                i,
                Predicate::Timestamp(TimestampPredicate { before, op, ts }),
            ))
        },
        |i| {
            let (i, (before, op, ts)) = interval("TIMESTAMP", timestamp)(i)?;
            Ok((
                i,
                Predicate::Timestamp(TimestampPredicate { before, op, ts }),
            ))
        },
        |i| parenthesised(part_predicate)(i).map(|(i, v)| (i, Predicate::Part(v))),
        |i| part_predicate(i).map(|(i, v)| (i, Predicate::Part(vec![v]))),
        |i| or_list(column_predicate)(i).map(|(i, v)| (i, Predicate::Columns(v))),
    ))(i)
}

fn key_value(i: &str) -> PResult<'_, KeyValue> {
    if let Ok((i, n)) = number::<u64>(i) {
        return Ok((i, KeyValue::Number(n)));
    }
    let (i, s) = string(i)?;
    Ok((i, KeyValue::Text(s)))
}

/// A predicate on a key part: `part IN (...)`, `part IN FILE "f"`, `part BETWEEN a AND b`,
/// `part op value` (but `part = 'text'`, which reads as a column value predicate).
fn part_predicate(i: &str) -> PResult<'_, PartPredicate> {
    let (i, part) = plain_name("key part name")(i)?;
    if is_keyword(&part) {
        return fail(i, || "key part name".to_string());
    }
    if let Ok((i, ())) = kw("IN")(i) {
        if let Ok((i, ())) = kw("FILE")(i) {
            let (i, name) = string(i)?;
            return Ok((
                i,
                PartPredicate {
                    part,
                    test: PartTest::InFile(name),
                },
            ));
        }
        let (i, ()) = p("(")(i)?;
        let (i, values) = list1(key_value)(i)?;
        let (i, ()) = p(")")(i)?;
        return Ok((
            i,
            PartPredicate {
                part,
                test: PartTest::In(values),
            },
        ));
    }
    if let Ok((i, ())) = kw("BETWEEN")(i) {
        let (i, low) = key_value(i)?;
        let (i, ()) = kw("AND")(i)?;
        let (i, high) = key_value(i)?;
        return Ok((
            i,
            PartPredicate {
                part,
                test: PartTest::Between(low, high),
            },
        ));
    }
    let (i, op) = relop(i)?;
    if op == RelOp::StartsWith {
        return fail(i, || "key part comparison".to_string());
    }
    let (i, v) = key_value(i)?;
    if op == RelOp::Eq && matches!(v, KeyValue::Text(_)) {
        return fail(i, || "key part comparison".to_string());
    }
    Ok((
        i,
        PartPredicate {
            part,
            test: PartTest::Compare(op, v),
        },
    ))
}

/// Whether a `[k relop] ROW relop k` predicate sets the interval's start and its end.
fn row_sides(r: &RowInterval) -> (bool, bool) {
    bound_sides(r.op, r.before.as_ref().map(|b| b.1))
}

/// Whether `[k before] X op k` sets the start and the end of X's interval.
fn bound_sides(op: RelOp, before: Option<RelOp>) -> (bool, bool) {
    let side = |op: RelOp| match op {
        RelOp::Eq | RelOp::StartsWith => (true, true),
        RelOp::Gt | RelOp::Ge => (true, false),
        RelOp::Lt | RelOp::Le => (false, true),
    };
    let (mut start, mut end) = side(op);
    if let Some(op) = before {
        // `k < X` bounds the start, `k > X` the end.
        let (e, s) = side(op);
        start |= s;
        end |= e;
    }
    (start, end)
}

/// `[WHERE predicate (AND predicate)*]`.
pub fn where_clause(i: &str) -> PResult<'_, Vec<Predicate>> {
    let Ok((mut i, ())) = kw("WHERE")(i) else {
        return Ok((i, Vec::new()));
    };
    let mut out: Vec<Predicate> = Vec::new();
    loop {
        let at = ws(i);
        let (rest, pred) = predicate(at)?;
        if let Predicate::Timestamp(t) = &pred {
            let sides = bound_sides(t.op, t.before.as_ref().map(|b| b.1));
            if out.iter().any(|p| match p {
                Predicate::Timestamp(o) => {
                    let o = bound_sides(o.op, o.before.as_ref().map(|b| b.1));
                    (o.0 && sides.0) || (o.1 && sides.1)
                }
                _ => false,
            }) {
                return failure(at, "Bad timestamp expression");
            }
        }
        // Hypertable's rules: ANDed single ROW predicates may bound each side once, and each
        // REGEXP predicate appears once.
        if let Predicate::Row(r) = &pred
            && let [r] = r.as_slice()
        {
            let sides = row_sides(r);
            let taken = out.iter().any(|p| match p {
                Predicate::Row(o) => match o.as_slice() {
                    [o] => {
                        let o = row_sides(o);
                        (o.0 && sides.0) || (o.1 && sides.1)
                    }
                    _ => false,
                },
                _ => false,
            });
            if taken {
                return failure(at, "Bad row expressions.");
            }
        }
        for p in &out {
            match (p, &pred) {
                (Predicate::RowRegexp(old), Predicate::RowRegexp(_)) => {
                    return failure(at, format!("row_regexp already set to '{old}'"));
                }
                (Predicate::ValueRegexp(old), Predicate::ValueRegexp(_)) => {
                    return failure(at, format!("value_regexp already set to '{old}'"));
                }
                _ => {}
            }
        }
        out.push(pred);
        i = rest;
        match kw("AND")(i) {
            Ok((rest, ())) => i = rest,
            Err(_) => return Ok((i, out)),
        }
    }
}

/// Sets an option that may be given once.
fn once<T>(slot: &mut Option<T>, v: T, at: &str, kwd: &str) -> Result<(), nom::Err<PErr>> {
    if slot.replace(v).is_some() {
        return failure::<()>(at, format!("SELECT {kwd} predicate multiply defined.")).map(|_| ());
    }
    Ok(())
}

/// Sets the first flag whose keyword (or alias) is at `at`, advancing `i` past it.
pub fn set_flag<'a, 'b>(
    at: &'a str,
    flags: impl IntoIterator<Item = (&'static [&'static str], &'b mut bool)>,
    i: &mut &'a str,
) -> bool {
    for (words, slot) in flags {
        for w in words {
            if let Ok((rest, ())) = kw(w)(at) {
                *slot = true;
                *i = rest;
                return true;
            }
        }
    }
    false
}

/// `INTO FILE name`.
fn into_file(i: &str) -> PResult<'_, String> {
    let (i, ()) = kw("INTO")(i)?;
    let (i, ()) = kw("FILE")(i)?;
    name("file name")(i)
}

/// `FS [=] 'c'`.
fn field_separator(i: &str) -> PResult<'_, String> {
    let (i, ()) = kw("FS")(i)?;
    string(opt_eq(i))
}

fn select_options(mut i: &str) -> PResult<'_, SelectOptions> {
    let mut o = SelectOptions::default();
    loop {
        let at = ws(i);
        let numeric: [(&str, &mut Option<u64>); 5] = [
            ("LIMIT", &mut o.limit),
            ("OFFSET", &mut o.offset),
            ("CELL_LIMIT", &mut o.cell_limit),
            ("CELL_OFFSET", &mut o.cell_offset),
            ("CELL_LIMIT_PER_FAMILY", &mut o.cell_limit_per_family),
        ];
        let mut matched = None;
        for (word, slot) in numeric {
            if let Ok((rest, ())) = kw(word)(at) {
                let (rest, n) = number(opt_eq(rest))?;
                once(slot, n, at, word)?;
                i = rest;
                matched = Some(word);
                break;
            }
        }
        if let Some(word) = matched {
            if o.offset.is_some() && o.cell_offset.is_some() {
                return failure(
                    at,
                    if word == "OFFSET" {
                        "SELECT OFFSET predicate not allowed in combination with CELL_OFFSET."
                    } else {
                        "SELECT CELL_OFFSET predicate not allowed in combination with OFFSET."
                    },
                );
            }
            continue;
        }
        if let Ok((rest, ())) = alt((kw("MAX_VERSIONS"), kw("REVS")))(at) {
            let (rest, n) = number(opt_eq(rest))?;
            once(&mut o.max_versions, n, at, "MAX_VERSIONS")?;
            i = rest;
            continue;
        }
        if let Ok((rest, f)) = into_file(at) {
            once(&mut o.into_file, f, at, "INTO FILE")?;
            i = rest;
            continue;
        }
        if let Ok((rest, fs)) = field_separator(at) {
            once(&mut o.field_separator, fs, at, "FS")?;
            i = rest;
            continue;
        }
        let flags: [(&[&str], &mut bool); 7] = [
            (&["DISPLAY_TIMESTAMPS"], &mut o.display_timestamps),
            (&["DISPLAY_REVISIONS"], &mut o.display_revisions),
            (&["KEYS_ONLY"], &mut o.keys_only),
            (&["NO_ESCAPE", "NOESCAPE"], &mut o.no_escape),
            (&["RETURN_DELETES"], &mut o.return_deletes),
            (&["NO_CACHE"], &mut o.no_cache),
            (&["SCAN_AND_FILTER_ROWS"], &mut o.scan_and_filter_rows),
        ];
        if set_flag(at, flags, &mut i) {
            continue;
        }
        if let Ok((rest, ())) = with_iterator(at) {
            let (rest, its) = scan_iterators(rest)?;
            if !o.iterators.is_empty() {
                return failure(at, "Multiple specifications of WITH ITERATOR option");
            }
            o.iterators = its;
            i = rest;
            continue;
        }
        return Ok((i, o));
    }
}

/// After `SELECT`.
pub fn select(i: &str) -> PResult<'_, Statement> {
    // `CELLS` is the modifier unless it is the only column (`SELECT cells FROM t`).
    let (i, cells) = match kw("CELLS")(i) {
        Ok((rest, ())) if kw("FROM")(rest).is_err() => (rest, true),
        _ => (i, false),
    };
    let (i, columns) = select_columns(i)?;
    let (i, ()) = kw("FROM")(i)?;
    let (i, table) = name("table name")(i)?;
    let (i, predicates) = where_clause(i)?;
    let (i, options) = select_options(i)?;
    Ok((
        i,
        Statement::Select(Select {
            cells,
            columns,
            table,
            predicates,
            options,
        }),
    ))
}

/// After `DUMP TABLE`.
pub fn dump_table(i: &str) -> PResult<'_, Statement> {
    let (i, table) = name("table name")(i)?;
    let (i, cols) = match kw("COLUMNS")(i) {
        Ok((i, ())) => columns(i)?,
        Err(_) => (i, Columns::All),
    };
    let (mut i, predicates) = where_clause(i)?;
    let mut d = DumpTable {
        table,
        columns: cols,
        predicates,
        ..DumpTable::default()
    };
    loop {
        let at = ws(i);
        if let Ok((rest, ())) = alt((kw("MAX_VERSIONS"), kw("REVS")))(at) {
            let (rest, n) = number(opt_eq(rest))?;
            once(&mut d.max_versions, n, at, "MAX_VERSIONS")?;
            i = rest;
        } else if let Ok((rest, ())) = kw("BUCKETS")(at) {
            let (rest, n) = number(opt_eq(rest))?;
            once(&mut d.buckets, n, at, "BUCKETS")?;
            i = rest;
        } else if let Ok((rest, f)) = into_file(at) {
            once(&mut d.into_file, f, at, "INTO FILE")?;
            i = rest;
        } else if let Ok((rest, ())) = kw("NO_TIMESTAMPS")(at) {
            d.no_timestamps = true;
            i = rest;
        } else if let Ok((rest, fs)) = field_separator(at) {
            once(&mut d.field_separator, fs, at, "FS")?;
            i = rest;
        } else {
            return Ok((i, Statement::DumpTable(d)));
        }
    }
}
