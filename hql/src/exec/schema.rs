//! CREATE TABLE and ALTER TABLE to a [`TableSchema`] (table and group defaults resolved into
//! each family), and a schema back to HQL (SHOW CREATE TABLE) and XML (DESCRIBE TABLE).

use crate::error::Code;
use client::ClientError;
use common::iterators::{CombinerSpec, IterScope, IteratorSpec};
use common::schema::{
    AccessGroupSpec, BloomFilterSpec, ColumnOptionsSet, Compressor, FamilySpec, GroupOptionsSet,
    TableSchema, TimeOrder,
};

use super::{ExecError, Executor, Result};
use crate::ast::{
    AccessGroupDef, AccessGroupOptions, AlterAction, AlterTable, Codec, ColumnOptions, CreateTable,
    CreateTableBody, Definition, FamilyDef, IteratorDef, TableOptions,
};
use crate::parser::token::is_keyword;

/// Family ids are one byte and 0 is reserved.
const MAX_FAMILY_ID: u32 = 255;

/// Hypertable's refusal of a user-named table whose name starts with `^` (index tables are
/// made and dropped with their primary table only).
pub(super) fn check_not_index_name(path: &str) -> Result<()> {
    if client::index::is_index_name(path) {
        return Err(ExecError::coded(
            Code::SyntaxError,
            "Invalid table name character '^'",
        ));
    }
    Ok(())
}

pub(super) fn create_table(ex: &mut Executor, c: &CreateTable) -> Result<()> {
    let path = ex.resolve(&c.name);
    check_not_index_name(&path)?;
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
    let created = ex.client.create_table_split(&path, schema, &splits)?;
    client::index::sync_tables(ex.client.as_ref(), &path, None, &created)?;
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
    ExecError::coded(Code::BadSchema, format!("table '{path}': {e}"))
}

/// Column options as written, TTL in seconds.
fn column_set(o: &ColumnOptions, family: &str) -> Result<ColumnOptionsSet> {
    let ttl_secs = match &o.ttl {
        Some(t) => Some(t.seconds().ok_or_else(|| {
            ExecError::coded(
                Code::BadValue,
                format!(
                    "TTL '{}' of column family '{family}' is too large",
                    t.amount
                ),
            )
        })?),
        None => None,
    };
    Ok(ColumnOptionsSet {
        max_versions: o.max_versions,
        ttl_secs,
        time_order: o.time_order,
        counter: o.counter,
    })
}

/// Access group options as written (specs lower-cased, as Hypertable stores them).
fn group_set(o: &AccessGroupOptions) -> Result<GroupOptionsSet> {
    Ok(GroupOptionsSet {
        replication: o.replication,
        blocksize: o.blocksize,
        compressor: o.compressor.as_ref().map(|c| c.text.to_lowercase()),
        bloom_filter: o.bloom_filter.as_ref().map(|b| b.text.to_lowercase()),
        in_memory: o.in_memory,
        column_defaults: column_set(&o.column_defaults, "(defaults)")?,
    })
}

/// Sets a family's effective options from the options set on it (defaults merged in).
fn apply_set(f: &mut FamilySpec, set: &ColumnOptionsSet) {
    f.max_versions = set.max_versions.unwrap_or(0);
    f.ttl_secs = set.ttl_secs.unwrap_or(0);
    f.time_order = set.time_order.unwrap_or_default();
    f.counter = set.counter.unwrap_or(false);
    f.options_set = Some(set.clone());
}

/// The ht-only family options (`COMBINER`, `APPEND_ONLY`), where written.
fn apply_extensions(f: &mut FamilySpec, o: &ColumnOptions) {
    if let Some(k) = &o.combiner {
        f.combiner = Some(CombinerSpec {
            kind: k.kind.clone(),
            options: k.options.clone(),
        });
    }
    if let Some(b) = o.append_only {
        f.append_only = b;
    }
}

/// The table-wide defaults of a schema (none recorded in older schemas).
fn table_set(s: &TableSchema) -> GroupOptionsSet {
    s.defaults_set.clone().unwrap_or_default()
}

