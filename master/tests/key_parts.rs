//! Model test of key-part queries on a cluster: a table with a composite row key
//! (`ROW KEY (objectid UINT(4), fieldtype CHAR(2))`) in eight ranges over two range servers,
//! with several versions and deletes, queried in HQL by random key sets, ranges, leading parts
//! left out, SCAN_AND_FILTER_ROWS, limits and aggregates. Every query returns on the cluster
//! exactly what it returns on the embedded database, and without limits what a full scan
//! filtered here by the rule of the predicates returns.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use client::cluster::ClusterClient;
use client::{Client, Mutation};
use embedded::{EmbeddedClient, EmbeddedOptions};
use hql::exec::Executor;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rangeserver::iterators::Registry;
use support::{TestCluster, wait_for};

const OBJECTS: u32 = 600;
const TYPES: [&str; 3] = ["F1", "F2", "F3"];

const CREATE: &str =
    "CREATE TABLE o (attribid, val, ROW KEY (objectid UINT(4), fieldtype CHAR(2)))";

/// The cells: `val` = a number (two versions on every 7th row), `attribid` on most rows,
/// rows of F3 only on every 5th object; every 11th row's `val` deleted, every 13th row deleted.
fn load(c: &dyn Client) {
    let mut m = c.mutator("/o").expect("mutator");
    for id in 0..OBJECTS {
        for (t, ft) in TYPES.iter().enumerate() {
            if t == 2 && id % 5 != 0 {
                continue;
            }
            let row = format!("{id:04} {ft}");
            let n = id * 3 + t as u32;
            let mut v = Mutation::insert(row.clone(), 2, "", format!("{}", (n * 37) % 1000));
            v.timestamp = Some(1_000);
            m.set(v).expect("set");
            if n.is_multiple_of(7) {
                let mut v2 = Mutation::insert(row.clone(), 2, "", format!("-{}.5", n % 50));
                v2.timestamp = Some(2_000);
                m.set(v2).expect("set");
            }
            if n % 4 != 3 {
                m.set(Mutation::insert(
                    row.clone(),
                    1,
                    "",
                    format!("A{}", n % 4 + 1),
                ))
                .expect("set");
            }
        }
    }
    m.flush().expect("flush");
    for id in 0..OBJECTS {
        for (t, ft) in TYPES.iter().enumerate() {
            let n = id * 3 + t as u32;
            let row = format!("{id:04} {ft}");
            if n.is_multiple_of(11) {
                m.set(Mutation::delete(
                    common::key::CellFlag::DeleteColumnFamily,
                    row.clone(),
                    2,
                    "",
                    Some(3_000),
                ))
                .expect("delete");
            }
            if n.is_multiple_of(13) {
                m.set(Mutation::delete(
                    common::key::CellFlag::DeleteRow,
                    row,
                    0,
                    "",
                    Some(3_000),
                ))
                .expect("delete");
            }
        }
    }
    m.flush().expect("flush");
}

