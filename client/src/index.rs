//! Secondary indexes as Hypertable 0.9.7+ keeps them (issue 17): for a table `/ns/t` whose
//! families carry `INDEX f` or `QUALIFIER INDEX f`, the tables `/ns/^t` (values) and
//! `/ns/^^t` (qualifiers), each with one family `v1`. An entry is one cell with an empty
//! value, the primary cell's timestamp, and the row
//!
//! - value index: `<family id>,<value'>TAB<qualifier'>TAB<row'>`
//! - qualifier index: `<family id>,<qualifier'>TAB<row'>`
//!
//! where `x'` is `x` escaped as the shell prints cells (`\` `\\`, newline `\n`, tab `\t`, NUL
//! `\0`), so a TAB separates the fields. The [`IndexingMutator`] writes an entry for every
//! insert into an indexed family, durable before the primary cell (an entry may be stale,
//! never missing); a delete removes the entries of the cells it deletes once the delete is
//! durable. A query uses the index only to choose candidate rows ([`candidate_rows`]); it
//! then scans those rows of the primary table with all its predicates, so what it returns is
//! exactly what a scan without the index returns, stale entries or not.

use std::ops::Bound;
use std::sync::Arc;

use common::iterators::{ValuePredicate, ValueTest};
use common::key::CellFlag;
use common::scan_spec::{ColumnSelector, QualifierMatch, RowInterval};

use crate::{Client, ClientError, Mutation, Result, ScanSpec, TableMutator, TableSchema};

/// The index tables' one family.
pub const INDEX_FAMILY: &str = "v1";
/// Its id.
pub const INDEX_FAMILY_ID: u8 = 1;
/// Primary cells an [`IndexingMutator`] holds before it writes them (their entries first).
pub const MUTATOR_BUFFER_CELLS: usize = 16_384;

/// The value index (`qualifier` false) or qualifier index of the table at `path`.
pub fn index_path(path: &str, qualifier: bool) -> String {
    let (ns, name) = path.rsplit_once('/').unwrap_or(("", path));
    format!("{ns}/{}{name}", if qualifier { "^^" } else { "^" })
}

/// Whether `path` names an index table (its last part starts with `^`).
pub fn is_index_name(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|n| n.starts_with('^'))
}

/// Whether a live family of the schema has a value index (`qualifier` false) or a qualifier
/// index.
pub fn has_index(schema: &TableSchema, qualifier: bool) -> bool {
    schema.families.iter().any(|f| {
        !f.deleted
            && if qualifier {
                f.qualifier_index
            } else {
                f.value_index
            }
    })
}

/// The schema of an index table: family `v1` in group `default`, with the primary table's
/// defaults and group commit interval (as Hypertable makes it).
pub fn index_schema(primary: &TableSchema) -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.add_family(INDEX_FAMILY);
    s.group_commit_interval_ms = primary.group_commit_interval_ms;
    s.durability = primary.durability;
    s
}

/// Appends `x` escaped as the shell prints cell fields.
pub fn escape_into(out: &mut Vec<u8>, x: &[u8]) {
    for &b in x {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0 => out.extend_from_slice(b"\\0"),
            b => out.push(b),
        }
    }
}

/// The inverse of [`escape_into`]; `None` for a string it cannot have made.
pub fn unescape(x: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(x.len());
    let mut it = x.iter();
    while let Some(&b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        out.push(match it.next()? {
            b'\\' => b'\\',
            b'n' => b'\n',
            b't' => b'\t',
            b'0' => 0,
            _ => return None,
        });
    }
    Some(out)
}

/// The value-index row of a primary cell.
pub fn value_entry(family: u8, value: &[u8], qualifier: &[u8], row: &[u8]) -> Vec<u8> {
    let mut e = format!("{family},").into_bytes();
    escape_into(&mut e, value);
    e.push(b'\t');
    escape_into(&mut e, qualifier);
    e.push(b'\t');
    escape_into(&mut e, row);
    e
}

/// The qualifier-index row of a primary cell.
pub fn qualifier_entry(family: u8, qualifier: &[u8], row: &[u8]) -> Vec<u8> {
    let mut e = format!("{family},").into_bytes();
    escape_into(&mut e, qualifier);
    e.push(b'\t');
    escape_into(&mut e, row);
    e
}

