//! Exhaustive small interleavings of combiner writes, cell deletes, minor, merging and major
//! compactions and splits on sum, counter and APPEND_ONLY uid_set families, each checked
//! against a model after every step (ACCUMULO-2232's delete-across-a-partial-compaction cases).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use common::iterators::CombinerSpec;
use common::key::CellFlag;
use common::{FamilySpec, TableSchema};
use dfs_broker::LocalFs;
use rangeserver::Error;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::ScanSpec;

/// Family ids: `s` sum, `c` COUNTER, `u` uid_set(MAX = 1) APPEND_ONLY.
const S: u8 = 1;
const C: u8 = 2;
const U: u8 = 3;
const FAMS: [u8; 3] = [S, C, U];

fn schema(id: u32) -> TableSchema {
    let mut s = TableSchema::new(id, format!("/il{id}"));
    let mut sum = FamilySpec::new(S, "s", "default");
    sum.combiner = Some(CombinerSpec {
        kind: "sum".into(),
        options: BTreeMap::new(),
    });
    let mut counter = FamilySpec::new(C, "c", "default");
    counter.counter = true;
    let mut uid = FamilySpec::new(U, "u", "default");
    uid.combiner = Some(CombinerSpec {
        kind: "uid_set".into(),
        options: [("MAX".to_string(), "1".to_string())].into(),
    });
    uid.append_only = true;
    s.families = vec![sum, counter, uid];
    s
}

/// A write to one row: to every family for puts, to `s` and `c` for deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Data {
    /// `1` (member `m1`) at t10.
    Put1,
    /// `2` (member `m2`) at t20, or at t10 in the equal-timestamp variant.
    Put2,
    /// A cell delete at t15.
    Del15,
    /// A cell delete at t20.
    Del20,
}

const DATA: [Data; 4] = [Data::Put1, Data::Put2, Data::Del15, Data::Del20];

/// A table-wide step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Global {
    Minor,
    Merging,
    Major,
    Split,
}

const GLOBAL: [Global; 4] = [Global::Minor, Global::Merging, Global::Major, Global::Split];

/// One step of an interleaving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Data(Data),
    Global(Global),
}

/// A version as the model keeps it.
#[derive(Debug, Clone)]
enum Val {
    Num(i64),
    /// A counter's combined (compacted) form: the sum stops here.
    Reset(i64),
    Set(u64, Option<BTreeSet<String>>),
}

#[derive(Debug, Clone, Default)]
struct MCell {
    /// (timestamp, revision, value)
    vers: Vec<(i64, u64, Val)>,
    /// The newest cell delete's timestamp.
    del: Option<i64>,
}

impl MCell {
    fn visible(&self) -> Vec<&(i64, u64, Val)> {
        let mut v: Vec<_> = self
            .vers
            .iter()
            .filter(|x| self.del.is_none_or(|d| x.0 > d))
            .collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        v
    }

    /// (newest timestamp, newest revision, combined value), if any version is visible.
    fn combined(&self, fam: u8) -> Option<(i64, u64, Val)> {
        let vis = self.visible();
        let first = vis.first()?;
        let val = match fam {
            S => Val::Num(
                vis.iter()
                    .map(|x| match x.2 {
                        Val::Num(n) | Val::Reset(n) => n,
                        Val::Set(..) => unreachable!("a set in a sum"),
                    })
                    .sum(),
            ),
            C => {
                let mut sum = 0;
                for x in &vis {
                    match x.2 {
                        Val::Num(n) => sum += n,
                        Val::Reset(n) => {
                            sum += n;
                            break;
                        }
                        Val::Set(..) => unreachable!("a set in a counter"),
                    }
                }
                Val::Reset(sum)
            }
            _ => {
                let mut count = 0;
                let mut members = Some(BTreeSet::new());
                for x in &vis {
                    let Val::Set(n, m) = &x.2 else {
                        unreachable!("a number in a set")
                    };
                    count += n;
                    members = match (members, m) {
                        (Some(mut a), Some(b)) => {
                            a.extend(b.iter().cloned());
                            (a.len() <= 1).then_some(a)
                        }
                        _ => None,
                    };
                }
                Val::Set(count, members)
            }
        };
        Some((first.0, first.1, val))
    }

    fn display(&self, fam: u8) -> Option<(i64, String)> {
        let (ts, _, v) = self.combined(fam)?;
        let text = match v {
            Val::Num(n) | Val::Reset(n) => n.to_string(),
            Val::Set(n, None) => format!("{n} *"),
            Val::Set(n, Some(m)) => {
                let ms: Vec<String> = m.iter().map(|x| format!("{x:?}")).collect();
                format!("{n} [{}]", ms.join(","))
            }
        };
        Some((ts, text))
    }

