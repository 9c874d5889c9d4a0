//! Corruption tests of the engine's own files: the meta log (`<root>/meta/meta.N`) and the
//! commit log (`<root>/log/N`). Each file of a small real database is damaged in turn (bytes
//! flipped, cut at block boundaries and elsewhere, deleted) and the database reopened: it must
//! return exactly the data it held, or refuse with an error naming the damaged file. Less data
//! with success is the defect these tests exist for (issue 12, defects 1 and 2). When an open
//! fails, no cell store may have been removed.
//!
//! `HT_CORRUPTION_SEED` picks the sampled positions (a fixed seed by default, so CI repeats).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::schema::{AccessGroupSpec, FamilySpec};
use common::{Durability, TableSchema};
use dfs_broker::LocalFs;
use rangeserver::commitlog::CommitLogOptions;
use rangeserver::engine::{CompactionKind, Engine, EngineOptions, Mutation};
use rangeserver::scan::spec::ScanSpec;

const TABLE: u32 = 1;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

fn options() -> EngineOptions {
    EngineOptions {
        commit_log: CommitLogOptions {
            fragment_size_bytes: 8 << 10,
            compress: false,
            ..CommitLogOptions::default()
        },
        ..EngineOptions::default()
    }
}

fn open(rt: &tokio::runtime::Runtime, dir: &Path) -> rangeserver::Result<Engine> {
    let fs = Arc::new(LocalFs::new(dir).expect("local fs"));
    Engine::open(fs, "/ht", options(), rt.handle().clone())
}

fn write(e: &Engine, from: u32, to: u32) {
    for chunk in (from..to).collect::<Vec<_>>().chunks(20) {
        let muts: Vec<Mutation> = chunk
            .iter()
            .map(|i| {
                Mutation::insert(
                    format!("row{i:06}"),
                    1 + (i % 2) as u8,
                    "q",
                    format!("value-{i}-{}", "x".repeat((i % 40) as usize)),
                )
            })
            .collect();
        e.apply(TABLE, &muts).expect("apply");
    }
}

/// Every cell of every table, as comparable tuples, and the tables' names.
type Contents = (Vec<String>, Vec<(Vec<u8>, u8, Vec<u8>, i64, Vec<u8>)>);

fn contents(e: &Engine) -> rangeserver::Result<Contents> {
    let names = e.tables().into_iter().map(|t| t.name).collect();
    let mut cells = Vec::new();
    for t in e.tables() {
        for c in e.scan(t.id, &ScanSpec::default())?.collect_all()? {
            cells.push((
                c.key.row,
                c.key.family,
                c.key.qualifier,
                c.key.timestamp,
                c.value,
            ));
        }
    }
    Ok((names, cells))
}

/// A database with cell stores (a compaction, then a purge of the log), cells only in the
/// commit log over several fragments, written by two processes (opened, written, closed twice).
fn build(rt: &tokio::runtime::Runtime, dir: &Path) -> Contents {
    let e = open(rt, dir).expect("open");
    let mut schema = TableSchema::new(TABLE, "/damage");
    schema.durability = Durability::Flush;
    schema.access_groups = vec![AccessGroupSpec::new("g1"), AccessGroupSpec::new("g2")];
    schema.families = vec![FamilySpec::new(1, "a", "g1"), FamilySpec::new(2, "b", "g2")];
    e.create_table(schema).expect("create table");
    write(&e, 0, 400);
    e.compact(Some(TABLE), CompactionKind::Minor)
        .expect("compact");
    write(&e, 400, 700);
    e.close().expect("close");
    drop(e);
    let e = open(rt, dir).expect("reopen");
    write(&e, 700, 900);
    let want = contents(&e).expect("contents");
    e.close().expect("close");
    assert_eq!(want.1.len(), 900);
    want
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("readdir") {
        let e = e.expect("dir entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).expect("copy");
        }
    }
}

fn files_under(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(files_under(&e.path()));
            } else {
                out.insert(e.path());
            }
        }
    }
    out
}

enum Damage {
    Flip(u64),
    Cut(u64),
    Delete,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Flip(at) => write!(f, "flip of byte {at}"),
            Damage::Cut(at) => write!(f, "cut at {at}"),
            Damage::Delete => write!(f, "delete"),
        }
    }
}

