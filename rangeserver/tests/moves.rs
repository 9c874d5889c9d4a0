//! Ranges changing engines on one shared file system: unload and load of records, the
//! exported-store rule, writes racing an unload, reading a dead engine's meta log, and recovery
//! of a crashed engine's ranges from its meta log and commit log.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use common::key::CellFlag;
use common::schema::{AccessGroupSpec, FamilySpec};
use common::{ErrorKind, TableSchema};
use dfs_broker::{BlockingFs, FaultAction, FaultFs, FaultOp, FaultRule, Fs, LocalFs};
use rangeserver::Error;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::meta::{MetaState, RangeRecord, read_state};
use rangeserver::scan::spec::{RowInterval, ScanSpec};

const T: u32 = 1;

fn schema() -> TableSchema {
    let mut s = TableSchema::new(T, "/moves");
    s.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    s.families = vec![FamilySpec::new(1, "a", "g1"), FamilySpec::new(2, "b", "g2")];
    s
}

fn opts() -> EngineOptions {
    EngineOptions {
        split_size_bytes: 0,
        ..EngineOptions::default()
    }
}

struct Env {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    fs: Arc<LocalFs>,
}

impl Env {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = Arc::new(LocalFs::new(dir.path()).expect("fs"));
        Env { rt, dir, fs }
    }

    fn open(&self, root: &str) -> Engine {
        self.open_on(self.fs.clone(), root)
    }

    fn open_on(&self, fs: Arc<dyn Fs>, root: &str) -> Engine {
        Engine::open(fs, root, opts(), self.rt.handle().clone()).expect("open")
    }

    fn bfs(&self) -> BlockingFs {
        BlockingFs::new(self.fs.clone(), self.rt.handle().clone())
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p.trim_start_matches('/'))
    }

    /// Every file under `root` with its bytes.
    fn files(&self, root: &str) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(p: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(p).expect("read_dir") {
                let e = e.expect("entry");
                if e.file_type().expect("type").is_dir() {
                    walk(&e.path(), out);
                } else {
                    out.insert(e.path(), std::fs::read(e.path()).expect("read"));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.path(root), &mut out);
        out
    }
}

fn cell(row: &str, fam: u8, v: &str) -> Mutation {
    Mutation::insert(row, fam, "", v)
}

/// (row, family, value) of every visible cell of the table in the ranges `e` holds.
fn all_cells(e: &Engine) -> Vec<(String, u8, String)> {
    let bound = |r: &Option<Vec<u8>>, inclusive: bool| match r {
        None => Bound::Unbounded,
        Some(r) if inclusive => Bound::Included(r.clone()),
        Some(r) => Bound::Excluded(r.clone()),
    };
    let spec = ScanSpec {
        row_intervals: e
            .ranges(T)
            .iter()
            .map(|r| RowInterval {
                start: bound(&r.start_row, true),
                end: bound(&r.end_row, false),
            })
            .collect(),
        ..ScanSpec::default()
    };
    if spec.row_intervals.is_empty() {
        return Vec::new();
    }
    e.scan(T, &spec)
        .expect("scan")
        .collect_all()
        .expect("cells")
        .into_iter()
        .map(|c| {
            (
                String::from_utf8(c.key.row).expect("ascii"),
                c.key.family,
                String::from_utf8(c.value).expect("ascii"),
            )
        })
        .collect()
}

fn store_paths(rec: &RangeRecord) -> Vec<String> {
    rec.groups.iter().flat_map(|g| g.stores.clone()).collect()
}

