//! A schema back to Hypertable's text: SHOW CREATE TABLE (HQL) and DESCRIBE TABLE (XML), from
//! the options recorded as set at each level (older schemas: their effective values).

use std::fmt::Write as _;

use common::iterators::{CombinerSpec, IteratorSpec};
use common::schema::{
    AccessGroupSpec, BloomFilterMode, BloomFilterSpec, ColumnOptionsSet, Compressor, Durability,
    FamilySpec, GroupOptionsSet, TableSchema, TimeOrder,
};

use crate::ast::{IteratorDef, KindCall};

fn kind_call(c: &CombinerSpec) -> KindCall {
    KindCall {
        kind: c.kind.clone(),
        options: c.options.clone(),
    }
}

fn iterator_def(i: &IteratorSpec) -> IteratorDef {
    IteratorDef {
        name: i.name.clone(),
        call: KindCall {
            kind: i.kind.clone(),
            options: i.options.clone(),
        },
        scopes: Some(i.scopes.clone()),
        priority: Some(i.priority),
    }
}

fn bloom_text(b: &BloomFilterSpec) -> String {
    let mut t = match b.mode {
        BloomFilterMode::None => "none",
        BloomFilterMode::Rows => "rows",
        BloomFilterMode::RowsCols => "rows+cols",
    }
    .to_string();
    if b.false_positive != BloomFilterSpec::default().false_positive {
        let _ = write!(t, " --false-positive {}", b.false_positive);
    }
    if let Some(x) = b.bits_per_item {
        let _ = write!(t, " --bits-per-item {x}");
    }
    if let Some(n) = b.num_hashes {
        let _ = write!(t, " --num-hashes {n}");
    }
    t
}

/// The options a family shows: those set (older schemas: its non-default values).
fn family_shown(f: &FamilySpec) -> ColumnOptionsSet {
    f.options_set
        .clone()
        .unwrap_or_else(|| ColumnOptionsSet::from_effective(f))
}

/// The options a group shows: those set (older schemas: its non-default values).
fn group_shown(g: &AccessGroupSpec) -> GroupOptionsSet {
    if let Some(o) = &g.options_set {
        return o.clone();
    }
    let d = AccessGroupSpec::new("");
    GroupOptionsSet {
        replication: g.replication,
        blocksize: (g.blocksize_bytes != d.blocksize_bytes).then_some(g.blocksize_bytes),
        compressor: match (&g.compressor_requested, g.compressor) {
            (Some(text), _) => Some(text.to_lowercase()),
            (None, Compressor::None) => Some("none".into()),
            (None, Compressor::Lz4) => None,
        },
        bloom_filter: (g.bloom_filter != d.bloom_filter).then(|| bloom_text(&g.bloom_filter)),
        in_memory: g.in_memory.then_some(true),
        column_defaults: ColumnOptionsSet::default(),
    }
}

/// Hypertable's quoting of names in SHOW CREATE TABLE: bare when the name starts with a
/// letter and holds only letters and digits, else in single quotes with nothing escaped.
fn ht_name(s: &str) -> String {
    if s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric())
    {
        s.to_string()
    } else {
        format!("'{s}'")
    }
}

/// The name a family shows: a dropped one is `!id`, as Hypertable renames it.
fn shown_name(f: &FamilySpec) -> String {
    if f.deleted {
        format!("!{}", f.id)
    } else {
        f.name.clone()
    }
}

/// Column options in SHOW CREATE TABLE's order, each after a space.
fn column_options_text(c: &ColumnOptionsSet) -> String {
    let mut o = String::new();
    if let Some(n) = c.max_versions {
        let _ = write!(o, " MAX_VERSIONS {n}");
    }
    if let Some(n) = c.ttl_secs {
        let _ = write!(o, " TTL {n}");
    }
    if let Some(t) = c.time_order {
        o.push_str(match t {
            TimeOrder::Asc => " TIME_ORDER asc",
            TimeOrder::Desc => " TIME_ORDER desc",
        });
    }
    if let Some(b) = c.counter {
        let _ = write!(o, " COUNTER {b}");
    }
    o
}

