//! Model test of the iterator layer: random puts (equal timestamps included) to counter, sum,
//! MAX_VERSIONS, age_off and APPEND_ONLY uid_set families, every delete kind (refused ones
//! included), compactions, splits, reopens, clock steps and scans with iterators and limits,
//! each compared with a plain in-memory model.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use common::TableSchema;
use common::iterators::{CombinerSpec, IterScope, IteratorSpec, ScanIterator};
use common::key::CellFlag;
use common::schema::FamilySpec;
use dfs_broker::LocalFs;
use proptest::prelude::*;
use rangeserver::Error;
use rangeserver::engine::{Clock, CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};

/// Table 1: `m` (1) MAX_VERSIONS 2, `n` (2) COUNTER, `s` (3) sum, `g` (4) aged off by a table
/// `column_age_off` in every scope. Table 2: `u` (1) uid_set(MAX = 2) APPEND_ONLY, `p` (2) plain.
const T1: u32 = 1;
const T2: u32 = 2;
const SEC: i64 = 1_000_000_000;
const NOW0: i64 = 1_000 * SEC;
const ROWS: [&str; 5] = ["a", "b", "ba", "c", "d"];
const QUALS: [&str; 2] = ["", "x"];
const NTS: u8 = 8;
const AGE_SECS: i64 = 4;
const UID_MAX: usize = 2;

fn schema1() -> TableSchema {
    let mut s = TableSchema::new(T1, "/im1");
    let mut m = FamilySpec::new(1, "m", "default");
    m.max_versions = 2;
    let mut n = FamilySpec::new(2, "n", "default");
    n.counter = true;
    let mut sum = FamilySpec::new(3, "s", "default");
    sum.combiner = Some(CombinerSpec {
        kind: "sum".into(),
        options: BTreeMap::new(),
    });
    s.families = vec![m, n, sum, FamilySpec::new(4, "g", "default")];
    s.iterators = vec![IteratorSpec {
        name: "old_g".into(),
        kind: "column_age_off".into(),
        options: [
            ("FAMILY".to_string(), "g".to_string()),
            ("TTL".to_string(), AGE_SECS.to_string()),
        ]
        .into(),
        scopes: vec![IterScope::Scan, IterScope::Minor, IterScope::Major],
        priority: 5,
    }];
    s
}

fn schema2() -> TableSchema {
    let mut s = TableSchema::new(T2, "/im2");
    let mut u = FamilySpec::new(1, "u", "default");
    u.combiner = Some(CombinerSpec {
        kind: "uid_set".into(),
        options: [("MAX".to_string(), UID_MAX.to_string())].into(),
    });
    u.append_only = true;
    s.families = vec![u, FamilySpec::new(2, "p", "default")];
    s
}

#[derive(Debug)]
struct ManualClock(AtomicI64);