/// Damages `rel` (a path under the database directory) in a copy of `db` and reopens it:
/// the same data, or an error naming the file; never less with success.
fn check(rt: &tokio::runtime::Runtime, db: &Path, rel: &str, damage: &Damage, want: &Contents) {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_dir(db, tmp.path());
    let path = tmp.path().join(rel);
    match *damage {
        Damage::Flip(at) => {
            let mut b = std::fs::read(&path).expect("read");
            b[at as usize] ^= 0x5A;
            std::fs::write(&path, b).expect("write");
        }
        Damage::Cut(at) => std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(at))
            .expect("truncate"),
        Damage::Delete => std::fs::remove_file(&path).expect("delete"),
    }
    let stores_before = files_under(&tmp.path().join("ht/tables"));
    // The name the engine gives the file: its path on the file system, from the root.
    let name = format!("/{rel}");
    let named_dir = name
        .rsplit_once('/')
        .map(|(d, _)| d.to_string())
        .expect("a dir");
    match open(rt, tmp.path()) {
        Ok(e) => {
            let got = contents(&e);
            let _ = e.close();
            match got {
                Ok(got) => assert!(
                    &got == want,
                    "{damage} of {rel}: opened with {} cells of {} and tables {:?}",
                    got.1.len(),
                    want.1.len(),
                    got.0
                ),
                // A scan may meet the damage (it names the file).
                Err(err) => assert!(
                    err.to_string().contains(&name),
                    "{damage} of {rel}: the scan failed without naming the file: {err}"
                ),
            }
        }
        Err(err) => {
            let msg = err.to_string();
            assert!(
                msg.contains(&name)
                    || (matches!(damage, Damage::Delete) && msg.contains(&named_dir)),
                "{damage} of {rel}: the error does not name the file: {msg}"
            );
            let stores_after = files_under(&tmp.path().join("ht/tables"));
            assert!(
                stores_before.is_subset(&stores_after),
                "{damage} of {rel}: a failed open removed cell stores: {:?}",
                stores_before.difference(&stores_after).collect::<Vec<_>>()
            );
        }
    }
}

