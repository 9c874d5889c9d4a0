//! The iterator layer end to end on an engine: combiner families in scans and compactions,
//! APPEND_ONLY, table and scan iterators, value predicates, the snapshot pin, kinds the engine
//! lacks, and scans that yield.

use std::collections::BTreeMap;
use std::sync::Arc;

use common::iterators::{
    CombinerSpec, IterScope, IteratorSpec, ScanIterator, ValuePredicate, ValuePredicates, ValueTest,
};
use common::key::CellFlag;
use common::{FamilySpec, TableSchema};
use dfs_broker::LocalFs;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::iterators::Registry;
use rangeserver::scan::spec::ScanSpec;

const T: u32 = 1;

fn opts(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn combined(id: u8, name: &str, kind: &str, o: &[(&str, &str)], append_only: bool) -> FamilySpec {
    let mut f = FamilySpec::new(id, name, "default");
    f.combiner = Some(CombinerSpec {
        kind: kind.into(),
        options: opts(o),
    });
    f.append_only = append_only;
    f
}

/// `hits COUNTER, total sum, peak max, low min, fx sum fixed64, tags string_set(3), docs
/// uid_set(3) APPEND_ONLY, plain`.
fn schema() -> TableSchema {
    let mut s = TableSchema::new(T, "/stats");
    let mut hits = FamilySpec::new(1, "hits", "default");
    hits.counter = true;
    s.families = vec![
        hits,
        combined(2, "total", "sum", &[], false),
        combined(3, "peak", "max", &[], false),
        combined(4, "low", "min", &[], false),
        combined(5, "fx", "sum", &[("ENCODING", "fixed64")], false),
        combined(6, "tags", "string_set", &[("MAX", "3")], false),
        combined(7, "docs", "uid_set", &[("MAX", "3")], true),
        FamilySpec::new(8, "plain", "default"),
    ];
    s
}

struct Db {
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    e: Engine,
}

fn open_with(schema: TableSchema, o: EngineOptions) -> Db {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", o, rt.handle().clone()).unwrap();
    e.create_table(schema).unwrap();
    Db { rt, _dir: dir, e }
}

fn open() -> Db {
    open_with(schema(), EngineOptions::default())
}

fn put(e: &Engine, row: &str, fam: u8, ts: Option<i64>, v: &[u8]) {
    let mut m = Mutation::insert(row, fam, "", v.to_vec());
    m.timestamp = ts;
    e.apply(T, &[m]).unwrap();
}

fn scan(e: &Engine, spec: &ScanSpec) -> Vec<(String, u8, Vec<u8>)> {
    e.scan(T, spec)
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .map(|c| (String::from_utf8(c.key.row).unwrap(), c.key.family, c.value))
        .collect()
}

fn value(e: &Engine, row: &str, fam: u8) -> Option<Vec<u8>> {
    scan(e, &ScanSpec::default())
        .into_iter()
        .find(|(r, f, _)| r == row && *f == fam)
        .map(|(_, _, v)| v)
}

fn text(v: Option<Vec<u8>>) -> String {
    String::from_utf8(v.expect("a value")).unwrap()
}

#[test]
fn combiners_combine_on_read_and_after_every_compaction() {
    let db = open();
    let e = &db.e;
    for (fam, vals) in [
        (1u8, &["+2", "3", "-1"][..]),
        (2, &["10", "-4", "+5"]),
        (3, &["3", "12", "-7"]),
        (4, &["3", "12", "-7"]),
    ] {
        for v in vals {
            put(e, "r", fam, None, v.as_bytes());
        }
    }
    for n in [1i64, 2, 40] {
        put(e, "r", 5, None, &n.to_be_bytes());
    }
    for m in ["d9", "d1", "d5", "d1"] {
        put(e, "r", 7, None, m.as_bytes());
        put(e, "r", 6, None, m.as_bytes());
    }
    let check = |e: &Engine, docs: &str, stage: &str| {
        assert_eq!(text(value(e, "r", 1)), "4", "{stage}");
        assert_eq!(text(value(e, "r", 2)), "11", "{stage}");
        assert_eq!(text(value(e, "r", 3)), "12", "{stage}");
        assert_eq!(text(value(e, "r", 4)), "-7", "{stage}");
        assert_eq!(
            value(e, "r", 5),
            Some(43i64.to_be_bytes().to_vec()),
            "{stage}"
        );
        assert_eq!(text(value(e, "r", 6)), r#"3 ["d1","d5","d9"]"#, "{stage}");
        // uid_set counts inserted members, string_set distinct ones.
        assert_eq!(text(value(e, "r", 7)), docs, "{stage}");
    };
    check(e, r#"4 ["d1","d5","d9"]"#, "cache");
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    check(e, r#"4 ["d1","d5","d9"]"#, "after a minor compaction");
    put(e, "r", 1, None, b"1");
    put(e, "r", 7, None, b"d1");
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    e.compact(Some(T), CompactionKind::Merging).unwrap();
    assert_eq!(text(value(e, "r", 1)), "5");
    assert_eq!(text(value(e, "r", 7)), r#"5 ["d1","d5","d9"]"#);
    put(e, "r", 1, None, b"-1");
    put(e, "r", 7, None, b"d1");
    e.compact(Some(T), CompactionKind::Major).unwrap();
    check(e, r#"6 ["d1","d5","d9"]"#, "after a major compaction");
    // One more member past MAX drops the members, the count stays.
    put(e, "r", 7, None, b"d7");
    assert_eq!(text(value(e, "r", 7)), "7 *");
    e.compact(Some(T), CompactionKind::Major).unwrap();
    assert_eq!(text(value(e, "r", 7)), "7 *");
    put(e, "r", 7, None, b"d8");
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    assert_eq!(text(value(e, "r", 7)), "8 *");
}

/// Issue 14: two increments with the same client timestamp used to count once.
#[test]
fn versions_with_equal_timestamps_each_count_once() {
    let db = open();
    let e = &db.e;
    put(e, "r", 1, Some(1000), b"5");
    put(e, "r", 1, Some(1000), b"7");
    put(e, "r", 2, Some(1000), b"5");
    put(e, "r", 2, Some(1000), b"7");
    // A plain family keeps Hypertable's rule: the newest revision wins.
    put(e, "r", 8, Some(1000), b"old");
    put(e, "r", 8, Some(1000), b"new");
    let check = |e: &Engine| {
        assert_eq!(text(value(e, "r", 1)), "12");
        assert_eq!(text(value(e, "r", 2)), "12");
        let plain: Vec<_> = scan(e, &ScanSpec::default())
            .into_iter()
            .filter(|c| c.1 == 8)
            .collect();
        assert_eq!(plain, vec![("r".into(), 8, b"new".to_vec())]);
    };
    check(e);
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    check(e);
    e.compact(Some(T), CompactionKind::Major).unwrap();
    check(e);
}

#[test]
fn bad_values_and_deletes_of_append_only_families_are_refused() {
    let db = open();
    let e = &db.e;
    let err = e
        .apply(T, &[Mutation::insert("r", 2, "", b"x".to_vec())])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("total") && err.contains("not a decimal integer"),
        "{err}"
    );
    let err = e
        .apply(T, &[Mutation::insert("r", 5, "", b"1234".to_vec())])
        .unwrap_err()
        .to_string();
    assert!(err.contains("fixed64"), "{err}");
    for flag in [
        CellFlag::DeleteCell,
        CellFlag::DeleteCellVersion,
        CellFlag::DeleteColumnFamily,
    ] {
        let mut m = Mutation::delete(flag, "r", 7, "", Some(10));
        if flag == CellFlag::DeleteColumnFamily {
            m.qualifier.clear();
        }
        let err = e.apply(T, &[m]).unwrap_err().to_string();
        assert!(err.contains("APPEND_ONLY") && err.contains("docs"), "{err}");
    }
    let err = e
        .apply(
            T,
            &[Mutation::delete(CellFlag::DeleteRow, "r", 0, "", Some(10))],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("row deletes are refused"), "{err}");
    // Nothing of a refused batch is applied.
    let batch = [
        Mutation::insert("r", 1, "", b"1".to_vec()),
        Mutation::insert("r", 3, "", b"nine".to_vec()),
    ];
    assert!(e.apply(T, &batch).is_err());
    assert_eq!(value(e, "r", 1), None);
}

#[test]
fn a_delete_only_in_the_cache_still_covers_values_a_merging_compaction_combined() {
    // `total` is not APPEND_ONLY: partial compactions must not combine it across a delete.
    let db = open();
    let e = &db.e;
    put(e, "r", 2, Some(10), b"1");
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    put(e, "r", 2, Some(20), b"2");
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    e.apply(
        T,
        &[Mutation::delete(CellFlag::DeleteCell, "r", 2, "", Some(15))],
    )
    .unwrap();
    e.compact(Some(T), CompactionKind::Merging).unwrap();
    assert_eq!(text(value(e, "r", 2)), "2");
    e.compact(Some(T), CompactionKind::Major).unwrap();
    assert_eq!(text(value(e, "r", 2)), "2");
}

#[test]
fn table_and_scan_iterators_and_value_predicates() {
    let mut s = TableSchema::new(T, "/t");
    s.add_family("a");
    s.add_family("b");
    s.iterators = vec![IteratorSpec {
        name: "no_tmp".into(),
        kind: "value_regex".into(),
        options: opts(&[("REGEX", "^tmp"), ("NEGATE", "true")]),
        scopes: vec![IterScope::Scan, IterScope::Major],
        priority: 10,
    }];
    let db = open_with(s, EngineOptions::default());
    let e = &db.e;
    for (row, fam, v) in [
        ("r1", 1u8, "x1"),
        ("r1", 2, "tmp1"),
        ("r2", 1, "tmp2"),
        ("r2", 2, "y2"),
        ("r3", 1, "z3"),
        ("r3", 2, "w3"),
    ] {
        put(e, row, fam, None, v.as_bytes());
    }
    let all = scan(e, &ScanSpec::default());
    let vals: Vec<&[u8]> = all.iter().map(|c| c.2.as_slice()).collect();
    assert_eq!(vals, [&b"x1"[..], b"y2", b"z3", b"w3"]);
    // Per scan: one cell per row, then a count per row.
    let first = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "first_in_row".into(),
            options: opts(&[]),
        }],
        ..ScanSpec::default()
    };
    let got: Vec<String> = scan(e, &first).into_iter().map(|c| c.0).collect();
    assert_eq!(got, ["r1", "r2", "r3"]);
    let count = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "count_cells".into(),
            options: opts(&[]),
        }],
        ..ScanSpec::default()
    };
    let got: Vec<Vec<u8>> = scan(e, &count).into_iter().map(|c| c.2).collect();
    assert_eq!(got, [b"1".to_vec(), b"1".to_vec(), b"2".to_vec()]);
    // A family filter keeps only its families (and asks the source for no others).
    for (o, want) in [
        (vec![("FAMILIES", "b")], vec![&b"y2"[..], b"w3"]),
        (
            vec![("FAMILIES", "b"), ("NEGATE", "true")],
            vec![&b"x1"[..], b"z3"],
        ),
    ] {
        let spec = ScanSpec {
            iterators: vec![ScanIterator {
                kind: "family_filter".into(),
                options: opts(&o),
            }],
            ..ScanSpec::default()
        };
        let got: Vec<Vec<u8>> = scan(e, &spec).into_iter().map(|c| c.2).collect();
        assert_eq!(got, want, "{o:?}");
    }
    // Value predicates: rows with a matching cell, shown columns only; LIMIT counts them.
    let preds = ScanSpec {
        value_predicates: Some(ValuePredicates {
            tests: vec![
                ValuePredicate {
                    family: 2,
                    qualifier: None,
                    test: ValueTest::Prefix(b"w".to_vec()),
                },
                ValuePredicate {
                    family: 2,
                    qualifier: Some(Vec::new()),
                    test: ValueTest::Equals(b"y2".to_vec()),
                },
            ],
            output: vec![],
        }),
        ..ScanSpec::default()
    };
    let got: Vec<String> = scan(e, &preds).into_iter().map(|c| c.0).collect();
    assert_eq!(got, ["r2", "r3", "r3"]);
    let limited = ScanSpec {
        row_limit: 1,
        row_offset: 1,
        ..preds.clone()
    };
    let got: Vec<String> = scan(e, &limited).into_iter().map(|c| c.0).collect();
    assert_eq!(got, ["r3", "r3"]);
    // Unknown kinds and bad options fail the scan with the name.
    let bad = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "nope".into(),
            options: opts(&[]),
        }],
        ..ScanSpec::default()
    };
    let err = e.scan(T, &bad).err().unwrap().to_string();
    assert!(err.contains("nope"), "{err}");
    let bad = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "row_regex".into(),
            options: opts(&[("REGEX", "(")]),
        }],
        ..ScanSpec::default()
    };
    let err = e.scan(T, &bad).err().unwrap().to_string();
    assert!(err.contains("REGEX"), "{err}");
    // The major compaction ran the filter: the cells are gone, also with the filter dropped.
    e.compact(Some(T), CompactionKind::Major).unwrap();
    let mut s2 = e.schema(T).unwrap();
    s2.iterators.clear();
    s2.generation += 1;
    e.alter_table(s2).unwrap();
    assert_eq!(scan(e, &ScanSpec::default()).len(), 4);
}