impl Clock for ManualClock {
    fn now_ns(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// One generated mutation.
#[derive(Clone)]
struct M {
    table: u32,
    flag: CellFlag,
    row: usize,
    fam: u8,
    qual: usize,
    ts: u8,
    val: u8,
}

impl M {
    fn value(&self) -> String {
        if self.flag != CellFlag::Insert {
            return String::new();
        }
        let n = self.val % 10;
        match (self.table, self.fam) {
            (T1, 2) => match self.val % 4 {
                0 => format!("+{n}"),
                1 => format!("-{n}"),
                2 => format!("={n}"),
                _ => format!("{n}"),
            },
            (T1, 3) => match self.val % 3 {
                0 => format!("+{n}"),
                1 => format!("-{n}"),
                _ => format!("{n}"),
            },
            (T2, 1) => format!("m{}", self.val % 4),
            _ => format!("v{}", self.val),
        }
    }

    fn to_mutation(&self) -> Mutation {
        let ts = Some(NOW0 + self.ts as i64 * SEC);
        let (row, q) = (ROWS[self.row], QUALS[self.qual]);
        match self.flag {
            CellFlag::Insert => {
                let mut m = Mutation::insert(row, self.fam, q, self.value());
                m.timestamp = ts;
                m
            }
            CellFlag::DeleteRow => Mutation::delete(CellFlag::DeleteRow, row, 0, "", ts),
            CellFlag::DeleteColumnFamily => {
                Mutation::delete(CellFlag::DeleteColumnFamily, row, self.fam, "", ts)
            }
            f => Mutation::delete(f, row, self.fam, q, ts),
        }
    }

    /// True for the deletes table 2 refuses (APPEND_ONLY `u`, and so row deletes).
    fn refused(&self) -> bool {
        self.table == T2
            && (self.flag == CellFlag::DeleteRow || (self.flag.is_delete() && self.fam == 1))
    }
}

impl fmt::Debug for M {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (r, q, t, tb) = (ROWS[self.row], QUALS[self.qual], self.ts, self.table);
        match self.flag {
            CellFlag::Insert => write!(
                f,
                "T{tb} ins({r} {}:{q:?} @t{t} = {:?})",
                self.fam,
                self.value()
            ),
            CellFlag::DeleteRow => write!(f, "T{tb} del_row({r} @t{t})"),
            CellFlag::DeleteColumnFamily => write!(f, "T{tb} del_fam({r} {} @t{t})", self.fam),
            CellFlag::DeleteCell => write!(f, "T{tb} del_cell({r} {}:{q:?} @t{t})", self.fam),
            CellFlag::DeleteCellVersion => {
                write!(f, "T{tb} del_ver({r} {}:{q:?} @t{t})", self.fam)
            }
        }
    }
}

/// A scan iterator the model knows.
#[derive(Debug, Clone, Copy)]
enum It {
    RowRegexB,
    QualX,
    FirstInRow,
}

#[derive(Debug, Clone)]
struct ScanDesc {
    table: u32,
    start: Option<(usize, bool)>,
    end: Option<(usize, bool)>,
    columns: Vec<u8>,
    iterators: Vec<It>,
    row_limit: u64,
    cell_limit: u64,
    cell_offset: u64,
}

impl ScanDesc {
    fn full(table: u32) -> Self {
        Self {
            table,
            start: None,
            end: None,
            columns: Vec::new(),
            iterators: Vec::new(),
            row_limit: 0,
            cell_limit: 0,
            cell_offset: 0,
        }
    }

    fn spec(&self) -> ScanSpec {
        let bound = |b: Option<(usize, bool)>| match b {
            None => Bound::Unbounded,
            Some((r, true)) => Bound::Included(ROWS[r].as_bytes().to_vec()),
            Some((r, false)) => Bound::Excluded(ROWS[r].as_bytes().to_vec()),
        };
        let row_intervals = if self.start.is_none() && self.end.is_none() {
            Vec::new()
        } else {
            vec![RowInterval {
                start: bound(self.start),
                end: bound(self.end),
            }]
        };
        let it = |kind: &str, o: &[(&str, &str)]| ScanIterator {
            kind: kind.into(),
            options: o
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        ScanSpec {
            row_intervals,
            columns: self
                .columns
                .iter()
                .map(|&family| ColumnSelector {
                    family,
                    qualifier: QualifierMatch::All,
                })
                .collect(),
            iterators: self
                .iterators
                .iter()
                .map(|i| match i {
                    It::RowRegexB => it("row_regex", &[("REGEX", "^b")]),
                    It::QualX => it("qualifier_regex", &[("REGEX", "^x$")]),
                    It::FirstInRow => it("first_in_row", &[]),
                })
                .collect(),
            row_limit: self.row_limit,
            cell_limit: self.cell_limit,
            cell_offset: self.cell_offset,
            ..ScanSpec::default()
        }
    }

    fn row_in(&self, row: &str) -> bool {
        (match self.start {
            None => true,
            Some((r, true)) => row >= ROWS[r],
            Some((r, false)) => row > ROWS[r],
        }) && (match self.end {
            None => true,
            Some((r, true)) => row <= ROWS[r],
            Some((r, false)) => row < ROWS[r],
        })
    }
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<M>),
    Advance(u8),
    Minor,
    Merging,
    Major,
    Split(u32, usize),
    Reopen,
    Scan(ScanDesc),
}

/// A uid_set state: the count and the members, `None` once dropped.
type SetState = (u64, Option<BTreeSet<String>>);

#[derive(Debug, Clone)]
struct Entry {
    table: u32,
    row: String,
    fam: u8,
    qual: String,
    ts: i64,
    rev: u64,
    flag: CellFlag,
    value: String,
    set: Option<SetState>,
}

type Out = (String, u8, String, i64, String);

struct Model {
    entries: Vec<Entry>,
    next_rev: u64,
    now: i64,
}

impl Model {
    fn write(&mut self, ms: &[M]) {
        for m in ms {
            let mm = m.to_mutation();
            let value = m.value();
            let set = (m.table == T2 && m.fam == 1 && m.flag == CellFlag::Insert)
                .then(|| (1, Some([value.clone()].into())));
            self.entries.push(Entry {
                table: m.table,
                row: ROWS[m.row].to_string(),
                fam: mm.family,
                qual: String::from_utf8(mm.qualifier).expect("ascii"),
                ts: mm.timestamp.expect("explicit"),
                rev: self.next_rev,
                flag: m.flag,
                value,
                set,
            });
            self.next_rev += 1;
        }
    }

