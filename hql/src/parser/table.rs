//! CREATE TABLE and ALTER TABLE: definitions, column, access group and table options.

use common::row_key::{KeyPart, PartKind, RowKeySpec};
use nom::branch::alt;

use super::kind::{iterator_def, kind_call};
use super::token::{
    PResult, decimal, fail, failure, failure_coded, flag, kw, kw_map, kws, list1, name, number,
    opt_eq, p, plain_name, string, ws,
};
use crate::ast::{
    AccessGroupDef, AlterAction, AlterTable, BloomFilterMode, BloomFilterOption, Codec,
    CompressorSpec, CreateTable, CreateTableBody, Definition, Durability, FamilyDef, KindCall,
    Statement, TableOptions, TimeOrder, TimeUnit, Ttl,
};
use crate::error::Code;

/// One option of any level, before it is filed into its struct.
enum Opt {
    MaxVersions(u32),
    Ttl(Ttl),
    TimeOrder(TimeOrder),
    Counter(bool),
    Combiner(KindCall),
    AppendOnly(bool),
    InMemory(bool),
    Blocksize(u32),
    Replication(u16),
    Compressor(CompressorSpec),
    BloomFilter(BloomFilterOption),
    GroupCommitInterval(u32),
    Durability(Durability),
}

impl Opt {
    fn keyword(&self) -> &'static str {
        match self {
            Self::MaxVersions(_) => "MAX_VERSIONS",
            Self::Ttl(_) => "TTL",
            Self::TimeOrder(_) => "TIME_ORDER",
            Self::Counter(_) => "COUNTER",
            Self::Combiner(_) => "COMBINER",
            Self::AppendOnly(_) => "APPEND_ONLY",
            Self::InMemory(_) => "IN_MEMORY",
            Self::Blocksize(_) => "BLOCKSIZE",
            Self::Replication(_) => "REPLICATION",
            Self::Compressor(_) => "COMPRESSOR",
            Self::BloomFilter(_) => "BLOOMFILTER",
            Self::GroupCommitInterval(_) => "GROUP_COMMIT_INTERVAL",
            Self::Durability(_) => "DURABILITY",
        }
    }
}

/// Which options a position accepts.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Family,
    Group,
    Table,
}

fn column_option(i: &str) -> PResult<'_, Opt> {
    if let Ok((i, ())) = alt((kw("MAX_VERSIONS"), kw("REVS")))(i) {
        let (i, n) = number(opt_eq(i))?;
        return Ok((i, Opt::MaxVersions(n)));
    }
    if let Ok((i, ())) = kw("TTL")(i) {
        let (i, amount) = decimal(opt_eq(i))?;
        let (i, unit) = match time_unit(i) {
            Ok((i, u)) => (i, Some(u)),
            Err(_) => (i, None),
        };
        return Ok((i, Opt::Ttl(Ttl { amount, unit })));
    }
    if let Ok((i, ())) = kw("TIME_ORDER")(i) {
        let (i, o) = kw_map(&[("ASC", TimeOrder::Asc), ("DESC", TimeOrder::Desc)])(i)?;
        return Ok((i, Opt::TimeOrder(o)));
    }
    let (i, b) = flag("COUNTER")(i)?;
    Ok((i, Opt::Counter(b)))
}

/// Options of a family only (not group or table defaults).
fn family_only_option(i: &str) -> PResult<'_, Opt> {
    if let Ok((i, ())) = kw("COMBINER")(i) {
        let (i, call) = kind_call(i)?;
        return Ok((i, Opt::Combiner(call)));
    }
    let (i, b) = flag("APPEND_ONLY")(i)?;
    Ok((i, Opt::AppendOnly(b)))
}

fn time_unit(i: &str) -> PResult<'_, TimeUnit> {
    kw_map(&[
        ("SECONDS", TimeUnit::Seconds),
        ("SECOND", TimeUnit::Seconds),
        ("MINUTES", TimeUnit::Minutes),
        ("MINUTE", TimeUnit::Minutes),
        ("HOURS", TimeUnit::Hours),
        ("HOUR", TimeUnit::Hours),
        ("DAYS", TimeUnit::Days),
        ("DAY", TimeUnit::Days),
        ("WEEKS", TimeUnit::Weeks),
        ("WEEK", TimeUnit::Weeks),
        ("MONTHS", TimeUnit::Months),
        ("MONTH", TimeUnit::Months),
    ])(i)
}