#[test]
fn unloaded_stores_survive_gc_reopen_and_compaction_until_the_table_is_dropped() {
    let env = Env::new();
    let a = env.open("/servers/a");
    a.create_table(schema()).expect("create");
    let batch: Vec<Mutation> = (0..200)
        .map(|i| cell(&format!("r{i:03}"), 1 + (i % 2) as u8, &format!("v{i}")))
        .collect();
    a.apply(T, &batch).expect("apply");
    a.compact(Some(T), CompactionKind::Minor).expect("minor");
    a.split(T, b"r100").expect("split");
    a.wait_for_maintenance();
    // Some cells only in the cache when the range leaves.
    a.apply(T, &[cell("r150", 1, "late"), cell("r050", 2, "stays")])
        .expect("apply");
    let rec = a.unload_range(T, None).expect("unload");
    assert_eq!(rec.start_row.as_deref(), Some(&b"r100"[..]));
    assert_eq!(rec.end_row, None);
    assert!(
        store_paths(&rec)
            .iter()
            .all(|p| p.starts_with("/servers/a/"))
    );
    assert!(rec.groups.iter().all(|g| g.flushed_revision > i64::MIN));
    // Rows of the range are refused now, others are not.
    assert!(matches!(
        a.apply(T, &[cell("r150", 1, "x")]),
        Err(Error::NotHere { .. })
    ));
    let b = env.open("/servers/b");
    let id = b.load_range_record(&schema(), &rec).expect("load");
    assert_ne!(id, rec.id);
    // A's half: rewrite and GC may not touch the stores it handed over; nor may a reopen.
    a.compact(Some(T), CompactionKind::Major).expect("major");
    a.collect_garbage().expect("gc");
    a.close().expect("close");
    drop(a);
    let a = env.open("/servers/a");
    for p in store_paths(&rec) {
        assert!(env.path(&p).exists(), "{p} deleted by its exporter");
    }
    // B's copy: all cells of [r100, ..) with the late one; B's compactions write under B.
    b.apply(T, &[cell("r199", 1, "on b")]).expect("apply on b");
    b.compact(Some(T), CompactionKind::Major)
        .expect("major on b");
    b.collect_garbage().expect("gc on b");
    for p in store_paths(&rec) {
        assert!(env.path(&p).exists(), "{p} (A's file) deleted by B");
    }
    let cells = all_cells(&b);
    assert_eq!(cells.len(), 100 + 2);
    assert!(cells.contains(&("r150".into(), 1, "late".into())));
    assert_eq!(all_cells(&a).len(), 100 + 1);
    // B reopens: its range, with A's files, is still there.
    b.close().expect("close b");
    drop(b);
    let b = env.open("/servers/b");
    assert_eq!(all_cells(&b).len(), 102);
    // Dropping the table (on every server) frees the files.
    b.drop_table(T).expect("drop on b");
    a.drop_table(T).expect("drop on a");
    assert!(!env.path("/servers/a/tables/1").exists());
    assert!(!env.path("/servers/b/tables/1").exists());
    // The exported set went with the table, also in the meta log.
    let state = read_state(&env.bfs(), "/servers/a/meta").expect("read state");
    assert!(state.exported.is_empty());
    assert!(state.unloaded.is_empty());
    assert!(state.dropped_tables.contains(&T));
    a.close().expect("close");
    b.close().expect("close");
}

#[test]
fn unload_of_an_unknown_range_and_overlapping_loads_are_refused() {
    let env = Env::new();
    let a = env.open("/servers/a");
    a.create_table(schema()).expect("create");
    a.split(T, b"m").expect("split");
    let err = a.unload_range(T, Some(b"q")).expect_err("no such range");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let msg = err.to_string();
    assert!(
        msg.contains("table 1") && msg.contains("\"q\""),
        "names table and end row: {msg}"
    );
    assert!(matches!(
        a.unload_range(9, None),
        Err(Error::NoSuchTable(_))
    ));
    let rec = a.unload_range(T, Some(b"m")).expect("unload");
    // A repeated unload (its answer lost) returns the same record, also after a reopen.
    assert_eq!(a.unload_range(T, Some(b"m")).expect("repeat"), rec);
    a.close().expect("close");
    drop(a);
    let a = env.open("/servers/a");
    assert_eq!(a.unload_range(T, Some(b"m")).expect("repeat"), rec);
    // A overlaps it with [m, ..) + nothing: loading [.., m) back works, a second time not.
    a.load_range_record(&schema(), &rec).expect("load back");
    let err = a.load_range_record(&schema(), &rec).expect_err("overlap");
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
    // A record of another table than its schema, and inverted bounds, are refused.
    let mut other = rec.clone();
    other.table_id = 2;
    assert!(matches!(
        a.load_range_record(&schema(), &other),
        Err(Error::InvalidInput(_))
    ));
    let mut inverted = rec.clone();
    inverted.start_row = Some(b"z".to_vec());
    assert!(matches!(
        a.load_range_record(&schema(), &inverted),
        Err(Error::InvalidInput(_))
    ));
    a.close().expect("close");
}

