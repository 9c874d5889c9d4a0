//! Model test of value predicates in the engine: whatever the writes (every delete kind, equal
//! timestamps, MAX_VERSIONS, a COUNTER family, two access groups), compactions and splits, a
//! scan with value predicates returns exactly the rows of the same scan without them that have
//! a cell passing a test, with the cells the output selects. This covers the candidate rows
//! judged on raw cells under the visibility rules (`rangeserver::scan::candidates`), which
//! the engine uses when one group holds every tested family and none has a combiner.

use std::ops::Bound;
use std::sync::Arc;

use common::TableSchema;
use common::iterators::{ValuePredicate, ValuePredicates, ValueTest};
use common::key::CellFlag;
use common::schema::{AccessGroupSpec, FamilySpec};
use dfs_broker::LocalFs;
use proptest::prelude::*;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{
    CellInterval, CellPos, ColumnSelector, QualifierMatch, RowInterval, ScanSpec,
};

const T: u32 = 1;
const ROWS: [&str; 6] = ["a", "b", "ba", "c", "d", "e"];
const QUALS: [&str; 3] = ["", "x", "y"];
/// `a` (1) MAX_VERSIONS 2 and `b` (2) in group g1, `c` (3) in g2, `n` (4) COUNTER in g1.
const FAMILIES: u8 = 4;
const COUNTER: u8 = 4;

fn schema() -> TableSchema {
    let mut s = TableSchema::new(T, "/vp");
    s.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    let mut a = FamilySpec::new(1, "a", "g1");
    a.max_versions = 2;
    let mut n = FamilySpec::new(COUNTER, "n", "g1");
    n.counter = true;
    s.families = vec![
        a,
        FamilySpec::new(2, "b", "g1"),
        FamilySpec::new(3, "c", "g2"),
        n,
    ];
    s
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<(CellFlag, usize, u8, usize, u8, u8)>),
    Minor,
    Major,
    Split(usize),
    Scan(Desc),
}

#[derive(Debug, Clone)]
struct Desc {
    /// (family, qualifier index or none, test: 0 equals, 1 prefix, 2 exists, 3 regex, value).
    tests: Vec<(u8, Option<usize>, u8, u8)>,
    output: Vec<u8>,
    columns: Vec<u8>,
    start: Option<(usize, bool)>,
    /// A cell interval starting inside a row (family, qualifier) instead of a row interval.
    mid_row: Option<(u8, usize)>,
    max_versions: u32,
}

fn value(fam: u8, v: u8) -> String {
    if fam == COUNTER {
        format!("+{}", v % 3)
    } else {
        format!("v{}", v % 4)
    }
}

fn mutation(m: &(CellFlag, usize, u8, usize, u8, u8)) -> Mutation {
    let &(flag, row, fam, qual, ts, v) = m;
    let ts = Some(1_000 + ts as i64);
    let (row, q) = (ROWS[row], QUALS[qual]);
    match flag {
        CellFlag::Insert => {
            let mut m = Mutation::insert(row, fam, q, value(fam, v));
            m.timestamp = ts;
            m
        }
        f => Mutation::delete(f, row, fam, q, ts),
    }
}

impl Desc {
    fn spec(&self, with_predicates: bool) -> ScanSpec {
        let tests = self
            .tests
            .iter()
            .map(|&(family, q, kind, v)| ValuePredicate {
                family,
                qualifier: q.map(|q| QUALS[q].as_bytes().to_vec()),
                test: match kind {
                    0 => ValueTest::Equals(value(family, v).into_bytes()),
                    1 => ValueTest::Prefix(
                        value(family, v).as_bytes()[..1 + v as usize % 2].to_vec(),
                    ),
                    2 => ValueTest::Exists,
                    _ => {
                        ValueTest::Regex(regex::bytes::Regex::new(&format!("{}$", v % 4)).unwrap())
                    }
                },
            })
            .collect();
        let sel = |f: &u8| ColumnSelector {
            family: *f,
            qualifier: QualifierMatch::All,
        };
        let mut spec = ScanSpec {
            columns: self.columns.iter().map(sel).collect(),
            max_versions: self.max_versions,
            ..ScanSpec::default()
        };
        if let Some((fam, q)) = self.mid_row {
            let (r, _) = self.start.unwrap_or((0, true));
            spec.cell_intervals = vec![CellInterval {
                start: Bound::Included(CellPos {
                    row: ROWS[r].as_bytes().to_vec(),
                    family: fam,
                    qualifier: QUALS[q].as_bytes().to_vec(),
                }),
                end: Bound::Unbounded,
            }];
        } else if let Some((r, inc)) = self.start {
            let row = ROWS[r].as_bytes().to_vec();
            spec.row_intervals = vec![RowInterval {
                start: if inc {
                    Bound::Included(row)
                } else {
                    Bound::Excluded(row)
                },
                end: Bound::Unbounded,
            }];
        }
        if with_predicates {
            spec.value_predicates = Some(ValuePredicates {
                tests,
                output: self.output.iter().map(sel).collect(),
            });
        }
        spec
    }

