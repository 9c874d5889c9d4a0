//! End-to-end checks of the engine API: write, scan, compact, split, reopen.

use std::sync::Arc;

use common::TableSchema;
use common::key::CellFlag;
use dfs_broker::LocalFs;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::{RowInterval, ScanSpec};
use std::ops::Bound;

fn schema() -> TableSchema {
    let mut s = TableSchema::new(1, "/t");
    s.add_family("a");
    s.add_family("b");
    s
}

fn rows(e: &Engine) -> Vec<(String, u8, String)> {
    e.scan(1, &ScanSpec::default())
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .map(|c| {
            (
                String::from_utf8(c.key.row).unwrap(),
                c.key.family,
                String::from_utf8(c.value).unwrap(),
            )
        })
        .collect()
}

#[test]
fn write_scan_compact_split_reopen() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(
        fs.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.create_table(schema()).unwrap();
    let muts: Vec<Mutation> = (0..1000)
        .map(|i| Mutation::insert(format!("row{i:04}"), 1 + (i % 2) as u8, "", format!("v{i}")))
        .collect();
    e.apply(1, &muts).unwrap();
    assert_eq!(rows(&e).len(), 1000);
    e.compact(Some(1), CompactionKind::Minor).unwrap();
    assert_eq!(rows(&e).len(), 1000);
    e.apply(
        1,
        &[Mutation::delete(
            CellFlag::DeleteRow,
            "row0005",
            0,
            "",
            None,
        )],
    )
    .unwrap();
    assert_eq!(rows(&e).len(), 999);
    e.split(1, b"row0500").unwrap();
    assert_eq!(e.ranges(1).len(), 2);
    assert_eq!(rows(&e).len(), 999);
    e.wait_for_maintenance();
    assert_eq!(rows(&e).len(), 999);
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    assert_eq!(e.ranges(1).len(), 2);
    let r = rows(&e);
    assert_eq!(r.len(), 999);
    assert_eq!(r[0], ("row0000".into(), 1, "v0".into()));
    assert!(!r.iter().any(|x| x.0 == "row0005"));
    e.compact(Some(1), CompactionKind::Major).unwrap();
    assert_eq!(rows(&e).len(), 999);
}

/// A split of a range loaded in key order rewrites only the store that straddles the split
/// row: each half keeps the parent's stores that lie wholly inside it, as they are.
#[test]
fn a_split_rewrites_only_the_store_that_straddles_the_split_row() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(
        fs.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.create_table(schema()).unwrap();
    // Four stores of disjoint rows: 0-249, 250-499, 500-749, 750-999.
    for part in 0..4 {
        let muts: Vec<Mutation> = (part * 250..(part + 1) * 250)
            .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
            .collect();
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
    }
    // Deletes in the straddling store's rows on both sides of the split row stay deletes.
    e.apply(
        1,
        &[
            Mutation::delete(CellFlag::DeleteRow, "row0550", 0, "", None),
            Mutation::delete(CellFlag::DeleteRow, "row0650", 0, "", None),
        ],
    )
    .unwrap();
    e.compact(Some(1), CompactionKind::Minor).unwrap();
    assert_eq!(files_under(dir.path(), "cs"), 5);
    let before = rows(&e);
    assert_eq!(before.len(), 998);
    e.split(1, b"row0600").unwrap();
    e.wait_for_maintenance();
    e.collect_garbage().unwrap();
    let stores: Vec<usize> = e.ranges(1).iter().map(|r| r.stores).collect();
    // Low half: 0-249, 250-499 kept, 500-599 rewritten with its delete (the delete store of
    // both rows straddles too, and is rewritten with it). High half: the rewritten 600-749
    // with its delete, 750-999 kept.
    assert_eq!(stores, vec![3, 2]);
    // Kept: three stores; the two straddling ones became one per half.
    assert_eq!(files_under(dir.path(), "cs"), 5);
    assert_eq!(rows(&e), before);
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    assert_eq!(rows(&e), before);
    e.compact(Some(1), CompactionKind::Major).unwrap();
    assert_eq!(rows(&e), before);
}