/// A family's options (as written, its group's defaults merged in) with the table's defaults
/// merged in. As in Hypertable, a table default that makes a COUNTER family keep versions or
/// order them newest first, or that makes a family with either a COUNTER, is refused
/// (INCOMPATIBLE_OPTIONS), naming the pair by which was set last.
fn merge_table_defaults(
    family: &str,
    own: ColumnOptionsSet,
    table: &ColumnOptionsSet,
) -> Result<ColumnOptionsSet> {
    let desc = |o: Option<TimeOrder>| o == Some(TimeOrder::Desc);
    let clash = if own.counter == Some(true) {
        if own.max_versions.is_none() && table.max_versions.is_some() {
            Some("MAX VERSIONS")
        } else if own.time_order.is_none() && desc(table.time_order) {
            Some("TIME_ORDER_DESC")
        } else {
            None
        }
    } else if own.counter.is_none() && table.counter == Some(true) {
        if own.max_versions.is_some() {
            Some("MAX_VERSIONS")
        } else if desc(own.time_order) {
            Some("TIME_ORDER_DESC")
        } else {
            None
        }
    } else {
        None
    };
    if let Some(other) = clash {
        return Err(ExecError::with_hypertable(
            Code::IncompatibleOptions,
            format!(
                "Merging column '{family}' options with table defaults: COUNTER and {other} are \
                 incompatible"
            ),
            format!(
                "COUNTER cannot be combined with MAX_VERSIONS or TIME_ORDER DESC (column \
                 '{family}' with the table defaults)"
            ),
        ));
    }
    Ok(own.or(table))
}

/// A group's own column defaults (none recorded in older schemas).
fn group_column_defaults(s: &TableSchema, group: &str) -> ColumnOptionsSet {
    s.access_groups
        .iter()
        .find(|g| g.name == group)
        .and_then(|g| g.options_set.as_ref())
        .map(|o| o.column_defaults.clone())
        .unwrap_or_default()
}