fn seed() -> u64 {
    let s = std::env::var("HT_CORRUPTION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        // A fixed default keeps CI repeatable; set the variable to sample other positions.
        .unwrap_or(0x5EED_C0DE);
    eprintln!("HT_CORRUPTION_SEED={s}");
    s
}

/// The engine's files of one kind (`meta` or `log`), relative to the database directory.
fn engine_files(db: &Path, kind: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = std::fs::read_dir(db.join("ht").join(kind))
        .expect("readdir")
        .flatten()
        .map(|e| {
            (
                format!("ht/{kind}/{}", e.file_name().to_string_lossy()),
                e.metadata().expect("stat").len(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Offsets at which each commit-log block (and the fragment header) ends.
fn block_ends(path: &Path) -> Vec<u64> {
    let b = std::fs::read(path).expect("read");
    let mut ends = vec![];
    let mut off = 24usize;
    if b.len() >= 24 {
        ends.push(24);
    }
    while off + 40 <= b.len() {
        let stored = u32::from_le_bytes(b[off + 8..off + 12].try_into().expect("4")) as usize;
        off += 40 + stored;
        ends.push(off as u64);
    }
    ends
}

#[test]
fn a_damaged_meta_log_opens_with_everything_or_not_at_all() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    let want = build(&rt, db.path());
    let mut rng = Rng(seed());
    let files = engine_files(db.path(), "meta");
    assert!(!files.is_empty());
    for (rel, len) in files {
        check(&rt, db.path(), &rel, &Damage::Delete, &want);
        let mut at: BTreeSet<u64> = (0..16.min(len)).collect();
        at.extend((0..60).map(|_| rng.below(len)));
        for a in at {
            check(&rt, db.path(), &rel, &Damage::Flip(a), &want);
        }
        let mut cuts: BTreeSet<u64> = [0, 1, 15, 16, len - 1].into_iter().collect();
        cuts.extend((0..12).map(|_| rng.below(len)));
        for c in cuts {
            check(&rt, db.path(), &rel, &Damage::Cut(c), &want);
        }
    }
}

#[test]
fn a_damaged_commit_log_opens_with_everything_or_not_at_all() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    let want = build(&rt, db.path());
    let mut rng = Rng(seed());
    let files = engine_files(db.path(), "log");
    assert!(files.len() >= 3, "several fragments: {files:?}");
    for (rel, len) in files {
        check(&rt, db.path(), &rel, &Damage::Delete, &want);
        let mut at: BTreeSet<u64> = (0..24.min(len)).step_by(3).collect();
        at.extend((0..12).map(|_| rng.below(len)));
        for a in at {
            check(&rt, db.path(), &rel, &Damage::Flip(a), &want);
        }
        let mut cuts: BTreeSet<u64> = block_ends(&db.path().join(&rel)).into_iter().collect();
        cuts.extend([0, 1, 23]);
        cuts.extend((0..4).map(|_| rng.below(len)));
        cuts.retain(|&c| c < len);
        for c in cuts {
            check(&rt, db.path(), &rel, &Damage::Cut(c), &want);
        }
    }
}

/// Issue 12, defect 1: one flipped byte in the meta log opened an empty database, and the next
/// use garbage-collected the tables' files.
#[test]
fn damaged_meta_log_refuses_to_open_instead_of_opening_empty() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    build(&rt, db.path());
    let (rel, len) = engine_files(db.path(), "meta").pop().expect("a meta file");
    let stores = files_under(&db.path().join("ht/tables"));
    assert!(!stores.is_empty());
    for damage in [Damage::Flip(len / 2), Damage::Cut(8), Damage::Delete] {
        let tmp = tempfile::tempdir().expect("tempdir");
        copy_dir(db.path(), tmp.path());
        let path = tmp.path().join(&rel);
        match damage {
            Damage::Flip(at) => {
                let mut b = std::fs::read(&path).expect("read");
                b[at as usize] ^= 1;
                std::fs::write(&path, b).expect("write");
            }
            Damage::Cut(at) => std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(at))
                .expect("cut"),
            Damage::Delete => std::fs::remove_file(&path).expect("delete"),
        }
        let err = open(&rt, tmp.path())
            .err()
            .unwrap_or_else(|| panic!("{damage}: opened"));
        assert!(err.to_string().contains("/ht/meta"), "{damage}: {err}");
        // Opening again still refuses, and nothing was collected.
        assert!(open(&rt, tmp.path()).is_err(), "{damage}: second open");
        let left = files_under(&tmp.path().join("ht/tables"));
        assert_eq!(
            left.len(),
            stores.len(),
            "{damage}: cell stores were removed"
        );
    }
}

/// Issue 12, defect 2: a flipped byte in the last block of a fragment that is not the newest
/// was skipped as a torn tail (10,000 of 15,346 cells came back, without a word).
#[test]
fn damaged_last_block_of_an_older_fragment_is_an_error_not_a_torn_tail() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    build(&rt, db.path());
    let files = engine_files(db.path(), "log");
    let (rel, _) = &files[0];
    let ends = block_ends(&db.path().join(rel));
    let last_block = ends[ends.len() - 2];
    let path = db.path().join(rel);
    let mut b = std::fs::read(&path).expect("read");
    b[last_block as usize + 45] ^= 1;
    std::fs::write(&path, b).expect("write");
    let err = open(&rt, db.path()).expect_err("the damaged fragment must not open");
    assert!(err.to_string().contains(&format!("/{rel}")), "{err}");
    assert!(
        err.to_string().contains(&last_block.to_string()),
        "names the offset: {err}"
    );
}

/// Issue 12, defect 15: every open added a commit-log fragment, even one that wrote nothing.
#[test]
fn read_only_opens_add_no_commit_log_fragment() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    let want = build(&rt, db.path());
    let before = engine_files(db.path(), "log");
    let meta_before = engine_files(db.path(), "meta").len();
    for _ in 0..5 {
        let e = open(&rt, db.path()).expect("open");
        assert_eq!(contents(&e).expect("contents"), want);
        e.close().expect("close");
    }
    assert_eq!(engine_files(db.path(), "log"), before);
    assert_eq!(engine_files(db.path(), "meta").len(), meta_before);
}