/// Access group options (its column defaults last) in SHOW CREATE TABLE's order.
fn group_options_text(g: &GroupOptionsSet) -> String {
    let mut o = String::new();
    if let Some(n) = g.replication {
        let _ = write!(o, " REPLICATION {n}");
    }
    if let Some(n) = g.blocksize {
        let _ = write!(o, " BLOCKSIZE {n}");
    }
    if let Some(c) = &g.compressor {
        let _ = write!(o, " COMPRESSOR \"{c}\"");
    }
    if let Some(b) = &g.bloom_filter {
        let _ = write!(o, " BLOOMFILTER \"{b}\"");
    }
    if let Some(b) = g.in_memory {
        let _ = write!(o, " IN_MEMORY {b}");
    }
    o.push_str(&column_options_text(&g.column_defaults));
    o
}

/// SHOW CREATE TABLE as Hypertable prints it (`name` as written in the statement): one line
/// per live family (its options, then `, INDEX f` and `, QUALIFIER INDEX f`), group by group;
/// one line per access group; the table's options after the closing parenthesis; a blank line
/// after. ht's own additions follow Hypertable's text where they occur: `COMBINER` and
/// `APPEND_ONLY` after a family's options, ITERATOR and ROW KEY lines after the groups,
/// `DURABILITY` last.
pub(in crate::exec) fn show_create(s: &TableSchema, name: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for g in &s.access_groups {
        for f in s
            .families
            .iter()
            .filter(|f| !f.deleted && f.access_group == g.name)
        {
            let mut l = format!(
                "  {}{}",
                ht_name(&f.name),
                column_options_text(&family_shown(f))
            );
            if let Some(c) = &f.combiner {
                let _ = write!(l, " COMBINER {}", kind_call(c));
            }
            if f.append_only {
                l.push_str(" APPEND_ONLY");
            }
            if f.value_index {
                let _ = write!(l, ", INDEX {}", ht_name(&f.name));
            }
            if f.qualifier_index {
                let _ = write!(l, ", QUALIFIER INDEX {}", ht_name(&f.name));
            }
            lines.push(l);
        }
    }
    for g in &s.access_groups {
        let members: Vec<String> = s
            .families
            .iter()
            .filter(|f| !f.deleted && f.access_group == g.name)
            .map(|f| ht_name(&f.name))
            .collect();
        lines.push(format!(
            "  ACCESS GROUP {} ({}){}",
            ht_name(&g.name),
            members.join(", "),
            group_options_text(&group_shown(g))
        ));
    }
    lines.extend(s.iterators.iter().map(|i| format!("  {}", iterator_def(i))));
    if let Some(k) = &s.row_key {
        lines.push(format!("  {}", k.hql()));
    }
    let mut out = format!("CREATE TABLE {} (\n{}\n)", ht_name(name), lines.join(",\n"));
    if s.group_commit_interval_ms > 0 {
        let _ = write!(out, " GROUP_COMMIT_INTERVAL {}", s.group_commit_interval_ms);
    }
    let defaults = s.defaults_set.clone().unwrap_or_default();
    out.push_str(&group_options_text(&defaults));
    if s.durability != Durability::default() {
        let _ = write!(out, " DURABILITY {}", s.durability.name());
    }
    out.push_str(";\n\n");
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One XML element per line at `depth` (two spaces a level).
fn element(o: &mut String, depth: usize, name: &str, value: impl std::fmt::Display) {
    let _ = writeln!(o, "{:w$}<{name}>{value}</{name}>", "", w = 2 * depth);
}

fn open(o: &mut String, depth: usize, tag: &str) {
    let _ = writeln!(o, "{:w$}<{tag}>", "", w = 2 * depth);
}

fn close(o: &mut String, depth: usize, name: &str) {
    let _ = writeln!(o, "{:w$}</{name}>", "", w = 2 * depth);
}

fn column_elements(o: &mut String, depth: usize, c: &ColumnOptionsSet) {
    if let Some(n) = c.max_versions {
        element(o, depth, "MaxVersions", n);
    }
    if let Some(n) = c.ttl_secs {
        element(o, depth, "TTL", n);
    }
    if let Some(t) = c.time_order {
        element(
            o,
            depth,
            "TimeOrder",
            match t {
                TimeOrder::Asc => "asc",
                TimeOrder::Desc => "desc",
            },
        );
    }
    if let Some(b) = c.counter {
        element(o, depth, "Counter", b);
    }
}

fn group_elements(o: &mut String, depth: usize, g: &GroupOptionsSet) {
    if let Some(n) = g.replication {
        element(o, depth, "Replication", n);
    }
    if let Some(n) = g.blocksize {
        element(o, depth, "BlockSize", n);
    }
    if let Some(c) = &g.compressor {
        element(o, depth, "Compressor", xml_escape(c));
    }
    if let Some(b) = &g.bloom_filter {
        element(o, depth, "BloomFilter", xml_escape(b));
    }
    if let Some(b) = g.in_memory {
        element(o, depth, "InMemory", b);
    }
}

/// DESCRIBE TABLE [WITH IDS] as Hypertable prints its XML schema: the options set at each
/// level, every family (dropped ones as `!id`), generations and ids only WITH IDS; a blank
/// line after. ht's additions (`Durability`, `Combiner`, `AppendOnly`, `Iterator`) appear
/// only where used. An index table's schema is Hypertable's version 1: `<Schema version="1">`.
pub(in crate::exec) fn describe(s: &TableSchema, with_ids: bool, index_table: bool) -> String {
    let mut o = String::from(if index_table {
        "<Schema version=\"1\">\n"
    } else {
        "<Schema>\n"
    });
    if with_ids {
        element(&mut o, 1, "Generation", s.generation);
    }
    if s.group_commit_interval_ms > 0 {
        element(&mut o, 1, "GroupCommitInterval", s.group_commit_interval_ms);
    }
    if s.durability != Durability::default() {
        element(&mut o, 1, "Durability", s.durability.name());
    }
    let defaults = s.defaults_set.clone().unwrap_or_default();
    open(&mut o, 1, "AccessGroupDefaults");
    group_elements(&mut o, 2, &defaults);
    close(&mut o, 1, "AccessGroupDefaults");
    open(&mut o, 1, "ColumnFamilyDefaults");
    column_elements(&mut o, 2, &defaults.column_defaults);
    close(&mut o, 1, "ColumnFamilyDefaults");
    for g in &s.access_groups {
        let shown = group_shown(g);
        open(
            &mut o,
            1,
            &format!("AccessGroup name=\"{}\"", xml_escape(&g.name)),
        );
        if with_ids {
            element(&mut o, 2, "Generation", g.generation.max(1));
        }
        open(&mut o, 2, "Options");
        group_elements(&mut o, 3, &shown);
        close(&mut o, 2, "Options");
        open(&mut o, 2, "ColumnFamilyDefaults");
        column_elements(&mut o, 3, &shown.column_defaults);
        close(&mut o, 2, "ColumnFamilyDefaults");
        for f in s.families.iter().filter(|f| f.access_group == g.name) {
            if with_ids {
                open(&mut o, 2, &format!("ColumnFamily id=\"{}\"", f.id));
                element(&mut o, 3, "Generation", f.generation.max(1));
            } else {
                open(&mut o, 2, "ColumnFamily");
            }
            element(&mut o, 3, "Name", xml_escape(&shown_name(f)));
            element(&mut o, 3, "AccessGroup", xml_escape(&g.name));
            element(&mut o, 3, "Deleted", f.deleted);
            if f.value_index {
                element(&mut o, 3, "Index", true);
            }
            if f.qualifier_index {
                element(&mut o, 3, "QualifierIndex", true);
            }
            open(&mut o, 3, "Options");
            column_elements(&mut o, 4, &family_shown(f));
            if let Some(c) = &f.combiner {
                element(&mut o, 4, "Combiner", xml_escape(&kind_call(c).to_string()));
            }
            if f.append_only {
                element(&mut o, 4, "AppendOnly", true);
            }
            close(&mut o, 3, "Options");
            close(&mut o, 2, "ColumnFamily");
        }
        close(&mut o, 1, "AccessGroup");
    }
    for i in &s.iterators {
        let scopes: Vec<&str> = i.scopes.iter().map(|s| s.name()).collect();
        let call = KindCall {
            kind: i.kind.clone(),
            options: i.options.clone(),
        };
        let _ = writeln!(
            o,
            "  <Iterator name=\"{}\" priority=\"{}\" scopes=\"{}\">{}</Iterator>",
            xml_escape(&i.name),
            i.priority,
            scopes.join(","),
            xml_escape(&call.to_string())
        );
    }
    o.push_str("</Schema>\n\n");
    o
}