    /// (combined, MAX_VERSIONS, age-off ns) of a family.
    fn family(table: u32, fam: u8) -> (bool, usize, i64) {
        match (table, fam) {
            (T1, 1) => (false, 2, 0),
            (T1, 2) | (T1, 3) | (T2, 1) => (true, 0, 0),
            (T1, 4) => (false, 0, AGE_SECS * SEC),
            _ => (false, 0, 0),
        }
    }

    fn cells(&self, table: u32) -> BTreeSet<(String, u8, String)> {
        self.entries
            .iter()
            .filter(|e| e.table == table && e.flag == CellFlag::Insert)
            .map(|e| (e.row.clone(), e.fam, e.qual.clone()))
            .collect()
    }

    /// Visible versions newest first: deletes, duplicates (plain families) and age-off applied.
    fn versions(&self, table: u32, row: &str, fam: u8, qual: &str) -> Vec<&Entry> {
        let (combined, _, age) = Self::family(table, fam);
        let mut covered_to = i64::MIN;
        let mut version_deletes = Vec::new();
        for e in self
            .entries
            .iter()
            .filter(|e| e.table == table && e.row == row)
        {
            match e.flag {
                CellFlag::DeleteRow => covered_to = covered_to.max(e.ts),
                CellFlag::DeleteColumnFamily if e.fam == fam => covered_to = covered_to.max(e.ts),
                CellFlag::DeleteCell if e.fam == fam && e.qual == qual => {
                    covered_to = covered_to.max(e.ts)
                }
                CellFlag::DeleteCellVersion if e.fam == fam && e.qual == qual => {
                    version_deletes.push(e.ts)
                }
                _ => {}
            }
        }
        let mut ins: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| {
                e.table == table
                    && e.flag == CellFlag::Insert
                    && e.row == row
                    && e.fam == fam
                    && e.qual == qual
            })
            .collect();
        ins.sort_by(|x, y| y.ts.cmp(&x.ts).then(y.rev.cmp(&x.rev)));
        if !combined {
            ins.dedup_by_key(|e| e.ts);
        }
        ins.retain(|e| {
            e.ts > covered_to
                && !version_deletes.contains(&e.ts)
                && !(age > 0 && e.ts < self.now - age)
        });
        ins
    }

    /// The combined value of a combined family's versions, newest first, as stored after a
    /// major compaction (counter: `=total`) and as displayed.
    fn combine(table: u32, fam: u8, vs: &[&Entry]) -> (String, String, Option<SetState>) {
        match (table, fam) {
            (T1, 2) => {
                let mut sum = 0i64;
                for e in vs {
                    let (reset, n) = match e.value.as_bytes()[0] {
                        b'=' => (true, e.value[1..].parse::<i64>().expect("number")),
                        b'+' => (false, e.value[1..].parse::<i64>().expect("number")),
                        _ => (false, e.value.parse::<i64>().expect("number")),
                    };
                    sum = sum.wrapping_add(n);
                    if reset {
                        break;
                    }
                }
                (format!("={sum}"), sum.to_string(), None)
            }
            (T1, 3) => {
                let sum: i64 = vs
                    .iter()
                    .map(|e| {
                        e.value
                            .trim_start_matches('+')
                            .parse::<i64>()
                            .expect("number")
                    })
                    .sum();
                (sum.to_string(), sum.to_string(), None)
            }
            _ => {
                let mut count = 0;
                let mut members = Some(BTreeSet::new());
                for e in vs {
                    let (n, m) = e.set.as_ref().expect("a set state");
                    count += n;
                    members = match (members, m) {
                        (Some(mut a), Some(b)) => {
                            a.extend(b.iter().cloned());
                            (a.len() <= UID_MAX).then_some(a)
                        }
                        _ => None,
                    };
                }
                let shown = match &members {
                    None => format!("{count} *"),
                    Some(m) => {
                        let ms: Vec<String> = m.iter().map(|x| format!("{x:?}")).collect();
                        format!("{count} [{}]", ms.join(","))
                    }
                };
                (String::new(), shown, Some((count, members)))
            }
        }
    }