/// A schema for CREATE TABLE, laid out as Hypertable lays it out: access groups in the order
/// of their clauses, `default` (when a family has no group) after them; each group's families
/// in order of first mention anywhere in the statement; family ids assigned group by group.
/// Group and table defaults are merged into each family (and table group defaults into each
/// group), and what was set is recorded for SHOW CREATE TABLE and DESCRIBE TABLE.
fn build(path: &str, defs: &[Definition], opts: &TableOptions) -> Result<TableSchema> {
    let table_defaults = &opts.group_defaults;
    let table_set = group_set(table_defaults)?;
    // Families in order of first mention, with their definition (if written) and group.
    let mut fams: Vec<(String, Option<&FamilyDef>, Option<&AccessGroupDef>)> = Vec::new();
    for d in defs {
        match d {
            Definition::Family(fd) => match fams.iter_mut().find(|f| f.0 == fd.name) {
                Some(f) if f.1.is_some() => {
                    return Err(ExecError::invalid(format!(
                        "Column family '{}' multiply defined",
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
                                "Attempt to add column '{name}' to access group '{}' when it \
                                 already belongs to access group '{}'",
                                g.name, other.name
                            )));
                        }
                        Some(f) => f.2 = Some(g),
                        None => fams.push((name.clone(), None, Some(g))),
                    }
                }
            }
            Definition::Index(name) | Definition::QualifierIndex(name) => {
                if !fams.iter().any(|f| f.0 == *name) {
                    fams.push((name.clone(), None, None));
                }
            }
            Definition::Iterator(_) | Definition::RowKey(_) => {}
        }
    }
    let defined = |name: &str| {
        defs.iter().any(|d| match d {
            Definition::Family(fd) => fd.name == name,
            Definition::AccessGroup(g) => g.families.iter().any(|f| f == name),
            _ => false,
        })
    };
    if let Some(f) = fams.iter().find(|f| !defined(&f.0)) {
        return Err(ExecError::invalid(format!(
            "Reference to undefined column '{}'",
            f.0
        )));
    }
    if fams.len() > MAX_FAMILY_ID as usize {
        return Err(too_many_families());
    }
    let mut groups: Vec<(&str, Option<&AccessGroupDef>)> = Vec::new();
    for d in defs {
        if let Definition::AccessGroup(gd) = d {
            if groups.iter().any(|(n, _)| *n == gd.name) {
                return Err(ExecError::invalid(format!(
                    "Multiple definitions for access group '{}'",
                    gd.name
                )));
            }
            groups.push((gd.name.as_str(), Some(gd)));
        }
    }
    if fams.iter().any(|f| f.2.is_none()) && !groups.iter().any(|(n, _)| *n == "default") {
        groups.push(("default", None));
    }
    let mut schema = TableSchema::new(0, path);
    schema.access_groups.clear();
    schema.defaults_set = Some(table_set.clone());
    let generation = schema.generation;
    let mut next_id: u8 = 1;
    for (name, gd) in &groups {
        let mut g = AccessGroupSpec::new(*name);
        apply_group(&mut g, table_defaults);
        let own = match gd {
            Some(gd) => {
                apply_group(&mut g, &gd.options);
                group_set(&gd.options)?
            }
            None => GroupOptionsSet::default(),
        };
        g.options_set = Some(own.or(&table_set));
        g.generation = generation;
        for (fname, fd, _) in fams
            .iter()
            .filter(|f| f.2.map_or("default", |g| g.name.as_str()) == *name)
        {
            let written = match fd {
                Some(fd) => column_set(&fd.options, fname)?,
                None => ColumnOptionsSet::default(),
            };
            let mut f = FamilySpec::new(next_id, fname.clone(), *name);
            apply_set(
                &mut f,
                &merge_table_defaults(
                    fname,
                    written.or(&own.column_defaults),
                    &table_set.column_defaults,
                )?,
            );
            if let Some(fd) = fd {
                apply_extensions(&mut f, &fd.options);
            }
            f.generation = generation;
            schema.families.push(f);
            next_id = next_id.wrapping_add(1);
        }
        schema.access_groups.push(g);
    }
    for d in defs {
        set_index(&mut schema, true, d, true)?;
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

fn too_many_families() -> ExecError {
    ExecError::coded(
        Code::TooManyColumns,
        format!("Attempt to add > {MAX_FAMILY_ID} column families to table"),
    )
}

/// Applies `INDEX f` / `QUALIFIER INDEX f` (other definitions are ignored); an index given
/// twice is an error, as in Hypertable.
fn set_index(schema: &mut TableSchema, creating: bool, d: &Definition, on: bool) -> Result<()> {
    let (name, qualifier) = match d {
        Definition::Index(n) => (n, false),
        Definition::QualifierIndex(n) => (n, true),
        _ => return Ok(()),
    };
    let generation = schema.generation;
    let f = schema
        .families
        .iter_mut()
        .find(|f| !f.deleted && f.name == *name)
        .ok_or_else(|| {
            ExecError::invalid(if on {
                format!("Reference to undefined column '{name}'")
            } else {
                format!("Attempt to drop index from column '{name}' which does not exist")
            })
        })?;
    let flag = if qualifier {
        &mut f.qualifier_index
    } else {
        &mut f.value_index
    };
    if on && f.counter {
        return Err(ExecError::invalid(format!(
            "Attempt to define {} index for COUNTER column '{name}'",
            if qualifier { "qualifier" } else { "value" }
        )));
    }
    if on && *flag {
        return Err(ExecError::invalid(format!(
            "{} for column family '{name}' {}",
            if qualifier {
                "Qualifier index"
            } else {
                "Index"
            },
            // Hypertable's words: "multiply defined" in CREATE TABLE, "already defined" in
            // ALTER TABLE.
            if creating {
                "multiply defined"
            } else {
                "already defined"
            }
        )));
    }
    if *flag != on {
        *flag = on;
        f.generation = generation;
    }
    Ok(())
}

fn live_family_mut<'a>(schema: &'a mut TableSchema, name: &str) -> Option<&'a mut FamilySpec> {
    schema
        .families
        .iter_mut()
        .find(|f| !f.deleted && f.name == name)
}

fn next_family_id(schema: &TableSchema) -> Result<u8> {
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
        .ok_or_else(too_many_families)
}

fn row_key_fixed(path: &str) -> ExecError {
    ExecError::invalid(format!(
        "ALTER TABLE cannot add or change the ROW KEY of table '{path}': its rows are \
         already written in their layout"
    ))
}