/// The primary row an entry names (its last field), or `None` for a malformed entry.
pub fn entry_row(entry: &[u8]) -> Option<Vec<u8>> {
    let at = entry.iter().rposition(|&b| b == b'\t')?;
    unescape(&entry[at + 1..])
}

fn entry_insert(row: Vec<u8>, timestamp: i64) -> Mutation {
    let mut m = Mutation::insert(row, INDEX_FAMILY_ID, "", "");
    m.timestamp = Some(timestamp);
    m
}

fn entry_delete(row: Vec<u8>, timestamp: i64) -> Mutation {
    Mutation::delete(
        CellFlag::DeleteCellVersion,
        row,
        INDEX_FAMILY_ID,
        "",
        Some(timestamp),
    )
}

/// Creates the index tables `schema` needs and drops those it no longer needs, and fills in
/// the entries of every family whose index is new since `old` (the schema before an ALTER;
/// `None` for a new table), from the cells the table already holds, so that queries find every
/// row (Hypertable left an index added by ALTER empty until REBUILD).
pub fn sync_tables(
    client: &dyn Client,
    path: &str,
    old: Option<&TableSchema>,
    schema: &TableSchema,
) -> Result<()> {
    for qualifier in [false, true] {
        let ipath = index_path(path, qualifier);
        let wanted = has_index(schema, qualifier);
        let exists = client.table_exists(&ipath)?;
        if wanted && !exists {
            client.create_table(&ipath, index_schema(schema))?;
        } else if !wanted && exists {
            client.drop_table(&ipath)?;
        }
    }
    let Some(old) = old else {
        return Ok(());
    };
    let had = |id: u8, qualifier: bool| {
        old.family_by_id(id).is_some_and(|f| {
            !f.deleted
                && if qualifier {
                    f.qualifier_index
                } else {
                    f.value_index
                }
        })
    };
    let new: Vec<(u8, bool, bool)> = schema
        .families
        .iter()
        .filter(|f| !f.deleted)
        .map(|f| {
            (
                f.id,
                f.value_index && !had(f.id, false),
                f.qualifier_index && !had(f.id, true),
            )
        })
        .filter(|(_, v, q)| *v || *q)
        .collect();
    fill(client, path, &new)?;
    Ok(())
}