/// One key-part predicate on a part.
#[derive(Debug, Clone)]
enum PartTest {
    In(Vec<u32>),
    Between(u32, u32),
    Cmp(&'static str, u32),
}

#[derive(Debug, Clone)]
struct Query {
    objectid: Option<PartTest>,
    /// Field types allowed (indexes into TYPES); `None`: no predicate on the part.
    fieldtype: Option<Vec<usize>>,
    attribid: Option<usize>,
    limit: Option<(u64, u64)>,
    cell_limit: Option<u64>,
    scan_and_filter: bool,
    aggregate: bool,
}

impl Query {
    fn hql(&self) -> String {
        let mut preds = Vec::new();
        match &self.objectid {
            Some(PartTest::In(ids)) => preds.push(format!(
                "objectid IN ({})",
                ids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(PartTest::Between(a, b)) => preds.push(format!("objectid BETWEEN {a} AND {b}")),
            Some(PartTest::Cmp(op, v)) => preds.push(format!("objectid {op} {v}")),
            None => {}
        }
        match self.fieldtype.as_deref() {
            Some([t]) => preds.push(format!("fieldtype = '{}'", TYPES[*t])),
            Some(ts) => preds.push(format!(
                "fieldtype IN ({})",
                ts.iter()
                    .map(|t| format!("'{}'", TYPES[*t]))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => {}
        }
        if let Some(a) = self.attribid {
            preds.push(format!("attribid = \"A{a}\""));
        }
        let columns = if self.aggregate {
            "COUNT(*), COUNT(val), SUM(val), AVG(val), MIN(val), MAX(val)"
        } else {
            "*"
        };
        let mut q = format!("SELECT {columns} FROM o");
        if !preds.is_empty() {
            q += &format!(" WHERE {}", preds.join(" AND "));
        }
        if let Some((limit, offset)) = self.limit {
            q += &format!(" LIMIT {limit} OFFSET {offset}");
        }
        if let Some(n) = self.cell_limit {
            q += &format!(" CELL_LIMIT {n}");
        }
        if self.scan_and_filter {
            q += " SCAN_AND_FILTER_ROWS";
        }
        q
    }

    /// Whether a stored row passes the key-part predicates.
    fn keeps_row(&self, row: &str) -> bool {
        let (id, ft) = row.split_once(' ').expect("a composite row");
        let id: u32 = id.parse().expect("objectid");
        let id_ok = match &self.objectid {
            None => true,
            Some(PartTest::In(ids)) => ids.contains(&id),
            Some(PartTest::Between(a, b)) => (*a..=*b).contains(&id),
            Some(PartTest::Cmp(op, v)) => match *op {
                "<" => id < *v,
                "<=" => id <= *v,
                ">" => id > *v,
                ">=" => id >= *v,
                _ => id == *v,
            },
        };
        let ft_ok = self
            .fieldtype
            .as_ref()
            .is_none_or(|ts| ts.iter().any(|t| TYPES[*t] == ft));
        id_ok && ft_ok
    }
}

fn query() -> impl Strategy<Value = Query> {
    let id = 0..OBJECTS + 20;
    let objectid = prop_oneof![
        2 => Just(None),
        4 => proptest::collection::vec(id.clone(), 1..40).prop_map(|v| Some(PartTest::In(v))),
        2 => (id.clone(), id.clone()).prop_map(|(a, b)| Some(PartTest::Between(a.min(b), a.max(b)))),
        1 => (prop::sample::select(vec!["<", "<=", ">", ">=", "="]), id)
            .prop_map(|(op, v)| Some(PartTest::Cmp(op, v))),
    ];
    let fieldtype = prop_oneof![
        2 => Just(None),
        2 => (0..TYPES.len()).prop_map(|t| Some(vec![t])),
        1 => proptest::collection::btree_set(0..TYPES.len(), 1..3)
            .prop_map(|s| Some(s.into_iter().collect())),
    ];
    (
        objectid,
        fieldtype,
        prop::option::weighted(0.2, 1usize..5),
        prop::option::weighted(0.2, (1u64..30, 0u64..10)),
        prop::option::weighted(0.1, 1u64..40),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(objectid, fieldtype, attribid, limit, cell_limit, scan_and_filter, aggregate)| {
                Query {
                    objectid,
                    fieldtype,
                    attribid,
                    limit,
                    cell_limit,
                    scan_and_filter,
                    aggregate,
                }
            },
        )
}

fn run(ex: &mut Executor, q: &str) -> String {
    let stmt = hql::parse_statement(q).unwrap_or_else(|e| panic!("{q}: {e}"));
    let mut out = Vec::new();
    match ex.execute(&stmt, &mut out) {
        Ok(()) => String::from_utf8(out).expect("utf-8"),
        Err(e) => format!("error: {e}"),
    }
}

/// The cells of the newest-first plain scan as SELECT prints them, by row.
fn rows_of(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let row = line.split('\t').next().expect("a row").to_string();
        m.entry(row).or_default().push(line.to_string());
    }
    m
}

#[test]
fn key_part_queries_on_a_cluster_match_the_embedded_database_and_a_filtered_full_scan() {
    let mut cluster = TestCluster::start(Registry::builtins());
    let admin = cluster.client();
    cluster.add_server(Registry::builtins(), &admin);
    cluster.add_server(Registry::builtins(), &admin);
    let client = cluster.client_with(|o| o.scan_intervals_per_request = 16);
    let client: Arc<ClusterClient> = Arc::new(client);
    let dir = tempfile::tempdir().expect("tempdir");
    let embedded =
        Arc::new(EmbeddedClient::open(dir.path(), EmbeddedOptions::default()).expect("open"));
    let mut on_cluster = Executor::new(client.clone());
    let mut on_embedded = Executor::new(embedded.clone());
    for ex in [&mut on_cluster, &mut on_embedded] {
        assert_eq!(run(ex, CREATE), "");
    }
    load(client.as_ref());
    load(embedded.as_ref());
    // Eight ranges, spread over both servers.
    let t = client.table_schema("/o").expect("schema").id;
    let holder = client.table_locations("/o").expect("locations")[0]
        .location
        .clone();
    for row in [
        "0070 F1", "0150 F2", "0222 F1", "0300 F3", "0380 F1", "0455 F2", "0530 F1",
    ] {
        cluster
            .engine(&holder)
            .split(t, row.as_bytes())
            .expect("split");
    }
    wait_for("the splits and a balance to spread the table", || {
        let _ = client.balance();
        let locs = client.table_locations("/o").expect("locations");
        let mut servers: Vec<&str> = locs.iter().map(|l| l.location.as_str()).collect();
        servers.sort();
        servers.dedup();
        locs.len() == 8 && servers.len() == 2
    });
    let full = run(&mut on_embedded, "SELECT * FROM o");
    assert_eq!(run(&mut on_cluster, "SELECT * FROM o"), full);
    let all = rows_of(&full);
    assert!(all.len() > 1000, "{} rows", all.len());
    let scans = client.scan_requests();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    // The runner takes a `Fn`: the executors and the count live in cells.
    let executors = std::cell::RefCell::new((on_cluster, on_embedded));
    let checked = std::cell::Cell::new(0);
    runner
        .run(&query(), |q| {
            let text = q.hql();
            let (got, want) = {
                let mut ex = executors.borrow_mut();
                (run(&mut ex.0, &text), run(&mut ex.1, &text))
            };
            prop_assert_eq!(&got, &want, "{} (cluster left, embedded right)", text);
            prop_assert!(!got.starts_with("error"), "{}: {}", text, got);
            let plain = q.limit.is_none() && q.cell_limit.is_none() && q.attribid.is_none();
            if plain && !q.aggregate {
                // What a full scan filtered here returns: the rows the parts keep.
                let mut expect = String::new();
                for (_, lines) in all.iter().filter(|(row, _)| q.keeps_row(row)) {
                    for l in lines {
                        expect += l;
                        expect.push('\n');
                    }
                }
                prop_assert_eq!(
                    got,
                    expect,
                    "{} (cluster left, filtered full scan right)",
                    text
                );
            }
            checked.set(checked.get() + 1);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.get(), cases);
    // Key sets went a batch per run of ranges, not a request per key.
    let requests = client.scan_requests() - scans;
    eprintln!("{cases} queries took {requests} scan requests on the cluster");
    assert!(requests < u64::from(cases) * 12, "{requests} requests");
}