#[test]
fn kinds_the_engine_lacks_fail_scans_and_defer_major_compactions() {
    let o = EngineOptions {
        registry: Arc::new(Registry::empty()),
        ..EngineOptions::default()
    };
    let mut s = TableSchema::new(T, "/t");
    s.families = vec![
        combined(1, "total", "sum", &[], false),
        FamilySpec::new(2, "plain", "default"),
    ];
    let db = open_with(s, o);
    let e = &db.e;
    let err = e
        .apply(T, &[Mutation::insert("r", 1, "", b"1".to_vec())])
        .unwrap_err()
        .to_string();
    assert!(err.contains("combiner:sum"), "{err}");
    let err = e.scan(T, &ScanSpec::default()).err().unwrap().to_string();
    assert!(err.contains("combiner:sum"), "{err}");
    put(e, "r", 2, None, b"kept");
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    let err = e
        .compact(Some(T), CompactionKind::Major)
        .unwrap_err()
        .to_string();
    assert!(err.contains("deferred"), "{err}");
}

#[test]
fn a_filter_that_skips_much_yields_and_the_scan_goes_on() {
    let mut s = TableSchema::new(T, "/t");
    s.add_family("a");
    let o = EngineOptions {
        scan_work_per_block: 7,
        ..EngineOptions::default()
    };
    let db = open_with(s, o);
    let e = &db.e;
    let muts: Vec<Mutation> = (0..500)
        .map(|i| Mutation::insert(format!("r{i:04}"), 1, "", format!("{}", i % 50)))
        .collect();
    e.apply(T, &muts).unwrap();
    let spec = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "value_regex".into(),
            options: opts(&[("REGEX", "^0$")]),
        }],
        ..ScanSpec::default()
    };
    let got: Vec<String> = scan(e, &spec).into_iter().map(|c| c.0).collect();
    let want: Vec<String> = (0..500).step_by(50).map(|i| format!("r{i:04}")).collect();
    assert_eq!(got, want);
    // The stream form hands the thread back at each yield and still returns everything.
    let mut sc = e.scan(T, &spec).unwrap();
    sc.pause_on_yield(true);
    let mut rows = Vec::new();
    let mut yields = 0;
    loop {
        match sc.next_cell().unwrap() {
            Some(c) => rows.push(String::from_utf8(c.key.row).unwrap()),
            None if sc.yielded() => {
                yields += 1;
                sc.resume().unwrap();
            }
            None => break,
        }
    }
    assert_eq!(rows, want);
    assert!(yields >= 5, "{yields} yields");
    // The range server's path: blocks from a blocking task that hands its thread back at each
    // yield and goes on in a new one.
    let _in_runtime = db.rt.enter();
    let mut rx = e.scan_stream(T, spec, 3, 2);
    let got: Vec<String> = db.rt.block_on(async move {
        let mut out = Vec::new();
        while let Some(block) = rx.recv().await {
            for c in block.unwrap() {
                out.push(String::from_utf8(c.key.row).unwrap());
            }
        }
        out
    });
    assert_eq!(got, want);
}

