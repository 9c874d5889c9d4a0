//! The cells continuous ingest writes, in Accumulo's layout: one cell per node of a linked
//! list. The row is a random 64-bit id as 16 hex digits; the family one of the table's
//! families `f00`..; the qualifier a random number as 4 hex digits; the value
//! `<client id, 16 hex>:<count, 16 hex>:<previous row, 16 hex or empty>:<crc32, 8 hex>`, the
//! CRC-32 taken over the row, the family's name, the qualifier and the value up to and
//! including its third colon (Accumulo's `ContinuousIngest.createValue` / `ContinuousWalk.validate`).

use anyhow::{Context, bail};
use client::{Client, ClientError};
use common::key::CellFlag;
use common::{Cell, Mutation, TableSchema};

/// The most families a cingest table may have (family ids are one byte, 0 is reserved).
pub const MAX_FAMILIES: usize = 255;

/// The name of family number `i` (0-based) of a cingest table.
pub fn family_name(i: usize) -> String {
    format!("f{i:02x}")
}

/// The families of a cingest table: ids in order, and the name of each id.
#[derive(Debug, Clone)]
pub struct Families {
    ids: Vec<u8>,
    names: Vec<Option<String>>,
}

impl Families {
    /// The live families of `schema` (every one of them named as cingest names them).
    pub fn of(table: &str, schema: &TableSchema) -> anyhow::Result<Self> {
        let mut ids = Vec::new();
        let mut names = vec![None; 256];
        for f in schema.families.iter().filter(|f| !f.deleted) {
            if !f.name.starts_with('f') || f.name.len() != 3 {
                bail!(
                    "table {table} has family {:?}: not a cingest table (families f00, f01, ...)",
                    f.name
                );
            }
            ids.push(f.id);
            names[f.id as usize] = Some(f.name.clone());
        }
        if ids.is_empty() {
            bail!("table {table} has no family: not a cingest table");
        }
        Ok(Self { ids, names })
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// The id of the `i`-th family (`i < len()`).
    pub fn id(&self, i: usize) -> u8 {
        self.ids[i % self.ids.len()]
    }

    /// The name of family `id`, if the table has it.
    pub fn name(&self, id: u8) -> Option<&str> {
        self.names[id as usize].as_deref()
    }
}

/// The schema of a new cingest table: `families` families keeping one version each (the
/// closing write of a list replaces its first node's value, as Accumulo's versioning does).
pub fn table_schema(families: usize) -> anyhow::Result<TableSchema> {
    if families == 0 || families > MAX_FAMILIES {
        bail!("--families {families}: must be 1..={MAX_FAMILIES}");
    }
    let mut schema = TableSchema::new(0, "");
    for i in 0..families {
        schema.add_family(&family_name(i));
    }
    for f in &mut schema.families {
        f.max_versions = 1;
    }
    Ok(schema)
}

/// Creates the table if it does not exist (another client creating it at the same time is
/// fine) and returns its families.
pub fn ensure_table(client: &dyn Client, table: &str, families: usize) -> anyhow::Result<Families> {
    if !client
        .table_exists(table)
        .with_context(|| format!("cannot look up table {table}"))?
    {
        match client.create_table(table, table_schema(families)?) {
            Ok(_) | Err(ClientError::TableExists(_)) => {}
            Err(e) => return Err(e).with_context(|| format!("cannot create table {table}")),
        }
    }
    open_table(client, table)
}

/// The families of an existing cingest table.
pub fn open_table(client: &dyn Client, table: &str) -> anyhow::Result<Families> {
    let schema = client
        .table_schema(table)
        .with_context(|| format!("cannot read the schema of table {table}"))?;
    Families::of(table, &schema)
}

/// The row of node id `row`.
pub fn row_key(row: u64) -> Vec<u8> {
    format!("{row:016x}").into_bytes()
}

/// Parses a row written by cingest.
pub fn parse_row(row: &[u8]) -> Option<u64> {
    if row.len() != 16 {
        return None;
    }
    parse_hex(row)
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &b in s {
        let d = (b as char).to_digit(16)?;
        v = (v << 4) | d as u64;
    }
    Some(v)
}

/// One node of a list, as ingest writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub row: u64,
    pub family: u8,
    pub qualifier: u16,
    /// The writing client's random id.
    pub client: u64,
    /// How many cells that client had written before this one.
    pub count: u64,
    /// The row this node points back to.
    pub prev: Option<u64>,
}

