//! CREATE TABLE and ALTER TABLE to a [`TableSchema`] (table and group defaults resolved into
//! each family), and a schema back to HQL (SHOW CREATE TABLE) and XML (DESCRIBE TABLE).

use std::fmt::Write as _;

use client::ClientError;
use common::iterators::{CombinerSpec, IterScope, IteratorSpec};
use common::schema::{
    AccessGroupSpec, BloomFilterMode, BloomFilterSpec, Compressor, Durability, FamilySpec,
    TableSchema, TimeOrder,
};

use super::{ExecError, Executor, Result};
use crate::ast::{
    AccessGroupDef, AccessGroupOptions, AlterAction, AlterTable, BloomFilterOption, Codec,
    ColumnOptions, CompressorSpec, CreateTable, CreateTableBody, Definition, FamilyDef,
    IteratorDef, KindCall, Statement, TableOptions, TimeUnit, Ttl,
};
use crate::parser::token::is_keyword;

/// Family ids are one byte and 0 is reserved.
const MAX_FAMILY_ID: u32 = 255;

pub(super) fn create_table(ex: &mut Executor, c: &CreateTable) -> Result<()> {
    let path = ex.resolve(&c.name);
    if c.if_not_exists && ex.client.table_exists(&path)? {
        return Ok(());
    }
    let schema = match &c.body {
        CreateTableBody::Like(other) => ex.client.table_schema(&ex.resolve(other))?,
        CreateTableBody::Definitions {
            definitions,
            options,
        } => build(&path, definitions, options)?,
    };
    let splits: Vec<Vec<u8>> = c.splits.iter().map(|r| r.as_bytes().to_vec()).collect();
    common::row_range::check_split_rows(&splits)
        .map_err(|e| ExecError::invalid(format!("SPLIT ON: {e}")))?;
    ex.client.create_table_split(&path, schema, &splits)?;
    Ok(())
}

/// Sets the column options that are given.
fn apply_column(f: &mut FamilySpec, o: &ColumnOptions) -> Result<()> {
    if let Some(n) = o.max_versions {
        f.max_versions = n;
    }
    if let Some(t) = &o.ttl {
        f.ttl_secs = t.seconds().ok_or_else(|| {
            ExecError::invalid(format!(
                "TTL '{}' of column family '{}' is too large",
                t.amount, f.name
            ))
        })?;
    }
    if let Some(t) = o.time_order {
        f.time_order = t;
    }
    if let Some(c) = o.counter {
        f.counter = c;
    }
    if let Some(k) = &o.combiner {
        f.combiner = Some(CombinerSpec {
            kind: k.kind.clone(),
            options: k.options.clone(),
        });
    }
    if let Some(b) = o.append_only {
        f.append_only = b;
    }
    Ok(())
}

/// The highest priority HQL picks by itself (the last multiple of 10 a `u16` holds).
const MAX_DEFAULT_PRIORITY: u16 = 65_530;

/// Adds table iterators in the order written: those without a PRIORITY get the lowest
/// multiple of 10 from 10 up that no iterator (already in the table, given one explicitly
/// in this statement, or placed before it) has in any of its scopes.
fn add_iterators(s: &mut TableSchema, path: &str, defs: &[&IteratorDef]) -> Result<()> {
    let mut new: Vec<(IteratorSpec, bool)> = Vec::new();
    for d in defs {
        if s.iterators.iter().any(|i| i.name == d.name) {
            return Err(ExecError::invalid(format!(
                "iterator '{}' already exists in table '{path}'",
                d.name
            )));
        }
        if new.iter().any(|(i, _)| i.name == d.name) {
            return Err(ExecError::invalid(format!(
                "iterator '{}' is defined twice in table '{path}'",
                d.name
            )));
        }
        let mut scopes = d.scopes.clone().unwrap_or_else(|| IterScope::ALL.to_vec());
        scopes.sort();
        new.push((
            IteratorSpec {
                name: d.name.clone(),
                kind: d.call.kind.clone(),
                options: d.call.options.clone(),
                scopes,
                priority: d.priority.unwrap_or(0),
            },
            d.priority.is_some(),
        ));
    }
    let mut taken: Vec<(u16, Vec<IterScope>)> = s
        .iterators
        .iter()
        .chain(new.iter().filter(|(_, explicit)| *explicit).map(|(i, _)| i))
        .map(|i| (i.priority, i.scopes.clone()))
        .collect();
    for (it, explicit) in &mut new {
        if *explicit {
            continue;
        }
        let free = (1..=MAX_DEFAULT_PRIORITY / 10).map(|n| n * 10).find(|p| {
            !taken
                .iter()
                .any(|(q, sc)| q == p && sc.iter().any(|x| it.scopes.contains(x)))
        });
        it.priority = free.ok_or_else(|| {
            ExecError::invalid(format!(
                "iterator '{}' of table '{path}': no multiple of 10 up to \
                 {MAX_DEFAULT_PRIORITY} is free as its priority; give one with PRIORITY n",
                it.name
            ))
        })?;
        taken.push((it.priority, it.scopes.clone()));
    }
    s.iterators.extend(new.into_iter().map(|(i, _)| i));
    Ok(())
}