#[test]
fn a_scan_sees_a_batch_whole_or_not_at_all() {
    let mut s = TableSchema::new(T, "/t");
    s.add_family("a");
    let db = open_with(s, EngineOptions::default());
    let e = db.e.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let e = e.clone();
        let stop = stop.clone();
        let written = written.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // A "document" and its two "index" cells, one batch.
                let b = [
                    Mutation::insert(format!("d{n:06}"), 1, "", b"doc".to_vec()),
                    Mutation::insert(format!("i{n:06}"), 1, "", b"idx".to_vec()),
                    Mutation::insert(format!("j{n:06}"), 1, "", b"idx".to_vec()),
                ];
                e.apply(T, &b).unwrap();
                n += 1;
                written.store(n, std::sync::atomic::Ordering::Relaxed);
            }
            n
        })
    };
    let mut scans = 0;
    while scans < 40 || written.load(std::sync::atomic::Ordering::Relaxed) < 5000 {
        scans += 1;
        let cells = e
            .scan(T, &ScanSpec::default())
            .unwrap()
            .collect_all()
            .unwrap();
        let count = |p: u8| cells.iter().filter(|c| c.key.row[0] == p).count();
        assert_eq!(count(b'd'), count(b'i'));
        assert_eq!(count(b'd'), count(b'j'));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(writer.join().unwrap() > 0);
}

