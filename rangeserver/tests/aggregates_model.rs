//! Model test of aggregates in the engine: whatever the writes (every delete kind, several
//! versions, a TIME_ORDER DESC family, decimal and non-numeric values), compactions and splits
//! (several ranges), `Engine::aggregate` over a random scan (row intervals, key sets, value
//! predicates, timestamps, columns, limits) equals the fold of the same scan's cells, and that
//! fold agrees with a model computed here from the cells (newest version of each cell, rows,
//! and per column count, sum, min, max and non-numeric cells, in hundredths).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::TableSchema;
use common::aggregate::{Aggregate, AggregateColumn, AggregateFold, AggregatePartial, Decimal};
use common::iterators::{ValuePredicate, ValuePredicates, ValueTest};
use common::key::CellFlag;
use common::schema::{AccessGroupSpec, FamilySpec};
use common::{Cell, TimeOrder};
use dfs_broker::LocalFs;
use proptest::prelude::*;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};

const T: u32 = 1;
const ROWS: [&str; 7] = ["a", "b", "ba", "c", "d", "e", "f"];
const QUALS: [&str; 3] = ["", "x", "y"];
/// Decimals of at most two fraction digits, and values that are not decimals.
const VALUES: [&str; 12] = [
    "1", "-2", "3.5", "0.25", "-0.75", "10", "+4", "007", "x", "1e2", "", " 5",
];
/// `v` (1) MAX_VERSIONS 3 and `a` (2) in g1, `d` (3) TIME_ORDER DESC in g2.
const FAMILIES: u8 = 3;

fn schema() -> TableSchema {
    let mut s = TableSchema::new(T, "/agg");
    s.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    let mut v = FamilySpec::new(1, "v", "g1");
    v.max_versions = 3;
    let mut d = FamilySpec::new(3, "d", "g2");
    d.time_order = TimeOrder::Desc;
    s.families = vec![v, FamilySpec::new(2, "a", "g1"), d];
    s
}

type CellOp = (CellFlag, usize, u8, usize, u8, usize);

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<CellOp>),
    Minor,
    Major,
    Split(usize),
    Aggregate(Desc),
}

#[derive(Debug, Clone)]
struct Desc {
    /// Aggregated columns: (family, qualifier index or every qualifier).
    aggregate: Vec<(u8, Option<usize>)>,
    /// Columns read (empty: every family).
    columns: Vec<u8>,
    /// Row interval [start, end) by row index, or a key set.
    rows: Rows,
    /// Value predicate: family `a` equals this value.
    predicate: Option<usize>,
    /// Versions from this timestamp on.
    time_start: Option<u8>,
    /// (row limit, cell limit, cell offset, cells per family).
    limits: Option<(u64, u64, u64, u64)>,
}

#[derive(Debug, Clone)]
enum Rows {
    All,
    Interval(usize, usize),
    Keys(Vec<usize>),
}

fn mutation(m: &CellOp) -> Mutation {
    let &(flag, row, fam, qual, ts, v) = m;
    let ts = Some(1_000 + ts as i64);
    let (row, q) = (ROWS[row], QUALS[qual]);
    match flag {
        CellFlag::Insert => {
            let mut m = Mutation::insert(row, fam, q, VALUES[v]);
            m.timestamp = ts;
            m
        }
        f => Mutation::delete(f, row, fam, q, ts),
    }
}

impl Desc {
    fn spec(&self) -> ScanSpec {
        let mut spec = ScanSpec {
            columns: self
                .columns
                .iter()
                .map(|&family| ColumnSelector {
                    family,
                    qualifier: QualifierMatch::All,
                })
                .collect(),
            ..ScanSpec::default()
        };
        match &self.rows {
            Rows::All => {}
            Rows::Interval(s, e) => {
                spec.row_intervals = vec![RowInterval {
                    start: Bound::Included(ROWS[*s].as_bytes().to_vec()),
                    end: Bound::Excluded(ROWS[(*e).max(*s)].as_bytes().to_vec()),
                }]
            }
            Rows::Keys(keys) => {
                let mut keys = keys.clone();
                keys.sort_unstable();
                keys.dedup();
                spec.row_intervals = keys.iter().map(|&k| RowInterval::row(ROWS[k])).collect();
            }
        }
        if let Some(v) = self.predicate {
            spec.value_predicates = Some(ValuePredicates {
                tests: vec![ValuePredicate {
                    family: 2,
                    qualifier: None,
                    test: ValueTest::Equals(VALUES[v].as_bytes().to_vec()),
                }],
                output: Vec::new(),
            });
        }
        if let Some(t) = self.time_start {
            spec.time_start = 1_000 + i64::from(t);
        }
        if let Some((rl, cl, co, cpf)) = self.limits {
            spec.row_limit = rl;
            spec.cell_limit = cl;
            spec.cell_offset = co;
            spec.cell_limit_per_family = cpf;
        }
        spec
    }