fn group_option(i: &str) -> PResult<'_, Opt> {
    if let Ok((i, b)) = flag("IN_MEMORY")(i) {
        return Ok((i, Opt::InMemory(b)));
    }
    if let Ok((i, ())) = kw("BLOCKSIZE")(i) {
        let (i, n) = number(opt_eq(i))?;
        return Ok((i, Opt::Blocksize(n)));
    }
    if let Ok((i, ())) = kw("REPLICATION")(i) {
        let (i, n) = number(opt_eq(i))?;
        return Ok((i, Opt::Replication(n)));
    }
    if let Ok((i, ())) = kw("COMPRESSOR")(i) {
        let (i, spec) = compressor(opt_eq(i))?;
        return Ok((i, Opt::Compressor(spec)));
    }
    let (i, ()) = kw("BLOOMFILTER")(i)?;
    let (i, spec) = bloom_filter(opt_eq(i))?;
    Ok((i, Opt::BloomFilter(spec)))
}

fn table_only_option(i: &str) -> PResult<'_, Opt> {
    if let Ok((i, ())) = kw("GROUP_COMMIT_INTERVAL")(i) {
        let (i, n) = number(opt_eq(i))?;
        return Ok((i, Opt::GroupCommitInterval(n)));
    }
    let (i, ()) = kw("DURABILITY")(i)?;
    let at = ws(opt_eq(i));
    let (i, word) = name("durability")(at)?;
    match Durability::parse(&word) {
        Some(d) => Ok((i, Opt::Durability(d))),
        None => failure(
            at,
            format!("unknown durability '{word}' (expected none, log, flush or sync)"),
        ),
    }
}

fn any_option(level: Level) -> impl Fn(&str) -> PResult<'_, Opt> {
    move |i| {
        let r = column_option(i);
        if !matches!(r, Err(nom::Err::Error(_))) {
            return r;
        }
        if level == Level::Family {
            return family_only_option(i);
        }
        let r = group_option(i);
        if !matches!(r, Err(nom::Err::Error(_))) || level == Level::Group {
            return r;
        }
        table_only_option(i)
    }
}

/// A compressor spec: a string (or bare codec name) whose first word is a codec.
fn compressor(i: &str) -> PResult<'_, CompressorSpec> {
    let at = ws(i);
    let (i, text) = name("compressor")(at)?;
    let word = text.split_whitespace().next().unwrap_or("");
    match Codec::parse(word) {
        Some(codec) => Ok((i, CompressorSpec { text, codec })),
        None => failure(
            at,
            format!(
                "unknown compressor '{word}' (expected lz4, none, bmz, lzo, quicklz, snappy or zlib)"
            ),
        ),
    }
}

/// A bloom filter spec: `rows|rows+cols|none [--false-positive f] [--bits-per-item f]
/// [--num-hashes n] [--max-approx-items n]`, quoted, or a bare mode.
fn bloom_filter(i: &str) -> PResult<'_, BloomFilterOption> {
    let at = ws(i);
    let (i, text) = if at.starts_with(['\'', '"']) {
        string(at)?
    } else {
        let (i, mut word) = name("bloom filter mode")(at)?;
        match i
            .get(..5)
            .filter(|s| s.eq_ignore_ascii_case("+cols"))
            .map(|_| &i[5..])
        {
            Some(rest) => {
                word.push_str("+cols");
                (rest, word)
            }
            None => (i, word),
        }
    };
    match parse_bloom_text(&text) {
        Ok(spec) => Ok((i, spec)),
        Err(msg) => failure(at, msg),
    }
}