/// A filter below a row iterator yields in the middle of a row (its budget is spent on the
/// row's first, rejected cells); the scan resumes there, not at the next row.
#[test]
fn a_row_iterator_over_a_yielding_filter_loses_no_row() {
    let mut s = TableSchema::new(T, "/t");
    s.add_family("a");
    let o = EngineOptions {
        scan_work_per_block: 7,
        ..EngineOptions::default()
    };
    let db = open_with(s, o);
    let e = &db.e;
    let mut muts = Vec::new();
    for r in 0..30 {
        for q in 0..20 {
            let v = if q >= 15 { "keep" } else { "drop" };
            muts.push(Mutation::insert(
                format!("r{r:02}"),
                1,
                format!("q{q:02}"),
                v,
            ));
        }
    }
    e.apply(T, &muts).unwrap();
    let spec = ScanSpec {
        iterators: vec![
            ScanIterator {
                kind: "value_regex".into(),
                options: opts(&[("REGEX", "^keep$")]),
            },
            ScanIterator {
                kind: "whole_row".into(),
                options: opts(&[]),
            },
        ],
        ..ScanSpec::default()
    };
    let cells = e.scan(T, &spec).unwrap().collect_all().unwrap();
    assert_eq!(cells.len(), 30 * 5);
    let _in_runtime = db.rt.enter();
    let mut rx = e.scan_stream(T, spec, 4, 2);
    let n = db.rt.block_on(async move {
        let mut n = 0;
        while let Some(block) = rx.recv().await {
            n += block.unwrap().len();
        }
        n
    });
    assert_eq!(n, 30 * 5);
}

