//! Table schemas: access groups, column families and their options, table durability.
//!
//! Options here are the effective ones: defaults given on a table or access group in HQL are
//! resolved into each family by the HQL layer before a schema reaches the engine.

use serde::{Deserialize, Serialize};

use crate::iterators::{CombinerSpec, IteratorSettingError, IteratorSpec, check_iterators};

/// How far a write must get before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Not logged: durable only once its cell cache is written as a cell store.
    None,
    /// Appended to the commit log, not flushed.
    Log,
    /// Appended and flushed (to all replicas' memory on a distributed file system).
    #[default]
    Flush,
    /// Appended and synced to stable storage.
    Sync,
}

impl Durability {
    /// The HQL spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Log => "log",
            Self::Flush => "flush",
            Self::Sync => "sync",
        }
    }

    /// Parses the HQL spelling (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "log" => Self::Log,
            "flush" => Self::Flush,
            "sync" => Self::Sync,
            _ => return None,
        })
    }
}

/// Order in which a family's versions are returned. Hypertable's names: `Asc` (the default)
/// returns newest first, `Desc` oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum TimeOrder {
    #[default]
    Asc,
    Desc,
}

/// Block compression of a cell store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Compressor {
    None,
    #[default]
    Lz4,
}

/// Which keys a cell store's bloom filter holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum BloomFilterMode {
    None,
    #[default]
    Rows,
    RowsCols,
}

/// Bloom filter settings of an access group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BloomFilterSpec {
    pub mode: BloomFilterMode,
    /// Target false-positive rate; used when `bits_per_item` is not given.
    pub false_positive: f64,
    pub bits_per_item: Option<f64>,
    pub num_hashes: Option<u32>,
}

impl Default for BloomFilterSpec {
    fn default() -> Self {
        Self {
            mode: BloomFilterMode::Rows,
            false_positive: 0.01,
            bits_per_item: None,
            num_hashes: None,
        }
    }
}

/// Column-family options as HQL set them, each `None` unless written at some level (family,
/// its access group's column defaults, the table's): what SHOW CREATE TABLE and DESCRIBE
/// TABLE print. As in Hypertable, an option never set is never printed; the effective values
/// the engine uses are in [`FamilySpec`]'s own fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnOptionsSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_versions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_order: Option<TimeOrder>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<bool>,
}

impl ColumnOptionsSet {
    /// These options, with `defaults` filling the ones not set here (Hypertable's merge of
    /// group and table defaults into a family).
    pub fn or(&self, defaults: &ColumnOptionsSet) -> ColumnOptionsSet {
        ColumnOptionsSet {
            max_versions: self.max_versions.or(defaults.max_versions),
            ttl_secs: self.ttl_secs.or(defaults.ttl_secs),
            time_order: self.time_order.or(defaults.time_order),
            counter: self.counter.or(defaults.counter),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// What a schema written before options were recorded shows: its non-default values.
    pub fn from_effective(f: &FamilySpec) -> ColumnOptionsSet {
        ColumnOptionsSet {
            max_versions: (f.max_versions > 0).then_some(f.max_versions),
            ttl_secs: (f.ttl_secs > 0).then_some(f.ttl_secs),
            time_order: (f.time_order == TimeOrder::Desc).then_some(TimeOrder::Desc),
            counter: f.counter.then_some(true),
        }
    }
}

/// Access-group options as HQL set them (see [`ColumnOptionsSet`]), with the column defaults
/// written on the group (or, for a table, after its closing parenthesis).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOptionsSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocksize: Option<u32>,
    /// The spec as written, lower-cased (`"zlib --best"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressor: Option<String>,
    /// The spec as written, lower-cased (`"rows+cols --false-positive 0.02"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bloom_filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_memory: Option<bool>,
    #[serde(default, skip_serializing_if = "ColumnOptionsSet::is_empty")]
    pub column_defaults: ColumnOptionsSet,
}

impl GroupOptionsSet {
    /// The group options set here, with `defaults` filling the others; the column defaults
    /// are this group's own (Hypertable does not merge a table's column defaults into a
    /// group's).
    pub fn or(&self, defaults: &GroupOptionsSet) -> GroupOptionsSet {
        GroupOptionsSet {
            replication: self.replication.or(defaults.replication),
            blocksize: self.blocksize.or(defaults.blocksize),
            compressor: self
                .compressor
                .clone()
                .or_else(|| defaults.compressor.clone()),
            bloom_filter: self
                .bloom_filter
                .clone()
                .or_else(|| defaults.bloom_filter.clone()),
            in_memory: self.in_memory.or(defaults.in_memory),
            column_defaults: self.column_defaults.clone(),
        }
    }
}

/// An access group: families stored together in their own files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccessGroupSpec {
    pub name: String,
    pub in_memory: bool,
    /// Target uncompressed size of a cell-store data block.
    pub blocksize_bytes: u32,
    pub compressor: Compressor,
    /// The compressor name as given in HQL when ht maps it to another codec (bmz, zlib, ...),
    /// so SHOW CREATE TABLE can say so; `None` when it is the codec used.
    #[serde(default)]
    pub compressor_requested: Option<String>,
    pub bloom_filter: BloomFilterSpec,
    pub replication: Option<u16>,
    /// The options HQL set (table defaults merged in), for SHOW CREATE TABLE and DESCRIBE
    /// TABLE; `None` in schemas written before they were recorded (their effective values
    /// are shown instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options_set: Option<GroupOptionsSet>,
    /// The table generation that last created or changed this group (DESCRIBE ... WITH IDS).
    #[serde(default)]
    pub generation: u64,
}