fn iterator_defs(defs: &[Definition]) -> Vec<&IteratorDef> {
    defs.iter()
        .filter_map(|d| match d {
            Definition::Iterator(i) => Some(i),
            _ => None,
        })
        .collect()
}

/// Sets the access group options that are given.
fn apply_group(g: &mut AccessGroupSpec, o: &AccessGroupOptions) {
    if let Some(b) = o.in_memory {
        g.in_memory = b;
    }
    if let Some(n) = o.blocksize {
        g.blocksize_bytes = n;
    }
    if let Some(n) = o.replication {
        g.replication = Some(n);
    }
    if let Some(c) = &o.compressor {
        // ht stores blocks with lz4 or uncompressed; the other codecs Hypertable knew are all
        // fast block compressors, and lz4 is the nearest of ours to each.
        g.compressor = match c.codec {
            Codec::None => Compressor::None,
            _ => Compressor::Lz4,
        };
        g.compressor_requested = (!c.codec.implemented()).then(|| c.text.clone());
    }
    if let Some(b) = &o.bloom_filter {
        let d = BloomFilterSpec::default();
        g.bloom_filter = BloomFilterSpec {
            mode: b.mode,
            false_positive: b.false_positive.unwrap_or(d.false_positive),
            bits_per_item: b.bits_per_item,
            num_hashes: b.num_hashes,
        };
    }
}

fn schema_error(path: &str, e: common::schema::SchemaError) -> ExecError {
    ExecError::invalid(format!("table '{path}': {e}"))
}