/// Reads the words of a bloom filter spec.
pub fn parse_bloom_text(text: &str) -> Result<BloomFilterOption, String> {
    let mut words = text.split_whitespace();
    let mode = match words.next().map(str::to_ascii_lowercase).as_deref() {
        Some("rows") => BloomFilterMode::Rows,
        Some("rows+cols") => BloomFilterMode::RowsCols,
        Some("none") => BloomFilterMode::None,
        other => {
            return Err(format!(
                "unknown bloom filter mode '{}' (expected rows, rows+cols or none)",
                other.unwrap_or("")
            ));
        }
    };
    let mut spec = BloomFilterOption {
        text: text.to_string(),
        mode,
        false_positive: None,
        bits_per_item: None,
        num_hashes: None,
        max_approx_items: None,
    };
    while let Some(flag) = words.next() {
        let value = words
            .next()
            .ok_or_else(|| format!("bloom filter option '{flag}' needs a value"))?;
        let bad = || format!("bad value '{value}' for bloom filter option '{flag}'");
        match flag {
            "--false-positive" => {
                let f: f64 = value.parse().map_err(|_| bad())?;
                if !(f > 0.0 && f < 1.0) {
                    return Err(bad());
                }
                spec.false_positive = Some(f);
            }
            "--bits-per-item" => {
                let f: f64 = value.parse().map_err(|_| bad())?;
                if !(f > 0.0 && f.is_finite()) {
                    return Err(bad());
                }
                spec.bits_per_item = Some(f);
            }
            "--num-hashes" => spec.num_hashes = Some(value.parse().map_err(|_| bad())?),
            "--max-approx-items" => spec.max_approx_items = Some(value.parse().map_err(|_| bad())?),
            _ => return Err(format!("unknown bloom filter option '{flag}'")),
        }
    }
    Ok(spec)
}

/// Options in any order, filed into a table-level struct (the largest), with each given at
/// most once. `owner` names the family, group or table for error messages.
fn options<'a>(
    level: Level,
    owner: &str,
    mut i: &'a str,
    into: &mut TableOptions,
) -> PResult<'a, ()> {
    loop {
        let at = ws(i);
        let opt = match any_option(level)(at) {
            Ok((rest, opt)) => {
                i = rest;
                opt
            }
            Err(nom::Err::Error(_)) => break,
            Err(e) => return Err(e),
        };
        let kwd = opt.keyword();
        let g = &mut into.group_defaults;
        let c = &mut g.column_defaults;
        // Hypertable refuses COUNTER with MAX_VERSIONS or TIME_ORDER DESC as the second of
        // them is read, naming them in its own words by which came last.
        let conflict = match &opt {
            Opt::Counter(true) if c.max_versions.is_some() => Some("MAX_VERSIONS"),
            Opt::Counter(true) if c.time_order == Some(TimeOrder::Desc) => Some("TIME_ORDER_DESC"),
            Opt::MaxVersions(_) if c.counter == Some(true) => Some("MAX VERSIONS"),
            Opt::TimeOrder(TimeOrder::Desc) if c.counter == Some(true) => Some("TIME_ORDER_DESC"),
            _ => None,
        };
        let dup = match opt {
            Opt::MaxVersions(n) => c.max_versions.replace(n).is_some(),
            Opt::Ttl(t) => c.ttl.replace(t).is_some(),
            Opt::TimeOrder(o) => c.time_order.replace(o).is_some(),
            Opt::Counter(b) => c.counter.replace(b).is_some(),
            Opt::Combiner(k) => c.combiner.replace(k).is_some(),
            Opt::AppendOnly(b) => c.append_only.replace(b).is_some(),
            Opt::InMemory(b) => g.in_memory.replace(b).is_some(),
            Opt::Blocksize(n) => g.blocksize.replace(n).is_some(),
            Opt::Replication(n) => g.replication.replace(n).is_some(),
            Opt::Compressor(s) => g.compressor.replace(s).is_some(),
            Opt::BloomFilter(s) => g.bloom_filter.replace(s).is_some(),
            Opt::GroupCommitInterval(n) => into.group_commit_interval_ms.replace(n).is_some(),
            Opt::Durability(d) => into.durability.replace(d).is_some(),
        };
        if dup {
            return failure(
                at,
                format!("Multiple specifications of {kwd} option for {owner}"),
            );
        }
        if let Some(other) = conflict {
            return failure_coded(
                at,
                format!(
                    "COUNTER cannot be combined with MAX_VERSIONS or TIME_ORDER DESC ({owner})"
                ),
                Code::IncompatibleOptions,
                format!("COUNTER and {other} are incompatible"),
            );
        }
    }
    Ok((i, ()))
}

fn family_def(i: &str) -> PResult<'_, Definition> {
    let (i, fname) = name("column family name")(i)?;
    let mut all = TableOptions::default();
    let (i, ()) = options(Level::Family, &format!("column '{fname}'"), i, &mut all)?;
    Ok((
        i,
        Definition::Family(FamilyDef {
            name: fname,
            options: all.group_defaults.column_defaults,
        }),
    ))
}

