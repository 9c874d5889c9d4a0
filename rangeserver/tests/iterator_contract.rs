//! The iterator contract harness: every built-in iterator kind, alone and in stacks of two,
//! re-seeks, stays inside its seek range, handles seeks that start mid-row, keeps `valid()`
//! stable and gives deep copies that are isolated from each other and from later writes.

use std::collections::BTreeMap;
use std::sync::Arc;

use common::iterators::{IterScope, ScanIterator};
use common::key::{Key, KeyRef, row_end, row_start};
use common::{FamilySpec, TableSchema};
use dfs_broker::LocalFs;
use rangeserver::engine::{Engine, EngineOptions, Mutation};
use rangeserver::iter::{CellIter, VecIter};
use rangeserver::iterators::stack::{CellKv, SourceFactory};
use rangeserver::iterators::{Budget, Families, IterEnv, KvIter, Registry, SeekRange};
use rangeserver::scan::spec::ScanSpec;

const SEC: i64 = 1_000_000_000;
const NOW: i64 = 1_000 * SEC;
const ROWS: [&str; 6] = ["a", "b", "ba", "bb", "c", "d"];
const QUALS: [&str; 3] = ["", "x", "y"];
type Cells = Vec<(Vec<u8>, Vec<u8>)>;

fn opts(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Families `a` (1), `b` (2), `c` (3).
fn schema() -> TableSchema {
    let mut s = TableSchema::new(1, "/contract");
    s.families = vec![
        FamilySpec::new(1, "a", "default"),
        FamilySpec::new(2, "b", "default"),
        FamilySpec::new(3, "c", "default"),
    ];
    s
}

/// Every built-in iterator kind with options that keep some cells and drop others. The bool
/// says the kind is row-level.
fn kinds() -> Vec<(&'static str, BTreeMap<String, String>, bool)> {
    vec![
        ("row_regex", opts(&[("REGEX", "^b")]), false),
        // Documents are family a's qualifiers; no posting in b matches, so NOT keeps every
        // document: all of a, none of b and c.
        (
            "boolean_index",
            opts(&[
                ("QUERY", r#"{"not":{"t":["F","w"]}}"#),
                ("INDEX_FAMILY", "b"),
                ("DOC_FAMILY", "a"),
            ]),
            false,
        ),
        (
            "qualifier_regex",
            opts(&[("REGEX", "^x$"), ("FAMILY", "a")]),
            false,
        ),
        (
            "value_regex",
            opts(&[("REGEX", "1$"), ("NEGATE", "true")]),
            false,
        ),
        ("age_off", opts(&[("TTL", "5")]), false),
        (
            "column_age_off",
            opts(&[("FAMILY", "b"), ("TTL", "3")]),
            false,
        ),
        ("family_filter", opts(&[("FAMILIES", "a,c")]), false),
        ("whole_row", opts(&[]), true),
        ("first_in_row", opts(&[]), true),
        ("count_cells", opts(&[]), true),
    ]
}

/// A deterministic spread of cells: rows of 0 to 9 cells over three families, timestamps from
/// `NOW - 9s` to `NOW`, values ending in digits 0..9.
fn cells() -> Cells {
    let mut v = Vec::new();
    let mut n = 0u64;
    for (ri, row) in ROWS.iter().enumerate() {
        for fam in 1u8..=3 {
            for (qi, q) in QUALS.iter().enumerate() {
                n += 1;
                // Leave some holes, different per row.
                if (ri + fam as usize + qi).is_multiple_of(3) && ri != 3 {
                    continue;
                }
                for ver in 0..(1 + (n % 2) as i64) {
                    let ts = NOW - ((n as i64 * 7 + ver * 3) % 10) * SEC;
                    let mut k = Key::insert(*row, fam, *q, ts);
                    k.revision = n as i64 * 10 + ver;
                    v.push((
                        k.encode(),
                        format!("v{}", (n + ver as u64) % 10).into_bytes(),
                    ));
                }
            }
        }
    }
    v.sort();
    v.dedup_by(|a, b| a.0 == b.0);
    v
}

fn env() -> IterEnv {
    IterEnv {
        scope: IterScope::Scan,
        now_ns: NOW,
        schema: Arc::new(schema()),
        budget: Budget::unlimited(),
        combined: Families::none(),
    }
}

/// A stack of `names` (bottom first) over a `CellKv` of the cells.
fn stack(registry: &Registry, names: &[usize], data: &Cells) -> Box<dyn KvIter> {
    let data = Arc::new(data.clone());
    let factory: SourceFactory =
        Arc::new(move || Ok(Box::new(VecIter::new(data.as_ref().clone())) as Box<dyn CellIter>));
    let mut it: Box<dyn KvIter> = Box::new(CellKv::new(
        factory().expect("source"),
        Some(factory.clone()),
    ));
    let ks = kinds();
    let env = env();
    for &i in names {
        let (name, o, _) = &ks[i];
        let kind = registry.iterator(name).expect("a built-in kind");
        kind.validate(o, &env.schema).expect("valid options");
        it = kind.build(it, o, &env).expect("build");
    }
    it
}

fn drain(it: &mut dyn KvIter) -> Cells {
    let mut out = Vec::new();
    while it.valid() {
        // (d) valid() and the current cell are stable when asked again.
        assert!(it.valid());
        let k = it.key().to_vec();
        let v = it.value().to_vec();
        assert!(it.valid());
        assert_eq!(it.key(), k.as_slice());
        assert_eq!(it.value(), v.as_slice());
        out.push((k, v));
        it.next().expect("next");
    }
    assert!(!it.valid(), "valid() stays false at the end");
    out
}

fn seek_drain(it: &mut dyn KvIter, r: &SeekRange) -> Cells {
    it.seek(r, &Families::all()).expect("seek");
    drain(it)
}

fn row_of(key: &[u8]) -> Vec<u8> {
    KeyRef::from_trusted(key)
        .expect("key")
        .row_prefix()
        .to_vec()
}

/// Every stack to check: each kind alone and every ordered pair.
fn stacks() -> Vec<Vec<usize>> {
    let n = kinds().len();
    let mut v: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    for a in 0..n {
        for b in 0..n {
            v.push(vec![a, b]);
        }
    }
    v
}

fn label(names: &[usize]) -> String {
    let ks = kinds();
    names
        .iter()
        .map(|&i| ks[i].0)
        .collect::<Vec<_>>()
        .join(" > ")
}

fn row_level(names: &[usize]) -> bool {
    let ks = kinds();
    names.iter().any(|&i| ks[i].2)
}

#[test]
fn every_kind_filters_something_and_keeps_something() {
    let r = Registry::builtins();
    let data = cells();
    for (i, (name, _, _)) in kinds().iter().enumerate() {
        let out = seek_drain(stack(&r, &[i], &data).as_mut(), &SeekRange::all());
        assert!(!out.is_empty(), "{name} returned nothing");
        // whole_row alone passes every complete row; the others each drop or rewrite cells.
        if *name != "whole_row" {
            assert_ne!(
                out, data,
                "{name} changed nothing: the harness would prove little"
            );
        }
    }
    // Every built-in iterator kind is covered.
    let listed: Vec<String> = kinds()
        .iter()
        .map(|k| format!("iterator:{}", k.0))
        .collect();
    for k in r.kind_names() {
        if k.starts_with("iterator:") {
            assert!(listed.contains(&k), "{k} is not in the harness");
        }
    }
}

/// (a) After every k-th output, a fresh stack seeked from just past the last key returned (for
/// row-level stacks: from the end of the last complete row) gives the same remaining cells.
#[test]
fn a_fresh_stack_reseeked_after_every_kth_output_gives_the_same_cells() {
    let r = Registry::builtins();
    let data = cells();
    for names in stacks() {
        let full = seek_drain(stack(&r, &names, &data).as_mut(), &SeekRange::all());
        let rows = row_level(&names);
        for k in 1..=3usize {
            let mut got: Cells = Vec::new();
            let mut start = Vec::new();
            loop {
                let mut it = stack(&r, &names, &data);
                it.seek(&SeekRange::new(start.clone(), None), &Families::all())
                    .expect("seek");
                let mut taken = 0;
                while it.valid() && taken < k {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.next().expect("next");
                    taken += 1;
                }
                if !it.valid() {
                    break;
                }
                if rows {
                    // Row-level: the scanner resumes only between rows, so finish this one.
                    let row = row_of(&got.last().expect("took k cells").0);
                    while it.valid() && row_of(it.key()) == row {
                        got.push((it.key().to_vec(), it.value().to_vec()));
                        it.next().expect("next");
                    }
                    if !it.valid() {
                        break;
                    }
                }
                let (last, _) = got.last().expect("took k cells").clone();
                start = if rows {
                    row_end_of(&last)
                } else {
                    let mut s = last;
                    s.push(0);
                    s
                };
            }
            assert_eq!(got, full, "{} re-seeked every {k} cells", label(&names));
        }
    }
}

fn row_end_of(key: &[u8]) -> Vec<u8> {
    let row = KeyRef::from_trusted(key).expect("key").row().into_owned();
    row_end(&row)
}

/// Range bounds: row starts and ends, keys of cells, keys just past them, cell starts.
fn bounds(data: &Cells) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = Vec::new();
    for row in ROWS.iter().chain(["", "bab", "e"].iter()) {
        v.push(row_start(row.as_bytes()));
        v.push(row_end(row.as_bytes()));
    }
    for (i, (k, _)) in data.iter().enumerate() {
        if i % 4 == 1 {
            v.push(k.clone());
            let mut p = k.clone();
            p.push(0);
            v.push(p);
            let kr = KeyRef::from_trusted(k).expect("key");
            v.push(common::key::cell_start(
                &kr.row(),
                kr.family(),
                &kr.qualifier(),
            ));
        }
    }
    v.sort();
    v.dedup();
    v
}

/// The length of the row part of an encoded key or bound (the escaped row and its two-byte
/// terminator), as the row iterators judge a seek's start.
fn row_prefix_len(t: &[u8]) -> usize {
    let mut i = 0;
    while i + 1 < t.len() {
        if t[i] == 0 {
            match t[i + 1] {
                0xFF => i += 2,
                _ => return i + 2,
            }
        } else {
            i += 1;
        }
    }
    t.len()
}

/// True if `bound` lies between rows (not inside one).
fn between_rows(bound: &[u8]) -> bool {
    row_prefix_len(bound) == bound.len()
}

/// The end of the row a bound lies in.
fn next_row(bound: &[u8]) -> Vec<u8> {
    let mut v = bound[..row_prefix_len(bound)].to_vec();
    let n = v.len();
    v[n - 1] = 2;
    v
}

/// (b) and (c): many seek ranges with bounds in the middle of rows; nothing outside the range
/// comes back, and what does come back is what the whole-range output says it should be.
#[test]
fn nothing_outside_the_seek_range_and_mid_row_seeks_skip_or_filter_as_specified() {
    let r = Registry::builtins();
    let data = cells();
    let bs = bounds(&data);
    assert!(between_rows(&row_start(b"ba")) && between_rows(&row_end(b"ba")));
    assert!(!between_rows(&common::key::cell_start(b"ba", 1, b"")));
    let mut ranges = vec![SeekRange::all()];
    for (i, s) in bs.iter().enumerate() {
        ranges.push(SeekRange::new(s.clone(), None));
        for e in bs.iter().skip(i + 1).step_by(3) {
            ranges.push(SeekRange::new(s.clone(), Some(e.clone())));
        }
    }
    let mut checked_mid_row = 0;
    for names in stacks() {
        let full = seek_drain(stack(&r, &names, &data).as_mut(), &SeekRange::all());
        let rows = row_level(&names);
        let mut it = stack(&r, &names, &data);
        for range in &ranges {
            // One stack seeked again and again: a seek forgets the previous one.
            let out = seek_drain(it.as_mut(), range);
            for (k, _) in &out {
                assert!(
                    range.contains(k),
                    "{}: {:?} outside {range:?}",
                    label(&names),
                    Key::decode(k)
                );
            }
            let want: Cells = if !rows {
                full.iter()
                    .filter(|c| range.contains(&c.0))
                    .cloned()
                    .collect()
            } else {
                let start = if !between_rows(&range.start) {
                    checked_mid_row += 1;
                    next_row(&range.start)
                } else {
                    range.start.clone()
                };
                if range.end.as_deref().is_some_and(|e| !between_rows(e)) {
                    // A cut row: each kind has its own rule; containment was checked.
                    continue;
                }
                let whole = SeekRange::new(start, range.end.clone());
                full.iter()
                    .filter(|c| whole.contains(&c.0))
                    .cloned()
                    .collect()
            };
            assert_eq!(out, want, "{} over {range:?}", label(&names));
        }
    }
    assert!(checked_mid_row > 100, "{checked_mid_row} mid-row seeks");
}

/// (e) Deep copies are independent cursors: moving one does not move the other, and each
/// starts unpositioned, as a fresh stack.
#[test]
fn deep_copies_do_not_move_each_other() {
    let r = Registry::builtins();
    let data = cells();
    for names in stacks() {
        let mut a = stack(&r, &names, &data);
        a.seek(&SeekRange::all(), &Families::all()).expect("seek");
        let mut b = a.deep_copy().expect("deep copy");
        let full = seek_drain(stack(&r, &names, &data).as_mut(), &SeekRange::all());
        b.seek(&SeekRange::all(), &Families::all()).expect("seek");
        if !a.valid() {
            // A stack that returns nothing (count_cells > boolean_index: no document cell
            // reaches the index) has no position to keep.
            assert!(full.is_empty(), "{}", label(&names));
            continue;
        }
        let first = a.key().to_vec();
        let mut moved = 0;
        while b.valid() && moved < 3 {
            b.next().expect("next");
            moved += 1;
        }
        assert_eq!(a.key(), first.as_slice(), "{}", label(&names));
        assert_eq!(drain(a.as_mut()), full, "{}", label(&names));
        // b went on from where it was, a's draining did not move it.
        assert_eq!(
            drain(b.as_mut()),
            full[moved..].to_vec(),
            "{}",
            label(&names)
        );
        // A copy of a copy, seeked to half the range.
        let mut c = b.deep_copy().expect("deep copy");
        if let Some((mid, _)) = full.get(full.len() / 2) {
            let range = SeekRange::new(mid.clone(), None);
            let got = seek_drain(c.as_mut(), &range);
            assert!(got.iter().all(|x| range.contains(&x.0)));
        }
    }
}

/// (e) A scan's stack, and whatever it copies, reads the scan's snapshot: cells written after
/// the scan began are not seen, with every kind as a scan iterator.
#[test]
fn a_scan_stack_does_not_see_writes_made_after_the_scan_began() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).expect("open");
    e.create_table(schema()).expect("create");
    let muts: Vec<Mutation> = cells()
        .into_iter()
        .map(|(k, v)| {
            let k = Key::decode(&k).expect("key");
            let mut m = Mutation::insert(k.row, k.family, k.qualifier, v);
            m.timestamp = Some(k.timestamp);
            m
        })
        .collect();
    e.apply(1, &muts).expect("apply");
    for (round, names) in stacks().into_iter().enumerate() {
        let ks = kinds();
        let spec = ScanSpec {
            iterators: names
                .iter()
                .map(|&i| ScanIterator {
                    kind: ks[i].0.into(),
                    options: ks[i].1.clone(),
                })
                .collect(),
            ..ScanSpec::default()
        };
        let before = e
            .scan(1, &spec)
            .expect("scan")
            .collect_all()
            .expect("cells");
        let mut sc = e.scan(1, &spec).expect("scan");
        let mut got = Vec::new();
        if let Some(c) = sc.next_cell().expect("cell") {
            got.push(c);
        }
        // Writes into every row, before and after the scan's position, fresh ones included.
        let late: Vec<Mutation> = ROWS
            .iter()
            .chain(["b0", "bab", "z"].iter())
            .flat_map(|row| {
                (1u8..=3).map(move |f| {
                    let mut m = Mutation::insert(*row, f, "x", format!("late{round}1"));
                    m.timestamp = Some(NOW - SEC);
                    m
                })
            })
            .collect();
        e.apply(1, &late).expect("late writes");
        while let Some(c) = sc.next_cell().expect("cell") {
            got.push(c);
        }
        let key = |c: &rangeserver::engine::ScanCell| (c.key.clone(), c.value.clone());
        assert_eq!(
            got.iter().map(key).collect::<Vec<_>>(),
            before.iter().map(key).collect::<Vec<_>>(),
            "{}",
            label(&names)
        );
    }
}

