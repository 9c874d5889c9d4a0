//! Model test: random writes, deletes, clock steps, compactions, splits, reopens and scans run
//! against the engine and a plain in-memory model of DESIGN.md section 1; every scan must agree.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use common::key::CellFlag;
use common::schema::{AccessGroupSpec, FamilySpec};
use common::{TableSchema, TimeOrder};
use dfs_broker::LocalFs;
use proptest::prelude::*;
use rangeserver::Error;
use rangeserver::engine::{Clock, CompactionKind, Engine, EngineOptions, Mutation, ScanCell};
use rangeserver::scan::spec::{ColumnSelector, QualifierMatch, RowInterval, ScanSpec};

const TABLE: u32 = 1;
const SEC: i64 = 1_000_000_000;
/// The clock's start; large so that revisions (taken from the clock) never meet timestamps.
const NOW0: i64 = 1_000 * SEC;
const ROWS: [&str; 5] = ["a", "b", "ba", "c", "d"];
const QUALS: [&str; 3] = ["", "x", "y"];
/// Timestamps are `NOW0 + k * SEC` for `k < NTS`.
const NTS: u8 = 10;
/// Family `b`'s TTL.
const TTL_SECS: u64 = 4;

/// Family 1 `a`: MAX_VERSIONS 2; family 2 `b`: TTL, TIME_ORDER DESC (both in `g1`);
/// family 3 `c`: COUNTER (in `g2`).
fn schema() -> TableSchema {
    let mut s = TableSchema::new(TABLE, "/model");
    s.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    let mut a = FamilySpec::new(1, "a", "g1");
    a.max_versions = 2;
    let mut b = FamilySpec::new(2, "b", "g1");
    b.ttl_secs = TTL_SECS;
    b.time_order = TimeOrder::Desc;
    let mut c = FamilySpec::new(3, "c", "g2");
    c.counter = true;
    s.families = vec![a, b, c];
    s
}

/// The model's view of a family's options: (MAX_VERSIONS, TTL ns, counter, TIME_ORDER DESC).
fn family(f: u8) -> (u32, i64, bool, bool) {
    match f {
        1 => (2, 0, false, false),
        2 => (0, TTL_SECS as i64 * SEC, false, true),
        3 => (0, 0, true, false),
        _ => unreachable!("family {f}"),
    }
}

#[derive(Debug)]
struct ManualClock(AtomicI64);

impl Clock for ManualClock {
    fn now_ns(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// One generated mutation, in indexes into the alphabets.
#[derive(Clone)]
struct M {
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
        if self.fam == 3 {
            let n = self.val % 10;
            match self.val % 4 {
                0 => format!("+{n}"),
                1 => format!("-{n}"),
                2 => format!("={n}"),
                _ => format!("{n}"),
            }
        } else {
            format!("v{}", self.val)
        }
    }

    fn to_mutation(&self) -> Mutation {
        let ts = Some(NOW0 + self.ts as i64 * SEC);
        match self.flag {
            CellFlag::Insert => {
                let mut m =
                    Mutation::insert(ROWS[self.row], self.fam, QUALS[self.qual], self.value());
                m.timestamp = ts;
                m
            }
            f => Mutation::delete(f, ROWS[self.row], self.fam, QUALS[self.qual], ts),
        }
    }
}

impl fmt::Debug for M {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (r, q, t) = (ROWS[self.row], QUALS[self.qual], self.ts);
        match self.flag {
            CellFlag::Insert => write!(f, "ins({r} {}:{q:?} @t{t} = {:?})", self.fam, self.value()),
            CellFlag::DeleteRow => write!(f, "del_row({r} @t{t})"),
            CellFlag::DeleteColumnFamily => write!(f, "del_fam({r} {} @t{t})", self.fam),
            CellFlag::DeleteCell => write!(f, "del_cell({r} {}:{q:?} @t{t})", self.fam),
            CellFlag::DeleteCellVersion => write!(f, "del_ver({r} {}:{q:?} @t{t})", self.fam),
        }
    }
}

/// A generated scan.
#[derive(Debug, Clone)]
struct ScanDesc {
    /// (row index, inclusive)
    start: Option<(usize, bool)>,
    end: Option<(usize, bool)>,
    /// (family, exact qualifier index or all)
    columns: Vec<(u8, Option<usize>)>,
    max_versions: u32,
    row_limit: u64,
    row_offset: u64,
    cell_limit: u64,
    cell_offset: u64,
}