/// Stores of disjoint rows (a load in key order) are not merged until there are many more
/// than `max_stores_per_group`; one store over all their rows makes them overlap, and then
/// they are.
#[test]
fn stores_of_disjoint_rows_are_left_unmerged() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let opts = EngineOptions {
        max_stores_per_group: 2,
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let mut expect = Vec::new();
    for part in 0..6 {
        let muts: Vec<Mutation> = (part * 100..(part + 1) * 100)
            .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
            .collect();
        expect.extend((part * 100..(part + 1) * 100).map(|i| format!("row{i:04}")));
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
        e.wait_for_maintenance();
    }
    assert_eq!(e.stats().stores, 6);
    assert_eq!(e.stats().merging_compactions, 0);
    // Two more stores, each over every row: three stores hold row0150.
    for round in 0..2 {
        let muts: Vec<Mutation> = (0..600)
            .step_by(50)
            .map(|i| Mutation::insert(format!("row{i:04}"), 2, "", format!("w{round}")))
            .collect();
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
        e.wait_for_maintenance();
    }
    assert!(e.stats().merging_compactions > 0, "{:?}", e.stats());
    assert!(e.stats().stores < 8, "{:?}", e.stats());
    let r = rows(&e);
    assert_eq!(r.iter().filter(|c| c.1 == 1).count(), 600);
    // Both versions of each of the 12 cells, newest first.
    let f2: Vec<&str> = r
        .iter()
        .filter(|c| c.1 == 2)
        .map(|c| c.2.as_str())
        .collect();
    assert_eq!(f2, ["w1", "w0"].repeat(12));
}

/// Over the bound on disjoint stores, a group merges only the few stores next in age that
/// hold the fewest bytes, not every store it has.
#[test]
fn too_many_disjoint_stores_merge_a_small_window_of_them() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    // One store per group, four disjoint ones: the fifth makes a merge of two due.
    let opts = EngineOptions {
        max_stores_per_group: 1,
        split_size_bytes: 0,
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let mut start = 0;
    for n in [300, 300, 20, 20, 300, 300] {
        let muts: Vec<Mutation> = (start..start + n)
            .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
            .collect();
        start += n;
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
        e.wait_for_maintenance();
    }
    // At five stores the two of 20 rows became one; at five again, that one and a neighbour.
    let st = e.stats();
    assert_eq!((st.stores, st.merging_compactions), (4, 2), "{st:?}");
    let r = rows(&e);
    assert_eq!(r.len(), 1240);
    assert!(r.windows(2).all(|w| w[0].0 < w[1].0));
    assert_eq!(r[700], ("row0700".into(), 1, "v700".into()));
}

/// A range with more disjoint stores than a group may keep that has also outgrown the split
/// size is split, not merged: each half keeps the stores holding its rows, so only the store
/// the split row cuts is rewritten (a load in key order wrote every other store once).
#[test]
fn a_range_due_for_a_split_is_split_instead_of_merged() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let part = |e: &Engine, part: usize| {
        let muts: Vec<Mutation> = (part * 100..(part + 1) * 100)
            .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
            .collect();
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
        e.wait_for_maintenance();
    };
    // Four stores, the most a group of one store and four disjoint ones keeps unmerged.
    let opts = EngineOptions {
        max_stores_per_group: 1,
        split_size_bytes: 0,
        ..EngineOptions::default()
    };
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    for p in 0..4 {
        part(&e, p);
    }
    assert_eq!((e.stats().stores, e.stats().merging_compactions), (4, 0));
    let four = e.ranges(1)[0].size_bytes;
    e.close().unwrap();
    drop(e);
    // Reopened with a split size the fifth store passes.
    let opts = EngineOptions {
        max_stores_per_group: 1,
        split_size_bytes: four + four / 8,
        ..EngineOptions::default()
    };
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    part(&e, 4);
    let st = e.stats();
    assert_eq!(st.splits, 1, "{st:?}");
    // The one store the split row cuts is rewritten in each half (two merging compactions);
    // the others are kept as they are. Merged first, the five stores would have become one,
    // which both halves would then rewrite.
    assert!(st.merging_compactions <= 2, "{st:?}");
    assert!(st.stores >= 5, "{st:?}");
    let r = rows(&e);
    assert_eq!(r.len(), 500);
    assert!(r.windows(2).all(|w| w[0].0 < w[1].0));
}