/// Writers racing an unload: every batch is either acknowledged (and then in the record the
/// other engine loads) or refused with NotHere (and nowhere); none is lost or doubled.
#[test]
fn writes_racing_an_unload_are_moved_or_refused_never_lost() {
    let env = Env::new();
    let a = env.open("/servers/a");
    a.create_table(schema()).expect("create");
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2u8 {
        let a = a.clone();
        let stop = stop.clone();
        writers.push(std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut refused = 0;
            for i in 0.. {
                if stop.load(Ordering::Acquire) || i > 50_000 {
                    break;
                }
                let row = format!("w{w}-{i:06}");
                match a.apply(T, &[cell(&row, 1 + w, &row)]) {
                    Ok(()) => acked.push(row),
                    Err(Error::NotHere { .. }) => {
                        refused += 1;
                        if refused > 20 {
                            break;
                        }
                    }
                    Err(e) => panic!("apply: {e}"),
                }
            }
            (acked, refused)
        }));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let rec = a.unload_range(T, None).expect("unload");
    stop.store(true, Ordering::Release);
    let mut acked = Vec::new();
    for w in writers {
        let (rows, _refused) = w.join().expect("writer");
        acked.extend(rows);
    }
    let b = env.open("/servers/b");
    b.load_range_record(&schema(), &rec).expect("load");
    let mut got: Vec<String> = all_cells(&b).into_iter().map(|c| c.0).collect();
    acked.sort();
    got.sort();
    assert!(!acked.is_empty());
    assert_eq!(got, acked, "every acknowledged write moved, nothing else");
    a.close().expect("close");
    b.close().expect("close");
}

#[test]
fn read_state_reads_a_meta_log_without_changing_it() {
    let env = Env::new();
    let a = env.open("/servers/a");
    a.create_table(schema()).expect("create");
    a.split(T, b"k").expect("split");
    a.update_attrs(vec![("x".into(), "1".into())], vec![])
        .expect("attrs");
    let before = env.files("/servers/a/meta");
    let state: MetaState = read_state(&env.bfs(), "/servers/a/meta").expect("read");
    assert_eq!(env.files("/servers/a/meta"), before, "read_state wrote");
    assert_eq!(state.ranges.len(), 2);
    assert_eq!(state.tables.get(&T), Some(&schema()));
    assert_eq!(state.attrs.get("x").map(String::as_str), Some("1"));
    let ids: Vec<u64> = a.all_ranges().iter().map(|r| r.id).collect();
    let mut from_log: Vec<u64> = state.ranges.keys().copied().collect();
    from_log.sort();
    let mut ids_sorted = ids.clone();
    ids_sorted.sort();
    assert_eq!(ids_sorted, from_log);
    assert!(read_state(&env.bfs(), "/servers/nobody/meta").is_err());
    a.close().expect("close");
}

