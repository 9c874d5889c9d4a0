//! Issue 17, secondary indexes: a query answered through the indexes returns exactly what the
//! same query returns on a table without them, after random inserts, overwrites (MAX_VERSIONS),
//! cell, family and row deletes, a LOAD DATA with deletes, and a REBUILD. Two tables take the
//! same statements; one is indexed.

use std::sync::Arc;

use client::Client;
use embedded::{EmbeddedClient, EmbeddedOptions};
use hql::exec::Executor;
use proptest::prelude::*;

fn run(ex: &mut Executor, stmt: &str) -> String {
    let s = hql::parse_statement(stmt).unwrap_or_else(|e| panic!("{stmt}: {e}"));
    let mut out = Vec::new();
    ex.execute(&s, &mut out)
        .unwrap_or_else(|e| panic!("{stmt}: {e}"));
    String::from_utf8(out).expect("utf-8")
}

#[derive(Debug, Clone)]
enum Op {
    Insert {
        row: u8,
        family: &'static str,
        qualifier: Option<u8>,
        value: u8,
    },
    DeleteCell {
        row: u8,
        qualifier: u8,
    },
    DeleteFamily {
        row: u8,
        family: &'static str,
    },
    DeleteRow(u8),
    /// LOAD DATA of one insert and one row delete (a load's deletes leave their entries).
    Load {
        row: u8,
        value: u8,
        delete: u8,
    },
    Rebuild,
}

fn op() -> impl Strategy<Value = Op> {
    let family = prop_oneof![Just("a"), Just("b"), Just("c")];
    prop_oneof![
        6 => (0..6u8, family.clone(), proptest::option::of(0..3u8), 0..4u8).prop_map(
            |(row, family, qualifier, value)| Op::Insert { row, family, qualifier, value }
        ),
        1 => (0..6u8, 0..3u8).prop_map(|(row, qualifier)| Op::DeleteCell { row, qualifier }),
        1 => (0..6u8, family).prop_map(|(row, family)| Op::DeleteFamily { row, family }),
        1 => (0..6u8).prop_map(Op::DeleteRow),
        1 => (0..6u8, 0..4u8, 0..6u8).prop_map(|(row, value, delete)| Op::Load { row, value, delete }),
        1 => Just(Op::Rebuild),
    ]
}