    fn aggregate(&self) -> Aggregate {
        Aggregate {
            columns: self
                .aggregate
                .iter()
                .map(|&(family, q)| AggregateColumn {
                    family,
                    qualifier: q.map(|q| QUALS[q].as_bytes().to_vec()),
                })
                .collect(),
        }
    }
}

/// A value in hundredths, if it is a decimal (`[+-]?digits[.digits]`); every decimal the test
/// writes has at most two fraction digits.
fn hundredths(v: &str) -> Option<i128> {
    let re = regex::Regex::new(r"^([+-]?)([0-9]+)(?:\.([0-9]+))?$").expect("regex");
    let c = re.captures(v)?;
    let int: i128 = c[2].parse().expect("digits");
    let frac = c.get(3).map_or("", |m| m.as_str());
    let frac: i128 = format!("{frac:0<2}")[..2].parse().expect("digits");
    let x = int * 100 + frac;
    Some(if &c[1] == "-" { -x } else { x })
}

fn decimal_hundredths(d: &Decimal) -> i128 {
    assert!(
        d.scale <= 2,
        "the test writes at most two fraction digits: {d:?}"
    );
    d.mantissa * 10i128.pow(u32::from(2 - d.scale))
}

/// A cell's row, family and qualifier.
type CellAt<'a> = (&'a [u8], u8, &'a [u8]);

/// The model's answer from the plain scan's cells.
fn check_against_model(cells: &[Cell], agg: &Aggregate, got: &AggregatePartial) {
    let rows: std::collections::BTreeSet<&[u8]> = cells.iter().map(|c| &c.key.row[..]).collect();
    assert_eq!(got.rows, rows.len() as u64, "rows");
    // The newest version of each cell.
    let mut newest: BTreeMap<CellAt<'_>, (i64, &[u8])> = BTreeMap::new();
    for c in cells {
        let k = (&c.key.row[..], c.key.family, &c.key.qualifier[..]);
        let e = newest.entry(k).or_insert((c.key.timestamp, &c.value));
        if c.key.timestamp > e.0 {
            *e = (c.key.timestamp, &c.value);
        }
    }
    // The engine may read only the newest version of each cell when nothing above the
    // visible cells tells versions apart, so it folds between that many cells and all.
    assert!(
        (newest.len() as u64..=cells.len() as u64).contains(&got.cells),
        "cells folded: {} not within {}..={}",
        got.cells,
        newest.len(),
        cells.len()
    );
    for (col, part) in agg.columns.iter().zip(&got.columns) {
        let values: Vec<&str> = newest
            .iter()
            .filter(|((_, f, q), _)| col.matches(*f, q))
            .map(|(_, (_, v))| std::str::from_utf8(v).expect("utf-8"))
            .collect();
        let numbers: Vec<i128> = values.iter().filter_map(|v| hundredths(v)).collect();
        assert_eq!(part.count, numbers.len() as u64, "count of {col:?}");
        assert_eq!(
            part.non_numeric,
            (values.len() - numbers.len()) as u64,
            "non-numeric of {col:?}"
        );
        assert!(!part.out_of_range && !part.sum_overflow);
        assert_eq!(
            decimal_hundredths(&part.sum),
            numbers.iter().sum::<i128>(),
            "sum of {col:?}"
        );
        assert_eq!(
            part.min.map(|d| decimal_hundredths(&d)),
            numbers.iter().copied().min(),
            "min of {col:?}"
        );
        assert_eq!(
            part.max.map(|d| decimal_hundredths(&d)),
            numbers.iter().copied().max(),
            "max of {col:?}"
        );
    }
}

fn cell_op() -> impl Strategy<Value = CellOp> {
    let flag = prop_oneof![
        12 => Just(CellFlag::Insert),
        1 => Just(CellFlag::DeleteRow),
        1 => Just(CellFlag::DeleteColumnFamily),
        1 => Just(CellFlag::DeleteCell),
        1 => Just(CellFlag::DeleteCellVersion),
    ];
    (
        flag,
        0..ROWS.len(),
        1..=FAMILIES,
        0..QUALS.len(),
        0u8..6,
        0..VALUES.len(),
    )
}