/// Engine A holds ranges it split and a range moved in from B, with cells in stores and in
/// caches (acknowledged, only in its commit log). A crashes; B recovers A's ranges from A's meta
/// log and commit log and then holds every acknowledged cell exactly once. A second recovery
/// call is harmless, A's files are untouched, and B keeps everything across a reopen.
#[test]
fn recovery_of_a_crashed_engine_returns_every_acknowledged_cell_once() {
    let env = Env::new();
    let b = env.open("/servers/b");
    b.create_table(schema()).expect("create");
    let mut want: Vec<(String, u8, String)> = Vec::new();
    let write = |e: &Engine, rows: std::ops::Range<usize>, tag: &str, want: &mut Vec<_>| {
        let batch: Vec<Mutation> = rows
            .map(|i| {
                let row = format!("k{i:05}");
                let fam = 1 + (i % 2) as u8;
                let v = format!("{tag}{i}");
                want.push((row.clone(), fam, v.clone()));
                cell(&row, fam, &v)
            })
            .collect();
        for chunk in batch.chunks(500) {
            e.apply(T, chunk).expect("apply");
        }
    };
    write(&b, 0..4000, "b", &mut want);
    b.compact(Some(T), CompactionKind::Minor).expect("minor");
    b.split(T, b"k02000").expect("split");
    b.wait_for_maintenance();
    // A: its own engine on a FaultFs over the shared file system, so it can "die".
    let fault = FaultFs::new(env.fs.clone());
    let a = env.open_on(fault.clone(), "/servers/a");
    let rec = b.unload_range(T, None).expect("unload");
    a.load_range_record(&schema(), &rec).expect("adopt");
    // A writes into the moved-in range, splits it, flushes part, then more cells stay in caches.
    write(&a, 4000..6000, "a", &mut want);
    a.split(T, b"k03000").expect("split on a");
    a.compact(Some(T), CompactionKind::Minor)
        .expect("minor on a");
    write(&a, 6000..9000, "c", &mut want);
    // A row delete in the log only: it must reach both groups of the recovered range.
    a.apply(
        T,
        &[Mutation::delete(CellFlag::DeleteRow, "k02500", 0, "", None)],
    )
    .expect("delete row");
    want.retain(|c| c.0 != "k02500");
    // Overwrites of cells that are in stores.
    write(&a, 2100..2200, "d", &mut want);
    a.wait_for_maintenance();
    // The crash: nothing A does from now on reaches the disk.
    fault.add_rule(FaultRule::new(FaultOp::Any, FaultAction::Crash));
    let _ = a.close();
    drop(a);
    let a_files = env.files("/servers/a");
    let state = read_state(&env.bfs(), "/servers/a/meta").expect("read A's meta log");
    assert_eq!(state.ranges.len(), 2, "A held two ranges: {state:?}");
    let items: Vec<(TableSchema, RangeRecord)> = state
        .ranges
        .values()
        .map(|r| (state.tables[&r.table_id].clone(), r.clone()))
        .collect();
    let started = Instant::now();
    let ids = b.recover_ranges("/servers/a", &items).expect("recover");
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "recovered {} ranges ({} log cells written by A) in {secs:.3} s",
        ids.len(),
        5000 + 100 + 1
    );
    assert_eq!(ids.len(), 2);
    let check = |e: &Engine, extra: &[(String, u8, String)]| {
        let mut expected: Vec<(String, u8, String)> = want.clone();
        // A later write of the same cell hides the earlier (one version visible per timestamp;
        // timestamps differ, so both versions show): compare as multisets, newest first.
        expected.extend(extra.iter().cloned());
        expected.sort();
        let mut got = all_cells(e);
        got.sort();
        assert_eq!(got.len(), expected.len(), "cell count");
        assert_eq!(got, expected);
    };
    check(&b, &[]);
    // Again, with the same items: the same ids, no duplicates.
    let again = b
        .recover_ranges("/servers/a", &items)
        .expect("recover again");
    assert_eq!(again, ids);
    check(&b, &[]);
    assert_eq!(
        env.files("/servers/a"),
        a_files,
        "recovery changed A's files"
    );
    // B writes to a recovered range; everything survives B's reopen (its own log replay must
    // not skip the new cell, nor replay recovered ones twice).
    b.apply(T, &[cell("k08000", 1, "after")])
        .expect("apply after");
    b.close().expect("close");
    drop(b);
    let b = env.open("/servers/b");
    check(&b, &[("k08000".into(), 1, "after".into())]);
    assert_eq!(b.all_ranges().len(), 3);
    b.compact(Some(T), CompactionKind::Major).expect("major");
    b.collect_garbage().expect("gc");
    assert_eq!(env.files("/servers/a"), a_files, "B's GC changed A's files");
    b.close().expect("close");
}