    /// What the predicates should leave of a scan without them.
    fn filter(&self, cells: Vec<Out>) -> Vec<Out> {
        let spec = self.spec(true);
        let preds = spec.value_predicates.as_ref().unwrap();
        let passes = |c: &Out| {
            preds.tests.iter().any(|t| {
                t.family == c.1
                    && t.qualifier
                        .as_ref()
                        .is_none_or(|q| q.as_slice() == c.2.as_bytes())
                    && match &t.test {
                        ValueTest::Equals(v) => v.as_slice() == c.4.as_bytes(),
                        ValueTest::Prefix(p) => c.4.as_bytes().starts_with(p),
                        ValueTest::Exists => true,
                        ValueTest::Regex(r) => r.is_match(c.4.as_bytes()),
                    }
            })
        };
        let shown = |c: &Out| self.output.is_empty() || self.output.contains(&c.1);
        let mut out = Vec::new();
        let mut i = 0;
        while i < cells.len() {
            let j = i + cells[i..].iter().take_while(|c| c.0 == cells[i].0).count();
            let row = &cells[i..j];
            if row.iter().any(passes) {
                out.extend(row.iter().filter(|c| shown(c)).cloned());
            }
            i = j;
        }
        out
    }
}

type Out = (String, u8, String, i64, String);

fn scan(e: &Engine, spec: &ScanSpec) -> Vec<Out> {
    e.scan(T, spec)
        .expect("scan")
        .collect_all()
        .expect("scan cells")
        .into_iter()
        .map(|c| {
            (
                String::from_utf8(c.key.row).expect("row"),
                c.key.family,
                String::from_utf8(c.key.qualifier).expect("qualifier"),
                c.key.timestamp,
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

fn cell_op() -> impl Strategy<Value = (CellFlag, usize, u8, usize, u8, u8)> {
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
        any::<u8>(),
    )
        .prop_filter("a COUNTER takes no version deletes", |(f, _, fam, ..)| {
            !(*fam == COUNTER && *f == CellFlag::DeleteCellVersion)
        })
}

fn desc() -> impl Strategy<Value = Desc> {
    let test = (
        1..=FAMILIES,
        proptest::option::weighted(0.3, 0..QUALS.len()),
        0u8..4,
        any::<u8>(),
    );
    (
        proptest::collection::vec(test, 1..4),
        proptest::collection::vec(1..=FAMILIES, 0..2),
        proptest::collection::vec(1..=FAMILIES, 0..3),
        proptest::option::weighted(0.4, (0..ROWS.len(), any::<bool>())),
        proptest::option::weighted(0.2, (1..=FAMILIES, 0..QUALS.len())),
        0u32..3,
    )
        .prop_map(
            |(tests, output, columns, start, mid_row, max_versions)| Desc {
                tests,
                output,
                columns,
                start,
                mid_row,
                max_versions,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec(cell_op(), 1..8).prop_map(Op::Write),
        2 => Just(Op::Minor),
        1 => Just(Op::Major),
        1 => (0..ROWS.len()).prop_map(Op::Split),
        5 => desc().prop_map(Op::Scan),
    ]
}

fn run(ops: &[Op]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let opts = EngineOptions {
        split_size_bytes: 0,
        max_stores_per_group: 3,
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
            Op::Scan(d) => {
                let want = d.filter(scan(&e, &d.spec(false)));
                let got = scan(&e, &d.spec(true));
                assert_eq!(
                    got, want,
                    "op {i}: {d:?} (engine left, filtered plain scan right)"
                );
            }
        }
    }
    // Every case ends with a scan of every test kind over all rows, so none goes unchecked.
    let last = Desc {
        tests: (1..=FAMILIES).map(|f| (f, None, f % 4, f)).collect(),
        output: Vec::new(),
        columns: Vec::new(),
        start: None,
        mid_row: None,
        max_versions: 0,
    };
    assert_eq!(
        scan(&e, &last.spec(true)),
        last.filter(scan(&e, &last.spec(false)))
    );
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
    fn value_predicates_return_the_matching_rows_of_a_plain_scan(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        run(&ops);
    }
}

/// Rows whose first cell fails and a later one passes are sought again from their start, in
/// a store and in the cache at once; rows with no passing cell leave nothing, in either group.
#[test]
fn a_row_passing_on_a_later_cell_comes_back_whole() {
    let ops = vec![
        Op::Write(vec![
            (CellFlag::Insert, 0, 1, 0, 1, 0),
            (CellFlag::Insert, 0, 2, 1, 1, 1),
            (CellFlag::Insert, 1, 1, 0, 1, 2),
            (CellFlag::Insert, 1, 3, 0, 1, 1),
        ]),
        Op::Minor,
        Op::Write(vec![
            (CellFlag::Insert, 0, 2, 2, 2, 3),
            (CellFlag::Insert, 2, 1, 0, 2, 1),
        ]),
        Op::Scan(Desc {
            tests: vec![(2, None, 0, 1)],
            output: Vec::new(),
            columns: Vec::new(),
            start: None,
            mid_row: None,
            max_versions: 0,
        }),
    ];
    run(&ops);
}