fn access_group_def(i: &str) -> PResult<'_, Definition> {
    let (i, ()) = kws(&["ACCESS", "GROUP"])(i)?;
    let (i, gname) = name("access group name")(i)?;
    let owner = format!("access group '{gname}'");
    let mut all = TableOptions::default();
    let (i, ()) = options(Level::Group, &owner, i, &mut all)?;
    let (i, families) = match p("(")(i) {
        Ok((i, ())) => {
            let (i, fams) = match list1(name("column family name"))(i) {
                Ok(r) => r,
                Err(nom::Err::Error(_)) => (i, Vec::new()),
                Err(e) => return Err(e),
            };
            let (i, ()) = p(")")(i)?;
            (i, fams)
        }
        Err(_) => (i, Vec::new()),
    };
    let (i, ()) = options(Level::Group, &owner, i, &mut all)?;
    Ok((
        i,
        Definition::AccessGroup(AccessGroupDef {
            name: gname,
            families,
            options: all.group_defaults,
        }),
    ))
}

/// `name UINT(w)`, `name CHAR(n)` or `name VARCHAR`, inside `ROW KEY (...)`.
fn key_part(i: &str) -> PResult<'_, KeyPart> {
    let (i, pname) = plain_name("key part name")(i)?;
    let width = |i| {
        let (i, ()) = p("(")(i)?;
        let (i, w) = number::<u8>(i)?;
        let (i, ()) = p(")")(i)?;
        Ok((i, w))
    };
    let (i, kind) = if let Ok((i, ())) = kw("UINT")(i) {
        let (i, width) = width(i)?;
        (i, PartKind::Uint { width })
    } else if let Ok((i, ())) = kw("CHAR")(i) {
        let (i, width) = width(i)?;
        (i, PartKind::Char { width })
    } else if let Ok((i, ())) = kw("VARCHAR")(i) {
        (i, PartKind::Varchar)
    } else {
        return fail(ws(i), || {
            "key part type UINT(w), CHAR(n) or VARCHAR".to_string()
        });
    };
    Ok((i, KeyPart { name: pname, kind }))
}

fn definition(i: &str) -> PResult<'_, Definition> {
    alt((
        |i| {
            let (i, ()) = kws(&["ROW", "KEY"])(i)?;
            let (i, ()) = p("(")(i)?;
            let (i, parts) = list1(key_part)(i)?;
            let (i, ()) = p(")")(i)?;
            Ok((i, Definition::RowKey(RowKeySpec { parts })))
        },
        access_group_def,
        |i| {
            let (i, ()) = kw("ITERATOR")(i)?;
            let (i, def) = iterator_def(i)?;
            Ok((i, Definition::Iterator(def)))
        },
        |i| {
            let (i, ()) = kws(&["QUALIFIER", "INDEX"])(i)?;
            let (i, n) = name("column family name")(i)?;
            Ok((i, Definition::QualifierIndex(n)))
        },
        |i| {
            let (i, ()) = kw("INDEX")(i)?;
            let (i, n) = name("column family name")(i)?;
            Ok((i, Definition::Index(n)))
        },
        family_def,
    ))(i)
}

/// `( [definition [, definition]*] )`.
fn definitions(i: &str) -> PResult<'_, Vec<Definition>> {
    let (i, ()) = p("(")(i)?;
    if let Ok((i, ())) = p(")")(i) {
        return Ok((i, Vec::new()));
    }
    let (i, defs) = list1(definition)(i)?;
    let (i, ()) = p(")")(i)?;
    Ok((i, defs))
}

/// After `CREATE TABLE`.
pub fn create_table(i: &str) -> PResult<'_, Statement> {
    let (i, if_not_exists) = match kws(&["IF", "NOT", "EXISTS"])(i) {
        Ok((i, ())) => (i, true),
        Err(_) => (i, false),
    };
    let with_leading_options = |i| {
        // Hypertable's older form: table options before the name.
        let mut leading = TableOptions::default();
        let (i, ()) = options(Level::Table, "table", i, &mut leading)?;
        if leading.is_empty() {
            return fail(ws(i), || "table option".to_string());
        }
        let (i, (tname, body)) = table_body(i, Some(leading))?;
        Ok((i, (tname, body)))
    };
    let (i, (tname, body)) = alt((|i| table_body(i, None), with_leading_options))(i)?;
    let (i, splits) = match kws(&["SPLIT", "ON"])(i) {
        Ok((i, ())) => {
            let (i, ()) = p("(")(i)?;
            let (i, rows) = list1(string)(i)?;
            let (i, ()) = p(")")(i)?;
            (i, rows)
        }
        Err(_) => (i, Vec::new()),
    };
    Ok((
        i,
        Statement::CreateTable(CreateTable {
            name: tname,
            if_not_exists,
            body,
            splits,
        }),
    ))
}