/// A bigger dead log: how fast recovery replays (printed; run with `--nocapture`).
#[test]
fn recovery_replays_a_dead_log_of_100k_cells() {
    let env = Env::new();
    let fault = FaultFs::new(env.fs.clone());
    let a = env.open_on(fault.clone(), "/servers/a");
    a.create_table(schema()).expect("create");
    a.split(T, b"r050000").expect("split");
    const N: usize = 100_000;
    let batch: Vec<Mutation> = (0..N)
        .map(|i| {
            cell(
                &format!("r{i:06}"),
                1 + (i % 2) as u8,
                &format!("value-{i:08}"),
            )
        })
        .collect();
    for chunk in batch.chunks(5000) {
        a.apply(T, chunk).expect("apply");
    }
    fault.add_rule(FaultRule::new(FaultOp::Any, FaultAction::Crash));
    let _ = a.close();
    drop(a);
    let state = read_state(&env.bfs(), "/servers/a/meta").expect("read");
    let items: Vec<(TableSchema, RangeRecord)> = state
        .ranges
        .values()
        .map(|r| (state.tables[&r.table_id].clone(), r.clone()))
        .collect();
    let log_bytes: u64 = env
        .files("/servers/a/log")
        .values()
        .map(|v| v.len() as u64)
        .sum();
    let b = env.open("/servers/b");
    let started = Instant::now();
    b.recover_ranges("/servers/a", &items).expect("recover");
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "recovery: {N} cells, {log_bytes} log bytes in {secs:.3} s: {:.0} cells/s, {:.1} MB/s",
        N as f64 / secs,
        log_bytes as f64 / secs / 1e6
    );
    assert_eq!(all_cells(&b).len(), N);
    b.close().expect("close");
}

/// A split leaves both halves reading the parent's store; when one half moves to another
/// server before the halves were rewritten, two servers share that file. The exporter's
/// compactions, garbage collection and orphan removal at reopen must keep it, and so must the
/// adopter's (it is not under the adopter's root).
#[test]
fn a_parent_store_shared_by_halves_on_two_servers_is_never_deleted() {
    let env = Env::new();
    let fault = FaultFs::new(env.fs.clone());
    let a = env.open_on(fault.clone(), "/servers/a");
    a.create_table(schema()).expect("create");
    let batch: Vec<Mutation> = (0..100)
        .map(|i| cell(&format!("r{i:03}"), 1 + (i % 2) as u8, &format!("v{i}")))
        .collect();
    a.apply(T, &batch).expect("apply");
    a.compact(Some(T), CompactionKind::Minor).expect("minor");
    let parent = a.all_ranges()[0].id;
    // The halves (the next two range ids) cannot write their own stores yet: they keep
    // reading the parent's.
    let (lo, hi) = (parent + 1, parent + 2);
    for id in [lo, hi] {
        fault.add_rule(FaultRule::new(FaultOp::Create, FaultAction::Fail).path(format!("/r{id}/")));
    }
    a.split(T, b"r050").expect("split");
    a.wait_for_maintenance();
    let rec = a.unload_range(T, None).expect("unload");
    let shared = store_paths(&rec);
    assert!(
        !shared.is_empty() && shared.iter().all(|p| p.contains(&format!("/r{parent}/"))),
        "the upper half still reads the parent's stores: {shared:?}"
    );
    let b = env.open("/servers/b");
    b.load_range_record(&schema(), &rec).expect("load");
    fault.clear_rules();
    // The lower half stops sharing on A; the parent's file becomes garbage there, but B reads it.
    a.compact(Some(T), CompactionKind::Major)
        .expect("major on a");
    a.collect_garbage().expect("gc on a");
    for p in &shared {
        assert!(env.path(p).exists(), "{p} deleted by A's GC");
    }
    a.close().expect("close a");
    drop(a);
    let a = env.open("/servers/a");
    for p in &shared {
        assert!(env.path(p).exists(), "{p} deleted by A's orphan removal");
    }
    // B rewrites its half under its own root; A's file is not B's to delete.
    b.compact(Some(T), CompactionKind::Major)
        .expect("major on b");
    b.collect_garbage().expect("gc on b");
    for p in &shared {
        assert!(env.path(p).exists(), "{p} deleted by B");
    }
    assert_eq!(all_cells(&a).len(), 50);
    assert_eq!(all_cells(&b).len(), 50);
    a.close().expect("close a");
    b.close().expect("close b");
}