fn checksum(row: &[u8], family: &str, qualifier: &[u8], value: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(row);
    crc.update(family.as_bytes());
    crc.update(qualifier);
    crc.update(value);
    crc.sum()
}

impl Node {
    /// The cell of this node.
    pub fn mutation(&self, families: &Families) -> anyhow::Result<Mutation> {
        let family = families
            .name(self.family)
            .with_context(|| format!("family id {} is not in the table", self.family))?;
        let row = row_key(self.row);
        let qualifier = format!("{:04x}", self.qualifier).into_bytes();
        let mut value = format!("{:016x}:{:016x}:", self.client, self.count).into_bytes();
        if let Some(p) = self.prev {
            value.extend_from_slice(format!("{p:016x}").as_bytes());
        }
        value.push(b':');
        let crc = checksum(&row, family, &qualifier, &value);
        value.extend_from_slice(format!("{crc:08x}").as_bytes());
        Ok(Mutation {
            row,
            family: self.family,
            qualifier,
            timestamp: None,
            flag: CellFlag::Insert,
            value,
        })
    }
}

/// Why a cell is not a valid node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeError {
    BadRow(String),
    UnknownFamily {
        row: String,
        family: u8,
    },
    BadValue {
        row: String,
        value: String,
    },
    BadChecksum {
        row: String,
        stored: u32,
        computed: u32,
    },
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadRow(r) => write!(f, "row {r:?} is not 16 hex digits"),
            Self::UnknownFamily { row, family } => {
                write!(
                    f,
                    "row {row}: family id {family} is not a family of the table"
                )
            }
            Self::BadValue { row, value } => {
                write!(
                    f,
                    "row {row}: value {value:?} is not client:count:prev:crc32"
                )
            }
            Self::BadChecksum {
                row,
                stored,
                computed,
            } => write!(
                f,
                "row {row}: checksum {stored:08x} stored, {computed:08x} computed"
            ),
        }
    }
}

/// Parses and checks one scanned cell: its row, value layout and checksum.
pub fn validate(cell: &Cell, families: &Families) -> Result<Node, NodeError> {
    let k = &cell.key;
    let row_text = || String::from_utf8_lossy(&k.row).into_owned();
    let row = parse_row(&k.row).ok_or_else(|| NodeError::BadRow(row_text()))?;
    let family = families
        .name(k.family)
        .ok_or_else(|| NodeError::UnknownFamily {
            row: row_text(),
            family: k.family,
        })?;
    let v = &cell.value;
    let bad = || NodeError::BadValue {
        row: row_text(),
        value: String::from_utf8_lossy(v).into_owned(),
    };
    let mut parts = v.split(|&b| b == b':');
    let (Some(client), Some(count), Some(prev), Some(crc), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(bad());
    };
    if client.len() != 16 || count.len() != 16 || !(prev.is_empty() || prev.len() == 16) {
        return Err(bad());
    }
    if crc.len() != 8 {
        return Err(bad());
    }
    let stored = parse_hex(crc).ok_or_else(bad)? as u32;
    let computed = checksum(&k.row, family, &k.qualifier, &v[..v.len() - 8]);
    if stored != computed {
        return Err(NodeError::BadChecksum {
            row: row_text(),
            stored,
            computed,
        });
    }
    let qualifier = if k.qualifier.len() == 4 {
        parse_hex(&k.qualifier).ok_or_else(bad)? as u16
    } else {
        return Err(bad());
    };
    Ok(Node {
        row,
        family: k.family,
        qualifier,
        client: parse_hex(client).ok_or_else(bad)?,
        count: parse_hex(count).ok_or_else(bad)?,
        prev: if prev.is_empty() {
            None
        } else {
            Some(parse_hex(prev).ok_or_else(bad)?)
        },
    })
}