    fn major(&mut self, fam: u8) {
        self.vers = self.combined(fam).into_iter().collect();
        self.del = None;
    }
}

/// One row of an interleaving: its data steps, its variant and its three cells.
struct Row {
    name: String,
    data: Vec<Data>,
    same_ts: bool,
    cells: [MCell; 3],
}

impl Row {
    fn mutations(&self, d: Data) -> Vec<Mutation> {
        let ts2 = if self.same_ts { 10 } else { 20 };
        let put = |fam: u8, v: &str, ts: i64| {
            let mut m = Mutation::insert(self.name.as_str(), fam, "", v.as_bytes().to_vec());
            m.timestamp = Some(ts);
            m
        };
        let del = |fam: u8, ts: i64| {
            Mutation::delete(CellFlag::DeleteCell, self.name.as_str(), fam, "", Some(ts))
        };
        match d {
            Data::Put1 => vec![put(S, "1", 10), put(C, "1", 10), put(U, "m1", 10)],
            Data::Put2 => vec![put(S, "2", ts2), put(C, "2", ts2), put(U, "m2", ts2)],
            Data::Del15 => vec![del(S, 15), del(C, 15)],
            Data::Del20 => vec![del(S, 20), del(C, 20)],
        }
    }

    fn model(&mut self, d: Data, rev: u64) {
        let ts2 = if self.same_ts { 10 } else { 20 };
        let set = |m: &str| Val::Set(1, Some([m.to_string()].into()));
        match d {
            Data::Put1 => {
                self.cells[0].vers.push((10, rev, Val::Num(1)));
                self.cells[1].vers.push((10, rev, Val::Num(1)));
                self.cells[2].vers.push((10, rev, set("m1")));
            }
            Data::Put2 => {
                self.cells[0].vers.push((ts2, rev, Val::Num(2)));
                self.cells[1].vers.push((ts2, rev, Val::Num(2)));
                self.cells[2].vers.push((ts2, rev, set("m2")));
            }
            Data::Del15 | Data::Del20 => {
                let ts = if d == Data::Del15 { 15 } else { 20 };
                for c in &mut self.cells[..2] {
                    c.del = Some(c.del.map_or(ts, |x: i64| x.max(ts)));
                }
            }
        }
    }

    fn want(&self) -> BTreeMap<u8, (i64, String)> {
        FAMS.iter()
            .enumerate()
            .filter_map(|(i, &f)| self.cells[i].display(f).map(|d| (f, d)))
            .collect()
    }
}

fn engine() -> (tokio::runtime::Runtime, tempfile::TempDir, Engine) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let o = EngineOptions {
        split_size_bytes: 0,
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", o, rt.handle().clone()).expect("open");
    (rt, dir, e)
}