fn desc() -> impl Strategy<Value = Desc> {
    let rows = prop_oneof![
        2 => Just(Rows::All),
        1 => (0..ROWS.len(), 0..ROWS.len()).prop_map(|(s, e)| Rows::Interval(s, e)),
        2 => proptest::collection::vec(0..ROWS.len(), 1..5).prop_map(Rows::Keys),
    ];
    let limits = (0u64..3, 0u64..6, 0u64..3, 0u64..3);
    (
        proptest::collection::vec(
            (
                1..=FAMILIES,
                proptest::option::weighted(0.3, 0..QUALS.len()),
            ),
            0..4,
        ),
        proptest::collection::vec(1..=FAMILIES, 0..3),
        rows,
        proptest::option::weighted(0.3, 0..VALUES.len()),
        proptest::option::weighted(0.3, 0u8..6),
        proptest::option::weighted(0.3, limits),
    )
        .prop_map(
            |(aggregate, columns, rows, predicate, time_start, limits)| Desc {
                aggregate,
                columns,
                rows,
                predicate,
                time_start,
                limits,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec(cell_op(), 1..8).prop_map(Op::Write),
        2 => Just(Op::Minor),
        1 => Just(Op::Major),
        2 => (1..ROWS.len()).prop_map(Op::Split),
        5 => desc().prop_map(Op::Aggregate),
    ]
}

/// Checks one aggregate: the engine's answer is the fold of the plain scan's cells, which is
/// the model's.
fn check(e: &Engine, d: &Desc, what: &str) {
    let spec = d.spec();
    let agg = d.aggregate();
    let cells: Vec<Cell> = e
        .scan(T, &spec)
        .expect("scan")
        .collect_all()
        .expect("scan cells")
        .into_iter()
        .map(|c| Cell {
            key: c.key,
            value: c.value,
        })
        .collect();
    let mut fold = AggregateFold::new(&agg);
    for c in &cells {
        let k = &c.key;
        fold.cell(&k.row, k.family, &k.qualifier, k.timestamp, &c.value);
    }
    let want = fold.finish();
    let got = e
        .aggregate(
            T,
            &ScanSpec {
                aggregate: Some(agg.clone()),
                ..spec
            },
        )
        .expect("aggregate");
    // Everything but the count of cells folded, which depends on how many versions the
    // engine read (checked against the model below).
    let got_cmp = AggregatePartial {
        cells: want.cells,
        ..got.clone()
    };
    assert_eq!(
        got_cmp, want,
        "{what}: {d:?} (engine left, fold of the scan right)"
    );
    check_against_model(&cells, &agg, &got);
}

fn run(ops: &[Op]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let opts = EngineOptions {
        split_size_bytes: 0,
        max_stores_per_group: 3,
        // Every aggregate over stored data runs in pieces on several threads: key sets
        // split between their rows, intervals at rows of the stores' indexes.
        aggregate_pieces: 3,
        aggregate_piece_bytes: 1,
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).expect("open");
    e.create_table(schema()).expect("create");
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write(ms) => {
                let ms: Vec<Mutation> = ms.iter().map(mutation).collect();
                e.apply(T, &ms).expect("apply");
            }
            Op::Minor => e.compact(Some(T), CompactionKind::Minor).expect("minor"),
            Op::Major => e.compact(Some(T), CompactionKind::Major).expect("major"),
            Op::Split(r) => {
                // A split row that is already a boundary is refused; that is fine here.
                let _ = e.split(T, ROWS[*r].as_bytes());
            }
            Op::Aggregate(d) => check(&e, d, &format!("op {i}")),
        }
    }
    // Every case ends with every column aggregated over the whole table.
    let last = Desc {
        aggregate: (1..=FAMILIES)
            .map(|f| (f, None))
            .chain([(1, Some(1))])
            .collect(),
        columns: Vec::new(),
        rows: Rows::All,
        predicate: None,
        time_start: None,
        limits: None,
    };
    check(&e, &last, "last");
    e.close().expect("close");
}

/// 32 cases by default; `PROPTEST_CASES` runs more.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn aggregates_equal_the_fold_of_the_plain_scan(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        run(&ops);
    }
}

#[test]
fn keys_only_and_deletes_cannot_aggregate() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).expect("open");
    e.create_table(schema()).expect("create");
    let agg = Some(Aggregate::default());
    for spec in [
        ScanSpec {
            keys_only: true,
            aggregate: agg.clone(),
            ..ScanSpec::default()
        },
        ScanSpec {
            return_deletes: true,
            aggregate: agg.clone(),
            ..ScanSpec::default()
        },
        ScanSpec::default(),
    ] {
        let err = e.aggregate(T, &spec).expect_err("refused").to_string();
        assert!(err.contains("aggregate"), "{err}");
    }
    e.close().expect("close");
}