    /// Every visible cell of a table in scan order (before the scan's own iterators).
    fn visible(&self, table: u32) -> Vec<Out> {
        let mut all = Vec::new();
        for (row, fam, qual) in self.cells(table) {
            let vs = self.versions(table, &row, fam, &qual);
            let Some(newest) = vs.first() else { continue };
            let (combined, max, _) = Self::family(table, fam);
            if combined {
                let (_, shown, _) = Self::combine(table, fam, &vs);
                all.push((row.clone(), fam, qual.clone(), newest.ts, shown));
                continue;
            }
            let n = if max > 0 { vs.len().min(max) } else { vs.len() };
            for e in &vs[..n] {
                all.push((row.clone(), fam, qual.clone(), e.ts, e.value.clone()));
            }
        }
        all
    }

    fn scan(&self, d: &ScanDesc) -> Vec<Out> {
        let mut cells: Vec<Out> = self
            .visible(d.table)
            .into_iter()
            .filter(|c| d.row_in(&c.0) && (d.columns.is_empty() || d.columns.contains(&c.1)))
            .collect();
        for it in &d.iterators {
            cells = match it {
                It::RowRegexB => cells.into_iter().filter(|c| c.0.starts_with('b')).collect(),
                It::QualX => cells.into_iter().filter(|c| c.2 == "x").collect(),
                It::FirstInRow => {
                    let mut seen = BTreeSet::new();
                    cells
                        .into_iter()
                        .filter(|c| seen.insert(c.0.clone()))
                        .collect()
                }
            };
        }
        let mut res = Vec::new();
        let mut rows = 0;
        let mut cur: Option<String> = None;
        let mut passed = 0;
        for c in cells {
            // Cells skipped by CELL_OFFSET start no row.
            if passed < d.cell_offset {
                passed += 1;
                continue;
            }
            if cur.as_deref() != Some(c.0.as_str()) {
                cur = Some(c.0.clone());
                rows += 1;
                if d.row_limit > 0 && rows > d.row_limit {
                    break;
                }
            }
            if d.cell_limit > 0 && res.len() as u64 >= d.cell_limit {
                break;
            }
            res.push(c);
        }
        res
    }

    /// A major compaction: tombstones and what they cover, aged-off cells and versions past
    /// MAX_VERSIONS go; each combined cell becomes one version keyed as its newest.
    fn major(&mut self) {
        let mut kept = Vec::new();
        for table in [T1, T2] {
            for (row, fam, qual) in self.cells(table) {
                let vs = self.versions(table, &row, fam, &qual);
                let Some(newest) = vs.first() else { continue };
                let (combined, max, _) = Self::family(table, fam);
                if combined {
                    let (stored, _, set) = Self::combine(table, fam, &vs);
                    let mut e = (*newest).clone();
                    e.value = stored;
                    e.set = set;
                    kept.push(e);
                } else {
                    let n = if max > 0 { vs.len().min(max) } else { vs.len() };
                    kept.extend(vs[..n].iter().map(|e| (*e).clone()));
                }
            }
        }
        self.entries = kept;
    }
}