impl AccessGroupSpec {
    /// A group with default options.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            in_memory: false,
            blocksize_bytes: 64 * 1024,
            compressor: Compressor::Lz4,
            compressor_requested: None,
            bloom_filter: BloomFilterSpec::default(),
            replication: None,
            options_set: None,
            generation: 0,
        }
    }
}

/// A column family with its effective options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilySpec {
    /// 1..=255; ids are never reused within a table.
    pub id: u8,
    pub name: String,
    pub access_group: String,
    /// 0 means unlimited.
    pub max_versions: u32,
    /// Seconds; 0 means cells never expire.
    pub ttl_secs: u64,
    pub time_order: TimeOrder,
    pub counter: bool,
    /// Dropped by ALTER TABLE: its cells are no longer returned and compactions drop them.
    pub deleted: bool,
    /// HQL `INDEX family`: a value index is kept.
    #[serde(default)]
    pub value_index: bool,
    /// HQL `QUALIFIER INDEX family`: a qualifier index is kept.
    #[serde(default)]
    pub qualifier_index: bool,
    /// HQL `COMBINER kind(...)`: the versions of each cell are merged into one. `COUNTER`
    /// families keep `counter` and no combiner here; [`FamilySpec::effective_combiner`]
    /// gives either.
    #[serde(default)]
    pub combiner: Option<CombinerSpec>,
    /// HQL `APPEND_ONLY`: cell, version and family deletes are refused (row deletes too, on
    /// the whole table), so partial compactions may combine the family's cells.
    #[serde(default)]
    pub append_only: bool,
    /// The options HQL set, group and table defaults merged in (see [`ColumnOptionsSet`]);
    /// `None` in schemas written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options_set: Option<ColumnOptionsSet>,
    /// The table generation that last created or changed this family (DESCRIBE ... WITH IDS).
    #[serde(default)]
    pub generation: u64,
}

impl FamilySpec {
    /// A family with default options in `access_group`.
    pub fn new(id: u8, name: impl Into<String>, access_group: impl Into<String>) -> Self {
        Self {
            id,
            name: name.into(),
            access_group: access_group.into(),
            max_versions: 0,
            ttl_secs: 0,
            time_order: TimeOrder::Asc,
            counter: false,
            deleted: false,
            value_index: false,
            qualifier_index: false,
            combiner: None,
            append_only: false,
            options_set: None,
            generation: 0,
        }
    }

    /// The combiner the family's cells are merged with: its `COMBINER`, or `counter` for a
    /// `COUNTER` family.
    pub fn effective_combiner(&self) -> Option<CombinerSpec> {
        match (&self.combiner, self.counter) {
            (Some(c), _) => Some(c.clone()),
            (None, true) => Some(CombinerSpec::counter()),
            (None, false) => None,
        }
    }
}