impl ScanDesc {
    fn full() -> Self {
        Self {
            start: None,
            end: None,
            columns: Vec::new(),
            max_versions: 0,
            row_limit: 0,
            row_offset: 0,
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
        ScanSpec {
            row_intervals,
            columns: self
                .columns
                .iter()
                .map(|&(family, q)| ColumnSelector {
                    family,
                    qualifier: match q {
                        None => QualifierMatch::All,
                        Some(q) => QualifierMatch::Exact(QUALS[q].as_bytes().to_vec()),
                    },
                })
                .collect(),
            max_versions: self.max_versions,
            row_limit: self.row_limit,
            row_offset: self.row_offset,
            cell_limit: self.cell_limit,
            cell_offset: self.cell_offset,
            ..ScanSpec::default()
        }
    }

    fn row_in(&self, row: &str) -> bool {
        let after_start = match self.start {
            None => true,
            Some((r, true)) => row >= ROWS[r],
            Some((r, false)) => row > ROWS[r],
        };
        let before_end = match self.end {
            None => true,
            Some((r, true)) => row <= ROWS[r],
            Some((r, false)) => row < ROWS[r],
        };
        after_start && before_end
    }

    fn column_in(&self, fam: u8, qual: &str) -> bool {
        self.columns.is_empty()
            || self
                .columns
                .iter()
                .any(|&(f, q)| f == fam && q.is_none_or(|q| QUALS[q] == qual))
    }
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<M>),
    /// Advance the clock by this many seconds.
    Advance(u8),
    Minor,
    Merging,
    Major,
    /// Split at `ROWS[i]`.
    Split(usize),
    Reopen,
    Scan(ScanDesc),
}

/// A stored cell of the model.
#[derive(Debug, Clone)]
struct Entry {
    row: String,
    fam: u8,
    qual: String,
    ts: i64,
    /// Write order; the engine's revisions follow it.
    rev: u64,
    flag: CellFlag,
    value: String,
}

/// A scan result as compared: (row, family, qualifier, timestamp label, flag, value).
type Out = (String, u8, String, String, CellFlag, String);

fn ts_label(ts: i64) -> String {
    let d = ts - NOW0;
    if d % SEC == 0 {
        format!("t{}", d / SEC)
    } else {
        format!("{ts}ns")
    }
}

struct Model {
    entries: Vec<Entry>,
    next_rev: u64,
    now: i64,
}

impl Model {
    fn write(&mut self, ms: &[M]) {
        for m in ms {
            let mm = m.to_mutation();
            self.entries.push(Entry {
                row: ROWS[m.row].to_string(),
                fam: mm.family,
                qual: String::from_utf8(mm.qualifier).expect("ascii"),
                ts: mm.timestamp.expect("explicit"),
                rev: self.next_rev,
                flag: m.flag,
                value: m.value(),
            });
            self.next_rev += 1;
        }
    }

    /// Every (row, family, qualifier) with an insert, in scan order.
    fn cells(&self) -> BTreeSet<(String, u8, String)> {
        self.entries
            .iter()
            .filter(|e| e.flag == CellFlag::Insert)
            .map(|e| (e.row.clone(), e.fam, e.qual.clone()))
            .collect()
    }

