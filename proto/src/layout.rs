//! Where a cluster keeps its state: the Hyperspace nodes, the METADATA table and its row format,
//! and the file-system roots of range servers. The master, range servers and clients all use
//! these names (docs/formats/cluster.md).

use common::TableSchema;
use common::schema::{AccessGroupSpec, Durability, FamilySpec};

/// Root of everything ht keeps in Hyperspace; attribute [`NEXT_TABLE_ID`] counts table ids and
/// [`NEXT_SERVER_ID`] range-server incarnations.
pub const HT: &str = "/ht";
/// Namespaces are directories under this one; a table is a file in its namespace's directory
/// whose attribute [`TABLE_ID_ATTR`] holds its id.
pub const NAMESPACES: &str = "/ht/namespaces";
/// `/ht/tables/<id>`: one file per table, attribute [`SCHEMA_ATTR`] = the schema's JSON.
pub const TABLES: &str = "/ht/tables";
/// `/ht/servers/<location>`: one file per range server, held with an exclusive lock by the
/// server for as long as it lives; attributes [`ADDR_ATTR`] and [`ROOT_ATTR`].
pub const SERVERS: &str = "/ht/servers";
/// The master lock file; the active master holds it exclusively and sets [`ADDR_ATTR`].
pub const MASTER: &str = "/ht/master";
/// The ROOT range location: attribute [`LOCATION_ATTR`] names the range server holding
/// METADATA (which has one range, so ROOT is the whole METADATA table).
pub const ROOT: &str = "/ht/root";
/// The master's operation log: one file per unfinished operation, attribute [`OP_ATTR`].
pub const OPS: &str = "/ht/ops";
/// `/ht/retired/<location>`: a range server whose ranges were all recovered elsewhere; its
/// root on the shared file system is never opened again, and the master's garbage collection
/// removes it once no live server uses a cell store under it (then this file goes too).
pub const RETIRED: &str = "/ht/retired";

pub const NEXT_TABLE_ID: &str = "next_table_id";
pub const NEXT_SERVER_ID: &str = "next_server_id";
pub const TABLE_ID_ATTR: &str = "id";
pub const SCHEMA_ATTR: &str = "schema";
pub const ADDR_ATTR: &str = "addr";
pub const ROOT_ATTR: &str = "root";
pub const LOCATION_ATTR: &str = "location";
pub const OP_ATTR: &str = "op";

/// The METADATA table's id; user tables get ids above it.
pub const METADATA_ID: u32 = 1;
/// Its name in reports (it is not in the namespace tree).
pub const METADATA_NAME: &str = "/sys/METADATA";
/// METADATA family: the location (range server) of a range.
pub const LOCATION_FAMILY: u8 = 1;
/// METADATA family: the start row of a range (empty value: unbounded).
pub const START_ROW_FAMILY: u8 = 2;
/// The end-row spelling of an unbounded end in a METADATA row.
pub const END_OF_TABLE: &[u8] = b"\xff\xff";

/// The Hyperspace node of a namespace path (`/` -> [`NAMESPACES`]).
pub fn ns_node(path: &str) -> String {
    if path == "/" {
        NAMESPACES.to_string()
    } else {
        format!("{NAMESPACES}{path}")
    }
}

/// The Hyperspace file of a table id.
pub fn table_node(id: u32) -> String {
    format!("{TABLES}/{id}")
}

/// The Hyperspace file of a range server.
pub fn server_node(location: &str) -> String {
    format!("{SERVERS}/{location}")
}

/// The Hyperspace file of a retired range server.
pub fn retired_node(location: &str) -> String {
    format!("{RETIRED}/{location}")
}

/// The root directory of a range server's engine on the shared file system.
pub fn server_root(location: &str) -> String {
    format!("/servers/{location}")
}

/// The METADATA schema: one access group, families `Location` and `StartRow`, one version,
/// synced to stable storage (losing a METADATA write would lose a range).
pub fn metadata_schema() -> TableSchema {
    let mut s = TableSchema::new(METADATA_ID, METADATA_NAME);
    s.access_groups = vec![AccessGroupSpec::new("default")];
    for (id, name) in [
        (LOCATION_FAMILY, "Location"),
        (START_ROW_FAMILY, "StartRow"),
    ] {
        let mut f = FamilySpec::new(id, name, "default");
        f.max_versions = 1;
        s.families.push(f);
    }
    s.durability = Durability::Sync;
    s
}

/// The METADATA row of the range of `table_id` ending at `end_row` (exclusive; `None`:
/// unbounded): `<table id, 8 hex digits>:<end row>`, the unbounded end spelled `\xff\xff`.
/// Rows sort by table, then by end row, so the range holding row `r` is the first row after
/// `<table>:<r>`.
pub fn metadata_row(table_id: u32, end_row: Option<&[u8]>) -> Vec<u8> {
    let mut row = format!("{table_id:08x}:").into_bytes();
    row.extend_from_slice(end_row.unwrap_or(END_OF_TABLE));
    row
}

/// The first METADATA row of a table and the first row after its last.
pub fn metadata_table_bounds(table_id: u32) -> (Vec<u8>, Vec<u8>) {
    (
        format!("{table_id:08x}:").into_bytes(),
        format!("{table_id:08x};").into_bytes(),
    )
}

/// Parses a METADATA row back into (table id, end row).
pub fn parse_metadata_row(row: &[u8]) -> Option<(u32, Option<Vec<u8>>)> {
    if row.len() < 9 || row[8] != b':' {
        return None;
    }
    let id = u32::from_str_radix(std::str::from_utf8(&row[..8]).ok()?, 16).ok()?;
    let end = &row[9..];
    Some((id, (end != END_OF_TABLE).then(|| end.to_vec())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_rows_round_trip_and_sort() {
        let a = metadata_row(2, Some(b"m"));
        let b = metadata_row(2, None);
        let c = metadata_row(3, Some(b"a"));
        assert!(a < b && b < c);
        assert_eq!(parse_metadata_row(&a), Some((2, Some(b"m".to_vec()))));
        assert_eq!(parse_metadata_row(&b), Some((2, None)));
        let (lo, hi) = metadata_table_bounds(2);
        assert!(lo <= a && b < hi && c > hi);
        assert_eq!(parse_metadata_row(b"xyz"), None);
        metadata_schema().validate().unwrap();
    }
}