/// A schema for CREATE TABLE: ids in order of first mention, defaults resolved per family.
fn build(path: &str, defs: &[Definition], opts: &TableOptions) -> Result<TableSchema> {
    let table_defaults = &opts.group_defaults;
    // Families in order of first mention, with their definition (if written) and group.
    let mut fams: Vec<(String, Option<&FamilyDef>, Option<&AccessGroupDef>)> = Vec::new();
    for d in defs {
        match d {
            Definition::Family(fd) => match fams.iter_mut().find(|f| f.0 == fd.name) {
                Some(f) if f.1.is_some() => {
                    return Err(ExecError::invalid(format!(
                        "column family '{}' is defined twice in table '{path}'",
                        fd.name
                    )));
                }
                Some(f) => f.1 = Some(fd),
                None => fams.push((fd.name.clone(), Some(fd), None)),
            },
            Definition::AccessGroup(g) => {
                for name in &g.families {
                    match fams.iter_mut().find(|f| f.0 == *name) {
                        Some((_, _, Some(other))) => {
                            return Err(ExecError::invalid(format!(
                                "column family '{name}' is in access groups '{}' and '{}' \
                                 of table '{path}'",
                                other.name, g.name
                            )));
                        }
                        Some(f) => f.2 = Some(g),
                        None => fams.push((name.clone(), None, Some(g))),
                    }
                }
            }
            Definition::Index(_)
            | Definition::QualifierIndex(_)
            | Definition::Iterator(_)
            | Definition::RowKey(_) => {}
        }
    }
    if fams.len() > MAX_FAMILY_ID as usize {
        return Err(ExecError::invalid(format!(
            "table '{path}' has {} column families; at most {MAX_FAMILY_ID} are allowed",
            fams.len()
        )));
    }
    let mut schema = TableSchema::new(0, path);
    schema.access_groups.clear();
    let needs_default = fams.iter().any(|f| f.2.is_none());
    let explicit_default = defs
        .iter()
        .any(|d| matches!(d, Definition::AccessGroup(g) if g.name == "default"));
    if needs_default && !explicit_default {
        let mut g = AccessGroupSpec::new("default");
        apply_group(&mut g, table_defaults);
        schema.access_groups.push(g);
    }
    for d in defs {
        if let Definition::AccessGroup(gd) = d {
            let mut g = AccessGroupSpec::new(gd.name.clone());
            apply_group(&mut g, table_defaults);
            apply_group(&mut g, &gd.options);
            schema.access_groups.push(g);
        }
    }
    for (n, (name, fd, gd)) in fams.iter().enumerate() {
        let group = gd.map_or("default", |g| g.name.as_str());
        let mut f = FamilySpec::new((n + 1) as u8, name.clone(), group);
        apply_column(&mut f, &table_defaults.column_defaults)?;
        if let Some(g) = gd {
            apply_column(&mut f, &g.options.column_defaults)?;
        }
        if let Some(fd) = fd {
            apply_column(&mut f, &fd.options)?;
        }
        schema.families.push(f);
    }
    for d in defs {
        set_index(&mut schema, path, d, true)?;
    }
    add_iterators(&mut schema, path, &iterator_defs(defs))?;
    for d in defs {
        if let Definition::RowKey(k) = d {
            if schema.row_key.is_some() {
                return Err(ExecError::invalid(format!(
                    "table '{path}' has more than one ROW KEY"
                )));
            }
            if let Some(p) = k.parts.iter().find(|p| is_keyword(&p.name)) {
                return Err(ExecError::invalid(format!(
                    "table '{path}': ROW KEY part name '{}' is an HQL keyword",
                    p.name
                )));
            }
            schema.row_key = Some(k.clone());
        }
    }
    if let Some(d) = opts.durability {
        schema.durability = d;
    }
    if let Some(ms) = opts.group_commit_interval_ms {
        schema.group_commit_interval_ms = ms;
    }
    schema.validate().map_err(|e| schema_error(path, e))?;
    Ok(schema)
}

/// Applies `INDEX f` / `QUALIFIER INDEX f` (other definitions are ignored).
fn set_index(schema: &mut TableSchema, path: &str, d: &Definition, on: bool) -> Result<()> {
    let (name, qualifier) = match d {
        Definition::Index(n) => (n, false),
        Definition::QualifierIndex(n) => (n, true),
        _ => return Ok(()),
    };
    let f = live_family_mut(schema, path, name)?;
    if qualifier {
        f.qualifier_index = on;
    } else {
        f.value_index = on;
    }
    Ok(())
}

fn live_family_mut<'a>(
    schema: &'a mut TableSchema,
    path: &str,
    name: &str,
) -> Result<&'a mut FamilySpec> {
    schema
        .families
        .iter_mut()
        .find(|f| !f.deleted && f.name == name)
        .ok_or_else(|| {
            ExecError::invalid(format!(
                "column family '{name}' does not exist in table '{path}'"
            ))
        })
}

fn next_family_id(schema: &TableSchema, path: &str, name: &str) -> Result<u8> {
    let next = schema
        .families
        .iter()
        .map(|f| u32::from(f.id))
        .max()
        .unwrap_or(0)
        + 1;
    u8::try_from(next)
        .ok()
        .filter(|&id| u32::from(id) <= MAX_FAMILY_ID)
        .ok_or_else(|| {
            ExecError::invalid(format!(
                "cannot add column family '{name}' to table '{path}': all {MAX_FAMILY_ID} \
                 family ids have been used"
            ))
        })
}

fn row_key_fixed(path: &str) -> ExecError {
    ExecError::invalid(format!(
        "ALTER TABLE cannot add or change the ROW KEY of table '{path}': its rows are \
         already written in their layout"
    ))
}