/// A bounded scan over stores of disjoint rows (left unmerged) reads a block of the store
/// that holds its rows only: the stores after it, whose first keys lie past the scan's end,
/// are not read.
#[test]
fn a_bounded_scan_reads_only_the_disjoint_store_holding_its_rows() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    for part in 0..6 {
        let muts: Vec<Mutation> = (part * 100..(part + 1) * 100)
            .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
            .collect();
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
    }
    e.wait_for_maintenance();
    assert_eq!(e.stats().stores, 6);
    let before = e.stats().block_cache_misses;
    let spec = ScanSpec {
        row_intervals: vec![RowInterval {
            start: Bound::Included(b"row0050".to_vec()),
            end: Bound::Excluded(b"row0060".to_vec()),
        }],
        ..Default::default()
    };
    let got = e.scan(1, &spec).unwrap().collect_all().unwrap();
    assert_eq!(got.len(), 10);
    let read = e.stats().block_cache_misses - before;
    assert_eq!(read, 1, "blocks read for rows in one of 6 disjoint stores");
}

#[test]
fn async_apply_and_bounded_scan_stream() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let e2 = e.clone();
    let blocks = rt.block_on(async move {
        for b in 0..10 {
            let muts = (0..100)
                .map(|i| Mutation::insert(format!("k{:05}", b * 100 + i), 1, "", "v"))
                .collect();
            e2.apply_async(1, muts).await.unwrap();
        }
        let mut rx = e2.scan_stream(1, ScanSpec::default(), 64, 2);
        let mut sizes = Vec::new();
        while let Some(block) = rx.recv().await {
            sizes.push(block.unwrap().len());
        }
        sizes
    });
    assert_eq!(blocks.iter().sum::<usize>(), 1000);
    assert!(blocks.iter().all(|&n| n <= 64), "{blocks:?}");
    // Unknown table: the stream carries the error.
    let err = rt.block_on(async { e.scan_stream(99, ScanSpec::default(), 8, 1).recv().await });
    assert!(matches!(err, Some(Err(rangeserver::Error::NoSuchTable(_)))));
}

fn files_under(dir: &std::path::Path, prefix: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            n += files_under(&p, prefix);
        } else if p.file_name().unwrap().to_string_lossy().starts_with(prefix) {
            n += 1;
        }
    }
    n
}

#[test]
fn compact_gc_removes_stores_a_scanner_kept() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    for round in 0..3 {
        let muts: Vec<Mutation> = (0..100)
            .map(|i| Mutation::insert(format!("r{i:04}"), 1, "", format!("v{round}")))
            .collect();
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
    }
    assert_eq!(files_under(dir.path(), "cs"), 3);
    // An open scanner holds the old stores: the major compaction cannot delete them.
    let scanner = e.scan(1, &ScanSpec::default()).unwrap();
    e.compact(Some(1), CompactionKind::Major).unwrap();
    assert_eq!(
        files_under(dir.path(), "cs"),
        4,
        "old stores kept for the scanner"
    );
    drop(scanner);
    assert!(matches!(
        e.compact(Some(99), CompactionKind::Gc),
        Err(rangeserver::Error::NoSuchTable(_))
    ));
    e.compact(None, CompactionKind::Gc).unwrap();
    assert_eq!(
        files_under(dir.path(), "cs"),
        1,
        "Gc deletes what the scanner no longer holds"
    );
    assert_eq!(rows(&e).len(), 300);
}

