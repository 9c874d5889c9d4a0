//! Model test of ranges moving between engines: three engines with their own roots on one
//! shared file system, random writes (to whichever engine holds the row), row deletes, splits,
//! minor and major compactions, moves (unload on one engine, load the record on another),
//! reopens, crashes (another engine recovers the dead one's ranges from its meta log and commit
//! log; the dead engine comes back under a new root) and scans, against a `BTreeMap` of every
//! acknowledged cell. Every cell must be read back exactly once, and no file a live range
//! references may ever be deleted (checked through each engine's meta log after garbage
//! collection and by reopening).

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use common::TableSchema;
use common::key::CellFlag;
use common::schema::{AccessGroupSpec, FamilySpec};
use dfs_broker::{BlockingFs, FaultAction, FaultFs, FaultOp, FaultRule, LocalFs};
use proptest::prelude::*;
use rangeserver::Error;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{RowInterval, ScanSpec};

const TABLE: u32 = 1;
const ENGINES: usize = 3;
const ROWS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

fn schema() -> TableSchema {
    let mut s = TableSchema::new(TABLE, "/moves");
    s.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    s.families = vec![FamilySpec::new(1, "a", "g1"), FamilySpec::new(2, "b", "g2")];
    s
}

/// Engine `i`'s root in its `generation` (a crashed engine comes back under a new root).
fn root(i: usize, generation: u32) -> String {
    format!("/servers/s{i}-{generation}")
}

fn options() -> EngineOptions {
    EngineOptions {
        // Every split is one the model makes.
        split_size_bytes: 0,
        // Merging compactions in the background from 3 stores on.
        max_stores_per_group: 2,
        ..EngineOptions::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Cells (family 1 or 2) in one row.
    Write(usize, Vec<u8>),
    DeleteRow(usize),
    Split(usize),
    Compact(usize, bool),
    /// Move the range holding this row to this engine.
    Move(usize, usize),
    /// Split at this row and move the upper half at once, while the halves may still share the
    /// parent's stores (their background rewrite races the move).
    SplitMove(usize, usize),
    Reopen(usize),
    /// Engine crashes; the next engine recovers its ranges.
    Crash(usize),
    Scan(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0..ROWS.len(), proptest::collection::vec(1u8..=2, 1..4))
            .prop_map(|(r, f)| Op::Write(r, f)),
        1 => (0..ROWS.len()).prop_map(Op::DeleteRow),
        3 => (1..ROWS.len()).prop_map(Op::Split),
        2 => (0..ENGINES, any::<bool>()).prop_map(|(e, major)| Op::Compact(e, major)),
        4 => (0..ROWS.len(), 0..ENGINES).prop_map(|(r, e)| Op::Move(r, e)),
        2 => (1..ROWS.len(), 0..ENGINES).prop_map(|(r, e)| Op::SplitMove(r, e)),
        1 => (0..ENGINES).prop_map(Op::Reopen),
        1 => (0..ENGINES).prop_map(Op::Crash),
        2 => (0..ROWS.len(), 0..ROWS.len()).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
    ]
}

/// Which engine holds which rows.
#[derive(Debug, Clone)]
struct Held {
    start: Option<String>,
    end: Option<String>,
    engine: usize,
}

impl Held {
    fn contains(&self, row: &str) -> bool {
        self.start.as_deref().is_none_or(|s| row >= s)
            && self.end.as_deref().is_none_or(|e| row < e)
    }
}

/// (row, family, timestamp) -> value: every acknowledged cell not covered by a row delete.
type Cells = BTreeMap<(String, u8, Reverse<i64>), String>;

struct World {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    fs: Arc<LocalFs>,
    engines: Vec<Option<Engine>>,
    /// Per engine: the fault wrapper it runs on (to crash it) and its generation.
    faults: Vec<Arc<FaultFs>>,
    generations: Vec<u32>,
}

impl World {
    fn root(&self, i: usize) -> String {
        root(i, self.generations[i])
    }

    fn open(&self, i: usize) -> Engine {
        Engine::open(
            self.faults[i].clone(),
            &self.root(i),
            options(),
            self.rt.handle().clone(),
        )
        .unwrap_or_else(|e| panic!("open engine {i}: {e}"))
    }