fn add_family(schema: &mut TableSchema, path: &str, fd: &FamilyDef, group: &str) -> Result<()> {
    if schema.family(&fd.name).is_some() {
        return Err(ExecError::invalid(format!(
            "column family '{}' already exists in table '{path}'",
            fd.name
        )));
    }
    let id = next_family_id(schema, path, &fd.name)?;
    if !schema.access_groups.iter().any(|g| g.name == group) {
        schema.access_groups.push(AccessGroupSpec::new(group));
    }
    let mut f = FamilySpec::new(id, fd.name.clone(), group);
    apply_column(&mut f, &fd.options)?;
    schema.families.push(f);
    Ok(())
}

pub(super) fn alter_table(ex: &mut Executor, a: &AlterTable) -> Result<()> {
    let path = ex.resolve(&a.table);
    let mut s = ex.client.table_schema(&path)?;
    for action in &a.actions {
        match action {
            AlterAction::Add(defs) => {
                add_iterators(&mut s, &path, &iterator_defs(defs))?;
                for d in defs {
                    match d {
                        Definition::Family(fd) => add_family(&mut s, &path, fd, "default")?,
                        Definition::AccessGroup(gd) => {
                            if s.access_groups.iter().any(|g| g.name == gd.name) {
                                return Err(ExecError::invalid(format!(
                                    "access group '{}' already exists in table '{path}'",
                                    gd.name
                                )));
                            }
                            let mut g = AccessGroupSpec::new(gd.name.clone());
                            apply_group(&mut g, &gd.options);
                            s.access_groups.push(g);
                            for name in &gd.families {
                                let fd = FamilyDef {
                                    name: name.clone(),
                                    options: gd.options.column_defaults.clone(),
                                };
                                add_family(&mut s, &path, &fd, &gd.name)?;
                            }
                        }
                        Definition::Index(_) | Definition::QualifierIndex(_) => {
                            set_index(&mut s, &path, d, true)?;
                        }
                        Definition::Iterator(_) => {}
                        Definition::RowKey(_) => return Err(row_key_fixed(&path)),
                    }
                }
            }
            AlterAction::Modify(defs) => {
                for d in defs {
                    match d {
                        Definition::Family(fd) => {
                            apply_column(live_family_mut(&mut s, &path, &fd.name)?, &fd.options)?;
                        }
                        Definition::AccessGroup(gd) => {
                            let g = s
                                .access_groups
                                .iter_mut()
                                .find(|g| g.name == gd.name)
                                .ok_or_else(|| {
                                    ExecError::invalid(format!(
                                        "access group '{}' does not exist in table '{path}'",
                                        gd.name
                                    ))
                                })?;
                            apply_group(g, &gd.options);
                            for name in &gd.families {
                                let f = live_family_mut(&mut s, &path, name)?;
                                if f.access_group != gd.name {
                                    return Err(ExecError::invalid(format!(
                                        "column family '{name}' is in access group '{}', not \
                                         '{}', of table '{path}'",
                                        f.access_group, gd.name
                                    )));
                                }
                                apply_column(f, &gd.options.column_defaults)?;
                            }
                        }
                        Definition::Index(_) | Definition::QualifierIndex(_) => {
                            set_index(&mut s, &path, d, true)?;
                        }
                        Definition::Iterator(i) => {
                            return Err(ExecError::invalid(format!(
                                "ALTER TABLE MODIFY cannot change iterator '{}' of table \
                                 '{path}': DROP ITERATOR it and ADD it again",
                                i.name
                            )));
                        }
                        Definition::RowKey(_) => return Err(row_key_fixed(&path)),
                    }
                }
            }
            AlterAction::Drop(names) => {
                for n in names {
                    live_family_mut(&mut s, &path, n)?.deleted = true;
                }
            }
            AlterAction::DropIndex(names) => {
                for n in names {
                    set_index(&mut s, &path, &Definition::Index(n.clone()), false)?;
                }
            }
            AlterAction::DropQualifierIndex(names) => {
                for n in names {
                    set_index(&mut s, &path, &Definition::QualifierIndex(n.clone()), false)?;
                }
            }
            AlterAction::RenameColumnFamily { from, to } => {
                if s.family(to).is_some() {
                    return Err(ExecError::invalid(format!(
                        "cannot rename column family '{from}' to '{to}': '{to}' already \
                         exists in table '{path}'"
                    )));
                }
                live_family_mut(&mut s, &path, from)?.name = to.clone();
            }
            AlterAction::DropIterator(name) => {
                let Some(at) = s.iterators.iter().position(|i| i.name == *name) else {
                    return Err(ExecError::invalid(format!(
                        "iterator '{name}' does not exist in table '{path}'"
                    )));
                };
                s.iterators.remove(at);
            }
        }
    }
    s.validate().map_err(|e| schema_error(&path, e))?;
    match ex.client.alter_table(&path, s) {
        Err(ClientError::InvalidInput(m)) => Err(ExecError::invalid(format!(
            "cannot alter table '{path}': {m}"
        ))),
        r => {
            r?;
            Ok(())
        }
    }
}