#[test]
fn replaced_files_are_collected_and_dropped_tables_removed() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    // Small fragments, so the log rolls and flushed fragments can be purged.
    let opts = EngineOptions {
        commit_log: rangeserver::commitlog::CommitLogOptions {
            fragment_size_bytes: 2048,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    for round in 0..4 {
        let muts: Vec<Mutation> = (0..200)
            .map(|i| Mutation::insert(format!("r{i:04}"), 1, "", format!("v{round}")))
            .collect();
        e.apply(1, &muts).unwrap();
        e.compact(Some(1), CompactionKind::Minor).unwrap();
    }
    assert_eq!(files_under(dir.path(), "cs"), 4);
    e.compact(Some(1), CompactionKind::Major).unwrap();
    assert_eq!(
        files_under(dir.path(), "cs"),
        1,
        "replaced stores are deleted"
    );
    // Four versions of each cell (the family keeps every version).
    assert_eq!(rows(&e).len(), 800);
    // The commit-log fragments that held flushed data were purged.
    assert!(
        e.stats().purged_fragments > 0,
        "flushed log fragments are purged"
    );
    e.drop_table(1).unwrap();
    assert_eq!(files_under(dir.path(), "cs"), 0);
    assert!(!dir.path().join("ht/tables/1").exists());
    assert!(matches!(
        e.scan(1, &ScanSpec::default()),
        Err(rangeserver::Error::NoSuchTable(_))
    ));
}

#[test]
fn one_row_scan_reads_few_blocks() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let mut s = schema();
    s.access_groups[0].blocksize_bytes = 4096;
    let e = Engine::open(
        fs.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.create_table(s).unwrap();
    let muts: Vec<Mutation> = (0..50_000)
        .map(|i| Mutation::insert(format!("row{i:06}"), 1, "q", format!("value-{i:08}")))
        .collect();
    e.apply(1, &muts).unwrap();
    e.compact(Some(1), CompactionKind::Major).unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    let spec = ScanSpec {
        row_intervals: vec![rangeserver::scan::spec::RowInterval::row(
            b"row043210".to_vec(),
        )],
        ..Default::default()
    };
    let got = e.scan(1, &spec).unwrap().collect_all().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].value, b"value-00043210");
    let st = e.stats();
    assert!(
        st.block_cache_misses <= 2,
        "blocks read for one row: {}",
        st.block_cache_misses
    );
    // A row interval in the middle also seeks rather than reading from the start.
    let spec = ScanSpec {
        row_intervals: vec![rangeserver::scan::spec::RowInterval {
            start: std::ops::Bound::Included(b"row040000".to_vec()),
            end: std::ops::Bound::Excluded(b"row040010".to_vec()),
        }],
        ..Default::default()
    };
    assert_eq!(e.scan(1, &spec).unwrap().collect_all().unwrap().len(), 10);
    assert!(
        e.stats().block_cache_misses <= 5,
        "{}",
        e.stats().block_cache_misses
    );
}

#[test]
fn attributes_persist_atomically() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(
        fs.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.update_attrs(
        vec![
            ("ns:/a".into(), "1".into()),
            ("ns:/a/b".into(), "2".into()),
            ("other".into(), "x".into()),
        ],
        vec![],
    )
    .unwrap();
    e.update_attrs(vec![], vec!["ns:/a/b".into()]).unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    assert_eq!(e.attrs("ns:"), vec![("ns:/a".to_string(), "1".to_string())]);
    assert_eq!(e.attrs("").len(), 2);
}

#[test]
fn ranges_assigned_one_by_one() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(
        fs.clone(),
        "/ht",
        EngineOptions::default(),
        rt.handle().clone(),
    )
    .unwrap();
    e.register_table(schema()).unwrap();
    assert!(e.ranges(1).is_empty());
    let err = e
        .apply(1, &[Mutation::insert("m", 1, "", "v")])
        .unwrap_err();
    assert!(err.to_string().contains("not served here"), "{err}");
    e.create_range(1, Some(b"k".to_vec()), Some(b"p".to_vec()))
        .unwrap();
    assert!(
        e.create_range(1, Some(b"o".to_vec()), None).is_err(),
        "overlap"
    );
    assert!(
        e.create_range(1, Some(b"z".to_vec()), Some(b"a".to_vec()))
            .is_err()
    );
    e.create_range(1, Some(b"p".to_vec()), None).unwrap();
    e.apply(
        1,
        &[
            Mutation::insert("m", 1, "", "v1"),
            Mutation::insert("q", 1, "", "v2"),
        ],
    )
    .unwrap();
    assert!(e.apply(1, &[Mutation::insert("a", 1, "", "x")]).is_err());
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    assert_eq!(e.ranges(1).len(), 2);
    // Rows below "k" are not held here, so the whole-table scan is refused; from "k" on the
    // held ranges cover it.
    let from_k = ScanSpec {
        row_intervals: vec![RowInterval {
            start: Bound::Included(b"k".to_vec()),
            end: Bound::Unbounded,
        }],
        ..ScanSpec::default()
    };
    let cells = e.scan(1, &from_k).unwrap().collect_all().unwrap();
    assert_eq!(cells.len(), 2);
}