/// Writes `n` fixed64 increments of 1 over `keys` rows of family `fx` (5), in batches of 500;
/// returns the sum written per row.
fn increments(e: &Engine, n: u64, keys: u64) -> Vec<i64> {
    let mut sums = vec![0i64; keys as usize];
    let one = 1i64.to_be_bytes();
    let mut i = 0;
    while i < n {
        let batch: Vec<Mutation> = (i..(i + 500).min(n))
            .map(|j| {
                let k = (j * 7919) % keys;
                sums[k as usize] += 1;
                Mutation::insert(format!("k{k:03}"), 5, "", one.to_vec())
            })
            .collect();
        e.apply(T, &batch).unwrap();
        i += 500;
    }
    sums
}

/// [`increments`] in rounds of 10,000, each waited on until maintenance is idle, so that
/// every flush the writes make due runs before the next round: the flush count does not depend
/// on how fast the maintenance threads run beside the writer.
fn increments_settled(e: &Engine, n: u64, keys: u64) -> Vec<i64> {
    let mut sums = vec![0i64; keys as usize];
    for start in (0..n).step_by(10_000) {
        let round = increments(e, (n - start).min(10_000), keys);
        sums.iter_mut().zip(round).for_each(|(s, r)| *s += r);
        e.wait_for_maintenance();
    }
    sums
}