/// Runs one skeleton (the table-wide steps at their places; `None` places are data steps) with
/// every filling of its data steps, one row per filling and variant, in a fresh table.
fn run_skeleton(e: &Engine, table: u32, skeleton: &[Option<Global>]) {
    let d = skeleton.iter().filter(|s| s.is_none()).count();
    let mut rows = Vec::new();
    for fill in 0..DATA.len().pow(d as u32) {
        let data: Vec<Data> = (0..d)
            .map(|i| DATA[fill / DATA.len().pow(i as u32) % DATA.len()])
            .collect();
        for same_ts in [false, true] {
            rows.push(Row {
                name: format!("r{:05}", rows.len()),
                data: data.clone(),
                same_ts,
                cells: Default::default(),
            });
        }
    }
    let steps: Vec<Vec<Step>> = rows
        .iter()
        .map(|r| {
            let mut it = r.data.iter();
            skeleton
                .iter()
                .map(|g| match g {
                    Some(g) => Step::Global(*g),
                    None => Step::Data(*it.next().expect("a data step")),
                })
                .collect()
        })
        .collect();
    e.create_table(schema(table)).expect("create table");
    let mut data_done = 0;
    let mut splits = 0;
    for (i, g) in skeleton.iter().enumerate() {
        match g {
            None => {
                let mut batch = Vec::new();
                for r in &mut rows {
                    let op = r.data[data_done];
                    batch.extend(r.mutations(op));
                    r.model(op, i as u64);
                }
                e.apply(table, &batch).expect("apply");
                data_done += 1;
            }
            Some(Global::Minor) => e
                .compact(Some(table), CompactionKind::Minor)
                .expect("minor"),
            Some(Global::Merging) => e
                .compact(Some(table), CompactionKind::Merging)
                .expect("merging"),
            Some(Global::Major) => {
                e.compact(Some(table), CompactionKind::Major)
                    .expect("major");
                for r in &mut rows {
                    for (c, &f) in r.cells.iter_mut().zip(FAMS.iter()) {
                        c.major(f);
                    }
                }
            }
            Some(Global::Split) => {
                splits += 1;
                let at = rows.len() * [1, 2, 1, 3, 5][splits % 5] / [2, 4, 4, 4, 8][splits % 5];
                match e.split(table, rows[at.min(rows.len() - 1)].name.as_bytes()) {
                    Ok(()) => e.wait_for_maintenance(),
                    Err(Error::InvalidInput(_)) => {}
                    Err(err) => panic!("split failed: {err}"),
                }
            }
        }
        let mut got: BTreeMap<String, BTreeMap<u8, (i64, String)>> = BTreeMap::new();
        for c in e
            .scan(table, &ScanSpec::default())
            .expect("scan")
            .collect_all()
            .expect("cells")
        {
            assert_eq!(c.key.flag, CellFlag::Insert);
            let prev = got
                .entry(String::from_utf8(c.key.row).expect("row"))
                .or_default()
                .insert(
                    c.key.family,
                    (
                        c.key.timestamp,
                        String::from_utf8(c.value).expect("text value"),
                    ),
                );
            assert!(prev.is_none(), "a combined cell came back twice");
        }
        for (ri, r) in rows.iter().enumerate() {
            let want = r.want();
            let have = got.remove(&r.name).unwrap_or_default();
            assert_eq!(
                have,
                want,
                "after step {i} of {:?} (t{} variant; engine left, model right)",
                &steps[ri][..=i],
                if r.same_ts { "10/t10" } else { "10/t20" }
            );
        }
        assert!(got.is_empty(), "rows the model lacks: {got:?}");
    }
    e.drop_table(table).expect("drop table");
}

/// Every skeleton of `len` steps that starts with a data step.
fn skeletons(len: usize) -> Vec<Vec<Option<Global>>> {
    let choices: Vec<Option<Global>> = std::iter::once(None)
        .chain(GLOBAL.iter().copied().map(Some))
        .collect();
    let n = choices.len().pow(len as u32 - 1);
    (0..n)
        .map(|k| {
            std::iter::once(None)
                .chain(
                    (0..len - 1).map(|i| choices[k / choices.len().pow(i as u32) % choices.len()]),
                )
                .collect()
        })
        .collect()
}

/// Every sequence of 5 steps (and so every shorter one, checked after each step): 625 table
/// skeletons, each with every filling of its data steps (up to 2,048 rows).
#[test]
fn every_interleaving_of_five_steps_matches_the_model() {
    let (_rt, _dir, e) = engine();
    let sk = skeletons(5);
    assert_eq!(sk.len(), 625);
    for (i, s) in sk.iter().enumerate() {
        run_skeleton(&e, 1 + i as u32, s);
    }
    e.close().expect("close");
}

fn named(steps: &[Option<Global>]) {
    let (_rt, _dir, e) = engine();
    run_skeleton(&e, 1, steps);
    e.close().expect("close");
}

const W: Option<Global> = None;
const MINOR: Option<Global> = Some(Global::Minor);
const MERGING: Option<Global> = Some(Global::Merging);
const MAJOR: Option<Global> = Some(Global::Major);
const SPLIT: Option<Global> = Some(Global::Split);

/// Values in stores, the delete only in the cell cache, then a merging compaction (which must
/// not combine the values across the delete it does not hold), then more.
#[test]
fn values_in_stores_and_a_delete_only_in_the_cache_then_a_merging_compaction() {
    named(&[W, MINOR, W, MINOR, W, MERGING, W, MAJOR]);
}

/// ACCUMULO-2232: the delete lies in an older store than the run a merging compaction combines.
#[test]
fn a_delete_in_an_older_store_than_the_combined_run() {
    named(&[W, MINOR, W, MINOR, W, MINOR, W, MINOR, MERGING, W, MAJOR]);
}

/// The same around a split: each half compacts on its own.
#[test]
fn partial_compactions_after_a_split_keep_deletes_apart() {
    named(&[W, MINOR, SPLIT, W, MINOR, W, MERGING, MAJOR, W]);
}