fn engine_with(o: EngineOptions) -> (tokio::runtime::Runtime, tempfile::TempDir, Engine) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
    let e = Engine::open(fs, "/ht", o, rt.handle().clone()).expect("open");
    e.create_table(schema()).expect("create");
    let muts: Vec<Mutation> = cells()
        .into_iter()
        .map(|(k, v)| {
            let k = Key::decode(&k).expect("key");
            let mut m = Mutation::insert(k.row, k.family, k.qualifier, v);
            m.timestamp = Some(k.timestamp);
            m
        })
        .collect();
    e.apply(1, &muts).expect("apply");
    (rt, dir, e)
}

/// The scanner's own re-seek: with a work budget of one cell per block, every stack yields
/// (the filters skip cells) and resumes by seeking a fresh stack; the cells are the same as
/// from a scan that never yields.
/// Found here: a yield inside a row next to a row iterator (the filter below yielding before
/// the row's first kept cell, or a filter above yielding in the middle of the row's output)
/// made the resumed scan skip the rest of the row; row iterators now resume in the row their
/// source stopped in and hold the budget until their row's output is consumed.
#[test]
fn scans_that_yield_and_resume_give_the_same_cells_for_every_stack() {
    let (_rt1, _d1, plain) = engine_with(EngineOptions::default());
    let (_rt2, _d2, tight) = engine_with(EngineOptions {
        scan_work_per_block: 1,
        ..EngineOptions::default()
    });
    let ks = kinds();
    let mut total_yields = 0;
    for names in stacks() {
        let spec = ScanSpec {
            iterators: names
                .iter()
                .map(|&i| ScanIterator {
                    kind: ks[i].0.into(),
                    options: ks[i].1.clone(),
                })
                .collect(),
            ..ScanSpec::default()
        };
        let want = plain
            .scan(1, &spec)
            .expect("scan")
            .collect_all()
            .expect("cells");
        let mut sc = tight.scan(1, &spec).expect("scan");
        sc.pause_on_yield(true);
        let mut got = Vec::new();
        loop {
            match sc.next_cell().expect("cell") {
                Some(c) => got.push((c.key.row, c.key.family, c.key.qualifier, c.value)),
                None if sc.yielded() => {
                    total_yields += 1;
                    sc.resume().expect("resume");
                }
                None => break,
            }
        }
        let want: Vec<_> = want
            .into_iter()
            .map(|c| (c.key.row, c.key.family, c.key.qualifier, c.value))
            .collect();
        assert_eq!(got, want, "{}", label(&names));
    }
    assert!(total_yields > 50, "{total_yields} yields");
}