/// Adds a new family at the end of its access group (`default`, created at the end when
/// missing, unless `group` names another), with the group's and the table's column defaults
/// merged in.
fn add_family(s: &mut TableSchema, fd: &FamilyDef, group: &str) -> Result<()> {
    if s.family(&fd.name).is_some() {
        return Err(ExecError::invalid(format!(
            "Attempt to add column '{}' which already exists",
            fd.name
        )));
    }
    let id = next_family_id(s)?;
    if !s.access_groups.iter().any(|g| g.name == group) {
        let mut g = AccessGroupSpec::new(group);
        let defaults = table_set(s);
        apply_group_set(&mut g, &defaults);
        g.options_set = Some(GroupOptionsSet::default().or(&defaults));
        g.generation = s.generation;
        s.access_groups.push(g);
    }
    let set = merge_table_defaults(
        &fd.name,
        column_set(&fd.options, &fd.name)?.or(&group_column_defaults(s, group)),
        &table_set(s).column_defaults,
    )?;
    let mut f = FamilySpec::new(id, fd.name.clone(), group);
    apply_set(&mut f, &set);
    apply_extensions(&mut f, &fd.options);
    f.generation = s.generation;
    s.families.push(f);
    Ok(())
}

/// Effective group options from recorded ones (for a group ALTER creates: `default` with the
/// table's group defaults).
fn apply_group_set(g: &mut AccessGroupSpec, set: &GroupOptionsSet) {
    if let Some(b) = set.in_memory {
        g.in_memory = b;
    }
    if let Some(n) = set.blocksize {
        g.blocksize_bytes = n;
    }
    if let Some(n) = set.replication {
        g.replication = Some(n);
    }
}

/// MODIFY of a family: it starts afresh (its id, group and index flags kept, every option
/// not restated dropped, group and table defaults merged in again); TIME_ORDER and COUNTER
/// may not change. The ht options COMBINER and APPEND_ONLY stay unless restated.
fn modify_family(s: &mut TableSchema, fd: &FamilyDef) -> Result<()> {
    let Some(group) = s.family(&fd.name).map(|f| f.access_group.clone()) else {
        return Err(ExecError::invalid(format!(
            "Attempt to modify column '{}' which does not exist",
            fd.name
        )));
    };
    let set = merge_table_defaults(
        &fd.name,
        column_set(&fd.options, &fd.name)?.or(&group_column_defaults(s, &group)),
        &table_set(s).column_defaults,
    )?;
    let generation = s.generation;
    let f = live_family_mut(s, &fd.name).expect("checked above");
    if set.time_order.unwrap_or_default() != f.time_order {
        return Err(ExecError::invalid(format!(
            "Modificaton of TIME ORDER option for column '{}' is not allowed.",
            fd.name
        )));
    }
    if set.counter.unwrap_or(false) != f.counter {
        return Err(ExecError::invalid(format!(
            "Modificaton of COUNTER option for column '{}' is not allowed.",
            fd.name
        )));
    }
    apply_set(f, &set);
    apply_extensions(f, &fd.options);
    f.generation = generation;
    Ok(())
}