fn open_partial(dir: &std::path::Path, rt: &tokio::runtime::Runtime) -> Engine {
    let fs = Arc::new(LocalFs::new(dir).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    e.register_table(schema()).unwrap();
    // Held: [.., "g") and ["m", "t"); not held: ["g", "m") and ["t", ..).
    e.create_range(1, None, Some(b"g".to_vec())).unwrap();
    e.create_range(1, Some(b"m".to_vec()), Some(b"t".to_vec()))
        .unwrap();
    e
}

fn rows_interval(start: Bound<&str>, end: Bound<&str>) -> ScanSpec {
    let own = |b: Bound<&str>| match b {
        Bound::Included(s) => Bound::Included(s.as_bytes().to_vec()),
        Bound::Excluded(s) => Bound::Excluded(s.as_bytes().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    ScanSpec {
        row_intervals: vec![RowInterval {
            start: own(start),
            end: own(end),
        }],
        ..ScanSpec::default()
    }
}

fn not_here_row(err: rangeserver::Error) -> Vec<u8> {
    match err {
        rangeserver::Error::NotHere { table_id, row } => {
            assert_eq!(table_id, 1);
            row
        }
        other => panic!("expected NotHere, got {other}"),
    }
}

#[test]
fn apply_refuses_a_batch_with_a_row_not_held_and_applies_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = open_partial(dir.path(), &rt);
    let err = e
        .apply(
            1,
            &[
                Mutation::insert("a", 1, "", "1"),
                Mutation::insert("n", 1, "", "2"),
                Mutation::insert("h", 1, "", "3"),
                Mutation::insert("b", 1, "", "4"),
            ],
        )
        .unwrap_err();
    assert_eq!(err.kind(), common::ErrorKind::NotFound);
    assert_eq!(not_here_row(err), b"h");
    // Nothing of the batch is visible, nor after a reopen (nothing was logged).
    let held = rows_interval(Bound::Unbounded, Bound::Excluded("g"));
    assert!(e.scan(1, &held).unwrap().collect_all().unwrap().is_empty());
    let held2 = rows_interval(Bound::Included("m"), Bound::Excluded("t"));
    assert!(e.scan(1, &held2).unwrap().collect_all().unwrap().is_empty());
    e.close().unwrap();
    drop(e);
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    assert_eq!(e.stats().replayed_cells, 0);
    assert!(e.scan(1, &held).unwrap().collect_all().unwrap().is_empty());
    // Rows at the edges: "g" and "t" are the first rows not held; "f\xff" and "s" are held.
    for row in ["t", "g", "zz"] {
        let err = e
            .apply(1, &[Mutation::insert(row, 1, "", "x")])
            .unwrap_err();
        assert_eq!(not_here_row(err), row.as_bytes());
    }
    e.apply(
        1,
        &[
            Mutation::insert(&b"f\xff"[..], 1, "", "x"),
            Mutation::insert("m", 1, "", "y"),
            Mutation::insert("s", 1, "", "z"),
        ],
    )
    .unwrap();
}

#[test]
fn scan_not_covered_by_held_ranges_fails_naming_the_first_missing_row() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = open_partial(dir.path(), &rt);
    e.apply(
        1,
        &[
            Mutation::insert("a", 1, "", "1"),
            Mutation::insert("n", 1, "", "2"),
        ],
    )
    .unwrap();
    let err_row = |spec: &ScanSpec| not_here_row(e.scan(1, spec).map(|_| ()).unwrap_err());
    assert_eq!(err_row(&ScanSpec::default()), b"g");
    assert_eq!(
        err_row(&rows_interval(Bound::Included("b"), Bound::Included("g"))),
        b"g"
    );
    assert_eq!(
        err_row(&rows_interval(Bound::Included("n"), Bound::Unbounded)),
        b"t"
    );
    assert_eq!(
        err_row(&ScanSpec {
            row_intervals: vec![RowInterval::row("h")],
            ..ScanSpec::default()
        }),
        b"h"
    );
    // A key set: intervals inside the range holding the one before are not looked up again,
    // but one that runs past that range's end, or lies past it, is still refused.
    let key_set = |ivs: Vec<RowInterval>| ScanSpec {
        row_intervals: ivs,
        ..ScanSpec::default()
    };
    let own = |s: &str| s.as_bytes().to_vec();
    let span = |a: &str, b: Bound<&str>| RowInterval {
        start: Bound::Included(own(a)),
        end: b.map(own),
    };
    assert_eq!(
        err_row(&key_set(vec![
            RowInterval::row("a"),
            RowInterval::row("b"),
            span("c", Bound::Included("g")),
        ])),
        b"g"
    );
    assert_eq!(
        err_row(&key_set(vec![
            RowInterval::row("a"),
            RowInterval::row("f"),
            RowInterval::row("h"),
        ])),
        b"h"
    );
    assert_eq!(
        err_row(&key_set(vec![
            RowInterval::row("m"),
            RowInterval::row("s"),
            span("s~", Bound::Unbounded),
        ])),
        b"t"
    );
    assert_eq!(
        e.scan(
            1,
            &key_set(vec![
                RowInterval::row("a"),
                span("b", Bound::Excluded("g")),
                RowInterval::row("m"),
                RowInterval::row("n"),
                span("o", Bound::Excluded("t")),
            ])
        )
        .unwrap()
        .collect_all()
        .unwrap()
        .len(),
        2
    );
    // An interval after an excluded "l" starts at "l\0", the first row above "l", not held.
    assert_eq!(
        err_row(&rows_interval(Bound::Excluded("l"), Bound::Excluded("n"))),
        b"l\0"
    );
    // Covered intervals scan normally; an interval ending exactly where the held part ends
    // (excluded) is covered.
    let ok = |spec: &ScanSpec| e.scan(1, spec).unwrap().collect_all().unwrap().len();
    assert_eq!(
        ok(&rows_interval(Bound::Unbounded, Bound::Excluded("g"))),
        1
    );
    assert_eq!(
        ok(&rows_interval(Bound::Included("m"), Bound::Excluded("t"))),
        1
    );
    assert_eq!(
        ok(&rows_interval(Bound::Included("m"), Bound::Included("s~"))),
        1
    );
    assert_eq!(
        ok(&ScanSpec {
            row_intervals: vec![RowInterval::row("n")],
            ..ScanSpec::default()
        }),
        1
    );
    // Cell intervals are checked by their rows too.
    let cells = ScanSpec {
        cell_intervals: vec![common::scan_spec::CellInterval {
            start: Bound::Included(common::scan_spec::CellPos {
                row: b"m".to_vec(),
                family: 1,
                qualifier: Vec::new(),
            }),
            end: Bound::Excluded(common::scan_spec::CellPos {
                row: b"u".to_vec(),
                family: 1,
                qualifier: Vec::new(),
            }),
        }],
        ..ScanSpec::default()
    };
    assert_eq!(err_row(&cells), b"t");
    // The streaming form reports the same error as its only item.
    let _in_runtime = rt.enter();
    let mut rx = e.scan_stream(1, ScanSpec::default(), 16, 2);
    let first = rx.blocking_recv().unwrap();
    assert_eq!(not_here_row(first.unwrap_err()), b"g");
}

/// A clock that stands still (as a clock stepped back by NTP might).
struct FixedClock;

impl rangeserver::engine::Clock for FixedClock {
    fn now_ns(&self) -> i64 {
        1_000_000_000_000
    }
}

/// Regression (found by the model test): a major compaction dropped every cell, the log was
/// purged, and after a reopen the clock gave revisions at or below the group's flushed
/// revision, so replay skipped newly acknowledged cells.
#[test]
fn revisions_stay_above_flushed_revision_after_reopen() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let opts = || EngineOptions {
        clock: Arc::new(FixedClock),
        ..Default::default()
    };
    let e = Engine::open(fs.clone(), "/ht", opts(), rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let mut ins = Mutation::insert("a", 1, "", "v0");
    ins.timestamp = Some(0);
    let del = Mutation::delete(CellFlag::DeleteRow, "a", 0, "", Some(0));
    e.apply(1, &[ins.clone(), del]).unwrap();
    e.close().unwrap();
    drop(e);
    // Reopened, the batch sits in an old fragment, which the major compaction lets go.
    let e = Engine::open(fs.clone(), "/ht", opts(), rt.handle().clone()).unwrap();
    e.compact(Some(1), CompactionKind::Major).unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs.clone(), "/ht", opts(), rt.handle().clone()).unwrap();
    e.apply(1, &[ins]).unwrap();
    e.close().unwrap();
    drop(e);
    let e = Engine::open(fs, "/ht", opts(), rt.handle().clone()).unwrap();
    assert_eq!(rows(&e), vec![("a".to_string(), 1, "v0".to_string())]);
}