/// Drops a table's index tables, where they exist.
pub fn drop_tables(client: &dyn Client, path: &str) -> Result<()> {
    for qualifier in [false, true] {
        let ipath = index_path(path, qualifier);
        match client.drop_table(&ipath) {
            Err(ClientError::TableNotFound(_)) | Ok(()) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Renames a table's index tables with it, where they exist.
pub fn rename_tables(client: &dyn Client, from: &str, to: &str) -> Result<()> {
    for qualifier in [false, true] {
        let (f, t) = (index_path(from, qualifier), index_path(to, qualifier));
        if client.table_exists(&f)? {
            client.rename_table(&f, &t)?;
        }
    }
    Ok(())
}

/// `REBUILD [VALUE|QUALIFIER] INDICES`: drops and re-creates the chosen index tables (those the
/// schema has) and fills them from every cell version of the table. Returns the entries written.
pub fn rebuild(client: &dyn Client, path: &str, values: bool, qualifiers: bool) -> Result<u64> {
    let schema = client.table_schema(path)?;
    let mut todo = [false; 2];
    for (i, (qualifier, chosen)) in [(false, values), (true, qualifiers)]
        .into_iter()
        .enumerate()
    {
        if !chosen || !has_index(&schema, qualifier) {
            continue;
        }
        let ipath = index_path(path, qualifier);
        drop_tables_one(client, &ipath)?;
        client.create_table(&ipath, index_schema(&schema))?;
        todo[i] = true;
    }
    let families: Vec<(u8, bool, bool)> = schema
        .families
        .iter()
        .filter(|f| !f.deleted)
        .map(|f| (f.id, todo[0] && f.value_index, todo[1] && f.qualifier_index))
        .filter(|(_, v, q)| *v || *q)
        .collect();
    fill(client, path, &families)
}

fn drop_tables_one(client: &dyn Client, ipath: &str) -> Result<()> {
    match client.drop_table(ipath) {
        Err(ClientError::TableNotFound(_)) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the entries of every stored version of the cells of `families` (id, value entries,
/// qualifier entries).
fn fill(client: &dyn Client, path: &str, families: &[(u8, bool, bool)]) -> Result<u64> {
    if families.is_empty() {
        return Ok(0);
    }
    let (values, qualifiers) = (families.iter().any(|f| f.1), families.iter().any(|f| f.2));
    let spec = ScanSpec {
        columns: families
            .iter()
            .map(|(id, _, _)| ColumnSelector {
                family: *id,
                qualifier: QualifierMatch::All,
            })
            .collect(),
        max_versions: 0,
        ..ScanSpec::default()
    };
    let mut vm = if values {
        Some(client.unindexed_mutator(&index_path(path, false))?)
    } else {
        None
    };
    let mut qm = if qualifiers {
        Some(client.unindexed_mutator(&index_path(path, true))?)
    } else {
        None
    };
    let mut n = 0u64;
    let mut scanner = client.scanner(path, spec)?;
    while let Some(c) = scanner.next_cell()? {
        let Some(&(_, v, q)) = families.iter().find(|(id, _, _)| *id == c.key.family) else {
            continue;
        };
        let k = &c.key;
        if let (true, Some(m)) = (v, vm.as_mut()) {
            m.set(entry_insert(
                value_entry(k.family, &c.value, &k.qualifier, &k.row),
                k.timestamp,
            ))?;
            n += 1;
        }
        if let (true, Some(m)) = (q, qm.as_mut()) {
            m.set(entry_insert(
                qualifier_entry(k.family, &k.qualifier, &k.row),
                k.timestamp,
            ))?;
            n += 1;
        }
    }
    for m in [vm.as_mut(), qm.as_mut()].into_iter().flatten() {
        m.flush()?;
    }
    Ok(n)
}

/// A mutator of a table with indexes: every insert into an indexed family gets its entries,
/// written and made durable before the primary cell, and a timestamp assigned here when it
/// has none (the entry carries it). Deletes remove the entries of the cells they delete,
/// after the delete is durable. Holds at most [`MUTATOR_BUFFER_CELLS`] primary cells.
pub struct IndexingMutator {
    /// Reads the cells a delete deletes; without one, deletes leave their entries (stale
    /// entries cost a query candidate rows, never a wrong answer).
    reader: Option<Arc<dyn Client>>,
    path: String,
    /// Per family id: (value index, qualifier index).
    indexed: Vec<(bool, bool)>,
    primary: Box<dyn TableMutator>,
    values: Option<Box<dyn TableMutator>>,
    qualifiers: Option<Box<dyn TableMutator>>,
    pending: Vec<Mutation>,
    /// Entries of deleted cells, removed once the deletes are durable.
    stale: Vec<(bool, Mutation)>,
    last_timestamp: i64,
}

/// The table's mutator: an [`IndexingMutator`] when a live family is indexed and its index
/// table exists, else the client's own. `reader` (the same database) lets deletes remove their
/// cells' entries. An index table that does not exist (a schema made through the Rust API with
/// index flags but no [`sync_tables`]) is not written: a query answers by a scan when it is
/// missing, so its answers stay exact.
pub fn mutator<C: Client + ?Sized>(
    client: &C,
    reader: Option<Arc<dyn Client>>,
    path: &str,
) -> Result<Box<dyn TableMutator>> {
    let schema = client.table_schema(path)?;
    let primary = client.unindexed_mutator(path)?;
    let open = |qualifier: bool| -> Result<Option<Box<dyn TableMutator>>> {
        if !has_index(&schema, qualifier) {
            return Ok(None);
        }
        match client.unindexed_mutator(&index_path(path, qualifier)) {
            Ok(m) => Ok(Some(m)),
            Err(ClientError::TableNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let (values, qualifiers) = (open(false)?, open(true)?);
    if values.is_none() && qualifiers.is_none() {
        return Ok(primary);
    }
    let mut indexed = vec![(false, false); 256];
    for f in schema.families.iter().filter(|f| !f.deleted) {
        indexed[usize::from(f.id)] = (f.value_index, f.qualifier_index);
    }
    Ok(Box::new(IndexingMutator {
        reader,
        path: path.to_string(),
        indexed,
        primary,
        values,
        qualifiers,
        pending: Vec::new(),
        stale: Vec::new(),
        last_timestamp: 0,
    }))
}

impl IndexingMutator {
    fn now(&mut self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX - 1));
        self.last_timestamp = now.max(self.last_timestamp + 1);
        self.last_timestamp
    }

    /// Reads the cells a delete will delete and keeps their entries for removal.
    fn note_deleted(&mut self, m: &Mutation) -> Result<()> {
        let Some(reader) = self.reader.clone() else {
            return Ok(());
        };
        let families: Vec<u8> = match m.flag {
            CellFlag::DeleteRow => (1..=255u8)
                .filter(|&f| {
                    let (v, q) = self.indexed[usize::from(f)];
                    v || q
                })
                .collect(),
            _ => {
                let (v, q) = self.indexed[usize::from(m.family)];
                if !v && !q {
                    return Ok(());
                }
                vec![m.family]
            }
        };
        if families.is_empty() {
            return Ok(());
        }
        let qualifier = match m.flag {
            CellFlag::DeleteCell | CellFlag::DeleteCellVersion => {
                QualifierMatch::Exact(m.qualifier.clone())
            }
            _ => QualifierMatch::All,
        };
        let spec = ScanSpec {
            row_intervals: vec![RowInterval {
                start: Bound::Included(m.row.clone()),
                end: Bound::Included(m.row.clone()),
            }],
            columns: families
                .iter()
                .map(|&family| ColumnSelector {
                    family,
                    qualifier: qualifier.clone(),
                })
                .collect(),
            max_versions: 0,
            ..ScanSpec::default()
        };
        let mut scanner = reader.scanner(&self.path, spec)?;
        while let Some(c) = scanner.next_cell()? {
            let k = &c.key;
            let covered = match (m.flag, m.timestamp) {
                (CellFlag::DeleteCellVersion, Some(ts)) => k.timestamp == ts,
                (_, Some(ts)) => k.timestamp <= ts,
                (_, None) => true,
            };
            if !covered {
                continue;
            }
            let (v, q) = self.indexed[usize::from(k.family)];
            if v {
                let e = value_entry(k.family, &c.value, &k.qualifier, &k.row);
                self.stale.push((false, entry_delete(e, k.timestamp)));
            }
            if q {
                let e = qualifier_entry(k.family, &k.qualifier, &k.row);
                self.stale.push((true, entry_delete(e, k.timestamp)));
            }
        }
        Ok(())
    }

    /// Entries durable, then the primary cells, then the removal of deleted cells' entries.
    fn write_out(&mut self) -> Result<()> {
        for m in [self.values.as_mut(), self.qualifiers.as_mut()]
            .into_iter()
            .flatten()
        {
            m.flush()?;
        }
        for m in self.pending.drain(..) {
            self.primary.set(m)?;
        }
        self.primary.flush()?;
        for (qualifier, m) in self.stale.drain(..) {
            let target = if qualifier {
                self.qualifiers.as_mut()
            } else {
                self.values.as_mut()
            };
            if let Some(t) = target {
                t.set(m)?;
            }
        }
        for m in [self.values.as_mut(), self.qualifiers.as_mut()]
            .into_iter()
            .flatten()
        {
            m.flush()?;
        }
        Ok(())
    }
}

impl TableMutator for IndexingMutator {
    fn set(&mut self, mut m: Mutation) -> Result<()> {
        if m.flag == CellFlag::Insert {
            let (v, q) = self.indexed[usize::from(m.family)];
            if v || q {
                let ts = match m.timestamp {
                    Some(ts) => ts,
                    None => {
                        let ts = self.now();
                        m.timestamp = Some(ts);
                        ts
                    }
                };
                if let (true, Some(t)) = (v, self.values.as_mut()) {
                    t.set(entry_insert(
                        value_entry(m.family, &m.value, &m.qualifier, &m.row),
                        ts,
                    ))?;
                }
                if let (true, Some(t)) = (q, self.qualifiers.as_mut()) {
                    t.set(entry_insert(
                        qualifier_entry(m.family, &m.qualifier, &m.row),
                        ts,
                    ))?;
                }
            }
        } else {
            self.note_deleted(&m)?;
        }
        self.pending.push(m);
        if self.pending.len() >= MUTATOR_BUFFER_CELLS {
            self.write_out()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }

    fn cells_flushed(&self) -> u64 {
        self.primary.cells_flushed()
    }
}

/// The rows an indexed query may match: for ORed value predicates each of which the table's
/// indexes can answer (`=` and `=^` on a value-indexed family, `EXISTS` and `=`/`=^` with a
/// qualifier on a qualifier-indexed one), the sorted, distinct rows of their entries; `None`
/// when a predicate cannot use an index or more than `max_rows` rows come back (the caller
/// scans instead). A superset of the matching rows: the caller scans them with the predicates.
pub fn candidate_rows(
    client: &dyn Client,
    path: &str,
    schema: &TableSchema,
    tests: &[ValuePredicate],
    max_rows: usize,
) -> Result<Option<Vec<Vec<u8>>>> {
    let mut lookups: Vec<(bool, Vec<u8>)> = Vec::new();
    for t in tests {
        let Some(f) = schema.family_by_id(t.family).filter(|f| !f.deleted) else {
            return Ok(None);
        };
        let mut prefix = format!("{},", f.id).into_bytes();
        match (&t.test, &t.qualifier) {
            (ValueTest::Equals(v), q) if f.value_index => {
                escape_into(&mut prefix, v);
                prefix.push(b'\t');
                if let Some(q) = q {
                    escape_into(&mut prefix, q);
                    prefix.push(b'\t');
                }
                lookups.push((false, prefix));
            }
            (ValueTest::Prefix(p), None) if f.value_index => {
                escape_into(&mut prefix, p);
                lookups.push((false, prefix));
            }
            (ValueTest::Exists | ValueTest::Equals(_) | ValueTest::Prefix(_), Some(q))
                if f.qualifier_index =>
            {
                escape_into(&mut prefix, q);
                prefix.push(b'\t');
                lookups.push((true, prefix));
            }
            (ValueTest::Exists, None) if f.qualifier_index || f.value_index => {
                lookups.push((f.qualifier_index, prefix));
            }
            _ => return Ok(None),
        }
    }
    if lookups.is_empty() {
        return Ok(None);
    }
    let mut rows: Vec<Vec<u8>> = Vec::new();
    for (qualifier, prefix) in lookups {
        let spec = ScanSpec {
            row_intervals: vec![RowInterval::prefix(prefix)],
            max_versions: 0,
            keys_only: true,
            ..ScanSpec::default()
        };
        // An index table that is gone (dropped by hand, or a REBUILD under way) is no
        // reason to fail the query: it is answered by a scan.
        let mut scanner = match client.scanner(&index_path(path, qualifier), spec) {
            Ok(s) => s,
            Err(ClientError::TableNotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        while let Some(c) = scanner.next_cell()? {
            let Some(row) = entry_row(&c.key.row) else {
                return Err(ClientError::storage(
                    common::ErrorKind::Corruption,
                    format!(
                        "index table {} holds a malformed entry {:?}",
                        index_path(path, qualifier),
                        String::from_utf8_lossy(&c.key.row)
                    ),
                ));
            };
            rows.push(row);
            if rows.len() > max_rows.saturating_mul(2).max(1 << 16) {
                // Many repeats (versions, several lookups) are possible: judge distinct ones.
                rows.sort_unstable();
                rows.dedup();
                if rows.len() > max_rows {
                    return Ok(None);
                }
            }
        }
    }
    rows.sort_unstable();
    rows.dedup();
    if rows.len() > max_rows {
        return Ok(None);
    }
    Ok(Some(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn index_paths_sit_beside_their_table() {
        assert_eq!(index_path("/ns/Users", false), "/ns/^Users");
        assert_eq!(index_path("/ns/Users", true), "/ns/^^Users");
        assert_eq!(index_path("/t", false), "/^t");
        assert!(is_index_name("/ns/^^t") && !is_index_name("/n^s/t"));
    }

    #[test]
    fn entries_are_hypertables_rows() {
        assert_eq!(value_entry(2, b"a@b", b"", b"u1"), b"2,a@b\t\tu1");
        assert_eq!(qualifier_entry(1, b"q\tx", b"r\\"), b"1,q\\tx\tr\\\\");
    }

    proptest! {
        /// Any bytes round-trip through the escaping, and the row comes back from an entry
        /// whatever its value and qualifier hold.
        #[test]
        fn entry_rows_come_back(
            v in proptest::collection::vec(any::<u8>(), 0..12),
            q in proptest::collection::vec(any::<u8>(), 0..12),
            r in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let mut e = Vec::new();
            escape_into(&mut e, &v);
            prop_assert_eq!(unescape(&e), Some(v.clone()));
            prop_assert_eq!(entry_row(&value_entry(7, &v, &q, &r)), Some(r.clone()));
            prop_assert_eq!(entry_row(&qualifier_entry(7, &q, &r)), Some(r));
        }
    }
}