/// MODIFY of an access group: it starts afresh (table defaults merged in again) and moves to
/// the end; it must list every live member, and only BLOCKSIZE and column defaults may be
/// given. Members take the new column defaults for options they do not set.
fn modify_group(s: &mut TableSchema, gd: &AccessGroupDef) -> Result<()> {
    let Some(at) = s.access_groups.iter().position(|g| g.name == gd.name) else {
        return Err(ExecError::invalid(format!(
            "Attempt to modify access group '{}' which does not exist",
            gd.name
        )));
    };
    let o = &gd.options;
    for (given, what) in [
        (o.in_memory.is_some(), "IN_MEMORY"),
        (o.compressor.is_some(), "COMPRESSOR"),
        (o.bloom_filter.is_some(), "BLOOMFILTER"),
        (o.replication.is_some(), "REPLICATION"),
    ] {
        if given {
            return Err(ExecError::invalid(format!(
                "Modification of {what} attribute for access group '{}' is not supported",
                gd.name
            )));
        }
    }
    for (i, name) in gd.families.iter().enumerate() {
        if gd.families[..i].contains(name) {
            return Err(ExecError::invalid(format!(
                "Bad modify command - attempt to add column '{name}' to access group '{}' twice",
                gd.name
            )));
        }
        match s.family(name) {
            None => {
                return Err(ExecError::invalid(format!(
                    "Attempt to modify column '{name}' which does not exist"
                )));
            }
            Some(f) if f.access_group != gd.name => {
                return Err(ExecError::invalid(format!(
                    "Bad modify command - moving column '{name}' from access group '{}' to \
                     '{}' is not supported",
                    f.access_group, gd.name
                )));
            }
            Some(_) => {}
        }
    }
    if let Some(f) = s
        .families
        .iter()
        .find(|f| !f.deleted && f.access_group == gd.name && !gd.families.contains(&f.name))
    {
        return Err(ExecError::invalid(format!(
            "Missing column '{}' from modified access group '{}'",
            f.name, gd.name
        )));
    }
    let defaults = table_set(s);
    let own = group_set(o)?;
    let mut g = s.access_groups.remove(at);
    g.blocksize_bytes = own
        .blocksize
        .or(defaults.blocksize)
        .unwrap_or(AccessGroupSpec::new("").blocksize_bytes);
    g.options_set = Some(own.or(&defaults));
    g.generation = s.generation;
    s.access_groups.push(g);
    let generation = s.generation;
    for f in s
        .families
        .iter_mut()
        .filter(|f| !f.deleted && f.access_group == gd.name)
    {
        let set = f
            .options_set
            .clone()
            .unwrap_or_else(|| ColumnOptionsSet::from_effective(f))
            .or(&own.column_defaults);
        if set != f.options_set.clone().unwrap_or_default() {
            apply_set(f, &set);
            f.generation = generation;
        }
    }
    Ok(())
}

/// ADD of an access group with its (new) families.
fn add_group(s: &mut TableSchema, gd: &AccessGroupDef, defs: &[Definition]) -> Result<()> {
    if s.access_groups.iter().any(|g| g.name == gd.name) {
        return Err(ExecError::coded(
            Code::BadSchema,
            format!(
                "Attempt to add access group '{}' which already exists",
                gd.name
            ),
        ));
    }
    let defaults = table_set(s);
    let mut g = AccessGroupSpec::new(gd.name.clone());
    apply_group_set(&mut g, &defaults);
    apply_group(&mut g, &gd.options);
    g.options_set = Some(group_set(&gd.options)?.or(&defaults));
    g.generation = s.generation;
    s.access_groups.push(g);
    for name in &gd.families {
        let written = defs.iter().find_map(|d| match d {
            Definition::Family(fd) if fd.name == *name => Some(fd.clone()),
            _ => None,
        });
        let fd = written.unwrap_or_else(|| FamilyDef {
            name: name.clone(),
            options: ColumnOptions::default(),
        });
        add_family(s, &fd, &gd.name)?;
    }
    Ok(())
}