/// Seeks are counted per range and in the engine's total; a split starts its halves at zero,
/// but the total keeps what the parent counted.
#[test]
fn seeks_are_counted_and_the_total_survives_a_split() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let e = Engine::open(fs, "/ht", EngineOptions::default(), rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let muts: Vec<Mutation> = (0..100)
        .map(|i| Mutation::insert(format!("row{i:04}"), 1, "", format!("v{i}")))
        .collect();
    e.apply(1, &muts).unwrap();
    let before = e.stats().seeks;
    // A key set of three rows: a seek per row at least.
    let spec = ScanSpec {
        row_intervals: ["row0010", "row0020", "row0030"]
            .iter()
            .map(|r| RowInterval {
                start: Bound::Included(r.as_bytes().to_vec()),
                end: Bound::Included(r.as_bytes().to_vec()),
            })
            .collect(),
        ..ScanSpec::default()
    };
    assert_eq!(e.scan(1, &spec).unwrap().collect_all().unwrap().len(), 3);
    let after = e.stats().seeks;
    assert!(after >= before + 3, "{before} -> {after}");
    let per_range: u64 = e.ranges(1).iter().map(|r| r.seeks).sum();
    assert_eq!(per_range, after, "one range holds every seek");
    e.split(1, b"row0050").unwrap();
    assert!(
        e.ranges(1).iter().all(|r| r.seeks == 0),
        "the halves start at zero"
    );
    assert_eq!(e.stats().seeks, after, "the total keeps the parent's seeks");
}