    /// The visible versions of one cell, newest first (deletes, duplicates and TTL applied).
    /// Versions with equal timestamps: the newest revision wins, except in a counter, where
    /// each counts (issue 14's rule for every combined family).
    fn versions(&self, row: &str, fam: u8, qual: &str) -> Vec<&Entry> {
        let (_, ttl, counter, _) = family(fam);
        let mut covered_to = i64::MIN;
        let mut version_deletes = Vec::new();
        for e in self.entries.iter().filter(|e| e.row == row) {
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
                e.flag == CellFlag::Insert && e.row == row && e.fam == fam && e.qual == qual
            })
            .collect();
        ins.sort_by(|x, y| y.ts.cmp(&x.ts).then(y.rev.cmp(&x.rev)));
        if !counter {
            ins.dedup_by_key(|e| e.ts);
        }
        ins.retain(|e| {
            e.ts > covered_to
                && !version_deletes.contains(&e.ts)
                && !(ttl > 0 && e.ts < self.now.saturating_sub(ttl))
        });
        ins
    }

    /// The counter total of visible versions (newest first): back to and including the newest reset.
    fn counter_sum(vs: &[&Entry]) -> i64 {
        let mut sum = 0i64;
        for e in vs {
            let (reset, n) = match e.value.as_bytes()[0] {
                b'=' => (true, e.value[1..].parse::<i64>().expect("number")),
                b'+' => (false, e.value[1..].parse::<i64>().expect("number")),
                _ => (false, e.value.parse::<i64>().expect("number")),
            };
            sum += n;
            if reset {
                break;
            }
        }
        sum
    }

    fn scan(&self, d: &ScanDesc) -> Vec<Out> {
        let mut all = Vec::new();
        for (row, fam, qual) in self.cells() {
            if !d.row_in(&row) || !d.column_in(fam, &qual) {
                continue;
            }
            let vs = self.versions(&row, fam, &qual);
            let Some(newest) = vs.first() else { continue };
            let (schema_max, _, counter, desc) = family(fam);
            let out = |e: &Entry, v: String| {
                (
                    row.clone(),
                    fam,
                    qual.clone(),
                    ts_label(e.ts),
                    CellFlag::Insert,
                    v,
                )
            };
            if counter {
                all.push(out(newest, Self::counter_sum(&vs).to_string()));
                continue;
            }
            let max = match (schema_max, d.max_versions) {
                (0, s) => s,
                (m, 0) => m,
                (m, s) => m.min(s),
            } as usize;
            let kept = if max > 0 {
                &vs[..vs.len().min(max)]
            } else {
                &vs[..]
            };
            let mut cells: Vec<Out> = kept.iter().map(|e| out(e, e.value.clone())).collect();
            if desc {
                cells.reverse();
            }
            all.extend(cells);
        }
        // Limits and offsets, as SpecFilter applies them to one interval.
        let mut res = Vec::new();
        let mut rows_started = 0;
        let mut cur_row: Option<String> = None;
        let mut passed = 0;
        for c in all {
            // Cells skipped by CELL_OFFSET start no row.
            if passed < d.cell_offset {
                passed += 1;
                continue;
            }
            if cur_row.as_deref() != Some(c.0.as_str()) {
                cur_row = Some(c.0.clone());
                rows_started += 1;
                if d.row_limit > 0 && rows_started > d.row_offset + d.row_limit {
                    break;
                }
            }
            if rows_started <= d.row_offset {
                continue;
            }
            if d.cell_limit > 0 && res.len() as u64 >= d.cell_limit {
                break;
            }
            res.push(c);
        }
        res
    }

    /// A major compaction of the rows `in_range` selects: tombstones and what they cover,
    /// expired cells and versions beyond MAX_VERSIONS go; a counter becomes one `=total`.
    fn major(&mut self, in_range: impl Fn(&str) -> bool) {
        let mut kept = Vec::new();
        for (row, fam, qual) in self.cells() {
            if !in_range(&row) {
                continue;
            }
            let vs = self.versions(&row, fam, &qual);
            let Some(newest) = vs.first() else { continue };
            let (max, _, counter, _) = family(fam);
            if counter {
                let mut e = (*newest).clone();
                e.value = format!("={}", Self::counter_sum(&vs));
                kept.push(e);
            } else {
                let n = if max > 0 {
                    vs.len().min(max as usize)
                } else {
                    vs.len()
                };
                kept.extend(vs[..n].iter().map(|e| (*e).clone()));
            }
        }
        self.entries.retain(|e| !in_range(&e.row));
        self.entries.extend(kept);
    }
}

fn engine_scan(e: &Engine, spec: &ScanSpec) -> Vec<Out> {
    let cells: Vec<ScanCell> = e
        .scan(TABLE, spec)
        .expect("scan")
        .collect_all()
        .expect("scan cells");
    cells
        .into_iter()
        .map(|c| {
            (
                String::from_utf8(c.key.row).expect("ascii row"),
                c.key.family,
                String::from_utf8(c.key.qualifier).expect("ascii qualifier"),
                ts_label(c.key.timestamp),
                c.key.flag,
                String::from_utf8_lossy(&c.value).into_owned(),
            )
        })
        .collect()
}

fn options(clock: Arc<ManualClock>) -> EngineOptions {
    EngineOptions {
        // No automatic splits: each split is one the model knows about.
        split_size_bytes: 0,
        // Merging compactions in the background as soon as a group has 3 stores.
        max_stores_per_group: 2,
        clock,
        ..EngineOptions::default()
    }
}

