//! `boolean_index` against a brute-force model: random documents in random partitions with
//! random term sets, random AND/OR/NOT queries (absent terms included), with versions, data
//! in cell stores and the cell cache, and scans that yield every few postings. The iterator
//! must return exactly the document cells of the matching documents, in key order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::TableSchema;
use common::iterators::ScanIterator;
use common::key::CellFlag;
use common::{AccessGroupSpec, FamilySpec};
use dfs_broker::LocalFs;
use proptest::prelude::*;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};

const T: u32 = 1;
const WORDS: &[&str] = &["old", "man", "sea", "paris", "spring", "the"];
const DOC: u8 = 1;
const FI: u8 = 2;
const TEXT: u8 = 3;

fn schema() -> TableSchema {
    let mut s = TableSchema::new(T, "/shard");
    s.access_groups = vec![AccessGroupSpec::new("idx"), AccessGroupSpec::new("text")];
    s.families = vec![
        FamilySpec::new(DOC, "doc", "idx"),
        FamilySpec::new(FI, "fi", "idx"),
        FamilySpec::new(TEXT, "d", "text"),
    ];
    s
}

#[derive(Debug, Clone)]
enum Q {
    T(&'static str),
    And(Vec<Q>),
    Or(Vec<Q>),
    Not(Box<Q>),
}

impl Q {
    fn json(&self) -> String {
        match self {
            Q::T(w) => format!(r#"{{"t":["TEXT","{w}"]}}"#),
            Q::And(v) => format!(
                r#"{{"and":[{}]}}"#,
                v.iter().map(Q::json).collect::<Vec<_>>().join(",")
            ),
            Q::Or(v) => format!(
                r#"{{"or":[{}]}}"#,
                v.iter().map(Q::json).collect::<Vec<_>>().join(",")
            ),
            Q::Not(q) => format!(r#"{{"not":{}}}"#, q.json()),
        }
    }

    fn matches(&self, terms: &BTreeSet<&str>) -> bool {
        match self {
            Q::T(w) => terms.contains(w),
            Q::And(v) => v.iter().all(|q| q.matches(terms)),
            Q::Or(v) => v.iter().any(|q| q.matches(terms)),
            Q::Not(q) => !q.matches(terms),
        }
    }
}

fn query() -> impl Strategy<Value = Q> {
    let leaf = prop::sample::select(
        WORDS
            .iter()
            .copied()
            .chain(["absent"])
            .collect::<Vec<&'static str>>(),
    )
    .prop_map(Q::T);
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(Q::And),
            prop::collection::vec(inner.clone(), 1..4).prop_map(Q::Or),
            inner.prop_map(|q| Q::Not(Box::new(q))),
        ]
    })
}

/// A document: id and its TEXT terms (indexes into WORDS, as a bit set).
fn docs() -> impl Strategy<Value = Vec<(u32, u8)>> {
    prop::collection::vec((0u32..400, any::<u8>()), 0..60)
}

fn doc_key(id: u32) -> String {
    format!("en\0{id:010}")
}

fn terms_of(bits: u8) -> BTreeSet<&'static str> {
    WORDS
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, w)| *w)
        .collect()
}

/// The cells of one document version: its fields and its postings.
fn doc_cells(id: u32, bits: u8, partitions: u32, version: u32) -> Vec<Mutation> {
    let row = format!("p{:05}", id % partitions);
    let key = doc_key(id);
    let mut m = vec![
        Mutation::insert(
            row.clone(),
            DOC,
            format!("{key}\0TITLE"),
            format!("title {id} v{version}"),
        ),
        Mutation::insert(
            row.clone(),
            DOC,
            format!("{key}\0TIMESTAMP"),
            format!("{version}"),
        ),
        Mutation::insert(row.clone(), TEXT, key.clone(), format!("text of {id}")),
    ];
    for w in terms_of(bits) {
        m.push(Mutation::insert(
            row.clone(),
            FI,
            format!("TEXT\0{w}\0{key}"),
            "",
        ));
    }
    m
}

fn scan_spec(q: &Q, rows: Vec<RowInterval>) -> ScanSpec {
    ScanSpec {
        row_intervals: rows,
        columns: [DOC, FI]
            .into_iter()
            .map(|family| ColumnSelector {
                family,
                qualifier: QualifierMatch::All,
            })
            .collect(),
        max_versions: 1,
        iterators: vec![ScanIterator {
            kind: "boolean_index".into(),
            options: [("QUERY".to_string(), q.json())].into_iter().collect(),
        }],
        ..ScanSpec::default()
    }
}