/// Cells held by every cell store of table 1 (their trailers' counts), found on disk.
fn stored_cells(root: &std::path::Path, rt: &tokio::runtime::Runtime) -> (usize, u64) {
    use dfs_broker::BlockingFs;
    use rangeserver::block_cache::BlockCache;
    use rangeserver::cellstore::CellStore;
    let fs = BlockingFs::new(Arc::new(LocalFs::new(root).unwrap()), rt.handle().clone());
    let mut stack = vec![root.to_path_buf()];
    let (mut files, mut cells) = (0, 0);
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cs"))
            {
                let rel = format!("/{}", p.strip_prefix(root).unwrap().display());
                let s = CellStore::open(&fs, &rel, BlockCache::new(1 << 20)).unwrap();
                files += 1;
                cells += s.trailer().cell_count;
            }
        }
    }
    (files, cells)
}

#[test]
fn automatic_merges_keep_the_store_count_bounded_and_drop_superseded_versions() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let opts = EngineOptions {
        max_stores_per_group: 3,
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    let mut s = schema();
    s.families[0].max_versions = 1;
    e.create_table(s).unwrap();
    // 20 rounds overwriting the same 100 cells, each flushed to its own store; a delete of
    // one row in round 10 whose marker must keep hiding the older versions it covers.
    for round in 0..20 {
        let muts: Vec<Mutation> = (0..100)
            .map(|i| Mutation::insert(format!("row{i:03}"), 1, "", format!("v{round}")))
            .collect();
        e.apply(1, &muts).unwrap();
        if round == 10 {
            e.apply(
                1,
                &[Mutation::delete(CellFlag::DeleteRow, "row007", 0, "", None)],
            )
            .unwrap();
        }
        e.compact(Some(1), CompactionKind::Minor).unwrap();
        e.wait_for_maintenance();
        assert!(e.stats().stores <= 3, "round {round}: {:?}", e.stats());
    }
    e.collect_garbage().unwrap();
    let (files, cells) = stored_cells(dir.path(), &rt);
    assert!(files <= 3, "{files} store files left");
    // Dropping nothing would leave 2,000 versions (and the marker); merges that took every
    // store kept one version per cell of what they merged.
    assert!(cells < 1000, "{cells} cells stored in {files} stores");
    assert!(e.stats().merging_compactions > 0);
    let r = rows(&e);
    assert_eq!(r.len(), 100, "row007 was written again after its delete");
    assert!(r.iter().all(|(_, _, v)| v == "v19"), "{r:?}");
}

