//! Model test of key-part scans in the engine: whatever the writes (deletes, versions),
//! compactions and splits, a scan with a `RowSkip` (the seek-hint row filter of a composite
//! row key), point rows counted as one interval, SCAN_AND_FILTER_ROWS stepping, and row and
//! cell limits and offsets returns exactly a plain full scan filtered by `RowSkip::matches`
//! and the rows, with the limits applied once over everything that is left.

use std::ops::Bound;
use std::sync::Arc;

use common::TableSchema;
use common::key::CellFlag;
use common::row_key::{PartLayout, PartRange, RowSkip};
use dfs_broker::LocalFs;
use proptest::prelude::*;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{RowInterval, ScanSpec};

const T: u32 = 1;
/// Rows of the layout (UINT(2), CHAR(1)), and some that do not fit it.
const ROWS: [&str; 14] = [
    "00 A", "00 B", "01 A", "01 C", "02 B", "03 A", "03 B", "03 C", "05 A", "07 C", "0 A", "03A",
    "03 AB", "1x A",
];
const IDS: [&str; 6] = ["00", "01", "02", "03", "05", "07"];
const FTS: [&str; 3] = ["A", "B", "C"];
const QUALS: [&str; 2] = ["", "q"];

fn schema() -> TableSchema {
    let mut s = TableSchema::new(T, "/skip");
    s.add_family("a");
    s.add_family("b");
    s
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<(CellFlag, usize, u8, usize, u8)>),
    Minor,
    Major,
    Split(usize),
    Scan(Desc),
}

/// A bound on one part, as an index into its values and a kind (0 unbounded, 1 included,
/// 2 excluded).
type PartBound = (u8, usize);

#[derive(Debug, Clone)]
struct Desc {
    /// Per part: ranges (start, end); none means any value.
    slots: [Vec<(PartBound, PartBound)>; 2],
    /// Point rows (indexes into ROWS), counted as one interval.
    rows: Option<Vec<usize>>,
    step: bool,
    row_limit: u64,
    row_offset: u64,
    cell_limit: u64,
    cell_offset: u64,
}

fn bound(values: &[&str], (kind, i): PartBound) -> Bound<Vec<u8>> {
    let v = values[i % values.len()].as_bytes().to_vec();
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(v),
        _ => Bound::Excluded(v),
    }
}

/// Sorted, disjoint ranges: the ones that are empty or overlap an earlier one are dropped.
fn slot(values: &[&str], ranges: &[(PartBound, PartBound)]) -> Vec<PartRange> {
    use Bound::*;
    let mut rs: Vec<PartRange> = ranges
        .iter()
        .map(|&(a, b)| (bound(values, a), bound(values, b)))
        .filter(|r| match r {
            (Included(a), Included(b)) => a <= b,
            (Included(a) | Excluded(a), Excluded(b)) | (Excluded(a), Included(b)) => a < b,
            _ => true,
        })
        .collect();
    let start = |b: &Bound<Vec<u8>>| match b {
        Unbounded => (0, Vec::new()),
        Included(v) => (1, v.clone()),
        Excluded(v) => (1, v.clone()),
    };
    rs.sort_by_key(|r| start(&r.0));
    let mut out: Vec<PartRange> = Vec::new();
    for r in rs {
        let after_last = out.last().is_none_or(|l| match (&l.1, &r.0) {
            (Unbounded, _) | (_, Unbounded) => false,
            (Included(e), Included(s)) => e < s,
            (Included(e) | Excluded(e), Excluded(s)) | (Excluded(e), Included(s)) => e <= s,
        });
        if after_last {
            out.push(r);
        }
    }
    out
}

impl Desc {
    fn skip(&self) -> RowSkip {
        RowSkip {
            layout: vec![
                PartLayout {
                    width: Some(2),
                    digits: true,
                },
                PartLayout {
                    width: Some(1),
                    digits: false,
                },
            ],
            slots: [slot(&IDS, &self.slots[0]), slot(&FTS, &self.slots[1])].into(),
        }
    }