fn mutation() -> impl Strategy<Value = M> {
    let flag = prop_oneof![
        8 => Just(CellFlag::Insert),
        1 => Just(CellFlag::DeleteRow),
        1 => Just(CellFlag::DeleteColumnFamily),
        1 => Just(CellFlag::DeleteCell),
        2 => Just(CellFlag::DeleteCellVersion),
    ];
    (
        flag,
        0..ROWS.len(),
        1u8..=3,
        0..QUALS.len(),
        0..NTS,
        0u8..40,
    )
        .prop_map(|(flag, row, fam, qual, ts, val)| M {
            flag,
            row,
            fam,
            qual,
            ts,
            val,
        })
}

fn scan_desc() -> impl Strategy<Value = ScanDesc> {
    let bound = proptest::option::weighted(0.4, (0..ROWS.len(), any::<bool>()));
    let column = (1u8..=3, proptest::option::of(0..QUALS.len()));
    let limits = prop_oneof![
        2 => Just((0u64, 0u64, 0u64, 0u64)),
        1 => (0u64..3, 0u64..2, 0u64..5).prop_map(|(rl, ro, cl)| (rl, ro, cl, 0)),
        1 => (0u64..3, 0u64..5, 0u64..3).prop_map(|(rl, cl, co)| (rl, 0, cl, co)),
    ];
    (
        bound.clone(),
        bound,
        proptest::collection::vec(column, 0..3),
        0u32..4,
        limits,
    )
        .prop_map(
            |(
                start,
                end,
                columns,
                max_versions,
                (row_limit, row_offset, cell_limit, cell_offset),
            )| ScanDesc {
                start,
                end,
                columns,
                max_versions,
                row_limit,
                row_offset,
                cell_limit,
                cell_offset,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => proptest::collection::vec(mutation(), 1..8).prop_map(Op::Write),
        2 => (1u8..4).prop_map(Op::Advance),
        2 => Just(Op::Minor),
        1 => Just(Op::Merging),
        2 => Just(Op::Major),
        1 => (0..ROWS.len()).prop_map(Op::Split),
        1 => Just(Op::Reopen),
        4 => scan_desc().prop_map(Op::Scan),
    ]
}

/// Runs `ops` against a fresh engine and the model; panics at the first disagreement.
fn run(ops: &[Op]) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("local fs"));
    let clock = Arc::new(ManualClock(AtomicI64::new(NOW0)));
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
    e.create_table(schema()).expect("create table");
    let mut model = Model {
        entries: Vec::new(),
        next_rev: 0,
        now: NOW0,
    };
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write(ms) => {
                let muts: Vec<Mutation> = ms.iter().map(M::to_mutation).collect();
                e.apply(TABLE, &muts).expect("apply");
                model.write(ms);
            }
            Op::Advance(s) => {
                clock.0.fetch_add(*s as i64 * SEC, Ordering::SeqCst);
                model.now += *s as i64 * SEC;
            }
            Op::Minor => e
                .compact(Some(TABLE), CompactionKind::Minor)
                .expect("minor compaction"),
            Op::Merging => e
                .compact(Some(TABLE), CompactionKind::Merging)
                .expect("merging compaction"),
            Op::Major => {
                e.compact(Some(TABLE), CompactionKind::Major)
                    .expect("major compaction");
                model.major(|_| true);
            }
            Op::Split(r) => {
                let row = ROWS[*r];
                match e.split(TABLE, row.as_bytes()) {
                    Ok(()) => {
                        // A split changes nothing visible, also once the background rewrite
                        // of both halves (which drops nothing) has run.
                        e.wait_for_maintenance();
                    }
                    Err(Error::InvalidInput(_)) => {}
                    Err(err) => panic!("op {i}: split at {row:?} failed: {err}"),
                }
            }
            Op::Reopen => {
                e.close().expect("close");
                drop(e);
                e = open();
            }
            Op::Scan(d) => {
                let got = engine_scan(&e, &d.spec());
                let want = model.scan(d);
                assert_eq!(
                    got, want,
                    "op {i}: scan {d:?} differs (engine left, model right)"
                );
            }
        }
        // Maintenance the engine queued by itself (merging compactions) runs meanwhile.
        let got = engine_scan(&e, &ScanSpec::default());
        let want = model.scan(&ScanDesc::full());
        assert_eq!(
            got, want,
            "op {i} ({op:?}): full scan differs (engine left, model right)"
        );
    }
    e.close().expect("close");
}

/// 24 cases by default (about 7 s); `PROPTEST_CASES` runs more.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops);
    }
}