/// A table in `unsplit_tables` (a cluster's METADATA) stays one range past the split size,
/// automatically and on request, while another table of the same size splits.
#[test]
fn unsplit_tables_stay_one_range() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
    let opts = EngineOptions {
        split_size_bytes: 5_000,
        unsplit_tables: vec![1],
        ..EngineOptions::default()
    };
    let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
    e.create_table(schema()).unwrap();
    let mut other = schema();
    other.id = 2;
    other.name = "/u".into();
    e.create_table(other).unwrap();
    for table in [1, 2] {
        for part in 0..4 {
            let muts: Vec<Mutation> = (part * 500..(part + 1) * 500)
                .map(|i| Mutation::insert(format!("row{i:05}"), 1, "", "x".repeat(40)))
                .collect();
            e.apply(table, &muts).unwrap();
            e.compact(Some(table), CompactionKind::Minor).unwrap();
        }
    }
    e.wait_for_maintenance();
    assert!(e.ranges(2).len() > 1, "the other table split");
    assert_eq!(e.ranges(1).len(), 1, "the unsplit table stayed whole");
    let err = e.split(1, b"row01000").unwrap_err();
    assert!(err.to_string().contains("never split"), "{err}");
    assert_eq!(e.ranges(1).len(), 1);
    assert_eq!(rows(&e).len(), 2000);
}

/// Writes that find the cell caches over their limit wait for minor compactions, and the engine
/// counts those waits and their time; under the limit nothing is counted.
#[test]
fn writes_waiting_for_cache_memory_are_counted() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (limit, expect_waits) in [(64 << 10, true), (256 << 20, false)] {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(LocalFs::new(dir.path()).unwrap());
        let opts = EngineOptions {
            cell_cache_limit_bytes: limit,
            cell_cache_flush_bytes: limit / 2,
            ..EngineOptions::default()
        };
        let e = Engine::open(fs, "/ht", opts, rt.handle().clone()).unwrap();
        e.create_table(schema()).unwrap();
        for part in 0..20 {
            let muts: Vec<Mutation> = (part * 100..(part + 1) * 100)
                .map(|i| Mutation::insert(format!("row{i:05}"), 1, "", "v".repeat(200)))
                .collect();
            e.apply(1, &muts).unwrap();
        }
        let s = e.stats();
        if expect_waits {
            assert!(s.memory_waits > 0, "{s:?}");
        } else {
            assert_eq!((s.memory_waits, s.memory_wait_ms), (0, 0), "{s:?}");
        }
        assert_eq!(rows(&e).len(), 2000);
    }
}