/// The largest unit that divides `secs` evenly.
fn ttl_of(secs: u64) -> Ttl {
    let unit = [
        TimeUnit::Months,
        TimeUnit::Weeks,
        TimeUnit::Days,
        TimeUnit::Hours,
        TimeUnit::Minutes,
    ]
    .into_iter()
    .find(|u| secs.is_multiple_of(u.seconds()))
    .unwrap_or(TimeUnit::Seconds);
    Ttl {
        amount: (secs / unit.seconds()).to_string(),
        unit: Some(unit),
    }
}

fn column_options(f: &FamilySpec) -> ColumnOptions {
    ColumnOptions {
        max_versions: (f.max_versions > 0).then_some(f.max_versions),
        ttl: (f.ttl_secs > 0).then(|| ttl_of(f.ttl_secs)),
        time_order: (f.time_order == TimeOrder::Desc).then_some(TimeOrder::Desc),
        counter: f.counter.then_some(true),
        combiner: f.combiner.as_ref().map(kind_call),
        append_only: f.append_only.then_some(true),
    }
}

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

fn group_options(g: &AccessGroupSpec) -> AccessGroupOptions {
    let d = AccessGroupSpec::new("");
    let compressor = match (&g.compressor_requested, g.compressor) {
        (Some(text), _) => Some(CompressorSpec {
            text: text.clone(),
            codec: Codec::Lz4,
        }),
        (None, Compressor::None) => Some(CompressorSpec {
            text: "none".into(),
            codec: Codec::None,
        }),
        (None, Compressor::Lz4) => None,
    };
    AccessGroupOptions {
        in_memory: g.in_memory.then_some(true),
        blocksize: (g.blocksize_bytes != d.blocksize_bytes).then_some(g.blocksize_bytes),
        replication: g.replication,
        compressor,
        bloom_filter: (g.bloom_filter != d.bloom_filter).then(|| BloomFilterOption {
            text: bloom_text(&g.bloom_filter),
            mode: g.bloom_filter.mode,
            false_positive: None,
            bits_per_item: None,
            num_hashes: None,
            max_approx_items: None,
        }),
        column_defaults: ColumnOptions::default(),
    }
}