    fn point_rows(&self) -> Option<Vec<&'static str>> {
        self.rows.as_ref().map(|rows| {
            let mut r: Vec<&str> = rows.iter().map(|&i| ROWS[i]).collect();
            r.sort_unstable();
            r.dedup();
            r
        })
    }

    fn spec(&self) -> ScanSpec {
        let mut spec = ScanSpec {
            row_skip: Some(self.skip()),
            one_interval: true,
            scan_and_filter: self.step,
            row_limit: self.row_limit,
            row_offset: self.row_offset,
            cell_limit: self.cell_limit,
            cell_offset: self.cell_offset,
            ..ScanSpec::default()
        };
        if let Some(rows) = self.point_rows() {
            spec.row_intervals = rows
                .into_iter()
                .map(|r| RowInterval {
                    start: Bound::Included(r.as_bytes().to_vec()),
                    end: Bound::Included(r.as_bytes().to_vec()),
                })
                .collect();
        }
        spec
    }

    /// What the scan should return, from a plain scan of everything.
    fn expect(&self, cells: Vec<Out>) -> Vec<Out> {
        let skip = self.skip();
        let rows = self.point_rows();
        let mut out = Vec::new();
        let (mut rows_started, mut cells_passed, mut cells_returned) = (0u64, 0u64, 0u64);
        let mut last_row: Option<String> = None;
        for c in cells {
            if !skip.matches(c.0.as_bytes())
                || rows.as_ref().is_some_and(|r| !r.contains(&c.0.as_str()))
            {
                continue;
            }
            // Cells skipped by CELL_OFFSET start no row.
            if cells_passed < self.cell_offset {
                cells_passed += 1;
                continue;
            }
            if last_row.as_deref() != Some(c.0.as_str()) {
                last_row = Some(c.0.clone());
                rows_started += 1;
            }
            if self.row_limit > 0 && rows_started > self.row_offset + self.row_limit {
                break;
            }
            if rows_started <= self.row_offset {
                continue;
            }
            if self.cell_limit > 0 && cells_returned >= self.cell_limit {
                break;
            }
            cells_returned += 1;
            out.push(c);
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

fn mutation(m: &(CellFlag, usize, u8, usize, u8)) -> Mutation {
    let &(flag, row, fam, qual, ts) = m;
    let ts = Some(1_000 + ts as i64);
    let (row, q) = (ROWS[row], QUALS[qual]);
    match flag {
        CellFlag::Insert => {
            let mut m = Mutation::insert(row, fam, q, format!("v{ts:?}"));
            m.timestamp = ts;
            m
        }
        f => Mutation::delete(f, row, fam, q, ts),
    }
}

fn cell_op() -> impl Strategy<Value = (CellFlag, usize, u8, usize, u8)> {
    let flag = prop_oneof![
        12 => Just(CellFlag::Insert),
        1 => Just(CellFlag::DeleteRow),
        1 => Just(CellFlag::DeleteColumnFamily),
        1 => Just(CellFlag::DeleteCell),
        1 => Just(CellFlag::DeleteCellVersion),
    ];
    (flag, 0..ROWS.len(), 1u8..=2, 0..QUALS.len(), 0u8..4)
}

fn desc() -> impl Strategy<Value = Desc> {
    let pb = || (0u8..3, 0usize..8);
    let ranges = || proptest::collection::vec((pb(), pb()), 0..3);
    let limit = || prop_oneof![3 => Just(0u64), 1 => 1u64..4];
    (
        ranges(),
        ranges(),
        proptest::option::weighted(0.4, proptest::collection::vec(0..ROWS.len(), 0..6)),
        any::<bool>(),
        (limit(), limit(), limit(), limit()),
    )
        .prop_map(|(a, b, rows, step, (rl, ro, cl, co))| Desc {
            slots: [a, b],
            // No intervals in a spec means every row.
            rows: rows.filter(|r| !r.is_empty()),
            step,
            row_limit: rl,
            // OFFSET and CELL_OFFSET exclude each other.
            row_offset: if co > 0 { 0 } else { ro },
            cell_limit: cl,
            cell_offset: co,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec(cell_op(), 1..10).prop_map(Op::Write),
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
    let mut scans = 0;
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
                scans += 1;
                let want = d.expect(scan(&e, &ScanSpec::default()));
                let got = scan(&e, &d.spec());
                assert_eq!(got, want, "op {i}: {d:?} (engine left, model right)");
            }
        }
    }
    if scans == 0 {
        // Every case checks at least one skip: the second part fixed, the first left out.
        let d = Desc {
            slots: [Vec::new(), vec![((1, 0), (1, 0))]],
            rows: None,
            step: false,
            row_limit: 0,
            row_offset: 0,
            cell_limit: 0,
            cell_offset: 0,
        };
        assert_eq!(
            scan(&e, &d.spec()),
            d.expect(scan(&e, &ScanSpec::default()))
        );
    }
    e.close().expect("close");
}

/// 48 cases by default; `PROPTEST_CASES` runs more.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn key_part_scans_return_the_matching_rows_of_a_plain_scan(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        run(&ops);
    }
}