/// The recovering engine dies at the last step of a recovery (its meta-log record): nothing of
/// the recovery is visible, its half-written stores are orphans removed when it reopens, and
/// the master's retry then recovers every cell exactly once.
#[test]
fn a_recovery_interrupted_by_a_crash_can_be_retried() {
    let env = Env::new();
    let fa = FaultFs::new(env.fs.clone());
    let a = env.open_on(fa.clone(), "/servers/a");
    a.create_table(schema()).expect("create");
    let batch: Vec<Mutation> = (0..1000)
        .map(|i| cell(&format!("r{i:04}"), 1 + (i % 2) as u8, &format!("v{i}")))
        .collect();
    a.apply(T, &batch[..500]).expect("apply");
    a.compact(Some(T), CompactionKind::Minor).expect("minor");
    a.apply(T, &batch[500..]).expect("apply");
    fa.add_rule(FaultRule::new(FaultOp::Any, FaultAction::Crash));
    let _ = a.close();
    drop(a);
    let a_files = env.files("/servers/a");
    let state = read_state(&env.bfs(), "/servers/a/meta").expect("read");
    let items: Vec<(TableSchema, RangeRecord)> = state
        .ranges
        .values()
        .map(|r| (state.tables[&r.table_id].clone(), r.clone()))
        .collect();
    let fb = FaultFs::new(env.fs.clone());
    let b = env.open_on(fb.clone(), "/servers/b");
    fb.add_rule(FaultRule::new(FaultOp::Append, FaultAction::Crash).path("/servers/b/meta/"));
    let err = b
        .recover_ranges("/servers/a", &items)
        .expect_err("B dies while recording the ranges");
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(b.all_ranges().is_empty(), "nothing visible");
    let _ = b.close();
    drop(b);
    // B restarts; the stores it wrote for the recovery are orphans and go.
    let b = env.open("/servers/b");
    assert!(b.all_ranges().is_empty());
    assert!(
        env.files("/servers/b")
            .keys()
            .all(|p| !p.to_string_lossy().contains("/tables/")),
        "orphaned recovery stores left: {:?}",
        env.files("/servers/b").keys().collect::<Vec<_>>()
    );
    let ids = b.recover_ranges("/servers/a", &items).expect("retry");
    assert_eq!(ids.len(), 1);
    let got = all_cells(&b);
    assert_eq!(got.len(), 1000, "every cell exactly once");
    assert_eq!(env.files("/servers/a"), a_files, "A's files changed");
    b.close().expect("close");
}

/// The dead engine's last commit-log block is torn (it died while appending it; that batch was
/// never acknowledged): recovery skips it by the torn-tail rule and returns every acknowledged
/// cell.
#[test]
fn recovery_skips_a_torn_last_block_of_the_dead_log() {
    let env = Env::new();
    let fa = FaultFs::new(env.fs.clone());
    let a = env.open_on(fa.clone(), "/servers/a");
    a.create_table(schema()).expect("create");
    for b in 0..10 {
        let batch: Vec<Mutation> = (0..100)
            .map(|i| cell(&format!("r{b}-{i:03}"), 1, "acked"))
            .collect();
        a.apply(T, &batch).expect("apply");
    }
    fa.add_rule(
        FaultRule::new(FaultOp::Append, FaultAction::TearCrash { keep_bytes: 40 })
            .path("/servers/a/log/"),
    );
    let torn: Vec<Mutation> = (0..100)
        .map(|i| cell(&format!("t{i:03}"), 1, "never acked"))
        .collect();
    assert!(
        a.apply(T, &torn).is_err(),
        "the torn batch is not acknowledged"
    );
    let _ = a.close();
    drop(a);
    let state = read_state(&env.bfs(), "/servers/a/meta").expect("read");
    let items: Vec<(TableSchema, RangeRecord)> = state
        .ranges
        .values()
        .map(|r| (state.tables[&r.table_id].clone(), r.clone()))
        .collect();
    let b = env.open("/servers/b");
    b.recover_ranges("/servers/a", &items).expect("recover");
    let got = all_cells(&b);
    assert_eq!(got.len(), 1000);
    assert!(got.iter().all(|c| c.2 == "acked"));
    b.close().expect("close");
}