fn check_increments(e: &Engine, sums: &[i64]) {
    for (k, &want) in sums.iter().enumerate() {
        assert_eq!(
            value(e, &format!("k{k:03}"), 5),
            Some(want.to_be_bytes().to_vec()),
            "row k{k:03}"
        );
    }
}

#[test]
fn a_combiner_group_flushes_early_and_folds_into_one_store() {
    // The combiner group's cache is flushed at 2 MiB while its stores are small, and each
    // flush is a major compaction that folds cache and store into one combined store.
    let o = EngineOptions {
        combined_flush_bytes: 2 << 20,
        ..EngineOptions::default()
    };
    let db = open_with(schema(), o);
    let e = &db.e;
    let sums = increments_settled(e, 120_000, 40);
    e.wait_for_maintenance();
    let s = e.stats();
    assert!(
        s.major_compactions >= 3,
        "flushes of the combiner group fold: {s:?}"
    );
    assert_eq!(s.minor_compactions, 0, "{s:?}");
    assert_eq!(s.stores, 1, "every fold leaves one store: {s:?}");
    check_increments(e, &sums);

    // Both rules off: the same writes, flushed at the same size, make minor compactions
    // that keep every increment, and read back the same sums.
    let o = EngineOptions {
        cell_cache_flush_bytes: 2 << 20,
        combined_flush_bytes: 0,
        combined_flush_ratio: 0.0,
        ..EngineOptions::default()
    };
    let db = open_with(schema(), o);
    let e = &db.e;
    let sums = increments_settled(e, 120_000, 40);
    e.wait_for_maintenance();
    let s = e.stats();
    assert_eq!(s.major_compactions, 0, "{s:?}");
    assert!(s.minor_compactions >= 3, "{s:?}");
    check_increments(e, &sums);
}

