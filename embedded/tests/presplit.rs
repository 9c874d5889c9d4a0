//! `create_table_split` on the embedded database: one range per gap between the split rows,
//! kept across a reopen; cells land in and come back from every range; bad split rows are
//! refused before anything is created.

use client::{Client, ClientError, Mutation, ScanSpec};
use common::TableSchema;
use embedded::{EmbeddedClient, EmbeddedOptions};

fn schema() -> TableSchema {
    let mut s = TableSchema::new(0, "");
    s.add_family("a");
    s
}

type Bounds = Vec<(Option<Vec<u8>>, Option<Vec<u8>>)>;

fn bounds(c: &EmbeddedClient, t: &str) -> Bounds {
    c.table_ranges(t)
        .expect("ranges")
        .into_iter()
        .map(|r| (r.start_row, r.end_row))
        .collect()
}

#[test]
fn a_presplit_table_has_a_range_per_gap_and_keeps_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let splits: Vec<Vec<u8>> = vec![b"g".to_vec(), b"p\0q".to_vec(), b"x".to_vec()];
    let want = vec![
        (None, Some(b"g".to_vec())),
        (Some(b"g".to_vec()), Some(b"p\0q".to_vec())),
        (Some(b"p\0q".to_vec()), Some(b"x".to_vec())),
        (Some(b"x".to_vec()), None),
    ];
    {
        let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
        c.create_table_split("/t", schema(), &splits)
            .expect("create");
        assert_eq!(bounds(&c, "/t"), want);
        let mut m = c.mutator("/t").expect("mutator");
        for row in ["a", "g", "p", "p\0q", "w", "x", "zz"] {
            m.set(Mutation::insert(row, 1, "", row)).expect("set");
        }
        m.flush().expect("flush");
        c.close().expect("close");
    }
    let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("reopen");
    assert_eq!(bounds(&c, "/t"), want, "after a reopen");
    let mut sc = c.scanner("/t", ScanSpec::default()).expect("scanner");
    let mut rows = Vec::new();
    while let Some(cell) = sc.next_cell().expect("next") {
        assert_eq!(cell.key.row, cell.value);
        rows.push(cell.key.row);
    }
    let want_rows: Vec<Vec<u8>> = ["a", "g", "p", "p\0q", "w", "x", "zz"]
        .iter()
        .map(|r| r.as_bytes().to_vec())
        .collect();
    assert_eq!(rows, want_rows);
}

#[test]
fn bad_split_rows_are_refused_and_create_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open");
    for (splits, says) in [
        (vec![b"m".to_vec(), b"c".to_vec()], "split row 2"),
        (vec![b"m".to_vec(), b"m".to_vec()], "strictly increasing"),
        (vec![Vec::new()], "split row 1 is empty"),
        (
            vec![vec![b'r'; common::mutation::MAX_ROW_OR_QUALIFIER_BYTES + 1]],
            "longer than a row key",
        ),
    ] {
        match c.create_table_split("/t", schema(), &splits) {
            Err(ClientError::InvalidInput(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(!c.table_exists("/t").expect("exists"));
    }
    // No table id was taken by the refusals.
    let t = c.create_table_split("/t", schema(), &[]).expect("create");
    assert_eq!(t.id, 1);
    assert_eq!(bounds(&c, "/t"), vec![(None, None)]);
}