    fn bfs(&self) -> BlockingFs {
        BlockingFs::new(self.fs.clone(), self.rt.handle().clone())
    }

    fn engine(&self, i: usize) -> &Engine {
        self.engines[i].as_ref().expect("engine open")
    }

    /// Every cell-store path the meta log of engine `i` references, read without touching it.
    fn referenced_stores(&self, i: usize) -> Vec<String> {
        let state = rangeserver::meta::read_state(&self.bfs(), &format!("{}/meta", self.root(i)))
            .unwrap_or_else(|e| panic!("read meta of engine {i}: {e}"));
        state
            .ranges
            .values()
            .flat_map(|r| r.groups.iter().flat_map(|g| g.stores.clone()))
            .collect()
    }

    fn exists(&self, path: &str) -> bool {
        Path::new(self.dir.path())
            .join(path.trim_start_matches('/'))
            .exists()
    }
}

fn scan_range(
    e: &Engine,
    start: Option<&str>,
    end: Option<&str>,
) -> Vec<(String, u8, i64, String)> {
    let spec = ScanSpec {
        row_intervals: vec![RowInterval {
            start: start.map_or(Bound::Unbounded, |s| Bound::Included(s.as_bytes().to_vec())),
            end: end.map_or(Bound::Unbounded, |s| Bound::Excluded(s.as_bytes().to_vec())),
        }],
        ..ScanSpec::default()
    };
    e.scan(TABLE, &spec)
        .expect("scan")
        .collect_all()
        .expect("scan cells")
        .into_iter()
        .map(|c| {
            (
                String::from_utf8(c.key.row).expect("ascii"),
                c.key.family,
                c.key.timestamp,
                String::from_utf8(c.value).expect("ascii"),
            )
        })
        .collect()
}