#[test]
fn a_group_without_combiners_keeps_the_normal_flush_size() {
    // The same amount of plain cells stays in the cache: only combiner groups flush early.
    let o = EngineOptions {
        combined_flush_bytes: 2 << 20,
        ..EngineOptions::default()
    };
    let mut s = TableSchema::new(T, "/plain");
    s.add_family("plain");
    let db = open_with(s, o);
    let e = &db.e;
    let one = 1i64.to_be_bytes();
    for i in 0..240u64 {
        let batch: Vec<Mutation> = (0..500u64)
            .map(|j| Mutation::insert(format!("k{:03}", (i * 500 + j) % 40), 1, "", one.to_vec()))
            .collect();
        e.apply(T, &batch).unwrap();
    }
    e.wait_for_maintenance();
    let s = e.stats();
    assert_eq!(
        (s.minor_compactions, s.major_compactions, s.stores),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn a_scan_in_pieces_at_one_snapshot_returns_what_the_whole_scan_does() {
    // Small flushes: the rows lie in many stores, whose block indexes give the split rows.
    let o = EngineOptions {
        cell_cache_flush_bytes: 256 << 10,
        ..EngineOptions::default()
    };
    let mut s = TableSchema::new(T, "/pieces");
    let v = s.add_family("v");
    let w = s.add_family("w");
    let db = open_with(s, o);
    let e = &db.e;
    for chunk in 0..20u32 {
        let batch: Vec<Mutation> = (chunk * 1000..(chunk + 1) * 1000)
            .flat_map(|i| {
                let value = if i % 100 == 0 {
                    b"keep".to_vec()
                } else {
                    format!("x{i:049}").into_bytes()
                };
                [
                    Mutation::insert(format!("r{i:06}"), v, "a", value),
                    Mutation::insert(format!("r{i:06}"), w, "", b"w".to_vec()),
                ]
            })
            .collect();
        e.apply(T, &batch).unwrap();
    }
    e.compact(Some(T), CompactionKind::Minor).unwrap();
    e.wait_for_maintenance();
    let whole = |spec: &ScanSpec| e.scan(T, spec).unwrap().collect_all().unwrap();
    let in_pieces = |spec: &ScanSpec, snapshot: i64| {
        let pieces = e.scan_pieces(T, spec, 4, 1);
        assert!(pieces.len() > 1, "{} pieces", pieces.len());
        pieces
            .iter()
            .flat_map(|p| {
                e.scan_at(T, p, Some(snapshot))
                    .unwrap()
                    .collect_all()
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let predicate = ScanSpec {
        value_predicates: Some(ValuePredicates {
            tests: vec![ValuePredicate {
                family: v,
                qualifier: None,
                test: ValueTest::Equals(b"keep".to_vec()),
            }],
            output: Vec::new(),
        }),
        ..ScanSpec::default()
    };
    let rows = ScanSpec {
        row_intervals: vec![common::scan_spec::RowInterval {
            start: std::ops::Bound::Excluded(b"r005000".to_vec()),
            end: std::ops::Bound::Included(b"r015000".to_vec()),
        }],
        ..ScanSpec::default()
    };
    let first = ScanSpec {
        iterators: vec![ScanIterator {
            kind: "first_in_row".into(),
            options: BTreeMap::new(),
        }],
        ..ScanSpec::default()
    };
    let specs = [ScanSpec::default(), predicate, rows, first];
    let before: Vec<_> = specs.iter().map(whole).collect();
    assert_eq!(before[1].len(), 400, "rows 0, 100, ... with both cells");
    let snapshot = e.pin_snapshot();
    for (spec, want) in specs.iter().zip(&before) {
        assert_eq!(&in_pieces(spec, snapshot), want);
    }
    // Pieces read the pinned snapshot: writes after it, in any piece, are not seen.
    e.apply(
        T,
        &[
            Mutation::insert("r000001", v, "late", b"keep".to_vec()),
            Mutation::insert("r019999", v, "late", b"keep".to_vec()),
        ],
    )
    .unwrap();
    for (spec, want) in specs.iter().zip(&before) {
        assert_eq!(&in_pieces(spec, snapshot), want);
    }
    assert_eq!(whole(&specs[1]).len(), 400 + 6);
    // Limits count across rows: such a scan stays whole.
    let limited = ScanSpec {
        row_limit: 5,
        ..ScanSpec::default()
    };
    assert_eq!(e.scan_pieces(T, &limited, 4, 1).len(), 1);
}