/// Issue 12, defect 9: one damaged cell store made the whole database refuse to open, other
/// tables included. Now the damaged range answers with the damage, the rest works, nothing of
/// the damaged range is lost or deleted meanwhile (its unflushed cells stay in the commit log
/// through compactions and purges of the others), and once the file is restored it is all back.
#[test]
fn one_damaged_cell_store_leaves_the_other_tables_open() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    let want = build(&rt, db.path());
    let e = open(&rt, db.path()).expect("open");
    let mut other = TableSchema::new(2, "/intact");
    other.families = vec![FamilySpec::new(1, "a", "default")];
    e.create_table(other).expect("create");
    let cell = |i: u32| Mutation::insert(format!("r{i}"), 1, "q", format!("v{i}"));
    e.apply(2, &(0..50).map(cell).collect::<Vec<_>>())
        .expect("apply");
    e.close().expect("close");
    drop(e);
    let stores: Vec<PathBuf> = files_under(&db.path().join("ht/tables/1"))
        .into_iter()
        .collect();
    let victim = stores.first().expect("table 1 has a cell store").clone();
    let original = std::fs::read(&victim).expect("read");
    let mut damaged = original.clone();
    let n = damaged.len();
    damaged[n - 3] ^= 0xFF;
    std::fs::write(&victim, &damaged).expect("write");

    let e = open(&rt, db.path()).expect("the intact table opens");
    let victim_name = format!(
        "/{}",
        victim.strip_prefix(db.path()).expect("under db").display()
    );
    let err = e
        .scan(TABLE, &ScanSpec::default())
        .err()
        .expect("the damaged range answers with the damage");
    assert!(err.to_string().contains(&victim_name), "{err}");
    let err = e
        .apply(TABLE, &[cell(1)])
        .expect_err("no writes to a damaged range");
    assert!(err.to_string().contains(&victim_name), "{err}");
    let got = e
        .scan(2, &ScanSpec::default())
        .expect("scan")
        .collect_all()
        .expect("cells");
    assert_eq!(got.len(), 50);
    // The intact table goes on: writes, compactions and log purges.
    e.apply(2, &(50..100).map(cell).collect::<Vec<_>>())
        .expect("apply");
    e.compact(Some(2), CompactionKind::Major).expect("compact");
    e.collect_garbage().expect("gc");
    e.close().expect("close");
    drop(e);
    assert!(
        stores.iter().all(|p| p.exists()),
        "the damaged range's files were deleted"
    );

    std::fs::write(&victim, &original).expect("restore");
    let e = open(&rt, db.path()).expect("open once restored");
    let got = contents(&e).expect("contents");
    let table1: Vec<_> = got
        .1
        .iter()
        .filter(|c| c.0.starts_with(b"row"))
        .cloned()
        .collect();
    assert_eq!(table1, want.1, "everything of the damaged range is back");
    e.close().expect("close");
}

/// Issue 12, defect 6: a second process (another data directory, the same `--dfs file:///dir`)
/// opened the store's files while the first was writing them. The lock lives with the store.
#[test]
fn two_writers_on_one_store_through_the_same_file_system_are_refused() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    let first = open(&rt, db.path()).expect("open");
    // Another LocalFs on the same directory, as another process's `--dfs file:///...` would be.
    let err = open(&rt, db.path()).expect_err("a second writer must be refused");
    assert!(err.to_string().contains("/ht/LOCK"), "{err}");
    assert!(err.to_string().contains("in use"), "{err}");
    first.close().expect("close");
    let again = open(&rt, db.path()).expect("free once the first closed");
    again.close().expect("close");
}

/// A process that died right after creating its fragment (a torn header, never recorded) is
/// accepted by the next open, and that acceptance holds at every later open.
#[test]
fn a_fragment_with_a_torn_header_from_a_crash_stays_accepted() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let db = tempfile::tempdir().expect("tempdir");
    let want = build(&rt, db.path());
    let (last, _) = engine_files(db.path(), "log").pop().expect("a fragment");
    let n: u64 = last
        .rsplit('/')
        .next()
        .expect("name")
        .parse()
        .expect("number");
    let torn = db.path().join(format!("ht/log/{}", n + 1));
    std::fs::write(&torn, &b"HTLF\x01\x00\x00"[..]).expect("write a torn header");
    for round in 0..3u32 {
        let e = open(&rt, db.path()).unwrap_or_else(|err| panic!("open {round}: {err}"));
        let got = contents(&e).expect("contents");
        assert_eq!(
            got.1.len(),
            want.1.len() + round as usize * 10,
            "round {round}"
        );
        write(&e, 10_000 + round * 10, 10_010 + round * 10);
        e.close().expect("close");
    }
}