fn run(ops: &[Op]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("local fs"));
    let mut w = World {
        rt,
        dir,
        fs,
        engines: Vec::new(),
        faults: Vec::new(),
        generations: vec![0; ENGINES],
    };
    for _ in 0..ENGINES {
        w.faults.push(FaultFs::new(w.fs.clone()));
    }
    for i in 0..ENGINES {
        let e = w.open(i);
        w.engines.push(Some(e));
    }
    w.engine(0).create_table(schema()).expect("create table");
    let mut held = vec![Held {
        start: None,
        end: None,
        engine: 0,
    }];
    let mut model: Cells = BTreeMap::new();
    let mut ts = 1_000i64;
    let holder = |held: &[Held], row: &str| -> usize {
        held.iter()
            .position(|h| h.contains(row))
            .expect("every row is held")
    };
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Write(r, fams) => {
                let row = ROWS[*r];
                let h = &held[holder(&held, row)];
                let muts: Vec<Mutation> = fams
                    .iter()
                    .map(|&f| {
                        ts += 1;
                        let v = format!("{row}-{f}-{ts}");
                        model.insert((row.to_string(), f, Reverse(ts)), v.clone());
                        let mut m = Mutation::insert(row, f, "", v);
                        m.timestamp = Some(ts);
                        m
                    })
                    .collect();
                w.engine(h.engine)
                    .apply(TABLE, &muts)
                    .unwrap_or_else(|e| panic!("op {i}: apply on engine {}: {e}", h.engine));
                // Any other engine refuses the row.
                let other = (h.engine + 1) % ENGINES;
                match w.engine(other).apply(TABLE, &muts) {
                    Err(Error::NotHere { .. }) | Err(Error::NoSuchTable(_)) => {}
                    other_res => panic!("op {i}: engine {other} took row {row}: {other_res:?}"),
                }
            }
            Op::DeleteRow(r) => {
                let row = ROWS[*r];
                let h = &held[holder(&held, row)];
                ts += 1;
                let m = Mutation::delete(CellFlag::DeleteRow, row, 0, "", Some(ts));
                w.engine(h.engine).apply(TABLE, &[m]).expect("delete row");
                model.retain(|(mr, _, _), _| mr != row);
            }
            Op::SplitMove(r, to) => {
                let row = ROWS[*r];
                let hi = holder(&held, row);
                let h = held[hi].clone();
                if h.start.as_deref() != Some(row) {
                    w.engine(h.engine)
                        .split(TABLE, row.as_bytes())
                        .unwrap_or_else(|e| panic!("op {i}: split at {row}: {e}"));
                    held[hi].end = Some(row.to_string());
                    held.insert(
                        hi + 1,
                        Held {
                            start: Some(row.to_string()),
                            end: h.end.clone(),
                            engine: h.engine,
                        },
                    );
                }
                move_range(&w, &mut held, row, *to, i);
            }
            Op::Split(r) => {
                let row = ROWS[*r];
                let hi = holder(&held, row);
                let h = held[hi].clone();
                match w.engine(h.engine).split(TABLE, row.as_bytes()) {
                    Ok(()) => {
                        held[hi].end = Some(row.to_string());
                        held.insert(
                            hi + 1,
                            Held {
                                start: Some(row.to_string()),
                                end: h.end.clone(),
                                engine: h.engine,
                            },
                        );
                    }
                    Err(Error::InvalidInput(_)) => {
                        assert_eq!(h.start.as_deref(), Some(row), "op {i}: split refused");
                    }
                    Err(e) => panic!("op {i}: split at {row}: {e}"),
                }
            }
            Op::Compact(e, major) => {
                let kind = if *major {
                    CompactionKind::Major
                } else {
                    CompactionKind::Minor
                };
                match w.engine(*e).compact(Some(TABLE), kind) {
                    Ok(()) | Err(Error::NoSuchTable(_)) => {}
                    Err(err) => panic!("op {i}: compaction on engine {e}: {err}"),
                }
            }
            Op::Move(r, to) => move_range(&w, &mut held, ROWS[*r], *to, i),
            Op::Reopen(e) => {
                let old = w.engines[*e].take().expect("open");
                old.close().expect("close");
                drop(old);
                w.engines[*e] = Some(w.open(*e));
            }
            Op::Crash(dead) => {
                let dead = *dead;
                let to = (dead + 1) % ENGINES;
                // Nothing the dead engine does from now on reaches the disk.
                w.faults[dead].add_rule(FaultRule::new(FaultOp::Any, FaultAction::Crash));
                let old = w.engines[dead].take().expect("open");
                let _ = old.close();
                drop(old);
                let dead_root = w.root(dead);
                let state = rangeserver::meta::read_state(&w.bfs(), &format!("{dead_root}/meta"))
                    .unwrap_or_else(|e| panic!("op {i}: read meta of {dead_root}: {e}"));
                let items: Vec<(TableSchema, rangeserver::meta::RangeRecord)> = state
                    .ranges
                    .values()
                    .map(|r| (state.tables[&r.table_id].clone(), r.clone()))
                    .collect();
                assert_eq!(
                    items.len(),
                    held.iter().filter(|h| h.engine == dead).count(),
                    "op {i}: the dead engine's meta log"
                );
                let ids = w
                    .engine(to)
                    .recover_ranges(&dead_root, &items)
                    .unwrap_or_else(|e| panic!("op {i}: recovery on {to}: {e}"));
                assert_eq!(ids.len(), items.len());
                for h in held.iter_mut().filter(|h| h.engine == dead) {
                    h.engine = to;
                }
                // The dead engine comes back empty, under a new root.
                w.generations[dead] += 1;
                w.faults[dead] = FaultFs::new(w.fs.clone());
                w.engines[dead] = Some(w.open(dead));
            }
            Op::Scan(a, b) => {
                let (lo, hi) = (ROWS[*a], ROWS[*b]);
                // Scan each held range's part of [lo, hi] on its holder.
                let mut got = Vec::new();
                for h in &held {
                    let start = match &h.start {
                        Some(s) if s.as_str() > lo => s.clone(),
                        _ => lo.to_string(),
                    };
                    let end_incl = format!("{hi}\0");
                    let end = match &h.end {
                        Some(e) if e.as_str() < end_incl.as_str() => e.clone(),
                        _ => end_incl,
                    };
                    if start >= end {
                        continue;
                    }
                    got.extend(scan_range(w.engine(h.engine), Some(&start), Some(&end)));
                }
                let want: Vec<(String, u8, i64, String)> = model
                    .iter()
                    .filter(|((r, _, _), _)| r.as_str() >= lo && r.as_str() <= hi)
                    .map(|((r, f, t), v)| (r.clone(), *f, t.0, v.clone()))
                    .collect();
                assert_eq!(got, want, "op {i}: scan [{lo}, {hi}] differs (engine left)");
            }
        }
        check(&w, &held, &model, i, op);
    }
    // Reopen everything: every referenced file is there, and nothing was lost.
    for e in 0..ENGINES {
        let old = w.engines[e].take().expect("open");
        old.close().expect("close");
        drop(old);
        w.engines[e] = Some(w.open(e));
    }
    check(&w, &held, &model, ops.len(), &Op::Reopen(0));
    for e in w.engines.iter().flatten() {
        e.close().expect("close");
    }
}