fn table_body(i: &str, leading: Option<TableOptions>) -> PResult<'_, (String, CreateTableBody)> {
    let (i, tname) = name("table name")(i)?;
    if leading.is_none()
        && let Ok((i, ())) = kw("LIKE")(i)
    {
        let (i, other) = name("table name")(i)?;
        return Ok((i, (tname, CreateTableBody::Like(other))));
    }
    let (i, definitions) = match definitions(i) {
        Ok(r) => r,
        Err(nom::Err::Error(_)) if ws(i).is_empty() || ws(i).starts_with(';') => (i, Vec::new()),
        Err(e) => return Err(e),
    };
    let mut opts = leading.unwrap_or_default();
    let (i, ()) = options(Level::Table, "table", i, &mut opts)?;
    Ok((
        i,
        (
            tname,
            CreateTableBody::Definitions {
                definitions,
                options: opts,
            },
        ),
    ))
}

fn name_list(i: &str) -> PResult<'_, Vec<String>> {
    let (i, ()) = p("(")(i)?;
    let (i, names) = list1(name("column family name"))(i)?;
    let (i, ()) = p(")")(i)?;
    Ok((i, names))
}

fn alter_action(i: &str) -> PResult<'_, AlterAction> {
    if let Ok((i, ())) = kw("ADD")(i) {
        let (i, d) = definitions(i)?;
        return Ok((i, AlterAction::Add(d)));
    }
    if let Ok((i, ())) = kw("MODIFY")(i) {
        let (i, d) = definitions(i)?;
        return Ok((i, AlterAction::Modify(d)));
    }
    if let Ok((i, ())) = kw("DROP")(i) {
        if let Ok((i, ())) = kw("ITERATOR")(i) {
            let (i, n) = super::kind::ident("iterator name")(i)?;
            return Ok((i, AlterAction::DropIterator(n)));
        }
        if let Ok((i, ())) = kws(&["QUALIFIER", "INDEX"])(i) {
            let (i, n) = name_list(i)?;
            return Ok((i, AlterAction::DropQualifierIndex(n)));
        }
        if let Ok((i, ())) = kw("INDEX")(i) {
            let (i, n) = name_list(i)?;
            return Ok((i, AlterAction::DropIndex(n)));
        }
        let (i, n) = name_list(i)?;
        return Ok((i, AlterAction::Drop(n)));
    }
    let (i, ()) = kws(&["RENAME", "COLUMN", "FAMILY"])(i)?;
    let (i, ()) = p("(")(i)?;
    let (i, from) = name("column family name")(i)?;
    let (i, ()) = p(",")(i)?;
    let (i, to) = name("column family name")(i)?;
    let (i, ()) = p(")")(i)?;
    Ok((i, AlterAction::RenameColumnFamily { from, to }))
}

/// After `ALTER TABLE`.
pub fn alter_table(i: &str) -> PResult<'_, Statement> {
    let (i, table) = name("table name")(i)?;
    let (mut i, first) = alter_action(i)?;
    let mut actions = vec![first];
    loop {
        match alter_action(i) {
            Ok((rest, a)) => {
                actions.push(a);
                i = rest;
            }
            Err(nom::Err::Error(_)) => break,
            Err(e) => return Err(e),
        }
    }
    Ok((i, Statement::AlterTable(AlterTable { table, actions })))
}

#[cfg(test)]
mod tests {
    use super::parse_bloom_text;
    use crate::ast::BloomFilterMode;

    #[test]
    fn bloom_text() {
        let b = parse_bloom_text("rows+cols --false-positive 0.02 --num-hashes 3").unwrap();
        assert_eq!(b.mode, BloomFilterMode::RowsCols);
        assert_eq!(b.false_positive, Some(0.02));
        assert_eq!(b.num_hashes, Some(3));
        assert!(parse_bloom_text("cols").is_err());
        assert!(parse_bloom_text("rows --bogus 1").is_err());
    }
}