/// What the master's garbage collection of shared stores asks of engines: `store_use` names
/// the stores a range references and those still open (a scan over a replaced store), and
/// `release_exported` removes only exported stores no range here uses, then forgets them in
/// the meta log (also after a reopen).
#[test]
fn store_use_and_release_of_exported_stores() {
    let env = Env::new();
    let a = env.open("/servers/a");
    a.create_table(schema()).expect("create");
    let batch: Vec<Mutation> = (0..200)
        .map(|i| cell(&format!("r{i:03}"), 1 + (i % 2) as u8, &format!("v{i}")))
        .collect();
    a.apply(T, &batch).expect("apply");
    a.compact(Some(T), CompactionKind::Minor).expect("minor");
    a.split(T, b"r100").expect("split");
    a.wait_for_maintenance();
    let rec = a.unload_range(T, None).expect("unload");
    let moved = store_paths(&rec);
    assert!(!moved.is_empty());
    let used = a.store_use().expect("store use of a");
    assert_eq!(used.root, "/servers/a");
    for p in &moved {
        assert!(used.exported.contains(p), "{p} not listed as exported");
    }
    let b = env.open("/servers/b");
    b.load_range_record(&schema(), &rec).expect("load");
    let used_b = b.store_use().expect("store use of b");
    for p in &moved {
        assert!(used_b.in_use.contains(p), "{p}: B's range reads it");
    }
    // A scan on B holds the stores open across B's compaction that replaces them.
    let upper = ScanSpec {
        row_intervals: vec![RowInterval {
            start: Bound::Included(b"r100".to_vec()),
            end: Bound::Unbounded,
        }],
        ..ScanSpec::default()
    };
    let mut held = b.scan(T, &upper).expect("scan on b");
    b.compact(Some(T), CompactionKind::Major)
        .expect("major on b");
    b.collect_garbage().expect("gc on b");
    let used_b = b.store_use().expect("store use of b");
    for p in &moved {
        assert!(used_b.in_use.contains(p), "{p}: a scan on B still reads it");
    }
    let cells = held
        .collect_all()
        .expect("the scan reads the replaced stores");
    assert_eq!(cells.len(), 100);
    drop(held);
    let used_b = b.store_use().expect("store use of b");
    for p in &moved {
        assert!(
            !used_b.in_use.contains(p),
            "{p}: nothing on B reads it any more"
        );
    }
    // Unused everywhere: the exporter removes them when the master asks.
    let r = a.release_exported(&moved).expect("release");
    assert_eq!((r.removed, r.skipped), (moved.len() as u64, 0));
    for p in &moved {
        assert!(!env.path(p).exists(), "{p} still on disk after its release");
    }
    // A forgets them, also in its meta log; asking again passes them over.
    let used = a.store_use().expect("store use of a");
    for p in &moved {
        assert!(!used.exported.contains(p), "{p} still exported");
    }
    let again = a.release_exported(&moved).expect("release again");
    assert_eq!((again.removed, again.skipped), (0, moved.len() as u64));
    // Stores A's own range references are never released, nor paths outside its root.
    let own: Vec<String> = a.store_use().expect("use").in_use.into_iter().collect();
    assert!(!own.is_empty());
    let mut asked = own.clone();
    asked.push("/servers/b/tables/1/g1/r1/cs0".into());
    let r = a.release_exported(&asked).expect("release of used stores");
    assert_eq!((r.removed, r.skipped), (0, asked.len() as u64));
    for p in &own {
        assert!(
            env.path(p).exists(),
            "{p} removed though A's range reads it"
        );
    }
    a.close().expect("close a");
    drop(a);
    let state = read_state(&env.bfs(), "/servers/a/meta").expect("read state");
    for p in &moved {
        assert!(
            !state.exported.contains_key(p),
            "{p} exported again after reopen"
        );
    }
    assert_eq!(all_cells(&b).len(), 100);
    b.close().expect("close b");
}
