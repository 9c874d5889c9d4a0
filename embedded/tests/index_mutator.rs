//! `Client::mutator` keeps a table's secondary indexes, as Hypertable's `TableMutator` does:
//! every insert into a value- or qualifier-indexed family writes its entry to `^t` / `^^t`;
//! `unindexed_mutator` writes none; a schema with index flags whose index tables were never
//! made writes its cells and nothing else.

use std::collections::BTreeSet;

use client::index::{index_path, qualifier_entry, sync_tables, value_entry};
use client::{Client, Mutation, ScanSpec};
use common::TableSchema;
use embedded::{EmbeddedClient, EmbeddedOptions};

fn indexed_schema() -> TableSchema {
    let mut s = TableSchema::new(0, "");
    let a = s.add_family("a");
    let b = s.add_family("b");
    s.add_family("c");
    for f in s.families.iter_mut() {
        f.value_index = f.id == a;
        f.qualifier_index = f.id == b;
    }
    s
}

fn rows_of(c: &EmbeddedClient, table: &str) -> BTreeSet<Vec<u8>> {
    let mut sc = c.scanner(table, ScanSpec::default()).expect("scanner");
    let mut rows = BTreeSet::new();
    while let Some(cell) = sc.next_cell().expect("next") {
        rows.insert(cell.key.row);
    }
    rows
}

fn write(c: &EmbeddedClient, table: &str, unindexed: bool) {
    let mut m = if unindexed {
        c.unindexed_mutator(table)
    } else {
        c.mutator(table)
    }
    .expect("mutator");
    for i in 0..50u32 {
        let row = format!("r{i:03}");
        m.set(Mutation::insert(row.as_str(), 1, "", format!("v{}", i % 7)))
            .expect("set a");
        m.set(Mutation::insert(
            row.as_str(),
            2,
            format!("q{}", i % 5),
            "x",
        ))
        .expect("set b");
        m.set(Mutation::insert(row.as_str(), 3, "", "unindexed"))
            .expect("set c");
    }
    m.flush().expect("flush");
}

#[test]
fn the_clients_mutator_writes_index_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    let schema = c.create_table("/t", indexed_schema()).expect("create");
    sync_tables(&c, "/t", None, &schema).expect("index tables");
    write(&c, "/t", false);

    let want_values: BTreeSet<Vec<u8>> = (0..50u32)
        .map(|i| {
            value_entry(
                1,
                format!("v{}", i % 7).as_bytes(),
                b"",
                format!("r{i:03}").as_bytes(),
            )
        })
        .collect();
    let want_qualifiers: BTreeSet<Vec<u8>> = (0..50u32)
        .map(|i| {
            qualifier_entry(
                2,
                format!("q{}", i % 5).as_bytes(),
                format!("r{i:03}").as_bytes(),
            )
        })
        .collect();
    assert_eq!(rows_of(&c, &index_path("/t", false)), want_values);
    assert_eq!(rows_of(&c, &index_path("/t", true)), want_qualifiers);
}

#[test]
fn the_unindexed_mutator_writes_no_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    let schema = c.create_table("/t", indexed_schema()).expect("create");
    sync_tables(&c, "/t", None, &schema).expect("index tables");
    write(&c, "/t", true);
    assert_eq!(rows_of(&c, "/t").len(), 50);
    assert!(rows_of(&c, &index_path("/t", false)).is_empty());
    assert!(rows_of(&c, &index_path("/t", true)).is_empty());
}

#[test]
fn index_flags_without_index_tables_write_the_cells_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    c.create_table("/t", indexed_schema()).expect("create");
    write(&c, "/t", false);
    assert_eq!(rows_of(&c, "/t").len(), 50);
    for qualifier in [false, true] {
        assert!(
            !c.table_exists(&index_path("/t", qualifier))
                .expect("exists")
        );
    }
}