/// A table's schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableSchema {
    /// Stable id, used in file paths; never reused.
    pub id: u32,
    /// Full name including namespace, e.g. `/ns/table`.
    pub name: String,
    /// Incremented by every ALTER TABLE.
    pub generation: u64,
    pub access_groups: Vec<AccessGroupSpec>,
    pub families: Vec<FamilySpec>,
    pub durability: Durability,
    pub group_commit_interval_ms: u32,
    /// Table iterators (HQL `ITERATOR name = kind(...) SCOPES (...) PRIORITY n`).
    #[serde(default)]
    pub iterators: Vec<IteratorSpec>,
    /// A composite row key (HQL `ROW KEY (...)`, an ht extension); `None` for plain rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_key: Option<crate::row_key::RowKeySpec>,
    /// The table-wide defaults HQL set after the closing parenthesis: access-group options
    /// and column options (`None` in schemas written before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults_set: Option<GroupOptionsSet>,
}

/// Why a schema is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("column family id 0 is reserved (family '{0}')")]
    ReservedFamilyId(String),
    #[error("duplicate column family '{0}'")]
    DuplicateFamily(String),
    #[error("duplicate column family id {0}")]
    DuplicateFamilyId(u8),
    #[error("duplicate access group '{0}'")]
    DuplicateAccessGroup(String),
    #[error("column family '{family}' names unknown access group '{group}'")]
    UnknownAccessGroup { family: String, group: String },
    #[error("COUNTER column family '{0}' cannot have MAX_VERSIONS or TIME_ORDER DESC")]
    BadCounter(String),
    #[error("COMBINER column family '{0}' cannot have MAX_VERSIONS or TIME_ORDER DESC")]
    BadCombiner(String),
    #[error("column family '{0}' cannot be both COUNTER and COMBINER")]
    CounterAndCombiner(String),
    #[error(
        "APPEND_ONLY column family '{0}' cannot have a TTL (a partial compaction would carry an \
         expired value into a newer combined one)"
    )]
    AppendOnlyTtl(String),
    #[error("{0}")]
    Iterators(#[from] IteratorSettingError),
    #[error("unknown column family '{0}'")]
    UnknownFamily(String),
    #[error("a column family name cannot be empty")]
    EmptyFamilyName,
    #[error(
        "column family name {0:?} cannot be written: names contain no ':' (it separates \
         family and qualifier) and no control characters"
    )]
    UnwritableFamilyName(String),
    #[error("a table needs at least one column family")]
    NoFamily,
    #[error("{0}")]
    RowKey(#[from] crate::row_key::RowKeyError),
    #[error("'{0}' names both a ROW KEY part and a column family")]
    PartIsFamily(String),
}

/// Whether cells of a family of this name can be written and read back: `family:qualifier`
/// splits at the first `:`, and the dump format writes family names as they are (a tab or
/// newline in one would break its line).
fn check_family_name(name: &str) -> Result<(), SchemaError> {
    if name.is_empty() {
        return Err(SchemaError::EmptyFamilyName);
    }
    if name.contains(':') || name.chars().any(char::is_control) {
        return Err(SchemaError::UnwritableFamilyName(name.to_string()));
    }
    Ok(())
}

impl TableSchema {
    /// A schema with one access group `default` and no families.
    pub fn new(id: u32, name: impl Into<String>) -> Self {
        Self {
            id,
            name: name.into(),
            generation: 1,
            access_groups: vec![AccessGroupSpec::new("default")],
            families: Vec::new(),
            durability: Durability::Flush,
            group_commit_interval_ms: 0,
            iterators: Vec::new(),
            row_key: None,
            defaults_set: None,
        }
    }

    /// Adds a family with default options to `default`, creating the group if needed; returns its id.
    pub fn add_family(&mut self, name: &str) -> u8 {
        let id = self.families.iter().map(|f| f.id).max().unwrap_or(0) + 1;
        if !self.access_groups.iter().any(|g| g.name == "default") {
            self.access_groups.push(AccessGroupSpec::new("default"));
        }
        self.families.push(FamilySpec::new(id, name, "default"));
        id
    }