/// Moves the range holding `row` to engine `to` (unload there, load the record here).
fn move_range(w: &World, held: &mut [Held], row: &str, to: usize, i: usize) {
    let hi = held
        .iter()
        .position(|h| h.contains(row))
        .expect("every row is held");
    let from = held[hi].engine;
    if from == to {
        return;
    }
    let end = held[hi].end.clone();
    let rec = w
        .engine(from)
        .unload_range(TABLE, end.as_deref().map(str::as_bytes))
        .unwrap_or_else(|e| panic!("op {i}: unload from {from}: {e}"));
    assert_eq!(
        rec.start_row.as_deref(),
        held[hi].start.as_deref().map(str::as_bytes)
    );
    w.engine(to)
        .load_range_record(&schema(), &rec)
        .unwrap_or_else(|e| panic!("op {i}: load on {to}: {e}"));
    held[hi].engine = to;
    // The old holder refuses the rows now.
    let row = held[hi].start.clone().unwrap_or_else(|| "0".into());
    match w
        .engine(from)
        .apply(TABLE, &[Mutation::insert(row.as_str(), 1, "", "x")])
    {
        Err(Error::NotHere { .. }) => {}
        res => panic!("op {i}: engine {from} still took row {row}: {res:?}"),
    }
}

/// After garbage collection on every engine: each store an engine's meta log references exists,
/// and scanning each range on its holder gives exactly the model's cells.
fn check(w: &World, held: &[Held], model: &Cells, i: usize, op: &Op) {
    for e in w.engines.iter().flatten() {
        e.wait_for_maintenance();
        e.collect_garbage().expect("gc");
    }
    for e in 0..ENGINES {
        for p in w.referenced_stores(e) {
            assert!(
                w.exists(&p),
                "op {i} ({op:?}): engine {e} references {p}, which was deleted"
            );
        }
    }
    let mut got = Vec::new();
    for h in held {
        let e = w.engine(h.engine);
        let ranges = e.ranges(TABLE);
        assert!(
            ranges.iter().any(
                |r| r.start_row.as_deref() == h.start.as_deref().map(str::as_bytes)
                    && r.end_row.as_deref() == h.end.as_deref().map(str::as_bytes)
            ),
            "op {i}: engine {} does not hold [{:?}, {:?}): {ranges:?}",
            h.engine,
            h.start,
            h.end
        );
        got.extend(scan_range(e, h.start.as_deref(), h.end.as_deref()));
    }
    let want: Vec<(String, u8, i64, String)> = model
        .iter()
        .map(|((r, f, t), v)| (r.clone(), *f, t.0, v.clone()))
        .collect();
    assert_eq!(
        got, want,
        "op {i} ({op:?}): full scan differs (engines left, model right)"
    );
    let total: usize = w
        .engines
        .iter()
        .flatten()
        .map(|e| e.ranges(TABLE).len())
        .sum();
    assert_eq!(total, held.len(), "op {i}: ranges held in all");
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    ProptestConfig {
        cases,
        max_shrink_iters: 500,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn moving_ranges_between_engines_matches_model(ops in proptest::collection::vec(op(), 1..50)) {
        run(&ops);
    }
}