fn query() -> impl Strategy<Value = String> {
    let test = prop_oneof![
        (0..4u8).prop_map(|v| format!("a = 'v{v}'")),
        Just("a =^ 'v'".to_string()),
        (0..4u8).prop_map(|v| format!("a =^ 'v{v}'")),
        (0..3u8, 0..4u8).prop_map(|(q, v)| format!("b:q{q} = 'v{v}'")),
        (0..3u8).prop_map(|q| format!("EXISTS(b:q{q})")),
        (0..4u8).prop_map(|v| format!("c = 'v{v}'")),
    ];
    (
        proptest::collection::vec(test, 1..3),
        proptest::option::of(0..6u8),
        proptest::option::of(1..3u8),
        any::<bool>(),
    )
        .prop_map(|(tests, row, limit, keys)| {
            let mut q = String::from("SELECT * FROM {T} WHERE ");
            if let Some(r) = row {
                q.push_str(&format!("ROW >= 'r{r}' AND "));
            }
            q.push_str(&tests.join(" OR "));
            if let Some(n) = limit {
                q.push_str(&format!(" LIMIT {n}"));
            }
            if keys {
                q.push_str(" DISPLAY_TIMESTAMPS");
            }
            q
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn indexed_queries_return_what_a_scan_returns(
        ops in proptest::collection::vec(op(), 1..30),
        queries in proptest::collection::vec(query(), 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let client = Arc::new(
            EmbeddedClient::open(dir.path().join("db"), EmbeddedOptions::default()).unwrap(),
        );
        let mut ex = Executor::new(client.clone() as Arc<dyn Client>);
        run(&mut ex, "CREATE TABLE t (a MAX_VERSIONS 1, b MAX_VERSIONS 2, c, INDEX a, INDEX b, QUALIFIER INDEX b)");
        run(&mut ex, "CREATE TABLE u (a MAX_VERSIONS 1, b MAX_VERSIONS 2, c)");
        let mut ts = 1_000_000_000i64;
        for (n, op) in ops.iter().enumerate() {
            ts += 1_000;
            let stmts: Vec<String> = match op {
                Op::Insert { row, family, qualifier, value } => {
                    let col = match qualifier {
                        Some(q) => format!("{family}:q{q}"),
                        None => family.to_string(),
                    };
                    // Half with their own timestamps (so versions are kept apart), half auto.
                    if n % 2 == 0 {
                        vec![format!("INSERT INTO {{T}} VALUES ('{ts}', 'r{row}', '{col}', 'v{value}')")]
                    } else {
                        vec![format!("INSERT INTO {{T}} VALUES ('r{row}', '{col}', 'v{value}')")]
                    }
                }
                Op::DeleteCell { row, qualifier } => {
                    vec![format!("DELETE b:q{qualifier} FROM {{T}} WHERE ROW = 'r{row}'")]
                }
                Op::DeleteFamily { row, family } => {
                    vec![format!("DELETE {family} FROM {{T}} WHERE ROW = 'r{row}'")]
                }
                Op::DeleteRow(row) => vec![format!("DELETE * FROM {{T}} WHERE ROW = 'r{row}'")],
                Op::Load { row, value, delete } => {
                    let f = dir.path().join(format!("load{n}.tsv"));
                    std::fs::write(
                        &f,
                        format!("#row\tcolumn\tvalue\nr{row}\ta\tv{value}\nr{delete}\t\t\tDELETE_ROW\n"),
                    )
                    .unwrap();
                    vec![format!("LOAD DATA INFILE \"{}\" INTO TABLE {{T}}", f.display())]
                }
                Op::Rebuild => {
                    run(&mut ex, "REBUILD INDICES t");
                    Vec::new()
                }
            };
            for s in stmts {
                run(&mut ex, &s.replace("{T}", "t"));
                run(&mut ex, &s.replace("{T}", "u"));
            }
        }
        for q in &queries {
            // Timestamps are the cells' own: the auto ones differ between the tables.
            let strip = |s: String| -> String {
                s.lines()
                    .map(|l| if q.contains("DISPLAY_TIMESTAMPS") {
                        l.split_once('\t').map_or(l, |x| x.1).to_string()
                    } else {
                        l.to_string()
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            let indexed = strip(run(&mut ex, &q.replace("{T}", "t")));
            let plain = strip(run(&mut ex, &q.replace("{T}", "u")));
            prop_assert_eq!(indexed, plain, "{}", q);
        }
    }
}

/// An index table removed behind the shell's back (through the client API) does not make the
/// queries it would have answered fail: they are answered by a scan, with the same rows.
#[test]
fn a_missing_index_table_means_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let client =
        Arc::new(EmbeddedClient::open(dir.path().join("db"), EmbeddedOptions::default()).unwrap());
    let mut ex = Executor::new(client.clone() as Arc<dyn Client>);
    run(&mut ex, "CREATE TABLE t (a, b, INDEX a, QUALIFIER INDEX b)");
    run(
        &mut ex,
        "INSERT INTO t VALUES ('r1', 'a', 'x'), ('r2', 'a', 'y'), ('r3', 'b:q', 'z')",
    );
    let queries = [
        "SELECT a FROM t WHERE a = 'y'",
        "SELECT b FROM t WHERE EXISTS(b:q)",
    ];
    let before: Vec<String> = queries.iter().map(|q| run(&mut ex, q)).collect();
    assert_eq!(before, ["r2\ta\ty\n", "r3\tb:q\tz\n"]);
    client.drop_table("/^t").unwrap();
    client.drop_table("/^^t").unwrap();
    let after: Vec<String> = queries.iter().map(|q| run(&mut ex, q)).collect();
    assert_eq!(after, before);
}