    /// Checks ids, names, group references and option combinations, and that at least one
    /// family is live.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let mut ids = [false; 256];
        for (i, g) in self.access_groups.iter().enumerate() {
            if self.access_groups[..i].iter().any(|o| o.name == g.name) {
                return Err(SchemaError::DuplicateAccessGroup(g.name.clone()));
            }
        }
        for (i, f) in self.families.iter().enumerate() {
            if f.id == 0 {
                return Err(SchemaError::ReservedFamilyId(f.name.clone()));
            }
            if ids[f.id as usize] {
                return Err(SchemaError::DuplicateFamilyId(f.id));
            }
            ids[f.id as usize] = true;
            if !f.deleted {
                check_family_name(&f.name)?;
            }
            if !f.deleted
                && self.families[..i]
                    .iter()
                    .any(|o| !o.deleted && o.name == f.name)
            {
                return Err(SchemaError::DuplicateFamily(f.name.clone()));
            }
            if !self.access_groups.iter().any(|g| g.name == f.access_group) {
                return Err(SchemaError::UnknownAccessGroup {
                    family: f.name.clone(),
                    group: f.access_group.clone(),
                });
            }
            if f.counter && f.combiner.is_some() {
                return Err(SchemaError::CounterAndCombiner(f.name.clone()));
            }
            if f.counter && (f.max_versions != 0 || f.time_order == TimeOrder::Desc) {
                return Err(SchemaError::BadCounter(f.name.clone()));
            }
            if f.combiner.is_some() && (f.max_versions != 0 || f.time_order == TimeOrder::Desc) {
                return Err(SchemaError::BadCombiner(f.name.clone()));
            }
            if f.append_only && f.ttl_secs != 0 {
                return Err(SchemaError::AppendOnlyTtl(f.name.clone()));
            }
        }
        if self.families.iter().all(|f| f.deleted) {
            return Err(SchemaError::NoFamily);
        }
        check_iterators(&self.iterators)?;
        if let Some(k) = &self.row_key {
            k.validate()?;
            if let Some(p) = k.parts.iter().find(|p| self.family(&p.name).is_some()) {
                return Err(SchemaError::PartIsFamily(p.name.clone()));
            }
        }
        Ok(())
    }

    /// The live family with this name.
    pub fn family(&self, name: &str) -> Option<&FamilySpec> {
        self.families.iter().find(|f| !f.deleted && f.name == name)
    }

    /// The family with this id, live or dropped.
    pub fn family_by_id(&self, id: u8) -> Option<&FamilySpec> {
        self.families.iter().find(|f| f.id == id)
    }

    /// Per family id, the index of its access group in `access_groups` (`None` for unused ids).
    pub fn group_index_by_family(&self) -> [Option<u8>; 256] {
        let mut out = [None; 256];
        for f in &self.families {
            if let Some(i) = self
                .access_groups
                .iter()
                .position(|g| g.name == f.access_group)
            {
                out[f.id as usize] = Some(i as u8);
            }
        }
        out
    }

    /// Serializes to JSON (the persisted form of a schema).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("schema serializes")
    }

    /// Parses the persisted form.
    pub fn from_json(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_catches_bad_schemas() {
        let mut s = TableSchema::new(1, "/t");
        s.add_family("a");
        s.add_family("b");
        assert!(s.validate().is_ok());
        let mut dup = s.clone();
        dup.families[1].name = "a".into();
        assert_eq!(
            dup.validate(),
            Err(SchemaError::DuplicateFamily("a".into()))
        );
        let mut ctr = s.clone();
        ctr.families[0].counter = true;
        ctr.families[0].max_versions = 3;
        assert_eq!(ctr.validate(), Err(SchemaError::BadCounter("a".into())));
        let mut ag = s.clone();
        ag.families[0].access_group = "nope".into();
        assert!(matches!(
            ag.validate(),
            Err(SchemaError::UnknownAccessGroup { .. })
        ));
        let back = TableSchema::from_json(&s.to_json()).unwrap();
        assert_eq!(back, s);
    }

    /// Issue 12: families that can never be written (`c:d`, `""`) and tables with no family
    /// were accepted.
    #[test]
    fn unwritable_family_names_and_tables_without_families_are_refused() {
        let mut s = TableSchema::new(1, "/t");
        assert_eq!(s.validate(), Err(SchemaError::NoFamily));
        s.add_family("a");
        assert_eq!(s.validate(), Ok(()));
        for bad in ["c:d", "tab\there", "new\nline"] {
            let mut b = s.clone();
            b.add_family(bad);
            assert_eq!(
                b.validate(),
                Err(SchemaError::UnwritableFamilyName(bad.into()))
            );
        }
        let mut b = s.clone();
        b.add_family("");
        assert_eq!(b.validate(), Err(SchemaError::EmptyFamilyName));
        // Every family dropped: none left to write to.
        let mut b = s.clone();
        b.families[0].deleted = true;
        assert_eq!(b.validate(), Err(SchemaError::NoFamily));
        // A dropped family keeps whatever name it had (old schemas still read).
        let mut b = s.clone();
        b.add_family("x:y");
        b.families[1].deleted = true;
        assert_eq!(b.validate(), Ok(()));
    }
}