fn run(
    docs: &[(u32, u8)],
    queries: &[Q],
    partitions: u32,
    work: u64,
    compact_at: usize,
    deletes: bool,
) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let o = EngineOptions {
        scan_work_per_block: work,
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", o, rt.handle().clone()).expect("open");
    e.create_table(schema()).expect("create");
    // The model: the newest version of each document (an id written twice keeps its terms
    // of the second writing; its old postings are deleted, as re-ingest does). Without
    // `deletes` the old postings stay, so the document holds the terms of every writing, and
    // a term written again gets a second version of its posting: the table then holds no
    // delete, and the iterator's cursors read raw cells (`KvIter::raw_copy`).
    let mut model: BTreeMap<u32, (u8, u32)> = BTreeMap::new();
    for (i, &(id, bits)) in docs.iter().enumerate() {
        if i == compact_at {
            e.compact(Some(T), CompactionKind::Minor).expect("minor");
        }
        let version = model.get(&id).map_or(0, |v| v.1 + 1);
        let mut muts = Vec::new();
        let kept = if deletes {
            0
        } else {
            model.get(&id).map_or(0, |v| v.0)
        };
        if let Some((old, _)) = model.get(&id).filter(|_| deletes) {
            let row = format!("p{:05}", id % partitions);
            for w in terms_of(*old) {
                muts.push(Mutation::delete(
                    CellFlag::DeleteCell,
                    row.clone(),
                    FI,
                    format!("TEXT\0{w}\0{}", doc_key(id)),
                    None,
                ));
            }
        }
        muts.extend(doc_cells(id, bits, partitions, version));
        e.apply(T, &muts).expect("apply");
        model.insert(id, (bits | kept, version));
    }
    for q in queries {
        // Expected: the matching documents' cells, by partition row then document.
        let mut want: Vec<(String, String, String)> = Vec::new();
        for (&id, &(bits, version)) in &model {
            if q.matches(&terms_of(bits)) {
                let row = format!("p{:05}", id % partitions);
                let key = doc_key(id);
                want.push((
                    row.clone(),
                    format!("{key}\0TIMESTAMP"),
                    format!("{version}"),
                ));
                want.push((
                    row,
                    format!("{key}\0TITLE"),
                    format!("title {id} v{version}"),
                ));
            }
        }
        want.sort();
        let got: Vec<(String, String, String)> = e
            .scan(T, &scan_spec(q, Vec::new()))
            .expect("scan")
            .collect_all()
            .expect("collect")
            .into_iter()
            .map(|c| {
                prop_assert_eq!(c.key.family, DOC);
                Ok((
                    String::from_utf8(c.key.row).expect("row"),
                    String::from_utf8(c.key.qualifier).expect("qualifier"),
                    String::from_utf8(c.value).expect("value"),
                ))
            })
            .collect::<Result<_, TestCaseError>>()?;
        prop_assert_eq!(&got, &want, "query {}", q.json());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn boolean_index_matches_a_brute_force_model(
        docs in docs(),
        queries in prop::collection::vec(query(), 1..6),
        partitions in prop::sample::select(vec![1u32, 3, 7]),
        work in prop::sample::select(vec![3u64, 50, 100_000]),
        compact_at in 0usize..60,
        deletes in any::<bool>(),
    ) {
        run(&docs, &queries, partitions, work, compact_at, deletes)?;
    }
}

#[test]
fn the_seed_query_shapes_on_a_fixed_corpus() {
    // Every document id 0..300 in 4 partitions; terms by divisibility, so the answers are
    // easy to state.
    let docs: Vec<(u32, u8)> = (0..300u32)
        .map(|id| {
            let mut bits = 0u8;
            for (i, d) in [2u32, 3, 5, 7, 11, 1].iter().enumerate() {
                if id % d == 0 {
                    bits |= 1 << i;
                }
            }
            (id, bits)
        })
        .collect();
    let q = |s: Q| vec![s];
    // old = even, man = multiple of 3, sea = of 5, paris = of 7, spring = of 11, the = all.
    for (query, work) in [
        (Q::And(vec![Q::T("old"), Q::T("man"), Q::T("sea")]), 5),
        (
            Q::And(vec![
                Q::T("paris"),
                Q::T("the"),
                Q::Or(vec![Q::T("spring"), Q::T("sea")]),
            ]),
            100_000,
        ),
        (Q::And(vec![Q::T("old"), Q::Not(Box::new(Q::T("man")))]), 2),
        (Q::Not(Box::new(Q::T("the"))), 7),
        (
            Q::Or(vec![Q::T("absent"), Q::Not(Box::new(Q::T("old")))]),
            7,
        ),
    ] {
        let query = q(query);
        for deletes in [true, false] {
            run(&docs, &query, 4, work, 150, deletes).expect("matches the model");
        }
    }
}

#[test]
fn bad_queries_are_refused_naming_the_option() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).expect("open");
    e.create_table(schema()).expect("create");
    for (query, says) in [
        ("{", "option QUERY is not a query"),
        (r#"{"and":[]}"#, "has no term"),
        (r#"{"and":[{"t":["TEXT","a"]},{"or":[]}]}"#, "empty and/or"),
        (r#"{"t":["TEXT",""]}"#, "empty"),
        (r#"{"x":1}"#, "not a query"),
    ] {
        let spec = ScanSpec {
            iterators: vec![ScanIterator {
                kind: "boolean_index".into(),
                options: [("QUERY".to_string(), query.to_string())]
                    .into_iter()
                    .collect(),
            }],
            ..ScanSpec::default()
        };
        let err = e.scan(T, &spec).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains(says), "{query}: {err}");
    }
    let spec = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "boolean_index".into(),
            options: [
                ("QUERY".to_string(), r#"{"t":["TEXT","a"]}"#.to_string()),
                ("INDEX_FAMILY".to_string(), "nope".to_string()),
            ]
            .into_iter()
            .collect(),
        }],
        ..ScanSpec::default()
    };
    let err = e.scan(T, &spec).map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("no column family 'nope'"), "{err}");
}