/// ALTER TABLE as Hypertable runs it: DROP, RENAME, DROP INDEX and INDEX on an existing
/// family take effect at once, clause by clause (so a later clause may reuse a freed name);
/// ADD and MODIFY are applied at the end, in the order written.
pub(super) fn alter_table(ex: &mut Executor, a: &AlterTable) -> Result<()> {
    let path = ex.resolve(&a.table);
    check_not_index_name(&path)?;
    let mut s = ex.client.table_schema(&path)?;
    let old = s.clone();
    // The generation the server gives the altered schema: what changes is marked with it.
    s.generation += 1;
    let mut later: Vec<(bool, &[Definition])> = Vec::new();
    // INDEX clauses applied as read (their family existed then), not again at the end.
    let mut set_at_once: Vec<&Definition> = Vec::new();
    for action in &a.actions {
        match action {
            AlterAction::Add(defs) | AlterAction::Modify(defs) => {
                let modify = matches!(action, AlterAction::Modify(_));
                for d in defs {
                    match d {
                        Definition::Index(n) | Definition::QualifierIndex(n)
                            if s.family(n).is_some() =>
                        {
                            set_index(&mut s, false, d, true)?;
                            set_at_once.push(d);
                        }
                        Definition::RowKey(_) => return Err(row_key_fixed(&path)),
                        Definition::Iterator(i) if modify => {
                            return Err(ExecError::invalid(format!(
                                "ALTER TABLE MODIFY cannot change iterator '{}' of table \
                                 '{path}': DROP ITERATOR it and ADD it again",
                                i.name
                            )));
                        }
                        _ => {}
                    }
                }
                later.push((modify, defs));
            }
            AlterAction::Drop(names) => {
                for n in names {
                    let generation = s.generation;
                    match live_family_mut(&mut s, n) {
                        Some(f) => {
                            f.deleted = true;
                            f.generation = generation;
                        }
                        None => {
                            let dropped = s.families.iter().any(|f| f.deleted && f.name == *n);
                            return Err(ExecError::invalid(format!(
                                "Attempt to drop column '{n}' which {}",
                                if dropped {
                                    "is already dropped"
                                } else {
                                    "does not exist"
                                }
                            )));
                        }
                    }
                }
            }
            AlterAction::DropIndex(names) => {
                for n in names {
                    set_index(&mut s, false, &Definition::Index(n.clone()), false)?;
                }
            }
            AlterAction::DropQualifierIndex(names) => {
                for n in names {
                    set_index(&mut s, false, &Definition::QualifierIndex(n.clone()), false)?;
                }
            }
            AlterAction::RenameColumnFamily { from, to } => {
                if s.family(from).is_none() {
                    return Err(ExecError::invalid(format!(
                        "Attempt to rename column family '{from}' which does not exist"
                    )));
                }
                if s.family(to).is_some() {
                    return Err(ExecError::invalid(format!(
                        "Attempt to rename column '{from}' to '{to}', which already exists"
                    )));
                }
                let generation = s.generation;
                let f = live_family_mut(&mut s, from).expect("checked above");
                f.name = to.clone();
                f.generation = generation;
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
    let mut modified_groups: Vec<&str> = Vec::new();
    for (modify, defs) in later {
        if modify {
            for d in defs {
                match d {
                    Definition::Family(fd) => modify_family(&mut s, fd)?,
                    Definition::AccessGroup(gd) => {
                        if modified_groups.contains(&gd.name.as_str()) {
                            return Err(ExecError::invalid(format!(
                                "Attempt to modify access group '{}' twice in the same command",
                                gd.name
                            )));
                        }
                        modified_groups.push(&gd.name);
                        modify_group(&mut s, gd)?;
                    }
                    // An index on a family that existed when its clause was read was set
                    // then (the immediate pass); only one on a family added since is left.
                    Definition::Index(_) | Definition::QualifierIndex(_)
                        if !set_at_once.iter().any(|&x| std::ptr::eq(x, d)) =>
                    {
                        set_index(&mut s, false, d, true)?;
                    }
                    Definition::Index(_)
                    | Definition::QualifierIndex(_)
                    | Definition::Iterator(_)
                    | Definition::RowKey(_) => {}
                }
            }
        } else {
            let in_group = |name: &str| {
                defs.iter().any(|d| {
                    matches!(d, Definition::AccessGroup(g) if g.families.iter().any(|f| f == name))
                })
            };
            for d in defs {
                match d {
                    Definition::Family(fd) if !in_group(&fd.name) => {
                        add_family(&mut s, fd, "default")?;
                    }
                    Definition::AccessGroup(gd) => add_group(&mut s, gd, defs)?,
                    _ => {}
                }
            }
            for d in defs {
                if let Definition::Index(_) | Definition::QualifierIndex(_) = d
                    && !set_at_once.iter().any(|&x| std::ptr::eq(x, d))
                {
                    set_index(&mut s, false, d, true)?;
                }
            }
            add_iterators(&mut s, &path, &iterator_defs(defs))?;
        }
    }
    s.generation = old.generation;
    if s == old {
        return Ok(());
    }
    s.validate().map_err(|e| schema_error(&path, e))?;
    match ex.client.alter_table(&path, s) {
        Err(ClientError::InvalidInput(m)) => Err(ExecError::invalid(format!(
            "cannot alter table '{path}': {m}"
        ))),
        r => {
            // Index tables follow: made (and filled from the table) for a first index of a
            // kind, dropped with the last.
            client::index::sync_tables(ex.client.as_ref(), &path, Some(&old), &r?)?;
            Ok(())
        }
    }
}

mod print;
pub(super) use print::{describe, show_create};