fn engine_scan(e: &Engine, spec: &ScanSpec, table: u32) -> Vec<Out> {
    e.scan(table, spec)
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

fn mutation() -> impl Strategy<Value = M> {
    let flag = prop_oneof![
        10 => Just(CellFlag::Insert),
        1 => Just(CellFlag::DeleteRow),
        1 => Just(CellFlag::DeleteColumnFamily),
        1 => Just(CellFlag::DeleteCell),
        2 => Just(CellFlag::DeleteCellVersion),
    ];
    let t2 = prop_oneof![3 => Just(T1), 1 => Just(T2)];
    (
        t2,
        flag,
        0..ROWS.len(),
        1u8..=4,
        0..QUALS.len(),
        0..NTS,
        0u8..40,
    )
        .prop_map(|(table, flag, row, fam, qual, ts, val)| M {
            table,
            flag,
            row,
            fam: if table == T2 { 1 + fam % 2 } else { fam },
            qual,
            ts,
            val,
        })
}

fn scan_desc() -> impl Strategy<Value = ScanDesc> {
    let bound = proptest::option::weighted(0.4, (0..ROWS.len(), any::<bool>()));
    let it = prop_oneof![Just(It::RowRegexB), Just(It::QualX), Just(It::FirstInRow)];
    (
        prop_oneof![Just(T1), Just(T2)],
        bound.clone(),
        bound,
        proptest::collection::vec(1u8..=4, 0..3),
        proptest::collection::vec(it, 0..3),
        (0u64..3, 0u64..5, 0u64..3),
    )
        .prop_map(
            |(table, start, end, mut columns, mut iterators, (rl, cl, co))| {
                let fams = if table == T2 { 2 } else { 4 };
                columns.retain(|&f| f <= fams);
                // first_in_row over a column subset: which cell is first depends on where the
                // columns are applied; keep it to whole rows.
                if !columns.is_empty() {
                    iterators.retain(|i| !matches!(i, It::FirstInRow));
                }
                ScanDesc {
                    table,
                    start,
                    end,
                    columns,
                    iterators,
                    row_limit: rl,
                    cell_limit: cl,
                    cell_offset: co,
                }
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => proptest::collection::vec(mutation(), 1..6).prop_map(Op::Write),
        2 => (1u8..4).prop_map(Op::Advance),
        2 => Just(Op::Minor),
        1 => Just(Op::Merging),
        2 => Just(Op::Major),
        1 => (prop_oneof![Just(T1), Just(T2)], 0..ROWS.len()).prop_map(|(t, r)| Op::Split(t, r)),
        1 => Just(Op::Reopen),
        4 => scan_desc().prop_map(Op::Scan),
    ]
}

fn options(clock: Arc<ManualClock>) -> EngineOptions {
    EngineOptions {
        split_size_bytes: 0,
        max_stores_per_group: 2,
        clock,
        ..EngineOptions::default()
    }
}

fn run(ops: &[Op]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let clock = Arc::new(ManualClock(AtomicI64::new(NOW0 + 4 * SEC)));
    let open = || {
        Engine::open(
            fs.clone(),
            "/ht",
            options(clock.clone()),
            rt.handle().clone(),
        )
        .expect("open")
    };
    let mut e = open();
    e.create_table(schema1()).expect("create table 1");
    e.create_table(schema2()).expect("create table 2");
    let mut model = Model {
        entries: Vec::new(),
        next_rev: 0,
        now: NOW0 + 4 * SEC,
    };
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write(ms) => {
                // One batch per table; a batch with a refused delete fails whole.
                for table in [T1, T2] {
                    let part: Vec<M> = ms.iter().filter(|m| m.table == table).cloned().collect();
                    if part.is_empty() {
                        continue;
                    }
                    let muts: Vec<Mutation> = part.iter().map(M::to_mutation).collect();
                    let r = e.apply(table, &muts);
                    if part.iter().any(M::refused) {
                        let err = r.expect_err("a refused delete was applied").to_string();
                        assert!(
                            err.contains("APPEND_ONLY") || err.contains("row deletes"),
                            "op {i}: {err}"
                        );
                    } else {
                        r.expect("apply");
                        model.write(&part);
                    }
                }
            }
            Op::Advance(s) => {
                clock.0.fetch_add(*s as i64 * SEC, Ordering::SeqCst);
                model.now += *s as i64 * SEC;
            }
            Op::Minor => e
                .compact(None, CompactionKind::Minor)
                .expect("minor compaction"),
            Op::Merging => e
                .compact(None, CompactionKind::Merging)
                .expect("merging compaction"),
            Op::Major => {
                e.compact(None, CompactionKind::Major)
                    .expect("major compaction");
                model.major();
            }
            Op::Split(t, r) => match e.split(*t, ROWS[*r].as_bytes()) {
                Ok(()) => e.wait_for_maintenance(),
                Err(Error::InvalidInput(_)) => {}
                Err(err) => panic!("op {i}: split failed: {err}"),
            },
            Op::Reopen => {
                e.close().expect("close");
                drop(e);
                e = open();
            }
            Op::Scan(d) => {
                let got = engine_scan(&e, &d.spec(), d.table);
                let want = model.scan(d);
                assert_eq!(got, want, "op {i}: scan {d:?} (engine left, model right)");
            }
        }
        for table in [T1, T2] {
            let got = engine_scan(&e, &ScanSpec::default(), table);
            let want = model.scan(&ScanDesc::full(table));
            assert_eq!(
                got, want,
                "op {i} ({op:?}): full scan of table {table} (engine left, model right)"
            );
        }
    }
    e.close().expect("close");
}

/// 16 cases by default; `PROPTEST_CASES` runs more.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn iterator_layer_matches_model(ops in proptest::collection::vec(op(), 1..50)) {
        run(&ops);
    }
}