/// SHOW CREATE TABLE: a statement that recreates the table, every family's effective options
/// written out; a `#` line before it names compressors ht replaced by its own.
pub(super) fn show_create(s: &TableSchema) -> String {
    let name = s.name.rsplit('/').next().unwrap_or(&s.name).to_string();
    let live: Vec<&FamilySpec> = s.families.iter().filter(|f| !f.deleted).collect();
    let mut defs: Vec<Definition> = live
        .iter()
        .map(|f| {
            Definition::Family(FamilyDef {
                name: f.name.clone(),
                options: column_options(f),
            })
        })
        .collect();
    for f in &live {
        if f.value_index {
            defs.push(Definition::Index(f.name.clone()));
        }
        if f.qualifier_index {
            defs.push(Definition::QualifierIndex(f.name.clone()));
        }
    }
    let mut out = String::new();
    for g in &s.access_groups {
        if let Some(req) = &g.compressor_requested {
            let _ = writeln!(
                out,
                "# access group '{}': COMPRESSOR \"{req}\" is not implemented by ht; its \
                 blocks are compressed with lz4",
                g.name
            );
        }
        defs.push(Definition::AccessGroup(AccessGroupDef {
            name: g.name.clone(),
            families: live
                .iter()
                .filter(|f| f.access_group == g.name)
                .map(|f| f.name.clone())
                .collect(),
            options: group_options(g),
        }));
    }
    defs.extend(
        s.iterators
            .iter()
            .map(|i| Definition::Iterator(iterator_def(i))),
    );
    if let Some(k) = &s.row_key {
        defs.push(Definition::RowKey(k.clone()));
    }
    let options = TableOptions {
        group_defaults: AccessGroupOptions::default(),
        group_commit_interval_ms: (s.group_commit_interval_ms > 0)
            .then_some(s.group_commit_interval_ms),
        durability: (s.durability != Durability::default()).then_some(s.durability),
    };
    let stmt = Statement::CreateTable(CreateTable {
        name,
        if_not_exists: false,
        body: CreateTableBody::Definitions {
            definitions: defs,
            options,
        },
        splits: Vec::new(),
    });
    let _ = writeln!(out, "{stmt};");
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// DESCRIBE TABLE: the schema as Hypertable's XML, with ids and dropped families on request.
pub(super) fn describe(s: &TableSchema, with_ids: bool) -> String {
    let mut o = String::new();
    if with_ids {
        let _ = writeln!(o, "<Schema generation=\"{}\">", s.generation);
    } else {
        o.push_str("<Schema>\n");
    }
    let _ = writeln!(o, "  <Durability>{}</Durability>", s.durability.name());
    if s.group_commit_interval_ms > 0 {
        let _ = writeln!(
            o,
            "  <GroupCommitInterval>{}</GroupCommitInterval>",
            s.group_commit_interval_ms
        );
    }
    for g in &s.access_groups {
        let _ = writeln!(o, "  <AccessGroup name=\"{}\">", xml_escape(&g.name));
        let _ = writeln!(o, "    <Options>");
        let _ = writeln!(o, "      <InMemory>{}</InMemory>", g.in_memory);
        let _ = writeln!(o, "      <BlockSize>{}</BlockSize>", g.blocksize_bytes);
        let codec = match g.compressor {
            Compressor::None => "none",
            Compressor::Lz4 => "lz4",
        };
        let _ = writeln!(o, "      <Compressor>{codec}</Compressor>");
        if let Some(req) = &g.compressor_requested {
            let _ = writeln!(
                o,
                "      <CompressorRequested>{}</CompressorRequested>",
                xml_escape(req)
            );
        }
        let _ = writeln!(
            o,
            "      <BloomFilter>{}</BloomFilter>",
            xml_escape(&bloom_text(&g.bloom_filter))
        );
        if let Some(r) = g.replication {
            let _ = writeln!(o, "      <Replication>{r}</Replication>");
        }
        let _ = writeln!(o, "    </Options>");
        for f in s
            .families
            .iter()
            .filter(|f| f.access_group == g.name && (with_ids || !f.deleted))
        {
            if with_ids {
                let _ = writeln!(o, "    <ColumnFamily id=\"{}\">", f.id);
            } else {
                o.push_str("    <ColumnFamily>\n");
            }
            let _ = writeln!(o, "      <Name>{}</Name>", xml_escape(&f.name));
            let _ = writeln!(o, "      <Options>");
            if f.max_versions > 0 {
                let _ = writeln!(o, "        <MaxVersions>{}</MaxVersions>", f.max_versions);
            }
            if f.ttl_secs > 0 {
                let _ = writeln!(o, "        <TTL>{}</TTL>", f.ttl_secs);
            }
            if f.time_order == TimeOrder::Desc {
                let _ = writeln!(o, "        <TimeOrder>desc</TimeOrder>");
            }
            let _ = writeln!(o, "        <Counter>{}</Counter>", f.counter);
            if let Some(c) = &f.combiner {
                let _ = writeln!(
                    o,
                    "        <Combiner>{}</Combiner>",
                    xml_escape(&kind_call(c).to_string())
                );
            }
            if f.append_only {
                let _ = writeln!(o, "        <AppendOnly>true</AppendOnly>");
            }
            let _ = writeln!(o, "      </Options>");
            if f.value_index {
                let _ = writeln!(o, "      <Index>true</Index>");
            }
            if f.qualifier_index {
                let _ = writeln!(o, "      <QualifierIndex>true</QualifierIndex>");
            }
            let _ = writeln!(o, "      <Deleted>{}</Deleted>", f.deleted);
            let _ = writeln!(o, "    </ColumnFamily>");
        }
        let _ = writeln!(o, "  </AccessGroup>");
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
    o.push_str("</Schema>\n");
    o
}
